"""Energy budgets of optimize() and the metered energy of proposals, with a fake meter.

The fake meter gives a fixed number of joules per window: the only fake here
(the machine has no energy counter that is deterministic).
"""

from __future__ import annotations

import json
import logging

import pytest
from fake_meters import FixedJoules

import ecopt
from ecopt._search import EnergyBudget
from ecopt.trial import Intermediate, TrialRecord, TrialState

SPACE = {"x": ecopt.Float(0, 1), "y": ecopt.Float(0, 1)}
OBJS = [ecopt.Objective("f1", "min"), ecopt.Objective("f2", "min")]


def windows_objective(trial: ecopt.Trial) -> dict[str, float]:
    """1 to 5 windows (joules) depending on x: trials of unequal, known cost."""
    for _ in range(1 + int(4 * trial["x"])):
        with trial.phase("work"):
            pass
    return {"f1": trial["x"], "f2": 1 - trial["x"] + trial["y"]}


def _study(path=None, joules: float = 2.0, **kw) -> ecopt.Study:
    return ecopt.Study(ecopt.SearchSpace(SPACE), OBJS, storage=path, sampler="random",
                       meter=FixedJoules(joules), seed=3, **kw)


def _spent(recs: list[TrialRecord]) -> float:
    return sum(r.energy_j + (r.proposal["search"]["energy_j"] or 0.0) for r in recs)


@pytest.mark.parametrize("budget, batch", [(60.0, 1), (101.0, 1), (100.0, 3), (7.0, 1)])
def test_budget_is_never_exceeded(budget, batch, tmp_path):
    st = _study(tmp_path / "s")
    recs = st.optimize(windows_objective, n_trials=500, batch_size=batch,
                       energy_budget_j=budget, asynchronous=batch == 1)
    assert recs and _spent(recs) <= budget + 1e-9  # float sums of thirds of joules
    assert st.stop_reason.startswith(f"energy_budget_j={budget:g} J")
    # Stopped because the next trial would not fit, not long before: the largest trial
    # (5 windows) and its proposal (1 window, shared in a batch) is 12 J.
    assert budget - _spent(recs) < 12.0 * batch
    st.close()


def test_proposals_are_metered_and_split_over_a_batch(tmp_path):
    st = _study(tmp_path / "s", joules=3.0)
    trials = st.ask(3)
    for t in trials:
        s = t.proposal["search"]
        assert s["batch"] == 3 and s["energy_j"] == pytest.approx(1.0)  # one 3 J window / 3
        assert s["measured"] is True and s["source"] == "cpu=fake-fixed-joules"
        assert s["meter"] == "fixed-joules" and s["duration_s"] >= 0
        st.tell(t, {"f1": 0.1, "f2": 0.2})
    one = st.ask()
    assert one.proposal["search"]["batch"] == 1 and one.proposal["search"]["energy_j"] == 3.0
    st.tell(one, {"f1": 0.3, "f2": 0.1})
    user = st.ask(params={"x": 0.5, "y": 0.5})  # no sampler, nothing metered
    assert "search" not in user.proposal
    st.tell(user, {"f1": 0.5, "f2": 0.5})
    st.close()
    lines = [json.loads(x) for x in (tmp_path / "s" / "trials.jsonl").read_text().splitlines()]
    assert [x["proposal"].get("search", {}).get("energy_j") for x in lines] == [1.0, 1.0, 1.0,
                                                                                3.0, None]


def test_a_proposal_made_while_trials_run_is_flagged(tmp_path):
    st = _study(tmp_path / "s")
    first = st.ask()
    assert "overlap" not in first.proposal["search"]  # nothing else was running
    pair = st.ask(2)  # first is still running: a machine-wide meter reads it too
    for t in pair:
        assert t.proposal["search"]["overlap"] is True
        assert t.proposal["search"]["in_flight"] == 1
    for t in [first, *pair]:
        st.tell(t, {"f1": 0.1, "f2": 0.2})
    assert "overlap" not in st.ask().proposal["search"]
    st.close()
    lines = [json.loads(x) for x in (tmp_path / "s" / "running.jsonl").read_text().splitlines()]
    kept = [x["proposal"]["search"].get("in_flight") for x in lines if "proposal" in x]
    assert kept == [None, 1, 1, None]


