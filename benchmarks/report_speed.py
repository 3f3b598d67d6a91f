"""How long the report commands take on large studies (target: under 5 s at 2,000 trials).

Builds synthetic study directories (two objectives by default, a noisy trade-off
front with failed trials and per-phase energy, as a real study's log holds)
and times ``ecopt compare``, ``ecopt show``, ``ecopt report`` and ``ecopt plot``
as a user runs them: one fresh process each, imports included.

Usage:
    python benchmarks/report_speed.py [--sizes 250 500 1000 2000 4000] [--objectives 2]
        [--repeats 1] [--record [TAG]] [--note TEXT]
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):  # ``python benchmarks/report_speed.py``: docs.recorded from the root
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np

import ecopt
from ecopt.meters.base import ComponentEnergy, Measurement
from ecopt.storage import StudyStorage
from ecopt.trial import ErrorInfo, PhaseRecord, TrialRecord, TrialState

COMMANDS = {
    "compare": lambda d, o, tmp: ["compare", str(d), str(o)],
    "show": lambda d, o, tmp: ["show", str(d)],
    "report": lambda d, o, tmp: ["report", str(d), "--out", str(tmp / "r.html")],
    "plot": lambda d, o, tmp: ["plot", str(d), "-o", str(tmp / "f.png")],
}


def make_study(path: Path, n: int, m: int, seed: int) -> None:
    """A study directory with ``n`` trials and ``m`` objectives (all maximised)."""
    rng = np.random.default_rng(seed)
    space = ecopt.SearchSpace({f"x{i}": ecopt.Float(0, 1) for i in range(4)})
    objs = [ecopt.Objective(f"f{j}", "max") for j in range(m)]
    st = ecopt.Study(space, objs, storage=path, sampler="random", meter="wallclock")
    st.close()
    storage = StudyStorage(path)
    lines = []
    for k in range(n):
        x = rng.random(4)
        # A trade-off: points near the simplex are good, noise spreads them out.
        w = rng.dirichlet(np.ones(m))
        vals = {f"f{j}": float(w[j] * (1 - 0.5 * x[0]) + 0.05 * rng.normal()) for j in range(m)}
        meas = Measurement(0.5, {"cpu": ComponentEnergy(float(rng.uniform(1, 5)),
                                                        "estimate-cpu-time", False)}, "estimate")
        failed = rng.random() < 0.05
        rec = TrialRecord(
            number=k, state=TrialState.FAILED if failed else TrialState.COMPLETE,
            params={f"x{i}": float(v) for i, v in enumerate(x)},
            values={} if failed else vals,
            phases={"train": PhaseRecord("train", meas, 1, 100)},
            duration_s=0.5, proposed_by="random",
            error=ErrorInfo("RuntimeError", "diverged") if failed else None)
        lines.append(rec)
    for rec in lines:
        storage.append_record(rec)
    storage.close()


def time_command(args: list[str]) -> tuple[float, float]:
    """Wall and CPU seconds (user + system, all threads) of one ``ecopt`` command."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "ecopt.cli", *args], capture_output=True,
                         text=True)
    dt = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if out.returncode not in (0, 1):
        raise RuntimeError(f"ecopt {' '.join(args)} failed: {out.stderr.strip()}")
    return dt, (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[250, 500, 1000, 2000, 4000])
    ap.add_argument("--objectives", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=1, help="runs per cell (median shown)")
    ap.add_argument("--record", nargs="?", const="", default=None, metavar="TAG",
                    help="also write a recorded run to docs/results/report_speed/<date>[-TAG]")
    ap.add_argument("--note", action="append", default=[],
                    help="a caveat the recorded run keeps (repeatable)")
    args = ap.parse_args(argv)
    import os

    from docs.recorded import git_commit

    git = git_commit()
    load = os.getloadavg()
    rows = []
    with tempfile.TemporaryDirectory(prefix="ecopt-report-speed-") as tmp_s:
        tmp = Path(tmp_s)
        for n in args.sizes:
            a, b = tmp / f"a{n}", tmp / f"b{n}"
            make_study(a, n, args.objectives, seed=n)
            make_study(b, n, args.objectives, seed=n + 1)
            row: list[object] = [n]
            for name, build in COMMANDS.items():
                times = [time_command(build(a, b, tmp)) for _ in range(args.repeats)]
                wall, cpu = (round(float(np.median(t)), 2) for t in zip(*times))
                row += [wall, cpu]
                print(f"{n:>6} trials: {name} {wall:.2f} s wall, {cpu:.2f} s CPU", flush=True)
            rows.append(row)
    columns = ["trials", *(f"{k} {kind} s" for k in COMMANDS for kind in ("wall", "CPU"))]
    if args.record is not None:
        from docs import recorded

        out = recorded.results_dir("report_speed", tag=args.record or None)
        recorded.write_run(
            out, script="benchmarks/report_speed.py",
            command=recorded.command_line("benchmarks/report_speed.py", argv), git=git,
            tables={"times": recorded.Table(columns, rows)}, energy=None,
            title=f"Report commands on {args.objectives}-objective studies (seconds, one "
                  "fresh process each, imports included)",
            notes=[("wall s: seconds until the command exits; CPU s: its user + system CPU "
                    "seconds, all threads (what other jobs on the machine change least)"),
                   (f"load average at the start: {load[0]:.2f}, {load[1]:.2f}, {load[2]:.2f} "
                    f"({os.cpu_count()}-core machine; other jobs raise every time)"), *args.note],
            facts={"objectives": args.objectives, "repeats": args.repeats,
                   "sizes": args.sizes, "load_avg_before": list(load),
                   "load_avg_after": list(os.getloadavg())})
        print(f"recorded in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
