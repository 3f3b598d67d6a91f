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

The second problem (``--problem nas``) is the NAS workload of
:mod:`benchmarks.nas_curves`: every trial really trains a CNN on scikit-learn's digits
(``experiments/nas_cnn.py``'s space, d = 7, mixed: channels, depth, kernel size,
stride, pooling, batch size, learning rate; objectives accuracy and inference samples
per joule, ESTIMATED by the ``estimate`` meter, this machine has no RAPL). The failing
region is an architecture that raises: average pooling on nets at least
``min_channels`` wide (:class:`ArchRegion`; the width is chosen so the region holds
10% or 30% of the unit cube the samplers search). Optuna's samplers propose through
``ask`` and their configurations run in a metering-only ecopt study, as in
:mod:`benchmarks.nas_curves`. There is no true front: the hypervolume of a run is
that of its complete trials' observed values against a reference point below the
union front of every run of that region share (BoTorch's rule,
:func:`benchmarks.nas_curves.score`), over that union front's hypervolume.

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

__all__ = ["METHODS", "PROBLEMS", "REFERENCE", "SHARES", "ArchRegion", "Region", "run_one",
           "summarise", "main"]

REFERENCE = "ecopt"
METHODS: dict[str, str] = {
    "ecopt": 'ecopt QLogNEHVISampler(failures="learn"), optimize(fail_fast=3)',
    "ecopt-pending": 'ecopt QLogNEHVISampler(failures="pending"): Ax\'s rule by hand',
    "ecopt-before": 'ecopt QLogNEHVISampler(failures="ignore"): failures teach nothing',
    "optuna-gp": "Optuna GPSampler, failed trials told FAIL",
    "optuna-tpe": "Optuna TPESampler(multivariate=True), failed trials told FAIL",
}
#: The problems: BraninCurrin (known front) and the NAS workload (live CNN training).
PROBLEMS = ("branincurrin", "nas")
#: The failing region's share of the unit square.
SHARES = (0.1, 0.3)
#: The NAS problem's settings: short trials keep 10 seeds of 5 methods within hours on
#: two cores (each trial still trains and measures a real CNN).
NAS_EPOCHS = 3
NAS_N_INIT = 8
NAS_BUDGET = 20
NAS_INFERENCE_PASSES = 10
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


class ArchRegion:
    """An architecture that raises: average pooling on nets ``min_channels`` wide or wider.

    The width is the smallest one whose region holds at least ``share`` of the unit cube
    the samplers search (pooling is one of three categories, so ``share <= 1/3``),
    measured on 4,096 scrambled Sobol points of the space.

    Args:
        share: The region's share of the space, in ``(0, 1/3]``.
        space: The NAS search space (``channels`` and ``pooling`` in it).
    """

    def __init__(self, share: float, space: Any) -> None:
        if not 0 < share <= 1 / 3:
            raise ValueError(f"0 < share <= 1/3 must hold (avg is one pooling of three), "
                             f"got share={share}")
        from ecopt.samplers.random import sobol_points

        pts = [space.decode(list(u)) for u in sobol_points(space.dim, 0, 0, 4096)]
        avg = sorted(int(p["channels"]) for p in pts if p["pooling"] == "avg")
        widths = sorted(set(avg), reverse=True)
        # Widen the region one width at a time until it holds the share.
        self.min_channels = widths[0]
        for w in widths:
            self.min_channels = w
            if sum(c >= w for c in avg) / len(pts) >= share:
                break
        self.share = share
        self.measured_share = sum(c >= self.min_channels for c in avg) / len(pts)

    def __contains__(self, params: dict[str, Any]) -> bool:
        return params["pooling"] == "avg" and int(params["channels"]) >= self.min_channels

    def check(self, params: dict[str, Any]) -> None:
        """Raise :class:`RegionFailure` inside the region (always from this line)."""
        if params in self:
            raise RegionFailure(f"shape mismatch in the average-pooling head "
                                f"({params['channels']} channels)")

    def facts(self) -> dict[str, Any]:
        return {"pooling": "avg", "min_channels": self.min_channels,
                "measured_share": round(self.measured_share, 4)}


