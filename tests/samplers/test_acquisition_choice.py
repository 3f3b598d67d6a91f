"""Which acquisition a proposal uses, by number of objectives, and that the proposal says so."""

from __future__ import annotations

import math

import pytest

import ecopt
from ecopt.samplers import QLogNEHVISampler
from ecopt.samplers._acquisition import choose

FAST = {"num_restarts": 2, "raw_samples": 32}
SPACE = ecopt.SearchSpace({"x": ecopt.Float(0.0, 1.0), "y": ecopt.Float(0.0, 1.0)})


def four(trial: ecopt.Trial) -> dict[str, float]:
    x, y = trial["x"], trial["y"]
    return {"a": x, "b": 1 - x, "c": y * (1 - x), "d": 1 - y + 0.1 * math.sin(6 * x)}


@pytest.mark.parametrize(("M", "parego_from", "method", "alpha"), [
    (2, 4, "qLogNEHVI", 0.0), (3, 4, "qLogNEHVI", 0.0), (4, 4, "qLogNParEGO", None),
    (6, 4, "qLogNParEGO", None), (4, 5, "qLogNEHVI", 0.01), (2, 2, "qLogNParEGO", None)])
def test_choice_by_number_of_objectives(M, parego_from, method, alpha):
    c = choose(M, parego_from=parego_from)
    assert c.method == method
    if alpha is not None:
        assert c.alpha == pytest.approx(alpha)


@pytest.mark.parametrize(("M", "kwargs", "method", "alpha"), [
    (4, {}, "qLogNEHVI", 0.0), (3, {}, "qLogNEHVI", 0.0), (5, {}, "qLogNParEGO", None),
    (4, {"parego_from": 4}, "qLogNParEGO", None), (4, {"alpha": 0.01}, "qLogNEHVI", 0.01)])
def test_an_enumerated_space_keeps_exact_boxes_at_four_objectives(M, kwargs, method, alpha):
    c = choose(M, enumerated=True, **kwargs)
    assert c.method == method
    if alpha is not None:
        assert c.alpha == pytest.approx(alpha)
    # outside an enumerated space the default at four objectives stays qLogNParEGO
    assert choose(4).method == "qLogNParEGO"


@pytest.mark.slow
@pytest.mark.parametrize(("kwargs", "method"), [({}, "qLogNParEGO"),
                                                ({"parego_from": 5}, "qLogNEHVI")])
def test_four_objective_proposals_record_their_acquisition(kwargs, method):
    objs = [ecopt.Objective(n, "min") for n in "abcd"]
    s = ecopt.Study(SPACE, objs, sampler=QLogNEHVISampler(seed=0, n_init=5, **FAST, **kwargs),
                    meter="wallclock", seed=0)
    s.optimize(four, n_trials=7, show_progress=False)
    bo = [r for r in s.records if r.proposed_by == "qlognehvi"]
    assert len(bo) == 2
    for r in bo:
        assert r.proposal["acquisition"] == method
        assert r.proposal["mc_samples"] == 32
        if method == "qLogNEHVI":
            assert r.proposal["partitioning_alpha"] == pytest.approx(0.01)
        else:
            assert "partitioning_alpha" not in r.proposal


GRID = ecopt.SearchSpace({"x": ecopt.Int(0, 9), "y": ecopt.Int(0, 6)})


def four_on_grid(trial: ecopt.Trial) -> dict[str, float]:
    x, y = trial["x"] / 9, trial["y"] / 6
    return {"a": x, "b": 1 - x, "c": y * (1 - x), "d": 1 - y + 0.1 * math.sin(6 * x)}


@pytest.mark.slow
@pytest.mark.parametrize(("kwargs", "method"), [({}, "qLogNEHVI"),
                                                ({"parego_from": 4}, "qLogNParEGO")])
def test_four_objectives_on_an_enumerated_grid_use_exact_boxes(kwargs, method):
    objs = [ecopt.Objective(n, "min") for n in "abcd"]
    s = ecopt.Study(GRID, objs, sampler=QLogNEHVISampler(seed=0, n_init=5, **kwargs),
                    meter="wallclock", seed=0)
    s.optimize(four_on_grid, n_trials=7, show_progress=False)
    bo = [r for r in s.records if r.proposed_by == "qlognehvi"]
    assert len(bo) == 2
    for r in bo:
        assert r.proposal["optimiser"] == "enumerate"
        assert r.proposal["acquisition"] == method
        if method == "qLogNEHVI":
            assert r.proposal["partitioning_alpha"] == 0.0
        else:
            assert "partitioning_alpha" not in r.proposal
    # 70 configurations, none proposed twice
    assert len({(r.params["x"], r.params["y"]) for r in s.records}) == 7
