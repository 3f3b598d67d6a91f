"""optimize(fail_fast=k): a broken objective stops the call, a failing region does not.

The rules (ecopt._optimize.OptimizeLoop._count_failure): the first k counted trials of a
call all failed; k failures in a row with the same error around a complete trial; more
than half of the call's trials failed, from 10 on.
"""

from __future__ import annotations

import pytest

import ecopt
from ecopt.trial import TrialState

SPACE = {"x": ecopt.Float(0, 1), "y": ecopt.Float(0, 1)}
OBJS = [ecopt.Objective("f1", "min"), ecopt.Objective("f2", "min")]


def _study(path=None) -> ecopt.Study:
    return ecopt.Study(ecopt.SearchSpace(SPACE), OBJS, storage=path, sampler="random",
                       meter="estimate", seed=0)


def typo(trial: ecopt.Trial) -> dict[str, float]:
    return {"f1": trial["c"], "f2": 0.0}  # 'c' is not a parameter


def misspelled(trial: ecopt.Trial) -> dict[str, float]:
    return {"f1": trial["x"], "f_2": 1.0}  # unknown metric name: failed in the record builder


def test_a_typo_stops_the_call_after_three_trials_naming_them(tmp_path):
    st = _study(tmp_path / "s")
    with pytest.raises(ecopt.SystematicFailureError, match=r"trials 0, 1, 2 all failed with "
                       r"KeyError: 'c'") as info:
        st.optimize(typo, n_trials=50)
    assert info.value.trials == (0, 1, 2) and info.value.error_type == "KeyError"
    assert "trial['c']" in info.value.traceback or "trial[\"c\"]" in info.value.traceback
    assert [r.state for r in st.records] == [TrialState.FAILED] * 3  # all recorded, no more
    assert st.stop_reason.startswith("fail_fast: trials 0, 1, 2 failed with KeyError")
    st.close()
    again = ecopt.load_study(tmp_path / "s")
    assert len(again.records) == 3


def test_an_invalid_return_counts_and_k_is_configurable():
    st = _study()
    with pytest.raises(ecopt.SystematicFailureError, match="unknown metric name") as info:
        st.optimize(misspelled, n_trials=50, fail_fast=5)
    assert info.value.trials == (0, 1, 2, 3, 4)


@pytest.mark.parametrize("off", [None, 0])
def test_off_runs_every_trial(off):
    st = _study()
    recs = st.optimize(typo, n_trials=6, fail_fast=off)
    assert len(recs) == 6 and all(r.state is TrialState.FAILED for r in recs)


class Pattern:
    """Outcomes by trial number: 'ok', 'a' / 'b' (two errors), 'oom', 'prune'."""

    def __init__(self, plan: str) -> None:
        self.plan = plan

    def __call__(self, trial: ecopt.Trial) -> dict[str, float]:
        what = self.plan[trial.number] if trial.number < len(self.plan) else "o"
        if what == "a":
            raise ValueError("error a")
        if what == "b":
            raise ValueError("error b")
        if what == "i":
            raise ecopt.Infeasible("too large")
        if what == "p":
            trial.report(0, {"f1": 0.5})
            raise ecopt.TrialPruned()
        return {"f1": trial["x"], "f2": trial["y"]}


@pytest.mark.parametrize("plan, stops_at", [
    ("aaoaaoaao", None),      # a success resets the streak (9 trials: below the rate's minimum)
    ("oaabaaboooo", None),    # so does a different error
    ("aapaapooo", None),      # and a pruned trial (the objective ran and reported)
    ("aiaooooooo", (0, 2)),   # the first 2 counted trials failed; infeasible is neutral
    ("abbooo", (0, 1, 2)),    # the first k trials failed, whatever their errors
    ("oaaoaaoaaoaa", (1, 2, 4, 5, 7, 8, 10)),  # over half of 11 failed (rule: rate)
])
def test_what_moves_the_rules(plan, stops_at):
    st = _study()
    if stops_at is None:
        recs = st.optimize(Pattern(plan), n_trials=len(plan))
        assert len(recs) == len(plan)
        return
    with pytest.raises(ecopt.SystematicFailureError) as info:
        st.optimize(Pattern(plan), n_trials=len(plan) + 5, fail_fast=2 if "i" in plan else 3)
    assert info.value.trials == stops_at


class Plan(ecopt.samplers.Sampler):
    """Proposes the given (x, y) points in order (a stand-in for a sampler's choices)."""

    name = "plan"

    def __init__(self, points):
        super().__init__()
        self.points = points

    def propose(self, space, records, pending, n):
        k = len(records) + len(pending)
        return [ecopt.samplers.Proposal({"x": x, "y": y}, self.name, {})
                for x, y in self.points[k:k + n]]


def in_corner(trial: ecopt.Trial) -> dict[str, float]:
    if trial["x"] > 0.8 and trial["y"] > 0.8:
        raise RuntimeError("NaN loss")  # one message: the old rule (3 alike in a row) stopped here
    return {"f1": trial["x"], "f2": trial["y"]}


def everywhere_after_two(trial: ecopt.Trial) -> dict[str, float]:
    if trial.number >= 2:
        raise RuntimeError("disk full")
    return {"f1": trial["x"], "f2": trial["y"]}


