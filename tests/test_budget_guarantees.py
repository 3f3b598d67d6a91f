"""Energy budgets as guarantees (issue 28 item 2): property tests with scripted meters.

A scripted meter reads whatever joules a test gives each trial: random costs,
``nan`` (a broken counter: the trial fails with a ``MeterError``) and ``0`` (a
meter that reads nothing). Whatever the readings, batch size and executor:

* the call ends (a meter that reads nothing never lets it run on);
* a trial whose reading is missing, NaN or zero is charged a stated estimate
  (its duration x the highest power read so far), or, with nothing read yet to
  estimate from, the call raises ``MeterError``;
* no trial starts once the budget is spent, queued batch trials included: the
  overrun is at most one trial with the local executor, and at most the trials
  in flight with worker processes.
"""

from __future__ import annotations

import math

import pytest
from fake_meters import CostScript, ScriptedJoules
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ecopt
from ecopt._search import BUDGET_CHARGE_KEY, budget_cost_j, proposal_energy_j
from ecopt.errors import MeterError
from ecopt.trial import TrialState

SPACE = {"x": ecopt.Float(0, 1), "y": ecopt.Float(0, 1)}
OBJS = [ecopt.Objective("f1", "min"), ecopt.Objective("f2", "min")]


def _study() -> ecopt.Study:
    return ecopt.Study(ecopt.SearchSpace(SPACE), OBJS, sampler="random",
                       meter=ScriptedJoules(), seed=0)


def _run(costs, budget, batch, executor="local"):
    """(study, records, raised MeterError or None)."""
    study = _study()
    try:
        study.optimize(CostScript(tuple(costs)), batch_size=batch, executor=executor,
                       energy_budget_j=budget, asynchronous=batch == 1, fail_fast=None,
                       timeout_s=120)
    except MeterError as exc:
        return study, list(study.records), exc
    return study, list(study.records), None


def _check(study, recs, err, budget, max_overrun_trials):
    ran = [r for r in recs if not (r.error is not None and r.error.type == "NotStarted")]
    assert study.stop_reason is None or "timeout_s" not in study.stop_reason, "did not end"
    charged = [budget_cost_j(r) for r in ran]
    read_nothing = [r for r in ran if not (r.energy_j > 0) or (
        r.error is not None and r.error.type == "MeterError")]
    if err is not None:
        # Only with nothing read yet to estimate from, and it says so.
        assert "no trial of this study has read energy" in str(err)
        first = read_nothing[-1]
        assert all(r.energy_j == 0 or r.number > first.number for r in ran)
        return
    for r in read_nothing:  # charged an estimate, stated in the record
        c = r.user_attrs[BUDGET_CHARGE_KEY]
        assert c["charged_j"] > 0 and c["power_w"] > 0 and "W" in c["how"]
    proposals = sum(proposal_energy_j(r) for r in recs)
    total = sum(charged) + proposals
    assert math.isfinite(total)
    if ran:
        biggest = sorted(charged)[-max_overrun_trials:]
        assert total <= budget + sum(biggest) + 1e-6, (total, budget, charged)
    # It stopped for the budget (n_trials is unlimited).
    assert study.stop_reason is not None and study.stop_reason.startswith("energy_budget_j")


costs_st = st.lists(st.one_of(st.floats(20.0, 400.0), st.just(0.0), st.just(math.nan)),
                    min_size=1, max_size=12)


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(costs=costs_st, budget=st.floats(50.0, 1500.0), batch=st.integers(1, 4))
def test_local_budget_holds_whatever_the_meter_reads(costs, budget, batch):
    study, recs, err = _run(costs, budget, batch)
    _check(study, recs, err, budget, max_overrun_trials=1)


def test_a_meter_reading_zero_never_lets_the_call_run_on():
    # issue 28 finding 2a: 11,381 trials in 60 s on a 10 J budget
    study, recs, err = _run([0.0], 10.0, 1)
    assert isinstance(err, MeterError) and len(recs) == 1
    assert "energy_budget_j=10 J cannot be kept: trial 0 read 0 J" in str(err)


def test_nan_and_zero_readings_are_charged_after_real_ones():
    study, recs, err = _run([50.0, math.nan, 0.0], 400.0, 1)
    assert err is None
    by_state = {r.number: r for r in recs}
    nan_trial = by_state[1]
    assert nan_trial.state is TrialState.FAILED and nan_trial.error.type == "MeterError"
    c = nan_trial.user_attrs[BUDGET_CHARGE_KEY]
    assert c["why"].startswith("failed to read energy") and c["charged_j"] > 0
    assert "0 J over" in by_state[2].user_attrs[BUDGET_CHARGE_KEY]["why"]


def test_queued_batch_trials_do_not_start_once_the_budget_is_spent():
    # issue 28 finding 2b: cheap trials first make every queued trial look affordable;
    # the first expensive one spends the budget, the rest of its batch must not start.
    costs = [10.0] * 5 + [450.0] * 20
    study, recs, err = _run(costs, 500.0, 4)
    assert err is None
    ran = [r for r in recs if r.error is None or r.error.type != "NotStarted"]
    spent = sum(budget_cost_j(r) for r in ran)
    assert spent <= 500.0 + 450.0
    assert any(r.error is not None and r.error.type == "NotStarted" for r in recs)


@pytest.mark.slow
@settings(max_examples=3, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(costs=st.lists(st.one_of(st.floats(1.0, 400.0), st.just(0.0), st.just(math.nan)),
                      min_size=2, max_size=6),
       budget=st.floats(200.0, 1500.0))
def test_process_executor_budget_holds(costs, budget):
    from ecopt.executors.processes import ProcessExecutor

    ex = ProcessExecutor(n_workers=2)
    try:
        study, recs, err = _run(costs, budget, 2, executor=ex)
    finally:
        ex.close()
    _check(study, recs, err, budget, max_overrun_trials=2)
