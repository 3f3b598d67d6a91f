"""NVML meter against a fake ``pynvml``: counter and sampling paths, wrap/reset, errors."""

from __future__ import annotations

import pickle
import sys
import time

import pytest

from ecopt.errors import MeterError, MeterUnavailableError
from ecopt.meters import get_meter
from ecopt.meters.nvml import NVMLMeter, visible_gpu_selectors


def test_counter_path_reports_the_counter_difference(fake_nvml, hw):
    nv = fake_nvml([hw.FakeGpu(), hw.FakeGpu(uuid="GPU-1", energy_mj=5_000)])
    meter = NVMLMeter(counter_period_s=0.0)
    assert meter.components == ["gpu:0", "gpu:1"]
    w = meter.start()
    nv.gpus[0].energy_mj += 12_345  # 12.345 J
    nv.gpus[1].energy_mj += 1_000
    m = meter.stop(w)
    assert m.components["gpu:0"].energy_j == pytest.approx(12.345)
    assert m.components["gpu:1"].energy_j == pytest.approx(1.0)
    assert all(c.source == "nvml-energy-counter" and c.measured for c in m.components.values())
    assert m.measured and m.meter == "nvml"
    assert [g["method"] for g in meter.describe()["gpus"]] == ["energy-counter"] * 2


def test_short_window_is_flagged_not_silent_zero(fake_nvml, hw):
    nv = fake_nvml([hw.FakeGpu(power_mw=200_000)])
    meter = NVMLMeter(counter_period_s=10.0)
    w = meter.start()
    time.sleep(0.01)
    m = meter.stop(w)  # the counter did not move
    c = m.components["gpu:0"]
    assert c.source == "nvml-instant-power" and c.measured
    assert c.energy_j == pytest.approx(200.0 * m.duration_s, rel=1e-6)
    assert c.energy_j > 0 and "shorter than the energy counter" in c.note
    assert nv.gpus[0].calls["power"] == 1  # read once, at stop


def test_counter_reset_gives_a_flagged_lower_bound(fake_nvml, hw):
    nv = fake_nvml([hw.FakeGpu(energy_mj=9_000_000)])
    meter = NVMLMeter(counter_period_s=0.0)
    w = meter.start()
    nv.gpus[0].energy_mj = 2_500  # driver reloaded: counter restarted at zero
    c = meter.stop(w).components["gpu:0"]
    assert c.energy_j == pytest.approx(2.5)
    assert "reset" in c.note and "lower bound" in c.note


def test_counter_wrap_around_64_bits(fake_nvml, hw):
    nv = fake_nvml([hw.FakeGpu(energy_mj=(1 << 64) - 1_000)])
    meter = NVMLMeter(counter_period_s=0.0)
    w = meter.start()
    nv.gpus[0].energy_mj = 3_000
    c = meter.stop(w).components["gpu:0"]
    assert c.energy_j == pytest.approx(4.0)
    assert "wrapped" in c.note


def test_sampling_path_integrates_power(fake_nvml, hw):
    fake_nvml([hw.FakeGpu(energy_mj=None, power_mw=100_000)])  # pre-Volta: no counter
    meter = NVMLMeter(sampling_period_s=0.01)
    try:
        w = meter.start()
        time.sleep(0.15)
        m = meter.stop(w)
    finally:
        meter.close()
    c = m.components["gpu:0"]
    assert c.source == "nvml-power-sampling" and c.measured
    # Constant 100 W: the trapezoid is exact over the sampled span, which brackets the window.
    assert c.energy_j == pytest.approx(100.0 * m.duration_s, rel=0.05)
    n_samples = int(c.note.split("over ")[1].split()[0])
    assert n_samples >= 3 and "period 0.01 s" in c.note
    assert meter.describe()["sampling_period_s"] == 0.01
    assert meter.describe()["gpus"][0]["method"] == "power-sampling"


