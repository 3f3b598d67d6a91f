"""Short studies: the initial design's size when ``optimize(n_trials=...)`` plans few trials.

Usage (from the repository root)::

    python -m benchmarks.short_studies                     # prints the table
    python -m benchmarks.short_studies --record            # docs/results/short_studies/<date>/

Each (problem, rule, seed) is one ``ecopt.Study`` (in memory, meter
``"wallclock"``) with ``QLogNEHVISampler`` and ``optimize(n_trials=budget)``.
Rules: ``2(d+1)`` (``n_init`` set to the old default: with a budget of 10 and
``d >= 4`` every trial is Sobol), ``default`` (no ``n_init``: the short-study
cap of :meth:`ecopt.samplers.QLogNEHVISampler.initial_design_size`) and
``half`` (``n_init = budget // 2``). The score is the final hypervolume of
the evaluated points' true values as a fraction of the problem's maximum.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np

from benchmarks.problems import make_problem

RULES = ("2(d+1)", "default", "half")


def run_one(problem_name: str, rule: str, seed: int, budget: int) -> dict[str, Any]:
    """One study; returns the final hypervolume fraction and the trials' samplers."""
    import ecopt
    from ecopt.samplers import QLogNEHVISampler

    problem = make_problem(problem_name)
    n_init = {"2(d+1)": 2 * (problem.dim + 1), "default": None,
              "half": max(2, budget // 2)}[rule]
    sampler = QLogNEHVISampler(n_init=n_init, proposal_share=None)
    study = ecopt.Study(problem.space, problem.objectives(), sampler=sampler, seed=seed,
                        meter="wallclock")
    rng = np.random.default_rng(seed)

    def objective(t: Any) -> dict[str, float]:
        y = problem.observe_fn(dict(t.params), rng)
        return {n: float(v) for n, v in zip(problem.objective_names, y)}

    t0 = time.perf_counter()
    records = study.optimize(objective, n_trials=budget, show_progress=False)
    Y = np.array([problem.true_fn(dict(r.params)) for r in records])
    return {"problem": problem_name, "rule": rule, "seed": seed, "dim": problem.dim,
            "hv_frac": problem.hypervolume(Y) / problem.max_hv,
            "model_trials": sum(r.proposed_by != "sobol" for r in records),
            "wall_s": time.perf_counter() - t0}


def main(argv: list[str] | None = None) -> int:
    """Run every (problem, rule, seed), print the table, optionally record it."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--problems", default="branincurrin,vehiclesafety,zdt1")
    ap.add_argument("--budget", type=int, default=10)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--record", action="store_true",
                    help="write docs/results/short_studies/<date>/")
    args = ap.parse_args(argv)
    from docs.recorded import (Table, command_line, git_commit, interval, results_dir,
                               trimmed_mean_ci, write_run)

    git = git_commit()
    runs = [run_one(p, rule, s, args.budget) for p in args.problems.split(",")
            for rule in RULES for s in range(args.seeds)]
    rows = []
    for p in args.problems.split(","):
        for rule in RULES:
            rs = [r for r in runs if r["problem"] == p and r["rule"] == rule]
            m, lo, hi = trimmed_mean_ci([r["hv_frac"] for r in rs], cut=0.0)
            rows.append([p, rs[0]["dim"], rule, int(rs[0]["model_trials"]),
                         interval(m, lo, hi), float(np.mean([r["wall_s"] for r in rs]))])
    table = Table(["problem", "d", "rule", "model trials", "final HV / max HV (mean [95% CI])",
                   "wall s per study"], rows)
    from docs.recorded import render_table

    print(render_table(table))
    if args.record:
        out = results_dir("short_studies")
        write_run(out, script="benchmarks/short_studies.py",
                  command=command_line("benchmarks/short_studies.py", argv), git=git,
                  tables={"short": table}, energy=None,
                  title="Short studies: initial design size at a budget of "
                        f"{args.budget} trials",
                  notes=[f"{args.seeds} seeds per cell on a shared 2-core machine; wall "
                         "times are noisy", "meter 'wallclock': no energy involved"],
                  facts={"runs": [{k: r[k] for k in ("problem", "rule", "seed", "hv_frac",
                                                       "model_trials")} for r in runs]})
        print(f"recorded: {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
