"""Parallel and asynchronous trials on a Dask LocalCluster: wall time and hypervolume per minute.

Three tables:

1. **Scaling**: one fixed study (16 trials of a cheap objective with a
   controlled duration, random search, so proposals cost nothing) on an
   embedded ``LocalCluster`` with 1, 2 and 4 workers. Two objectives: one that
   sleeps (I/O- or GPU-bound trials: the host CPU is free) and one that spins a
   core (CPU-bound trials: bounded by the host's cores).
2. **Hypervolume per wall-clock minute**: qLogNEHVI on ZDT1 (4 variables)
   with trials whose length depends on the configuration
   (``1 + 4 * x0`` seconds by default), sequential (1 worker) vs synchronous
   batches q=2 / q=4 vs asynchronous (2 and 4 workers, a new proposal as soon
   as one trial ends, the others pending), each for the same wall-clock
   budget of proposals (trials in flight at the end finish and count).
   Hypervolume against the fixed reference point (1.1, 11), per minute of
   wall clock, with the driver's time spent proposing (GP fits + acquisition)
   and the fraction of worker time spent in trials.
3. **The optimiser's own cost**: seconds for one qLogNEHVI proposal with n
   finished trials (exact GP fit, O(n^3), plus acquisition optimisation), for
   n up to 800: what bounds a study's size, whatever the number of workers.

Cluster start-up (a few seconds) is not counted; proposal time (GP fits, in
the driver) is. Energy here is not measured (the objectives sleep).

Usage::

    .venv/bin/python benchmarks/parallel.py [--trials 16] [--budget-s 60] [--seeds 1]
        [--parts 1,2,3] [--record [TAG]] [--note TEXT]

``--record`` also writes the recorded run (``summary.json`` + ``summary.md``,
tables ``scaling``, ``hv_per_minute`` and ``proposal_cost``) to
``docs/results/parallel/<date>[-TAG]``.
"""

from __future__ import annotations

import argparse
import logging
import math
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # ``python benchmarks/parallel.py``: docs.recorded from the root
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import ecopt
from docs import recorded
from ecopt.samplers import QLogNEHVISampler

#: Hypervolume of ZDT1's true front (f2 = 1 - sqrt(f1)) against (1.1, 11): 11 - 1/3 + 1.1.
ZDT1_MAX_HV = 11.0 - 1.0 / 3.0 + 0.1 * 11.0


# The objectives run on the cluster's workers: module-level, so they pickle by reference
# (``benchmarks.parallel`` when imported, by value from ``__main__`` when run as a script).
def zdt1(x: float, y: float) -> dict[str, float]:
    """ZDT1 on two variables (both minimised; the front is ``f2 = 1 - sqrt(f1)`` at ``y = 0``)."""
    g = 1.0 + 9.0 * y
    return {"f1": x, "f2": g * (1.0 - math.sqrt(x / g))}


class Sleepy:
    """ZDT1 after a ``work`` phase of ``duration_s`` seconds: a sleep, or with ``busy``
    this thread's CPU time (fixed compute: slower when trials share too few cores)."""

    def __init__(self, duration_s: float = 0.2, busy: bool = False) -> None:
        self.duration_s = duration_s
        self.busy = busy

    def __call__(self, trial: ecopt.Trial) -> dict[str, float]:
        with trial.phase("work"):
            if self.busy:
                end = time.thread_time() + self.duration_s
                while time.thread_time() < end:
                    pass
            else:
                time.sleep(self.duration_s)
        return zdt1(float(trial["x"]), float(trial["y"]))


class ZDT1Sleep:
    """ZDT1 on ``x0 .. x{d-1}`` after ``base_s + span_s * x0`` seconds.

    Args:
        base_s: Shortest trial.
        span_s: Extra seconds at ``x0 = 1`` (trial length depends on the configuration).
    """

    def __init__(self, base_s: float = 1.0, span_s: float = 4.0) -> None:
        self.base_s = base_s
        self.span_s = span_s

    def __call__(self, trial: ecopt.Trial) -> dict[str, float]:
        xs = [float(trial.params[k]) for k in sorted(trial.params)]
        with trial.phase("work"):
            time.sleep(self.base_s + self.span_s * xs[0])
        g = 1.0 + 9.0 * sum(xs[1:]) / max(len(xs) - 1, 1)
        return {"f1": xs[0], "f2": g * (1.0 - math.sqrt(xs[0] / g))}


