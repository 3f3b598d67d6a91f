"""Failed configurations are never proposed again; failing regions are learned (issue 36)."""

from __future__ import annotations

import math

import numpy as np
import pytest

import ecopt
from ecopt._failures import distance
from ecopt.samplers import QLogNEHVISampler, RandomSampler, SobolSampler
from ecopt.trial import ErrorInfo, TrialRecord, TrialState

OBJS = [ecopt.Objective("f1", "min"), ecopt.Objective("f2", "min")]
TB = ('Traceback (most recent call last):\n  File "/u/nb.py", line 7, in objective\n'
      '    raise RuntimeError("NaN loss")\nRuntimeError: NaN loss\n')


def failed(n: int, params: dict) -> TrialRecord:
    return TrialRecord(number=n, state=TrialState.FAILED, params=params,
                       error=ErrorInfo("RuntimeError", "NaN loss", TB))


def complete(n: int, params: dict, f) -> TrialRecord:
    return TrialRecord(number=n, state=TrialState.COMPLETE, params=params, values=f(params))


@pytest.mark.parametrize("cls", [SobolSampler, RandomSampler])
def test_model_free_samplers_skip_failed_configurations(cls):
    space = ecopt.SearchSpace({"n": ecopt.Int(1, 3), "kind": ecopt.Categorical(["a", "b"])})
    sampler = cls(seed=0)
    sampler.bind(OBJS, [], 0)
    records: list[TrialRecord] = []
    bad = {"n": 2, "kind": "b"}
    for i in range(12):
        p = sampler.propose(space, records, [], 1)[0].params
        if i and p == bad:
            assert not any(r.params == bad and r.state is TrialState.FAILED for r in records)
        records.append(failed(i, p) if p == bad else
                       complete(i, p, lambda q: {"f1": q["n"], "f2": -q["n"]}))
    assert sum(r.params == bad for r in records) <= 1
    if cls is SobolSampler:  # and Sobol tries every configuration before repeating one
        assert len({(r.params["n"], r.params["kind"]) for r in records[:6]}) == 6


def branin_currin(p: dict) -> dict[str, float]:
    x1, x2 = 15 * p["x"] - 5, 15 * p["y"]
    b = (x2 - 5.1 / (4 * math.pi ** 2) * x1 ** 2 + 5 / math.pi * x1 - 6) ** 2 \
        + 10 * (1 - 1 / (8 * math.pi)) * math.cos(x1) + 10
    x, y = p["x"], max(p["y"], 1e-9)
    c = (1 - math.exp(-1 / (2 * y))) * (2300 * x ** 3 + 1900 * x ** 2 + 2092 * x + 60) / \
        (100 * x ** 3 + 500 * x ** 2 + 4 * x + 20)
    return {"f1": b, "f2": c}


SPACE2 = ecopt.SearchSpace({"x": ecopt.Float(0, 1), "y": ecopt.Float(0, 1)})


def _history(n: int = 10) -> list[TrialRecord]:
    rng = np.random.default_rng(3)
    return [complete(i, SPACE2.decode(rng.random(2)), branin_currin) for i in range(n)]


def _propose(failures: str, records: list[TrialRecord]) -> dict:
    s = QLogNEHVISampler(num_restarts=2, raw_samples=64, failures=failures)
    s.bind(OBJS, [], 0)
    return s.propose(SPACE2, records, [], 1)[0]


def test_without_learning_the_sampler_walks_back_into_a_failure_with_learning_it_does_not():
    """The issue's bug: a failed trial changes nothing in the model, so a deterministic
    proposal lands on the same maximiser again. As a pending point it cannot."""
    hist = _history()
    # Where the sampler goes when a failed trial teaches it nothing...
    p = _propose("ignore", hist + [failed(len(hist), {"x": 0.5, "y": 0.5})]).params
    # ... is where it goes again after a trial failed exactly there (the bug).
    hist.append(failed(len(hist), p))
    u0 = np.array(SPACE2.encode(p))
    assert _propose("ignore", hist).params == p
    learnt = np.array(SPACE2.encode(_propose("learn", hist).params))
    assert distance(learnt, u0, {}) > 0.05
    assert _propose("pending", hist).params != p


def test_a_failing_region_is_modelled_and_recorded_on_the_proposal():
    hist = _history(12)
    corner = [{"x": 0.93, "y": 0.9}, {"x": 0.98, "y": 0.97}]
    hist += [failed(12 + i, p) for i, p in enumerate(corner)]
    prop = _propose("learn", hist)
    note = prop.info["failures"]
    assert note["failed"] == note["pending"] == note["regional"] == 2 and note["modelled"]
    assert 0.0 <= note["p_failure"] < 0.5 and note["nearest_failure"] > 0
    # The failure model itself puts the corner's probability of failing high.
    pend = _propose("pending", hist).info["failures"]
    assert pend["modelled"] is False and pend["p_failure"] is None and pend["regional"] == 0


