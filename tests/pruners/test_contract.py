"""What every registered pruner promises: names, defaults, pickling, odd input never raises,
a dominated trial is stopped and one that ends on the front never is, and in a study each
stop is recorded ``pruned`` with its curve and the numbers behind it.

The suite runs over every name :mod:`ecopt.registry` knows (built in, registered, installed
by entry point), so a new pruner gets these tests by being registered.
"""

from __future__ import annotations

import json
import pickle

import pytest
from pruner_helpers import OBJS, bound, curve_of, live, points, record, saturating

import ecopt
import executor_objectives as T
from ecopt import registry
from ecopt.pruners import PRUNERS, DominancePruner, HyperbandPruner, NopPruner, get_pruner
from ecopt.trial import Intermediate, TrialState

#: Every pruner name known here.
ALL = registry.names("pruners")
#: Those that stop trials (``none`` never does).
BUILT_IN = [n for n in ALL if n != "none"]


def test_the_suite_covers_every_registered_pruner():
    assert set(registry.BUILTIN["pruners"]) <= set(ALL)


@pytest.mark.parametrize("name", ALL)
def test_usable_by_name_with_defaults(name):
    p = get_pruner(name)
    assert p.name == name
    if name in PRUNERS:
        assert type(p).__name__ == PRUNERS[name][1]
    desc = p.describe()
    assert desc["name"] == name and json.loads(json.dumps(desc)) == desc
    st = ecopt.Study({"x": ecopt.Float(0, 1)}, OBJS, sampler="random", meter="wallclock",
                     pruner=name)
    assert st.pruner.name == name and st.pruner.objectives == OBJS


def test_classes_are_exported():
    assert ecopt.pruners.NopPruner is NopPruner
    assert ecopt.pruners.HyperbandPruner is HyperbandPruner
    assert ecopt.pruners.DominancePruner is DominancePruner
    assert {"HyperbandPruner", "DominancePruner"} <= set(ecopt.pruners.__all__)


def _history(n: int = 12, steps: int = 9) -> list:
    out = []
    for i in range(n):
        acc = saturating(0.5 + 0.04 * i)
        out.append(record(i, curve_of(acc, 10.0 + 5 * (i % 4), steps, seed=i)))
    return out


@pytest.mark.parametrize("name", ALL)
def test_pickles_and_decides_the_same_after(name):
    p = bound(get_pruner(name))
    hist = _history()
    t = live(50, curve_of(saturating(0.3), 40.0, 3))
    before = p.decide(t, hist)
    q = pickle.loads(pickle.dumps(p))
    after = q.decide(t, hist)
    assert (before.prune, before.info) == (after.prune, after.info)
    json.dumps(after.info)  # the numbers behind a decision are JSON-able


@pytest.mark.parametrize("name", ALL)
@pytest.mark.parametrize("case", ["no-history", "missing-objective", "nan-history", "one-report",
                                  "failed-history", "only-other-metrics"])
def test_odd_input_never_raises_and_never_prunes(name, case):
    p = bound(get_pruner(name))
    hist = _history()
    t = live(50, curve_of(saturating(0.2), 90.0, 3))  # clearly dominated, on its own
    if case == "no-history":
        hist = []
    elif case == "missing-objective":
        t = live(50, points([{"energy_j": 90.0 * s} for s in (1, 2, 3)]))
    elif case == "nan-history":
        bad = [Intermediate(s, {"acc": float("nan"), "energy_j": float("nan")}, 1.0, 0.0)
               for s in range(1, 10)]
        hist = [record(i, bad, {"acc": float("nan"), "energy_j": float("nan")})
                for i in range(12)]
    elif case == "one-report":
        t = live(50, curve_of(saturating(0.2), 90.0, 1))
    elif case == "failed-history":
        hist = [record(r.number, r.intermediate, state=TrialState.FAILED) for r in hist]
    elif case == "only-other-metrics":
        t = live(50, points([{"loss": 1.0 / s} for s in (1, 2, 3)]))
    d = p.decide(t, hist)
    if not (case == "one-report" and name == "hyperband"):  # its first rung is step 1
        assert d.prune is False, d
    json.dumps(d.info)