def _space() -> ecopt.SearchSpace:
    return ecopt.SearchSpace({"x": ecopt.Float(0, 1), "y": ecopt.Float(0, 1)})


def _objectives() -> list[ecopt.Objective]:
    return [ecopt.Objective("f1", "min", threshold=1.1),
            ecopt.Objective("f2", "min", threshold=11.0)]


def _run(executor: ecopt.executors.Executor, objective, n_trials: int, sampler, batch_size: int,
         asynchronous: bool, seed: int) -> tuple[float, ecopt.Study]:
    study = ecopt.Study(_space(), _objectives(), sampler=sampler, meter="wallclock", seed=seed)
    t0 = time.perf_counter()
    study.optimize(objective, n_trials=n_trials, batch_size=batch_size, executor=executor,
                   asynchronous=asynchronous, show_progress=False)
    return time.perf_counter() - t0, study


def scaling(n_trials: int, duration_s: float) -> list[tuple[str, int, float, float]]:
    rows = []
    for workers in (1, 2, 4):
        with ecopt.DaskExecutor(n_workers=workers) as ex:
            for kind, obj in (("sleep", Sleepy(duration_s)),
                              ("cpu", Sleepy(duration_s, busy=True))):
                wall, _ = _run(ex, obj, n_trials, "random", 1, True, 0)
                rows.append((kind, workers, wall, n_trials * duration_s / wall))
                print(f"  scaling {kind:5s} workers={workers}: {wall:.2f} s", file=sys.stderr)
    return rows


class _TimedQLogNEHVI(QLogNEHVISampler):
    """qLogNEHVI that adds up the driver's time spent proposing."""

    propose_s = 0.0

    def propose(self, space, records, pending, n):  # type: ignore[no-untyped-def]
        t0 = time.perf_counter()
        try:
            return super().propose(space, records, pending, n)
        finally:
            self.propose_s += time.perf_counter() - t0


def _bo_space(dim: int) -> ecopt.SearchSpace:
    return ecopt.SearchSpace({f"x{i}": ecopt.Float(0, 1) for i in range(dim)})


def bo(budget_s: float, seeds: int, base_s: float, span_s: float, dim: int) -> list[tuple]:
    configs = [("sequential", 1, 1, True), ("sync q=2", 2, 2, False), ("sync q=4", 4, 4, False),
               ("async, 2 workers", 2, 1, True), ("async, 4 workers", 4, 1, True)]
    obj = ZDT1Sleep(base_s, span_s)
    # Import BoTorch and fit once before timing, so the first schedule does not pay for it.
    warm = ecopt.Study(_bo_space(dim), _objectives(), sampler=QLogNEHVISampler(
        n_init=2, num_restarts=2, raw_samples=16, mc_samples=16, proposal_share=None),
        meter="wallclock")
    warm.optimize(ZDT1Sleep(0, 0), n_trials=3, show_progress=False)
    out = []
    for name, workers, q, asyn in configs:
        rows = []
        with ecopt.DaskExecutor(n_workers=workers) as ex:
            for seed in range(seeds):
                sampler = _TimedQLogNEHVI(n_init=4, num_restarts=2, raw_samples=64,
                                          mc_samples=64)
                study = ecopt.Study(_bo_space(dim), _objectives(), sampler=sampler,
                                    meter="wallclock", seed=seed)
                t0 = time.perf_counter()
                # Proposals stop at the budget; trials in flight then finish and count.
                study.optimize(obj, n_trials=10_000, batch_size=q, executor=ex,
                               asynchronous=asyn, timeout_s=budget_s, show_progress=False)
                wall = time.perf_counter() - t0
                busy = sum(r.duration_s for r in study.records) / (workers * wall)
                rows.append((wall, len(study.records), study.hypervolume(), sampler.propose_s,
                             busy))
                print(f"  bo {name}: seed {seed}: {rows[-1]}", file=sys.stderr)
        wall, n, hv, prop, busy = (statistics.mean(c) for c in zip(*rows))
        out.append((name, workers, q, asyn, wall, n, hv, hv / (wall / 60.0), prop, busy))
    return out


