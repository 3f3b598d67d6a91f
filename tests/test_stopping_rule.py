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


# A rule that converges at its first evaluation with a model (2 complete trials): any bound
# is below a noise floor of 1e9, so one cheap GP fit decides.
QUICK = ecopt.StoppingRule(patience=1, min_trials=2, noise_floor=1e9)


def test_last_checks_energy_is_kept_in_study_json_and_in_the_report(tmp_path,
                                                                      fixed_joules_meter):
    from ecopt.report import build_report

    path = tmp_path / "s"
    study = ecopt.Study(SPACE, OBJS, storage=path, meter=fixed_joules_meter(),
                        sampler=QLogNEHVISampler(n_init=2))
    done = study.optimize(flat, n_trials=10, show_progress=False, stop_when_converged=QUICK)
    assert len(done) == 2 and study.stop_reason.startswith("converged")
    # Three evaluations of 2 J: two billed to the proposals after them, the last one to
    # nothing but the optimize call's entry.
    assert [r.proposal["search"]["energy_j"] for r in done] == [4.0, 4.0]
    call = study.spec["sessions"][-1]["optimize"][-1]
    assert call["unbilled_search"]["energy_j"] == 2.0
    assert call["unbilled_search"]["meter"] == "fixed-joules"
    assert call["unbilled_search"]["measured"] is True
    assert call["proposal_energy_j"] == pytest.approx(10.0)
    assert study._unbilled_search is None  # kept, so never billed twice
    trials_j = sum(r.energy_j for r in done)
    live = build_report(study)
    assert live.proposal_energy_j == pytest.approx(10.0)
    assert live.search_energy_j == pytest.approx(trials_j + 10.0)
    study.close()

    # ask/tell: a should_terminate() that no proposal follows is kept when the study closes.
    again = ecopt.Study(SPACE, OBJS, storage=path, meter=fixed_joules_meter(),
                        sampler=QLogNEHVISampler(n_init=2))
    t = again.ask(params={"x": 0.5, "y": 0.5})
    again.tell(t, flat(t))
    assert again.should_terminate()  # a new set of finished trials: a new 2 J window
    assert build_report(again).proposal_energy_j == pytest.approx(12.0)  # pending, counted
    again.close()
    spec = json.loads((path / "study.json").read_text())
    assert spec["sessions"][-1]["unbilled_search"]["energy_j"] == 2.0
    data = build_report(path)
    assert data.proposal_energy_j == pytest.approx(12.0)
    assert data.search_energy_j == pytest.approx(data.trial_energy_j + 12.0)
    rows = [p for p in data.provenance if p.component == "proposals"]
    assert len(rows) == 1 and rows[0].energy_j == pytest.approx(12.0)
    assert rows[0].meter == "fixed-joules" and rows[0].measured is True

    # Re-opened again, nothing is counted twice.
    third = ecopt.Study(SPACE, OBJS, storage=path, meter=fixed_joules_meter(),
                        sampler=QLogNEHVISampler(n_init=2))
    assert build_report(third).proposal_energy_j == pytest.approx(12.0)
    third.close()
    assert build_report(path).proposal_energy_j == pytest.approx(12.0)


def test_true_goes_on_with_the_restored_rule(tmp_path, fixed_joules_meter):
    path = tmp_path / "s"
    study = ecopt.Study(SPACE, OBJS, storage=path, meter=fixed_joules_meter(),
                        sampler=QLogNEHVISampler(n_init=2))
    study.optimize(flat, n_trials=10, show_progress=False, stop_when_converged=QUICK)
    study.close()
    again = ecopt.Study(SPACE, OBJS, storage=path, meter=fixed_joules_meter(),
                        sampler=QLogNEHVISampler(n_init=2))
    assert again.stopping_rule == QUICK
    # True: the study's rule, not StoppingRule() (min_trials=20 would run all 5 trials).
    assert again.optimize(flat, n_trials=5, show_progress=False,
                          stop_when_converged=True) == []
    assert again.stopping_rule == QUICK and again.stop_reason.startswith("converged")
    again.close()
    fresh = ecopt.Study(SPACE, OBJS, meter=fixed_joules_meter(),
                        sampler=QLogNEHVISampler(n_init=2))
    assert ecopt.StoppingRule.of(True, current=fresh.stopping_rule) == ecopt.StoppingRule()


def test_pruned_trials_do_not_count_towards_min_trials(fixed_joules_meter):
    study = ecopt.Study(SPACE, OBJS, meter=fixed_joules_meter(),
                        sampler=QLogNEHVISampler(n_init=2))
    for k in range(4):
        t = study.ask(params={"x": 0.2 * k, "y": 0.5})
        t.report(0, {"a": 0.5, "b": 0.5})
        t.report(1, {"a": 0.9, "b": 0.9})
        if k < 2:
            study.tell(t, {"a": 1.0, "b": 1.0})
        else:
            study.tell(t, state="pruned")
    seen, _ = study._records_for_sampler()
    assert len(seen) == 4  # the sampler sees the pruned trials as complete...
    t = study.termination(ecopt.StoppingRule(min_trials=3))
    assert t.upper_bound is None and t.reason.startswith("2 complete trial(s)")  # ...the rule not