def _recorded_sampler(method: str, seed: int, n_init: int) -> Any:
    """The ecopt method's sampler with the recorded runs' settings: full proposals, the
    Gamma prior and a plain Sobol design (the design every method of this benchmark shares)."""
    from ecopt.samplers import QLogNEHVISampler

    rule = {"ecopt": "learn", "ecopt-pending": "pending", "ecopt-before": "ignore"}[method]
    return QLogNEHVISampler(seed=seed, n_init=n_init, failures=rule, proposal_share=None,
                            lengthscale_prior="gamma", init_center=False)


def _nas_ecopt(problem: Any, region: ArchRegion, method: str, seed: int, budget: int
               ) -> dict[str, Any]:
    import ecopt

    from benchmarks.nas_curves import trial_row

    sampler = _recorded_sampler(method, seed, problem.n_init)
    study = ecopt.Study(problem.space, problem.objectives, storage=None, meter="estimate",
                        sampler=sampler, seed=seed)
    objective = problem.objective

    def run(trial: ecopt.Trial) -> dict[str, float]:
        region.check(trial.params)
        out: dict[str, float] = objective(trial)
        return out

    stopped = None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            study.optimize(run, n_trials=budget, show_progress=False,
                           fail_fast=3 if method == "ecopt" else None)
        except ecopt.SystematicFailureError:
            stopped = len(study.records)
    rows = [trial_row(r) for r in sorted(study.records, key=lambda r: r.number)]
    study.close()
    return {"trials": rows, "stopped": stopped}


def _nas_optuna(problem: Any, region: ArchRegion, method: str, seed: int, budget: int
                ) -> dict[str, Any]:
    import ecopt
    import optuna
    from optuna.trial import TrialState

    from benchmarks.nas_curves import optuna_asker, trial_row

    optuna.logging.set_verbosity(optuna.logging.ERROR)
    n = problem.n_init
    sampler = (optuna.samplers.GPSampler(seed=seed, n_startup_trials=n) if method == "optuna-gp"
               else optuna.samplers.TPESampler(seed=seed, multivariate=True,
                                               n_startup_trials=n))
    study = optuna.create_study(directions=["maximize", "maximize"], sampler=sampler)
    searched = problem.space.searched_names
    for params in initial_design(problem, seed):
        study.enqueue_trial({k: params[k] for k in searched})
    # Metering only: Optuna's configurations run through ask(params=...).
    harness = ecopt.Study(problem.space, problem.objectives, storage=None, meter="estimate",
                          sampler="random", seed=seed)
    ask = optuna_asker(problem, study, harness)
    objective = problem.objective
    rows: list[dict[str, Any]] = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(budget):
            ot, et, search, ask_j = ask()
            try:
                region.check(et.params)
                rec = harness.tell(et, objective(et))
            except Exception as exc:  # noqa: BLE001 - a failed trial is recorded
                rec = harness.tell(et, exc)
            rows.append(trial_row(rec, ask_j, float(search["duration_s"])))
            if rec.state.value == "complete":
                study.tell(ot, [rec.values["accuracy"], rec.values["samples_per_joule"]])
            else:
                study.tell(ot, state=TrialState.FAIL)
    harness.close()
    return {"trials": rows, "stopped": None}


def _run_nas(problem: Any, share: float, method: str, seed: int, budget: int
             ) -> dict[str, Any]:
    region = ArchRegion(share, problem.space)
    t0 = time.perf_counter()
    out = (_nas_ecopt if method.startswith("ecopt") else _nas_optuna)(
        problem, region, method, seed, budget)
    ts = out["trials"]
    failed = [t["state"] == "failed" for t in ts]
    return {"problem": "nas", "share": share, "method": method, "seed": seed,
            "budget": budget, "n_init": problem.n_init, "max_hv": math.nan,
            "params": [t["params"] for t in ts], "failed": failed,
            "wasted": int(sum(failed)), "stopped": out["stopped"],
            "values": [t["values"] for t in ts], "states": [t["state"] for t in ts],
            "trial_j": [t["trial_j"] for t in ts], "proposal_j": [t["proposal_j"] for t in ts],
            "final_hv": math.nan, "wall_s": time.perf_counter() - t0,
            "git_commit": _code_commit()}


