"""Fixtures for the experiment scripts' tests: import a script in experiments/ by name."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

EXPERIMENTS = Path(__file__).resolve().parents[2] / "experiments"

if str(EXPERIMENTS) not in sys.path:
    sys.path.insert(0, str(EXPERIMENTS))

from _common import load_script  # noqa: E402  (experiments/_common.py)


@pytest.fixture
def script():
    """``script("gemma_batch")`` -> the imported module."""
    return load_script


@pytest.fixture
def fake_nvml_gpus(monkeypatch):
    """A fake ``pynvml`` with one GPU (tests/fake_pynvml.py), for meter-dependent parts."""
    from fake_pynvml import FakeGpu, make_fake_pynvml

    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    mod = make_fake_pynvml([FakeGpu()])
    monkeypatch.setitem(sys.modules, "pynvml", mod)
    return mod
