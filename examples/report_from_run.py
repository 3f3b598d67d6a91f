"""Turn a finished (or running, or crashed) study directory into numbers and files.

    python examples/report_from_run.py runs/quickstart --baseline 0

The same as ``ecopt report`` + ``ecopt show``, through the Python API: the
report data are plain dataclasses (no matplotlib needed to compute them).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ecopt.report import build_report


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("run_dir")
    p.add_argument("--baseline", type=int, default=None)
    p.add_argument("--out", default=None, help="report file (default RUN_DIR/report.html)")
    args = p.parse_args(argv)

    data = build_report(args.run_dir, baseline=args.baseline)
    est = " (estimated)" if data.energy_estimated else ""
    print(f"{data.name}: {len(data.records)} trials, {data.counts}")
    print(f"front: {list(data.front)}  knee: {data.knee}  hypervolume: {data.hypervolume:.4g}")
    for n in data.front:
        r = data.record(n)
        phases = ", ".join(f"{ph} {p.energy_j:.3g} J" for ph, p in r.phases.items())
        print(f"  trial {n}: {r.values}  [{phases}]{est}")
    if data.hv_series:
        last = data.hv_series[-1]
        print(f"search energy: {last.cumulative_energy_j:.4g} J{est}")
    if data.payback is not None:
        print(data.payback.describe())
    for w in data.warnings:
        print("warning:", w)

    if data.records:
        from ecopt.report.html import write_report

        out = Path(args.out) if args.out else None
        path, _ = write_report(data, out, png_dir=Path(args.run_dir) / "figures")
        print("wrote", path, "and figures/ (pareto.png, hypervolume.png, phase_energy.png)")
    return 1 if data.warnings else 0


if __name__ == "__main__":
    raise SystemExit(main())
