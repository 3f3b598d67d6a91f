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
"""

from __future__ import annotations

import argparse
import datetime as _dt
import os
import platform
import random
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


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


def _meters() -> dict[str, Any]:
    """Every meter that works here, by label (ecopt's own, then the CodeCarbon adapter)."""
    from ecopt.meters import get_meter

    out: dict[str, Any] = {}
    for label, name, opts in (("ecopt estimate", "estimate", {}),
                              ("ecopt nvml", "nvml", {}),
                              ("ecopt rapl", "rapl", {}),
                              ("ecopt auto", "auto", {"warn": False}),
                              ("ecopt codecarbon adapter", "codecarbon", {})):
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


def _machine() -> str:
    from ecopt.host import host_facts

    h = host_facts()
    gpus = ", ".join(h["gpus"]) or "no GPU"
    return (f"{h['cpu_model']}, {h['cpu_count']} logical CPUs, {h['ram_gb']} GB RAM, {gpus}, "
            f"RAPL {'yes' if h['rapl'] else 'no'}; Python {h['python']}; {h['os']}")


def _q(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    i = q * (len(xs) - 1)
    lo, hi = int(i), min(int(i) + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (i - lo)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pairs", type=int, default=21,
                    help="paired runs (no meter, meter) per configuration (default 21)")
    ap.add_argument("--work-s", type=float, default=0.2, help="workload seconds (default 0.2)")
    ap.add_argument("--no-codecarbon-tracker", action="store_true",
                    help="skip CodeCarbon's own tracker")
    args = ap.parse_args(argv)
    if args.pairs < 1 or not args.work_s > 0:
        raise SystemExit("--pairs >= 1 and --work-s > 0 must hold")
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
    print()
    print(f"meter overhead, {_dt.datetime.now(_dt.timezone.utc):%Y-%m-%d %H:%M} UTC")
    print(f"machine: {_machine()}")
    print(f"workload: {n} iterations of a pure-Python loop (median {statistics.median(base_s):.3f} s "
          f"without a meter), {args.pairs} paired runs per row")
    print()
    hdr = (f"| {'configuration':<30} | {'1 window: wall ratio [IQR]':>26} | "
           f"{'CPU ratio [IQR]':>22} | {'20 windows: wall ratio [IQR]':>28} | "
           f"{'CPU ratio [IQR]':>22} | {'empty window us':>15} |")
    print(hdr)
    print("|" + "|".join("-" * (len(c)) for c in hdr.split("|")[1:-1]) + "|")

    def cell(xs: list[float]) -> str:
        if not xs:
            return "-"
        return f"{statistics.median(xs):.4f} [{_q(xs, 0.25):.3f}-{_q(xs, 0.75):.3f}]"

    for label, wall_by_w in ratios.items():
        empty = f"{_empty_window_us(meters[label]):.1f}" if label in meters else "-"
        cr = cpu_ratios[label]
        print(f"| {label:<30} | {cell(wall_by_w.get(1, [])):>26} | {cell(cr.get(1, [])):>22} | "
              f"{cell(wall_by_w.get(20, [])):>28} | {cell(cr.get(20, [])):>22} | {empty:>15} |")
    print()
    print("wall ratio = median over pairs of (wall time with the meter / without it, run back to "
          "back); CPU ratio = the same with this process's CPU time (all its threads, so a meter's "
          "background threads count; other processes' load mostly does not); 1.0100 = 1% slower; "
          "IQR = interquartile range of the pair ratios (machine noise). "
          "CodeCarbon tracker: start() + work + stop() of a fresh OfflineEmissionsTracker at its "
          "defaults (measure_power_secs=15).")
    for m in meters.values():
        m.close()
    return 0


def logging_quiet() -> None:
    import logging

    logging.getLogger("codecarbon").setLevel(logging.ERROR)
    warnings.simplefilter("ignore")
    os.environ.setdefault("CODECARBON_LOG_LEVEL", "error")


if __name__ == "__main__":
    sys.exit(main())
