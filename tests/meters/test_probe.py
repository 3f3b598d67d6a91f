"""``ecopt meters``: what auto picks on this machine and why."""

from __future__ import annotations

import json

from ecopt.cli import main
from ecopt.meters.probe import probe_report


def test_cli_table(capsys):
    assert main(["meters"]) == 0
    out = capsys.readouterr().out
    assert "auto picks:" in out and "component" in out
    for name in ("nvml", "rapl", "codecarbon", "estimate"):
        assert name in out
    from ecopt.meters.nvml import NVMLMeter
    from ecopt.meters.rapl import RaplMeter

    if not (NVMLMeter.is_available() or RaplMeter.is_available()):
        assert "auto picks: estimate (ESTIMATED" in out
        assert "estimate-cpu-time" in out and "cpu_w_per_core=" in out


def test_cli_json_and_probe_window(capsys):
    assert main(["meters", "--json", "--probe-s", "0.05"]) == 0
    rep = json.loads(capsys.readouterr().out)
    # Every registered meter auto may use (the registry's), and the estimate.
    assert {"nvml", "amd", "apple", "jetson", "rapl", "rapl-zeusd", "codecarbon",
            "estimate"} <= set(rep["backends"])
    assert rep["window"]["duration_s"] >= 0.05 and rep["window"]["components"]
    assert rep["auto"]["auto"] is True


def test_fake_rapl_tree_is_reported(powercap):
    rep = probe_report(rapl_root=str(powercap))
    assert rep["backends"]["rapl"]["available"] is True
    assert rep["auto"]["meter"] in ("rapl", "nvml+rapl")


def test_bad_probe_seconds(capsys):
    assert main(["meters", "--probe-s", "-1"]) == 2
    assert "--probe-s >= 0" in capsys.readouterr().err
