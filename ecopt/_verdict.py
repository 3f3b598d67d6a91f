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

__all__ = ["HOLDS", "NOT_HOLD", "NOT_SHOWN", "VERDICTS", "verdict", "verdict_of_intervals",
           "verdict_of_ratio", "verdict_of_tests"]

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


def verdict_of_intervals(a: tuple[float, float], b: tuple[float, float]) -> str:
    """The verdict on "A exceeds B" from the two quantities' own intervals.

    The difference ``A - B`` lies in ``(a_low - b_high, a_high - b_low)``; the claim
    holds when that whole interval is above 0 (the intervals are apart, A's above),
    does not hold when it is below 0, and is not shown when the intervals overlap.
    For positive quantities this is :func:`verdict_of_ratio`'s answer; it also takes
    intervals that reach 0 or go negative (a trimmed interval clipped at 0, a log
    regret), where a ratio is undefined.

    Args:
        a: ``(low, high)`` of A.
        b: ``(low, high)`` of B.

    Raises:
        ValueError: when an end is NaN or an interval is reversed.

    Example:
        >>> verdict_of_intervals((3.0, 4.0), (0.0, 2.0))
        'holds'
    """
    for name, (lo, hi) in (("a", a), ("b", b)):
        if lo > hi:
            raise ValueError(f"{name} low <= high must hold, got {name}=({lo}, {hi})")
    return verdict(a[0] - b[1], a[1] - b[0], 0.0)


def verdict_of_tests(p_greater: float, p_less: float, alpha: float = 0.05) -> str:
    """The verdict on "A exceeds B" from two one-sided tests, by the same symmetric rule.

    Where a study compares samples with a test instead of an interval (a Mann-Whitney
    U over seeds), the claim holds when the test for "A > B" rejects at ``alpha``,
    does not hold when the test for "A < B" does, and is not shown otherwise: a
    p-value above ``alpha`` never makes a claim fail.

    Args:
        p_greater: One-sided p-value of "A > B".
        p_less: One-sided p-value of "A < B".
        alpha: The level (0.05).

    Raises:
        ValueError: when a p-value is not in [0, 1] or both reject.

    Example:
        >>> verdict_of_tests(0.30, 0.75)
        'not shown'
    """
    for name, p in (("p_greater", p_greater), ("p_less", p_less), ("alpha", alpha)):
        if not (isinstance(p, (int, float)) and 0.0 <= p <= 1.0):
            raise ValueError(f"0 <= {name} <= 1 must hold, got {name}={p!r}")
    if p_greater < alpha and p_less < alpha:
        raise ValueError(f"both one-sided tests reject at alpha={alpha}: "
                         f"p_greater={p_greater}, p_less={p_less}")
    if p_greater < alpha:
        return HOLDS
    if p_less < alpha:
        return NOT_HOLD
    return NOT_SHOWN
