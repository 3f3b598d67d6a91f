"""NVML meter against a fake ``pynvml``: counter and sampling paths, wrap/reset, errors.

The tests named after issue 30's findings (``test_finding_N_...``) failed on the meter
before that issue was fixed: see the commit that added them.
"""

from __future__ import annotations

import pickle
import sys
import time

import pytest

from ecopt.errors import MeterError, MeterUnavailableError
from ecopt.meters import get_meter
from ecopt.meters.base import ComponentEnergy, Measurement
from ecopt.meters.gpus import gpu_scope
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


def test_counter_reset_gives_a_flagged_lower_bound(fake_nvml, hw):
    nv = fake_nvml([hw.FakeGpu(energy_mj=9_000_000)])
    meter = NVMLMeter(counter_period_s=0.0)
    w = meter.start()
    nv.gpus[0].energy_mj = 2_500  # driver reloaded: counter restarted at zero
    c = meter.stop(w).components["gpu:0"]
    assert c.energy_j == pytest.approx(2.5)
    assert "reset" in c.note and "lower bound" in c.note and c.flags == ("lower-bound",)


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
        NVMLMeter(gpus=[2], counter_period_s=0)
    with pytest.raises(ValueError, match="unique"):
        NVMLMeter(gpus=[0, 0], counter_period_s=0)
    assert NVMLMeter(gpus=[1], counter_period_s=0).components == ["gpu:1"]


def test_cuda_visible_devices_is_honoured(fake_nvml, hw, monkeypatch):
    fake_nvml([hw.FakeGpu(uuid="GPU-a"), hw.FakeGpu(uuid="GPU-b")])
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    m = NVMLMeter(counter_period_s=0)
    assert m.components == ["gpu:0"]
    assert m.describe()["gpus"][0]["nvml_index"] == 1 and m.describe()["gpus"][0]["uuid"] == "GPU-b"
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-b,GPU-a")
    assert [g["nvml_index"] for g in NVMLMeter(counter_period_s=0).describe()["gpus"]] == [1, 0]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "-1")
    with pytest.raises(MeterUnavailableError, match="no usable GPU"):
        NVMLMeter(counter_period_s=0)
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
    meter = NVMLMeter(gpus=[1], sampling_period_s=0.2, counter_period_s=0)
    clone = pickle.loads(pickle.dumps(meter))
    assert clone.components == ["gpu:1"] and clone.sampling_period_s == 0.2
    w = clone.start()
    assert clone.stop(w).components["gpu:1"].energy_j >= 0


# -- issue 30: what the first real GPU run would have got wrong ---------------------------------

UA, UB, UC = ("GPU-aaaaaaaa-0000-0000-0000-000000000000", "GPU-bbbbbbbb-0000-0000-0000-000000000000",
              "GPU-cccccccc-0000-0000-0000-000000000000")


def test_finding_1_short_window_is_priced_at_instant_power_not_the_1s_average(fake_nvml, hw):
    # Idle at 60 W for the last hour; the load starts just before a 50 ms window. NVML's
    # nvmlDeviceGetPowerUsage (1 s average on Ampere+) still reads ~70 W; the instant field 300 W.
    nv = fake_nvml([hw.FakeGpu(power_mw=60_000)])
    meter = NVMLMeter(counter_period_s=10.0)  # the counter cannot resolve any window here
    nv.gpus[0].power_mw = 300_000
    w = meter.start()
    time.sleep(0.05)
    m = meter.stop(w)
    c = m.components["gpu:0"]
    assert c.source == "nvml-instant-power" and c.measured
    assert c.energy_j == pytest.approx(300.0 * m.duration_s, rel=0.01)
    assert c.flags == ("short-window",) and m.flags == ("short-window",)
    assert "shorter than the energy counter" in c.note and nv.gpus[0].calls["instant"] >= 1
    assert meter.describe()["gpus"][0]["power_reading"].startswith("instant")


def test_finding_1_without_the_instant_field_the_average_is_labelled(fake_nvml, hw):
    nv = fake_nvml([hw.FakeGpu(power_mw=60_000, instant_field=False)])
    meter = NVMLMeter(counter_period_s=10.0)
    nv.gpus[0].power_mw = 300_000
    w = meter.start()
    m = meter.stop(w)
    c = m.components["gpu:0"]
    assert c.source == "nvml-average-power"
    assert set(c.flags) == {"short-window", "average-power"}
    assert c.energy_j < 200.0 * m.duration_s  # mostly the idle second before: why it is flagged
    assert "averaged" in meter.describe()["gpus"][0]["power_reading"]


