"""polars-lazy operators, the operator-claim verdicts and the NAS seed statistics."""

from __future__ import annotations

import numpy as np
import pytest

from ecopt.data.datasets import write_insurance, write_movielens, write_movielens_side_files
from ecopt.data.operators import operator_plan, trace_operators


def _run(dataset, backend, path):
    state: dict = {}
    out = None
    for _, fn in operator_plan(dataset, backend, path):
        out = fn(state)
    return out


def _rows(t):
    x = np.column_stack([t[0].numpy().reshape(len(t[1]), -1), t[1].numpy()])
    return x[np.lexsort(x.T[::-1])]


def test_polars_lazy_gives_the_eager_tensors_and_defers_the_work(tmp_path):
    r = write_movielens(tmp_path / "ratings.dat", 40, 60, 2000, 0)
    write_movielens_side_files(tmp_path, r, 0)
    eager, lazy = _run("movielens", "polars", r), _run("movielens", "polars-lazy", r)
    np.testing.assert_array_equal(_rows(eager), _rows(lazy))
    traces = {t.name: t for t in trace_operators("movielens", "polars-lazy", r, "estimate")}
    assert [traces[n].rows for n in ("read", "join", "group_by", "encode")] == [0, 0, 0, 0]
    assert traces["to_tensor"].rows == 2000


def test_polars_lazy_insurance_matches_eager(tmp_path):
    p = write_insurance(tmp_path / "insurance.csv", 300, 0, 0.05)
    eager, lazy = _run("insurance", "polars", p), _run("insurance", "polars-lazy", p)
    # Same rows (a lazy join need not keep the left order), same columns in the same order.
    np.testing.assert_allclose(_rows(eager), _rows(lazy), rtol=1e-6)


def test_claim_verdict_follows_the_intervals():
    from experiments._common import load_script

    sweep = load_script("dataframe_sweep")
    iv = lambda v, lo, hi: {"value": v, "low": lo, "high": hi}  # noqa: E731
    assert sweep.claim_verdict(iv(1, 0.8, 1.2), iv(3, 2.5, 3.5)).startswith("holds: polars 0.33x")
    assert sweep.claim_verdict(iv(3, 2.5, 3.5), iv(1, 0.8, 1.2)).startswith("does not hold")
    assert sweep.claim_verdict(iv(1, 0.5, 2.6), iv(3, 2.5, 3.5)).startswith("not shown")


def test_nas_seed_comparison_p_values_by_hand():
    from experiments._common import load_script

    nas = load_script("nas_seeds")
    pts = {s: {"qlognehvi": [(0.9, 10.0 + s)], "random": [(0.8, 5.0 + s * 0.1)]}
           for s in range(5)}
    stats, ref = nas.seed_statistics(pts, 0.5)
    assert ref == [0.5, 5.0]
    assert stats[0]["qlognehvi"]["hypervolume"] == pytest.approx(0.4 * 5.0)
    assert stats[0]["random"]["hypervolume"] == pytest.approx(0.0)
    cmp = nas.compare_over_seeds(stats)
    # Every qlognehvi seed beats every random seed: exact one-sided p = 1 / C(10, 5).
    assert cmp["hypervolume"]["p_greater"] == pytest.approx(1 / 252)
    assert cmp["hypervolume"]["wins"] == 5 and cmp["hypervolume"]["verdict"].startswith(
        "holds: qlognehvi higher")
    assert cmp["n_pareto"]["verdict"].startswith("not shown")
