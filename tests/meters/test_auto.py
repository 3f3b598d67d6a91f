"""``meter="auto"``: NVML + RAPL where available, documented fallbacks with warnings."""

from __future__ import annotations

import pytest

import ecopt
from ecopt.meters import METER_NAMES, EstimateMeter, get_meter
from ecopt.meters.auto import MeterFallbackWarning, build_auto


def test_this_machine_ends_on_the_estimate(tmp_path):
    # No NVML driver and no powercap here (checked, not assumed).
    from ecopt.meters.nvml import NVMLMeter
    from ecopt.meters.rapl import RaplMeter

    if NVMLMeter.is_available() or RaplMeter.is_available():  # pragma: no cover
        pytest.skip("this machine can measure")
    with pytest.warns(MeterFallbackWarning, match="ESTIMATED"):
        m = get_meter("auto")
    d = m.describe()
    assert m.name == "estimate" and d["auto"] is True and d["measured"] is False
    assert d["chosen"] == ["estimate"]
    why = " ".join(d["why"])
    assert "nvml:" in why and "rapl:" in why and "codecarbon" in why
    w = m.start()
    meas = m.stop(w)
    assert meas.meter == "estimate" and not meas.measured
    assert "why" not in meas.details  # the reasons live in study.json, not in every phase


def test_rapl_only_machine(powercap, hw):
    m = build_auto(rapl_root=str(powercap), warn=False)
    assert m.name == "rapl" and m.describe()["measured"] is True
    w = m.start()
    hw.set_uj(powercap, "intel-rapl:0", hw.get_uj(powercap, "intel-rapl:0") + 2_000_000)
    meas = m.stop(w)
    m.close()
    assert meas.components["cpu:package-0"].energy_j == pytest.approx(2.0) and meas.measured


def test_gpu_and_rapl_are_combined(fake_nvml, hw, powercap):
    nv = fake_nvml([hw.FakeGpu()])
    m = build_auto(rapl_root=str(powercap), warn=False)
    assert m.name == "nvml+rapl" and m.describe()["chosen"] == ["nvml", "rapl"]
    w = m.start()
    nv.gpus[0].energy_mj += 50_000
    hw.set_uj(powercap, "intel-rapl:0", hw.get_uj(powercap, "intel-rapl:0") + 3_000_000)
    import time

    time.sleep(0.11)  # past the assumed counter update period
    meas = m.stop(w)
    m.close()
    assert set(meas.components) == {"gpu:0", "cpu:package-0", "dram:0"}
    assert meas.components["gpu:0"].energy_j == pytest.approx(50.0)
    assert meas.components["cpu:package-0"].energy_j == pytest.approx(3.0)
    assert meas.measured and meas.meter == "nvml+rapl"


def test_gpu_without_rapl_estimates_the_host_and_warns(fake_nvml, hw, tmp_path):
    fake_nvml([hw.FakeGpu()])
    with pytest.warns(MeterFallbackWarning, match="CPU/RAM energy is estimated"):
        m = build_auto(rapl_root=str(tmp_path / "none"))
    assert m.name == "nvml+estimate"
    meas = m.stop(m.start())
    m.close()
    assert meas.components["gpu:0"].measured and not meas.components["cpu"].measured
    assert not meas.measured  # mixed: the total contains an estimate


def test_nvml_error_at_probe_falls_back(fake_nvml, hw, tmp_path):
    fake_nvml([hw.FakeGpu()], init_error=9)
    with pytest.warns(MeterFallbackWarning):
        m = build_auto(rapl_root=str(tmp_path / "none"))
    assert m.name == "estimate"
    assert any("Driver Not Loaded" in w for w in m.describe()["why"])


def test_unknown_meter_name_is_a_value_error():
    assert {"auto", "nvml", "rapl", "codecarbon", "estimate"} <= set(METER_NAMES)
    with pytest.raises(ValueError, match="unknown meter 'joulemeter'"):
        get_meter("joulemeter")
    space = ecopt.SearchSpace({"x": ecopt.Float(0, 1)})
    with pytest.raises(ValueError, match="unknown meter"):
        ecopt.Study(space, [ecopt.Objective("a", "max"), ecopt.Objective("b", "max")],
                    sampler="random", meter="joulemeter")


def test_composite_reports_which_part_failed(fake_nvml, hw, powercap):
    from ecopt.errors import MeterError
    from ecopt.meters.auto import CompositeMeter

    nv = fake_nvml([hw.FakeGpu()])
    m = CompositeMeter([get_meter("nvml", counter_period_s=0.0), get_meter("rapl", root=powercap)])
    w = m.start()
    nv.gpus[0].lost = True
    with pytest.raises(MeterError, match="nvml: NVML failed.*GPU is lost"):
        m.stop(w)
    m.close()
    with pytest.raises(ValueError, match="at least one part"):
        CompositeMeter([])


VENDOR = '''
"""A third-party vendor meter: one file, one entry point."""
from ecopt.meters import ComponentEnergy, Meter


class AcmeNpuMeter(Meter):
    name = "acme-npu"
    auto_priority = 1000  # above every built-in GPU meter
    auto_covers = frozenset({"gpu"})
    joules = 0.0

    @classmethod
    def is_available(cls, **options):
        return True

    def _start(self):
        return AcmeNpuMeter.joules

    def _stop(self, state, duration_s):
        return {"gpu:0": ComponentEnergy(AcmeNpuMeter.joules - state, "acme-npu-counter", True)}

    def describe(self):
        return {"meter": self.name, "measured": True, "sources": {"gpu:0": "acme-npu-counter"}}
'''


def test_a_meter_from_an_entry_point_takes_part_in_auto(tmp_path, monkeypatch, capsys):
    # A real installed distribution (its dist-info with entry_points.txt) on sys.path.
    (tmp_path / "acme_npu.py").write_text(VENDOR)
    info = tmp_path / "acme_npu-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: acme-npu\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[ecopt.meters]\nacme-npu = acme_npu:AcmeNpuMeter\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    from ecopt import registry
    from ecopt.cli import main

    assert "acme-npu" in registry.names("meters")
    m = build_auto(rapl_root=str(tmp_path / "none"), warn=False)
    assert m.describe()["chosen"] == ["acme-npu", "estimate"]  # nvml/amd skipped: gpu is taken
    assert any(w.startswith("nvml: not used: gpu already measured by acme-npu")
               for w in m.describe()["why"])
    import acme_npu

    w = m.start()
    acme_npu.AcmeNpuMeter.joules += 7.0
    meas = m.stop(w)
    m.close()
    assert meas.components["gpu:0"].energy_j == pytest.approx(7.0)
    assert meas.components["gpu:0"].source == "acme-npu-counter"
    assert main(["meters"]) == 0
    out = capsys.readouterr().out
    assert "acme-npu" in out and "acme-npu-counter" in out


def test_a_registered_meter_that_is_unavailable_is_skipped_with_its_reason(tmp_path, monkeypatch):
    from ecopt import registry

    class Absent(EstimateMeter):
        name = "absent"
        auto_priority = 999
        auto_covers = frozenset({"cpu"})

        @classmethod
        def probe(cls, **options):
            return False, "no Absent device on this bus"

    monkeypatch.setitem(registry._ADDED["meters"], "absent", Absent)  # undone after the test
    m = build_auto(rapl_root=str(tmp_path / "none"), warn=False)
    assert m.name == "estimate" and "absent: no Absent device on this bus" in m.describe()["why"]
