"""ecopt's sampler inside Optuna against Optuna's own: hypervolume against evaluations.

Usage (from the repository root)::

    python -m benchmarks.optuna_sampler --quick                  # 2 seeds, 20 evaluations
    flock /work/bench.lock nice -n 5 python -m benchmarks.optuna_sampler \\
        --problems branincurrin,dtlz2 --budget 40 --seeds 10 --out runs/optuna_sampler
    python -m benchmarks.optuna_sampler --report-only --out runs/optuna_sampler --record 40evals
    python -m benchmarks.optuna_sampler --protocol user --problems branincurrin \\
        --budget 30 --seeds 10 --out runs/optuna_sampler-user --record user-30evals

Two protocols. ``--protocol design`` (default) is ``benchmarks/mobo.py``'s (docs/benchmarks.md): the same
problems, seeds, noise, initial design and scoring (hypervolume of the true
values of the evaluated points, log10 gap to the maximum). Every method runs
inside an Optuna study through ``study.ask`` / ``study.tell`` with the
problem's distributions, the ``2 (d + 1)`` scrambled Sobol points of the seed
enqueued first, and no reference point given (an Optuna user's script
states none):

* ``optuna-ecopt``: ``EcoptSampler(seed, n_init=2(d+1))``, ecopt's qLogNEHVI
  (defaults otherwise; the reference point inferred);
* ``optuna-tpe``: ``TPESampler(seed, multivariate=True, n_startup_trials=2(d+1))``;
* ``optuna-gp``: ``GPSampler(seed, n_startup_trials=2(d+1))``;
* ``optuna-botorch``: ``optuna_integration.BoTorchSampler(seed, n_startup_trials=2(d+1))``
  (its default for 2-3 objectives: qEHVI, 256 MC samples, 20 restarts, 1024 raw samples).

``--protocol user`` is an Optuna user's script, as issue 37 measured it: each
sampler with its defaults and the seed only (``EcoptSampler(seed=s)``,
``GPSampler(seed=s)``, ``TPESampler(seed=s)``, ``BoTorchSampler(seed=s)``),
``study.optimize(objective, n_trials=budget)`` on a SQLite storage, nothing
enqueued; beside them ``ecopt-study``, ``ecopt.Study(...).optimize(objective,
n_trials=budget)`` with the same seed and its default sampler, which
``optuna-ecopt`` should match. Its ``ask CPU s`` is the median CPU time of this
process between one trial's objective and the next's (the proposal and the
storage) over the second half of the trials, where every sampler uses its model.

Each finished run is appended to ``<out>/runs-<tag>.jsonl`` (resumable), with
the suggestion time of each model-based ``ask`` in wall and CPU seconds.
"""

from __future__ import annotations

import argparse
import json
import logging
import shlex
import sys
import time
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # ``python benchmarks/optuna_sampler.py``
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np

from benchmarks.mobo import (
    _code_commit,
    _hv_curve,
    _load_runs,
    _observe,
    _optuna_distributions,
    initial_design,
    markdown_table,
    problem_table,
    select_runs,
    summarise,
    table_legend,
    versions,
)
from benchmarks.problems import Problem, make_problem

__all__ = ["METHODS", "USER_METHODS", "REFERENCE", "run_one", "run_user", "complete_seeds",
           "main"]

REFERENCE = "optuna-ecopt"
METHODS: dict[str, str] = {
    "optuna-ecopt": "ecopt.integrations.optuna.EcoptSampler (ecopt qLogNEHVI, defaults)",
    "optuna-tpe": "Optuna TPESampler(multivariate=True)",
    "optuna-gp": "Optuna GPSampler",
    "optuna-botorch": "optuna_integration.BoTorchSampler (defaults: qEHVI)",
}
#: ``--protocol user``: each sampler as an Optuna user creates it (defaults and the seed).
USER_METHODS: dict[str, str] = {
    "optuna-ecopt": "ecopt.integrations.optuna.EcoptSampler(seed) (defaults)",
    "ecopt-study": "ecopt.Study(..., seed).optimize (its default qLogNEHVI sampler, full "
                   "proposals: proposal_share=None, as inside Optuna)",
    "optuna-tpe": "Optuna TPESampler(seed) (defaults)",
    "optuna-gp": "Optuna GPSampler(seed) (defaults)",
    "optuna-botorch": "optuna_integration.BoTorchSampler(seed) (defaults: qEHVI)",
}
#: The BoTorch problems of benchmarks/mobo.py (the Zeus traces are not BoTorch's).
BOTORCH_PROBLEMS = ("branincurrin", "dtlz2", "vehiclesafety")