def test_the_same_error_around_a_working_configuration_stops_naming_it():
    pts = [(0.5, 0.5), (0.2, 0.8), (0.1, 0.1), (0.9, 0.9), (0.3, 0.7), (0.6, 0.2)]
    st = ecopt.Study(ecopt.SearchSpace(SPACE), OBJS, sampler=Plan(pts), meter="estimate")
    with pytest.raises(ecopt.SystematicFailureError) as info:
        st.optimize(everywhere_after_two, n_trials=6)
    assert info.value.trials == (2, 3, 4) and "around trial 0" in info.value.reason
    text = str(info.value)
    assert "trial 3: x=0.9, y=0.9 -- RuntimeError at test_fail_fast.py:" in text
    assert "not confined to one region" in text
    assert len(st.records) == 5


def test_failures_inside_one_region_never_stop_the_call():
    """The issue's notebook in miniature: the sampler went back to a failing corner
    three times in a row; the failures surround no working configuration."""
    pts = [(0.5, 0.5), (0.2, 0.8), (0.9, 0.95), (0.95, 0.85), (0.85, 0.9), (0.3, 0.3),
           (0.99, 0.99), (0.81, 0.81), (0.1, 0.6), (0.4, 0.9)]
    st = ecopt.Study(ecopt.SearchSpace(SPACE), OBJS, sampler=Plan(pts), meter="estimate")
    recs = st.optimize(in_corner, n_trials=10)
    assert [r.state for r in recs].count(TrialState.FAILED) == 5
    assert st.stop_reason == "n_trials"


def test_a_later_call_that_starts_in_a_failing_region_goes_on():
    """The study has complete trials: the objective runs. A second call whose first three
    trials fall in the failing corner is not judged 'fails wherever it runs'."""
    pts = [(i / 10 + 0.01, (i * 7 % 10) / 10 + 0.01) for i in range(8)] + \
        [(0.9, 0.9), (0.85, 0.95), (0.95, 0.85), (0.3, 0.3)]
    st = ecopt.Study(ecopt.SearchSpace(SPACE), OBJS, sampler=Plan(pts), meter="estimate")
    st.optimize(in_corner, n_trials=8)
    recs = st.optimize(in_corner, n_trials=4)
    assert [r.state for r in recs] == [TrialState.FAILED] * 3 + [TrialState.COMPLETE]
    assert st.stop_reason == "n_trials"


def test_an_objective_pruned_before_it_reports_is_a_failure():
    def pruned_at_once(trial: ecopt.Trial) -> dict[str, float]:
        raise ecopt.TrialPruned()  # a bug: pruned before any report

    st = _study()
    with pytest.raises(ecopt.SystematicFailureError, match="TrialPruned") as info:
        st.optimize(pruned_at_once, n_trials=12)
    assert info.value.trials == (0, 1, 2) and len(st.records) == 3


def test_system_exit_from_the_objective_is_recorded_as_itself():
    import sys

    def exits(trial: ecopt.Trial) -> dict[str, float]:
        sys.exit(2)  # e.g. argparse inside a training script

    st = _study()
    with pytest.raises(SystemExit):
        st.optimize(exits, n_trials=3)
    assert st.records[0].error.message == "stopped by SystemExit"


def test_a_local_batch_stops_inside_the_batch():
    st = _study()
    with pytest.raises(ecopt.SystematicFailureError) as info:
        st.optimize(typo, n_trials=8, batch_size=8, asynchronous=False)
    assert info.value.trials == (0, 1, 2)
    states = [(r.state, r.error.type) for r in st.records]
    # trials 3..7 were proposed with the batch but never run
    assert states == [(TrialState.FAILED, "KeyError")] * 3 + [(TrialState.FAILED, "NotStarted")] * 5
    assert all("fail_fast" in r.error.message for r in st.records[3:])


@pytest.mark.parametrize("bad", [-1, 1.5, True, "3"])
def test_bad_fail_fast_is_refused(bad):
    with pytest.raises(ValueError, match="fail_fast must be None or an integer >= 0"):
        _study().optimize(typo, n_trials=1, fail_fast=bad)


def test_callbacks_see_every_trial_with_and_without_a_budget():
    seen = []
    st = _study()
    st.optimize(Pattern("oao"), n_trials=3, callbacks=[lambda s, r: seen.append(r.number)])
    st.optimize(Pattern(""), n_trials=2, energy_budget_j=1e9,
                callbacks=[lambda s, r: seen.append(r.number)])
    assert seen == [0, 1, 2, 3, 4]


@pytest.mark.slow
def test_worker_processes_stop_too_and_trials_in_flight_are_recorded():
    from executor_objectives import typo as worker_typo

    from ecopt.executors.processes import ProcessExecutor

    st = _study()
    ex = ProcessExecutor(n_workers=2)
    try:
        with pytest.raises(ecopt.SystematicFailureError) as info:
            st.optimize(worker_typo, n_trials=20, executor=ex)
    finally:
        ex.close()
    assert len(info.value.trials) == 3 and info.value.error_type == "KeyError"
    assert len(st.records) < 20 and not st._running  # nothing left running
    assert all(r.state is TrialState.FAILED for r in st.records)
