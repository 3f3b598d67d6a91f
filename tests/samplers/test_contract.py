"""What every registered sampler promises (docs/architecture.md, "A sampler").

The suite runs over every name :mod:`ecopt.registry` knows: the built-in samplers, one
registered at run time and one an installed package declares by entry point, so a new
sampler gets these tests by being registered. Model-based samplers fit a model once their
initial design is done; their cases that fit one are marked slow.
"""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

import ecopt
from ecopt import registry
from ecopt.record import TrialRecord, TrialState, make_record
from ecopt.samplers import Proposal, Sampler, get_sampler

#: Every sampler name known here (built in, registered, installed by entry point).
SAMPLERS = registry.names("samplers")
#: Samplers that fit a model on the history: their cases with a history are slow.
MODEL_BASED = {"qlognehvi", "qnehvi"}

SPACE = ecopt.SearchSpace({"x": ecopt.Float(0, 1), "y": ecopt.Float(0, 1)})
MIXED = ecopt.SearchSpace({"x": ecopt.Float(0, 1), "k": ecopt.Int(1, 3),
                           "c": ecopt.Categorical(["a", "b"])})
OBJS = [ecopt.Objective("f1", "min"), ecopt.Objective("f2", "min")]


def _names(slow_if_model_based: bool) -> list:
    return [pytest.param(n, marks=pytest.mark.slow)
            if slow_if_model_based and n in MODEL_BASED else n for n in SAMPLERS]


def _fresh(name: str, seed: int = 7) -> Sampler:
    s = get_sampler(name)
    s.bind(OBJS, [], seed)
    return s


def _history(space: ecopt.SearchSpace, n: int) -> list[TrialRecord]:
    """``n`` complete trials on a ZDT1-like front, then a failed, an infeasible and a pruned one."""
    rng = np.random.default_rng(0)
    out = []
    for i in range(n + 3):
        params = space.decode(rng.random(space.dim))
        u = space.encode(params)
        values = {"f1": float(u[0]), "f2": float(1 + u[1:].sum() - np.sqrt(u[0]))}
        state = [TrialState.COMPLETE, TrialState.FAILED, TrialState.INFEASIBLE,
                 TrialState.PRUNED][max(0, i - n + 1)]
        out.append(make_record(number=i, state=state, params=params,
                               values=values if state in (TrialState.COMPLETE,
                                                          TrialState.PRUNED) else {},
                               proposed_by="random"))
    return out


def _propose(s: Sampler, space, records, pending, n) -> list[Proposal]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # BoTorch's numerical notes on a tiny history
        return s.propose(space, records, pending, n)


def _check(space: ecopt.SearchSpace, proposals: list[Proposal]) -> None:
    for p in proposals:
        assert isinstance(p, Proposal) and isinstance(p.proposed_by, str) and p.proposed_by
        assert space.validate(p.params) == p.params, p.params
        json.dumps(p.info)  # kept in the trial's record


def _key(params) -> tuple:
    return tuple(sorted(params.items()))


def test_the_suite_covers_every_registered_sampler():
    assert set(registry.BUILTIN["samplers"]) <= set(SAMPLERS)


@pytest.mark.parametrize("name", SAMPLERS)
def test_made_by_name_with_its_defaults(name):
    s = get_sampler(name)
    assert isinstance(s, Sampler) and s.name
    desc = s.describe()
    assert json.loads(json.dumps(desc)) == desc and desc["name"] == s.name


@pytest.mark.parametrize("name", SAMPLERS)
def test_first_proposals_lie_in_the_space_and_apart(name):
    props = _propose(_fresh(name), MIXED, [], [], 3)
    assert len(props) == 3
    _check(MIXED, props)
    assert len({_key(p.params) for p in props}) == 3


@pytest.mark.parametrize("name", _names(slow_if_model_based=True))
def test_same_seed_and_history_same_proposals_apart_from_pending_and_failed(name):
    """Failed, infeasible and pruned trials in the history do not break it; a trial in
    flight is not proposed again; two samplers of one seed propose the same."""
    history = _history(SPACE, 8)
    pending = [_propose(_fresh(name), SPACE, history, [], 1)[0].params]
    first = _propose(_fresh(name), SPACE, history, pending, 2)
    again = _propose(_fresh(name), SPACE, history, pending, 2)
    assert [p.params for p in first] == [p.params for p in again]
    _check(SPACE, first)
    keys = [_key(p.params) for p in first]
    assert len(set(keys)) == len(keys) and _key(pending[0]) not in keys


@pytest.mark.parametrize("name", _names(slow_if_model_based=True))
def test_a_study_runs_with_it_and_records_who_proposed(name, tmp_path):
    st = ecopt.Study(SPACE, OBJS, storage=tmp_path / "s", sampler=name, meter="wallclock",
                     seed=3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        done = st.optimize(lambda t: {"f1": t["x"], "f2": 1 - t["x"] ** 0.5 + t["y"]},
                           n_trials=4, show_progress=False)
    assert [r.state for r in done] == [TrialState.COMPLETE] * 4
    assert all(r.proposed_by for r in done) and len({_key(r.params) for r in done}) == 4
    st.close()
    again = ecopt.load_study(tmp_path / "s")
    assert [r.params for r in again.records] == [r.params for r in done]


def test_a_sampler_registered_at_run_time_takes_the_suite(monkeypatch):
    """What the suite would do for a third-party sampler: found by name, in the list."""

    class Centre(Sampler):
        name = "centre"

        def propose(self, space, records, pending, n):
            start = len(records) + len(pending)
            return [Proposal(space.decode(np.full(space.dim, (start + i + 1) / (start + n + 2))),
                             self.name) for i in range(n)]

    monkeypatch.setitem(registry._ADDED["samplers"], "centre", Centre)
    assert "centre" in registry.names("samplers")
    props = _propose(_fresh("centre"), MIXED, [], [], 3)
    _check(MIXED, props)
