"""What each of the qLogNEHVI sampler's private fast paths buys: proposal CPU time and quality.

The sampler runs BoTorch's pipeline with five fast paths (``closed_form_fit``,
``stacked_model``, ``pruning``, ``sweep_boxes``, ``dense_posterior``; see
:mod:`ecopt.samplers._botorch_compat`). Each can be switched off by name with
``ECOPT_FAST_PATHS_OFF``, which makes the sampler take BoTorch's public path for
it. This script times one proposal with every path on, with each path off in
turn, and with all of them off, on BoTorch's test problems at M = 2, 3 and 4
objectives and n = 20, 50 and 200 observed trials:

- the history is n points of a scrambled Sobol design (seeded), observed with the
  problem's noise, told to a fresh study; the proposal is the next ``ask()``;
- **CPU s** is the proposal's process CPU time (torch on one thread, as the
  sampler runs it), the median over seeds;
- **HV gain** is the true hypervolume the proposed point adds to the history's
  (scoring units of :mod:`benchmarks.problems`), the mean over seeds: a fast path
  that changed what is proposed would show here.

Each configuration runs in its own process (the variable is read at import).
``--floor DIR`` puts an older BoTorch/GPyTorch/linear_operator first on
PYTHONPATH for those processes (as ``.ci/run`` does for the floor tests).

Usage:
    python benchmarks/fast_paths.py                       # prints the table
    python benchmarks/fast_paths.py --record docs/results/fast_paths/2026-12-05
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

#: Problems by number of objectives.
PROBLEMS = {2: "dtlz2", 3: "vehiclesafety", 4: "dtlz2m4"}
PATHS = ("closed_form_fit", "stacked_model", "pruning", "sweep_boxes", "dense_posterior")
#: Configuration name -> the fast paths it switches off.
CONFIGS: dict[str, tuple[str, ...]] = {"all on": (), **{f"no {p}": (p,) for p in PATHS},
                                       "all off": PATHS}


def run_case(problem_name: str, n: int, seed: int) -> dict[str, Any]:
    """One proposal after ``n`` observed Sobol points; CPU seconds and true HV gain."""
    import numpy as np
    from scipy.stats import qmc

    import ecopt
    from benchmarks.problems import make_problem
    from ecopt.samplers import QLogNEHVISampler

    problem = make_problem(problem_name + "-noisy")
    rng = np.random.default_rng(seed)
    U = qmc.Sobol(problem.dim, scramble=True, seed=seed).random(n)
    keys = [f"x{i}" for i in range(problem.dim)]
    study = ecopt.Study(problem.space, problem.objectives(), storage=None, meter="wallclock",
                        sampler=QLogNEHVISampler(seed=seed, n_init=1, proposal_share=None),
                        seed=seed)
    true = []
    for u in U:
        params = {k: float(v) for k, v in zip(keys, u)}
        t = study.ask(params=params)
        y = problem.observe_fn(params, rng)
        study.tell(t, dict(zip(problem.objective_names, map(float, y))))
        true.append(problem.true_fn(params))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        c0 = time.process_time()
        (trial,) = study.ask(n=1)
        cpu_s = time.process_time() - c0
    hv0 = problem.hypervolume(np.array(true))
    hv1 = problem.hypervolume(np.array([*true, problem.true_fn(dict(trial.params))]))
    off = sorted(trial.proposal.get("fast_path_off", {}))
    study.close()
    return {"cpu_s": cpu_s, "hv_gain": hv1 - hv0, "proposed_by": trial.proposed_by,
            "off": off}


def _worker(args: argparse.Namespace) -> int:
    import botorch
    import gpytorch
    import linear_operator

    rows = [dict(run_case(p, n, s), problem=p, n=n, seed=s)
            for p in args.problems for n in args.sizes for s in range(args.seeds)]
    versions = {m.__name__: m.__version__ for m in (botorch, gpytorch, linear_operator)}
    print(json.dumps({"versions": versions, "rows": rows}))
    return 0


def run_config(name: str, problems: Sequence[str], sizes: Sequence[int], seeds: int,
               floor: str | None) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """Every case of one configuration, in a fresh process with its paths switched off."""
    env = dict(os.environ, ECOPT_FAST_PATHS_OFF=",".join(CONFIGS[name]))
    if floor:
        env["PYTHONPATH"] = os.pathsep.join([floor, str(ROOT)])
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker",
           "--problems", *problems, "--sizes", *map(str, sizes), "--seeds", str(seeds)]
    res = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if res.returncode != 0:
        raise RuntimeError(f"configuration {name!r} failed:\n{res.stderr[-3000:]}")
    got = json.loads(res.stdout.strip().splitlines()[-1])
    for r in got["rows"]:
        r["config"] = name
    return got["rows"], got["versions"]


def _stack_note(libs: dict[str, str]) -> str:
    """The note naming the BoTorch stack the proposals were timed with."""
    if not libs:
        return ""
    return ("proposals timed with " + ", ".join(f"{k} {v}" for k, v in sorted(libs.items()))
            + " (the versions line above is the driver process's; with --floor the timed "
              "processes import the older stack)")


def summarise(rows: Sequence[dict[str, Any]]) -> tuple[list[str], list[list[Any]]]:
    """One row per (M, n, configuration): median CPU s, speed-up against all off, HV gain."""
    cells: dict[tuple[str, int, str], list[dict[str, Any]]] = {}
    for r in rows:
        cells.setdefault((r["problem"], r["n"], r["config"]), []).append(r)
    cols = ["problem", "M", "n", "configuration", "median CPU s per proposal",
            "all off / this (x)", "this / all on (x)", "mean true HV gain", "paths off (recorded)"]
    out: list[list[Any]] = []
    m_of = {v: k for k, v in PROBLEMS.items()}
    for (p, n, c), rs in sorted(cells.items(), key=lambda kv: (m_of.get(kv[0][0], 0), kv[0][1],
                                                              list(CONFIGS).index(kv[0][2]))):
        cpu = statistics.median(r["cpu_s"] for r in rs)
        base_off = statistics.median(r["cpu_s"] for r in cells.get((p, n, "all off"), rs))
        base_on = statistics.median(r["cpu_s"] for r in cells.get((p, n, "all on"), rs))
        offs = sorted({x for r in rs for x in r["off"]})
        out.append([p, m_of.get(p), n, c, round(cpu, 4), round(base_off / cpu, 2),
                    round(cpu / base_on, 2), round(statistics.fmean(r["hv_gain"] for r in rs), 6),
                    ", ".join(offs) or "none"])
    return cols, out


def _tables(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    from docs.recorded import Table

    return {"gains": Table(*gains(rows)), "fast_paths": Table(*summarise(rows))}


def gains(rows: Sequence[dict[str, Any]]) -> tuple[list[str], list[list[Any]]]:
    """One row per fast path: how many times slower a proposal is with only it off.

    A cell is the median CPU time with the path off over the median with every path
    on, per (M, n); ``None`` where the path does not apply (not in the proposal's
    recorded ``fast_path_off`` when switched off) or is absent from this BoTorch
    (already off with every path on, as ``dense_posterior`` before BoTorch 0.16).
    """
    med: dict[tuple[int, int, str], float] = {}
    applies: dict[tuple[int, int, str], bool] = {}
    m_of = {v: k for k, v in PROBLEMS.items()}
    by: dict[tuple[int, int, str], list[dict[str, Any]]] = {}
    for r in rows:
        by.setdefault((m_of[r["problem"]], r["n"], r["config"]), []).append(r)
    for (m, n, c), rs in by.items():
        med[(m, n, c)] = statistics.median(r["cpu_s"] for r in rs)
        applies[(m, n, c)] = all(set(CONFIGS[c]) <= set(r["off"]) for r in rs)
    sizes = sorted({(m, n) for m, n, _ in med})
    cols = ["fast path", *[f"M={m}, n={n}" for m, n in sizes]]
    out: list[list[Any]] = []
    for path in PATHS:
        c = f"no {path}"
        out.append([path, *[round(med[(m, n, c)] / med[(m, n, "all on")], 2)
                            if (m, n, c) in med and applies[(m, n, c)]
                            and not any(path in r["off"] for r in by.get((m, n, "all on"), ()))
                            else None
                            for m, n in sizes]])
    out.append(["all five", *[round(med[(m, n, "all off")] / med[(m, n, "all on")], 2)
                              if (m, n, "all off") in med else None for m, n in sizes]])
    return cols, out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--problems", nargs="+", default=list(PROBLEMS.values()))
    ap.add_argument("--sizes", nargs="+", type=int, default=[20, 50, 200])
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--configs", nargs="+", default=list(CONFIGS), choices=list(CONFIGS))
    ap.add_argument("--floor", help="folder with older botorch/gpytorch/linear_operator "
                                    "to put first on PYTHONPATH")
    ap.add_argument("--record", help="write a recorded run into this folder")
    ap.add_argument("--note", action="append", default=[], help="a note for the recorded run")
    ap.add_argument("--rebuild", help="rewrite the tables of a recorded run from its cases "
                                      "(its command, date and commit kept)")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        return _worker(args)
    if args.rebuild:
        from docs.recorded import read_run, write_run

        old = read_run(args.rebuild)
        cases = old.facts["cases"]
        notes = list(old.notes)
        stack = _stack_note(old.facts.get("measured_stack") or {})
        if stack and not any(n.startswith(stack.split(":")[0]) for n in notes):
            notes.append(stack)
        run = write_run(args.rebuild, script=old.script, command=old.command,
                        tables=_tables(cases), energy=old.energy, notes=notes,
                        facts=old.facts, date=old.date, git=(old.git_commit, old.git_dirty))
        print(f"rebuilt {run.path}")
        return 0
    load0 = Path("/proc/loadavg").read_text().split()[:3] if Path("/proc/loadavg").exists() \
        else []
    rows: list[dict[str, Any]] = []
    libs: dict[str, str] = {}
    for c in args.configs:
        t0 = time.perf_counter()
        got, libs = run_config(c, args.problems, args.sizes, args.seeds, args.floor)
        rows += got
        print(f"{c}: {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    from docs.recorded import render_table

    tables = _tables(rows)
    print(f"BoTorch stack in the measured processes: {libs}")
    for t in tables.values():
        print(render_table(t))
    if args.record:
        from docs.recorded import write_run

        load1 = Path("/proc/loadavg").read_text().split()[:3] if load0 else []
        cmd = "python benchmarks/fast_paths.py " + " ".join(
            a for a in (argv if argv is not None else sys.argv[1:]) if a)
        notes = [f"load average before {' '.join(load0)}, after {' '.join(load1)} "
                 "(a shared 2-core machine: CPU times are per process, wall time is not used)",
                 _stack_note(libs), *args.note]
        run = write_run(args.record, script="benchmarks/fast_paths.py", command=cmd,
                        tables=tables, energy=None, notes=notes,
                        facts={"floor": args.floor, "seeds": args.seeds,
                               "measured_stack": libs, "cases": rows})
        print(f"recorded {run.path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
