"""benchmarks/pruning.py: the stopping-rule and energy-budget methods against the same seeds'
full-budget runs."""

from __future__ import annotations

import pytest

from benchmarks.pruning import summarise, tables


def _run(method: str, seed: int, hv: list[float], energy: list[float],
         stop: str | None) -> dict:
    return {"problem": "zeus-x", "method": method, "seed": seed, "budget": 5, "max_hv": 1.0,
            "max_step": 2, "hv": hv, "energy_j": energy, "epochs": [2 * (i + 1) for i in
                                                                   range(len(hv))],
            "states": ["complete"] * len(hv), "proposal_j": [0.1] * len(hv), "proposal_s":
            [0.0] * len(hv), "decide_s": [], "stop_reason": stop}


def test_stopping_rows_pair_each_seed_with_its_full_budget_run():
    full = [0.5, 0.8, 0.9, 0.95, 1.0]
    runs = [_run("ecopt", s, full, [10, 20, 30, 40, 50], "n_trials") for s in (0, 1)]
    runs += [_run("ecopt-stop", 0, full[:3], [10, 20, 30], "converged: ..."),
             _run("ecopt-stop", 1, full, [10, 20, 30, 40, 50], "n_trials")]
    row = summarise(runs)["zeus-x"]["rows"]["ecopt-stop"]
    assert row["stopped_early"] == 1 and row["trials_run"] == [3, 5]
    assert row["hv_at_stop_vs_full"] == pytest.approx([0.9, 1.0])
    assert row["within_10pct_of_full"] == 2
    assert row["trial_energy_saved_vs_full"] == pytest.approx([0.4, 0.0])
    t = tables(summarise(runs))["stopping"]
    assert t["rows"] == [["zeus-x", "ecopt-stop", 2, "1/2", "4.0 of 5", "0.950, 0.900", "2/2",
                          "20%"]]


def test_record_writes_a_recorded_run_docs_tables_can_read(tmp_path):
    from benchmarks.pruning import record
    from docs.recorded import read_run

    full = [0.5, 0.8, 0.9, 0.95, 1.0]
    runs = [_run("ecopt", s, full, [10, 20, 30, 40, 50], "n_trials") for s in (0, 1)]
    runs += [_run("ecopt-stop", s, full[:4], [10, 20, 30, 40], "converged: ...") for s in (0, 1)]
    dest = record(summarise(runs), runs, tmp_path / "2026-01-01", "python -m benchmarks.pruning",
                  notes=["a caveat"])
    run = read_run(dest)
    assert set(run.tables) == {"pruning", "decide_speed", "stopping", "budget"}
    assert run.tables["stopping"].rows[0][:4] == ("zeus-x", "ecopt-stop", 2, "2/2")
    assert run.energy["measured"] is True and "Zeus" in run.energy["meter"]
    mixed = runs + [{**runs[0], "problem": "synthetic"}]
    run2 = read_run(record(summarise(mixed), mixed, tmp_path / "2026-01-02", "cmd"))
    assert run2.energy["measured"] is False  # simulated joules in the run: not all measured
    assert run2.facts["energy_by_problem"]["zeus-x"]["measured"] is True
    assert "a caveat" in run.notes
    assert (dest / "summary.md").read_text().count("| zeus-x |") >= 3


def _budgeted(method: str, seed: int, hv: list[float], spent_j: float) -> dict:
    return {**_run(method, seed, hv, [10.0 * (i + 1) for i in range(len(hv))], "energy..."),
            "energy_budget_j": 40.0, "study_spent_j": spent_j}


def test_budget_rows_say_how_much_was_used_what_went_over_and_the_hv_reached():
    full = [0.5, 0.8, 0.9, 0.95, 1.0]
    runs = [_run("ecopt", s, full, [10, 20, 30, 40, 50], "n_trials") for s in (0, 1)]
    runs += [_budgeted("ecopt-budget", 0, full[:3], 36.0),
             _budgeted("ecopt-budget", 1, full[:4], 44.0),  # over: 110%
             _budgeted("ecopt-budget-dominance", 0, full, 38.0),
             _budgeted("ecopt-budget-dominance", 1, full, 39.0)]
    s = summarise(runs)["zeus-x"]["rows"]
    assert s["ecopt-budget"]["budget_used"] == pytest.approx([0.9, 1.1])
    assert s["ecopt-budget"]["over_budget"] == 1 and s["ecopt-budget"]["reached_in_budget"] == 1
    assert s["ecopt-budget"]["hv_at_budget_vs_full"] == pytest.approx([0.9, 0.95])
    t = tables(summarise(runs))
    assert [r[1] for r in t["pruning"]["rows"]] == ["ecopt"]  # budgeted runs: own table only
    assert t["budget"]["rows"][0] == ["zeus-x", "ecopt-budget", 2, "40 J", "100%, 110%", "1/2",
                                      "3.5 of 5", "1/2", "0.925", "0.925, 0.900", "-"]
    assert t["budget"]["rows"][1][4:6] == ["96%, 98%", "0/2"]
    assert t["budget"]["rows"][1][-1] != "-"  # p that pruning gets more HV at the budget
