"""The stopping rule: should_terminate() and optimize(stop_when_converged=...), real BoTorch fits."""

from __future__ import annotations

import json

import numpy as np
import pytest

import ecopt
from ecopt.cli import main
from ecopt.samplers import QLogNEHVISampler

SPACE = {"x": ecopt.Float(0, 1), "y": ecopt.Float(0, 1)}
OBJS = [ecopt.Objective("a", "max"), ecopt.Objective("b", "max")]
RULE = ecopt.StoppingRule(min_trials=8)


def flat(trial: ecopt.Trial) -> dict[str, float]:
    """Nothing to find: both objectives are 1 plus noise (sd 0.01), wherever the trial is."""
    rng = np.random.default_rng(trial.number)
    return {"a": 1 + 0.01 * rng.normal(), "b": 1 + 0.01 * rng.normal()}


@pytest.mark.slow
def test_optimize_stops_early_on_a_flat_problem_and_says_why(tmp_path, capsys,
                                                              fixed_joules_meter):
    study = ecopt.Study(SPACE, OBJS, storage=tmp_path / "s", meter=fixed_joules_meter(),
                        sampler=QLogNEHVISampler(n_init=6))
    done = study.optimize(flat, n_trials=40, show_progress=False, stop_when_converged=RULE)
    assert len(done) < 30
    assert study.stop_reason.startswith("converged: remaining HV improvement <= noise for 3 "
                                        "proposals (bound ")
    t = study.termination()
    assert t.converged and t.below == 3 and t.upper_bound <= t.noise
    assert t.n_records == len(done) and t.details["noise_source"] == ["fitted", "fitted"]
    # Every proposal after min_trials keeps the evaluation made just before it.
    notes = [r.proposal["convergence"] for r in done]
    evaluated = [n for n in notes if n["upper_bound"] is not None]
    assert len(evaluated) >= 2 and all(n["patience"] == 3 for n in evaluated)
    assert [n["n_records"] for n in notes] == [r.number for r in done]
    # Its joules are billed to the next proposal: two windows of 2 J.
    assert done[-1].proposal["search"]["energy_j"] == pytest.approx(4.0)
    assert done[-1].proposal["search"]["convergence_check_s"] > 0
    proposals_j = sum(r.proposal["search"]["energy_j"] for r in done)
    assert study._proposal_energy_j == pytest.approx(proposals_j + 2.0)  # + the last check
    study.close()

    spec = json.loads((tmp_path / "s" / "study.json").read_text())
    call = spec["sessions"][-1]["optimize"][-1]
    assert call["stop_when_converged"] is True and call["convergence"]["converged"] is True

    again = ecopt.Study(SPACE, OBJS, storage=tmp_path / "s", meter=fixed_joules_meter(),
                        sampler=QLogNEHVISampler(n_init=6))
    assert again.stopping_rule == RULE  # the recorded rule, kept
    assert again.should_terminate()  # no new trial: the recorded evaluation
    assert again.termination().upper_bound == pytest.approx(t.upper_bound)
    again.close()

    assert main(["show", str(tmp_path / "s")]) == 0
    out = capsys.readouterr().out
    assert "last optimize() stopped: converged: remaining HV improvement <= noise for 3" in out


def test_rule_does_not_fire_while_an_improvement_is_obvious():
    # Both objectives grow with x and y; only the corner near 0 was tried: the GPs see the
    # slope, and an optimistic point far out of the explored corner improves a lot.
    study = ecopt.Study(SPACE, OBJS, sampler=QLogNEHVISampler(n_init=4), meter="estimate")
    rng = np.random.default_rng(0)
    rule = ecopt.StoppingRule(patience=2, min_trials=8)
    seen = []
    for k in range(14):
        x, y = rng.uniform(0, 0.3, size=2)
        trial = study.ask(params={"x": float(x), "y": float(y)})
        study.tell(trial, {"a": x + 0.2 * y + 0.001 * rng.normal(),
                           "b": y + 0.2 * x + 0.001 * rng.normal()})
        if k >= 7:
            seen.append(study.termination(rule))
    assert [t.n_records for t in seen] == list(range(8, 15))
    assert all(not t.converged and t.below == 0 for t in seen)
    assert all(t.upper_bound > 10 * t.noise for t in seen)
    assert not study.should_terminate(rule)


def test_rule_before_min_trials_and_without_new_trials():
    study = ecopt.Study(SPACE, OBJS, sampler=QLogNEHVISampler(n_init=4), meter="estimate")
    study.optimize(flat, n_trials=3, show_progress=False)
    t = study.termination()
    assert not t.converged and t.upper_bound is None and "min_trials=20" in t.reason
    assert study.termination() is t  # evaluated once per set of finished trials
    assert t.describe().startswith("not converged: 3 complete trial(s)")
    assert study.ask().proposal["convergence"]["n_records"] == 3


@pytest.mark.parametrize("kw, what", [({"patience": 0}, "patience"),
                                      ({"min_trials": 1}, "min_trials"),
                                      ({"beta": -1.0}, "beta"), ({"delta": 1.0}, "delta"),
                                      ({"noise_floor": float("nan")}, "noise_floor"),
                                      ({"n_candidates": 0}, "n_candidates")])
def test_bad_settings_name_the_rule_and_value(kw, what):
    with pytest.raises(ValueError, match=f"stopping rule: .*{what}"):
        ecopt.StoppingRule(**kw)


def test_bad_stop_when_converged_and_model_free_samplers():
    study = ecopt.Study(SPACE, OBJS, sampler="random", meter="estimate")
    with pytest.raises(ValueError, match="stop_when_converged must be True, False or an "
                                         "ecopt.StoppingRule, got 'yes'"):
        study.optimize(flat, n_trials=2, stop_when_converged="yes")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="stop_when_converged needs a model-based sampler.*"
                                         "'random'"):
        study.optimize(flat, n_trials=2, stop_when_converged=True)
    assert study.records == []  # refused before any trial
    study.optimize(flat, n_trials=2, show_progress=False)
    with pytest.raises(ecopt.EcoptError, match="needs a model-based sampler"):
        study.should_terminate()
    with pytest.raises(ValueError, match="rule must be an ecopt.StoppingRule"):
        study.termination(rule=3)  # type: ignore[arg-type]


def test_latest_evaluation_is_shown_when_not_converged(tmp_path):
    from ecopt.report import build_report, show_text
    from ecopt.report.html import render_html

    study = ecopt.Study(SPACE, OBJS, storage=tmp_path / "s", meter="estimate",
                        sampler=QLogNEHVISampler(n_init=4))
    study.optimize(flat, n_trials=3, show_progress=False, stop_when_converged=True)
    assert study.stop_reason == "n_trials"
    study.close()
    data = build_report(tmp_path / "s")
    line = "not converged: 2 complete trial(s); the rule is evaluated from min_trials=20"
    assert data.convergence == line
    assert f"stopping rule: {line}" in show_text(data)
    assert "stopping rule" in render_html(data) and "min_trials=20" in render_html(data)
