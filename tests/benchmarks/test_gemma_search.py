"""benchmarks/gemma_search.py: the Gemma sweep's search energy against the grid's (issue 38
item 4), on gemma_batch's --quick model: every figure is re-derived from the studies' logs."""

from __future__ import annotations

import json

import pytest

from benchmarks import gemma_search as gs


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    out = tmp_path_factory.mktemp("gemma_search")
    assert gs.main(["--quick", "--seeds", "1", "--out", str(out), "--", "--trials", "5"]) == 0
    return out


def _recs(path):
    return [json.loads(x) for x in (path / "trials.jsonl").read_text().splitlines() if x]


def test_each_arm_runs_its_proposal_rule_against_one_grid(quick):
    base = quick / "seed0"
    grid = _recs(base / "grid" / "grid")
    assert sorted(r["params"]["batch_size"] for r in grid) == [1, 8, 4096]
    full, econ = _recs(base / "full" / "optimiser"), _recs(base / "economy" / "optimiser")
    assert len(full) == len(econ) == 5
    model = [r for r in econ if r["proposed_by"] == "qlognehvi"]
    # the first model proposal is an economy one (no full one paid for); cheap CPU trials
    # keep the later ones economy proposals; the full arm never economises
    assert model[0]["proposal"]["economy"]["basis"] == "first"
    assert model[1:] and all(r["proposal"]["economy"]["active"] for r in model[1:])
    assert not any((r.get("proposal") or {}).get("economy", {}).get("active") for r in full)


def test_the_figures_are_the_logs_own(quick):
    gb = gs._gemma()
    facts = json.loads((quick / "summary.json").read_text())
    grid = _recs(quick / "seed0" / "grid" / "grid")
    grid_best = max(v for r in grid if (v := gs._tpj(r)) is not None)
    for arm in ("full", "economy"):
        (f,) = facts["runs"][arm]
        recs = _recs(quick / "seed0" / arm / "optimiser")
        props = sum(r["proposal"]["search"]["energy_j"] for r in recs
                    if "search" in (r.get("proposal") or {}))
        trials = sum(r["energy_j"] for r in recs)
        assert f["proposals_j"] == pytest.approx(props, rel=1e-6)
        assert f["trials_j"] == pytest.approx(trials, rel=1e-6)
        # the grid's sweep counts its (tiny, metered) grid proposals too
        assert f["grid_energy_j"] == pytest.approx(sum(
            r["energy_j"] + (r.get("proposal") or {}).get("search", {}).get("energy_j", 0.0)
            for r in grid), rel=1e-6)
        assert f["best_fraction_of_grid_best"] == pytest.approx(
            max(v for r in recs if (v := gs._tpj(r)) is not None) / grid_best, rel=1e-6)
        # energy to the grid's best: trials + proposals in trial order up to the first that
        # reached 0.95 x the grid's best (or never: saving 0)
        spent = 0.0
        want = None
        for r in sorted(recs, key=lambda r: r["number"]):
            spent += r["energy_j"] + (r.get("proposal") or {}).get("search", {}).get(
                "energy_j", 0.0)
            if (v := gs._tpj(r)) is not None and v >= gb.REACH_FRACTION * grid_best:
                want = spent
                break
        assert f["energy_to_grid_best_j"] == (pytest.approx(want, rel=1e-6) if want else None)
        assert f["saving"] == (pytest.approx(f["grid_energy_j"] / want, rel=1e-6) if want
                               else 0.0)
    report = (quick / "report.md").read_text()
    for table in ("search_energy", "proposals", "economy"):
        assert f"### {table}" in report


def test_running_leaves_the_ecopt_loggers_level_alone(quick):
    import logging

    # gemma_batch's setup lowers it to ERROR; later warnings (and caplog) depend on it.
    assert logging.getLogger("ecopt").level != logging.ERROR


def test_bad_arm_is_refused(tmp_path):
    with pytest.raises(SystemExit, match="unknown arm"):
        gs.main(["--arms", "fast", "--out", str(tmp_path)])


def test_hypervolume_fractions_against_the_seeds_union(quick):
    import numpy as np

    from ecopt import pareto

    hv = gs.hv_fractions(quick / "seed0", ["grid", "full", "economy"])
    assert set(hv) == {"grid", "full", "economy"}
    assert all(0.0 < v <= 1.0 + 1e-12 for v in hv.values())
    # recomputed by hand: tokens/J (max) and p95 latency (min), scaled to the union's range
    rows = {}
    for st in ("grid", "full", "economy"):
        recs = _recs(quick / "seed0" / st / ("grid" if st == "grid" else "optimiser"))
        rows[st] = np.array([[r["values"]["tokens_per_joule"], -r["values"]["p95_latency_ms"]]
                             for r in recs if r["state"] == "complete"])
    union = np.vstack(list(rows.values()))
    lo, hi = union.min(axis=0), union.max(axis=0)
    total = pareto.hypervolume((union - lo) / (hi - lo), [-0.1, -0.1])
    for st, y in rows.items():
        assert hv[st] == pytest.approx(pareto.hypervolume((y - lo) / (hi - lo), [-0.1, -0.1])
                                       / total)
    facts = json.loads((quick / "summary.json").read_text())
    assert facts["runs"]["full"][0]["hv_fraction"] == pytest.approx(hv["full"])
    assert facts["runs"]["economy"][0]["grid_hv_fraction"] == pytest.approx(hv["grid"])
