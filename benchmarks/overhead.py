"""The optimiser's own cost: seconds per suggestion at n observations, ecopt vs Optuna GPSampler.

Usage (from the repository root)::

    python -m benchmarks.overhead                       # n = 25..200, M = 2..4, q = 1, 4
    python -m benchmarks.overhead --n 25,50,100 --M 2,3 --q 1 --reps 5
    python -m benchmarks.overhead --compare before=/tmp/old_qnehvi.py   # same package, other file
    # another checkout's sampler (its whole ecopt package), into the same table:
    PYTHONPATH=/tmp/old-checkout python -m benchmarks.overhead --label before --out <dir>
    python -m benchmarks.overhead --report-only --out <dir> --record   # docs/results/overhead/<date>

Protocol: DTLZ2 (d = 6, M objectives, noiseless). For each (n, M, q) a history
of ``n - 1`` uniform random points is told to the optimiser, one suggestion is
made and discarded from the timing (first call: imports, caches), then
``reps`` suggestions are timed in a running ask/tell loop (so the history
grows by q per step, as in a real study, and any warm start a sampler keeps in
its history is exercised). GP fit and acquisition optimisation are timed apart
(ecopt's ``sampler.last_timing``). Optuna GPSampler runs on the same
histories (q = 1 only: it proposes one point at a time; not at M >= 4, where its
process grew past 15 GiB at n = 100 on a 24 GiB machine). Peak memory is the
process's peak resident set size after the configuration; threads are
torch's intra-op threads and the Python threads alive.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import logging
import os
import resource
import shlex
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

__all__ = ["measure", "main"]

#: Targets (CPU seconds, median per suggestion at n <= 100, q = 1) by number of objectives.
TARGET_S = {2: 0.5, 3: 2.0, 4: 2.0}
#: What the table's columns mean.
TABLE_NOTE = ("CPU s: median CPU seconds of this process per suggestion, with the GP-fit and "
              "acquisition parts the sampler reports (on a machine shared with other jobs the "
              "steadier number; with one torch thread what the wall clock reads on an idle "
              "machine); wall s: median wall clock; x GP: CPU time over Optuna GPSampler's on "
              "the same history; target: for q = 1 and n <= 100.")
#: Optuna GPSampler is timed up to this many objectives (at 4 it needed > 15 GiB at n = 100).
OPTUNA_MAX_M = 3
#: Pause (untimed) after each Optuna suggestion, so its BLAS threads stop spinning first.
_BLAS_SETTLE_S = 0.3


def _problem(M: int, d: int = 6) -> Any:
    import torch
    from botorch.test_functions.multi_objective import DTLZ2

    fn = DTLZ2(dim=d, num_objectives=M)

    def f(x: Sequence[float]) -> list[float]:
        with torch.no_grad():
            return fn.evaluate_true(torch.tensor([list(x)], dtype=torch.double))[0].tolist()

    return f, [float(v) for v in torch.as_tensor(fn.ref_point).tolist()]


def _sampler_class(sampler_file: str | None) -> type:
    if sampler_file is None:
        from ecopt.samplers import QLogNEHVISampler

        return QLogNEHVISampler
    name = f"_ecopt_sampler_under_test_{abs(hash(str(sampler_file)))}"
    if name in sys.modules:
        return sys.modules[name].QLogNEHVISampler  # type: ignore[no-any-return]
    spec = importlib.util.spec_from_file_location(name, sampler_file)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod.QLogNEHVISampler


def _stats(x: Sequence[float]) -> dict[str, float]:
    a = np.asarray(x, dtype=float)
    return {"median": float(np.median(a)), "p90": float(np.percentile(a, 90))}


def measure(n: int, M: int, q: int, reps: int, sampler_files: dict[str, str | None],
            optuna_gp: bool = True, seed: int = 0, d: int = 6) -> dict[str, dict[str, Any]]:
    """Time every sampler version (and Optuna GPSampler) on one history, interleaved.

    The history: ``n - 1`` uniform random points and one qLogNEHVI proposal of
    the current sampler, all told (so the records carry what a warm start
    reads, as in a running study). Then ``reps + 1`` rounds; in each round
    every method proposes ``q`` points for the same history, in turn (so a
    load change on a shared machine hits all methods alike), and the first
    method's proposals are told: the history grows by ``q`` per round, as in
    a running study (fit cost varies a lot from one history to the next, so
    one history would mislead). Round 0 is a warm-up and not timed.

    Args:
        n: Observations in the history.
        M: Objectives (DTLZ2, d = 6).
        q: Points per suggestion (Optuna: q = 1 only).
        reps: Timed rounds.
        sampler_files: label -> a ``qnehvi.py`` to load the sampler from
            (``None``: the installed ``ecopt``).
        optuna_gp: Also time Optuna GPSampler (q = 1 only).

    Returns:
        label -> ``{"total_s", "cpu_s", "fit_s", "acqf_s", "fit_cpu_s",
        "acqf_cpu_s"}`` (median and p90 each) and the raw totals.
    """
    import ecopt

    f, ref = _problem(M, d)
    space = ecopt.SearchSpace({f"x{i}": ecopt.Float(0.0, 1.0) for i in range(d)})
    names = [f"f{j + 1}" for j in range(M)]
    objectives = [ecopt.Objective(nm, "min", r) for nm, r in zip(names, ref)]
    study = ecopt.Study(space, objectives, sampler=_sampler_class(None)(seed=seed, n_init=1),
                        meter="wallclock", seed=seed)
    rng = np.random.default_rng(seed)
    for _ in range(n - 1):
        x = rng.random(d)
        t = study.ask(params=space.decode(x))
        study.tell(t, dict(zip(names, f(x))))
    t = study.ask()
    study.tell(t, dict(zip(names, f(space.encode(t.params)))))
    records = list(study.records)
    study.close()
    samplers = {}
    for label, path in sampler_files.items():
        s = _sampler_class(path)(seed=seed, n_init=1)
        s.bind(objectives, [], seed)
        samplers[label] = s
    import optuna

    from optuna.distributions import BaseDistribution, FloatDistribution

    ostudy: optuna.Study | None = None
    dists: dict[str, BaseDistribution] = {}
    if optuna_gp and q == 1:
        optuna.logging.set_verbosity(optuna.logging.ERROR)
        dists = {nm: FloatDistribution(0.0, 1.0) for nm in space.searched_names}
        ostudy = optuna.create_study(
            directions=["minimize"] * M,
            sampler=optuna.samplers.GPSampler(seed=seed, n_startup_trials=1))
        for r in records:
            ostudy.add_trial(optuna.trial.create_trial(
                params={k: float(r.params[k]) for k in dists}, distributions=dists,
                values=[r.values[nm] for nm in names]))
    keys = ("total_s", "cpu_s", "fit_s", "acqf_s", "fit_cpu_s", "acqf_cpu_s")
    raw: dict[str, dict[str, list[float]]] = {
        k: {m: [] for m in keys} for k in [*samplers, *(["optuna-gp"] if ostudy else [])]}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for rnd in range(reps + 1):
            first = None
            for label, s in samplers.items():
                t0, c0 = time.perf_counter(), time.process_time()
                props = s.propose(space, records, [], q)
                first = props if first is None else first
                dt, dc = time.perf_counter() - t0, time.process_time() - c0
                if any(p.proposed_by != s.name for p in props):
                    raise RuntimeError(f"{label} fell back to {props[0].proposed_by}: "
                                       f"{props[0].info}")
                if rnd:
                    for k, v in (("total_s", dt), ("cpu_s", dc), *s.last_timing.items()):
                        if k in raw[label]:
                            raw[label][k].append(v)
            if ostudy is not None:
                t0, c0 = time.perf_counter(), time.process_time()
                trial = ostudy.ask(fixed_distributions=dists)
                dt, dc = time.perf_counter() - t0, time.process_time() - c0
                ostudy.tell(trial, state=optuna.trial.TrialState.FAIL)  # not data for GPSampler
                # numpy's BLAS threads spin for a while after Optuna's call; this
                # process's CPU clock would charge that spin to the next method timed.
                time.sleep(_BLAS_SETTLE_S)
                if rnd:
                    raw["optuna-gp"]["total_s"].append(dt)
                    raw["optuna-gp"]["cpu_s"].append(dc)
            # Grow the history with the first method's proposals (for every method).
            grow = ecopt.Study(space, objectives, sampler="random", meter="wallclock", seed=seed)
            for p in first or []:
                y = f(space.encode(p.params))
                rec = grow.tell(grow.ask(params=p.params), dict(zip(names, y)))
                records.append(dataclasses.replace(rec, number=len(records),
                                                   proposed_by=p.proposed_by,
                                                   proposal=dict(p.info)))
                if ostudy is not None:
                    ostudy.add_trial(optuna.trial.create_trial(
                        params={k: float(p.params[k]) for k in dists}, distributions=dists,
                        values=list(y)))
    out: dict[str, dict[str, Any]] = {}
    for label, vals in raw.items():
        out[label] = {k: _stats(v) for k, v in vals.items() if v}
        out[label]["raw_total_s"] = vals["total_s"]
        out[label]["raw_cpu_s"] = vals["cpu_s"]
    return out


def _versions() -> dict[str, str]:
    from benchmarks.mobo import versions

    return versions()


def _code_commit() -> str:
    from benchmarks.mobo import _code_commit as commit

    return commit()


def report_markdown(rows: Sequence[dict[str, Any]], command: str, meta: dict[str, str]) -> str:
    """The markdown report of measured rows (the table of :func:`table`)."""
    from benchmarks.mobo import markdown_table

    lines = [f"Command: `{command}`", "",
             f"Date (UTC): {time.strftime('%Y-%m-%d %H:%M', time.gmtime())}", "",
             "Versions: " + ", ".join(f"{k} {v}" for k, v in meta.items()), "",
             TABLE_NOTE, "", markdown_table(*table(rows))]
    return "\n".join(lines) + "\n"


def _ints(s: str) -> list[int]:
    return [int(v) for v in s.split(",") if v.strip()]


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", default="25,50,100,200", help="observation counts")
    ap.add_argument("--M", default="2,3,4", help="numbers of objectives")
    ap.add_argument("--q", default="1,4", help="batch sizes")
    ap.add_argument("--reps", type=int, default=5, help="timed suggestions per configuration")
    ap.add_argument("--no-optuna", action="store_true", help="skip Optuna GPSampler")
    ap.add_argument("--quick", action="store_true", help="n=25,50; M=2; q=1; 2 reps")
    ap.add_argument("--threads", type=int, default=None,
                    help="torch threads (default: torch's own choice)")
    ap.add_argument("--compare", action="append", metavar="LABEL=PATH",
                    help="also time the QLogNEHVISampler of another qnehvi.py, interleaved "
                         "on the same histories (before/after comparisons); repeatable")
    ap.add_argument("--label", default="ecopt", help="label of the installed ecopt's sampler")
    ap.add_argument("--out", default="benchmarks/results/overhead", help="output directory")
    ap.add_argument("--report-only", action="store_true",
                    help="only rebuild the report from <out>/rows.jsonl (every label in it)")
    ap.add_argument("--record", nargs="?", const="", default=None, metavar="TAG",
                    help="also write the recorded run (summary.json, summary.md) to "
                         "docs/results/overhead/<date>[-TAG]")
    ap.add_argument("--note", action="append", default=[],
                    help="a caveat the recorded run keeps (repeatable)")
    args = ap.parse_args(argv)
    logging.getLogger("ecopt").setLevel(logging.ERROR)
    import torch

    if args.threads is not None:
        torch.set_num_threads(args.threads)
    ns, Ms, qs, reps = _ints(args.n), _ints(args.M), _ints(args.q), args.reps
    if args.quick:
        ns, Ms, qs, reps = [25, 50], [2], [1], 2
    files: dict[str, str | None] = {args.label: None}
    for spec in args.compare or []:
        label, _, path = spec.partition("=")
        if not path:
            raise SystemExit(f"--compare takes LABEL=PATH, got {spec!r}")
        files[label] = path
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    cmd = "python -m benchmarks.overhead " + " ".join(
        shlex.quote(a) for a in (sys.argv[1:] if argv is None else argv))
    rows: list[dict[str, Any]] = []
    if args.report_only:
        rows = [json.loads(line) for line in (out / "rows.jsonl").read_text().splitlines()
                if line.strip()]
        rows.sort(key=lambda r: (r["M"], r["q"], r["n"], r["method"] == "optuna-gp"))
        return _report(rows, cmd, out, args.record, args.note)
    for M in Ms:
        for q in qs:
            for n in ns:
                res = measure(n, M, q, reps, files,
                              optuna_gp=not args.no_optuna and M <= OPTUNA_MAX_M)
                for label, r in res.items():
                    row = {"method": "optuna-gp" if label == "optuna-gp" else "ecopt",
                           "label": label, "M": M, "q": q, "n": n, **r,
                           "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
                           / 1024, "torch_threads": torch.get_num_threads(),
                           "python_threads": threading.active_count(),
                           "git_commit": _code_commit() if label == args.label else "unknown",
                           "load_avg_1min": os.getloadavg()[0]}
                    rows.append(row)
                    with (out / "rows.jsonl").open("a") as fh:
                        fh.write(json.dumps(row) + "\n")
                    print(f"{label:10s} M={M} q={q} n={n:3d}: median {r['total_s']['median']:.3f} s"
                          f"  p90 {r['total_s']['p90']:.3f} s  CPU {r['cpu_s']['median']:.3f} s",
                          flush=True)
    return _report(rows, cmd, out, args.record, args.note)


def table(rows: Sequence[dict[str, Any]]) -> tuple[list[str], list[list[Any]]]:
    """The overhead table (CPU seconds per suggestion) as columns and rows."""
    cols = ["label", "M", "q", "n", "CPU s", "fit CPU s", "acqf CPU s", "wall s", "x GP",
            "peak RSS MiB", "target (CPU s)"]
    gp = {(r["M"], r["q"], r["n"]): r["cpu_s"]["median"] for r in rows
          if r["method"] == "optuna-gp"}
    out: list[list[Any]] = []
    for r in rows:
        tgt = TARGET_S.get(r["M"]) if r["q"] == 1 and r["n"] <= 100 else None
        c = r["cpu_s"]["median"]
        ok = "-" if tgt is None or r["method"] != "ecopt" else (
            f"<= {tgt}: {'HOLDS' if c <= tgt else 'MISSED'}")
        g = gp.get((r["M"], 1, r["n"]))
        out.append([r["label"], r["M"], r["q"], r["n"], c,
                    r.get("fit_cpu_s", {}).get("median"), r.get("acqf_cpu_s", {}).get("median"),
                    r["total_s"]["median"],
                    None if g is None or r["method"] == "optuna-gp" else c / g,
                    round(r["peak_rss_mib"]), ok])
    return cols, out


def _report(rows: Sequence[dict[str, Any]], cmd: str, out: Path, record_tag: str | None,
            notes: Sequence[str] = ()) -> int:
    md = report_markdown(rows, cmd, _versions())
    (out / "report.md").write_text(md)
    print(md)
    if record_tag is not None:
        from docs import recorded

        labels = sorted({r["label"] for r in rows})
        where = recorded.results_dir("overhead", tag=record_tag or None)
        recorded.write_run(
            where, script="benchmarks/overhead.py", command=cmd,
            tables={"overhead": recorded.Table(*table(rows))}, energy=None,
            title="Optimiser overhead: CPU seconds per suggestion", notes=[TABLE_NOTE, *notes],
            facts={"targets_cpu_s": TARGET_S, "labels": labels,
                   "code": {lab: sorted({r.get("git_commit", "unknown") for r in rows
                                         if r["label"] == lab}) for lab in labels},
                   "load_avg_1min": {f"{r['label']} M={r['M']} q={r['q']} n={r['n']}":
                                     r["load_avg_1min"] for r in rows if "load_avg_1min" in r}},
            extra_libraries=("optuna",))
        print(f"recorded in {where}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