def make_sampler(method: str, seed: int, n_init: int) -> Any:
    """The Optuna sampler of ``method`` for ``seed``."""
    from optuna.samplers import GPSampler, TPESampler

    if method == "optuna-ecopt":
        from ecopt.integrations.optuna import EcoptSampler

        return EcoptSampler(seed=seed, n_init=n_init)
    if method == "optuna-tpe":
        return TPESampler(seed=seed, multivariate=True, n_startup_trials=n_init)
    if method == "optuna-gp":
        return GPSampler(seed=seed, n_startup_trials=n_init)
    if method == "optuna-botorch":
        from optuna_integration import BoTorchSampler

        return BoTorchSampler(seed=seed, n_startup_trials=n_init)
    raise ValueError(f"unknown method {method!r}; expected one of {list(METHODS)}")


def run_one(problem: Problem, method: str, seed: int, budget: int) -> dict[str, Any]:
    """One (problem, method, seed) run inside an Optuna study (mobo.py's record shape)."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.ERROR)
    t0 = time.perf_counter()
    n_init = problem.n_init
    study = optuna.create_study(directions=["minimize"] * problem.n_obj,
                                sampler=make_sampler(method, seed, n_init))
    dists = _optuna_distributions(problem)
    for params in initial_design(problem, seed):
        study.enqueue_trial(params)
    params_seq: list[dict[str, Any]] = []
    ask_s: list[float] = []
    ask_cpu_s: list[float] = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        while len(params_seq) < budget:
            k = len(params_seq)
            w0, c0 = time.perf_counter(), time.process_time()
            trial = study.ask(fixed_distributions=dists)
            if k >= n_init:
                ask_s.append(time.perf_counter() - w0)
                ask_cpu_s.append(time.process_time() - c0)
            params = {n: trial.params[n] for n in problem.space.searched_names}
            params_seq.append(params)
            try:
                y = _observe(problem, params, seed, k)
                study.tell(trial, [float(v) for v in y])
            except ValueError:
                study.tell(trial, state=optuna.trial.TrialState.FAIL)
    curve = _hv_curve(problem, params_seq)
    return {
        "problem": problem.name, "method": method, "seed": seed, "budget": budget,
        "n_init": n_init, "max_hv": problem.max_hv, "hv": curve,
        "log_gap": [problem.log_gap(h) for h in curve], "ask_s": ask_s,
        "ask_cpu_s": ask_cpu_s, "wall_s": time.perf_counter() - t0, "params": params_seq,
        "git_commit": _code_commit(),
    }


def _suggest(trial: Any, name: str, d: Any) -> Any:
    """``trial.suggest_*`` for an Optuna distribution, as a user's objective calls it."""
    from optuna.distributions import FloatDistribution, IntDistribution

    if isinstance(d, FloatDistribution):
        return trial.suggest_float(name, d.low, d.high, log=d.log, step=d.step)
    if isinstance(d, IntDistribution):
        return trial.suggest_int(name, d.low, d.high, log=d.log, step=d.step)
    return trial.suggest_categorical(name, d.choices)


def _user_sampler(method: str, seed: int) -> Any:
    from optuna.samplers import GPSampler, TPESampler

    if method == "optuna-ecopt":
        from ecopt.integrations.optuna import EcoptSampler

        return EcoptSampler(seed=seed)
    if method == "optuna-tpe":
        return TPESampler(seed=seed)
    if method == "optuna-gp":
        return GPSampler(seed=seed)
    if method == "optuna-botorch":
        from optuna_integration import BoTorchSampler

        return BoTorchSampler(seed=seed)
    raise ValueError(f"unknown method {method!r}; expected one of {list(USER_METHODS)}")


