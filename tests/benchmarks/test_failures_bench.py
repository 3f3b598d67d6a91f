"""benchmarks/failures.py: its failing regions, both problems' runs and the summary."""

from __future__ import annotations

import math

import pytest

from benchmarks.failures import ArchRegion, Region, RegionFailure, run_one, summarise, tables
from benchmarks.nas_curves import NasProblem
from benchmarks.problems import make_problem


@pytest.mark.parametrize("share", [0.1, 0.3])
def test_the_branin_region_holds_its_share_and_raises_from_one_line(share):
    region = Region(share)
    assert (region.x[1] - region.x[0]) * (region.y[1] - region.y[0]) == pytest.approx(share)
    inside = {"x0": sum(region.x) / 2, "x1": region.y[1] / 2}
    with pytest.raises(RegionFailure):
        region.check(inside)
    region.check({"x0": 0.0, "x1": 0.99})  # outside: no error
    with pytest.raises(ValueError, match="0 < share < 1"):
        Region(1.5)


@pytest.mark.parametrize("share", [0.1, 0.3])
def test_the_failing_architecture_holds_its_share_of_the_nas_space(share):
    problem = NasProblem(epochs=1, n_init=2, budget=3, inference_passes=1)
    region = ArchRegion(share, problem.space)
    assert share <= region.measured_share < share + 0.05
    wide_avg = {"pooling": "avg", "channels": 64}
    assert wide_avg in region and {"pooling": "max", "channels": 64} not in region
    assert {"pooling": "avg", "channels": region.min_channels - 1} not in region
    with pytest.raises(RegionFailure, match="average-pooling head"):
        region.check(wide_avg)
    with pytest.raises(ValueError, match="share <= 1/3"):
        ArchRegion(0.5, problem.space)


@pytest.mark.slow
def test_branin_runs_count_the_wasted_trials_and_score_what_did_not_fail():
    problem = make_problem("branincurrin")
    runs = [run_one(problem, 0.3, m, 0, problem.n_init + 3) for m in ("ecopt", "optuna-tpe")]
    region = Region(0.3)
    for r in runs:
        assert len(r["params"]) == problem.n_init + 3
        assert r["failed"] == [p in region for p in r["params"]]
        assert r["wasted"] == sum(r["failed"]) and 0 <= r["final_hv"] <= r["max_hv"]
    # Both start from the same Sobol design of the seed.
    assert runs[0]["params"][:problem.n_init] == runs[1]["params"][:problem.n_init]
    summary = summarise(runs)
    row = summary[("branincurrin", 0.3)]["rows"]["optuna-tpe"]
    assert row["seeds"] == 1 and "p_fewer_wasted" in row
    assert set(tables(summary)) == {"region30"}


@pytest.mark.slow
def test_nas_runs_train_real_cnns_and_are_scored_against_the_union_front():
    problem = NasProblem(epochs=1, n_init=4, budget=5, inference_passes=1)
    runs = [run_one(problem, 0.3, m, 0, 5) for m in ("ecopt-before", "optuna-tpe")]
    region = ArchRegion(0.3, problem.space)
    for r in runs:
        assert r["problem"] == "nas" and math.isnan(r["final_hv"])
        assert r["failed"] == [p in region for p in r["params"]]
        assert all((v is None) == f for v, f in zip(r["values"], r["failed"]))
        done = [j for j, f in zip(r["trial_j"], r["failed"]) if not f]
        assert all(j > 0 for j in done)  # each complete trial trained and was metered
    summary = summarise(runs)
    assert all(0 <= r["final_hv"] <= r["max_hv"] for r in runs)
    assert max(r["final_hv"] for r in runs) > 0
    assert set(tables(summary)) == {"nas-region30"}
