"""Every verdict a recorded run states, judged again by the one rule from the run's own cells.

The experiments and benchmarks write their verdicts with :mod:`ecopt._verdict`; this
module re-derives those columns from the committed cells of every recorded run that
has one (nothing is re-run), so a run recorded before the rule changed can be brought
to it, and a test can check that none disagrees:

    python -m docs.verdicts            # rewrite the verdict cells of every recorded run
    python -m docs.verdicts --check    # write nothing; exit 1 listing every disagreement

Each rewritten run keeps its provenance (command, date, commit, versions) and gets a
note saying its verdicts were re-derived by this rule.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

_ROOT = Path(__file__).resolve().parents[1]
if str(_ROOT) not in sys.path:  # a clean clone without `pip install -e .`
    sys.path.append(str(_ROOT))

from docs.recorded import RESULTS_ROOT, RecordedRun, Table, read_run, rewrite_run  # noqa: E402

__all__ = ["JUDGES", "NOTE", "rejudge", "check", "main"]

#: The note a re-derived run gets.
NOTE = ("Verdict cells re-derived from this run's own committed cells by the one verdict rule "
        "(ecopt._verdict: symmetric, from the interval or the two one-sided tests); nothing "
        "was re-run.")


def _script(path: str) -> ModuleType:
    """An experiment or benchmark script, imported from its file."""
    file = _ROOT / path
    if str(file.parent) not in sys.path:
        sys.path.insert(0, str(file.parent))
    name = "_verdicts_" + file.stem
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, file)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def _tables(script: str, judge: str, table_id: str
            ) -> Callable[[RecordedRun], tuple[dict[str, Table], dict[str, Any]]]:
    def run(r: RecordedRun) -> tuple[dict[str, Table], dict[str, Any]]:
        if table_id not in r.tables:
            return {}, {}
        return {table_id: getattr(_script(script), judge)(r.tables[table_id])}, {}
    return run


def _plumber(r: RecordedRun) -> tuple[dict[str, Table], dict[str, Any]]:
    mod = _script("benchmarks/plumber.py")
    judges = {"comparisons": mod.judge_comparisons, "bound": mod.judge_bound}
    return {k: judge(r.tables[k]) for k, judge in judges.items() if k in r.tables}, {}


def _mobo_targets(r: RecordedRun) -> tuple[dict[str, Table], dict[str, Any]]:
    if "targets" not in r.facts:
        return {}, {}
    return {}, {"targets": _script("benchmarks/mobo.py").targets_of_tables(r.tables)}


#: script stem -> how its runs' verdicts are judged from their cells.
JUDGES: dict[str, Callable[[RecordedRun], tuple[dict[str, Table], dict[str, Any]]]] = {
    "dataframe_energy": _tables("experiments/dataframe_energy.py", "judge_findings", "findings"),
    "dataframe_sweep": _tables("experiments/dataframe_sweep.py", "judge_claims", "claim"),
    "imdb_films": _tables("experiments/imdb_films.py", "judge_findings", "findings"),
    "nas_seeds": _tables("experiments/nas_seeds.py", "judge_tests", "tests"),
    "plumber": _plumber,
    "mobo": _mobo_targets,
}


def rejudge(run_dir: Path) -> tuple[RecordedRun, dict[str, Table], dict[str, Any]]:
    """A run, and the tables and facts whose verdicts differ from the rule's."""
    run = read_run(run_dir)
    tables, facts = JUDGES[run_dir.parent.name](run)
    return (run, {k: t for k, t in tables.items() if t != run.tables[k]},
            {k: v for k, v in facts.items() if v != run.facts.get(k)})


def _runs(results: Path) -> list[Path]:
    return sorted(d for stem in JUDGES for d in (results / stem).glob("*")
                  if (d / "summary.json").exists())


def check(results: Path = _ROOT / RESULTS_ROOT) -> list[str]:
    """Every recorded verdict that differs from the rule's, as ``run#table: row`` lines."""
    problems = []
    for d in _runs(results):
        run, tables, facts = rejudge(d)
        for tid, t in tables.items():
            for old, new in zip(run.tables[tid].rows, t.rows):
                if old != new:
                    problems.append(f"{d.parent.name}/{d.name}#{tid}: {old} -> {new}")
        for k, v in facts.items():
            problems.append(f"{d.parent.name}/{d.name} facts.{k}: {run.facts.get(k)} -> {v}")
    return problems


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m docs.verdicts",
                                description=__doc__.splitlines()[0])
    p.add_argument("--results", default=str(_ROOT / RESULTS_ROOT))
    p.add_argument("--check", action="store_true", help="write nothing; exit 1 on a difference")
    args = p.parse_args(argv)
    results = Path(args.results)
    if args.check:
        problems = check(results)
        print("\n".join(problems))
        return 1 if problems else 0
    for d in _runs(results):
        run, tables, facts = rejudge(d)
        if tables or facts:
            rewrite_run(run, tables=tables, facts=facts, note=NOTE)
            print(f"rewrote {d}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