def _ecopt(problem: Problem, region: Region, method: str, seed: int, budget: int
           ) -> tuple[list[dict[str, Any]], list[bool], int | None]:
    import ecopt

    sampler = _recorded_sampler(method, seed, problem.n_init)
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


def run_one(problem: Any, share: float, method: str, seed: int, budget: int
            ) -> dict[str, Any]:
    """One (share, method, seed) run: evaluated points, which failed, the HV curve.

    ``problem`` is a :class:`benchmarks.problems.Problem` (BraninCurrin) or a
    :class:`benchmarks.nas_curves.NasProblem`; a NAS run's ``final_hv`` is NaN until
    :func:`summarise` scores it against the union front of its share's runs.
    """
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; expected one of {list(METHODS)}")
    if getattr(problem, "name", None) == "nas":
        return _run_nas(problem, share, method, seed, budget)
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
            runs[_key(r)] = r
    return list(runs.values())


def _key(r: dict[str, Any]) -> tuple[Any, ...]:
    return (r.get("problem", "branincurrin"), r["share"], r["method"], r["seed"], r["budget"])


def summarise(runs: Sequence[dict[str, Any]]) -> dict[tuple[str, float], dict[str, Any]]:
    """Per (problem, region share): per method, wasted trials and final HV over the seeds
    every method finished, with one-sided Mann-Whitney p values against :data:`REFERENCE`.

    NAS runs are scored here (in place), each share's against the union front of its
    own runs (:func:`benchmarks.nas_curves.score`).
    """
    from scipy.stats import mannwhitneyu

    out: dict[tuple[str, float], dict[str, Any]] = {}
    groups = sorted({(r.get("problem", "branincurrin"), r["share"]) for r in runs},
                    key=lambda g: (PROBLEMS.index(g[0]), g[1]))
    for problem, share in groups:
        sr = [r for r in runs if r.get("problem", "branincurrin") == problem
              and r["share"] == share]
        if problem == "nas":
            from benchmarks.nas_curves import score

            score(sr)
            for r in sr:
                r["final_hv"] = r["hv"][-1] if r["hv"] else 0.0
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
        out[(problem, share)] = {"seeds": seeds, "rows": rows, "budget": sr[0]["budget"]}
    return out


def tables(summary: dict[tuple[str, float], dict[str, Any]]) -> dict[str, Any]:
    """One table per problem and region share (docs.recorded Tables): ``region10``,
    ``region30`` for BraninCurrin, ``nas-region10``, ``nas-region30`` for NAS."""
    from docs.recorded import Table

    cols = ["method", "seeds", "wasted (mean [+-2 SE])", "wasted median", "wasted max",
            "final HV / max (mean [+-2 SE])", "stopped by fail_fast", "p fewer wasted",
            "p HV lower"]
    out = {}
    for (problem, share), s in summary.items():
        rows = [[m, r["seeds"], r["wasted_mean"], r["wasted_median"], r["wasted_max"], r["hv"],
                 r["stopped"], r.get("p_fewer_wasted"), r.get("p_hv_lower")]
                for m, r in s["rows"].items()]
        prefix = "" if problem == "branincurrin" else f"{problem}-"
        out[f"{prefix}region{int(round(share * 100))}"] = Table(cols, rows)
    return out


LEGEND = ("wasted: evaluations that failed (in the region), of the budget; final HV / max: "
          "hypervolume of the true values of the points that did not fail, over the "
          "problem's maximum, mean [mean - 2 SE, mean + 2 SE] over seeds; stopped by "
          "fail_fast: runs optimize() stopped with SystematicFailureError (only `ecopt` runs "
          "with fail_fast=3); p fewer wasted / p HV lower: one-sided Mann-Whitney U p that "
          "`ecopt` wasted fewer trials / reached a lower final HV than the row (paired seeds). "
          "NAS: observed values (accuracy, ESTIMATED inference samples/J), over the union "
          "front of every run of the share.")


