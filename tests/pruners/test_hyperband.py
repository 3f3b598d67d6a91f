"""HyperbandPruner: rungs, brackets and Pareto ranking at a rung."""

from __future__ import annotations

import collections

import numpy as np
import pytest
from pruner_helpers import bound, live, points, record

from ecopt.pruners import HyperbandPruner
from ecopt.pruners.hyperband import rank_order


def _rung_history(values: list[tuple[float, float]], steps: int = 9) -> list:
    """Finished trials whose value at every step is ``values[i]`` (acc max, energy_j min)."""
    return [record(i, points([{"acc": a, "energy_j": e}] * steps)) for i, (a, e) in
            enumerate(values)]


def test_rungs_and_brackets_follow_hyperband():
    p = HyperbandPruner(min_resource=1, reduction_factor=3)
    assert p.n_brackets(27) == 4 and p.n_brackets(26) == 3 and p.n_brackets(1) == 1
    assert p.rungs(0, 27) == [1, 3, 9] and p.rungs(1, 27) == [3, 9] and p.rungs(3, 27) == []
    assert HyperbandPruner(brackets=1).n_brackets(27) == 1
    # Allotment ceil(B * eta**s' / (s' + 1)): 4 brackets -> 27, 12, 6, 4 of 49.
    counts = collections.Counter(p.bracket_of(n, 4) for n in range(4900))
    share = np.array([counts[s] for s in range(4)]) / 4900
    assert share == pytest.approx(np.array([27, 12, 6, 4]) / 49, abs=0.03)
    assert [p.bracket_of(7, 4)] * 3 == [p.bracket_of(7, 4) for _ in range(3)]


def test_rank_order_is_fronts_then_hypervolume_contribution():
    Z = np.array([[1.0, 1.0],    # front, small corner contribution
                  [3.0, 0.0],    # front, extreme
                  [0.0, 3.0],    # front, extreme
                  [0.5, 0.5],    # third front (under row 0)
                  [2.0, 2.0]])   # front, dominates the middle
    order, ranks, contrib = rank_order(Z)
    assert ranks.tolist() == [1, 0, 0, 2, 0]
    assert set(order[:3].tolist()) == {1, 2, 4} and order[-1] == 3
    assert contrib[4] > 0 and contrib[1] > 0


def _decide(p, hist, values, steps):
    return p.decide(live(100, points([values] * steps)), hist)


def test_cut_keeps_the_top_third_at_a_rung():
    # 8 finished trials on a line of trade-offs: one front of 8; the trial makes 9.
    front = [(0.1 * i, 10.0 * i) for i in range(1, 9)]
    p = bound(HyperbandPruner(min_resource=1, reduction_factor=3, brackets=1))
    hist = _rung_history(front)
    # Dominated by every finished trial: last of 9, pruned at the first rung.
    d = _decide(p, hist, {"acc": 0.05, "energy_j": 95.0}, 1)
    assert d.prune and d.info["rung"] == 1 and d.info["n_competitors"] == 9
    assert d.info["promoted"] == 3 and d.info["front_rank"] > 0
    # Dominates all of them: first, goes on.
    d = _decide(p, hist, {"acc": 0.95, "energy_j": 1.0}, 1)
    assert not d.prune and d.info["position"] == 0
    # On the front but in its crowded middle: pruned by hypervolume contribution.
    d = _decide(p, hist, {"acc": 0.45, "energy_j": 44.9}, 1)
    assert d.info["front_rank"] == 0 and d.prune


def test_decisions_only_when_a_rung_is_crossed():
    p = bound(HyperbandPruner(min_resource=1, reduction_factor=3, brackets=1))
    hist = _rung_history([(0.1 * i, 10.0 * i) for i in range(1, 9)])
    bad = {"acc": 0.05, "energy_j": 95.0}
    # Steps 1 and 3 are rungs; step 2 is between rungs: no judgement there.
    assert p.decide(live(100, points([bad] * 2)), hist).prune is False
    # Sparse reports: step 0 then step 5 crosses rungs 1 and 3 at once.
    t = live(100, points([bad], start=0) + points([bad], start=5))
    d = p.decide(t, hist)
    assert d.prune and d.info["rung"] == 1


def test_too_few_competitors_or_trials_never_prune():
    bad = {"acc": 0.05, "energy_j": 95.0}
    hist = _rung_history([(0.5, 10.0)])
    p = bound(HyperbandPruner(brackets=1, n_warmup_trials=0))
    assert _decide(p, hist, bad, 1).prune is False  # 2 at the rung, eta = 3
    p = bound(HyperbandPruner(brackets=1, min_trials_at_rung=2, n_warmup_trials=0))
    assert _decide(p, hist, bad, 1).prune is True
    p = bound(HyperbandPruner(brackets=1, n_warmup_trials=20))
    d = _decide(p, _rung_history([(0.5, 10.0)] * 10), bad, 1)
    assert d.prune is False and "warm-up" in d.reason


def test_max_resource_auto_waits_for_a_complete_trial():
    p = bound(HyperbandPruner(brackets=1))
    d = _decide(p, [], {"acc": 0.05, "energy_j": 95.0}, 1)
    assert d.prune is False and "full length" in d.reason
    p = bound(HyperbandPruner(brackets=1, max_resource=9, n_warmup_trials=0))
    assert p.decide(live(100, points([{"acc": 0.1, "energy_j": 1.0}])), []).info["max_resource"] == 9


def test_energy_objective_is_filled_from_measured_energy():
    """A trial that reports only accuracy is ranked with the joules ecopt measured."""
    hist = [record(i, points([{"acc": 0.1 * i}] * 9, energy_per_step=10.0 * i),
                   final={"acc": 0.1 * i, "energy_j": 90.0 * i}) for i in range(1, 9)]
    p = bound(HyperbandPruner(brackets=1))
    cheap_good = live(100, points([{"acc": 0.9}], energy_per_step=1.0))
    costly_bad = live(101, points([{"acc": 0.05}], energy_per_step=200.0))
    assert p.decide(cheap_good, hist).prune is False
    assert p.decide(costly_bad, hist).prune is True
    # Without an energy objective, energy is not compared: only accuracy counts.
    p = bound(HyperbandPruner(brackets=1, energy_objective=None),
              [p.objectives[0]])
    assert p.decide(costly_bad, hist).prune is True
