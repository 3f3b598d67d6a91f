"""One rule for every claim a study checks: ``holds``, ``does not hold`` or ``not shown``.

A claim is stated as a ratio that the claim says exceeds a threshold (``A / B > 1``: "A
costs more than B", "transfer saves more than the hand warm start"...). The verdict comes
from the ratio's interval alone, and symmetrically:

- ``holds``: the whole interval lies above the threshold;
- ``does not hold``: the whole interval lies below it (the opposite is shown);
- ``not shown``: the interval contains the threshold, whichever side the point lies on.

A point ratio on the wrong side whose interval still reaches the threshold is *not shown*,
never *does not hold*: the run could not tell. Every experiment, benchmark and findings row
in ``docs/`` calls :func:`verdict`; ``tests/test_verdict.py`` holds the rule.
"""

from __future__ import annotations

import math

__all__ = ["HOLDS", "NOT_HOLD", "NOT_SHOWN", "VERDICTS", "verdict", "verdict_of_ratio"]

HOLDS = "holds"
NOT_HOLD = "does not hold"
NOT_SHOWN = "not shown"
#: Every verdict, in the order a table sorts them.
VERDICTS = (HOLDS, NOT_SHOWN, NOT_HOLD)


def verdict(low: float, high: float, threshold: float = 1.0) -> str:
    """The verdict on "the ratio exceeds ``threshold``" from the ratio's interval.

    Args:
        low: Lower end of the ratio's interval (e.g. a bootstrap 95% interval).
        high: Upper end.
        threshold: The value the claim says the ratio exceeds (1: "A > B").

    Returns:
        :data:`HOLDS`, :data:`NOT_HOLD` or :data:`NOT_SHOWN`.

    Raises:
        ValueError: when an end is NaN or ``low > high``.

    Example:
        >>> verdict(1.2, 1.8)
        'holds'
        >>> verdict(0.7, 1.1)
        'not shown'
    """
    for name, v in (("low", low), ("high", high), ("threshold", threshold)):
        if not isinstance(v, (int, float)) or isinstance(v, bool) or math.isnan(v):
            raise ValueError(f"{name} must be a number (not NaN), got {name}={v!r}")
    if low > high:
        raise ValueError(f"low <= high must hold, got low={low}, high={high}")
    if low > threshold:
        return HOLDS
    if high < threshold:
        return NOT_HOLD
    return NOT_SHOWN


def verdict_of_ratio(numerator: tuple[float, float], denominator: tuple[float, float],
                     threshold: float = 1.0) -> str:
    """The verdict on "numerator / denominator exceeds ``threshold``" from two intervals.

    The ratio's interval is taken conservatively from the two quantities' intervals
    (``num_low / den_high`` to ``num_high / den_low``), for when only per-arm
    intervals were recorded.

    Args:
        numerator: ``(low, high)`` of the numerator, both > 0.
        denominator: ``(low, high)`` of the denominator, both > 0.
        threshold: As in :func:`verdict`.

    Raises:
        ValueError: when an end is not > 0 or an interval is reversed.
    """
    for name, (lo, hi) in (("numerator", numerator), ("denominator", denominator)):
        if not (lo > 0 and hi > 0):
            raise ValueError(f"{name} interval ends must be > 0, got {name}=({lo}, {hi})")
        if lo > hi:
            raise ValueError(f"{name} low <= high must hold, got {name}=({lo}, {hi})")
    return verdict(numerator[0] / denominator[1], numerator[1] / denominator[0], threshold)
