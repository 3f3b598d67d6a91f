"""The H200 run of gemma_batch (docs/gpu/2026-12-04/), as a recorded run the doc tables read.

``scripts/gpu_check.py`` keeps each experiment's own summary beside its check
summary (``docs/gpu/<date>/gemma_batch_{grid,optimiser}_summary.json``). This module
copies their tables, unchanged, into ``docs/results/gemma_batch/2026-12-04-h200/`` and
adds one table that sets the run's figures beside the ECOpt paper's, each computed
from those tables' source values; nothing is re-run or typed by hand:

    python -m docs.gpu_runs            # (re)write docs/results/gemma_batch/2026-12-04-h200
    python -m docs.gpu_runs --check    # exit 1 when the recorded run differs from the sources

``tests/test_gpu_runs.py`` runs the check.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

_ROOT = Path(__file__).resolve().parents[1]
if str(_ROOT) not in sys.path:
    sys.path.append(str(_ROOT))

from docs.recorded import RESULTS_ROOT, RecordedRun, Table, read_run  # noqa: E402
from ecopt.fmt import fmt_number  # noqa: E402

__all__ = ["SOURCE", "TARGET", "PAPER", "build", "write", "main"]

#: The gpu_check run whose gemma_batch section is recorded.
SOURCE = _ROOT / "docs" / "gpu" / "2026-12-04"
#: Where the recorded run goes.
TARGET = _ROOT / RESULTS_ROOT / "gemma_batch" / "2026-12-04-h200"
#: The paper's figures (ECOpt, Gemma 3 generation), as experiments.md quotes them.
PAPER = {"best_batch": 831, "tokens_per_joule": 2.67, "ratio_to_batch1": 38.0,
         "payback_tokens": 4802}


def _load(name: str) -> dict[str, Any]:
    return dict(json.loads((SOURCE / f"gemma_batch_{name}_summary.json").read_text("utf-8")))


def _n(x: float) -> str:
    return fmt_number(x)


def paper_table(opt: dict[str, Any], grid: dict[str, Any], largest_grid: int) -> Table:
    """The run's figures beside the paper's, one row per claim."""
    o, g = opt["optimiser"], grid["grid"]
    g_rows = {r[0]: r[1] for r in grid["tables"]["result"]["rows"]}
    g_ratio = float(g_rows["ratio best / batch 1 (end to end)"].rstrip("x"))
    g_payback = float(g_rows["payback: tokens generated at the best setting instead of batch 1 "
                             "until the per-token saving repays the search's energy"])
    g_whole = float(g_rows["whole search incl. the optimiser's own model fitting (J)"])
    opt_at_top = o["best_batch"] == o["largest_feasible_batch"]
    grid_at_top = g["best_batch"] == largest_grid
    rows: list[list[Any]] = [
        ["best batch", f"{_n(PAPER['best_batch'])}, below the memory ceiling",
         f"{_n(o['best_batch'])}" + (", the largest feasible batch it evaluated "
                                      f"({_n(o['smallest_infeasible_batch'])} ran out of memory)"
                                      if opt_at_top else ""),
         f"{_n(g['best_batch'])}" + (", the largest grid point (every grid point fit)"
                                      if grid_at_top else "")],
        ["best tokens/J (end to end)", PAPER["tokens_per_joule"], o["best_tokens_per_joule"],
         g["best_tokens_per_joule"]],
        ["best / batch 1 (end to end)", f"{_n(PAPER['ratio_to_batch1'])}x",
         f"{_n(o['ratio_to_batch1'])}x", f"{_n(g_ratio)}x"],
        ["payback: tokens at the best batch instead of batch 1 that repay the search's energy",
         PAPER["payback_tokens"], o["payback_tokens"], g_payback],
        ["energy of the search: sum of its trials (J)", None, o["search_energy_j"],
         g["energy_j"]],
        ["energy incl. the optimiser's own model fitting (J)", None,
         o["whole_search_energy_j"], g_whole],
        ["evaluations (infeasible)", None, f"{o['evaluations']} ({o['infeasible']})",
         f"{g['evaluations']} ({g['infeasible']})"],
        ["optimiser best / grid best tokens/J", None,
         o["best_tokens_per_joule"] / g["best_tokens_per_joule"], None],
        ["optimiser energy / grid energy", None, o["search_energy_j"] / g["energy_j"], None],
    ]
    return Table(["figure", "paper", "H200, optimiser (qLogNEHVI)", "H200, grid"], rows)


def build() -> RecordedRun:
    """The recorded run, from the sources (not written)."""
    opt, grid = _load("optimiser"), _load("grid")
    check = json.loads((SOURCE / "summary.json").read_text("utf-8"))
    largest_grid = max(int(str(r[2]).replace(",", "")) for r in
                       grid["tables"]["grid_trials"]["rows"] if r[4] == "complete")
    tables = {
        "paper": paper_table(opt, grid, largest_grid),
        "optimiser": Table.from_dict(opt["tables"]["result"]),
        "optimiser_trials": Table.from_dict(opt["tables"]["optimiser_trials"]),
        "grid": Table.from_dict(grid["tables"]["result"]),
        "grid_trials": Table.from_dict(grid["tables"]["grid_trials"]),
    }
    notes = [
        "The gemma_batch section of scripts/gpu_check.py on a lent NVIDIA H200 (one run, no "
        "repeats: no intervals). Tables copied unchanged from docs/gpu/2026-12-04/"
        "gemma_batch_{optimiser,grid}_summary.json by `python -m docs.gpu_runs`; the 'paper' "
        "table is computed from their values.",
        f"Grid command: {grid['command']}",
        "Energy: NVML, measured, the GPU only (the host CPU is not included).",
        "Random-weight Gemma-3 1B shape, bf16, prompt 16 + 16 new tokens; the paper's model, "
        "prompts and generation length differ, so its absolute tokens/J do not compare.",
    ]
    return RecordedRun(script=opt["script"], command=opt["command"], date="2026-12-04",
                       git_commit=check["git_commit"], git_dirty=False,
                       versions=dict(opt["versions"]), machine=opt["machine"],
                       energy=dict(opt["energy"]), tables=tables, notes=notes,
                       facts={"source": "docs/gpu/2026-12-04",
                              "largest_grid_batch": largest_grid,
                              "optimiser_largest_feasible_batch": opt["optimiser"][
                                  "largest_feasible_batch"],
                              "optimiser_smallest_infeasible_batch": opt["optimiser"][
                                  "smallest_infeasible_batch"]},
                       path=TARGET)


def write(run: RecordedRun) -> None:
    TARGET.mkdir(parents=True, exist_ok=True)
    (TARGET / "summary.json").write_text(
        json.dumps(run.to_dict(), indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    (TARGET / "summary.md").write_text(
        run.to_markdown("gemma_batch on an NVIDIA H200 (Gemma-3 1B shape)"), encoding="utf-8")


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m docs.gpu_runs",
                                description=__doc__.splitlines()[0])
    p.add_argument("--check", action="store_true", help="write nothing; exit 1 on a difference")
    args = p.parse_args(argv)
    run = build()
    if args.check:
        same = (TARGET / "summary.json").exists() and \
            read_run(TARGET).to_dict() == json.loads(json.dumps(run.to_dict()))
        if not same:
            print(f"{TARGET} differs from {SOURCE}; run `python -m docs.gpu_runs`")
        return 0 if same else 1
    write(run)
    print(f"wrote {TARGET}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