def test_an_isolated_failure_is_pending_only():
    hist = _history(12)
    # Same error at two far points with a complete trial in their box: not one region.
    inside = next(r for r in hist if 0.2 < r.params["x"] < 0.8 and 0.2 < r.params["y"] < 0.8)
    assert inside
    hist += [failed(12, {"x": 0.1, "y": 0.1}), failed(13, {"x": 0.9, "y": 0.9})]
    note = _propose("learn", hist).info["failures"]
    assert note["isolated"] == 2 and note["regional"] == 0 and not note["modelled"]


def test_bad_failures_setting_is_refused():
    with pytest.raises(ValueError, match="failures must be one of"):
        QLogNEHVISampler(failures="skip")


@pytest.mark.slow
@pytest.mark.timeout(1500)  # 30 mixed-space proposals: over 600 s at load 20
def test_a_failing_region_is_tried_at_most_twice_in_30_trials():
    """The issue's notebook: a mixed space whose best corner raises; 30 trials run to the
    end (fail_fast at its default) and at most two of them land in the corner."""
    from executor_objectives import corner_study, failing_corner, in_failing_corner

    st = corner_study()
    recs = st.optimize(failing_corner, n_trials=30)
    assert len(recs) == 30 and st.stop_reason == "n_trials"
    assert sum(in_failing_corner(r.params) for r in recs) <= 2
    assert all(r.state is TrialState.COMPLETE for r in recs if not in_failing_corner(r.params))
    noted = [r.proposal["failures"] for r in recs if "failures" in r.proposal]
    assert noted and noted[-1]["failed"] >= 1


def _acqf(space: ecopt.SearchSpace, records: list[TrialRecord]):
    """A real qLogNEHVI on a GP fitted to the complete records (maximisation form)."""
    import torch
    from botorch.acquisition.multi_objective.logei import (
        qLogNoisyExpectedHypervolumeImprovement,
    )
    from botorch.fit import fit_gpytorch_mll
    from botorch.models import SingleTaskGP
    from gpytorch.mlls import ExactMarginalLogLikelihood

    done = [r for r in records if r.state is TrialState.COMPLETE]
    X = torch.tensor(np.array([space.encode(r.params) for r in done]), dtype=torch.double)
    Y = -torch.tensor([[r.values["f1"], r.values["f2"]] for r in done], dtype=torch.double)
    Y = (Y - Y.mean(0)) / Y.std(0)
    gp = SingleTaskGP(X, Y)
    fit_gpytorch_mll(ExactMarginalLogLikelihood(gp.likelihood, gp))
    return qLogNoisyExpectedHypervolumeImprovement(gp, ref_point=Y.min(0).values - 0.1,
                                                   X_baseline=X)


@pytest.mark.parametrize("allow_repeats", [False, True])
def test_repeated_picks_of_the_gradient_path_are_replaced(allow_repeats):
    """A batch whose picks repeat each other, a failed or a running configuration gets
    those picks replaced by new configurations (a complete one may stay with
    allow_repeats), and only those."""
    from ecopt.samplers._encoding import encoding
    from ecopt.samplers._optimize import Settings, _replace_repeats, avoided

    records = _history(8)
    records.append(failed(8, {"x": 1.0, "y": 1.0}))
    pending = [{"x": 0.0, "y": 1.0}]
    U = np.array([[0.3, 0.3], [0.3, 0.3], [1.0, 1.0], [0.0, 1.0],
                  SPACE2.encode(records[0].params)])
    avoid = avoided(SPACE2, records, pending, allow_repeats)
    enc = encoding(SPACE2)
    out, n = _replace_repeats(_acqf(SPACE2, records), SPACE2, enc, U, avoid,
                              Settings(2, 64, 50, False, allow_repeats), None, 0)
    keys = [tuple(np.round(u, 9)) for u in out]
    assert n == (3 if allow_repeats else 4)
    assert len(set(keys)) == 5  # no repeat within the batch
    assert keys[0] == (0.3, 0.3)  # the first of two equal picks is kept
    assert (1.0, 1.0) not in keys and (0.0, 1.0) not in keys  # failed, running
    assert (tuple(out[4]) == tuple(U[4])) == allow_repeats  # a complete configuration
    untouched, m = _replace_repeats(None, SPACE2, enc, out, avoid,
                                    Settings(2, 64, 50, False, allow_repeats), None, 0)
    assert m == 0 and (untouched == out).all()
