"""DominancePruner: learning-curve extrapolation, calibration and the dominance probability."""

from __future__ import annotations

import numpy as np
import pytest
from pruner_helpers import bound, curve_of, live, points, record, saturating

from ecopt import pareto
from ecopt.pruners import DominancePruner
from ecopt.pruners._extrapolate import fit_saturating, predict


def _history(n: int = 10, steps: int = 12, noise: float = 0.0) -> list:
    """Finished trials along a trade-off: more accuracy costs more energy per step."""
    out = []
    for i in range(n):
        acc = saturating(0.55 + 0.04 * i, tau=1.0 + 0.3 * i)
        out.append(record(i, curve_of(acc, 10.0 + 8.0 * i, steps, noise, seed=i)))
    return out


@pytest.mark.parametrize("f", [lambda s: 0.9 - 0.8 * (1.0 + s) ** -0.7,
                               lambda s: 0.9 - 0.8 * np.exp(-3.0 * s / 30.0)])
def test_saturating_fit_recovers_the_end_of_a_curve_of_its_families(f):
    s = np.arange(1, 7, dtype=float)
    pred, sd = fit_saturating(s, f(s), 30.0)
    assert pred == pytest.approx(f(30.0), abs=0.01) and sd < 1e-3
    assert predict("linear", s, 5.0 * s, 30.0) == (150.0, 0.0)
    assert predict("last", s, s, 30.0) == (6.0, 0.0)
    assert predict("saturating", s[:3], s[:3], 30.0) is None  # 3 points: no residual left
    assert predict("last", s, np.array([1.0, np.nan]), 30.0) is None


def test_predicts_the_final_point_of_a_curve_like_the_finished_ones():
    p = bound(DominancePruner())
    hist = _history()
    acc = saturating(0.7, tau=2.5)
    d = p.decide(live(50, curve_of(acc, 30.0, 5)), hist)
    obj = d.info["objectives"]
    assert d.info["final_step"] == 12
    assert obj["acc"]["predicted"] == pytest.approx(acc(12), abs=0.03)
    assert obj["energy_j"]["model"] == "linear"
    assert obj["energy_j"]["predicted"] == pytest.approx(30.0 * 12)
    assert obj["acc"]["n_calibration"] == 10 and 0.0 <= d.info["p_dominated"] <= 1.0


def test_dominated_trial_stops_once_sure_and_front_trial_never():
    p = bound(DominancePruner(threshold=0.9))
    hist = _history(noise=0.01)
    bad = curve_of(saturating(0.5, tau=1.5), 70.0, 11, noise=0.01, seed=7)
    probs = [p.decide(live(50, bad[:k]), hist).info.get("p_dominated") for k in range(3, 11)]
    assert max(probs) >= 0.9
    assert any(p.decide(live(50, bad[:k]), hist).prune for k in range(3, 11))
    # Ends on the front: better accuracy than any finished trial at that energy, but it starts
    # slowly (tau = 4): a last-value model would have called it dominated at step 3.
    good = curve_of(saturating(0.95, tau=4.0), 30.0, 11, noise=0.01, seed=8)
    for k in range(1, 11):
        d = p.decide(live(51, good[:k]), hist)
        assert d.prune is False, (k, d.info)


@pytest.mark.parametrize("seed", range(5))
def test_never_stops_trials_that_end_on_the_front_random_studies(seed):
    """Random trade-off curves: every trial that ends on the final front was let run."""
    rng = np.random.default_rng(seed)
    n, steps = 30, 10
    finals = rng.random(n) * 0.4 + 0.5
    energy = 10 + 90 * rng.random(n)
    taus = 0.5 + 3 * rng.random(n)
    curves = [curve_of(saturating(finals[i], taus[i]), energy[i], steps, 0.005, seed=i)
              for i in range(n)]
    ends = np.array([[c[-1].values["acc"], c[-1].values["energy_j"]] for c in curves])
    fronts = pareto.non_dominated(ends, ["max", "min"])
    p = bound(DominancePruner(threshold=0.95))
    hist: list = []
    for i in range(n):
        for k in range(1, steps):
            if p.decide(live(i, curves[i][:k]), hist).prune:
                assert not fronts[i], f"trial {i} on the front stopped at step {k}"
                break
        hist.append(record(i, curves[i]))


def test_energy_objective_filled_from_measured_energy():
    """The trial reports accuracy only; ecopt's joules so far stand in for energy_j."""
    hist = [record(r.number, tuple(type(q)(q.step, {"acc": q.values["acc"]}, q.energy_j,
                                           q.duration_s) for q in r.intermediate),
                   final=r.values) for r in _history()]
    p = bound(DominancePruner())
    acc_only = points([{"acc": saturating(0.5, 1.5)(s)} for s in range(1, 6)],
                      energy_per_step=70.0)
    d = p.decide(live(50, acc_only), hist)
    assert d.info["objectives"]["energy_j"]["predicted"] == pytest.approx(70.0 * 12)
    assert d.prune


def test_warm_up_and_end_of_trial():
    hist = _history()
    p = bound(DominancePruner(n_warmup_steps=4))
    bad = curve_of(saturating(0.3), 90.0, 12)
    assert "n_warmup_steps" in p.decide(live(50, bad[:3]), hist).reason
    assert "final step" in p.decide(live(50, bad), hist).reason
    p = bound(DominancePruner(n_warmup_trials=11))
    assert "calibrate" in p.decide(live(50, bad[:5]), hist).reason
    p = bound(DominancePruner(max_step=20))
    assert p.decide(live(50, bad[:5]), []).reason == "no front yet"
    assert bound(DominancePruner()).decide(live(50, bad[:5]), []).prune is False


def test_decisions_are_reproducible():
    hist = _history(noise=0.01)
    t = live(50, curve_of(saturating(0.62, 2.0), 35.0, 6, 0.01, seed=3))
    a = bound(DominancePruner(seed=1)).decide(t, hist)
    b = bound(DominancePruner(seed=1)).decide(t, hist)
    assert a.info == b.info
