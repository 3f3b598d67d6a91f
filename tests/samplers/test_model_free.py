"""Random, Sobol and grid samplers: reproducible, pending-aware, exhaustible."""

from __future__ import annotations

import pytest

import ecopt
from ecopt.samplers import GridSampler, RandomSampler, SobolSampler, get_sampler

SPACE = ecopt.SearchSpace({"x": ecopt.Float(0, 1), "bs": ecopt.Int(1, 64, log=True),
                           "c": ecopt.Categorical(["a", "b", "c"])})
OBJS = [ecopt.Objective("a"), ecopt.Objective("b", "min")]


def _f(t):
    return {"a": t["x"], "b": t["bs"] / 64}


@pytest.mark.parametrize("name", ["random", "sobol"])
def test_same_seed_same_history_same_proposals(name):
    runs = []
    for _ in range(2):
        s = ecopt.Study(SPACE, OBJS, sampler=name, meter="wallclock", seed=11)
        s.optimize(_f, n_trials=6, batch_size=2)
        runs.append([r.params for r in s.records])
    assert runs[0] == runs[1]
    s = ecopt.Study(SPACE, OBJS, sampler=name, meter="wallclock", seed=12)
    s.optimize(_f, n_trials=6, batch_size=2)
    assert [r.params for r in s.records] != runs[0]


def test_pending_trials_are_not_proposed_again():
    s = ecopt.Study(SPACE, OBJS, sampler="sobol", meter="wallclock", seed=0)
    ts = s.ask(4)
    assert len({repr(sorted(t.params.items())) for t in ts}) == 4
    more = s.ask(2)
    assert {t.number for t in more} == {4, 5}
    assert all(t.params not in [u.params for u in ts] for t in more)


def test_random_sampler_uses_sobol_first():
    sampler = RandomSampler(seed=0, n_sobol=3)
    s = ecopt.Study(SPACE, OBJS, sampler=sampler, meter="wallclock")
    s.optimize(_f, n_trials=5)
    assert [r.proposed_by for r in s.records] == ["sobol"] * 3 + ["random"] * 2
    with pytest.raises(ValueError, match="n_sobol >= 0"):
        RandomSampler(n_sobol=-1)


def test_grid_proposes_each_point_once_then_stops_and_reproposes_interrupted():
    space = ecopt.SearchSpace({"bs": ecopt.Int(1, 1024, log=True), "e": ecopt.Fixed(1)})
    grid = GridSampler({"bs": [1, 8, 64, 512]})
    s = ecopt.Study(space, OBJS, sampler=grid, meter="wallclock")
    t = s.ask()
    s._interrupt_running("test")  # as after a crash
    s.optimize(lambda t: {"a": t["bs"], "b": 1.0 / t["bs"]}, n_trials=10)
    done = [r.params["bs"] for r in s.records if r.state.value == "complete"]
    assert done == [1, 8, 64, 512]
    assert s.records[0].number == t.number and s.records[0].interrupted
    with pytest.raises(ecopt.EcoptError, match="nothing left to propose"):
        s.ask()
    with pytest.raises(ValueError, match="n_points >= 1"):
        GridSampler(n_points=0)


def test_get_sampler_names():
    assert isinstance(get_sampler("sobol"), SobolSampler)
    assert get_sampler("qnehvi").name == "qnehvi"
    inst = GridSampler()
    assert get_sampler(inst) is inst
    with pytest.raises(ValueError, match="unknown sampler 'tpe'"):
        get_sampler("tpe")
