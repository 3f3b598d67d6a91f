"""scripts/gpu_check.py's plumbing against the fake pynvml on CPU (no GPU here)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "gpu_check.py"


def _load():
    spec = importlib.util.spec_from_file_location("gpu_check", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_gpu_check_runs_end_to_end_on_fake_nvml(fake_nvml, hw, tmp_path, capsys):
    pytest.importorskip("torch")
    fake_nvml([hw.FakeGpu(name="Fake H100", power_mw=300_000)])
    out = tmp_path / "check.md"
    rc = _load().main(["--device", "cpu", "--allow-no-cuda", "--seconds", "0.05", "--idle-s",
                       "0.05", "--samples", "256", "--batch-sizes", "32,128",
                       "--sampling-period-s", "0.01", "--matrix-n", "64", "--out", str(out)])
    assert rc == 0
    text = out.read_text()
    assert "Fake H100" in text and "sampling / counter ratio:" in text
    # The fake counter never moves, so each window falls back to instant power x duration,
    # which the report labels; the sampled integral of a constant 300 W agrees with it.
    assert "nvml-instant-power" in text
    ratio = float(text.split("sampling / counter ratio: ")[1].split()[0])
    assert ratio == pytest.approx(1.0, rel=0.25)
    assert "| 32 | 256 |" in text and "| 128 | 256 |" in text


def test_gpu_check_refuses_cpu_without_flag(fake_nvml, hw, capsys):
    pytest.importorskip("torch")
    fake_nvml([hw.FakeGpu()])
    assert _load().main(["--device", "cpu"]) == 2
