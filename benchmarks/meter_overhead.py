"""How much does reading a meter slow down what it measures?

Runs one fixed CPU workload (pure Python, so any background thread that takes
the GIL shows up) with no meter, with each meter available on this machine,
and with CodeCarbon's own ``OfflineEmissionsTracker`` at its defaults
(``measure_power_secs=15``; writing its CSV to a temp dir). Each run with a
meter is paired with a run without one, back to back in alternating order, so
machine-load drift (a shared 2-core VM) cancels in the pair's ratio. Prints the
median slowdown ratio and its interquartile range for:

* **1 window**: one window around the whole workload (a trial phase);
* **20 windows**: the same work split into 20 windows of ~10 ms (per-batch phases);
* **per window**: the cost of one empty start+stop, in microseconds.

Target: ecopt's own meters below 1% slowdown (ratio < 1.01).

Usage::

    .venv/bin/python benchmarks/meter_overhead.py [--pairs 21] [--work-s 0.2]
        [--record [TAG]] [--note TEXT]

``--record`` also writes the recorded run (``summary.json`` + ``summary.md``,
table ``overhead``) to ``docs/results/meter_overhead/<date>[-TAG]``. No joules
are reported (the run times the meters); the facts list each meter's
provenance (which meter, measured or estimated).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from docs import recorded

#: What the table's cells mean (printed under it and kept with the recorded run).
TABLE_NOTE = (
    "wall ratio = wall time with the meter / without it, for runs back to back; CPU ratio = "
    "the same with this process's CPU time (all its threads, so a meter's background threads "
    "count; other processes' load mostly does not); each cell is the median over pairs "
    "[25th, 75th percentile], 1.01 = 1% slower; empty window us = median wall microseconds of "
    "one start() + stop() with no work inside (300 repetitions). CodeCarbon tracker: start() + "
    "work + stop() of a fresh OfflineEmissionsTracker at its defaults (measure_power_secs=15), "
    "one window only")


def _work(n: int) -> int:
    s = 0
    for i in range(n):
        s += i * i % 7
    return s


def _calibrate(target_s: float) -> int:
    n = 100_000
    while True:
        t = time.perf_counter()
        _work(n)
        dt = time.perf_counter() - t
        if dt > 0.05:
            return max(1000, int(n * target_s / dt))
        n *= 2


#: Every meter configuration tried, by label: (meter name, options of get_meter).
_ALL_LABELS: dict[str, tuple[str, dict[str, Any]]] = {
    "ecopt estimate": ("estimate", {}),
    "ecopt nvml": ("nvml", {}),
    "ecopt rapl": ("rapl", {}),
    "ecopt auto": ("auto", {"warn": False}),
    "ecopt codecarbon adapter": ("codecarbon", {}),
}


def _meters() -> dict[str, Any]:
    """Every meter that works here, by label (ecopt's own, then the CodeCarbon adapter)."""
    from ecopt.meters import get_meter

    out: dict[str, Any] = {}
    for label, (name, opts) in _ALL_LABELS.items():
        try:
            m = get_meter(name, **opts)
        except Exception as exc:
            print(f"# skipped {label}: {type(exc).__name__}: {str(exc)[:100]}")
            continue
        if name == "codecarbon":
            m.stop(m.start())  # one-time hardware detection, outside the timings
        out[label] = m
    return out


def _time_windows(meter: Any, n: int, windows: int) -> tuple[float, float]:
    per = n // windows
    c = time.process_time()
    t = time.perf_counter()
    for _ in range(windows):
        if meter is None:
            _work(per)
        else:
            h = meter.start()
            _work(per)
            meter.stop(h)
    return time.perf_counter() - t, time.process_time() - c


def _time_codecarbon_tracker(n: int, outdir: str) -> tuple[float, float]:
    from codecarbon import OfflineEmissionsTracker

    tracker = OfflineEmissionsTracker(country_iso_code="USA", output_dir=outdir)
    c = time.process_time()
    t = time.perf_counter()
    tracker.start()
    _work(n)
    tracker.stop()
    return time.perf_counter() - t, time.process_time() - c


def _empty_window_us(meter: Any, reps: int = 300) -> float:
    ts = []
    for _ in range(reps):
        t = time.perf_counter()
        meter.stop(meter.start())
        ts.append(time.perf_counter() - t)
    return statistics.median(ts) * 1e6


def _q(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    i = q * (len(xs) - 1)
    lo, hi = int(i), min(int(i) + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (i - lo)


def _median_iqr(xs: list[float]) -> dict[str, float] | None:
    return recorded.interval(statistics.median(xs), _q(xs, 0.25), _q(xs, 0.75)) if xs else None


def overhead_table(ratios: dict[str, dict[int, list[float]]],
                   cpu_ratios: dict[str, dict[int, list[float]]],
                   empty_us: dict[str, float]) -> recorded.Table:
    """The ``overhead`` table: one row per configuration, median [IQR] of the pair ratios.

    Args:
        ratios: ``label -> windows -> wall-time ratios`` (one per pair).
        cpu_ratios: The same with CPU-time ratios.
        empty_us: ``label -> microseconds`` of one empty window (meters only).
    """
    cols = ["configuration", "1 window: wall ratio", "1 window: CPU ratio",
            "20 windows: wall ratio", "20 windows: CPU ratio", "empty window us"]
    rows = [[label, _median_iqr(wall.get(1, [])), _median_iqr(cpu_ratios[label].get(1, [])),
             _median_iqr(wall.get(20, [])), _median_iqr(cpu_ratios[label].get(20, [])),
             empty_us.get(label)] for label, wall in ratios.items()]
    return recorded.Table(cols, rows)


def _provenance(meter: Any) -> dict[str, Any]:
    """Which meter a label ran and whether its readings are measured (one probe window)."""
    m = meter.stop(meter.start())
    return {"meter": m.meter, "measured": m.measured,
            "sources": sorted({c.source for c in m.components.values()})}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pairs", type=int, default=21,
                    help="paired runs (no meter, meter) per configuration (default 21)")
    ap.add_argument("--work-s", type=float, default=0.2, help="workload seconds (default 0.2)")
    ap.add_argument("--no-codecarbon-tracker", action="store_true",
                    help="skip CodeCarbon's own tracker")
    ap.add_argument("--record", nargs="?", const="", default=None, metavar="TAG",
                    help="also write the recorded run (summary.json, summary.md) to "
                         "docs/results/meter_overhead/<date>[-TAG]")
    ap.add_argument("--note", action="append", default=[],
                    help="a caveat the recorded run keeps (repeatable)")
    args = ap.parse_args(argv)
    if args.pairs < 1 or not args.work_s > 0:
        raise SystemExit(f"--pairs >= 1 and --work-s > 0 must hold, got --pairs {args.pairs}, "
                         f"--work-s {args.work_s}")
    git = recorded.git_commit()
    load_before = os.getloadavg()
    logging_quiet()
    meters = _meters()
    n = _calibrate(args.work_s)
    outdir = tempfile.mkdtemp(prefix="ecopt-cc-")
    runs: dict[str, dict[int, Callable[[], tuple[float, float]]]] = {}
    for label, m in meters.items():
        runs[label] = {w: (lambda mm, ww: lambda: _time_windows(mm, n, ww))(m, w) for w in (1, 20)}
    if not args.no_codecarbon_tracker:
        try:
            import codecarbon  # noqa: F401

            _time_codecarbon_tracker(1000, outdir)  # warm its hardware cache once
            runs["CodeCarbon tracker (defaults)"] = {1: lambda: _time_codecarbon_tracker(n, outdir)}
        except ImportError:
            print("# skipped CodeCarbon tracker: codecarbon not installed")
    # Paired design: each meter run sits next to a no-meter run of the same windows,
    # in alternating order, so machine-load drift cancels in the per-pair ratio.
    ratios: dict[str, dict[int, list[float]]] = {k: {w: [] for w in v} for k, v in runs.items()}
    cpu_ratios: dict[str, dict[int, list[float]]] = {k: {w: [] for w in v} for k, v in runs.items()}
    base_s: list[float] = []
    for p in range(args.pairs):
        for label, by_w in runs.items():
            for w, run in by_w.items():
                if p % 2 == 0:
                    t0, c0 = _time_windows(None, n, w)
                    t1, c1 = run()
                else:
                    t1, c1 = run()
                    t0, c0 = _time_windows(None, n, w)
                ratios[label][w].append(t1 / t0)
                cpu_ratios[label][w].append(c1 / c0)
                if w == 1:
                    base_s.append(t0)
        print(f"# pair {p + 1}/{args.pairs} done", file=sys.stderr)
    empty_us = {label: _empty_window_us(m) for label, m in meters.items()}
    provenance = {label: _provenance(m) for label, m in meters.items()}
    load_after = os.getloadavg()
    table = overhead_table(ratios, cpu_ratios, empty_us)
    median_s = statistics.median(base_s)
    print()
    print(f"machine: {recorded.machine_line()}")
    print(f"workload: {n} iterations of a pure-Python loop (median {median_s:.3f} s without a "
          f"meter), {args.pairs} paired runs per row; load average {_load(load_before)} at the "
          f"start, {_load(load_after)} at the end")
    print()
    print(recorded.render_table(table))
    print()
    print(TABLE_NOTE)
    for m in meters.values():
        m.close()
    if args.record is not None:
        where = recorded.results_dir("meter_overhead", tag=args.record or None)
        recorded.write_run(
            where, script="benchmarks/meter_overhead.py",
            command=recorded.command_line("benchmarks/meter_overhead.py", argv), git=git,
            tables={"overhead": table}, energy=None,
            title="Meter overhead: slowdown of a pure-Python workload, with and without a meter",
            notes=[TABLE_NOTE, ("no joules are reported: the run times the meters; "
                               "facts.meters gives each meter's provenance"),
                   (f"load average (1, 5, 15 min) {_load(load_before)} at the start, "
                    f"{_load(load_after)} at the end, on {os.cpu_count()} cores"), *args.note],
            facts={"workload_iterations": n, "work_s_target": args.work_s,
                   "median_workload_s": median_s, "window_ms_at_20_windows":
                   1000.0 * median_s / 20, "pairs": args.pairs,
                   "meters": provenance, "skipped": sorted(set(_ALL_LABELS) - set(meters)),
                   "codecarbon_tracker": not args.no_codecarbon_tracker,
                   "cpu_count": os.cpu_count(), "load_avg_before": list(load_before),
                   "load_avg_after": list(load_after)},
            extra_libraries=("codecarbon",))
        print(f"recorded in {where}")
    return 0


def _load(avg: tuple[float, float, float]) -> str:
    return ", ".join(f"{v:.2f}" for v in avg)


def logging_quiet() -> None:
    import logging

    logging.getLogger("codecarbon").setLevel(logging.ERROR)
    warnings.simplefilter("ignore")
    os.environ.setdefault("CODECARBON_LOG_LEVEL", "error")


if __name__ == "__main__":
    sys.exit(main())
