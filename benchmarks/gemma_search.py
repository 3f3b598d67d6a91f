"""The Gemma batch sweep's search energy against the grid's, over seeds (issue 38 item 4).

Does the optimiser reach the grid's best tokens/J spending less energy than the grid? And
what do its proposals cost next to its trials, with full and with economy proposals?

For each seed this runs ``experiments/gemma_batch.py`` (its CPU toy by default; any of its
options after ``--``) once as the grid sweep (``--sampler grid``) and once per arm with
``--no-grid``:

    ``full``      full qLogNEHVI proposals always (``--proposal-share none``)
    ``economy``   economy proposals while a full one costs more than a quarter of a trial
                  (``--proposal-share 0.25``)

and reads the studies' own logs back:

- the grid's energy: the joules of its trials (and of its grid sampler's metered steps);
- the optimiser's energy to the grid's best: joules of its trials and of its metered
  proposals, in trial order, up to and including the first trial whose tokens/J reaches
  ``REACH_FRACTION`` (0.95) x that seed's grid best (tokens/J is measured: the grid's best
  is one noisy reading);
- saving: the grid's energy over that (0 when the optimiser never reaches it), the claim
  being that it exceeds 1;
- the proposals' joules over the trials' (the cheap-trial regime of issue 38 item 2);
- the hypervolume of each study's trials (both objectives) over that of the union of the
  seed's grid and arms, scaled to the union's range.

Intervals are 20%-trimmed means with their 95% interval; the verdicts come from
:func:`ecopt._verdict.verdict`. On a CPU every joule is ESTIMATED from CPU time.

Usage::

    python -m benchmarks.gemma_search --seeds 10 --out runs/gemma_search
    python -m benchmarks.gemma_search --report-only --out runs/gemma_search --record
    python -m benchmarks.gemma_search --quick --out runs/gemma_search-quick   # smoke
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
#: Arm -> the ``--proposal-share`` it runs with.
ARMS: dict[str, str] = {"full": "none", "economy": "0.25"}
#: What ``--quick`` passes to gemma_batch (its own ``--quick`` model and grid).
QUICK_ARGS = ("--quick", "--max-batch", "4096")
LEGEND = (
    "reached: runs whose optimiser reached 0.95 x that seed's grid best tokens/J; energy to "
    "it: joules of the optimiser's trials and metered proposals in trial order up to the "
    "first that did; saving: the grid's energy over that (0 when never reached), 20%-trimmed "
    "mean [95% interval] over seeds, verdict on 'saving > 1' by the one verdict rule; "
    "proposals / trials: the optimiser's metered proposals' joules over its trials'; best / "
    "grid best: its best tokens/J over the same seed's grid best; HV: the hypervolume of its "
    "complete trials (both objectives, scaled to the range of the seed's grid and arms "
    "together, reference point a tenth of the range below the worst) over that of the "
    "union of those trials. Every joule is ESTIMATED "
    "from CPU time on this machine unless the run's meter says otherwise.")


def _gemma() -> Any:
    """experiments/gemma_batch.py as a module (imported once per process)."""
    exp = str(ROOT / "experiments")
    if exp not in sys.path:
        sys.path.insert(0, exp)
    from _common import load_script

    return load_script("gemma_batch")


def _records(study_dir: Path) -> list[dict[str, Any]]:
    path = study_dir / "trials.jsonl"
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()] \
        if path.exists() else []


def _tpj(r: dict[str, Any]) -> float | None:
    if r.get("state") != "complete":
        return None
    v = {**(r.get("metrics") or {}), **(r.get("values") or {})}.get("tokens_per_joule")
    return None if v is None else float(v)


def _run(gb: Any, argv: list[str], quiet: bool) -> None:
    """``gemma_batch.main(argv)`` in this process; the "ecopt" logger's level, which the
    experiment's setup lowers to ERROR, is put back afterwards."""
    import logging

    sink = io.StringIO()
    logger = logging.getLogger("ecopt")
    level = logger.level
    try:
        with contextlib.redirect_stdout(sink) if quiet else contextlib.nullcontext():
            rc = gb.main(argv)
    finally:
        logger.setLevel(level)
    if rc != 0:
        raise SystemExit(f"gemma_batch exited with {rc}: {' '.join(argv)}")


def run_seed(out: Path, seed: int, arms: Sequence[str], extra: Sequence[str],
             quiet: bool = True) -> None:
    """The grid and every arm for one seed into ``out/seed<seed>/`` (done ones skipped)."""
    gb = _gemma()
    base = out / f"seed{seed}"
    common = ["--seed", str(seed), "--overwrite", "--quiet", *extra]
    if not (base / "grid" / "summary.json").exists():
        _run(gb, ["--sampler", "grid", "--out", str(base / "grid"), *common], quiet)
    for arm in arms:
        if not (base / arm / "summary.json").exists():
            _run(gb, ["--no-grid", "--proposal-share", ARMS[arm], "--out", str(base / arm),
                      *common], quiet)


