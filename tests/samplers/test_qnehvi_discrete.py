"""qLogNEHVI on fully discrete spaces: every configuration scored, none repeated."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from botorch.acquisition import AcquisitionFunction

import ecopt
from ecopt.samplers import QLogNEHVISampler, _discrete
from ecopt.samplers.random import sobol_points

# Full proposals: these tests watch the acquisition optimiser.
FAST = {"num_restarts": 2, "raw_samples": 64, "mc_samples": 32, "maxiter": 50,
        "proposal_share": None}
OBJS = [ecopt.Objective("f1", "min"), ecopt.Objective("f2", "min")]
# 4 x 3 x 2 = 24 configurations: ordered categorical, stepped int, unordered categorical.
SPACE = ecopt.SearchSpace({"b": ecopt.Categorical([8, 16, 32, 64], ordered=True),
                           "p": ecopt.Int(100, 150, step=25),
                           "opt": ecopt.Categorical(["adam", "sgd"]), "fixed": ecopt.Fixed(1)})


def f(t):
    # One corner (b=8, p=100, adam) is best in f1 by far; noise makes it look uncertain.
    rng = np.random.default_rng(t.number)
    pen = 0.3 if t["opt"] == "sgd" else 0.0
    return {"f1": t["b"] / 64 + (t["p"] - 100) / 500 + pen + rng.normal(0, 0.05),
            "f2": 8 / t["b"] + 0.2 * (150 - t["p"]) / 50 + pen + rng.normal(0, 0.05)}


def key(params):
    return (params["b"], params["p"], params["opt"])


def test_every_configuration_once_before_any_repeat():
    s = ecopt.Study(SPACE, OBJS, sampler=QLogNEHVISampler(n_init=4, seed=3, **FAST),
                    meter="wallclock", seed=3)
    s.optimize(f, n_trials=26, batch_size=3)
    keys = [key(r.params) for r in s.records]
    assert len(set(keys[:24])) == 24, keys  # the initial design and every proposal: new
    by = [r.proposed_by for r in s.records]
    assert by[:4] == ["sobol"] * 4 and set(by[4:]) == {"qlognehvi"}, by
    bo = [r.proposal for r in s.records[4:]]
    assert all(p["optimiser"] == "enumerate" and p["n_configs"] == 24 for p in bo)
    # The round that proposed trials 21-23 saw 3 unseen configurations (one per proposal).
    assert s.records[21].proposal["n_unseen"] == 3 and s.records[21].proposal["n_repeats"] == 0
    # Once every configuration has a trial, repeats are proposed (not an error, not Sobol).
    last = s.records[24].proposal
    assert last["n_unseen"] == 0 and last["n_repeats"] == 2
    assert all(SPACE.validate(r.params) == r.params for r in s.records)


def test_allow_repeats_lets_the_acquisition_repeat():
    # full proposals: the acquisition's own choice of a repeat, model refitted every step
    sampler = QLogNEHVISampler(n_init=4, seed=3, allow_repeats=True, **FAST)
    assert sampler.describe()["allow_repeats"] is True
    s = ecopt.Study(SPACE, OBJS, sampler=sampler, meter="wallclock", seed=3)
    s.optimize(f, n_trials=16)
    keys = [key(r.params) for r in s.records]
    # The noisy best corner is worth repeating here: some configuration runs twice.
    assert len(set(keys)) < len(keys), keys
    for r in s.records[4:]:  # n_unseen still counts the configurations without a trial
        assert r.proposal["n_unseen"] == 24 - len({key(x.params) for x in s.records[:r.number]})


def test_failed_and_running_trials_are_not_proposed_again():
    # Every model-based trial fails: the model never changes, so without the rule the
    # same best configuration would be proposed again and again.
    calls = []

    def fails_after_design(t):
        calls.append(key(t.params))
        if len(calls) > 4:
            raise RuntimeError("worker lost")
        return f(t)

    s = ecopt.Study(SPACE, OBJS, sampler=QLogNEHVISampler(n_init=4, seed=1, **FAST),
                    meter="wallclock", seed=1)
    s.optimize(fails_after_design, n_trials=9, fail_fast=None)
    assert [r.state for r in s.records[4:]] == [ecopt.TrialState.FAILED] * 5
    assert len(set(calls)) == len(calls) == 9, calls
    # Running trials count too: a second ask while the first is out proposes another.
    a, b = s.ask(), s.ask()
    assert key(a.params) != key(b.params) and key(b.params) not in calls
    assert b.proposal["n_unseen"] == 24 - 9 - 1


def test_an_interrupted_configuration_is_proposed_again():
    # A crash leaves no result, so its configuration still counts as untried (as in grid search).
    s = ecopt.Study(SPACE, OBJS, sampler=QLogNEHVISampler(n_init=4, seed=2, **FAST),
                    meter="wallclock", seed=2)
    lost = s.ask()
    s._interrupt_running("test")  # as after a crash
    assert s.records[0].interrupted
    s.optimize(f, n_trials=24)
    done = [key(r.params) for r in s.records if r.state is ecopt.TrialState.COMPLETE]
    assert len(done) == len(set(done)) == 24 and key(lost.params) in done
    assert s.records[-1].proposal["n_unseen"] == 1


def test_initial_design_skips_repeats_on_a_log_int_axis():
    # Seed 8: plain Sobol points 0-5 decode to only 4 distinct configurations here.
    space = ecopt.SearchSpace({"a": ecopt.Int(1, 8, log=True), "c": ecopt.Categorical(["x", "y"])})
    plain = {tuple(space.decode(x).values()) for x in sobol_points(2, 8, 0, 6)}
    assert len(plain) == 4
    s = ecopt.Study(space, OBJS, sampler=QLogNEHVISampler(n_init=6, seed=8, **FAST),
                    meter="wallclock", seed=8)
    s.optimize(lambda t: {"f1": t["a"] / 8 + (t["c"] == "y"), "f2": 1 / t["a"]}, n_trials=8)
    keys = [(r.params["a"], r.params["c"]) for r in s.records]
    assert [r.proposed_by for r in s.records] == ["sobol"] * 6 + ["qlognehvi"] * 2
    assert len(set(keys)) == 8, keys
    assert s.records[-1].proposal["n_configs"] == 16


class _SumAcqf(AcquisitionFunction):
    """Acquisition value = sum of the coordinates; pending points score nothing special."""

    def __init__(self) -> None:
        super().__init__(model=None)  # type: ignore[arg-type]
        self.set_X_pending(None)

    def forward(self, X: torch.Tensor) -> torch.Tensor:
        return X.sum(dim=(-1, -2))


def test_a_batch_larger_than_the_unseen_takes_them_then_repeats_others():
    choices = torch.tensor([[0.0, 0.0], [0.0, 1.0], [1.0, 0.0], [1.0, 1.0]], dtype=torch.double)
    acqf = _SumAcqf()
    base = torch.tensor([[0.5, 0.5]], dtype=torch.double)
    acqf.set_X_pending(base)
    fresh = torch.tensor([False, False, False, True])
    cand, repeats = _discrete.optimize_discrete(acqf, choices, fresh, 3)
    # The one unseen configuration first, then the best of the others: never the unseen
    # one twice in a batch (this stub ignores pending points, so only the rule prevents it).
    assert repeats == 2 and cand[0].tolist() == [1.0, 1.0]
    assert sorted(map(tuple, cand[1:].tolist())) == [(0.0, 1.0), (1.0, 0.0)]
    assert torch.equal(acqf.X_pending, base)
    # Enough unseen: only unseen ones, the best first.
    cand, repeats = _discrete.optimize_discrete(_SumAcqf(), choices,
                                                torch.tensor([True, True, True, False]), 2)
    assert repeats == 0 and cand[0].tolist() in ([0.0, 1.0], [1.0, 0.0])
    assert [1.0, 1.0] not in cand.tolist()


def test_model_fallback_points_skip_repeats_too(monkeypatch):
    sampler = QLogNEHVISampler(n_init=2, seed=0, **FAST)

    def boom(*a, **k):
        raise RuntimeError("cholesky failed")

    monkeypatch.setattr(sampler, "_propose_bo", boom)
    s = ecopt.Study(SPACE, OBJS, sampler=sampler, meter="wallclock", seed=0)
    with pytest.warns(ecopt.samplers.FallbackWarning):
        s.optimize(f, n_trials=24)
    assert "model fallback" in s.records[-1].proposal["why"]
    assert len({key(r.params) for r in s.records}) == 24


def test_large_discrete_spaces_use_the_local_search():
    space = ecopt.SearchSpace({"a": ecopt.Int(0, 200), "b": ecopt.Int(0, 200)})  # 40,401
    s = ecopt.Study(space, OBJS, sampler=QLogNEHVISampler(n_init=4, **FAST), meter="wallclock")
    s.optimize(lambda t: {"f1": t["a"] / 200, "f2": 1 - t["a"] / 200 + t["b"] / 200},
               n_trials=5)
    assert s.records[-1].proposal["optimiser"] == "mixed"


def test_unseen_sobol_skips_seen_configurations_deterministically():
    seen = {_discrete.config_key(SPACE.encode(SPACE.decode(x)))
            for x in sobol_points(SPACE.dim, 0, 0, 3)}
    pts = _discrete.unseen_sobol(SPACE, 0, 0, 5, seen, 24)
    keys = [_discrete.config_key(SPACE.encode(SPACE.decode(x))) for _, x in pts]
    assert len(pts) == 5 and len(set(keys)) == 5 and not set(keys) & seen
    assert [i for i, _ in pts] == sorted(i for i, _ in pts) and pts[0][0] >= 3
    assert [i for i, _ in pts] == [i for i, _ in _discrete.unseen_sobol(SPACE, 0, 0, 5, seen, 24)]
    # Every configuration seen: the points still come (repeats), as many as asked.
    every = {_discrete.config_key(SPACE.encode(SPACE.decode(x)))
             for x in sobol_points(SPACE.dim, 0, 0, 512)}
    assert len(every) == 24 and len(_discrete.unseen_sobol(SPACE, 0, 0, 2, every, 24)) == 2


def test_enumerate_grid_shape_and_limit():
    g = _discrete.enumerate_grid([[0.0, 1.0], [0.1, 0.2, 0.3]])
    assert g.shape == (6, 2) and g[0].tolist() == [0.0, 0.1] and g[-1].tolist() == [1.0, 0.3]
    with pytest.raises(ValueError, match="at most 2048 configurations"):
        _discrete.enumerate_grid([list(range(200)), list(range(101))])
