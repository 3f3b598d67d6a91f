"""Ax (ax-platform's Client API, default generation strategy) as a method of benchmarks/mobo.py."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import ecopt
from benchmarks import mobo
from benchmarks.problems import Problem, make_problem

from zeus_example import ZEUS_EXAMPLE  # tests/benchmarks/zeus_example.py

pytestmark = pytest.mark.skipif(not mobo.ax_installed(),
                                reason="the ax methods need Ax: pip install 'ecopt[ax]'")


def _check_run(r: dict, problem: Problem, method: str, budget: int) -> None:
    assert r["method"] == method and r["problem"] == problem.name and r["budget"] == budget
    assert len(r["params"]) == len(r["hv"]) == len(r["log_gap"]) == budget
    hv = np.asarray(r["hv"])
    assert np.all(np.diff(hv) >= -1e-12) and np.all(hv >= 0)
    assert np.all(hv <= problem.max_hv * (1 + 1e-9)) and np.all(np.isfinite(r["log_gap"]))
    for p in r["params"]:  # every evaluated point is a valid configuration of the space
        assert set(p) == set(problem.space.searched_names)
        for n, v in p.items():
            assert problem.space[n].validate(v, name=n) == v
    # Scored like every other method: the HV of the true values of the evaluated points.
    assert r["hv"] == mobo._hv_curve(problem, r["params"])


@pytest.mark.slow
def test_ax_runs_its_default_strategy_on_branincurrin() -> None:
    problem = make_problem("branincurrin")
    r = mobo.run_one(problem, "ax", seed=0, budget=6)
    _check_run(r, problem, "ax", 6)
    # Ax's own initial design: the centre of the space, then distinct Sobol points...
    assert r["params"][0] == {"x0": 0.5, "x1": 0.5}
    assert len({tuple(p.values()) for p in r["params"][:5]}) == 5
    assert r["params"][:5] != mobo.initial_design(problem, 0)[:5]
    # ... then one model-based proposal (the 6th), timed like the others' asks.
    assert len(r["ask_s"]) == 1 and r["ask_s"][0] > 0
    assert all(0.0 <= v <= 1.0 for p in r["params"] for v in p.values())


def test_ax_shared_init_starts_from_the_shared_design() -> None:
    problem = make_problem("branincurrin")
    r = mobo.run_one(problem, "ax-shared-init", seed=3, budget=problem.n_init + 1)
    _check_run(r, problem, "ax-shared-init", problem.n_init + 1)
    assert r["params"][:problem.n_init] == mobo.initial_design(problem, 3)
    assert r["params"][-1] not in r["params"][:-1]
    assert r["ask_s"] == []  # Ax's one Sobol point after the design: no model yet


def test_ax_searches_a_discrete_zeus_space(tmp_path: Path) -> None:
    problem = make_problem("zeus", zeus_dir=ZEUS_EXAMPLE.write(tmp_path / "zeus"))
    r = mobo.run_one(problem, "ax", seed=1, budget=5)  # Ax's centre and Sobol steps
    _check_run(r, problem, "ax", 5)


def test_ax_parameters_map_every_kind_of_axis() -> None:
    from ax.api.configs import ChoiceParameterConfig, RangeParameterConfig

    space = ecopt.SearchSpace({
        "lr": ecopt.Float(1e-4, 1e-1, log=True), "units": ecopt.Int(8, 64, step=8),
        "layers": ecopt.Int(1, 4), "bs": ecopt.Categorical([16, 32, 64], ordered=True),
        "act": ecopt.Categorical(["relu", "gelu"]), "mix": ecopt.Categorical([1, "auto", 0.5]),
        "one": ecopt.Categorical(["only"])})
    problem = make_problem("branincurrin")
    problem.space = space
    configs, back = mobo._ax_parameters(problem)
    by = {c.name: c for c in configs}
    assert set(by) == set(space.searched_names) - {"one"}
    assert by["lr"] == RangeParameterConfig("lr", (1e-4, 1e-1), "float", scaling="log")
    assert by["units"] == RangeParameterConfig("units", (8, 64), "int", step_size=8)
    assert by["layers"] == RangeParameterConfig("layers", (1, 4), "int")
    assert by["bs"] == ChoiceParameterConfig("bs", [16, 32, 64], "int", is_ordered=True)
    assert by["act"] == ChoiceParameterConfig("act", ["relu", "gelu"], "str", is_ordered=False)
    assert by["mix"] == ChoiceParameterConfig("mix", ["0", "1", "2"], "str", is_ordered=False)
    assert [back["mix"](v) for v in ("0", "1", "2")] == [1, "auto", 0.5]
    assert back["one"](None) == "only" and back["bs"](32) == 32
    assert mobo._choice_index([1, "auto", 0.5], "auto") == "1"