def seed_facts(base: Path, arm: str) -> dict[str, Any] | None:
    """One seed's figures for ``arm`` (``None`` until its grid and arm have run)."""
    gb = _gemma()
    grid = _records(base / "grid" / "grid")
    opt = _records(base / arm / "optimiser")
    if not grid or not opt or not (base / arm / "summary.json").exists():
        return None
    grid_best = max((v for r in grid if (v := _tpj(r)) is not None), default=None)
    opt_best = max((v for r in opt if (v := _tpj(r)) is not None), default=None)
    grid_j = gb.search_energy_j(grid)
    trials_j = sum(float(r.get("energy_j") or 0.0) for r in opt)
    total_j = gb.search_energy_j(opt) or 0.0
    to_j = gb.search_energy_to_j(opt, None if grid_best is None
                                 else gb.REACH_FRACTION * grid_best, _tpj)
    header = json.loads((base / arm / "summary.json").read_text())
    return {"grid_energy_j": grid_j, "grid_best_tokens_per_joule": grid_best,
            "grid_best_batch": next((r["params"]["batch_size"] for r in grid
                                     if _tpj(r) == grid_best), None),
            "best_tokens_per_joule": opt_best,
            "best_fraction_of_grid_best": (opt_best / grid_best
                                           if opt_best is not None and grid_best else None),
            "energy_to_grid_best_j": to_j,
            "saving": (grid_j / to_j if to_j else 0.0) if grid_j else None,
            "trials_j": trials_j, "proposals_j": total_j - trials_j,
            "proposals_over_trials": (total_j - trials_j) / trials_j if trials_j else None,
            "evaluations": len(opt),
            "economy_proposals": sum(bool(((r.get("proposal") or {}).get("economy") or {})
                                          .get("active")) for r in opt),
            "git_commit": header.get("git_commit"),
            "energy": header.get("energy")}


def hv_fractions(base: Path, studies: Sequence[str]) -> dict[str, float]:
    """Each study's hypervolume over that of the union of their complete trials (one seed).

    The two objectives (from the optimiser study's ``study.json``) are scaled to [0, 1]
    by the union's range, as maximisation; the reference point lies a tenth of the range
    below the union's worst value in each.
    """
    import numpy as np

    from ecopt import pareto

    spec = json.loads((base / next(a for a in studies if a != "grid") / "optimiser"
                       / "study.json").read_text())
    names = [o["name"] for o in spec["objectives"]]
    dirs = [o["direction"] for o in spec["objectives"]]
    ys: dict[str, np.ndarray] = {}
    for st in studies:
        recs = _records(base / st / ("grid" if st == "grid" else "optimiser"))
        rows = [[float(r["values"][n]) for n in names] for r in recs
                if r.get("state") == "complete" and all(n in (r.get("values") or {})
                                                        for n in names)]
        ys[st] = pareto.to_maximization(np.array(rows).reshape(-1, len(names)), dirs)
    union = np.vstack(list(ys.values()))
    lo, hi = union.min(axis=0), union.max(axis=0)
    span = np.where(hi > lo, hi - lo, 1.0)
    ref = [-0.1] * len(names)
    total = pareto.hypervolume((union - lo) / span, ref)
    return {st: (pareto.hypervolume((y - lo) / span, ref) / total if total > 0 else 0.0)
            for st, y in ys.items()}


def collect(out: Path, arms: Sequence[str], seeds: Sequence[int]) -> dict[str, list[dict]]:
    """``arm -> [seed facts]`` for the seeds that have run (the grid's hypervolume is kept
    with each arm's facts as ``grid_hv_fraction``)."""
    got: dict[str, list[dict[str, Any]]] = {a: [] for a in arms}
    for s in seeds:
        base = out / f"seed{s}"
        facts = {a: f for a in arms if (f := seed_facts(base, a)) is not None}
        if not facts:
            continue
        hv = hv_fractions(base, ["grid", *facts])
        for a, f in facts.items():
            got[a].append({"seed": s, **f, "hv_fraction": hv[a],
                           "grid_hv_fraction": hv["grid"]})
    return got