def run_user(problem: Problem, method: str, seed: int, budget: int) -> dict[str, Any]:
    """One run of ``--protocol user`` (an Optuna user's ``optimize`` call, or ecopt's own
    ``Study.optimize`` for ``ecopt-study``), in mobo.py's record shape."""
    import tempfile

    t0, c0 = time.perf_counter(), time.process_time()
    params_seq: list[dict[str, Any]] = []
    marks: list[tuple[float, float]] = []  # (CPU s at the objective's entry, at its exit)
    names = problem.space.searched_names
    entry = 0.0

    def observe(params: dict[str, Any]) -> list[float]:
        k = len(params_seq)
        params_seq.append(params)
        try:
            return [float(v) for v in _observe(problem, params, seed, k)]
        finally:
            marks.append((entry, time.process_time()))

    with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if method == "ecopt-study":
            import ecopt
            from ecopt.samplers import QLogNEHVISampler

            study = ecopt.Study(problem.space, [ecopt.Objective(n, "min")
                                                for n in problem.objective_names],
                                meter="wallclock", seed=seed, storage=Path(tmp) / "study",
                                # full proposals, as EcoptSampler's (Optuna meters none)
                                sampler=QLogNEHVISampler(proposal_share=None))

            def ecopt_objective(trial: Any) -> dict[str, float]:
                nonlocal entry
                entry = time.process_time()
                y = observe({n: trial.params[n] for n in names})
                return dict(zip(problem.objective_names, y))

            study.optimize(ecopt_objective, n_trials=budget, show_progress=False)
            study.close()
        else:
            import optuna

            optuna.logging.set_verbosity(optuna.logging.ERROR)
            dists = _optuna_distributions(problem)
            study = optuna.create_study(directions=["minimize"] * problem.n_obj,
                                        storage=f"sqlite:///{Path(tmp) / 'optuna.db'}",
                                        sampler=_user_sampler(method, seed))

            def optuna_objective(trial: Any) -> list[float]:
                nonlocal entry
                params = {n: _suggest(trial, n, dists[n]) for n in names}
                entry = time.process_time()
                return observe(params)

            study.optimize(optuna_objective, n_trials=budget)
    gaps = [b[0] - a[1] for a, b in zip(marks, marks[1:])][budget // 2 - 1:]
    curve = _hv_curve(problem, params_seq)
    return {
        "problem": problem.name, "method": method, "seed": seed, "budget": budget,
        "protocol": "user", "n_init": problem.n_init, "max_hv": problem.max_hv, "hv": curve,
        "log_gap": [problem.log_gap(h) for h in curve], "ask_s": [],
        "ask_cpu_s": gaps, "wall_s": time.perf_counter() - t0,
        "cpu_s": time.process_time() - c0, "params": params_seq, "git_commit": _code_commit(),
    }


def complete_seeds(runs: Sequence[dict[str, Any]], methods: Sequence[str]
                   ) -> list[dict[str, Any]]:
    """The runs of the seeds every method finished, per problem (a run stopped early is
    reported on the seeds all methods share, never on uneven ones)."""
    keep: list[dict[str, Any]] = []
    for prob in sorted({r["problem"] for r in runs}):
        pr = [r for r in runs if r["problem"] == prob]
        seeds = set.intersection(*[{r["seed"] for r in pr if r["method"] == m}
                                   for m in methods])
        keep += [r for r in pr if r["seed"] in seeds]
    return keep


def tables(runs: Sequence[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Per problem: mobo.py's summary table plus the median CPU seconds per suggestion."""
    from docs.recorded import Table

    summary = summarise(runs, REFERENCE)
    out: dict[str, Any] = {}
    for prob, s in summary.items():
        cols, rows = problem_table(s)
        cols = [*cols, "ask CPU s"]
        for row in rows:
            cpu = [c for r in runs if r["problem"] == prob and r["method"] == row[0]
                   for c in r.get("ask_cpu_s", [])]
            row.append(float(np.median(cpu)) if cpu else None)
        out[prob] = Table(cols, rows)
    return summary, out


def build_parser() -> argparse.ArgumentParser:
    from docs import recorded

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="2 seeds, 20 evaluations (smoke)")
    ap.add_argument("--seeds", type=int, default=None, help="number of seeds (default 10)")
    ap.add_argument("--seed-offset", type=int, default=0, help="first seed")
    ap.add_argument("--budget", type=int, default=None,
                    help="evaluations per run (default 40, mobo.py's recorded protocol; 20 quick)")
    ap.add_argument("--problems", default=",".join(BOTORCH_PROBLEMS),
                    help=f"comma-separated problems (default {','.join(BOTORCH_PROBLEMS)})")
    ap.add_argument("--protocol", choices=("design", "user"), default="design",
                    help="design: the shared Sobol design enqueued, ask/tell (default); user: "
                         "each sampler's defaults, optimize() on SQLite, and ecopt-study")
    ap.add_argument("--methods", default=None,
                    help=f"comma-separated methods (default design: {','.join(METHODS)}; "
                         f"user: {','.join(USER_METHODS)})")
    ap.add_argument("--out", default=None,
                    help="output directory (default runs/optuna_sampler[-user])")
    ap.add_argument("--tag", default="main", help="this process's runs file: runs-<tag>.jsonl")
    recorded.add_record_args(ap, "optuna_sampler")
    ap.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    return ap


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.getLogger("ecopt").setLevel(logging.ERROR)
    user = args.protocol == "user"
    known = USER_METHODS if user else METHODS
    out = Path(args.out or ("runs/optuna_sampler-user" if user else "runs/optuna_sampler"))
    out.mkdir(parents=True, exist_ok=True)
    seeds = args.seeds if args.seeds is not None else (2 if args.quick else 10)
    budget = args.budget or (20 if args.quick else 40)
    methods = [m.strip() for m in (args.methods or ",".join(known)).split(",") if m.strip()]
    bad = [m for m in methods if m not in known]
    if bad:
        raise SystemExit(f"unknown method(s) {bad}; expected some of {list(known)}")
    problems = [p.strip() for p in args.problems.split(",") if p.strip()]
    import torch

    torch.set_num_threads(args.threads)  # also what the report's versions line states
    if not args.report_only:
        runs_file = out / f"runs-{args.tag}.jsonl"
        made = {name: make_problem(name) for name in problems}
        # Seeds outermost: a run stopped early still has every problem at the seeds it did.
        for seed in range(args.seed_offset, args.seed_offset + seeds):
            for problem in made.values():
                for m in methods:
                    key = (problem.name, m, seed, budget)
                    if any((r["problem"], r["method"], r["seed"], r["budget"]) == key
                           for r in _load_runs(out)):
                        continue
                    r = (run_user if user else run_one)(problem, m, seed, budget)
                    with runs_file.open("a") as fh:
                        fh.write(json.dumps(r) + "\n")
                    print(f"{problem.name:16s} {m:16s} seed {seed:2d}: final log gap "
                          f"{r['log_gap'][-1]:+.3f}  ({r['wall_s']:.1f} s wall, median ask "
                          f"{np.median(r['ask_cpu_s'] or [0]):.2f} CPU s)", flush=True)
    runs = select_runs(_load_runs(out), problems=problems, methods=methods,
                       seeds=range(args.seed_offset, args.seed_offset + seeds), budget=budget)
    runs = complete_seeds(runs, methods)
    if not runs:
        print("no runs to report")
        return 1
    summary, tabs = tables(runs)
    cmd = "python -m benchmarks.optuna_sampler " + " ".join(
        shlex.quote(a) for a in (sys.argv[1:] if argv is None else argv))
    legend = table_legend(REFERENCE) + (
        " ask CPU s: median CPU seconds of this process between one trial's objective and "
        "the next's (the proposal and the storage), over the second half of the trials "
        "(the machine is shared, so CPU seconds are the measure)." if user else
        " ask CPU s: median CPU seconds of this process per model-based suggestion (the "
        "machine is shared, so CPU seconds are the measure).")
    parity = {p: float(np.mean(s["rows"]["optuna-ecopt"]["final_hv"])
                       / np.mean(s["rows"]["ecopt-study"]["final_hv"]))
              for p, s in summary.items()
              if {"optuna-ecopt", "ecopt-study"} <= set(s["rows"])}
    if parity:
        legend += (" optuna-ecopt / ecopt-study (mean final HV): " + ", ".join(
            f"{p} {r:.1%}" for p, r in parity.items()) + ".")
    lines = [f"Command: `{cmd}`", "", "Versions: " + ", ".join(
        f"{k} {v}" for k, v in versions().items()), "", legend, ""]
    for prob, t in tabs.items():
        from docs.recorded import render_table

        lines += [f"### {prob}", "", f"max HV {summary[prob]['max_hv']:.6g}", "",
                  render_table(t), ""]
    md = "\n".join(lines)
    (out / "report.md").write_text(md)
    if args.record is not None:
        from docs import recorded

        facts = {"reference": REFERENCE, "protocol": args.protocol,
                 "methods": {m: known[m] for m in methods}, "parity": parity,
                 "budget": budget, "max_hv": {p: s["max_hv"] for p, s in summary.items()},
                 "seeds": {p: {m: r["seeds"] for m, r in s["rows"].items()}
                           for p, s in summary.items()},
                 "code": sorted({r.get("git_commit", "unknown") for r in runs})}
        where = recorded.results_dir("optuna_sampler", tag=args.record or None)
        recorded.write_run(where, script="benchmarks/optuna_sampler.py", command=cmd,
                           tables=tabs, energy=None,
                           title="ecopt's sampler inside Optuna: hypervolume against "
                                 "evaluations", notes=[legend, *args.note], facts=facts,
                           extra_libraries=("optuna", "optuna-integration"))
        print(f"recorded in {where}")
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
