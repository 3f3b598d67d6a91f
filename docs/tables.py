"""Regenerate (or check) every doc table from the recorded runs under docs/results/.

A table in a page under ``docs/`` sits between ``<!-- table: <script-stem>/<date-tag>#<table_id> -->``
and ``<!-- /table -->``; its rows come from
``docs/results/<script-stem>/<date-tag>/summary.json`` (format and rendering rules:
:mod:`docs.recorded`).

    python -m docs.tables                 # rewrite every block from its recorded run
    python -m docs.tables --check         # write nothing; exit 1 listing every mismatch
    python -m docs.tables --print plumber/2026-12-04#epochs   # a block ready to paste
    python -m docs.tables --list plumber/2026-12-04           # the tables of one run
    python -m docs.tables --adopt docs/benchmarks.md          # wrap hand tables equal to a recorded one

Run it from the repository root (or pass ``--docs``).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

_ROOT = Path(__file__).resolve().parents[1]
if str(_ROOT) not in sys.path:  # a clean clone without `pip install -e .`
    sys.path.append(str(_ROOT))

from docs.recorded import (  # noqa: E402
    adopt_tables,
    check_docs,
    marker_block,
    read_run,
    update_docs,
)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m docs.tables", description=__doc__.splitlines()[0])
    p.add_argument("--docs", default=str(_ROOT / "docs"), help="the docs folder (default: docs/)")
    p.add_argument("--results", help="recorded runs (default: <docs>/results)")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--check", action="store_true",
                   help="write nothing; exit 1 listing every block that differs or is broken")
    g.add_argument("--print", metavar="REF", dest="ref",
                   help="print the block (markers included) for <stem>/<date-tag>#<table_id>")
    g.add_argument("--list", metavar="RUN", dest="run",
                   help="list the table ids of <stem>/<date-tag>")
    g.add_argument("--adopt", metavar="PAGE", nargs="+",
                   help="wrap every table of these pages that equals a recorded table in its "
                        "markers (and list tables whose columns match but rows differ)")
    args = p.parse_args(argv)
    docs = Path(args.docs)
    results = Path(args.results) if args.results else docs / "results"
    if args.ref:
        print(marker_block(args.ref, results))
        return 0
    if args.adopt:
        for page in map(Path, args.adopt):
            new, adopted, near = adopt_tables(page.read_text(encoding="utf-8"), results)
            for a in adopted:
                print(f"{page}: adopted {a}")
            for n in near:
                print(f"{page}: {n}")
            if adopted:
                page.write_text(new, encoding="utf-8")
        return 0
    if args.run:
        run = read_run(results / args.run)
        for tid, t in run.tables.items():
            print(f"{args.run}#{tid}: {len(t.rows)} rows; columns {list(t.columns)}")
        return 0
    if args.check:
        problems = check_docs(docs, results)
        for prob in problems:
            print(prob)
        if problems:
            print(f"{len(problems)} doc table(s) disagree with docs/results; run "
                  "`python -m docs.tables` to regenerate them", file=sys.stderr)
            return 1
        return 0
    changed, left = update_docs(docs, results)
    for page in changed:
        print(f"rewrote {page}")
    for prob in left:
        print(prob)
    return 1 if left else 0


if __name__ == "__main__":
    sys.exit(main())
