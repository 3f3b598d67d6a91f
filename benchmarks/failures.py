"""Failing regions: trials wasted on failures and the hypervolume reached, ecopt against peers.

Usage (from the repository root)::

    python -m benchmarks.failures --quick                          # 2 seeds, 20 evaluations
    nice -n 5 python -m benchmarks.failures --seeds 10 --out runs/failures
    python -m benchmarks.failures --report-only --out runs/failures --record

The problem is ``benchmarks/mobo.py``'s BraninCurrin (noiseless, minimised, its known
reference point) with a failing region: a box of 10% or 30% of the unit square around
Branin's minimum at (0.543, 0.152), on the Pareto set (``x`` in ``0.543 +- a/2``, ``y``
in ``[0, a]``, ``a = sqrt(share)``). Every configuration inside it raises the same
``RuntimeError`` from the same line (a NaN loss at a high learning rate, a shape error for
one architecture, a library bug on one backend behave alike). Every method starts from
the same ``2 (d + 1)`` scrambled Sobol points of the seed and has the same budget of
evaluations, failures included:

* ``ecopt``: ``QLogNEHVISampler(failures="learn")``, the default: failed points are
  pending points, failing regions train a failure model; ``optimize()`` with its
  default ``fail_fast=3``, so a healthy study stopped by it shows up (``stopped``);
* ``ecopt-pending``: ``failures="pending"``, Ax's rule written by hand (failed points
  passed to the acquisition as ``X_pending``), ``fail_fast=None``;
* ``ecopt-before``: ``failures="ignore"``, ecopt before this rule (a failed trial
  teaches nothing), ``fail_fast=None``;
* ``optuna-gp``: Optuna's ``GPSampler``, failed trials told ``FAIL``;
* ``optuna-tpe``: Optuna's ``TPESampler(multivariate=True)``, the same.

Scores: ``wasted`` is the number of evaluations that failed (each a whole trial's
energy in a real study); the hypervolume is that of the true values of the evaluated
points that did not fail, against the problem's reference point (mobo.py's scoring).
Each finished run is appended to ``<out>/runs-<tag>.jsonl`` (resumable).
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import shlex
import sys
import time
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # ``python benchmarks/failures.py``
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np

from benchmarks.mobo import (
    _code_commit,
    _hv_curve,
    _mean_2se,
    _optuna_distributions,
    initial_design,
)
from benchmarks.problems import Problem, make_problem

__all__ = ["METHODS", "REFERENCE", "SHARES", "Region", "run_one", "summarise", "main"]

REFERENCE = "ecopt"
METHODS: dict[str, str] = {
    "ecopt": 'ecopt QLogNEHVISampler(failures="learn"), optimize(fail_fast=3)',
    "ecopt-pending": 'ecopt QLogNEHVISampler(failures="pending"): Ax\'s rule by hand',
    "ecopt-before": 'ecopt QLogNEHVISampler(failures="ignore"): failures teach nothing',
    "optuna-gp": "Optuna GPSampler, failed trials told FAIL",
    "optuna-tpe": "Optuna TPESampler(multivariate=True), failed trials told FAIL",
}
#: The failing region's share of the unit square.
SHARES = (0.1, 0.3)
#: Centre of the region's x range (Branin's minimum near x1 = pi, on the Pareto set).
CENTRE_X = 0.543


class RegionFailure(RuntimeError):
    """What the objective raises inside the failing region."""


class Region:
    """A box of ``share`` of the unit square: ``x`` in ``CENTRE_X +- a/2``, ``y`` in ``[0, a]``.

    Args:
        share: Its area, in ``(0, 1)``.
    """

    def __init__(self, share: float) -> None:
        if not 0 < share < 1:
            raise ValueError(f"0 < share < 1 must hold, got share={share}")
        self.share = share
        a = math.sqrt(share)
        self.x = (CENTRE_X - a / 2, CENTRE_X + a / 2)
        self.y = (0.0, a)

    def __contains__(self, params: dict[str, Any]) -> bool:
        x, y = float(params["x0"]), float(params["x1"])
        return self.x[0] <= x <= self.x[1] and self.y[0] <= y <= self.y[1]

    def check(self, params: dict[str, Any]) -> None:
        """Raise :class:`RegionFailure` inside the region (always from this line)."""
        if params in self:
            raise RegionFailure("NaN loss")


def _ecopt(problem: Problem, region: Region, method: str, seed: int, budget: int
           ) -> tuple[list[dict[str, Any]], list[bool], int | None]:
    import ecopt
    from ecopt.samplers import QLogNEHVISampler

    rule = {"ecopt": "learn", "ecopt-pending": "pending", "ecopt-before": "ignore"}[method]
    sampler = QLogNEHVISampler(seed=seed, n_init=problem.n_init, failures=rule)
    study = ecopt.Study(problem.space, problem.objectives(True), sampler=sampler,
                        meter="wallclock", seed=seed)
    names = problem.objective_names

    def objective(trial: ecopt.Trial) -> dict[str, float]:
        region.check(trial.params)
        y = problem.true_fn(trial.params)
        return {n: float(v) for n, v in zip(names, y)}

    stopped = None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            study.optimize(objective, n_trials=budget,
                           fail_fast=3 if method == "ecopt" else None)
        except ecopt.SystematicFailureError:
            stopped = len(study.records)
    recs = sorted(study.records, key=lambda r: r.number)
    return ([dict(r.params) for r in recs],
            [r.state is ecopt.TrialState.FAILED for r in recs], stopped)


def _optuna(problem: Problem, region: Region, method: str, seed: int, budget: int
            ) -> tuple[list[dict[str, Any]], list[bool], int | None]:
    import optuna

    optuna.logging.set_verbosity(optuna.logging.ERROR)
    n = problem.n_init
    sampler = (optuna.samplers.GPSampler(seed=seed, n_startup_trials=n) if method == "optuna-gp"
               else optuna.samplers.TPESampler(seed=seed, multivariate=True,
                                               n_startup_trials=n))
    study = optuna.create_study(directions=["minimize"] * problem.n_obj, sampler=sampler)
    for params in initial_design(problem, seed):
        study.enqueue_trial(params)
    dists = _optuna_distributions(problem)
    params_seq: list[dict[str, Any]] = []
    failed: list[bool] = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        while len(params_seq) < budget:
            trial = study.ask(fixed_distributions=dists)
            params = {k: trial.params[k] for k in problem.space.searched_names}
            params_seq.append(params)
            try:
                region.check(params)
            except RegionFailure:
                failed.append(True)
                study.tell(trial, state=optuna.trial.TrialState.FAIL)
                continue
            failed.append(False)
            study.tell(trial, [float(v) for v in problem.true_fn(params)])
    return params_seq, failed, None


def run_one(problem: Problem, share: float, method: str, seed: int, budget: int
            ) -> dict[str, Any]:
    """One (share, method, seed) run: evaluated points, which failed, the HV curve."""
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; expected one of {list(METHODS)}")
    region = Region(share)
    t0 = time.perf_counter()
    runner = _ecopt if method.startswith("ecopt") else _optuna
    params_seq, failed, stopped = runner(problem, region, method, seed, budget)
    curve = _hv_curve(problem, [p for p, f in zip(params_seq, failed) if not f])
    return {"problem": problem.name, "share": share, "method": method, "seed": seed,
            "budget": budget, "n_init": problem.n_init, "max_hv": problem.max_hv,
            "params": params_seq, "failed": failed, "wasted": int(sum(failed)),
            "stopped": stopped, "final_hv": curve[-1] if curve else 0.0,
            "wall_s": time.perf_counter() - t0, "git_commit": _code_commit()}


def _load(out: Path) -> list[dict[str, Any]]:
    runs: dict[tuple[Any, ...], dict[str, Any]] = {}
    for f in sorted(out.glob("runs-*.jsonl")):
        for line in f.read_text().splitlines():
            try:
                r = json.loads(line)
            except json.JSONDecodeError:
                continue  # a line cut short by a kill
            runs[(r["share"], r["method"], r["seed"], r["budget"])] = r
    return list(runs.values())


def summarise(runs: Sequence[dict[str, Any]]) -> dict[float, dict[str, Any]]:
    """Per region share: per method, wasted trials and final HV over the seeds every
    method finished, with one-sided Mann-Whitney p values against :data:`REFERENCE`."""
    from scipy.stats import mannwhitneyu

    out: dict[float, dict[str, Any]] = {}
    for share in sorted({r["share"] for r in runs}):
        sr = [r for r in runs if r["share"] == share]
        methods = [m for m in METHODS if any(r["method"] == m for r in sr)]
        seeds = sorted(set.intersection(*[{r["seed"] for r in sr if r["method"] == m}
                                          for m in methods]))
        by = {m: sorted((r for r in sr if r["method"] == m and r["seed"] in seeds),
                        key=lambda r: r["seed"]) for m in methods}
        ref = by.get(REFERENCE, [])
        rows: dict[str, Any] = {}
        for m, rs in by.items():
            wasted = [r["wasted"] for r in rs]
            hv = [r["final_hv"] / r["max_hv"] for r in rs]
            row = {"seeds": len(rs), "wasted_mean": _mean_2se(wasted),
                   "wasted_median": float(np.median(wasted)), "wasted_max": max(wasted),
                   "hv": _mean_2se(hv), "stopped": sum(r["stopped"] is not None for r in rs)}
            if m != REFERENCE and ref:
                rw, rh = [r["wasted"] for r in ref], [r["final_hv"] / r["max_hv"] for r in ref]
                row["p_fewer_wasted"] = float(mannwhitneyu(rw, wasted, alternative="less").pvalue)
                row["p_hv_lower"] = float(mannwhitneyu(rh, hv, alternative="less").pvalue)
            rows[m] = row
        out[share] = {"seeds": seeds, "rows": rows, "budget": sr[0]["budget"]}
    return out


def tables(summary: dict[float, dict[str, Any]]) -> dict[str, Any]:
    """One table per region share (docs.recorded Tables)."""
    from docs.recorded import Table

    cols = ["method", "seeds", "wasted (mean [+-2 SE])", "wasted median", "wasted max",
            "final HV / max (mean [+-2 SE])", "stopped by fail_fast", "p fewer wasted",
            "p HV lower"]
    out = {}
    for share, s in summary.items():
        rows = [[m, r["seeds"], r["wasted_mean"], r["wasted_median"], r["wasted_max"], r["hv"],
                 r["stopped"], r.get("p_fewer_wasted"), r.get("p_hv_lower")]
                for m, r in s["rows"].items()]
        out[f"region{int(round(share * 100))}"] = Table(cols, rows)
    return out


LEGEND = ("wasted: evaluations that failed (in the region), of the budget; final HV / max: "
          "hypervolume of the true values of the points that did not fail, over the "
          "problem's maximum, mean [mean - 2 SE, mean + 2 SE] over seeds; stopped by "
          "fail_fast: runs optimize() stopped with SystematicFailureError (only `ecopt` runs "
          "with fail_fast=3); p fewer wasted / p HV lower: one-sided Mann-Whitney U p that "
          "`ecopt` wasted fewer trials / reached a lower final HV than the row (paired seeds).")


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="2 seeds, 20 evaluations (smoke)")
    ap.add_argument("--seeds", type=int, default=None, help="number of seeds (default 10)")
    ap.add_argument("--seed-offset", type=int, default=0, help="first seed")
    ap.add_argument("--budget", type=int, default=None, help="evaluations (default 30)")
    ap.add_argument("--shares", default=",".join(map(str, SHARES)),
                    help="failing region shares of the space (default 0.1,0.3)")
    ap.add_argument("--methods", default=",".join(METHODS), help="comma-separated methods")
    ap.add_argument("--out", default="runs/failures", help="output directory")
    ap.add_argument("--tag", default="main", help="this process's runs file: runs-<tag>.jsonl")
    ap.add_argument("--report-only", action="store_true", help="only rebuild the report")
    ap.add_argument("--record", nargs="?", const="", default=None, metavar="TAG",
                    help="also write docs/results/failures/<date>[-TAG]")
    ap.add_argument("--note", action="append", default=[], help="a caveat to record")
    return ap


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.getLogger("ecopt").setLevel(logging.ERROR)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    seeds = args.seeds if args.seeds is not None else (2 if args.quick else 10)
    budget = args.budget or (20 if args.quick else 30)
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    bad = [m for m in methods if m not in METHODS]
    if bad:
        raise SystemExit(f"unknown method(s) {bad}; expected some of {list(METHODS)}")
    shares = [float(s) for s in args.shares.split(",") if s.strip()]
    import torch

    torch.set_num_threads(1)
    problem = make_problem("branincurrin")
    if not args.report_only:
        runs_file = out / f"runs-{args.tag}.jsonl"
        for seed in range(args.seed_offset, args.seed_offset + seeds):
            for share in shares:
                for m in methods:
                    key = (share, m, seed, budget)
                    if any((r["share"], r["method"], r["seed"], r["budget"]) == key
                           for r in _load(out)):
                        continue
                    r = run_one(problem, share, m, seed, budget)
                    with runs_file.open("a") as fh:
                        fh.write(json.dumps(r) + "\n")
                    print(f"region {share:.0%} {m:14s} seed {seed:2d}: wasted {r['wasted']:2d}, "
                          f"HV {r['final_hv'] / r['max_hv']:.4f}"
                          + (f", stopped at {r['stopped']}" if r["stopped"] else "")
                          + f"  ({r['wall_s']:.0f} s)", flush=True)
    runs = [r for r in _load(out) if r["budget"] == budget and r["share"] in shares
            and r["method"] in methods
            and args.seed_offset <= r["seed"] < args.seed_offset + seeds]
    if not runs:
        print("no runs to report")
        return 1
    summary = summarise(runs)
    tabs = tables(summary)
    from docs.recorded import render_table

    cmd = "python -m benchmarks.failures " + " ".join(
        shlex.quote(a) for a in (sys.argv[1:] if argv is None else argv))
    lines = [f"Command: `{cmd}`", "", LEGEND, ""]
    for (tid, t), share in zip(tabs.items(), summary):
        lines += [f"### failing region {share:.0%} of the space, {summary[share]['budget']} "
                  "evaluations", "", render_table(t), ""]
    md = "\n".join(lines)
    (out / "report.md").write_text(md)
    if args.record is not None:
        from docs import recorded

        facts = {"reference": REFERENCE, "methods": {m: METHODS[m] for m in methods},
                 "budget": budget, "shares": shares,
                 "seeds": {str(s): v["seeds"] for s, v in summary.items()},
                 "regions": {str(s): {"x": Region(s).x, "y": Region(s).y} for s in shares},
                 "code": sorted({r.get("git_commit", "unknown") for r in runs})}
        where = recorded.results_dir("failures", tag=args.record or None)
        recorded.write_run(where, script="benchmarks/failures.py", command=cmd, tables=tabs,
                           energy=None, title="Failing regions: trials wasted and hypervolume",
                           notes=[LEGEND, *args.note], facts=facts,
                           extra_libraries=("optuna",))
        print(f"recorded in {where}")
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
