"""Transfer across GPUs on the Zeus traces: search energy to 95% of the true hypervolume.

For each of the six Zeus workloads and each direction (V100 -> A40, A40 -> V100),
per seed:

* ``cold``: qLogNEHVI on the target GPU from scratch (Sobol initial design).
* ``transfer``: the same, with ``transfer_from=`` a 20-trial cold study of the
  same workload on the other GPU (the first 20 trials of that GPU's cold run).
* ``by-hand``: cold qLogNEHVI after the source's Pareto set was enqueued first
  (``study.ask(params=...)``, what an Optuna user does with ``enqueue_trial``;
  points outside the target's space are left out).
* ``unrelated``: ``transfer_from=`` the same source with its objective values
  shuffled among its trials (values that mean nothing for the target).
* ``mtgp``, ``mtgp-raw``, ``mtgp-unrelated``: the MultiTaskGP alternative of
  :mod:`benchmarks._mtgp` (on logs; on raw values; from the unrelated arm's source).

Trial energy is the trace's measured GPU joules of one sampled training run
(Zeus, replayed); search energy to 95% = the joules of every trial up to the
first at which the hypervolume of the true values of the trials so far reaches
95% of the true front's (a run that never reaches it in ``--budget`` trials
counts as infinite). The proposals' own energy is an ESTIMATE on this CPU
(meter ``estimate``) and is reported apart (it is joules against the trials'
megajoules). A study stops once it reached the target (cold runs go on to 20
trials: their first 20 are the other direction's source).

    python -m benchmarks.transfer --seeds 3 --budget 40 --record docs/results/transfer/DATE

``--self-check K`` measures the source check instead: the ``self_trust`` of every
real 20-trial source (mapped into the target GPU's space) and of its shuffled
copies (the ``unrelated`` arm's, then ``K`` more shuffles), against the bars
``TRUST_MIN`` and ``SELF_TRUST_STRONG`` of :mod:`ecopt.samplers._transfer`.
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import sys
import tempfile
import time
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

import ecopt
from benchmarks.zeus import DEFAULT_TARGETS, ZeusTrace
from ecopt import pareto

TARGET = 0.95
SOURCE_TRIALS = 20
ARMS = ("cold", "transfer", "by-hand", "unrelated")
#: Every arm this script knows (``mtgp``: the MultiTaskGP alternative, :mod:`benchmarks._mtgp`).
ALL_ARMS = (*ARMS, "mtgp", "mtgp-raw", "mtgp-unrelated", "transfer-relative",
            "by-hand-relative", "unrelated-relative")
DIRECTIONS = (("v100", "a40"), ("a40", "v100"))
OBJS = [ecopt.Objective("energy_j", "min"), ecopt.Objective("time_s", "min")]


def _truncate(src: Path, dest: Path, n: int, shuffle_seed: int | None = None) -> Path:
    """A copy of study ``src`` holding its first ``n`` trials (values shuffled, if asked)."""
    dest.mkdir(parents=True)
    shutil.copy(src / "study.json", dest / "study.json")
    rows = [json.loads(line) for line in (src / "trials.jsonl").read_text().splitlines()
            if line.strip()][:n]
    if shuffle_seed is not None:
        rng = np.random.default_rng(shuffle_seed)
        ok = [i for i, r in enumerate(rows) if r.get("state") == "complete"]
        for key in ("energy_j", "time_s"):
            vals = [rows[i]["values"][key] for i in ok]
            perm = rng.permutation(len(vals))
            for i, j in zip(ok, perm):
                rows[i]["values"][key] = vals[j]
    (dest / "trials.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return dest


#: ``transfer_map`` of the ``transfer-relative`` arm: a power limit by its share of the GPU's
#: range (the A40 runs to 300 W, the V100 to 250 W).
RELATIVE = {"power_limit": "relative"}


def _rescale(src: Path, dest: Path, frm: ZeusTrace, to: ZeusTrace) -> Path:
    """A copy of study ``src`` (run on ``frm``'s GPU) with each power limit moved as
    ``transfer_map=RELATIVE`` moves it (:func:`ecopt.transfer.map_relative`) and the
    parameter declared as ``to``'s: the ``by-hand-relative`` arm's front, a user's
    rescaling by hand."""
    from ecopt.transfer import map_relative

    dest.mkdir(parents=True)
    spec = json.loads((src / "study.json").read_text())
    spec["space"]["power_limit"] = to.space()["power_limit"].to_dict()
    (dest / "study.json").write_text(json.dumps(spec))
    a, b = frm.space()["power_limit"], to.space()["power_limit"]
    rows = [json.loads(line) for line in (src / "trials.jsonl").read_text().splitlines()
            if line.strip()]
    for r in rows:
        if "power_limit" in r.get("params", {}):
            r["params"]["power_limit"] = map_relative(r["params"]["power_limit"], a, b)
    (dest / "trials.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return dest


def run_study(trace: ZeusTrace, seed: int, budget: int, storage: Path | None = None,
              transfer_from: Sequence[Path] = (), enqueue: Sequence[dict[str, Any]] = (),
              min_trials: int = 0, transfer_map: dict[str, str] | None = None
              ) -> dict[str, Any]:
    """One study on ``trace``; stops after reaching the target (and ``min_trials``).

    Proposals are full ones (``proposal_share=None``): the trials are GPU runs of
    kilojoules to megajoules, on which the default rule keeps full proposals
    (``docs/results/pruning/2026-12-06-economy-zeus``); replayed here, they cost this
    CPU nothing, and the rule would economise every proposal of the cold arm."""
    sampler = ecopt.samplers.QLogNEHVISampler(seed=seed, proposal_share=None)
    study = ecopt.Study(trace.space(), OBJS, storage=storage, sampler=sampler,
                        meter="estimate", seed=seed, transfer_from=list(transfer_from) or None,
                        transfer_map=transfer_map)
    queue = []
    for p in enqueue:
        try:
            queue.append(study.space.validate(p))
        except (ValueError, TypeError):
            continue
    out = _drive(study, trace, seed, budget, min_trials,
                 lambda: study.ask(params=queue.pop(0)) if queue else study.ask())
    out["proposal_energy_j_estimated"] = sum(
        r.proposal.get("search", {}).get("energy_j", 0.0) or 0.0 for r in study.records)
    study.close()
    return out


def run_mtgp_study(trace: ZeusTrace, seed: int, budget: int, source: Path,
                   log_values: bool = True) -> dict[str, Any]:
    """The ``mtgp`` arm: per-objective MultiTaskGPs with the source as a task
    (:mod:`benchmarks._mtgp`; ``log_values=False``: the ``mtgp-raw`` arm, values not
    log-transformed)."""
    from benchmarks._mtgp import MTGPProposer
    from ecopt.meters.estimate import DEFAULT_CPU_W_PER_CORE

    study = ecopt.Study(trace.space(), OBJS, sampler="random", meter="estimate", seed=seed)
    cands = [{d: (row[d] if d == "optimizer" else int(row[d]) if float(row[d]).is_integer()
                  else float(row[d])) for d in trace.dims}
             for _, row in trace.configs.iterrows()]
    prop = MTGPProposer(study.space, OBJS, source, cands, log_values=log_values)

    def ask() -> ecopt.Trial | None:
        p = prop.propose(study.records, [dict(r.params) for r in study.records])
        return None if p is None else study.ask(params=p)

    out = _drive(study, trace, seed, budget, 0, ask)
    out["proposal_energy_j_estimated"] = prop.cpu_s * DEFAULT_CPU_W_PER_CORE
    study.close()
    return out


def _drive(study: ecopt.Study, trace: ZeusTrace, seed: int, budget: int, min_trials: int,
           ask: Any) -> dict[str, Any]:
    """Run ``study`` on ``trace`` with ``ask()`` giving each trial (``None``: nothing left)."""
    ref = trace.ref_point()
    max_hv = trace.max_hv()
    rng = np.random.default_rng(10_000 + seed)
    energy = 0.0
    true_pts: list[np.ndarray] = []
    e95 = math.inf
    hv_curve: list[float] = []
    trust = []
    for i in range(budget):
        t = ask()
        if t is None:
            break
        try:
            y = trace.sample(t.params, rng)
        except ValueError:  # a hole in the product space
            study.tell(t, state="failed")
            hv_curve.append(hv_curve[-1] if hv_curve else 0.0)
            continue
        study.tell(t, {"energy_j": float(y[0]), "time_s": float(y[1])})
        energy += float(y[0])
        true_pts.append(trace.true_values(t.params) / ref)
        hv = pareto.hypervolume(np.array(true_pts), [1.0, 1.0], ["min", "min"]) / max_hv
        hv_curve.append(hv)
        note = t.proposal.get("transfer") if isinstance(t.proposal, dict) else None
        if note:
            trust.append(note["sources"][0].get("trust"))
        if hv >= TARGET and not math.isfinite(e95):
            e95 = energy
        if math.isfinite(e95) and i + 1 >= min_trials:
            break
    return {"energy_to_95_j": e95, "trials": len(hv_curve),
            "final_hv": hv_curve[-1] if hv_curve else 0.0, "trust": trust}


def _front_params(path: Path) -> list[dict[str, Any]]:
    s = ecopt.load_study(path)
    return [dict(r.params) for r in sorted(s.best_trials(), key=lambda r: r.values["energy_j"])]


def run_seed(workload: tuple[str, str], seed: int, budget: int, root: Path,
             arms: Sequence[str] = ARMS) -> list[dict[str, Any]]:
    """The arms of one workload, both directions, one seed (``cold`` always runs: the
    sources are its first 20 trials)."""
    d, n = workload
    traces = {g: ZeusTrace.load(TRACE_DIR, d, n, gpu=g) for g in ("v100", "a40")}
    out = []
    cold_dirs: dict[str, Path] = {}
    cold: dict[str, dict[str, Any]] = {}
    for g in ("v100", "a40"):
        cold_dirs[g] = root / f"cold-{g}"
        cold[g] = run_study(traces[g], seed, max(budget, SOURCE_TRIALS), cold_dirs[g],
                            min_trials=SOURCE_TRIALS)
    for src_gpu, dst_gpu in DIRECTIONS:
        src = _truncate(cold_dirs[src_gpu], root / f"src-{src_gpu}", SOURCE_TRIALS)
        junk = _truncate(cold_dirs[src_gpu], root / f"junk-{src_gpu}", SOURCE_TRIALS,
                         shuffle_seed=seed)
        rel = (_rescale(src, root / f"rel-{src_gpu}", traces[src_gpu], traces[dst_gpu])
               if "by-hand-relative" in arms else src)
        make = {"transfer": lambda: run_study(traces[dst_gpu], seed, budget, transfer_from=[src]),
                "transfer-relative": lambda: run_study(traces[dst_gpu], seed, budget,
                                                       transfer_from=[src],
                                                       transfer_map=RELATIVE),
                "by-hand-relative": lambda: run_study(traces[dst_gpu], seed, budget,
                                                      enqueue=_front_params(rel)),
                "unrelated-relative": lambda: run_study(traces[dst_gpu], seed, budget,
                                                        transfer_from=[junk],
                                                        transfer_map=RELATIVE),
                "by-hand": lambda: run_study(traces[dst_gpu], seed, budget,
                                             enqueue=_front_params(src)),
                "unrelated": lambda: run_study(traces[dst_gpu], seed, budget,
                                               transfer_from=[junk]),
                "mtgp": lambda: run_mtgp_study(traces[dst_gpu], seed, budget, src),
                "mtgp-raw": lambda: run_mtgp_study(traces[dst_gpu], seed, budget, src,
                                                   log_values=False),
                "mtgp-unrelated": lambda: run_mtgp_study(traces[dst_gpu], seed, budget, junk)}
        runs = {"cold": cold[dst_gpu], **{a: make[a]() for a in arms if a != "cold"}}
        for arm, r in runs.items():
            out.append({"workload": f"{d}", "direction": f"{src_gpu}->{dst_gpu}",
                        "arm": arm, "seed": seed, **r})
    return out


def _greedy_to_target(E: np.ndarray, ref: np.ndarray, max_hv: float) -> tuple[int, float]:
    """The fewest-joules way to 95% of the hypervolume found greedily (each step the
    configuration with the most hypervolume gained per joule), on the expected values
    ``E`` ``(n, 2)``: ``(configurations, their joules)``."""
    pts = E / ref
    chosen: list[int] = []
    hv = energy = 0.0
    while hv < TARGET and len(chosen) < len(E):
        best = None
        for i in range(len(E)):
            if i in chosen:
                continue
            h = pareto.hypervolume(pts[chosen + [i]], [1.0, 1.0], ["min", "min"]) / max_hv
            gain = (h - hv) / E[i, 0]
            if best is None or gain > best[0]:
                best = (gain, i, h)
        assert best is not None
        chosen.append(best[1])
        energy += float(E[best[1], 0])
        hv = best[2]
    return len(chosen), energy


def fronts(workload: tuple[str, str], cold: Sequence[dict[str, Any]] = ()) -> list[list[Any]]:
    """What a source can point at, per direction: the source GPU's true Pareto set
    evaluated on the target GPU (the hypervolume share it reaches, on the expected values;
    by value and with power limits mapped by share of the range),
    and the cheapest way to 95% on the target (greedy, :func:`_greedy_to_target`); with
    ``cold`` runs (another record's), cold's median energy to 95% over that."""
    from ecopt.transfer import map_relative

    d, n = workload
    traces = {g: ZeusTrace.load(TRACE_DIR, d, n, gpu=g) for g in ("v100", "a40")}
    out = []
    for src_gpu, dst_gpu in DIRECTIONS:
        S, T = traces[src_gpu], traces[dst_gpu]
        ref, mx = T.ref_point(), T.max_hv()
        Et = T.expected()
        src_front = S.configs[pareto.non_dominated(S.expected(), ["min", "min"])]
        shares, n_in = [], 0
        for relative in (False, True):
            pts = []
            for _, row in src_front.iterrows():
                p = {k: row[k] for k in S.dims}
                if relative:
                    p["power_limit"] = map_relative(p["power_limit"], S.space()["power_limit"],
                                                    T.space()["power_limit"])
                try:
                    pts.append(T.true_values(p) / ref)
                except (ValueError, KeyError):
                    continue  # not a configuration of the target's trace
            if not relative:
                n_in = len(pts)
            shares.append(pareto.hypervolume(np.array(pts), [1.0, 1.0], ["min", "min"]) / mx
                          if pts else 0.0)
        share, share_rel = shares
        k, joules = _greedy_to_target(Et, ref, mx)
        direction = f"{src_gpu}->{dst_gpu}"
        c = [r["energy_to_95_j"] for r in cold
             if r["workload"] == d and r["direction"] == direction and r["arm"] == "cold"]
        med = float(np.median(c)) if c else None
        out.append([d, direction, len(Et),
                    int(pareto.non_dominated(Et, ["min", "min"]).sum()), len(src_front),
                    n_in, round(float(share), 4), round(float(share_rel), 4), k, joules, med,
                    None if med is None else med / joules])
    return out


FRONT_COLUMNS = ["workload", "direction", "target configurations", "target Pareto set",
                 "source Pareto set", "of it in the target's space",
                 "its share of the target's hypervolume",
                 "its share, power limits mapped by share of the range (transfer_map)",
                 "fewest configurations to 95%",
                 "their energy (J, expected)", "cold: median energy to 95% (J, --versus record)",
                 "cold over the fewest"]


def self_check_seed(workload: tuple[str, str], seed: int, root: Path, shuffles: int
                    ) -> list[dict[str, Any]]:
    """``self_trust`` of each direction's 20-trial source (one seed), mapped into the target
    GPU's space as ``transfer_from`` maps it, and of shuffled copies of it: the
    ``unrelated`` arm's (``shuffle_seed=seed``), then ``shuffles`` more."""
    from ecopt.samplers._transfer import TransferModel
    from ecopt.transfer import load_sources

    d, n = workload
    traces = {g: ZeusTrace.load(TRACE_DIR, d, n, gpu=g) for g in ("v100", "a40")}
    out = []
    for src_gpu, dst_gpu in DIRECTIONS:
        cold = root / f"cold-{src_gpu}"
        run_study(traces[src_gpu], seed, SOURCE_TRIALS * 2, cold, min_trials=SOURCE_TRIALS)
        space = traces[dst_gpu].space()

        def own(path: Path) -> float | None:
            return TransferModel(load_sources([path], space, OBJS), space, OBJS).self_trust(0)

        real = own(_truncate(cold, root / f"src-{src_gpu}", SOURCE_TRIALS))
        junk = [own(_truncate(cold, root / f"junk-{src_gpu}-{j}", SOURCE_TRIALS,
                              shuffle_seed=s))
                for j, s in enumerate([seed, *(1000 + i for i in range(shuffles))])]
        out.append({"workload": d, "direction": f"{src_gpu}->{dst_gpu}", "seed": seed,
                    "real": real, "shuffled": junk})
    return out


SELF_CHECK_COLUMNS = ["workload", "sources", "not checked (< SELF_CHECK_MIN trials mapped)",
                      "real: median self_trust", "real: lowest", "real >= TRUST_MIN",
                      "real >= SELF_TRUST_STRONG", "shuffled copies", "shuffled >= TRUST_MIN",
                      "shuffled >= SELF_TRUST_STRONG", "shuffled: highest"]


def summarise_self_check(rows: Sequence[dict[str, Any]]
                         ) -> tuple[list[list[Any]], dict[str, Any]]:
    """Per workload and overall: shares of the checked real and shuffled sources at each bar
    (a source with fewer than ``SELF_CHECK_MIN`` trials in the target's space is not checked:
    ``self_trust`` None, counted apart)."""
    from ecopt.samplers._transfer import SELF_TRUST_STRONG, TRUST_MIN

    def line(name: str, part: Sequence[dict[str, Any]]) -> list[Any]:
        real = np.array([r["real"] for r in part if r["real"] is not None], dtype=float)
        junk = np.array([j for r in part for j in r["shuffled"] if j is not None], dtype=float)
        stats = [None] * 8 if not len(real) else [
            float(np.median(real)), float(real.min()), float(np.mean(real >= TRUST_MIN)),
            float(np.mean(real >= SELF_TRUST_STRONG)), len(junk),
            float(np.mean(junk >= TRUST_MIN)), float(np.mean(junk >= SELF_TRUST_STRONG)),
            float(junk.max())]
        return [name, len(part), sum(r["real"] is None for r in part), *stats]

    names = sorted({r["workload"] for r in rows})
    table = [line(w, [r for r in rows if r["workload"] == w]) for w in names]
    table.append(line("all", rows))
    facts = dict(zip(SELF_CHECK_COLUMNS[1:], table[-1][1:]))
    facts.update(trust_min=TRUST_MIN, self_trust_strong=SELF_TRUST_STRONG)
    return table, facts


def _p_less(a: Sequence[float], b: Sequence[float]) -> float | None:
    from scipy.stats import mannwhitneyu

    big = 1e30
    a2 = [x if math.isfinite(x) else big for x in a]
    b2 = [x if math.isfinite(x) else big for x in b]
    if len(a2) < 2 or len(b2) < 2 or (len(set(a2)) == 1 and set(a2) == set(b2)):
        return None
    return float(mannwhitneyu(a2, b2, alternative="less").pvalue)


def _worst_cost(ratios: Sequence[float]) -> float | None:
    """The highest per-run energy over cold's, from the per-run savings (cold's over the
    arm's; 0 where the arm never reached the target and cold did)."""
    if not ratios:
        return None
    low = min(ratios)
    return math.inf if low == 0 else 1.0 / low


def summarise(runs: Sequence[dict[str, Any]]) -> tuple[list[list[Any]], dict[str, Any]]:
    """Table rows (per workload, direction, arm) and overall facts."""
    rows = []
    arms = [a for a in ALL_ARMS if any(r["arm"] == a for r in runs)]
    ratios: dict[str, list[float]] = {a: [] for a in arms}
    worse: dict[str, int] = {a: 0 for a in arms}
    counts: dict[str, int] = {a: 0 for a in arms}
    keys = sorted({(r["workload"], r["direction"]) for r in runs})
    for w, dr in keys:
        by = {a: sorted((r for r in runs if r["workload"] == w and r["direction"] == dr
                         and r["arm"] == a), key=lambda r: r["seed"]) for a in arms}
        base = [r["energy_to_95_j"] for r in by["cold"]]
        med_base = float(np.median(base))
        for a in arms:
            e = [r["energy_to_95_j"] for r in by[a]]
            med = float(np.median(e))
            saving = med_base / med if math.isfinite(med) and med > 0 else 0.0
            if a != "cold":
                for x, c in zip(e, base):
                    # both never reached the target: the same outcome (ratio 1)
                    ratios[a].append(1.0 if math.isinf(x) and math.isinf(c)
                                     else (c / x) if math.isfinite(x) and x > 0 else 0.0)
                    worse[a] += int(x > c)
                    counts[a] += 1
            tr = [r["trust"][-1] for r in by[a] if r["trust"] and r["trust"][-1] is not None]
            rows.append([w, dr, a, len(e), sum(math.isfinite(x) for x in e),
                         med if math.isfinite(med) else None,
                         round(saving, 3) if a != "cold" else None,
                         None if a == "cold" else _p_less(e, base),
                         float(np.mean([r["trials"] for r in by[a]])),
                         float(np.median(tr)) if tr else None,
                         float(np.median([r["proposal_energy_j_estimated"] for r in by[a]]))])
    facts = {a: {"median_saving_x": float(np.median(ratios[a])) if ratios[a] else None,
                 "runs_worse_than_cold": worse[a], "runs": counts[a],
                 "worst_cost_vs_cold_x": _worst_cost(ratios[a])}
             for a in arms if a != "cold"}
    return rows, facts


#: Log energy ratio below which two runs tie (records keep 6 significant digits).
TIE = 1e-5


def paired(runs: Sequence[dict[str, Any]], other: Sequence[dict[str, Any]]
           ) -> dict[str, Any]:
    """Run by run (same workload, direction and seed), ``runs`` against ``other``: how many
    needed less / more energy to 95% and the one-sided Wilcoxon signed-rank p that
    ``runs`` need less (on the log energy ratios, :data:`TIE` apart at least; a run that
    never reached the target counts as 1e30 J, two such runs as a tie)."""
    from scipy.stats import wilcoxon

    key = lambda r: (r["workload"], r["direction"], r["seed"])  # noqa: E731
    theirs = {key(r): r["energy_to_95_j"] for r in other}
    big = 1e30
    d = [math.log(min(theirs[key(r)], big)) - math.log(min(r["energy_to_95_j"], big))
         for r in runs if key(r) in theirs]
    nz = [x for x in d if abs(x) > TIE]
    p = float(wilcoxon(nz, alternative="greater").pvalue) if len(nz) >= 2 else None
    return {"runs": len(d), "less": sum(x > TIE for x in d),
            "more": sum(x < -TIE for x in d), "p_less": p}


def versus(runs: Sequence[dict[str, Any]], other: Sequence[dict[str, Any]]
           ) -> list[list[Any]]:
    """Each arm but cold of ``runs`` against the same arm of ``other`` (another record's
    runs), and, within ``runs``, each other arm against ``transfer``, ``mtgp-raw``
    against ``mtgp``, ``mtgp-unrelated`` against ``unrelated``, ``by-hand-relative`` and
    ``mtgp`` against ``transfer-relative``, and each ``-relative`` arm against the same
    arm by value (:func:`paired`)."""
    arms = [a for a in ALL_ARMS if a != "cold" and any(r["arm"] == a for r in runs)]
    of = lambda rs, a: [r for r in rs if r["arm"] == a]  # noqa: E731
    out = []
    for a in arms:
        if of(other, a):
            f = paired(of(runs, a), of(other, a))
            out.append([a, f"{a} (other record)", f["runs"], f["less"], f["more"], f["p_less"]])
    pairs = [(a, "transfer") for a in arms if a != "transfer"] + [
        ("mtgp-raw", "mtgp"), ("mtgp-unrelated", "unrelated"),
        ("by-hand-relative", "transfer-relative"), ("mtgp", "transfer-relative"),
        ("by-hand-relative", "by-hand"), ("unrelated-relative", "unrelated")]
    for a, b in pairs:
        if of(runs, a) and of(runs, b):
            f = paired(of(runs, a), of(runs, b))
            out.append([a, b, f["runs"], f["less"], f["more"], f["p_less"]])
    return out


VERSUS_COLUMNS = ["arm", "against", "paired runs", "runs needing less energy",
                  "runs needing more", "p (less energy, Wilcoxon signed-rank)"]

COLUMNS = ["workload", "direction", "arm", "seeds", "reached 95% HV",
           "median search energy to 95% HV (J, Zeus-measured, replayed)",
           "saving vs cold (median ratio)", "p (less energy than cold)", "mean trials run",
           "median final trust", "median proposal energy (J, ESTIMATED)"]
TRACE_DIR = Path("/work/shared/data/zeus-traces")


def main(argv: Sequence[str] | None = None) -> int:
    global TRACE_DIR
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--seed-offset", type=int, default=0)
    ap.add_argument("--budget", type=int, default=40, help="max trials per study")
    ap.add_argument("--workloads", nargs="*", default=None, help="datasets (default: all six)")
    ap.add_argument("--arms", nargs="+", default=list(ARMS), choices=ALL_ARMS,
                    help="arms to run (cold always runs); mtgp: the MultiTaskGP alternative "
                    "(mtgp-raw: on the values, not their logs; mtgp-unrelated: from the "
                    "unrelated arm's shuffled source); transfer-relative: transfer_map="
                    "{'power_limit': 'relative'}; by-hand-relative: the source's front with "
                    "its power limits moved the same way; unrelated-relative: the shuffled "
                    "source with that map)")
    ap.add_argument("--zeus-dir", default=str(TRACE_DIR))
    ap.add_argument("--record", default=None, help="docs/results/transfer/<date> to write")
    ap.add_argument("--runs-json", default=None, help="also write every run here")
    ap.add_argument("--load-runs", nargs="+", default=None,
                    help="summarise runs written before (--runs-json files; several are joined)")
    ap.add_argument("--note", action="append", default=[], help="a caveat kept with the record")
    ap.add_argument("--versus", default=None, metavar="RECORD",
                    help="also compare each arm, run by run, with the same arm of this "
                    "recorded run (docs/results/transfer/<tag>)")
    ap.add_argument("--fronts", action="store_true",
                    help="what a source can point at (the source GPU's true Pareto set on the "
                    "target, the cheapest way to 95%%) instead of running studies")
    ap.add_argument("--self-check", type=int, default=None, metavar="K",
                    help="measure the sources' self_trust (and K more shuffles of each) instead")
    args = ap.parse_args(argv)
    TRACE_DIR = Path(args.zeus_dir)
    workloads = [k for k in DEFAULT_TARGETS if args.workloads is None or k[0] in args.workloads]
    warnings.simplefilter("ignore")
    if args.self_check is not None:
        return _self_check_main(args, workloads, argv)
    if args.fronts:
        return _fronts_main(args, workloads, argv)
    runs = _collect(args, workloads,
                    lambda w, seed, root: run_seed(w, seed, args.budget, root, args.arms))
    rows, facts = summarise(runs)
    _print_table(COLUMNS, rows)
    print(json.dumps(facts, indent=2))
    vs = versus(runs, _other_runs(args.versus))
    if vs:
        _print_table(VERSUS_COLUMNS, vs)
    if args.record:
        from docs import recorded

        n_seeds = len({r["seed"] for r in runs})
        _write(
            args, argv,
            tables={"transfer": recorded.Table(COLUMNS, rows),
                    "overall": recorded.Table(
                        ["arm", "median saving vs cold (per-run ratio)", "runs worse than cold",
                         "runs", "worst run: energy over cold's"],
                        [[a, f["median_saving_x"], f["runs_worse_than_cold"], f["runs"],
                          f["worst_cost_vs_cold_x"]]
                         for a, f in facts.items()]),
                    **({"versus": recorded.Table(VERSUS_COLUMNS, vs)} if vs else {})},
            energy={"meter": "Zeus traces (V100, A40): measured GPU joules, replayed; "
                             "proposals: estimate", "measured": False,
                    "note": "trial energy is Zeus's measured GPU energy replayed from the "
                            "traces; the proposals' energy is ESTIMATED on this CPU (meter "
                            "'estimate', no RAPL)"},
            title="Transfer across GPUs: search energy to 95% of the true hypervolume",
            notes=[f"{n_seeds} seeds (the issue asks 10; what fitted the time on a shared "
                   f"2-core machine), budget {args.budget} trials per study; a run that never "
                   "reached 95% counts as infinite energy (median shown as '-' when it is)",
                   "saving = cold's energy to 95% over the arm's, per seed (median over "
                   "seeds and workloads in 'overall'); p = one-sided Mann-Whitney U that the "
                   "arm needs less energy than cold", *args.note],
            facts={"target_fraction_of_max_hv": TARGET, "source_trials": SOURCE_TRIALS,
                   "overall": facts, "versus_record": args.versus, "runs": runs})
    return 0


def _print_table(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    """``rows`` as a markdown table on stdout (floats to 4 significant digits, None as -)."""
    print("| " + " | ".join(columns) + " |")
    for r in rows:
        print("| " + " | ".join("-" if c is None else f"{c:.4g}" if isinstance(c, float)
                                 else str(c) for c in r) + " |")


def _collect(args: argparse.Namespace, workloads: Sequence[tuple[str, str]],
             one: Any) -> list[dict[str, Any]]:
    """The rows of ``--load-runs`` files, or ``one(workload, seed, tmp dir)``'s for every
    seed and workload (written to ``--runs-json`` after each)."""
    rows: list[dict[str, Any]] = []
    if args.load_runs:
        for f in args.load_runs:
            rows += json.loads(Path(f).read_text())
        return rows
    t0 = time.time()
    for seed in range(args.seed_offset, args.seed_offset + args.seeds):
        for w in workloads:
            with tempfile.TemporaryDirectory() as tmp:
                rows += one(w, seed, Path(tmp))
            print(f"seed {seed} {w[0]}: {time.time() - t0:.0f} s", file=sys.stderr, flush=True)
            if args.runs_json:
                Path(args.runs_json).write_text(json.dumps(rows, default=str))
    return rows


def _other_runs(path: str | None) -> list[dict[str, Any]]:
    """The runs of a recorded run (``--versus``), unreached energies as ``inf``."""
    if not path:
        return []
    return [{**r, "energy_to_95_j": math.inf if r["energy_to_95_j"] is None
             else r["energy_to_95_j"]}
            for r in json.loads((Path(path) / "summary.json").read_text())["facts"]["runs"]]


def _write(args: argparse.Namespace, argv: Sequence[str] | None, **kw: Any) -> None:
    """Record this run under ``--record`` (``docs.recorded.write_run``'s other arguments)."""
    from docs import recorded

    recorded.write_run(Path(args.record), script="benchmarks/transfer.py",
                       command="python -m benchmarks.transfer " + " ".join(argv or sys.argv[1:]),
                       **kw)


def _fronts_main(args: argparse.Namespace, workloads: Sequence[tuple[str, str]],
                 argv: Sequence[str] | None) -> int:
    cold = _other_runs(args.versus)
    table = [row for w in workloads for row in fronts(w, cold)]
    _print_table(FRONT_COLUMNS, table)
    if args.record:
        from docs.recorded import Table

        _write(
            args, argv, tables={"fronts": Table(FRONT_COLUMNS, table)},
            energy={"meter": "Zeus traces (V100, A40): measured GPU joules", "measured": True,
                    "note": "expected (mean) measured GPU joules per configuration of the "
                            "traces; no study is run"},
            title="Transfer across GPUs: what the source GPU's front says about the target's",
            notes=["share: hypervolume of the source GPU's true Pareto set (expected values), "
                   "evaluated on the target GPU, over the target's true front; fewest: greedy, "
                   "the configuration with the most hypervolume per joule first, until 95%",
                   *args.note],
            facts={"versus_record": args.versus, "rows": table})
    return 0


def _self_check_main(args: argparse.Namespace, workloads: Sequence[tuple[str, str]],
                     argv: Sequence[str] | None) -> int:
    rows = _collect(args, workloads,
                    lambda w, seed, root: self_check_seed(w, seed, root, args.self_check))
    table, facts = summarise_self_check(rows)
    _print_table(SELF_CHECK_COLUMNS, table)
    if args.record:
        from docs.recorded import Table

        _write(
            args, argv, tables={"self_check": Table(SELF_CHECK_COLUMNS, table)},
            energy=None,
            title="Transfer sources' self-check: real and shuffled Zeus sources",
            notes=["self_trust: leave-one-out ranking of a source's 20 trials by its own GP "
                   "(Kendall's tau clipped at 0, mean over energy and time); shuffled: the "
                   "values of each objective permuted among the trials, as the unrelated "
                   "arm's source", *args.note],
            facts={**facts, "sources": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
