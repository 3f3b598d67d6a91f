"""How a finished trial becomes its :class:`~ecopt.TrialRecord`: what the study makes of an outcome.

Optuna builds every ``FrozenTrial`` of a finished trial in one function; this
module is ecopt's. :func:`create_record` turns what a trial is (number,
params, who proposed it) and how it ended (a
:class:`~ecopt.trial.TrialOutcome`: returned values or the exception, what it
measured) into the record the log keeps, validating the returned values
against the study's objectives and constraints. :func:`interrupted_record`
does the same for a trial found unfinished when a study is re-opened. Both
build the record through :func:`ecopt.record.make_record`, the one constructor
(which reading the log back, transfer and the Optuna import use too).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ecopt._types import Params, is_finite_number
from ecopt.objective import Constraint, Objective
from ecopt.record import (
    ErrorInfo,
    Intermediate,
    PhaseRecord,
    TrialOutcome,
    TrialRecord,
    TrialState,
    make_record,
)

__all__ = ["create_record", "interrupted_record", "validate_values"]


def validate_values(returned: Any, metrics: Mapping[str, float], objectives: Sequence[Objective],
                    constraints: Sequence[Constraint]
                    ) -> tuple[dict[str, float], dict[str, float]]:
    """Split what an objective returned into objective values and other metrics.

    Args:
        returned: A dict of metric name -> number, a number (one objective) or
            a list/tuple with one value per objective.
        metrics: Metrics the trial set with ``trial.set_metric``.
        objectives: The study's objectives.
        constraints: The study's constraints (their metrics may be returned).

    Returns:
        ``(values, metrics)``.

    Raises:
        TypeError: for a shape or a value that is not a number.
        KeyError: for unknown or missing metric names.
        ValueError: for a value that is not finite.
    """
    names = [o.name for o in objectives]
    if isinstance(returned, Mapping):
        vals = dict(returned)
    elif isinstance(returned, (int, float)) and not isinstance(returned, bool) and len(names) == 1:
        vals = {names[0]: returned}
    elif isinstance(returned, (list, tuple)) and len(returned) == len(names):
        vals = dict(zip(names, returned))
    else:
        raise TypeError(
            f"the objective must return a dict of {names}"
            + (f" plus constraint metrics {[c.name for c in constraints]}"
               if constraints else "")
            + f", got {returned!r}"
        )
    allowed = set(names) | {c.name for c in constraints}
    extra = sorted(set(vals) - allowed)
    if extra:
        raise KeyError(
            f"the objective returned unknown metric name(s) {extra}; the study expects "
            f"{sorted(allowed)} (record other numbers with trial.set_metric(name, value))"
        )
    out_metrics = {k: float(v) for k, v in metrics.items()}
    missing = [n for n in names if n not in vals]
    missing += [c.name for c in constraints if c.name not in vals and c.name not in metrics]
    if missing:
        raise KeyError(f"the objective did not return metric(s) {missing}")
    values: dict[str, float] = {}
    for k, v in vals.items():
        if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)):
            if hasattr(v, "item") and getattr(v, "numel", lambda: 1)() == 1:
                v = v.item()  # a 0-d tensor or numpy scalar
            else:
                raise TypeError(f"metric {k!r} must be a number, got {v!r} ({type(v).__name__})")
        if not is_finite_number(v):
            shown = (f"an integer of {len(str(abs(v)))} digits, too large for a float"
                     if isinstance(v, int) else v)
            raise ValueError(f"metric {k!r} must be finite, got {shown}")
        fv = float(v)
        if k in names:
            values[k] = fv
        else:
            out_metrics[k] = fv
    for k, fv in out_metrics.items():
        if not math.isfinite(fv):
            raise ValueError(f"metric {k!r} must be finite, got {fv}")
    return values, out_metrics


def create_record(*, number: int, params: Params, proposed_by: str,
                  proposal: Mapping[str, Any], outcome: TrialOutcome,
                  objectives: Sequence[Objective], constraints: Sequence[Constraint],
                  state: TrialState | None = None) -> TrialRecord:
    """The record of a finished trial.

    Args:
        number, params, proposed_by, proposal: What the trial was.
        outcome: How it ended and what it measured.
        objectives, constraints: The study's, to validate ``outcome.returned``.
        state: Force ``FAILED``, ``INFEASIBLE`` or ``PRUNED`` (``tell(state=...)``);
            ``None``: from the outcome.

    Returns:
        The record. Invalid values (missing or extra names, NaN, non-numbers)
        make a ``failed`` record, never an error. A pruned trial keeps the
        objectives of its last report.
    """
    values: dict[str, float] = {}
    metrics = dict(outcome.metrics)
    error = outcome.error
    intermediate = tuple(outcome.intermediate)
    if state is TrialState.PRUNED or (state is None and outcome.pruned):
        st = TrialState.PRUNED
        names = {o.name for o in objectives}
        if intermediate:
            values = {k: v for k, v in intermediate[-1].values.items() if k in names}
        if error is None or error.type != "TrialPruned":
            error = ErrorInfo("TrialPruned", "marked pruned by tell()", "")
    elif state is TrialState.INFEASIBLE or (state is None and outcome.infeasible):
        st = TrialState.INFEASIBLE
    elif state is TrialState.FAILED or error is not None:
        st = TrialState.FAILED
    else:
        try:
            values, metrics = validate_values(outcome.returned, outcome.metrics, objectives,
                                              constraints)
            st = TrialState.COMPLETE
        except (TypeError, KeyError, ValueError) as exc:
            st = TrialState.FAILED
            error = ErrorInfo(type(exc).__name__, exc.args[0] if exc.args else str(exc), "")
    if st is not TrialState.COMPLETE and error is None:
        error = ErrorInfo("Failed", f"marked {st.value} by tell()", "")
    unreliable = list(outcome.unreliable)
    for name, p in outcome.phases.items():
        # A samples/J read off the phase record (not through the trial) is the same number.
        spj = p.samples_per_joule
        if p.short_window and name not in unreliable and spj is not None and any(
                math.isclose(v, spj, rel_tol=1e-12) for v in values.values()):
            unreliable.append(name)
    feasible = st is TrialState.COMPLETE and all(
        c.satisfied(values.get(c.name, metrics.get(c.name, math.nan))) for c in constraints)
    return make_record(
        number=number,
        state=st,
        params=dict(params),
        values=values,
        metrics=metrics,
        feasible=feasible,
        phases=dict(outcome.phases),
        started_at=outcome.started_at,
        duration_s=outcome.duration_s,
        proposed_by=proposed_by,
        proposal=dict(proposal),
        error=error,
        host=outcome.host,
        worker=outcome.worker,
        device=outcome.device,
        noise=dict(outcome.noise),
        user_attrs=dict(outcome.user_attrs),
        intermediate=intermediate,
        unreliable=tuple(unreliable),
    )


def interrupted_record(number: int, started: Mapping[str, Any],
                       reports: Sequence[Mapping[str, Any]], objectives: Sequence[Objective],
                       constraints: Sequence[Constraint]) -> TrialRecord:
    """The record of a trial that started and never finished (its process died).

    Args:
        number: The trial number.
        started: Its line in ``running.jsonl`` (params, proposer, start time).
        reports: Its intermediate-report lines there (learning curve, and the
            phases measured up to the last report), oldest first.
        objectives, constraints: The study's.
    """
    curve: list[Intermediate] = []
    phases: dict[str, PhaseRecord] = {}
    for line in reports:
        try:
            point = Intermediate.from_dict(line["report"])
            snapshot = {str(k): PhaseRecord.from_dict(str(k), v)
                        for k, v in dict(line.get("phases") or {}).items()}
        except (KeyError, TypeError, ValueError, AttributeError):
            continue  # a damaged report line: the curve keeps the others
        curve.append(point)
        phases = snapshot
    known = f"; its {len(curve)} intermediate report(s) and the energy measured up to the " \
        "last one are kept" if curve else ""

    def get(key: str, kind: type, default: Any) -> Any:  # a damaged start line: keep what fits
        v = started.get(key) if isinstance(started, Mapping) else None
        return v if isinstance(v, kind) else default

    params = {str(k): v for k, v in get("params", dict, {}).items()
              if isinstance(v, (str, int, float, bool))}
    outcome = TrialOutcome(
        number=number, phases=phases, started_at=get("started_at", str, ""),
        error=ErrorInfo("Interrupted", "the process running this trial stopped before it "
                        f"finished (killed or crashed); recorded on resume{known}"),
        intermediate=tuple(curve))
    return create_record(number=number, params=params,
                         proposed_by=get("proposed_by", str, "user"),
                         proposal=dict(get("proposal", dict, {})), outcome=outcome,
                         objectives=objectives, constraints=constraints)
