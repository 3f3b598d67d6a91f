"""CodeCarbon adapter, for real: on this machine CodeCarbon can only estimate (TDP x load)."""

from __future__ import annotations

import sys

import pytest

from ecopt.errors import MeterError, MeterUnavailableError
from ecopt.meters import get_meter

pytest.importorskip("codecarbon")


@pytest.fixture(scope="module")
def cc_meter():
    from ecopt.meters.codecarbon import CodeCarbonMeter

    m = CodeCarbonMeter(country_iso_code="FRA", measure_power_secs=1.0)
    yield m
    m.close()


def _busy(n: int = 300_000) -> int:
    return sum(i * i for i in range(n))


def test_reports_components_mode_and_co2(cc_meter):
    w = cc_meter.start()
    _busy()
    m = cc_meter.stop(w)
    assert m.meter == "codecarbon"
    assert {"cpu", "ram"} <= set(m.components)
    for c in m.components.values():
        assert c.energy_j >= 0 and c.source.startswith("codecarbon-")
        assert "CodeCarbon mode" in c.note
    assert m.energy_j > 0
    assert m.extras["co2_kg"] >= 0
    modes = cc_meter.modes
    # Whatever mode CodeCarbon picked, provenance follows it: estimate modes are not "measured".
    for comp, mode in modes.items():
        src, measured = cc_meter.source_of(mode)
        assert m.components[comp].source == src and m.components[comp].measured == measured
    assert m.components["ram"].source == "codecarbon-estimate"  # RAM is always a model
    assert not m.components["ram"].measured


def test_on_this_machine_codecarbon_estimates(cc_meter):
    from ecopt.meters.rapl import RaplMeter

    if RaplMeter.is_available():  # pragma: no cover - a machine with readable RAPL
        pytest.skip("RAPL is readable here: CodeCarbon measures the CPU")
    assert cc_meter.modes["cpu"] in ("cpu_load", "constant")
    d = cc_meter.describe()
    assert d["measured"] is False and d["sources"]["cpu"] == "codecarbon-estimate"
    assert cc_meter.estimates


def test_windows_cannot_overlap(cc_meter):
    w = cc_meter.start()
    try:
        with pytest.raises(MeterError, match="one task at a time"):
            cc_meter.start()
    finally:
        cc_meter.stop(w)
    # And the meter still works afterwards.
    w = cc_meter.start()
    assert cc_meter.stop(w).duration_s >= 0


def test_bad_settings_and_not_installed(monkeypatch):
    from ecopt.meters.codecarbon import CodeCarbonMeter

    with pytest.raises(ValueError, match="3-letter ISO code"):
        CodeCarbonMeter(country_iso_code="France")
    with pytest.raises(ValueError, match="tracking_mode"):
        CodeCarbonMeter(tracking_mode="gpu")
    with pytest.raises(ValueError, match="measure_power_secs > 0"):
        CodeCarbonMeter(measure_power_secs=0)
    monkeypatch.setitem(sys.modules, "codecarbon", None)
    with pytest.raises(MeterUnavailableError, match=r"pip install 'ecopt\[codecarbon\]'"):
        get_meter("codecarbon")
