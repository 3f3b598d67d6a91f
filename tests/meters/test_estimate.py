"""The estimate meter, for real: CPU time x W/core + RSS x W/GB, measured=False."""

from __future__ import annotations

import resource

import pytest

from ecopt.meters import EstimateMeter, get_meter
from ecopt.meters.estimate import DEFAULT_CPU_W_PER_CORE, DEFAULT_RAM_W_PER_GB


def _cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def test_cpu_term_is_cpu_time_times_watts():
    meter = EstimateMeter(cpu_w_per_core=7.5, ram_w_per_gb=0.0)
    c0 = _cpu_s()
    w = meter.start()
    sum(i * i for i in range(400_000))
    m = meter.stop(w)
    c1 = _cpu_s()
    assert set(m.components) == {"cpu"}
    cpu = m.components["cpu"]
    assert cpu.source == "estimate-cpu-time" and cpu.measured is False
    # The window's CPU time lies within what the test observed around it.
    assert 0 < cpu.energy_j <= (c1 - c0) * 7.5 + 1e-9
    assert m.details["cpu_w_per_core"] == 7.5 and "cpu_time_s" in m.details["model"]
    assert not m.measured


def test_ram_term_and_defaults_are_stated():
    meter = get_meter("estimate")
    w = meter.start()
    m = meter.stop(w)
    ram = m.components["ram"]
    assert ram.source == "estimate-ram" and ram.energy_j >= 0 and "GB RSS" in ram.note
    d = meter.describe()
    assert d["cpu_w_per_core"] == DEFAULT_CPU_W_PER_CORE
    assert d["ram_w_per_gb"] == DEFAULT_RAM_W_PER_GB and d["measured"] is False


def test_system_scope_and_bad_constants():
    m = EstimateMeter(scope="system")
    w = m.start()
    sum(range(200_000))
    assert m.stop(w).components["cpu"].energy_j >= 0
    with pytest.raises(ValueError, match="cpu_w_per_core >= 0"):
        EstimateMeter(cpu_w_per_core=-1)
    with pytest.raises(ValueError, match="scope"):
        EstimateMeter(scope="gpu")
