"""RAPL meter against a fake powercap tree with the kernel's layout."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from ecopt.errors import MeterError, MeterUnavailableError
from ecopt.meters import get_meter
from ecopt.meters.rapl import RaplMeter, RaplPermissionError, find_rapl_domains

PKG0 = "intel-rapl:0"
DRAM0 = "intel-rapl:0/intel-rapl:0:1"


def test_finds_package_and_dram_skips_core_and_mmio(tmp_path, hw):
    root = hw.make_powercap(tmp_path / "pc", sockets=2)
    doms = find_rapl_domains(root)
    assert [d.component for d in doms] == ["cpu:package-0", "dram:0", "cpu:package-1", "dram:1"]
    assert find_rapl_domains(tmp_path / "absent") == []


def test_window_energy_is_the_counter_difference(powercap, hw):
    meter = RaplMeter(root=powercap)
    try:
        w = meter.start()
        hw.set_uj(powercap, PKG0, hw.get_uj(powercap, PKG0) + 5_000_000)  # 5 J
        hw.set_uj(powercap, DRAM0, hw.get_uj(powercap, DRAM0) + 750_000)
        hw.set_uj(powercap, "intel-rapl:0/intel-rapl:0:0", 99_999_999_999)  # core: ignored
        m = meter.stop(w)
    finally:
        meter.close()
    assert m.components["cpu:package-0"].energy_j == pytest.approx(5.0)
    assert m.components["dram:0"].energy_j == pytest.approx(0.75)
    assert set(m.components) == {"cpu:package-0", "dram:0"}
    assert all(c.source == "rapl" and c.measured for c in m.components.values())
    assert meter.describe()["max_energy_range_uj"]["cpu:package-0"] == 262_143_328_850


def test_wrap_around_uses_max_energy_range(tmp_path, hw):
    root = hw.make_powercap(tmp_path / "pc", max_range_uj=1_000_000, start_uj=900_000)
    meter = RaplMeter(root=root, domains=["package"])
    try:
        w = meter.start()
        hw.set_uj(root, PKG0, 100_000)  # wrapped: 100k to the top + 100k after
        c = meter.stop(w).components["cpu:package-0"]
    finally:
        meter.close()
    assert c.energy_j == pytest.approx(0.2)
    assert "wrapped 1 time" in c.note


def test_background_poll_catches_several_wraps_in_one_window(tmp_path, hw):
    root = hw.make_powercap(tmp_path / "pc", max_range_uj=1_000_000, start_uj=0, dram=False)
    meter = RaplMeter(root=root, poll_s=0.005)
    try:
        w = meter.start()
        value = 0
        for _ in range(5):  # 5 x 0.6 J = 3 J, wrapping three times
            value = (value + 600_000) % 1_000_000
            hw.set_uj(root, PKG0, value)
            time.sleep(0.1)
        c = meter.stop(w).components["cpu:package-0"]
    finally:
        meter.close()
    assert c.energy_j == pytest.approx(3.0)
    assert "wrapped 3 time" in c.note


def test_overlapping_windows_both_measure(powercap, hw):
    meter = RaplMeter(root=powercap, domains=("package",))
    try:
        outer = meter.start()
        hw.set_uj(powercap, PKG0, hw.get_uj(powercap, PKG0) + 1_000_000)
        inner = meter.start()
        hw.set_uj(powercap, PKG0, hw.get_uj(powercap, PKG0) + 2_000_000)
        mi = meter.stop(inner)
        mo = meter.stop(outer)
    finally:
        meter.close()
    assert mi.energy_j == pytest.approx(2.0) and mo.energy_j == pytest.approx(3.0)


def test_absent_and_bad_settings(tmp_path, powercap):
    with pytest.raises(MeterUnavailableError, match="no RAPL powercap zones.*meter='estimate'"):
        get_meter("rapl", root=tmp_path / "nothing")
    with pytest.raises(ValueError, match="domains must be"):
        RaplMeter(root=powercap, domains=("gpu",))
    with pytest.raises(ValueError, match="poll_s > 0"):
        RaplMeter(root=powercap, poll_s=0)


def test_counter_vanishing_mid_run_is_a_meter_error(powercap):
    meter = RaplMeter(root=powercap)
    try:
        w = meter.start()
        (powercap / DRAM0 / "energy_uj").unlink()
        with pytest.raises(MeterError, match="became unreadable"):
            meter.stop(w)
    finally:
        meter.close()


def test_pickles_settings(powercap, hw):
    meter = RaplMeter(root=powercap, poll_s=3.0)
    clone = pickle.loads(pickle.dumps(meter))
    meter.close()
    w = clone.start()
    hw.set_uj(powercap, PKG0, hw.get_uj(powercap, PKG0) + 1_000_000)
    assert clone.stop(w).components["cpu:package-0"].energy_j == pytest.approx(1.0)
    clone.close()


_AS_NOBODY = """
import os, sys, warnings, importlib.util, platform
import ecopt.meters.estimate, ecopt.meters.nvml, ecopt.meters.codecarbon
from ecopt.meters.rapl import RaplMeter, RaplPermissionError
from ecopt.meters.auto import build_auto
try:
    import pynvml
except ImportError:
    pass
# Drop root after imports (the interpreter lives under a root-only home here).
os.setgroups([]); os.setgid(65534); os.setuid(65534)
assert os.geteuid() == 65534
try:
    RaplMeter(root=sys.argv[1])
except RaplPermissionError as exc:
    print("ERROR:", exc)
with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    m = build_auto(rapl_root=sys.argv[1])
print("AUTO:", m.name, "|", " ".join(m.describe()["why"]))
print("WARNED:", [x.category.__name__ for x in w])
"""


def test_permission_denied_says_how_to_fix(hw):
    # Since Linux 5.10 energy_uj is mode 0400 root:root. Root reads anything, so as
    # root the check runs in a child process that drops to user "nobody".
    base = Path(tempfile.mkdtemp(prefix="ecopt-rapl-"))
    try:
        base.chmod(0o755)
        root = hw.make_powercap(base / "powercap")
        for p in root.rglob("energy_uj"):
            p.chmod(0o400)
        if os.geteuid() != 0:
            with pytest.raises(RaplPermissionError, match="root only.*chmod o\\+r.*estimate"):
                RaplMeter(root=root)
            return
        out = subprocess.run(
            [sys.executable, "-c", _AS_NOBODY, str(root)], capture_output=True, text=True,
            timeout=60, cwd=str(Path(__file__).resolve().parents[2]),
            env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])})
        assert out.returncode == 0, out.stderr
        assert "ERROR: RAPL counters exist but are readable by root only" in out.stdout
        assert "sudo chmod o+r /sys/class/powercap/intel-rapl:*/energy_uj" in out.stdout
        assert "AUTO: estimate |" in out.stdout and "root only" in out.stdout
        assert "MeterFallbackWarning" in out.stdout
    finally:
        import shutil

        shutil.rmtree(base, ignore_errors=True)
