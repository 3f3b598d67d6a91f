"""Make this folder's helper module importable (tests run with --import-mode=importlib)."""

from __future__ import annotations

import sys
from pathlib import Path

_here = str(Path(__file__).parent)
if _here not in sys.path:
    sys.path.insert(0, _here)