def test_wallclock_meter_records_duration_only_and_refuses_a_budget():
    st = ecopt.Study(ecopt.SearchSpace(SPACE), OBJS, sampler="random", meter="wallclock")
    t = st.ask()
    assert t.proposal["search"]["energy_j"] is None and t.proposal["search"]["source"] == "none"
    with pytest.raises(ValueError, match="reads energy"):
        st.optimize(windows_objective, n_trials=2, energy_budget_j=10.0)


@pytest.mark.parametrize("bad", [0, -1.0, float("nan"), float("inf"), "10", True])
def test_bad_budgets_name_the_rule(bad):
    with pytest.raises(ValueError, match="energy_budget_j > 0 must hold"):
        _study().optimize(windows_objective, n_trials=2, energy_budget_j=bad)


def test_a_limit_is_needed_and_n_trials_may_be_left_out(caplog):
    st = _study()
    with pytest.raises(ValueError, match="needs a limit"):
        st.optimize(windows_objective)
    with caplog.at_level(logging.INFO, logger="ecopt"):
        recs = st.optimize(windows_objective, energy_budget_j=40.0)
    assert recs and _spent(recs) <= 40.0
    assert any("energy_budget_j=40 J" in r.getMessage() for r in caplog.records)


def test_stop_reason_is_kept_in_study_json_and_shown(tmp_path):
    from ecopt.report import build_report, show_text

    st = _study(tmp_path / "s")
    st.optimize(windows_objective, n_trials=3)
    st.optimize(windows_objective, n_trials=100, energy_budget_j=30.0)
    st.close()
    spec = json.loads((tmp_path / "s" / "study.json").read_text())
    calls = spec["sessions"][-1]["optimize"]
    assert [c["stop_reason"] for c in calls][0] == "n_trials"
    assert calls[1]["energy_budget_j"] == 30.0 and calls[1]["stop_reason"].startswith(
        "energy_budget_j=30 J")
    assert calls[1]["trial_energy_j"] + calls[1]["proposal_energy_j"] <= 30.0
    text = show_text(build_report(tmp_path / "s"))
    assert "last optimize() stopped: energy_budget_j=30 J" in text
    # Issue 28 (newcomer list): load_study(d).stop_reason was None while `ecopt show` printed it.
    loaded = ecopt.load_study(tmp_path / "s")
    assert loaded.stop_reason == calls[1]["stop_reason"]
    assert f"last optimize() stopped: {loaded.stop_reason}" in text
    reopened = _study(tmp_path / "s")  # a resumed study starts with what its log says, too
    assert reopened.stop_reason == calls[1]["stop_reason"]
    reopened.close()
    assert ecopt.load_study(tmp_path / "s").stop_reason == calls[1]["stop_reason"]  # no call


def _rec(n: int, energy_j: float, state: TrialState = TrialState.COMPLETE) -> TrialRecord:
    from ecopt.meters.base import ComponentEnergy, Measurement
    from ecopt.trial import PhaseRecord

    m = Measurement(1.0, {"cpu": ComponentEnergy(energy_j, "x", True)}, "fixed")
    return TrialRecord(number=n, state=state, params={"x": 0.1}, values={"f1": 1.0, "f2": 1.0},
                       phases={"work": PhaseRecord("work", m)},
                       intermediate=(Intermediate(1, {"f1": 1.0}, energy_j, 1.0),))


def _rec_at(n: int, x: float, energy_j: float) -> TrialRecord:
    r = _rec(n, energy_j)
    return TrialRecord(number=n, state=r.state, params={"x": x, "y": 0.5}, values=r.values,
                       phases=r.phases)


