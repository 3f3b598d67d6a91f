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
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import ecopt
from ecopt.callbacks import Callback, ProgressBar, quiet_from_env
from ecopt.fmt import fmt_number
from ecopt.frames import phase_source
from ecopt.trial import TrialRecord, excluded_reason

__all__ = ["quickstart_space", "quickstart_objectives", "run_quickstart", "trials_done",
           "cli_main", "format_front"]


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


def trials_done(study: ecopt.Study) -> int:
    """Trials of the study that ran to their end: every record but those cut off by an interrupt.

    A trial stopped by Ctrl-C, a kill or a lost worker is recorded as failed
    (:attr:`ecopt.TrialRecord.interrupted`); resuming runs another in its
    place, so it does not count.
    """
    return sum(1 for r in study.records if not r.interrupted)


def run_quickstart(out: str | Path = "runs/quickstart", trials: int = 24,
                   sampler: str = "qlognehvi", meter: str = "auto", q: int = 1, seed: int = 0,
                   epochs: int = 4, overwrite: bool = False, show_progress: bool | None = None,
                   callbacks: Sequence[Callback] = ()) -> ecopt.Study:
    """Run the quickstart study up to ``trials`` trials, resuming one already in ``out``.

    A study that stopped early (Ctrl-C, a killed process) goes on where it
    stopped: only the trials still missing run (:func:`trials_done`), so
    re-running the same command never adds more than asked; a study that has
    ``trials`` already runs nothing. Ask for a larger ``trials`` to extend it.

    Args:
        out: The study directory.
        trials: The number of trials the study should hold in the end (``>= 1``).
        sampler: Sampler name.
        meter: Meter name.
        q: Proposals made together per round (``optimize``'s ``batch_size``).
        seed: The study's seed.
        epochs: Training epochs per trial.
        overwrite: Start afresh where ``out`` holds a different study.
        show_progress: The progress bar (``None``: when stderr is a terminal).
        callbacks: Passed to :meth:`ecopt.Study.optimize`.

    Returns:
        The closed study.

    Raises:
        ValueError: for ``trials < 1`` or an unknown sampler/meter name.
    """
    from ecopt.workloads.classifier import ClassifierObjective

    if isinstance(trials, bool) or not isinstance(trials, int) or trials < 1:
        raise ValueError(f"trials >= 1 must hold, got {trials!r}")
    study = ecopt.Study(quickstart_space(epochs), quickstart_objectives(), storage=out,
                        sampler=sampler, meter=meter, seed=seed, name="quickstart",
                        overwrite=overwrite)
    try:
        missing = trials - trials_done(study)
        if missing > 0:
            study.optimize(ClassifierObjective(epochs=epochs), n_trials=missing, batch_size=q,
                           show_progress=show_progress, callbacks=callbacks)
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


def _summary_dict(study: ecopt.Study) -> dict[str, Any]:
    """What ``ecopt quickstart --json`` prints: the front and where its joules came from."""
    recs = study.records
    states: dict[str, int] = {}
    for r in recs:
        states[r.state.value] = states.get(r.state.value, 0) + 1
    meter: dict[str, Any] = study.spec.get("meter", {})
    return {
        "study": str(study.path),
        "trials": states,
        "meter": meter.get("meter"),
        "energy": "measured" if all(r.measured for r in recs if r.phases) else "estimated",
        "hypervolume": study.hypervolume(),
        "reference_point": list(study.reference_point() or []),
        "front": [{"trial": r.number, "params": dict(r.params), "values": dict(r.values),
                   "energy_j": r.energy_j} for r in study.best_trials()],
        "excluded": {r.number: excluded_reason(r) for r in recs if r.unreliable},
    }


def _proposals_per_round(args: argparse.Namespace) -> int:
    """``--proposals-per-round``, or its deprecated name ``--batch-size`` (with a warning)."""
    q, old = getattr(args, "q", None), getattr(args, "deprecated_batch_size", None)
    if old is not None:
        if q is not None and q != old:
            raise ValueError(f"--batch-size is the old name of --proposals-per-round; give one, "
                             f"got --proposals-per-round {q} and --batch-size {old}")
        import warnings

        warnings.warn("--batch-size is deprecated: it sets the points proposed together each "
                      "round, not the training batch size (the study searches that); use "
                      f"--proposals-per-round {old}", DeprecationWarning, stacklevel=2)
        q = old
    return 1 if q is None else q


def cli_main(args: argparse.Namespace) -> int:
    """Handler of ``ecopt quickstart``."""
    import warnings

    # ecopt's own deprecations reach the user (Python shows them only in __main__).
    warnings.filterwarnings("default", category=DeprecationWarning, module=r"ecopt\.")

    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    # Library deprecation chatter (torch.jit, linear_operator) is not the user's concern here.
    for mod in ("torch", "linear_operator", "gpytorch", "botorch"):
        warnings.filterwarnings("ignore", category=FutureWarning, module=mod)
        warnings.filterwarnings("ignore", category=UserWarning, module=mod)
    logging.getLogger("torch.utils.cpp_extension").setLevel(logging.ERROR)
    print(f"ecopt quickstart: {args.trials} trials, sampler {args.sampler}, meter {args.meter}, "
          f"study dir {args.out}" + _resume_note(args.out, args.trials, args.epochs), file=sys.stderr)
    # A bar where a terminal redraws it; elsewhere (a pipe, a log file) one line per trial.
    tty = bool(getattr(sys.stderr, "isatty", lambda: False)())
    lines = not args.quiet and not tty and not quiet_from_env()
    q = _proposals_per_round(args)
    study = run_quickstart(args.out, args.trials, args.sampler, args.meter, q, args.seed,
                           args.epochs, args.overwrite,
                           show_progress=False if args.quiet or lines else None,
                           callbacks=[ProgressBar(enabled=True, lines=True)] if lines else ())
    if getattr(args, "json", False):
        from ecopt.fmt import json_text

        print(json_text(_summary_dict(study)))
    else:
        print(_summary(study))
    return 0


def _resume_note(out: str, trials: int, epochs: int) -> str:
    """What a re-run does with the quickstart study already in ``out`` (``""``: none there)."""
    from ecopt.errors import EcoptError

    if not (Path(out) / "trials.jsonl").exists():
        return ""
    try:
        old = ecopt.load_study(out)
    except (EcoptError, ValueError, OSError):
        return ""  # opening it for writing says what is wrong
    if old.space.to_dict() != quickstart_space(epochs).to_dict():
        return ""  # another study: opening it says so (or --overwrite moves it aside)
    done = trials_done(old)
    if done >= trials:
        return (f"\n  it already holds {done} finished trials: nothing to run (ask for more "
                f"with --trials {done + 8}, or use another --out)")
    return f"\n  resuming: {done} of {trials} trials done, {trials - done} to run"