@pytest.mark.parametrize("name", BUILT_IN)
def test_a_clearly_dominated_trial_is_stopped(name):
    p = bound(get_pruner(name))
    hist = _history()
    t = live(50, curve_of(saturating(0.2), 90.0, 3))
    decisions = [p.decide(live(50, t.intermediate[:k]), hist) for k in range(1, 4)]
    assert any(d.prune for d in decisions), decisions
    d = next(d for d in decisions if d.prune)
    assert d.reason and d.info["step"] >= 1


@pytest.mark.parametrize("name", ALL)
def test_a_trial_that_ends_on_the_front_is_never_stopped(name):
    """Curves of one family: the trial beats every finished trial at every step."""
    p = bound(get_pruner(name))
    hist = _history()
    best = curve_of(saturating(0.98), 10.0, 9, seed=99)
    for k in range(1, 9):
        d = p.decide(live(50, best[:k]), hist)
        assert d.prune is False, (k, d)


@pytest.mark.parametrize("bad", [
    dict(min_resource=0), dict(reduction_factor=1), dict(brackets=0),
    dict(max_resource=1, min_resource=1), dict(n_warmup_trials=-1), dict(min_resource=1.5)])
def test_hyperband_settings_are_checked(bad):
    with pytest.raises(ValueError, match=next(iter(bad))):
        HyperbandPruner(**bad)


@pytest.mark.parametrize("bad", [
    dict(threshold=0.0), dict(threshold=1.5), dict(max_step=0), dict(n_warmup_trials=1),
    dict(n_samples=2), dict(seed=-1)])
def test_dominance_settings_are_checked(bad):
    with pytest.raises(ValueError, match=next(iter(bad))):
        DominancePruner(**bad)


@pytest.mark.parametrize("cls", [HyperbandPruner, DominancePruner])
def test_energy_objective_must_name_an_objective(cls):
    with pytest.raises(ValueError, match="energy_objective.*'joules'"):
        ecopt.Study({"x": ecopt.Float(0, 1)}, OBJS, sampler="random", meter="wallclock",
                    pruner=cls(energy_objective="joules"))


@pytest.mark.parametrize("name", ALL)
def test_in_a_study_each_stop_is_a_pruned_record_with_its_curve(name, tmp_path):
    objs = [ecopt.Objective("f1", "min"), ecopt.Objective("f2", "min")]
    space = ecopt.SearchSpace({"x": ecopt.Float(0, 1), "y": ecopt.Float(0, 1)})
    st = ecopt.Study(space, objs, storage=tmp_path / "s", sampler="random", meter="wallclock",
                     seed=1, pruner=name)
    done = st.optimize(T.Curve(steps=4, epoch_s=0.0), n_trials=10, show_progress=False)
    assert {r.state for r in done} <= {TrialState.COMPLETE, TrialState.PRUNED}
    pruned = [r for r in done if r.state is TrialState.PRUNED]
    if name == "none":
        assert pruned == []
    elif name in PRUNERS:  # a built-in pruner stops some of 10 trials converging this slowly
        assert pruned, [r.state.value for r in done]
    for r in pruned:
        assert r.error.type == "TrialPruned" and 1 <= len(r.intermediate) < 4
        assert r.values == {k: v for k, v in r.intermediate[-1].values.items()}
        json.dumps(r.user_attrs["pruning"])  # the numbers behind the decision, kept
    for r in done:
        if r.state is TrialState.COMPLETE:
            assert [p.step for p in r.intermediate] == [1, 2, 3, 4]
    st.close()
    assert ecopt.load_study(tmp_path / "s").records == done
