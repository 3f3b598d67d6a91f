"""Which trials ran at the same time on the same host.

Concurrent trials on one host share its CPU package, DRAM and fans: a
host-wide CPU meter (RAPL, CodeCarbon) sees their sum, and there is no honest
way to split it between them. GPU energy stays per trial when each trial has
its own GPU (``CUDA_VISIBLE_DEVICES`` set by the executor). This module finds
the overlaps from the trial log (``host``, ``started_at``, ``duration_s``), so
a report can flag the CPU energy of overlapping trials.

Example:
    >>> from ecopt.executors import overlapping_trials
    >>> overlapping_trials(study.records)
    {0: [1], 1: [0, 2], 2: [1]}
"""

from __future__ import annotations

import datetime as _dt
from collections import defaultdict
from collections.abc import Iterable

from ecopt.trial import TrialRecord

__all__ = ["overlapping_trials", "max_concurrency", "shared_host_energy_note"]

#: The resolution of ``started_at`` in the trial log (ISO 8601 to the millisecond). Two
#: runs that share less than this much time are not an overlap: a trial that starts the
#: moment another ends may carry a start stamp up to 1 ms before that end.
_TIME_RESOLUTION_S = 0.001


def _interval(r: TrialRecord) -> tuple[float, float] | None:
    if not r.started_at:
        return None
    try:
        t0 = _dt.datetime.fromisoformat(r.started_at).timestamp()
    except ValueError:
        return None
    return t0, t0 + max(r.duration_s, 0.0)


def overlapping_trials(records: Iterable[TrialRecord]) -> dict[int, list[int]]:
    """For every trial, the trials that ran at the same time on the same host.

    Args:
        records: Finished trials (e.g. ``study.records``).

    Returns:
        Trial number -> sorted numbers of the other trials whose run
        ``[started_at, started_at + duration_s]`` shares more than
        1 ms (the resolution of ``started_at``) with its own on the same ``host`` (trials
        without a host or start time are left out). Trials that overlapped
        nothing map to ``[]``.
    """
    by_host: dict[str, list[tuple[float, float, int]]] = defaultdict(list)
    out: dict[int, list[int]] = {}
    for r in records:
        iv = _interval(r)
        if iv is None or not r.host:
            continue
        by_host[r.host].append((iv[0], iv[1], r.number))
        out[r.number] = []
    for runs in by_host.values():
        runs.sort()
        for i, (s0, e0, n0) in enumerate(runs):
            for s1, e1, n1 in runs[i + 1:]:
                if s1 >= e0 - _TIME_RESOLUTION_S:
                    break
                if min(e0, e1) - s1 > _TIME_RESOLUTION_S:
                    out[n0].append(n1)
                    out[n1].append(n0)
    return {k: sorted(v) for k, v in sorted(out.items())}


def max_concurrency(records: Iterable[TrialRecord]) -> dict[str, int]:
    """Host -> the largest number of trials that ran at once on it."""
    events: dict[str, list[tuple[float, int]]] = defaultdict(list)
    for r in records:
        iv = _interval(r)
        if iv is None or not r.host:
            continue
        # Ends count up to the log's resolution early: touching runs are not concurrent.
        events[r.host] += [(iv[0], 1), (max(iv[0], iv[1] - _TIME_RESOLUTION_S), -1)]
    peak: dict[str, int] = {}
    for host, ev in events.items():
        ev.sort(key=lambda e: (e[0], e[1]))  # an end before a start at the same instant
        cur = best = 0
        for _, d in ev:
            cur += d
            best = max(best, cur)
        peak[host] = best
    return peak


def shared_host_energy_note(records: Iterable[TrialRecord]) -> str | None:
    """A warning when trials that overlapped on one host report host-wide measured energy.

    RAPL and CodeCarbon CPU/DRAM readings cover the whole package, so two
    trials running at once each see both trials' joules. GPU components (one
    GPU per trial) and per-process estimates are not affected.

    Returns:
        The message, or ``None`` when no overlapping trial has such a component.
    """
    recs = list(records)
    overlaps = overlapping_trials(recs)
    hit: list[int] = []
    for r in recs:
        if not overlaps.get(r.number):
            continue
        for p in r.phases.values():
            if any(c.measured and not k.startswith("gpu") for k, c in
                   p.measurement.components.items()):
                hit.append(r.number)
                break
    if not hit:
        return None
    shown = ", ".join(str(n) for n in sorted(hit)[:10]) + (" ..." if len(hit) > 10 else "")
    return (f"trials {shown} ran concurrently with other trials on the same host and report "
            "host-wide CPU/DRAM energy (RAPL/CodeCarbon), which includes the other trials' share "
            "and cannot be split honestly; compare them on GPU energy, run one trial per host, "
            "or see overlapping_trials(study.records)")