def proposal_cost(ns: list[int], dim: int) -> list[tuple[int, float, float]]:
    """Wall and CPU seconds one qLogNEHVI proposal takes with ``n`` finished trials
    (random points); CPU seconds are this process's, all threads."""
    import numpy as np

    rng = np.random.default_rng(0)
    sampler = QLogNEHVISampler(num_restarts=2, raw_samples=64, mc_samples=64,
                               proposal_share=None)
    study = ecopt.Study(_bo_space(dim), _objectives(), sampler=sampler, meter="wallclock")
    obj = ZDT1Sleep(0, 0)
    out = []
    for n in [min(ns)] + sorted(ns):  # the first, untimed round imports and warms up BoTorch
        while len(study.records) < n:
            t = study.ask(params={f"x{i}": float(rng.random()) for i in range(dim)})
            study.tell(t, obj(t))
        t0, c0 = time.perf_counter(), time.process_time()
        sampler.propose(study.space, study.records, [], 1)
        out.append((n, time.perf_counter() - t0, time.process_time() - c0))
        print(f"  proposal with n={n}: {out[-1][1]:.2f} s", file=sys.stderr)
    return out[1:]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=16, help="trials of the scaling study")
    ap.add_argument("--duration-s", type=float, default=0.5, help="seconds per scaling trial")
    ap.add_argument("--budget-s", type=float, default=60.0,
                    help="wall-clock seconds of proposals per BO run")
    ap.add_argument("--dim", type=int, default=4, help="ZDT1 variables in the BO runs")
    ap.add_argument("--proposal-n", default="25,50,100,200,400,800",
                    help="trial counts at which to time one proposal (table 3)")
    ap.add_argument("--parts", default="1,2,3", help="which tables to produce")
    ap.add_argument("--seeds", type=int, default=1, help="BO runs per configuration")
    ap.add_argument("--base-s", type=float, default=1.0, help="shortest BO trial (s)")
    ap.add_argument("--span-s", type=float, default=4.0,
                    help="BO trial length = base_s + span_s * x (s)")
    ap.add_argument("--record", nargs="?", const="", default=None, metavar="TAG",
                    help="also write the recorded run (summary.json, summary.md) to "
                         "docs/results/parallel/<date>[-TAG]")
    ap.add_argument("--note", action="append", default=[],
                    help="a caveat the recorded run keeps (repeatable)")
    args = ap.parse_args(argv)
    parts = {int(p) for p in args.parts.split(",")}
    if not parts or not parts <= {1, 2, 3}:
        raise SystemExit(f"--parts takes some of 1,2,3, got {args.parts!r}")
    logging.getLogger("distributed").setLevel(logging.ERROR)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import torch

    torch.set_num_threads(1)
    git = recorded.git_commit()
    load_before = os.getloadavg()
    print(f"# benchmarks/parallel.py on {platform.node()}: {os.cpu_count()} cores, "
          f"Python {platform.python_version()}, ecopt {ecopt.__version__}")
    tables: dict[str, recorded.Table] = {}
    if 1 in parts:
        tables["scaling"] = _print(
            f"1. Wall time of a fixed study: {args.trials} trials x {args.duration_s:g} s, "
            "random search, embedded LocalCluster", scaling_table(scaling(args.trials,
                                                                          args.duration_s)))
    if 2 in parts:
        tables["hv_per_minute"] = _print(
            f"2. Hypervolume per wall-clock minute: qLogNEHVI on ZDT1 ({args.dim} variables), "
            f"trials of {args.base_s:g}-{args.base_s + args.span_s:g} s, proposals for "
            f"{args.budget_s:g} s, ref point (1.1, 11), mean of {args.seeds} seed(s)",
            hv_table(bo(args.budget_s, args.seeds, args.base_s, args.span_s, args.dim)))
    if 3 in parts:
        tables["proposal_cost"] = _print(
            "3. The optimiser's own cost: one qLogNEHVI proposal (q=1) against the number of "
            f"finished trials n (ZDT1, {args.dim} variables, random points, driver process, "
            "1 torch thread)",
            proposal_table(proposal_cost([int(n) for n in args.proposal_n.split(",")],
                                         args.dim)))
    if args.record is not None:
        load_after = os.getloadavg()
        where = recorded.results_dir("parallel", tag=args.record or None)
        recorded.write_run(
            where, script="benchmarks/parallel.py",
            command=recorded.command_line("benchmarks/parallel.py", argv), git=git,
            tables=tables, energy=None,
            title="Parallel and asynchronous trials on a Dask LocalCluster",
            notes=[*TABLE_NOTES, (f"load average (1, 5, 15 min) {_load(load_before)} at the "
                                 f"start, {_load(load_after)} at the end, on {os.cpu_count()} "
                                 "cores"),
                   *args.note],
            facts={"parts": sorted(parts), "scaling_trials": args.trials,
                   "scaling_trial_s": args.duration_s, "bo_budget_s": args.budget_s,
                   "bo_dim": args.dim, "bo_seeds": args.seeds,
                   "bo_trial_s": f"{args.base_s:g} + {args.span_s:g} * x0",
                   "ref_point": [1.1, 11.0], "zdt1_max_hv": ZDT1_MAX_HV,
                   "proposal_n": args.proposal_n, "torch_threads": 1,
                   "cpu_count": os.cpu_count(), "load_avg_before": list(load_before),
                   "load_avg_after": list(load_after)})
        print(f"recorded in {where}")
    return 0