def tables(got: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """The ``search_energy`` and ``proposals`` tables (and the paired ``economy`` one)."""
    import statistics

    from docs.recorded import Table, trimmed_interval
    from ecopt._verdict import verdict

    def tm(xs: Sequence[float]) -> Any:
        """20%-trimmed mean [95% interval]; ``-`` below 2 values (no spread to judge)."""
        return trimmed_interval(xs) if len(xs) >= 2 else "-"

    def judged(cell: Any) -> str:
        return verdict(cell["low"], cell["high"]) if isinstance(cell, dict) else "-"

    search_rows, prop_rows = [], []
    for arm, fs in got.items():
        if not fs:
            continue
        reached = [f for f in fs if f["energy_to_grid_best_j"] is not None]
        saving = tm([f["saving"] for f in fs if f["saving"] is not None])
        search_rows.append([
            arm, len(fs), f"{len(reached)}/{len(fs)}",
            tm([f["grid_energy_j"] for f in fs if f["grid_energy_j"] is not None]),
            statistics.median([f["energy_to_grid_best_j"] for f in reached])
            if reached else "-",
            statistics.median([f["saving"] for f in fs if f["saving"] is not None]),
            saving, judged(saving)])
        prop_rows.append([
            arm, len(fs), tm([f["trials_j"] for f in fs]), tm([f["proposals_j"] for f in fs]),
            tm([f["proposals_over_trials"] for f in fs
                if f["proposals_over_trials"] is not None]),
            f"{sum(f['economy_proposals'] for f in fs)}/"
            f"{sum(f['evaluations'] for f in fs)}",
            tm([f["best_fraction_of_grid_best"] for f in fs
                if f["best_fraction_of_grid_best"] is not None]),
            tm([f["hv_fraction"] for f in fs]), tm([f["grid_hv_fraction"] for f in fs])])
    out: dict[str, Any] = {
        "search_energy": Table(
            ["arm", "seeds", "reached", "grid energy J (ESTIMATED)",
             "optimiser energy to it J, median of reached (ESTIMATED)",
             "saving, median (never reached: 0)",
             "saving: grid J / optimiser J to it", "verdict: saving > 1"], search_rows),
        "proposals": Table(
            ["arm", "seeds", "trials J per study (ESTIMATED)",
             "proposals J per study (ESTIMATED)", "proposals / trials",
             "economy proposals / evaluations", "best / grid best tokens/J",
             "HV / the seed's union front", "grid's HV / the union front"], prop_rows)}
    if "full" in got and "economy" in got:
        full = {f["seed"]: f for f in got["full"]}
        pairs = [(full[f["seed"]], f) for f in got["economy"] if f["seed"] in full]
        rows = []
        for what, key in (("hypervolume", "hv_fraction"),
                          ("best tokens/J", "best_tokens_per_joule"),
                          ("proposals J", "proposals_j"),
                          ("energy to the grid's best J", "energy_to_grid_best_j")):
            xs = [e[key] / a[key] for a, e in pairs if a[key] and e[key] is not None]
            cell = tm(xs)
            rows.append([what, len(xs), cell, judged(cell)])
        out["economy"] = Table(["economy / full, per seed", "pairs", "ratio",
                                "verdict: ratio > 1"], rows)
    return out


def build_parser() -> argparse.ArgumentParser:
    from docs import recorded

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, default=None, help="number of seeds (default 10)")
    ap.add_argument("--seed-offset", type=int, default=0, help="first seed")
    ap.add_argument("--arms", default=",".join(ARMS), help="comma-separated: full,economy")
    ap.add_argument("--quick", action="store_true",
                    help="2 seeds of gemma_batch's --quick model (smoke)")
    ap.add_argument("--out", default="runs/gemma_search", help="output directory")
    recorded.add_record_args(ap, "gemma_search")
    ap.add_argument("gemma_args", nargs="*",
                    help="after --: options for experiments/gemma_batch.py (its CPU toy "
                         "by default)")
    return ap


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    arms = [a.strip() for a in args.arms.split(",") if a.strip()]
    bad = [a for a in arms if a not in ARMS]
    if bad:
        raise SystemExit(f"unknown arm(s) {bad}; expected some of {list(ARMS)}")
    seeds = range(args.seed_offset,
                  args.seed_offset + (args.seeds or (2 if args.quick else 10)))
    extra = [*(QUICK_ARGS if args.quick else ()), *args.gemma_args]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if not args.report_only:
        for s in seeds:
            run_seed(out, s, arms, extra)
            print(f"seed {s}: done", flush=True)
    got = collect(out, arms, seeds)
    if not any(got.values()):
        print("no runs to report")
        return 1
    tabs = tables(got)
    from docs import recorded

    cmd = "python -m benchmarks.gemma_search " + " ".join(
        shlex.quote(a) for a in (sys.argv[1:] if argv is None else argv))
    md = "\n".join([f"Command: `{cmd}`", "", LEGEND, ""]
                   + [f"### {k}\n\n{recorded.render_table(t)}\n" for k, t in tabs.items()])
    (out / "report.md").write_text(md)
    facts = {"arms": {a: ARMS[a] for a in arms}, "gemma_args": extra,
             "reach_fraction": _gemma().REACH_FRACTION,
             "runs": {a: [{k: v for k, v in f.items() if k != "energy"} for f in fs]
                      for a, fs in got.items()},
             "code": sorted({f["git_commit"] or "unknown" for fs in got.values() for f in fs})}
    energy = next((f["energy"] for fs in got.values() for f in fs if f.get("energy")), None)
    (out / "summary.json").write_text(json.dumps(facts, indent=1, default=str))
    if args.record is not None:
        where = recorded.results_dir("gemma_search", tag=args.record or None)
        recorded.write_run(where, script="benchmarks/gemma_search.py", command=cmd,
                           tables=tabs, energy=energy or recorded.estimated_energy(),
                           title="Gemma batch sweep: the search's energy against the grid's",
                           notes=[LEGEND, *args.note], facts=facts)
        print(f"recorded in {where}")
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
