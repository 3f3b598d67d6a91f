"""The example scripts run (short settings) and produce what they say."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

pytest.importorskip("matplotlib")

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def load(name):
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_compare_samplers_then_report_from_run(tmp_path, capsys):
    cmp = load("compare_samplers")
    assert cmp.main(["--trials", "5", "--samplers", "random,grid", "--out", str(tmp_path / "runs"),
                     "--png", str(tmp_path / "overlay.png")]) == 0
    out = capsys.readouterr().out
    assert "shared reference point" in out and "random: hypervolume" in out
    assert "grid: hypervolume" in out and "J (estimated)" in out
    assert (tmp_path / "overlay.png").is_file()

    rep = load("report_from_run")
    run = tmp_path / "runs" / "random"
    assert rep.main([str(run), "--baseline", "0"]) == 0
    out = capsys.readouterr().out
    assert "front:" in out and "search energy" in out
    assert (run / "report.html").is_file() and (run / "figures" / "pareto.png").is_file()
