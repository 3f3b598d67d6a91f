"""The ``--record`` paths of the timing benchmarks: each writes a recorded run that
``docs.tables`` can read (tiny configurations; the numbers themselves are not checked)."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks import meter_overhead, parallel, report_speed
from docs.recorded import read_run


def _only_run(root: Path, stem: str) -> Path:
    (run_dir,) = (root / "docs" / "results" / stem).iterdir()
    return run_dir


def test_meter_overhead_table_gives_median_and_quartiles_of_the_pair_ratios() -> None:
    ratios = {"m": {1: [1.0, 1.1, 1.2, 1.3, 1.4], 20: [2.0, 2.0, 2.0]}, "t": {1: [0.9, 1.1]}}
    cpu = {"m": {1: [1.0] * 5, 20: [1.5, 1.5, 3.0]}, "t": {1: [1.0, 1.2]}}
    table = meter_overhead.overhead_table(ratios, cpu, {"m": 12.5})
    assert table.columns[0] == "configuration" and table.columns[-1] == "empty window us"
    m, t = table.rows
    assert m[1] == {"value": 1.2, "low": 1.1, "high": 1.3}
    assert m[4] == {"value": 1.5, "low": 1.5, "high": 2.25}
    assert m[5] == 12.5
    assert t[0] == "t" and t[1] == {"value": 1.0, "low": 0.95, "high": 1.05}
    assert t[3] is None and t[4] is None and t[5] is None  # one window only, not a meter


def test_meter_overhead_records_its_table_with_meter_provenance(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert meter_overhead.main(["--pairs", "1", "--work-s", "0.01", "--no-codecarbon-tracker",
                                "--record", "t", "--note", "a caveat"]) == 0
    run_dir = _only_run(tmp_path, "meter_overhead")
    assert run_dir.name.endswith("-t") and (run_dir / "summary.md").is_file()
    rec = read_run(run_dir)
    assert rec.script == "benchmarks/meter_overhead.py" and rec.energy is None
    assert "a caveat" in rec.notes and any("load average" in n for n in rec.notes)
    table = rec.tables["overhead"]
    rows = {r[0]: r for r in table.rows}
    assert {"ecopt estimate", "ecopt auto"} <= set(rows)
    est = rows["ecopt estimate"]
    for cell in est[1:5]:  # one pair: median and quartiles are that pair's ratio
        assert cell["low"] == cell["value"] == cell["high"] > 0
    assert est[5] > 0
    assert rec.facts["pairs"] == 1 and rec.facts["workload_iterations"] >= 1000
    assert rec.facts["meters"]["ecopt estimate"] == {
        "meter": "estimate", "measured": False, "sources": ["estimate-cpu-time", "estimate-ram"]}
    assert len(rec.facts["load_avg_before"]) == 3


def test_parallel_tables_from_rows() -> None:
    sc = parallel.scaling_table([("sleep", 1, 4.0, 0.9), ("sleep", 2, 2.0, 1.8)])
    assert [r[3] for r in sc.rows] == [1.0, 2.0] and [r[4] for r in sc.rows] == [90.0, 90.0]
    hv = parallel.hv_table([("sync q=2", 2, 2, False, 60.0, 10, 11.0, 11.0, 5.0, 0.5),
                            ("async", 2, 1, True, 60.0, 12, 11.5, 11.5, 6.0, 0.25)])
    assert [r[2] for r in hv.rows] == [2, None]  # q only for synchronous batches
    assert hv.rows[1][6] == pytest.approx(parallel.ZDT1_MAX_HV - 11.5, rel=1e-5)
    assert hv.rows[1][9] == 25.0


@pytest.mark.slow
def test_parallel_records_the_tables_it_ran(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert parallel.main(["--parts", "1,3", "--trials", "2", "--duration-s", "0.05",
                          "--dim", "2", "--proposal-n", "8", "--record", "t",
                          "--note", "a caveat"]) == 0
    rec = read_run(_only_run(tmp_path, "parallel"))
    assert rec.script == "benchmarks/parallel.py" and rec.energy is None
    assert set(rec.tables) == {"scaling", "proposal_cost"} and "a caveat" in rec.notes
    scaling = rec.tables["scaling"]
    assert [(r[0], r[1]) for r in scaling.rows] == [
        (k, w) for w in (1, 2, 4) for k in ("sleep", "cpu")]
    assert all(r[2] > 0 for r in scaling.rows)
    assert [r[3] for r in scaling.rows[:2]] == [1.0, 1.0]
    (row,) = rec.tables["proposal_cost"].rows
    assert row[0] == 8 and row[1] > 0 and row[2] > 0
    assert rec.facts["parts"] == [1, 3] and rec.facts["scaling_trials"] == 2


@pytest.mark.slow
def test_report_speed_records_wall_and_cpu_seconds(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert report_speed.main(["--sizes", "12", "--record", "t", "--note", "a caveat"]) == 0
    rec = read_run(_only_run(tmp_path, "report_speed"))
    assert rec.script == "benchmarks/report_speed.py" and "a caveat" in rec.notes
    table = rec.tables["times"]
    assert table.columns[:3] == ("trials", "compare wall s", "compare CPU s")
    (row,) = table.rows
    assert row[0] == 12 and len(row) == 9 and all(v > 0 for v in row[1:])
    assert rec.facts["objectives"] == 2 and rec.facts["sizes"] == [12]
