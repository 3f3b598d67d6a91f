"""The optimiser's own cost: seconds per suggestion at n observations, ecopt vs Optuna GPSampler.

Usage (from the repository root)::

    python -m benchmarks.overhead                       # n = 25..200, M = 2..4, q = 1, 4
    python -m benchmarks.overhead --n 25,50,100 --M 2,3 --q 1 --reps 5
    python -m benchmarks.overhead --sampler-file /tmp/old_qnehvi.py --label before

Protocol: DTLZ2 (d = 6, M objectives, noiseless). For each (n, M, q) a history
of ``n - 1`` uniform random points is told to the optimiser, one suggestion is
made and discarded from the timing (first call: imports, caches), then
``reps`` suggestions are timed in a running ask/tell loop (so the history
grows by q per step, as in a real study, and any warm start a sampler keeps in
its history is exercised). GP fit and acquisition optimisation are timed apart
(ecopt's ``sampler.last_timing``). Optuna GPSampler runs on the same
histories (q = 1 only: it proposes one point at a time). Peak memory is the
process's peak resident set size after the configuration; threads are
torch's intra-op threads and the Python threads alive.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import logging
import resource
import sys
import threading
import time
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # ``python benchmarks/overhead.py``
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np

__all__ = ["measure_ecopt", "measure_optuna_gp", "main"]

#: Targets (seconds, median per suggestion at n <= 100, q = 1) by number of objectives.
TARGET_S = {2: 0.5, 3: 2.0}


def _problem(M: int, d: int = 6) -> Any:
    import torch
    from botorch.test_functions.multi_objective import DTLZ2

    fn = DTLZ2(dim=d, num_objectives=M)

    def f(x: Sequence[float]) -> list[float]:
        with torch.no_grad():
            return fn.evaluate_true(torch.tensor([list(x)], dtype=torch.double))[0].tolist()

    return f, [float(v) for v in fn.ref_point]


def _sampler_class(sampler_file: str | None) -> type:
    if sampler_file is None:
        from ecopt.samplers import QLogNEHVISampler

        return QLogNEHVISampler
    spec = importlib.util.spec_from_file_location("_ecopt_sampler_under_test", sampler_file)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod.QLogNEHVISampler


def _stats(x: Sequence[float]) -> dict[str, float]:
    a = np.asarray(x, dtype=float)
    return {"median": float(np.median(a)), "p90": float(np.percentile(a, 90))}


def measure_ecopt(n: int, M: int, q: int, reps: int, seed: int = 0,
                  sampler_file: str | None = None, d: int = 6) -> dict[str, Any]:
    """Time ecopt's qLogNEHVI suggestions at ``n`` observations (see the module docstring)."""
    import ecopt

    f, ref = _problem(M, d)
    space = ecopt.SearchSpace({f"x{i}": ecopt.Float(0.0, 1.0) for i in range(d)})
    names = [f"f{j + 1}" for j in range(M)]
    cls = _sampler_class(sampler_file)
    study = ecopt.Study(space, [ecopt.Objective(nm, "min", r) for nm, r in zip(names, ref)],
                        sampler=cls(seed=seed, n_init=1), meter="wallclock", seed=seed)
    rng = np.random.default_rng(seed)
    for _ in range(n - 1):
        x = rng.random(d)
        t = study.ask(params=space.decode(x))
        study.tell(t, dict(zip(names, f(x))))
    total, cpu, fit, acqf = [], [], [], []
    for r in range(reps + 1):
        t0, c0 = time.perf_counter(), time.process_time()
        trials = study.ask(n=q)
        dt, dc = time.perf_counter() - t0, time.process_time() - c0
        if r > 0:
            total.append(dt)
            cpu.append(dc)
            fit.append(study.sampler.last_timing.get("fit_s", float("nan")))
            acqf.append(study.sampler.last_timing.get("acqf_s", float("nan")))
        for t in trials:
            study.tell(t, dict(zip(names, f(space.encode(t.params)))))
        if any(t.proposed_by != study.sampler.name for t in trials):
            raise RuntimeError(f"the sampler fell back: {trials[0].proposal}")
    study.close()
    return {"total_s": _stats(total), "cpu_s": _stats(cpu), "fit_s": _stats(fit),
            "acqf_s": _stats(acqf), "raw_total_s": total}


def measure_optuna_gp(n: int, M: int, reps: int, seed: int = 0, d: int = 6) -> dict[str, Any]:
    """Time Optuna GPSampler suggestions on the same histories (q = 1)."""
    import optuna
    from optuna.distributions import FloatDistribution

    optuna.logging.set_verbosity(optuna.logging.ERROR)
    f, _ = _problem(M, d)
    dists = {f"x{i}": FloatDistribution(0.0, 1.0) for i in range(d)}
    study = optuna.create_study(directions=["minimize"] * M,
                                sampler=optuna.samplers.GPSampler(seed=seed, n_startup_trials=1))
    rng = np.random.default_rng(seed)
    for _ in range(n - 1):
        x = rng.random(d)
        study.add_trial(optuna.trial.create_trial(
            params={k: float(v) for k, v in zip(dists, x)}, distributions=dists, values=f(x)))
    total, cpu = [], []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for r in range(reps + 1):
            t0, c0 = time.perf_counter(), time.process_time()
            trial = study.ask(fixed_distributions=dists)
            dt, dc = time.perf_counter() - t0, time.process_time() - c0
            if r > 0:
                total.append(dt)
                cpu.append(dc)
            study.tell(trial, f([trial.params[k] for k in dists]))
    return {"total_s": _stats(total), "cpu_s": _stats(cpu), "raw_total_s": total}


