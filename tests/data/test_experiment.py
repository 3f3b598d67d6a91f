"""experiments/dataframe_energy.py: its statistics and a tiny end-to-end run."""

from __future__ import annotations

import importlib.util
import json
import logging
import math
import sys
from pathlib import Path

import pytest

EXPERIMENTS = Path(__file__).resolve().parents[2] / "experiments"


def _script():
    key = "_ecopt_experiment_dataframe_energy"
    if key in sys.modules:
        return sys.modules[key]
    spec = importlib.util.spec_from_file_location(key, EXPERIMENTS / "dataframe_energy.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[key] = mod
    spec.loader.exec_module(mod)
    return mod


def test_trimmed_mean_interval_by_hand():
    tm, lo, hi = _script().trimmed_stats([1.0, 2.0, 3.0, 4.0, 100.0])
    assert tm == pytest.approx(3.0)  # 20 % cut: the 1 and the 100 go
    # Winsorised sample (2, 2, 3, 4, 4): sd 1.0; se = 1 / (0.6 * sqrt(5)); t(0.975, df=2) = 4.303
    half = 4.302653 / (0.6 * math.sqrt(5))
    assert lo == pytest.approx(3.0 - half, rel=1e-4) and hi == pytest.approx(3.0 + half, rel=1e-4)
    assert _script().trimmed_stats([2.0]) == (2.0, 2.0, 2.0)


@pytest.mark.slow
def test_tiny_run_writes_studies_table_and_plot(tmp_path):
    out = tmp_path / "dfe"
    level = logging.getLogger("ecopt").level
    try:
        rc = _script().main(["--quiet", "--meter", "estimate", "--out", str(out), "--repeats", "2",
                             "--only", "regression", "--backends", "pandas", "polars",
                             "--tab-epochs", "1"])
    finally:
        logging.getLogger("ecopt").setLevel(level)
    assert rc == 0
    text = (out / "summary.md").read_text()
    assert "ESTIMATED" in text and "| insurance-mlp-regression | polars | load |" in text
    facts = json.loads((out / "summary.json").read_text())
    cell = facts["insurance-mlp-regression"]["pandas"]
    assert cell["n"] == 2 and cell["total"]["duration_s"][0] > 0
    recs = [json.loads(x) for x in (out / "insurance-mlp-regression" / "trials.jsonl")
            .read_text().splitlines()]
    assert sorted((r["params"]["backend"], r["params"]["repeat"]) for r in recs) == [
        ("pandas", 0), ("pandas", 1), ("polars", 0), ("polars", 1)]
    assert (out / "dataframe_energy.png").stat().st_size > 0
