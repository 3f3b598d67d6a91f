"""The dataframe study's operator claim, tested over data sizes: polars cheaper on bulk operators?

The study concluded that polars spends less CPU energy than pandas on the bulk
operators (join, group-by, encode) once tables pass a few hundred thousand
rows. This script runs the five MovieLens operators of
:mod:`ecopt.data.operators` (read, join, group-by, encode, to-tensor) at
several sizes of a generated ML-1M-schema table, each backend in a fresh
process per run, ``--repeats`` runs per cell, and reports per size:

* ``sweep``: CPU seconds and joules of read, of the bulk operators (join +
  group_by + encode), of to_tensor and of all five, trimmed means with 95 %
  intervals. ``polars-lazy`` builds one plan and collects it in to_tensor, so
  only its five-operator total compares with the others.
* ``claim``: polars (eager) against pandas on the bulk operators, and
  polars-lazy and polars against pandas on all five, as ratios with a verdict:
  "holds" needs polars' interval entirely below pandas'; "does not hold" its
  interval entirely above; otherwise "not shown".

Energy is the meter's (``auto``: ESTIMATED from CPU time where no counter
exists; the tables say which).

Example:
    python experiments/dataframe_sweep.py --sizes 50000 250000 1000209 --out runs/df_sweep --record
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _common as C  # noqa: E402

from ecopt._verdict import NOT_SHOWN, verdict_of_intervals  # noqa: E402

from docs.recorded import (  # noqa: E402
    Table,
    command_line,
    estimated_energy,
    git_commit,
    record_dirs,
    trimmed_interval,
    versions_table,
    write_run,
)

__all__ = ["BULK", "claim_verdict", "judge_claims", "sweep_tables", "main"]

#: The study's bulk operators.
BULK = ("join", "group_by", "encode")
BACKENDS = ("pandas", "polars", "polars-lazy", "dask")


def claim_verdict(polars: dict[str, float], pandas: dict[str, float]) -> str:
    """The verdict on "polars costs less than pandas", by the one rule (:mod:`ecopt._verdict`).

    ``holds`` when polars' interval lies below pandas', ``does not hold`` when above,
    ``not shown`` when they overlap.

    Args:
        polars: ``{"value", "low", "high"}`` of polars' cost.
        pandas: The same for pandas.
    """
    ratio = polars["value"] / pandas["value"] if pandas["value"] > 0 else float("inf")
    v = verdict_of_intervals((pandas["low"], pandas["high"]), (polars["low"], polars["high"]))
    return f"{v}: polars {ratio:.2f}x pandas, intervals {'overlap' if v == NOT_SHOWN else 'apart'}"


def judge_claims(table: Table) -> Table:
    """The ``claim`` table with its verdict column judged again from its own cells."""
    cols = list(table.columns)
    i_pl, i_pd, i_v = cols.index("polars"), cols.index("pandas"), cols.index("verdict")
    rows = []
    for r in table.rows:
        r = list(r)
        r[i_v] = claim_verdict(r[i_pl], r[i_pd])
        rows.append(r)
    return Table(cols, rows)


def _cost(run: list[dict[str, Any]], ops: Sequence[str], key: str) -> float:
    return sum(d[key] for d in run if d["name"] in ops)


def sweep_tables(runs: dict[tuple[int, str], list[list[dict[str, Any]]]], energy_word: str
                 ) -> tuple[Table, Table, dict[str, Any]]:
    """The ``sweep`` and ``claim`` tables from ``(size, backend) -> runs of operator dicts``."""
    from ecopt.data.operators import OPERATORS

    groups = {"read": ("read",), "bulk": BULK, "to_tensor": ("to_tensor",), "all": OPERATORS}
    rows: list[list[Any]] = []
    facts: dict[str, Any] = {}
    for (size, b), rs in sorted(runs.items(), key=lambda kv: (kv[0][0],
                                                               BACKENDS.index(kv[0][1]))):
        cell = {g: {k: trimmed_interval([_cost(r, ops, k) for r in rs])
                    for k in ("cpu_s", "energy_j")} for g, ops in groups.items()}
        facts[f"{size}/{b}"] = cell
        rows.append([size, b, len(rs), cell["read"]["cpu_s"], cell["bulk"]["cpu_s"],
                     cell["to_tensor"]["cpu_s"], cell["all"]["cpu_s"], cell["bulk"]["energy_j"],
                     cell["all"]["energy_j"]])
    sweep = Table(["ratings", "backend", "runs", "read CPU s", "join + group_by + encode CPU s",
                   "to_tensor CPU s", "all five CPU s",
                   f"join + group_by + encode J ({energy_word})", f"all five J ({energy_word})"],
                  rows)
    crow: list[list[Any]] = []
    for size in sorted({s for s, _ in runs}):
        pd_ = facts.get(f"{size}/pandas")
        if pd_ is None:
            continue
        for b, group, label in (("polars", "bulk", "join + group_by + encode"),
                                ("polars", "all", "all five"),
                                ("polars-lazy", "all", "all five")):
            f = facts.get(f"{size}/{b}")
            if f is None:
                continue
            crow.append([size, f"{b} vs pandas", f"{label} J ({energy_word})",
                         f[group]["energy_j"], pd_[group]["energy_j"],
                         claim_verdict(f[group]["energy_j"], pd_[group]["energy_j"])])
    claim = Table(["ratings", "comparison", "measure", "polars", "pandas", "verdict"], crow)
    return sweep, claim, facts


def main(argv: Sequence[str] | None = None) -> int:
    """Run the sweep; returns the exit status."""
    p = C.base_parser(__doc__.splitlines()[0], "runs/dataframe_sweep")
    p.add_argument("--sizes", type=int, nargs="+", default=[50_000, 250_000, 1_000_209],
                   help="ratings per generated table (1000209 = ML-1M's full size)")
    p.add_argument("--backends", nargs="+", default=list(BACKENDS), choices=BACKENDS)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--record", nargs="?", const="", default=None, metavar="TAG",
                   help="also write the summary to docs/results/dataframe_sweep/<date>[-TAG]")
    args = p.parse_args(argv)
    if args.repeats < 2 or any(s < 1000 for s in args.sizes):
        raise SystemExit(f"--repeats >= 2 and --sizes >= 1000 must hold, got {args.repeats}, "
                         f"{args.sizes}")
    from ecopt.data.datasets import write_movielens, write_movielens_side_files

    sha = git_commit(Path(__file__).resolve().parents[1])
    t0 = time.monotonic()
    load0 = Path("/proc/loadavg").read_text().strip()
    out = Path(args.out)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(Path(__file__).resolve().parents[1]), os.environ.get("PYTHONPATH", "")])}
    files: dict[int, Path] = {}
    for size in args.sizes:
        folder = out / "data" / f"ml-{size}"
        if size == 1_000_209:
            r = write_movielens(folder / "ratings.dat", seed=args.seed, full=True)
        else:  # ML-1M's ratings per user and per movie, scaled
            users, movies = max(50, round(6040 * size / 1_000_209) * 4), 3706
            r = write_movielens(folder / "ratings.dat", min(users, 6040), movies, size, args.seed)
        write_movielens_side_files(folder, r, args.seed)
        files[size] = r
    runs: dict[tuple[int, str], list[list[dict[str, Any]]]] = {}
    for rep in range(args.repeats):  # repeat-major: machine noise spreads over the cells
        for size in args.sizes:
            for b in args.backends:
                cmd = [sys.executable, "-m", "ecopt.data.operators", "movielens", b,
                       str(files[size]), "--meter", args.meter]
                res = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1800)
                if res.returncode != 0:
                    C.say(f"{size} {b} repeat {rep}: FAILED {res.stderr[-300:]}")
                    continue
                run = json.loads(res.stdout.strip().splitlines()[-1])
                runs.setdefault((size, b), []).append(run)
                C.say(f"{size} {b} repeat {rep}: all five "
                      f"{sum(d['cpu_s'] for d in run):.3f} CPU s")
    measured = all(d["measured"] for rs in runs.values() for r in rs for d in r)
    word = "measured" if measured else "ESTIMATED"
    sweep, claim, facts = sweep_tables(runs, word)
    load1 = Path("/proc/loadavg").read_text().strip()
    notes = [f"Generated MovieLens-1M-schema tables (ratings.dat, users.dat, movies.dat; not the "
             f"real data) at {args.sizes} ratings; {args.repeats} runs per cell, each in a fresh "
             "process (imports not counted: the operators are timed from the first read).",
             "Trimmed mean (20% cut at each end) with a 95% interval; verdicts compare intervals.",
             "polars-lazy: read/join/group_by/encode only build a plan; to_tensor collects it, "
             "so its per-operator split is not comparable, only its total.",
             f"/proc/loadavg at start: {load0}; at end: {load1} (shared 2-core machine)."]
    energy = (estimated_energy(meter=args.meter) if not measured
              else {"meter": args.meter, "measured": True, "note": "measured"})
    for d in record_dirs(out, "dataframe_sweep", args.record):
        write_run(d, script="experiments/dataframe_sweep.py",
                  command=command_line("experiments/dataframe_sweep.py", argv),
                  tables={"sweep": sweep, "claim": claim, "versions": versions_table()},
                  energy=energy, notes=notes,
                  facts={"wall_s": time.monotonic() - t0, "cells": facts}, git=sha,
                  title="Dataframe operators over data sizes: the polars bulk-operator claim")
    if not args.quiet:
        print((out / "summary.md").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
