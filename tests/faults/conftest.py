"""Make the helpers of this folder importable (tests run with --import-mode=importlib)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

_here = str(Path(__file__).parent)
if _here not in sys.path:
    sys.path.insert(0, _here)


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    return tmp_path / "study"
