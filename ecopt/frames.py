"""Trial records as pandas DataFrames, with stable, documented columns.

Columns, in order (``<p>`` a parameter, ``<m>`` a metric, ``<ph>`` a phase):

``number``, ``state``, ``feasible``, ``proposed_by``, ``started_at``,
``duration_s``, ``energy_j``, ``energy_measured``, ``params_<p>``...,
``values_<m>`` (objectives)..., ``metrics_<m>`` (other metrics, constraint
metrics first)..., ``phase_<ph>_duration_s``, ``phase_<ph>_energy_j``,
``phase_<ph>_source`` (``component=source`` pairs, ``;``-joined),
``phase_<ph>_measured``..., ``error_type``, ``error_message``, ``host``,
``worker``, ``device``.

Parameters come in search-space order, phases in first-seen order. These
columns are stable (``tests/test_report_progress.py`` pins them; new columns
are only ever appended to their group) and explained one by one in
``docs/reports.md``. Failed trials have NaN objective values; their phases'
energy is kept, since the search spent it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ecopt.objective import Constraint, Objective
from ecopt.space import SearchSpace
from ecopt.record import TrialRecord

__all__ = ["trials_dataframe", "phase_source"]


def phase_source(record: TrialRecord, phase: str) -> str:
    """``component=source`` pairs of one phase, e.g. ``"cpu=estimate-cpu-time;ram=estimate-ram"``."""
    p = record.phases.get(phase)
    if p is None:
        return ""
    return ";".join(f"{k}={c.source}" for k, c in p.measurement.components.items())


def trials_dataframe(records: Sequence[TrialRecord], space: SearchSpace,
                     objectives: Sequence[Objective], constraints: Sequence[Constraint]) -> Any:
    """Build the DataFrame described in the module docstring (one row per record)."""
    import pandas as pd

    obj_names = [o.name for o in objectives]
    metric_names: list[str] = [c.name for c in constraints]
    phase_names: list[str] = []
    for r in records:
        for m in r.metrics:
            if m not in metric_names and m not in obj_names:
                metric_names.append(m)
        for ph in r.phases:
            if ph not in phase_names:
                phase_names.append(ph)
    rows: list[dict[str, Any]] = []
    for r in records:
        row: dict[str, Any] = {
            "number": r.number,
            "state": r.state.value,
            "feasible": r.feasible,
            "proposed_by": r.proposed_by,
            "started_at": r.started_at,
            "duration_s": r.duration_s,
            "energy_j": r.energy_j,
            "energy_measured": r.measured,
        }
        for p in space:
            row[f"params_{p}"] = r.params.get(p)
        for m in obj_names:
            row[f"values_{m}"] = r.values.get(m, float("nan"))
        for m in metric_names:
            row[f"metrics_{m}"] = r.metrics.get(m, r.values.get(m, float("nan")))
        for ph in phase_names:
            rec = r.phases.get(ph)
            row[f"phase_{ph}_duration_s"] = rec.duration_s if rec else float("nan")
            row[f"phase_{ph}_energy_j"] = rec.energy_j if rec else float("nan")
            row[f"phase_{ph}_source"] = phase_source(r, ph)
            row[f"phase_{ph}_measured"] = rec.measured if rec else None
        row["error_type"] = r.error.type if r.error else None
        row["error_message"] = r.error.message if r.error else None
        row["host"] = r.host
        row["worker"] = r.worker
        row["device"] = r.device
        rows.append(row)
    cols = ["number", "state", "feasible", "proposed_by", "started_at", "duration_s", "energy_j",
            "energy_measured"]
    cols += [f"params_{p}" for p in space]
    cols += [f"values_{m}" for m in obj_names]
    cols += [f"metrics_{m}" for m in metric_names]
    for ph in phase_names:
        cols += [f"phase_{ph}_duration_s", f"phase_{ph}_energy_j", f"phase_{ph}_source",
                 f"phase_{ph}_measured"]
    cols += ["error_type", "error_message", "host", "worker", "device"]
    return pd.DataFrame(rows, columns=cols)
