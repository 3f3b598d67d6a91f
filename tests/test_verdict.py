"""The one verdict rule (ecopt._verdict): symmetric, from the interval of the ratio."""

from __future__ import annotations

import math

import pytest

from ecopt._verdict import HOLDS, NOT_HOLD, NOT_SHOWN, verdict, verdict_of_ratio


@pytest.mark.parametrize("low, high, expected", [
    (1.2, 1.8, HOLDS), (0.5, 0.9, NOT_HOLD), (0.9, 1.1, NOT_SHOWN),
    (0.2, 1.05, NOT_SHOWN),  # point below 1, interval reaches it: the run could not tell
    (0.95, 3.0, NOT_SHOWN), (1.0, 1.0, NOT_SHOWN), (math.inf, math.inf, HOLDS),
])
def test_verdict_from_the_interval(low, high, expected):
    assert verdict(low, high) == expected


def test_the_rule_is_symmetric():
    """Swapping numerator and denominator swaps holds and does not hold, keeps not shown."""
    flip = {HOLDS: NOT_HOLD, NOT_HOLD: HOLDS, NOT_SHOWN: NOT_SHOWN}
    for lo, hi in [(1.2, 1.8), (0.5, 0.9), (0.9, 1.1), (0.3, 0.99), (1.01, 7.0)]:
        assert verdict(1 / hi, 1 / lo) == flip[verdict(lo, hi)]


def test_threshold_other_than_one():
    assert verdict(2.1, 3.0, threshold=2.0) == HOLDS
    assert verdict(1.5, 2.5, threshold=2.0) == NOT_SHOWN
    assert verdict(1.1, 1.9, threshold=2.0) == NOT_HOLD


def test_ratio_of_two_intervals_is_conservative():
    assert verdict_of_ratio((3.0, 4.0), (1.0, 2.0)) == HOLDS
    assert verdict_of_ratio((1.77, 3.03), (3.49, 11.41)) == NOT_HOLD
    assert verdict_of_ratio((2.0, 3.0), (1.5, 2.5)) == NOT_SHOWN


@pytest.mark.parametrize("args", [(2.0, 1.0), (math.nan, 1.0), (0.5, True)])
def test_bad_input_names_the_rule(args):
    with pytest.raises(ValueError, match="must"):
        verdict(*args)
    with pytest.raises(ValueError, match="> 0"):
        verdict_of_ratio((0.0, 1.0), (1.0, 2.0))


def test_intervals_agree_with_the_ratio_rule_and_take_zero():
    from ecopt._verdict import verdict_of_intervals

    for a, b in [((3.0, 4.0), (1.0, 2.0)), ((1.77, 3.03), (3.49, 11.41)),
                 ((2.0, 3.0), (1.5, 2.5))]:
        assert verdict_of_intervals(a, b) == verdict_of_ratio(a, b)
    # An interval clipped at 0 (a trimmed interval of a small energy) is still judged.
    assert verdict_of_intervals((5.188 - 5, 11.33), (1.929, 2.115)) == NOT_SHOWN
    assert verdict_of_intervals((0.0, 0.26), (1.9, 2.1)) == NOT_HOLD
    assert verdict_of_intervals((-0.5, -0.1), (-1.0, -0.6)) == HOLDS
    with pytest.raises(ValueError, match="low <= high"):
        verdict_of_intervals((2.0, 1.0), (0.0, 1.0))


def test_tests_rule_is_symmetric_and_never_fails_on_a_large_p():
    from ecopt._verdict import verdict_of_tests

    assert verdict_of_tests(0.01, 0.99) == HOLDS
    assert verdict_of_tests(0.99, 0.01) == NOT_HOLD
    assert verdict_of_tests(0.345, 0.726) == NOT_SHOWN
    assert verdict_of_tests(0.6, 0.43) == NOT_SHOWN
    with pytest.raises(ValueError, match="0 <= p_less <= 1"):
        verdict_of_tests(0.5, 1.5)
