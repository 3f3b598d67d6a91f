"""Short studies (issue 25 item 6): the Sobol design is sized by the trials optimize() plans,
and `ecopt show` says which trials came from which sampler."""

from __future__ import annotations

import pytest

import ecopt
from ecopt.cli import main
from ecopt.samplers import QLogNEHVISampler
from ecopt.samplers.qnehvi import MIN_INIT

SPACE4 = ecopt.SearchSpace({f"x{i}": ecopt.Float(0.0, 1.0) for i in range(4)})
OBJS = [ecopt.Objective("f1", "min"), ecopt.Objective("f2", "min")]


def f(t: ecopt.Trial) -> dict[str, float]:
    x = [t[f"x{i}"] for i in range(4)]
    return {"f1": x[0] + 0.1 * x[2], "f2": (1 - x[0]) ** 2 + x[1] + 0.2 * x[3]}


@pytest.mark.parametrize("dim,planned,want", [
    (4, None, 10),  # no plan (ask/tell, a timeout or an energy budget): 2(d+1)
    (4, 10, 3),     # a third of 10
    (4, 8, MIN_INIT),  # a third of 8 is 2: at least 3
    (4, 24, 8),
    (4, 30, 10),    # a long study keeps 2(d+1)
    (4, 300, 10),
    (1, 5, 3),
])
def test_initial_design_size_rule(dim, planned, want):
    s = QLogNEHVISampler()
    s.planned_trials = planned
    n, rule = s.initial_design_size(dim)
    assert n == want
    assert ("capped" in rule) == (want < 2 * (dim + 1))


def test_explicit_n_init_wins_over_the_plan():
    s = QLogNEHVISampler(n_init=7)
    s.planned_trials = 10
    assert s.initial_design_size(4) == (7, "n_init=7")


def test_ten_trial_four_parameter_study_uses_its_model(tmp_path, capsys):
    sampler = QLogNEHVISampler(num_restarts=2, raw_samples=32, maxiter=30)
    with ecopt.Study(SPACE4, OBJS, storage=tmp_path / "s", sampler=sampler, seed=0,
                     meter="wallclock") as study:
        recs = study.optimize(f, n_trials=10, show_progress=False)
        assert sampler.planned_trials is None  # only while optimize() runs
    by = [r.proposed_by for r in recs]
    assert by == ["sobol"] * 3 + ["qlognehvi"] * 7, by
    assert "capped at a third of the 10 planned trials" in recs[0].proposal["why"]
    # A later call plans from the trials already there: 10 + 2, and the design is done.
    sampler = QLogNEHVISampler(num_restarts=2, raw_samples=32, maxiter=30)
    with ecopt.Study(SPACE4, OBJS, storage=tmp_path / "s", sampler=sampler, seed=0,
                     meter="wallclock") as study:
        more = study.optimize(f, n_trials=2, show_progress=False)
    assert [r.proposed_by for r in more] == ["qlognehvi"] * 2
    assert main(["show", str(tmp_path / "s")]) == 0
    out = capsys.readouterr().out
    line = next(ln for ln in out.splitlines() if ln.startswith("proposed by: "))
    assert line.startswith("proposed by: sobol: 3 trials (0-2), initial design (n_init=3: "
                           "2(d+1)=10 capped"), line
    assert line.endswith("; qlognehvi: 9 trials (3-11)"), line
    assert "proposed by" in out.split("Pareto front", 1)[1].splitlines()[1]


def test_a_long_study_keeps_the_full_design():
    sampler = QLogNEHVISampler()
    study = ecopt.Study(SPACE4, OBJS, sampler=sampler, seed=0, meter="wallclock")
    sampler.planned_trials = 40
    got = sampler.propose(study.space, [], [], 10)
    assert [p.proposed_by for p in got] == ["sobol"] * 10
    assert got[0].info["why"] == "initial design (n_init=2(d+1)=10)"
