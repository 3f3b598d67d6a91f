"""Fixtures for the experiment scripts' tests: import a script in experiments/ by name."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

EXPERIMENTS = Path(__file__).resolve().parents[2] / "experiments"


def load_script(name: str) -> ModuleType:
    """Import ``experiments/<name>.py`` as a module (once per session)."""
    key = f"_ecopt_experiment_{name}"
    if key in sys.modules:
        return sys.modules[key]
    if str(EXPERIMENTS) not in sys.path:
        sys.path.insert(0, str(EXPERIMENTS))
    spec = importlib.util.spec_from_file_location(key, EXPERIMENTS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[key] = mod
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture
def script():
    """``script("gemma_batch")`` -> the imported module."""
    return load_script


@pytest.fixture
def fake_nvml_gpus(monkeypatch):
    """A fake ``pynvml`` with one GPU (ecopt.meters._fake_nvml), for meter-dependent parts."""
    from ecopt.meters._fake_nvml import FakeGpu, make_fake_pynvml

    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    mod = make_fake_pynvml([FakeGpu()])
    monkeypatch.setitem(sys.modules, "pynvml", mod)
    return mod
