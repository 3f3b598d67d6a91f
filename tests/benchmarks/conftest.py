"""Benchmark tests import ``benchmarks`` from the repository root and a small Zeus trace writer."""

from __future__ import annotations

import sys
from pathlib import Path

_HERE = Path(__file__).resolve().parent
for p in (str(_HERE.parent.parent), str(_HERE)):
    if p not in sys.path:
        sys.path.insert(0, p)