def test_the_next_trial_is_predicted_from_the_trials_nearest_its_configuration():
    space = ecopt.SearchSpace(SPACE)
    recs = [_rec_at(i, i / 20, 1.0 + 100.0 * (i >= 18)) for i in range(21)]  # x >= 0.9: 101 J
    b = EnergyBudget(1000.0)
    assert b.predict_config_j(recs[:2], space, {"x": 0.1, "y": 0.5}) is None  # < 3 complete
    cheap, how = b.predict_config_j(recs, space, {"x": 0.12, "y": 0.5})
    assert cheap == 1.0 and "nearest its configuration" in how
    assert b.predict_config_j(recs, space, {"x": 0.97, "y": 0.5})[0] == 101.0
    # At the border the neighbourhood reaches the costly side: the larger energy is taken.
    assert b.predict_config_j(recs, space, {"x": 0.86, "y": 0.5})[0] == 101.0
    # Far from every trial (they are 0.05 apart; this one is 0.5 away): the neighbours say
    # little, and the trial-blind prediction applies (a high quantile of them all).
    assert b.predict_config_j(recs, space, {"x": 0.12, "y": 0.0}) is None
    assert b.predict_trial_j(recs)[0] == 101.0
    assert b.admits(recs, space, {"x": 0.12, "y": 0.0}, 0.0, 0)[1] == 101.0
    fits, each, why = b.admits(recs, space, {"x": 0.97, "y": 0.5}, in_flight_j=900.0,
                               n_in_flight=3)
    assert not fits and each == 101.0 and "predicted to need 101 J" in why
    assert b.admits(recs, space, {"x": 0.1, "y": 0.5}, 900.0, 3)[0]


def test_proposals_are_refused_only_when_not_even_the_cheapest_trial_fits():
    b = EnergyBudget(100.0)
    recs = [_rec(i, float(i)) for i in range(1, 11)]  # 1..10 J
    b.trials_j, b.proposals_j = 10.0, 1.0
    assert b.affordable(recs, 0.0, 0, [0.5], 200)[0] == 59  # (100 - 11) // (1 + 0.5)
    assert b.affordable(recs, 80.0, 2, [0.5], 200)[0] == 6  # trials in flight at 80 J
    n, why = b.affordable(recs, 88.5, 2, [0.5], 8)
    assert n == 0 and "not even the cheapest of 10 complete trials (1 J)" in why
    # Only pruned/failed trials so far: they are what there is to go by.
    assert b.predict_trial_j([_rec(0, 5.0, TrialState.PRUNED)])[0] == 5.0
    # Nothing finished yet: one at a time, none while one runs.
    assert b.affordable([], 0.0, 0, [], 4)[0] == 1 and b.affordable([], 0.0, 1, [], 4)[0] == 0


def rare_costly_objective(trial: ecopt.Trial) -> dict[str, float]:
    """One window, or 20 where x > 0.9: a costly corner a trial-blind prediction would fear."""
    for _ in range(20 if trial["x"] > 0.9 else 1):
        with trial.phase("work"):
            pass
    return {"f1": trial["x"], "f2": 1 - trial["x"] + trial["y"]}


def test_a_costly_corner_does_not_end_the_search_and_an_overrun_is_not_started(tmp_path):
    st = _study(tmp_path / "s")  # 2 J per window: cheap trials 2 J, costly ones 40 J
    recs = st.optimize(rare_costly_objective, n_trials=500, energy_budget_j=300.0)
    done = [r for r in recs if r.state is TrialState.COMPLETE]
    assert _spent(recs) <= 300.0
    # The costly corner was seen, and the search went on with what it predicts to fit: a
    # prediction blind to the configuration (40 J + 2 J per trial) would have stopped
    # after a handful of trials.
    assert any(r.energy_j == 40.0 for r in done) and len(done) >= 25
    not_started = [r for r in recs if r.error is not None and r.error.type == "NotStarted"]
    if not_started:  # a proposal predicted to overrun: recorded with its proposal, not run
        (r,) = not_started
        assert r is recs[-1] and r.state is TrialState.FAILED and r.energy_j == 0.0
        assert r.proposal["search"]["energy_j"] > 0
        assert "predicted to need" in r.error.message
        assert st.stop_reason in r.error.message
    else:
        assert "not even the cheapest" in st.stop_reason
    st.close()
    # Saved like any trial: a re-opened study has it.
    again = ecopt.Study.load(tmp_path / "s")
    assert len(again.records) == len(recs)
    again.close()
