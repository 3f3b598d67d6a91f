"""benchmarks/pruning.py: the economy arm on replayed curves (the expensive-trial regime)."""

from __future__ import annotations

import pytest

from benchmarks import nas_curves
from benchmarks.curves import make_curve_problem
from benchmarks.pruning import run_one


@pytest.fixture(scope="module")
def runs():
    problem = make_curve_problem("synthetic")
    budget = problem.n_init + 3
    return [run_one(problem, m, 0, budget) for m in ("ecopt", "ecopt-economy")]


def test_replayed_trials_are_metered_so_the_economy_rule_sees_them_expensive(runs):
    full, eco = runs
    # Trials are metered at their replayed joules: thousands of units against a proposal's
    # estimated joule or so, so only the first model proposal is an economy one.
    model = [e for e in eco["economy"] if e is not None]
    assert model == [True, False, False]
    assert all(e is None for e in eco["economy"][:len(eco["economy"]) - 3])
    # The full arm (proposal_share=None) never economises.
    assert not any(full["economy"])
    for r in runs:
        assert len(r["trial_j"]) == r["budget"]
        assert sum(r["trial_j"]) == pytest.approx(r["energy_j"][-1])
    assert sum(eco["proposal_j"]) < 0.01 * sum(eco["trial_j"])


def test_the_with_proposals_table_covers_curve_problems(runs):
    t = nas_curves.with_proposals_table(runs)
    rows = {row[1]: dict(zip(t["columns"], row)) for row in t["rows"]}
    assert set(rows) == {"ecopt", "ecopt-economy"}
    assert rows["ecopt-economy"]["economy proposals per study (mean)"] == "1.0"
    assert rows["ecopt"]["economy proposals per study (mean)"] == "0.0"
    share = float(rows["ecopt-economy"]["proposals / trials"])
    assert 0 < share < 0.01
    # Runs recorded before the economy flag was kept show "-", not a count of 0.
    old = [{k: v for k, v in r.items() if k != "economy"} for r in runs]
    t = nas_curves.with_proposals_table(old)
    assert {row[-1] for row in t["rows"]} == {"-"}
