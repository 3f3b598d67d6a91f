"""How close are ``ecopt.data.profile``'s predicted gains to the measured ones?

For pipelines with a known bottleneck, the profiler recommends knob changes with
a predicted speed-up; this script applies each one, times ``--epochs`` epochs
with the old and the new setting (consumer included), and prints predicted vs
measured gain as a markdown table. Timing, not energy: no joules are involved.

    python benchmarks/data_profile.py [--epochs 3] [--items 160] [--record]

The table is written through :mod:`docs.recorded` (``<out>/summary.json``
and ``summary.md``; ``--record`` also into ``docs/results/data_profile/<date>``).

BLAS is held to one thread per process (``OMP_NUM_THREADS=1`` unless set):
with two BLAS threads in every DataLoader worker on a 2-core machine, the
CPU-bound case ran 10x slower and ``num_workers=2``, predicted 1.23x faster,
measured 0.17x — oversubscription the profiler's model does not capture.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

_ROOT = Path(__file__).resolve().parents[1]
if str(_ROOT) not in sys.path:
    sys.path.append(str(_ROOT))

os.environ.setdefault("OMP_NUM_THREADS", "1")  # before numpy loads BLAS (see docstring)


def _sleepy(i: int) -> Any:
    import torch

    time.sleep(0.003)  # waits (I/O-like): scales with workers past the core count
    return torch.full((16,), float(i))


def _busy(i: int) -> Any:
    import numpy as np
    import torch

    a = np.random.default_rng(i).random((120, 120))
    for _ in range(4):
        a = a @ a.T / 120.0  # CPU-bound: scales with workers up to the core count
    return torch.from_numpy(a[0, :16].copy()).float()


def _ident(i: int) -> int:
    return i


def _consumer(batch: Any) -> None:
    time.sleep(0.001)


def _run(source: Any, cfg: Any, epochs: int) -> float:
    from ecopt.data import make_loader

    loader = make_loader(source, cfg)
    t0 = time.perf_counter()
    for _ in range(epochs):
        for b in loader:
            _consumer(b)
    return time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--items", type=int, default=160)
    p.add_argument("--out", default="runs/data_profile")
    p.add_argument("--record", nargs="?", const="", default=None, metavar="TAG",
                   help="also write the summary to docs/results/data_profile/<date>[-TAG]")
    args = p.parse_args(argv)
    import torch

    from docs.recorded import (
        Table,
        command_line,
        git_commit,
        record_dirs,
        write_run,
    )

    sha = git_commit(_ROOT)
    load0 = os.getloadavg()[0]

    torch.set_num_threads(1)
    from ecopt.data import (
        INSURANCE,
        MOVIELENS,
        LoaderConfig,
        StagedDataset,
        TablePipeline,
        profile,
        write_insurance,
        write_movielens,
    )

    tmp = Path(tempfile.mkdtemp(prefix="ecopt-bench-"))
    cases = {
        "sleepy per-sample stage": StagedDataset(
            list(range(args.items)), [("load", _ident), ("sleepy", _sleepy)],
            labels=[0] * args.items),
        "CPU-bound per-sample stage": StagedDataset(
            list(range(args.items)), [("load", _ident), ("busy", _busy)],
            labels=[0] * args.items),
        "Insurance table, pandas": TablePipeline(write_insurance(tmp / "ins.csv"), INSURANCE,
                                                 "pandas"),
        "MovieLens 50k, pandas": TablePipeline(
            write_movielens(tmp / "ratings.dat", 600, 800, 50_000), MOVIELENS, "pandas"),
    }
    base = LoaderConfig(batch_size=32, num_workers=0, cache=False)
    rows: list[list[Any]] = []
    for name, src in cases.items():
        try_b = ("polars", "dask") if isinstance(src, TablePipeline) else ()
        diag = profile(src, _consumer, config=base, epochs=args.epochs, meter="wallclock",
                       try_backends=try_b)
        t_base = _run(src, base, args.epochs)
        changes = [(f"{r.knob}={r.value}", r.predicted_gain, r) for r in diag.recommendations]
        changes.append((f"combined: num_workers={diag.best_config.num_workers}, "
                        f"cache={diag.best_config.cache}", diag.best_gain, None))
        for label, pred, rec in changes:
            if rec is not None and rec.knob == "backend":
                alt = TablePipeline(src.path, src.schema, rec.value)
                alt.run()  # warm-up, as the profiler does
                t_new = _run(alt, base, args.epochs)
            else:
                cfg = diag.best_config if rec is None else base.replace(**{rec.knob: rec.value})
                t_new = _run(src, cfg, args.epochs)
            rows.append([name, diag.bottleneck, label, round(pred, 2), round(t_base / t_new, 2)])
        print(f"[{name}: baseline {t_base:.2f} s for {args.epochs} epochs]", file=sys.stderr)
    table = Table(["pipeline", "bottleneck", "change", "predicted gain (x)", "measured gain (x)"],
                  rows)
    notes = [f"{args.epochs} epochs per timing, consumer = a 1 ms training step; timing only "
             "(no energy). BLAS and torch at one thread per process.",
             "The machine was shared with other jobs (1-minute load average "
             f"{load0:.1f} at the start, {os.getloadavg()[0]:.1f} at the end); one timing per "
             "setting, so gains near 1 are within noise."]
    for d in record_dirs(args.out, "data_profile", args.record):
        write_run(d, script="benchmarks/data_profile.py",
                  command=command_line("benchmarks/data_profile.py", argv),
                  tables={"gains": table}, energy=None, notes=notes, git=sha,
                  title="Profiler: predicted vs measured gains")
    print((Path(args.out) / "summary.md").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