def test_sampling_forced_and_counter_forced(fake_nvml, hw):
    fake_nvml([hw.FakeGpu(energy_mj=None)])
    with pytest.raises(MeterError, match="no NVML energy counter"):
        NVMLMeter(mode="counter")
    fake_nvml([hw.FakeGpu()])
    m = NVMLMeter(mode="sampling", sampling_period_s=0.05)
    assert m.describe()["gpus"][0]["method"] == "power-sampling"
    m.close()
    with pytest.raises(ValueError, match="mode must be"):
        NVMLMeter(mode="fast")
    with pytest.raises(ValueError, match="sampling_period_s > 0"):
        NVMLMeter(sampling_period_s=0)


def test_gpu_index_out_of_range(fake_nvml, hw):
    fake_nvml([hw.FakeGpu(), hw.FakeGpu(uuid="GPU-1")])
    with pytest.raises(ValueError, match=r"GPU index must be in \[0, 1\].*got 2"):
        NVMLMeter(gpus=[2])
    with pytest.raises(ValueError, match="unique"):
        NVMLMeter(gpus=[0, 0])
    assert NVMLMeter(gpus=[1]).components == ["gpu:1"]


def test_cuda_visible_devices_is_honoured(fake_nvml, hw, monkeypatch):
    fake_nvml([hw.FakeGpu(uuid="GPU-a"), hw.FakeGpu(uuid="GPU-b", name="B")])
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    m = NVMLMeter()
    assert m.components == ["gpu:0"]
    assert m.describe()["gpus"][0]["nvml_index"] == 1 and m.describe()["gpus"][0]["name"] == "B"
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-b,GPU-a")
    assert [g["nvml_index"] for g in NVMLMeter().describe()["gpus"]] == [1, 0]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "-1")
    with pytest.raises(MeterUnavailableError, match="no usable GPU"):
        NVMLMeter()
    assert visible_gpu_selectors("0, 2,-1,3") == ["0", "2"]
    assert visible_gpu_selectors("") == []


def test_nvml_missing_or_no_driver(fake_nvml, hw, monkeypatch):
    fake_nvml([hw.FakeGpu()], init_error=9)
    with pytest.raises(MeterUnavailableError, match="no NVIDIA driver.*meter='estimate'"):
        NVMLMeter()
    assert not NVMLMeter.is_available()
    monkeypatch.setitem(sys.modules, "pynvml", None)  # not installed
    with pytest.raises(MeterUnavailableError, match=r"pip install 'ecopt\[gpu\]'"):
        get_meter("nvml")
    fake_nvml([])
    with pytest.raises(MeterUnavailableError, match="no usable GPU"):
        NVMLMeter()


def test_real_pynvml_without_driver_is_a_clear_error():
    # nvidia-ml-py is installed here but there is no driver: the real library path.
    pytest.importorskip("pynvml")
    if NVMLMeter.is_available():  # pragma: no cover - a GPU machine
        pytest.skip("this machine has a working NVML")
    with pytest.raises(MeterUnavailableError, match="NVML could not start"):
        NVMLMeter()


def test_errors_mid_run_raise_meter_error(fake_nvml, hw):
    nv = fake_nvml([hw.FakeGpu()])
    meter = NVMLMeter(counter_period_s=0.0)
    w = meter.start()
    nv.gpus[0].lost = True
    with pytest.raises(MeterError, match="GPU is lost"):
        meter.stop(w)
    nv.gpus[0].lost = False
    # Sampling thread failing is reported at the window's stop.
    nv = fake_nvml([hw.FakeGpu(energy_mj=None)])
    meter = NVMLMeter(sampling_period_s=0.005)
    try:
        w = meter.start()
        nv.gpus[0].lost = True
        time.sleep(0.05)
        with pytest.raises(MeterError, match="sampling failed|GPU power"):
            meter.stop(w)
    finally:
        meter.close()


def test_pickles_settings_and_rebuilds(fake_nvml, hw):
    fake_nvml([hw.FakeGpu(), hw.FakeGpu(uuid="GPU-1")])
    meter = NVMLMeter(gpus=[1], sampling_period_s=0.2)
    clone = pickle.loads(pickle.dumps(meter))
    assert clone.components == ["gpu:1"] and clone.sampling_period_s == 0.2
    w = clone.start()
    assert clone.stop(w).components["gpu:1"].energy_j >= 0
