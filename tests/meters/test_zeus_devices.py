"""Meters on Zeus's device layer, with fakes at the lowest layer: amdsmi, zeusd, Apple's counters.

Zeus itself runs for real (its AMD manager, its zeusd client over a real Unix
socket, its Apple reader); only what sits under it is faked.
"""

from __future__ import annotations

import time

import pytest

from ecopt.errors import MeterUnavailableError
from ecopt.meters import get_meter
from ecopt.meters.auto import build_auto

pytest.importorskip("zeus.device")


def test_amd_counter_window_and_hip_order(fake_amd):
    from fake_amdsmi import FakeAmdGpu

    # amd-smi lists by PCI address; HIP (torch's cuda:N) numbers them the other way round.
    amd = fake_amd([FakeAmdGpu(name="MI300X-a", hip_id=1, power_w=100),
                    FakeAmdGpu(name="MI300X-b", hip_id=0, power_w=400)])
    m = get_meter("amd", counter_period_s=0.0)
    assert m.components == ["gpu:0", "gpu:1"]
    w = m.start()
    time.sleep(0.2)
    meas = m.stop(w)
    m.close()
    g0, g1 = meas.components["gpu:0"], meas.components["gpu:1"]
    assert g0.source == "amd-energy-counter" and g0.measured
    # gpu:0 is HIP 0, the 400 W board (amd-smi's second): energy ~ power x duration.
    assert g0.energy_j == pytest.approx(400 * meas.duration_s, rel=0.1)
    assert g1.energy_j == pytest.approx(100 * meas.duration_s, rel=0.1)
    assert amd.gpus[1].calls["energy"] > 0
    from ecopt.host import host_facts

    facts = {d["uuid"]: d for d in host_facts()["gpu_devices"]}
    assert facts["amd-hip0"]["name"] == "MI300X-b" and facts["amd-hip0"]["counter_period_s"] == 0


def test_amd_sub_period_window_is_priced_at_instant_power(fake_amd):
    from fake_amdsmi import FakeAmdGpu

    fake_amd([FakeAmdGpu(power_w=250, counter_period_s=0.05)])
    m = get_meter("amd")
    assert m.describe()["gpus"][0]["counter_period_s"] == pytest.approx(0.05, rel=0.3)
    meas = m.stop(m.start())
    c = meas.components["gpu:0"]
    assert c.source == "amd-instant-power" and "short-window" in c.flags
    assert c.energy_j == pytest.approx(250 * meas.duration_s)
    m.close()


def test_amd_without_a_trustworthy_counter_samples_power(fake_amd):
    from fake_amdsmi import FakeAmdGpu

    fake_amd([FakeAmdGpu(power_w=200, counter=False)])  # Zeus's 0.5 s check turns it off
    m = get_meter("amd", sampling_period_s=0.02)
    assert m.describe()["gpus"][0]["method"] == "power-sampling"
    w = m.start()
    time.sleep(0.15)
    meas = m.stop(w)
    m.close()
    c = meas.components["gpu:0"]
    assert c.source == "amd-power-sampling" and c.energy_j == pytest.approx(
        200 * meas.duration_s, rel=0.05)


def test_auto_and_ecopt_meters_name_the_amd_gpu(fake_amd, tmp_path, capsys):
    from ecopt.cli import main

    fake_amd()
    m = build_auto(rapl_root=str(tmp_path / "none"), warn=False)
    assert m.describe()["chosen"] == ["amd", "estimate"]  # no CPU meter: the host is estimated
    m.close()
    assert main(["meters"]) == 0
    out = capsys.readouterr().out
    assert "amd-energy-counter" in out and "gpu:0" in out


def test_amd_unavailable_says_why(fake_amd):
    fake_amd(init_error=34)
    with pytest.raises(MeterUnavailableError, match="amdsmi is not usable"):
        get_meter("amd")


def test_rapl_through_zeusd_without_root(zeusd, hw, tmp_path):
    pc = hw.make_powercap(tmp_path / "pc", max_range_uj=10_000_000)
    d = zeusd(powercap=pc)
    m = get_meter("rapl-zeusd")
    assert m.components == ["cpu:package-0", "dram:0"]
    w = m.start()
    hw.set_uj(pc, "intel-rapl:0", hw.get_uj(pc, "intel-rapl:0") + 2_500_000)
    meas = m.stop(w)
    assert meas.components["cpu:package-0"].energy_j == pytest.approx(2.5)
    assert meas.components["cpu:package-0"].source == "rapl-zeusd" and meas.measured
    # A wrap of the counter is folded in by the daemon.
    w = m.start()
    hw.set_uj(pc, "intel-rapl:0", hw.get_uj(pc, "intel-rapl:0") + 8_000_000 - 10_000_000)
    assert m.stop(w).components["cpu:package-0"].energy_j == pytest.approx(8.0)
    assert any(p == "/cpu/get_cumulative_energy" for _, p, _ in d.requests)