def test_finding_2_counter_period_is_measured_at_start_and_windows_under_10_periods_flagged(
        fake_nvml, hw):
    from ecopt.host import host_facts

    fake_nvml([hw.FakeGpu(uuid=UA, live=True, counter_period_s=0.02, power_mw=200_000)])
    meter = NVMLMeter()
    g = meter.describe()["gpus"][0]
    assert g["counter_period_s"] == pytest.approx(0.02, rel=0.25)
    assert g["counter_period"] == "measured at start-up"
    assert meter.update_period_s == g["counter_period_s"]
    facts = {d["uuid"]: d for d in host_facts()["gpu_devices"]}[UA]
    assert facts["counter_period_s"] == g["counter_period_s"] and facts["cuda_index"] == 0
    w = meter.start()
    time.sleep(0.06)  # ~3 periods: counter used, flagged
    m = meter.stop(w)
    c = m.components["gpu:0"]
    assert c.source == "nvml-energy-counter" and c.flags == ("short-window",)
    assert "fewer than 10" in c.note
    assert m.details["gpus"][0]["counter_period_s"] == g["counter_period_s"]  # in every record
    w = meter.start()
    time.sleep(0.3)  # ~15 periods: clean
    c = meter.stop(w).components["gpu:0"]
    assert c.source == "nvml-energy-counter" and c.flags == () and c.note is None


def test_a_counter_that_never_moves_gets_an_assumed_period_said_so(fake_nvml, hw):
    fake_nvml([hw.FakeGpu()])  # not live: the counter only moves when a test moves it
    g = NVMLMeter().describe()["gpus"][0]
    assert g["counter_period_s"] == 0.1 and g["counter_period"].startswith("assumed")


def test_measured_periods_travel_with_a_pickled_meter(fake_nvml, hw):
    nv = fake_nvml([hw.FakeGpu(live=True, counter_period_s=0.02)])
    meter = NVMLMeter()
    period = meter.update_period_s
    nv.gpus[0].live = False  # a second probe would now find nothing
    clone = pickle.loads(pickle.dumps(meter))
    assert clone.update_period_s == period
    assert clone.describe()["gpus"][0]["counter_period"] == "measured at start-up"


def test_finding_3_a_mig_slice_is_refused_with_the_reason(fake_nvml, hw, monkeypatch):
    mig = "MIG-11111111-2222-3333-4444-555555555555"
    fake_nvml([hw.FakeGpu(uuid=UA, mig_devices=[mig])])
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", mig)
    with pytest.raises(MeterUnavailableError, match="MIG.*no energy counter or power reading "
                                                    "per MIG slice"):
        NVMLMeter()
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    with pytest.raises(MeterUnavailableError, match="in MIG mode"):
        NVMLMeter()
    with pytest.warns(UserWarning, match="estimate"):
        auto = get_meter("auto", rapl_root="/nonexistent")
    assert "MIG" in " ".join(auto.describe()["why"]) and "nvml" not in auto.describe()["chosen"]


def test_finding_3_other_gpus_of_a_mig_host_are_metered(fake_nvml, hw, monkeypatch):
    fake_nvml([hw.FakeGpu(uuid=UA, mig_devices=["MIG-x"]), hw.FakeGpu(uuid=UB)])
    assert NVMLMeter(gpus=[1], counter_period_s=0).components == ["gpu:1"]
    with pytest.raises(MeterUnavailableError, match="MIG"):
        NVMLMeter(gpus=[0], counter_period_s=0)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    assert NVMLMeter(counter_period_s=0).describe()["gpus"][0]["uuid"] == UB


def test_finding_4_every_metered_device_is_synchronised_at_both_ends(fake_nvml, hw, monkeypatch):
    nv = fake_nvml([hw.FakeGpu(uuid=UA), hw.FakeGpu(uuid=UB), hw.FakeGpu(uuid=UC)])
    cuda = hw.FakeCuda(nv.gpus).install(monkeypatch)
    meter = NVMLMeter(gpus=[1, 2], counter_period_s=0)
    w = meter.start()
    assert sorted(d for d, _ in cuda.synced) == [1, 2]
    cuda.synced.clear()
    meter.stop(w)
    assert sorted(d for d, _ in cuda.synced) == [1, 2]  # not just the current device (0)


