"""``ecopt quickstart``: a real study end to end on CPU in a few minutes.

A small torch MLP on scikit-learn's digits (shipped with scikit-learn), searching
width, depth, learning rate and batch size for accuracy (max) and inference
samples/J (max). Writes the study directory and prints the Pareto front with
each energy figure's source.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import Any

import ecopt
from ecopt.fmt import fmt_number
from ecopt.frames import phase_source
from ecopt.trial import TrialRecord, excluded_reason

__all__ = ["quickstart_space", "quickstart_objectives", "run_quickstart", "cli_main",
           "format_front"]


def quickstart_space(epochs: int = 4) -> ecopt.SearchSpace:
    """The quickstart's search space."""
    return ecopt.SearchSpace({
        "width": ecopt.Int(8, 512, log=True),
        "depth": ecopt.Int(1, 4),
        "lr": ecopt.Float(1e-4, 1e-1, log=True),
        "batch_size": ecopt.Int(16, 512, log=True),
        "epochs": ecopt.Fixed(epochs),
    })


def quickstart_objectives() -> list[ecopt.Objective]:
    """Accuracy (max, worth having above 0.5) and inference samples/J (max)."""
    return [ecopt.Objective("accuracy", "max", threshold=0.5),
            ecopt.Objective("samples_per_joule", "max")]


def format_front(records: list[TrialRecord], space: ecopt.SearchSpace) -> str:
    """The front as a fixed-width table, energy source and measured/estimated labelled."""
    names = [n for n in space if space[n].n_dims]
    head = ["trial", *names, "accuracy", "samples/J", "infer J", "energy source"]
    rows = []
    for r in sorted(records, key=lambda r: -r.values["accuracy"]):
        ph = r.phases.get("inference")
        kind = "measured" if ph is not None and ph.measured else "ESTIMATED"
        rows.append([
            str(r.number),
            *[f"{r.params[n]:.3g}" if isinstance(r.params[n], float) else str(r.params[n])
              for n in names],
            f"{r.values['accuracy']:.4f}",
            fmt_number(r.values["samples_per_joule"]),
            fmt_number(ph.energy_j) if ph else "-",
            f"{kind}: {phase_source(r, 'inference')}",
        ])
    widths = [max(len(h), *(len(row[i]) for row in rows)) if rows else len(h)
              for i, h in enumerate(head)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(head, widths)),
             "  ".join("-" * w for w in widths)]
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths)) for row in rows]
    return "\n".join(lines)


def run_quickstart(out: str | Path = "runs/quickstart", trials: int = 24,
                   sampler: str = "qlognehvi", meter: str = "auto", q: int = 1, seed: int = 0,
                   epochs: int = 4, overwrite: bool = False, show_progress: bool | None = None
                   ) -> ecopt.Study:
    """Run (or resume) the quickstart study and return it.

    Raises:
        ValueError: for ``trials < 1`` or an unknown sampler/meter name.
    """
    from ecopt.workloads.classifier import ClassifierObjective

    if trials < 1:
        raise ValueError(f"trials >= 1 must hold, got {trials}")
    study = ecopt.Study(quickstart_space(epochs), quickstart_objectives(), storage=out,
                        sampler=sampler, meter=meter, seed=seed, name="quickstart",
                        overwrite=overwrite)
    try:
        study.optimize(ClassifierObjective(epochs=epochs), n_trials=trials, batch_size=q,
                       show_progress=show_progress)
    finally:
        study.close()
    return study


def _summary(study: ecopt.Study) -> str:
    recs = study.records
    states: dict[str, int] = {}
    for r in recs:
        states[r.state.value] = states.get(r.state.value, 0) + 1
    front = study.best_trials()
    measured = all(r.measured for r in recs if r.phases)
    meter: dict[str, Any] = study.spec.get("meter", {})
    lines = [
        f"study: {study.path}  ({len(recs)} trials: "
        + ", ".join(f"{v} {k}" for k, v in sorted(states.items())) + ")",
        f"meter: {meter.get('meter', '?')} -> energy is "
        + ("MEASURED" if measured else "ESTIMATED (no hardware energy counter was read; "
           "samples/J here is nearly throughput times a constant)"),
        f"hypervolume: {fmt_number(study.hypervolume())} (reference point "
        + ", ".join(fmt_number(v) for v in study.reference_point() or []) + ")",
        "",
        f"Pareto front ({len(front)} trials):",
        format_front(front, study.space),
        *([""] + [f"trial {r.number} {excluded_reason(r)}" for r in recs if r.unreliable]
          if any(r.unreliable for r in recs) else []),
        "",
        f"report: ecopt show {study.path}   |   ecopt report {study.path}",
    ]
    return "\n".join(lines)


def cli_main(args: argparse.Namespace) -> int:
    """Handler of ``ecopt quickstart``."""
    import warnings

    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    # Library deprecation chatter (torch.jit, linear_operator) is not the user's concern here.
    for mod in ("torch", "linear_operator", "gpytorch", "botorch"):
        warnings.filterwarnings("ignore", category=FutureWarning, module=mod)
        warnings.filterwarnings("ignore", category=UserWarning, module=mod)
    logging.getLogger("torch.utils.cpp_extension").setLevel(logging.ERROR)
    print(f"ecopt quickstart: {args.trials} trials, sampler {args.sampler}, meter {args.meter}, "
          f"study dir {args.out}", file=sys.stderr)
    study = run_quickstart(args.out, args.trials, args.sampler, args.meter, args.q, args.seed,
                           args.epochs, args.overwrite,
                           show_progress=False if args.quiet else None)
    print(_summary(study))
    return 0
