"""benchmarks/scaling.py on a tiny log: it measures, writes its results and records its table
(the numbers themselves are checked only for shape and the delta's nature)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks import scaling
from docs.recorded import read_run


def test_a_tiny_run_measures_and_records_its_table(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "r"
    assert scaling.main(["--sizes", "40", "--rounds", "2", "--label", "after", "--out", str(out),
                         "--note", "tiny"]) == 0
    got = json.loads((out / "scaling-after.json").read_text())
    (row,) = got["rows"]
    assert row["n"] == 40 and row["dashboard_delta"] is True
    assert row["ask_tell_cpu_us"] > 0 and 0 < row["dashboard_bytes"] < 40_000
    assert scaling.main(["--report-only", "--out", str(out), "--record", "t",
                         "--note", "a caveat"]) == 0
    (run_dir,) = (tmp_path / "docs" / "results" / "scaling").iterdir()
    rec = read_run(run_dir)
    assert rec.script == "benchmarks/scaling.py" and rec.energy is None
    assert "a caveat" in rec.notes and "after: tiny" in rec.notes
    table = rec.tables["per_trial"]
    assert list(table.columns) == scaling.COLUMNS and list(table.rows[0][:2]) == ["after", 40]


def test_the_synthetic_log_has_the_documented_mix() -> None:
    import numpy as np

    rng = np.random.default_rng(0)
    states = [scaling._record(k, rng).state.value for k in range(2000)]
    share = {s: states.count(s) / len(states) for s in set(states)}
    assert share["pruned"] == pytest.approx(0.5, abs=0.04)
    assert share["complete"] == pytest.approx(0.45, abs=0.04)
    assert share["failed"] == pytest.approx(0.05, abs=0.02)