def test_finding_5_the_meter_reads_the_gpus_the_work_declares(fake_nvml, hw, monkeypatch):
    nv = fake_nvml([hw.FakeGpu(uuid=UA), hw.FakeGpu(uuid=UB), hw.FakeGpu(uuid=UC)])
    cuda = hw.FakeCuda(nv.gpus).install(monkeypatch)
    meter = NVMLMeter(counter_period_s=0)
    with gpu_scope("cuda:1"):
        w = meter.start()
        nv.gpus[1].energy_mj += 5_000
        m = meter.stop(w)
    assert list(m.components) == ["gpu:1"] and m.energy_j == pytest.approx(5.0)
    assert {d for d, _ in cuda.synced} == {1}
    with gpu_scope("cpu"):  # a CPU trial is charged no GPU
        assert meter.stop(meter.start()).components == {}
    assert list(meter.stop(meter.start()).components) == ["gpu:0", "gpu:1", "gpu:2"]
    with gpu_scope("cuda:7"), pytest.raises(MeterError, match="declared device"):
        meter.start()


def test_finding_5_a_workload_device_scopes_the_study_meter(fake_nvml, hw, monkeypatch, tmp_path):
    import ecopt
    from ecopt.workloads.device import trial_on_device

    nv = fake_nvml([hw.FakeGpu(uuid=UA), hw.FakeGpu(uuid=UB)])
    hw.FakeCuda(nv.gpus).install(monkeypatch)

    def objective(trial):
        with trial_on_device(trial, "cuda:1"):
            with trial.phase("train", samples=10):
                nv.gpus[0].energy_mj += 7_000  # another job on GPU 0
                nv.gpus[1].energy_mj += 2_000
        return {"y": 1.0}

    study = ecopt.Study(ecopt.SearchSpace({"x": ecopt.Float(0, 1)}), [ecopt.Objective("y")],
                        storage=tmp_path / "s", sampler="random",
                        meter=NVMLMeter(counter_period_s=0))
    study.optimize(objective, n_trials=1, show_progress=False)
    ph = study.records[0].phases["train"]
    assert list(ph.measurement.components) == ["gpu:1"] and ph.energy_j == pytest.approx(2.0)
    study.close()


def test_finding_6_cuda_index_is_matched_to_nvml_by_uuid(fake_nvml, hw, monkeypatch):
    from ecopt.host import host_facts

    # NVML lists the slow GPU first; CUDA numbers the fast one 0 (fastest first).
    nv = fake_nvml([hw.FakeGpu(uuid=UA, name="NVIDIA A10", speed=1.0),
                    hw.FakeGpu(uuid=UB, name="NVIDIA H100 80GB HBM3", speed=3.0)])
    hw.FakeCuda(nv.gpus).install(monkeypatch)
    meter = NVMLMeter(gpus=[0], counter_period_s=0)
    g = meter.describe()["gpus"][0]
    assert (g["uuid"], g["nvml_index"], g["mapped_by"]) == (UB, 1, "torch-uuid")
    assert g["torch_uuid"] == UB[4:]
    w = meter.start()
    nv.gpus[1].energy_mj += 3_000
    assert meter.stop(w).energy_j == pytest.approx(3.0)
    facts = {d["uuid"]: d for d in host_facts()["gpu_devices"]}
    assert facts[UB]["cuda_index"] == 0 and facts[UB]["mapped_by"] == "torch-uuid"