def build_parser() -> argparse.ArgumentParser:
    from docs import recorded

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--problem", default="branincurrin", choices=PROBLEMS,
                    help="branincurrin (default) or nas (live CNN training on digits)")
    ap.add_argument("--epochs", type=int, default=NAS_EPOCHS,
                    help=f"NAS: training epochs of a trial (default {NAS_EPOCHS})")
    ap.add_argument("--quick", action="store_true", help="2 seeds, 20 evaluations (smoke)")
    ap.add_argument("--seeds", type=int, default=None, help="number of seeds (default 10)")
    ap.add_argument("--seed-offset", type=int, default=0, help="first seed")
    ap.add_argument("--budget", type=int, default=None,
                    help=f"evaluations (default 30; NAS {NAS_BUDGET})")
    ap.add_argument("--shares", default=",".join(map(str, SHARES)),
                    help="failing region shares of the space (default 0.1,0.3)")
    ap.add_argument("--methods", default=",".join(METHODS), help="comma-separated methods")
    ap.add_argument("--out", default="runs/failures", help="output directory")
    ap.add_argument("--tag", default="main", help="this process's runs file: runs-<tag>.jsonl")
    recorded.add_record_args(ap, "failures")
    return ap


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.getLogger("ecopt").setLevel(logging.ERROR)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    seeds = args.seeds if args.seeds is not None else (2 if args.quick else 10)
    nas = args.problem == "nas"
    budget = args.budget or (20 if args.quick else NAS_BUDGET if nas else 30)
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    bad = [m for m in methods if m not in METHODS]
    if bad:
        raise SystemExit(f"unknown method(s) {bad}; expected some of {list(METHODS)}")
    shares = [float(s) for s in args.shares.split(",") if s.strip()]
    import torch

    torch.set_num_threads(1)
    problem: Any = make_problem("branincurrin")
    if nas:
        from benchmarks.nas_curves import NasProblem

        problem = NasProblem(epochs=args.epochs, n_init=NAS_N_INIT, budget=budget,
                             inference_passes=NAS_INFERENCE_PASSES)
    if not args.report_only:
        runs_file = out / f"runs-{args.tag}.jsonl"
        for seed in range(args.seed_offset, args.seed_offset + seeds):
            for share in shares:
                for m in methods:
                    key = (args.problem, share, m, seed, budget)
                    if any(_key(r) == key for r in _load(out)):
                        continue
                    r = run_one(problem, share, m, seed, budget)
                    with runs_file.open("a") as fh:
                        fh.write(json.dumps(r) + "\n")
                    hv = "" if nas else f", HV {r['final_hv'] / r['max_hv']:.4f}"
                    print(f"{args.problem} region {share:.0%} {m:14s} seed {seed:2d}: "
                          f"wasted {r['wasted']:2d}{hv}"
                          + (f", stopped at {r['stopped']}" if r["stopped"] else "")
                          + f"  ({r['wall_s']:.0f} s)", flush=True)
    runs = [r for r in _load(out) if r["budget"] == budget and r["share"] in shares
            and r.get("problem", "branincurrin") == args.problem
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
    for (tid, t), (prob, share) in zip(tabs.items(), summary):
        lines += [f"### {prob}: failing region {share:.0%} of the space, "
                  f"{summary[(prob, share)]['budget']} evaluations", "", render_table(t), ""]
    md = "\n".join(lines)
    (out / "report.md").write_text(md)
    if args.record is not None:
        from docs import recorded

        facts = {"reference": REFERENCE, "methods": {m: METHODS[m] for m in methods},
                 "budget": budget, "shares": shares,
                 "problem": args.problem,
                 "seeds": {str(s): v["seeds"] for (_, s), v in summary.items()},
                 "regions": {str(s): (ArchRegion(s, problem.space).facts() if nas
                                      else {"x": Region(s).x, "y": Region(s).y})
                             for s in shares},
                 "code": sorted({r.get("git_commit", "unknown") for r in runs})}
        if nas:
            facts["nas"] = problem.info()
        where = recorded.results_dir("failures", tag=args.record or None)
        recorded.write_run(where, script="benchmarks/failures.py", command=cmd, tables=tabs,
                           energy=recorded.estimated_energy(
                               "samples/J of the NAS objective") if nas else None,
                           title="Failing regions: trials wasted and hypervolume",
                           notes=[LEGEND, *args.note], facts=facts,
                           extra_libraries=("optuna",))
        print(f"recorded in {where}")
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