def test_auto_takes_zeusd_rapl_when_rapl_is_root_only(zeusd, hw, fake_amd, tmp_path):
    zeusd(powercap=hw.make_powercap(tmp_path / "pc"))
    fake_amd()
    m = build_auto(rapl_root=str(tmp_path / "none"), warn=False)
    assert m.name == "amd+rapl-zeusd" and m.describe()["measured"] is True
    meas = m.stop(m.start())
    m.close()
    assert {"gpu:0", "cpu:package-0", "dram:0"} == set(meas.components) and meas.measured


def test_zeusd_without_cpu_read_is_refused_clearly(zeusd, hw, tmp_path):
    zeusd(powercap=hw.make_powercap(tmp_path / "pc"), groups=("gpu-read",))
    with pytest.raises(MeterUnavailableError, match="cpu-read"):
        get_meter("rapl-zeusd")


def test_zeusd_token_scopes(zeusd, hw, tmp_path, monkeypatch):
    zeusd(powercap=hw.make_powercap(tmp_path / "pc"), auth_required=True,
          tokens={"good": ("cpu-read",), "gpu-only": ("gpu-read",)})
    monkeypatch.setenv("ZEUSD_TOKEN", "gpu-only")
    with pytest.raises(MeterUnavailableError, match="scope 'cpu-read'"):
        get_meter("rapl-zeusd")
    monkeypatch.setenv("ZEUSD_TOKEN", "good")
    assert get_meter("rapl-zeusd").components == ["cpu:package-0", "dram:0"]


def test_no_zeusd_running_is_unavailable(monkeypatch, tmp_path):
    monkeypatch.setenv("ZEUSD_SOCK_PATH", str(tmp_path / "absent.sock"))
    with pytest.raises(MeterUnavailableError, match="does not answer"):
        get_meter("rapl-zeusd")


def test_apple_silicon_components_and_auto(fake_apple, tmp_path, capsys):
    from ecopt.cli import main

    assert main(["meters"]) == 0
    out = capsys.readouterr().out
    assert "auto picks: apple (MEASURED)" in out and "apple-ioreport" in out
    m = build_auto(rapl_root=str(tmp_path / "none"), warn=False)
    assert m.name == "apple" and m.describe()["measured"] is True  # no estimate: SoC covers all
    w = m.start()
    fake_apple.totals["gpu_mj"] += 3000
    fake_apple.totals["cpu_total_mj"] += 1500
    meas = m.stop(w)
    m.close()
    assert set(meas.components) == {"cpu", "gpu:0", "gpu-sram:0", "dram", "ane"}
    assert meas.components["gpu:0"].energy_j == pytest.approx(3.0)
    assert meas.components["cpu"].energy_j == pytest.approx(1.5)
    assert meas.components["cpu"].source == "apple-ioreport" and meas.measured


def test_apple_on_linux_says_why():
    ok, why = get_meter.__globals__["registry"].factory("meters", "apple").probe()
    assert not ok and ("zeus-apple-silicon" in why or "not an Apple Silicon Mac" in why)


@pytest.mark.slow
def test_jetson_rails_through_zeus(tmp_path, monkeypatch, capsys):
    """The INA3221 rail files Zeus reads, in a temp tree; Zeus's own polling process integrates."""
    from pathlib import Path

    import zeus.device.soc.jetson as zjet

    hw = tmp_path / "drivers" / "ina3221" / "1-0040" / "hwmon" / "hwmon3"
    hw.mkdir(parents=True)
    for i, (label, mw) in enumerate([("VDD_IN", 5000), ("VDD_CPU", 1500), ("VDD_GPU", 2000)], 1):
        (hw / f"in{i}_label").write_text(label + "\n")
        (hw / f"power{i}_input").write_text(f"{mw}\n")

    def rerooted(p):  # Zeus looks under /sys/bus/i2c/drivers: look in the temp tree instead
        return Path(str(p).replace("/sys/bus/i2c/drivers", str(tmp_path / "drivers")))

    monkeypatch.setattr(zjet, "Path", rerooted)
    monkeypatch.setattr(zjet, "jetson_is_available", lambda: True)
    m = build_auto(rapl_root=str(tmp_path / "none"), warn=False)
    try:
        assert m.name == "jetson" and m.describe()["measured"] is True
        w = m.start()
        time.sleep(1.0)
        meas = m.stop(w)
    finally:
        m.close()
    assert set(meas.components) == {"cpu", "gpu:0", "module-other"}
    d = meas.duration_s
    # Sampled about every 0.1 s: each end may be up to one sample stale.
    assert meas.components["cpu"].energy_j == pytest.approx(1.5 * d, abs=1.5 * 0.25)
    assert meas.components["gpu:0"].energy_j == pytest.approx(2.0 * d, abs=2.0 * 0.25)
    assert meas.components["module-other"].energy_j == pytest.approx(1.5 * d, abs=5.0 * 0.25)
    assert meas.energy_j == pytest.approx(5.0 * d, abs=5.0 * 0.25)  # the module, counted once
    assert meas.components["cpu"].source == "jetson-ina3221-power-sampling"
    from ecopt.meters.probe import probe_report

    rep = probe_report()  # what `ecopt meters` prints
    assert rep["auto"]["meter"] == "jetson" and rep["auto"]["measured"] is True
