"""benchmarks/transfer.py's summary and the MultiTaskGP arm (benchmarks/_mtgp.py), on small
synthetic studies (the Zeus traces are exercised by the recorded runs)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

import ecopt
from benchmarks._mtgp import MTGPProposer
from benchmarks.transfer import summarise

OBJS = [ecopt.Objective("energy_j", "min"), ecopt.Objective("time_s", "min")]
SPACE = ecopt.SearchSpace({"batch_size": ecopt.Categorical([8, 16, 32, 64, 128], ordered=True),
                           "power_limit": ecopt.Int(100, 250, step=50)})


def _values(p: dict, scale: float) -> dict[str, float]:
    b, w = math.log2(p["batch_size"]), p["power_limit"] / 100
    return {"energy_j": scale * (w * (8 - b) + 0.5 * b), "time_s": scale * (8 - b) / w + 1}


def _grid() -> list[dict]:
    return [{"batch_size": b, "power_limit": w} for b in (8, 16, 32, 64, 128)
            for w in (100, 150, 200, 250)]


def test_summary_ratios_counts_and_unreached_runs():
    runs = []
    for seed, (cold, tr) in enumerate([(100.0, 20.0), (80.0, 40.0), (60.0, math.inf)]):
        for arm, e in (("cold", cold), ("transfer", tr)):
            runs.append({"workload": "w", "direction": "a->b", "arm": arm, "seed": seed,
                         "energy_to_95_j": e, "trials": 5, "final_hv": 1.0, "trust": [0.5],
                         "proposal_energy_j_estimated": 1.0})
    rows, facts = summarise(runs)
    assert [r[2] for r in rows] == ["cold", "transfer"]
    tr = rows[1]
    assert tr[3] == 3 and tr[4] == 2  # seeds, reached
    assert facts["transfer"]["runs"] == 3 and facts["transfer"]["runs_worse_than_cold"] == 1
    assert facts["transfer"]["median_saving_x"] == 2.0  # ratios 5, 2, 0 (never reached)
    assert facts["transfer"]["worst_cost_vs_cold_x"] == math.inf  # cold reached, it did not


def test_summary_counts_two_unreached_runs_as_the_same_outcome():
    runs = [{"workload": "w", "direction": "a->b", "arm": arm, "seed": seed,
             "energy_to_95_j": e, "trials": 40, "final_hv": 0.9, "trust": [0.0],
             "proposal_energy_j_estimated": 1.0}
            for seed, (cold, un) in enumerate([(math.inf, math.inf), (50.0, 60.0), (40.0, 40.0)])
            for arm, e in (("cold", cold), ("unrelated", un))]
    _, facts = summarise(runs)
    f = facts["unrelated"]
    assert f["median_saving_x"] == 1.0  # ratios 1 (neither reached), 50/60, 1
    assert f["runs_worse_than_cold"] == 1 and f["worst_cost_vs_cold_x"] == 1.2


def test_mtgp_starts_from_the_source_front_then_proposes_unseen_points(tmp_path: Path):
    src = ecopt.Study(SPACE, OBJS, storage=tmp_path / "src", sampler="sobol", meter="estimate",
                      seed=0)
    for p in _grid()[::2]:
        src.tell(src.ask(params=p), _values(p, 1.0))
    src.close()
    prop = MTGPProposer(SPACE, OBJS, tmp_path / "src", _grid(), n_init=2)
    assert len(prop.design) == 2
    target = ecopt.Study(SPACE, OBJS, sampler="random", meter="estimate", seed=0)
    seen: list[dict] = []
    for _ in range(5):
        p = prop.propose(target.records, seen)
        assert p is not None and p not in seen
        target.tell(target.ask(params=p), _values(p, 3.0))
        seen.append(p)
    assert seen[:2] == prop.design and prop.cpu_s > 0
    assert all(np.isfinite(list(r.values.values())).all() for r in target.records)


def test_self_check_summary_shares_at_each_bar():
    from benchmarks.transfer import SELF_CHECK_COLUMNS, summarise_self_check

    def row(w: str, real: float | None, shuffled: list) -> dict:
        return {"workload": w, "direction": "v100->a40", "seed": 0, "real": real,
                "shuffled": shuffled}

    rows = [row("a", 0.6, [0.0, 0.35]), row("a", 0.4, [0.1, 0.55]), row("b", 0.2, [0.0, 0.0]),
            row("c", None, [None])]
    table, facts = summarise_self_check(rows)
    assert [r[0] for r in table] == ["a", "b", "c", "all"]
    c = dict(zip(SELF_CHECK_COLUMNS, table[2]))
    assert c["sources"] == 1 and c["not checked (< SELF_CHECK_MIN trials mapped)"] == 1
    assert c["real: median self_trust"] is None
    a = dict(zip(SELF_CHECK_COLUMNS, table[0]))
    assert a["sources"] == 2 and a["real: median self_trust"] == 0.5
    assert a["real >= TRUST_MIN"] == 1.0 and a["real >= SELF_TRUST_STRONG"] == 0.5
    assert a["shuffled copies"] == 4 and a["shuffled >= TRUST_MIN"] == 0.5
    assert a["shuffled >= SELF_TRUST_STRONG"] == 0.25 and a["shuffled: highest"] == 0.55
    assert facts["sources"] == 4 and facts["real: lowest"] == 0.2
    assert facts["not checked (< SELF_CHECK_MIN trials mapped)"] == 1
    assert facts["shuffled >= TRUST_MIN"] == 2 / 6


def test_self_check_record_from_saved_rows(tmp_path: Path):
    import json

    from benchmarks.transfer import main

    rows = [{"workload": "a", "direction": "v100->a40", "seed": s, "real": 0.3 + 0.1 * s,
             "shuffled": [0.05 * s]} for s in range(4)]
    (tmp_path / "rows.json").write_text(json.dumps(rows))
    assert main(["--self-check", "0", "--load-runs", str(tmp_path / "rows.json"),
                 "--record", str(tmp_path / "rec")]) == 0
    facts = json.loads((tmp_path / "rec" / "summary.json").read_text())["facts"]
    assert [r["seed"] for r in facts["sources"]] == [0, 1, 2, 3]
    assert facts["real >= SELF_TRUST_STRONG"] == 0.5
    assert facts["shuffled: highest"] == 0.15 and facts["trust_min"] == 0.3


def test_paired_counts_and_wilcoxon_against_another_arm_and_record():
    from benchmarks.transfer import paired, versus

    def run(arm: str, seed: int, e: float) -> dict:
        return {"workload": "w", "direction": "a->b", "arm": arm, "seed": seed,
                "energy_to_95_j": e, "trials": 5, "final_hv": 1.0, "trust": [],
                "proposal_energy_j_estimated": 1.0}

    base = [run("transfer", s, 100.0) for s in range(8)]
    better = [run("mtgp", s, 50.0 if s < 7 else 200.0) for s in range(8)]
    f = paired(better, base)
    assert (f["runs"], f["less"], f["more"]) == (8, 7, 1)
    assert f["p_less"] < 0.05
    assert paired(base, better)["p_less"] > 0.9
    # a run that never reached the target loses to one that did; two such runs tie
    g = paired([run("mtgp", 0, math.inf), run("mtgp", 1, math.inf)],
               [run("transfer", 0, 10.0), run("transfer", 1, math.inf)])
    assert (g["less"], g["more"]) == (0, 1)
    rows = versus(base + better, [run("transfer", s, 200.0) for s in range(8)])
    assert rows[0][:5] == ["transfer", "transfer (other record)", 8, 8, 0]
    assert rows[1][:5] == ["mtgp", "transfer", 8, 7, 1]
    raw = [run("mtgp-raw", s, 60.0) for s in range(8)]
    rows = versus(base + better + raw, [])
    assert [r[:2] for r in rows] == [["mtgp", "transfer"], ["mtgp-raw", "transfer"],
                                     ["mtgp-raw", "mtgp"]]
    assert rows[2][3:5] == [1, 7]
    un = [run("unrelated", s, 100.0) for s in range(8)]
    mun = [run("mtgp-unrelated", s, 150.0) for s in range(8)]
    assert versus(un + mun, [])[-1][:5] == ["mtgp-unrelated", "unrelated", 8, 0, 8]
    rel = [run("transfer-relative", s, 40.0) for s in range(8)]
    unrel = [run("unrelated-relative", s, 100.0 if s else 120.0) for s in range(8)]
    rows = {(r[0], r[1]): r[3:5] for r in versus(base + better + rel + un + unrel, [])}
    assert rows[("transfer-relative", "transfer")] == [8, 0]
    assert rows[("mtgp", "transfer-relative")] == [0, 8]
    assert rows[("unrelated-relative", "unrelated")] == [0, 1]


def test_the_cheapest_way_to_the_target_takes_the_front_by_hypervolume_per_joule():
    from benchmarks.transfer import _greedy_to_target

    E = np.array([[1.0, 10.0], [10.0, 1.0], [3.0, 3.0], [50.0, 50.0]])
    ref = np.array([20.0, 20.0])
    pts = E / ref
    mx = ecopt.pareto.hypervolume(pts, [1.0, 1.0], ["min", "min"])
    k, joules = _greedy_to_target(E, ref, mx)
    # (1, 10) first (most hypervolume per joule), then (3, 3); 95% needs (10, 1) too
    assert (k, joules) == (3, 14.0)
    # a dominated configuration is never needed
    k2, j2 = _greedy_to_target(E[[0, 3]], ref, ecopt.pareto.hypervolume(
        pts[[0, 3]], [1.0, 1.0], ["min", "min"]))
    assert (k2, j2) == (1, 1.0)
