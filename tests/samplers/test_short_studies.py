"""Short studies (issue 25 item 6): the Sobol design is sized by the trials optimize() plans,
and `ecopt show` says which trials came from which sampler."""

from __future__ import annotations

import pytest

import ecopt
from ecopt.cli import main
from ecopt.samplers import QLogNEHVISampler
from ecopt.samplers.qnehvi import INIT_TRIALS, MIN_INIT

SPACE4 = ecopt.SearchSpace({f"x{i}": ecopt.Float(0.0, 1.0) for i in range(4)})
OBJS = [ecopt.Objective("f1", "min"), ecopt.Objective("f2", "min")]


def f(t: ecopt.Trial) -> dict[str, float]:
    x = [t[f"x{i}"] for i in range(4)]
    return {"f1": x[0] + 0.1 * x[2], "f2": (1 - x[0]) ** 2 + x[1] + 0.2 * x[3]}


@pytest.mark.parametrize("dim,planned,want", [
    (4, None, INIT_TRIALS),  # no plan (ask/tell, a timeout or an energy budget): Ax's 5
    (4, 10, 3),     # a third of 10
    (4, 8, MIN_INIT),  # a third of 8 is 2: at least 3
    (4, 12, 4),
    (4, 15, 5),     # a long enough study keeps min(2(d+1), 5)
    (4, 300, 5),
    (1, None, 4),   # 2(d+1) = 4 < 5
    (1, 30, 4),
    (1, 5, 3),
    (10, None, 5),  # not 22: the size does not grow with d
])
def test_initial_design_size_rule(dim, planned, want):
    s = QLogNEHVISampler()
    s.planned_trials = planned
    n, rule = s.initial_design_size(dim)
    assert n == want
    full = min(2 * (dim + 1), INIT_TRIALS)
    if want < full:
        assert rule.startswith(f"n_init={want}: min(2(d+1), 5)={full} capped"), rule
    else:
        assert rule == f"n_init=min(2(d+1), 5)={full}"


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
                           "min(2(d+1), 5)=5 capped"), line
    assert line.endswith("; qlognehvi: 9 trials (3-11)"), line
    assert "proposed by" in out.split("Pareto front", 1)[1].splitlines()[1]


def test_a_long_study_keeps_the_full_design():
    sampler = QLogNEHVISampler()
    study = ecopt.Study(SPACE4, OBJS, sampler=sampler, seed=0, meter="wallclock")
    sampler.planned_trials = 40
    got = sampler.propose(study.space, [], [], 7)
    # The design is 5 trials (the first the centre); past it, without complete trials to
    # model, the Sobol points say why they are not the model's.
    whys = [p.info["why"] for p in got]
    assert whys == ["initial design (n_init=min(2(d+1), 5)=5)"] * 5 + [
        "fewer than 2 complete trials to model"] * 2
    assert got[0].params == {f"x{i}": 0.5 for i in range(4)}
