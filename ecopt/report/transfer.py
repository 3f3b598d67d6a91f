"""The transfer sources of a study and the trust its proposals recorded in them.

Read from ``study.json`` (``"transfer"``) and the trial log (each proposal's
``proposal["transfer"]``): the report never opens the sources themselves.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ecopt.trial import TrialRecord

__all__ = ["transfer_rows", "transfer_lines"]


def transfer_rows(spec: Mapping[str, Any], records: Sequence[TrialRecord]
                  ) -> list[dict[str, Any]]:
    """One row per source: what was used, how many trials it proposed, its trust over time.

    Returns:
        Dicts with ``label``, ``study_id``, ``n_records``, ``hash``, ``design_trials``
        (trials whose configuration came from the source's Pareto set),
        ``pooled_trials`` (proposals whose model held its trials), ``trust_first``
        and ``trust_last`` (the first and latest judged trust, ``None`` before
        any), ``trust_by_trial`` (trial number -> trust).
    """
    src = spec.get("transfer")
    if not isinstance(src, list):
        return []
    rows = []
    for i, s in enumerate(src):
        if not isinstance(s, Mapping):
            continue
        label = str(s.get("label") or s.get("path"))
        by_trial: dict[int, float] = {}
        design = pooled = 0
        for r in sorted(records, key=lambda r: r.number):
            note = r.proposal.get("transfer") if isinstance(r.proposal, Mapping) else None
            if not isinstance(note, Mapping):
                continue
            entries = note.get("sources") or []
            if i < len(entries) and isinstance(entries[i], Mapping) \
                    and entries[i].get("trust") is not None:
                by_trial[r.number] = float(entries[i]["trust"])
            if r.proposed_by == "transfer" and r.proposal.get("source") == label:
                design += 1
            if label in (note.get("pooled") or []):
                pooled += 1
        vals = list(by_trial.values())
        rows.append({"label": label, "study_id": s.get("study_id"),
                     "n_records": s.get("n_records"), "hash": s.get("hash"),
                     "mapped": s.get("mapped"), "dropped": s.get("dropped"),
                     "design_trials": design, "pooled_trials": pooled,
                     "trust_first": vals[0] if vals else None,
                     "trust_last": vals[-1] if vals else None, "trust_by_trial": by_trial})
    return rows


def transfer_lines(spec: Mapping[str, Any], records: Sequence[TrialRecord]) -> list[str]:
    """``ecopt show``'s lines naming the sources and their trust (empty without sources)."""
    rows = transfer_rows(spec, records)
    if not rows:
        return []
    out = [f"transfer sources ({len(rows)}; read-only, none of their trials is counted here):"]
    for r in rows:
        trust = "not judged yet" if r["trust_last"] is None else \
            f"{r['trust_first']:.2f} at first, {r['trust_last']:.2f} now"
        out.append(f"  {r['label']} (study {r['study_id']}, {r['n_records']} trials, hash "
                   f"{r['hash']}): trust {trust}; {r['design_trials']} trials from its Pareto "
                   f"set, {r['pooled_trials']} proposals modelled with its trials")
    return out