#: What the recorded tables' columns mean (kept with the run).
TABLE_NOTES = (
    ("scaling: trial-seconds per worker-second = (trials x trial seconds) / (workers x wall "
     "seconds), 100 % when every worker is always in a trial; 'sleep' trials leave the CPU "
     "free, 'cpu' trials spin a core"),
    ("hv_per_minute: one run per schedule and seed, hypervolume against (1.1, 11) (ZDT1's "
     f"true front gives {ZDT1_MAX_HV:.4f}); q is '-' for asynchronous schedules; proposing s = "
     "the driver's wall seconds in GP fits and acquisition; workers busy = trial seconds / "
     "(workers x wall seconds)"),
    "energy is not involved: the objectives sleep or spin and the meter is the wall clock",
)


def _load(avg: tuple[float, float, float]) -> str:
    return ", ".join(f"{v:.2f}" for v in avg)


def _print(title: str, table: recorded.Table) -> recorded.Table:
    print(f"\n## {title}\n")
    print(recorded.render_table(table))
    return table


def scaling_table(rows: list[tuple[str, int, float, float]]) -> recorded.Table:
    """Table 1 (``scaling``) from :func:`scaling`'s rows."""
    base = {k: w for k, n, w, _ in rows if n == 1}
    return recorded.Table(
        ["trial kind", "workers", "wall s", "speed-up vs 1 worker",
         "trial-seconds per worker-second %"],
        [[kind, n, wall, base[kind] / wall if kind in base else None, 100.0 * busy / n]
         for kind, n, wall, busy in rows])


def hv_table(res: list[tuple[Any, ...]]) -> recorded.Table:
    """Table 2 (``hv_per_minute``) from :func:`bo`'s rows."""
    return recorded.Table(
        ["schedule", "workers", "q", "wall s", "trials", "hypervolume", "gap to true front",
         "hypervolume / min", "proposing s", "workers busy %"],
        [[name, workers, None if asyn else q, wall, n, hv, ZDT1_MAX_HV - hv, per_min, prop,
          100.0 * busy]
         for name, workers, q, asyn, wall, n, hv, per_min, prop, busy in res])


def proposal_table(res: list[tuple[int, float, float]]) -> recorded.Table:
    """Table 3 (``proposal_cost``) from :func:`proposal_cost`'s rows."""
    return recorded.Table(["n finished trials", "proposal wall s", "proposal CPU s"],
                          [[n, wall, cpu] for n, wall, cpu in res])


if __name__ == "__main__":
    raise SystemExit(main())