def _versions() -> dict[str, str]:
    from benchmarks.mobo import versions

    return versions()


def report_markdown(rows: Sequence[dict[str, Any]], command: str, meta: dict[str, str]) -> str:
    lines = [f"Command: `{command}`", "",
             f"Date (UTC): {time.strftime('%Y-%m-%d %H:%M', time.gmtime())}", "",
             "Versions: " + ", ".join(f"{k} {v}" for k, v in meta.items()), "",
             "Wall-clock seconds per suggestion (median, p90), its GP-fit and acquisition "
             "parts (median), and the process's CPU seconds per suggestion (median: on a "
             "machine shared with other jobs this is the steadier number; with one torch "
             "thread it is what the wall clock reads on an idle machine).", "",
             "| method | label | M | q | n | median s | p90 s | fit s | acqf s | CPU s | "
             "peak RSS MiB | torch threads | target (CPU s) |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        tgt = TARGET_S.get(r["M"]) if r["q"] == 1 and r["n"] <= 100 else None
        c = r.get("cpu_s", {}).get("median", float("nan"))
        ok = "-" if tgt is None or r["method"] != "ecopt" else (
            f"<= {tgt} s: {'HOLDS' if c <= tgt else 'MISSED'}")
        fit = r.get("fit_s", {}).get("median")
        acq = r.get("acqf_s", {}).get("median")
        lines.append(
            f"| {r['method']} | {r['label']} | {r['M']} | {r['q']} | {r['n']} | "
            f"{r['total_s']['median']:.3f} | {r['total_s']['p90']:.3f} | "
            f"{'-' if fit is None else f'{fit:.3f}'} | {'-' if acq is None else f'{acq:.3f}'} | "
            f"{c:.3f} | {r['peak_rss_mib']:.0f} | {r['torch_threads']} | {ok} |")
    return "\n".join(lines) + "\n"


def _ints(s: str) -> list[int]:
    return [int(v) for v in s.split(",") if v.strip()]


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", default="25,50,100,200", help="observation counts")
    ap.add_argument("--M", default="2,3,4", help="numbers of objectives")
    ap.add_argument("--q", default="1,4", help="batch sizes")
    ap.add_argument("--reps", type=int, default=5, help="timed suggestions per configuration")
    ap.add_argument("--methods", default="ecopt,optuna-gp")
    ap.add_argument("--quick", action="store_true", help="n=25,50; M=2; q=1; 2 reps")
    ap.add_argument("--threads", type=int, default=None,
                    help="torch threads (default: torch's own choice)")
    ap.add_argument("--sampler-file", default=None,
                    help="a qnehvi.py to load QLogNEHVISampler from (before/after comparisons)")
    ap.add_argument("--label", default="current", help="label of this sampler version")
    ap.add_argument("--out", default="benchmarks/results/overhead", help="output directory")
    args = ap.parse_args(argv)
    logging.getLogger("ecopt").setLevel(logging.ERROR)
    import torch

    if args.threads is not None:
        torch.set_num_threads(args.threads)
    ns, Ms, qs, reps = _ints(args.n), _ints(args.M), _ints(args.q), args.reps
    if args.quick:
        ns, Ms, qs, reps = [25, 50], [2], [1], 2
    methods = [m.strip() for m in args.methods.split(",")]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []
    for M in Ms:
        for q in qs:
            for n in ns:
                for m in methods:
                    if m == "optuna-gp" and q != 1:
                        continue
                    if m == "ecopt":
                        res = measure_ecopt(n, M, q, reps, sampler_file=args.sampler_file)
                    elif m == "optuna-gp":
                        res = measure_optuna_gp(n, M, reps)
                    else:
                        raise SystemExit(f"unknown method {m!r}")
                    row = {"method": m, "label": args.label if m == "ecopt" else "-",
                           "M": M, "q": q, "n": n, **res,
                           "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
                           / 1024, "torch_threads": torch.get_num_threads(),
                           "python_threads": threading.active_count()}
                    rows.append(row)
                    with (out / f"rows-{args.label}.jsonl").open("a") as fh:
                        fh.write(json.dumps(row) + "\n")
                    print(f"{m:10s} {args.label:8s} M={M} q={q} n={n:3d}: median "
                          f"{res['total_s']['median']:.3f} s  p90 {res['total_s']['p90']:.3f} s"
                          f"  CPU {res['cpu_s']['median']:.3f} s",
                          flush=True)
    cmd = "python -m benchmarks.overhead " + " ".join(sys.argv[1:] if argv is None else argv)
    md = report_markdown(rows, cmd, _versions())
    (out / f"report-{args.label}.md").write_text(md)
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