def test_finding_6_without_cuda_the_order_must_be_knowable(fake_nvml, hw, monkeypatch):
    # NVML's index order is not PCI order either: GPU 0 sits on the higher bus.
    fake_nvml([hw.FakeGpu(uuid=UA, name="NVIDIA A10", pci_bus_id="00000000:81:00.0"),
               hw.FakeGpu(uuid=UB, name="NVIDIA H100", pci_bus_id="00000000:17:00.0")])
    with pytest.raises(MeterError, match="CUDA_DEVICE_ORDER=PCI_BUS_ID"):
        NVMLMeter(counter_period_s=0)
    monkeypatch.setenv("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
    assert [g["uuid"] for g in NVMLMeter(counter_period_s=0).describe()["gpus"]] == [UB, UA]
    monkeypatch.delenv("CUDA_DEVICE_ORDER")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", UA[:12])  # a UUID prefix, as CUDA accepts
    g = NVMLMeter(counter_period_s=0).describe()["gpus"][0]
    assert g["uuid"] == UA and "UUID" in g["mapped_by"]


def test_finding_7_duration_includes_the_wait_for_queued_gpu_work(fake_nvml, hw, monkeypatch):
    nv = fake_nvml([hw.FakeGpu(uuid=UA)])
    cuda = hw.FakeCuda(nv.gpus).install(monkeypatch)
    for meter in (NVMLMeter(counter_period_s=0), get_meter("estimate")):
        cuda.queue(0, 0.2)  # work queued before the window belongs to the window before
        w = meter.start()
        assert meter.stop(w).duration_s < 0.1
        w = meter.start()
        cuda.queue(0, 0.2)  # queued inside the window: it ends when the GPU is done
        assert meter.stop(w).duration_s >= 0.2


def test_flags_survive_records_and_merged_windows():
    from ecopt.trial import merge_measurements

    a = Measurement(0.05, {"gpu:0": ComponentEnergy(1.0, "nvml-instant-power", True, "short",
                                                    ("short-window",))}, "nvml")
    b = Measurement(2.0, {"gpu:0": ComponentEnergy(9.0, "nvml-energy-counter", True)}, "nvml")
    assert Measurement.from_dict(a.to_dict()) == a
    merged = merge_measurements(b, a)
    assert merged.components["gpu:0"].flags == ("short-window",) and merged.flags == (
        "short-window",)
    assert merged.energy_j == 10.0 and "flags" not in b.to_dict()["components"]["gpu:0"]


def test_sync_never_creates_a_cuda_context_on_an_unused_gpu(fake_nvml, hw, monkeypatch):
    # Metering every visible GPU must not make this process allocate a context on each.
    nv = fake_nvml([hw.FakeGpu(uuid=UA), hw.FakeGpu(uuid=UB), hw.FakeGpu(uuid=UC)])
    cuda = hw.FakeCuda(nv.gpus, in_use={0}).install(monkeypatch)
    meter = NVMLMeter(counter_period_s=0)
    meter.stop(meter.start())
    assert cuda.contexts_created == [] and {d for d, _ in cuda.synced} == {0}


def test_a_composite_meter_waits_for_every_parts_devices(fake_nvml, hw, monkeypatch):
    from ecopt.meters.auto import CompositeMeter

    nv = fake_nvml([hw.FakeGpu(uuid=UA), hw.FakeGpu(uuid=UB)])
    cuda = hw.FakeCuda(nv.gpus).install(monkeypatch)
    both = CompositeMeter([NVMLMeter(gpus=[1], counter_period_s=0), get_meter("estimate")])
    w = both.start()
    cuda.queue(1, 0.2)
    assert both.stop(w).duration_s >= 0.2


def test_a_tick_inside_a_sub_period_window_is_not_charged_a_whole_period(fake_nvml, hw):
    """Seen on an H200 (gpu_check, 2026-12-04): 10-60 ms windows at a 100 ms period read
    +60% to +380% whenever a counter tick fell inside them (the meter took the larger of the
    counter's jump, a whole period's energy, and instant power x duration)."""
    nv = fake_nvml([hw.FakeGpu(power_mw=700_000, power_limit_mw=700_000, max_limit_mw=700_000)])
    meter = NVMLMeter(counter_period_s=0.1)
    w = meter.start()
    time.sleep(0.02)
    nv.gpus[0].energy_mj += 70_000  # one tick: 700 W x 0.1 s
    m = meter.stop(w)
    c = m.components["gpu:0"]
    assert c.source == "nvml-instant-power"
    assert c.energy_j == pytest.approx(700.0 * m.duration_s, rel=1e-6) and c.energy_j < 70


def test_a_trial_figure_from_a_window_under_ten_counter_periods_is_kept_off_the_front(fake_nvml, hw):
    # issue 28 item 1: the GPU meter's short-window flag and the trial's own check are one
    # mechanism; min_window_s is 10 counter periods.
    import ecopt

    fake_nvml([hw.FakeGpu(power_mw=300_000)])
    meter = NVMLMeter(counter_period_s=0.1)
    assert meter.min_window_s() == pytest.approx(1.0)

    def obj(trial):
        with trial.phase("inference", samples=100):
            time.sleep(0.05)
        with pytest.warns(RuntimeWarning, match="kept off the front"):
            spj = trial.samples_per_joule("inference")
        return {"a": 1.0, "spj": spj}

    st = ecopt.Study(ecopt.SearchSpace({"x": ecopt.Float(0, 1)}),
                     [ecopt.Objective("a"), ecopt.Objective("spj")], sampler="random",
                     meter=meter)
    st.optimize(obj, n_trials=1)
    r = st.records[0]
    assert r.unreliable == ("inference",) and st.best_trials() == []
    assert r.phases["inference"].measurement.details["min_window_s"] == pytest.approx(1.0)
