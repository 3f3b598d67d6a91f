"""Intermediate reports, should_stop() and pruned trials, end to end with real parts."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
import warnings
from pathlib import Path

import pytest

import ecopt
import executor_objectives as T
from ecopt.pruners import Decision, Pruner
from ecopt.trial import TrialState

SPACE = {"x": ecopt.Float(0, 1), "y": ecopt.Float(0, 1)}
OBJS = [ecopt.Objective("f1", "min"), ecopt.Objective("f2", "min")]


def _study(path: Path | None = None, **kw) -> ecopt.Study:
    return ecopt.Study(ecopt.SearchSpace(SPACE), OBJS, storage=path, sampler="random",
                       meter="estimate", **kw)


def _spin(seconds: float) -> None:
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


def test_report_inside_an_open_phase_records_the_energy_spent_so_far(tmp_path):
    st = _study(tmp_path / "s")
    t = st.ask()
    with t.phase("train", samples=100):
        _spin(0.05)
        t.report(1, {"f1": 0.5})
        _spin(0.05)
        t.report(2, {"f1": 0.4, "loss": 1.25})
    rec = st.tell(t, {"f1": 0.3, "f2": 0.2})
    curve = rec.intermediate
    assert [p.step for p in curve] == [1, 2]
    assert 0 < curve[0].energy_j < curve[1].energy_j <= rec.energy_j
    assert curve[1].values == {"f1": 0.4, "loss": 1.25}
    assert curve[0].measured is False  # the estimate meter: never shown as measured
    # The phase went on under one name: two windows closed by reports, one at the end.
    ph = rec.phases["train"]
    assert ph.count == 3 and ph.samples == 100
    # What is on disk reads back the same.
    back = ecopt.load_study(tmp_path / "s").records[0]
    assert back.intermediate == rec.intermediate
    st.close()


@pytest.mark.parametrize("step, values, match", [
    (-1, {"f1": 1.0}, "integer >= 0"),
    (1.5, {"f1": 1.0}, "integer >= 0"),
    (True, {"f1": 1.0}, "integer >= 0"),
    (1, {}, "non-empty dict"),
    (1, {"f1": float("nan")}, "finite number"),
    (1, {"f1": "high"}, "finite number"),
])
def test_bad_reports_name_the_rule(step, values, match):
    t = _study().ask()
    with pytest.raises(ValueError, match=match):
        t.report(step, values)


def test_steps_must_increase():
    t = _study().ask()
    t.report(3, {"f1": 1.0})
    with pytest.raises(ValueError, match="step=3 was reported after step=3"):
        t.report(3, {"f1": 1.0})


def test_without_a_pruner_should_stop_is_false():
    t = _study().ask()
    assert t.should_stop() is False  # nothing reported yet
    t.report(0, {"f1": 1.0})
    assert t.should_stop() is False


def test_pruned_trials_keep_last_values_and_energy_and_stay_off_the_front(tmp_path):
    st = _study(tmp_path / "s", pruner=T.OddTrialsPruner(at_step=2))
    recs = st.optimize(T.Curve(steps=4), n_trials=6, show_progress=False)
    by_state = {r.number: r.state for r in recs}
    assert by_state == {i: TrialState.PRUNED if i % 2 else TrialState.COMPLETE for i in range(6)}
    for r in recs:
        if r.state is TrialState.PRUNED:
            assert [p.step for p in r.intermediate] == [1, 2]
            assert r.values == r.intermediate[-1].values  # both objectives were reported
            assert r.energy_j > 0 and r.phases["train"].count == 2
            assert r.error.type == "TrialPruned" and "odd trial at step 2" in r.error.message
        else:
            assert len(r.intermediate) == 4
    assert all(r.state is TrialState.COMPLETE for r in st.best_trials())
    # The pruner is in study.json; reports count pruned trials and never crash on them.
    spec = json.loads((tmp_path / "s" / "study.json").read_text())
    assert spec["pruner"]["name"] == "odd-trials" and spec["pruner"]["at_step"] == 2
    from ecopt.report import build_report, show_text

    data = build_report(tmp_path / "s")
    assert data.counts["pruned"] == 3 and "3 pruned" in show_text(data)
    df = st.trials_dataframe()
    assert sorted(df["state"].unique()) == ["complete", "pruned"]
    st.close()


def test_pruned_trials_come_back_from_worker_processes(tmp_path):
    st = _study(tmp_path / "s", pruner=T.OddTrialsPruner(at_step=1))
    with ecopt.executors.ProcessExecutor(n_workers=2) as ex:
        recs = st.optimize(T.Curve(steps=3, epoch_s=0.001), n_trials=4, executor=ex,
                           show_progress=False)
    states = {r.number: r.state.value for r in recs}
    assert states == {0: "complete", 1: "pruned", 2: "complete", 3: "pruned"}
    assert all(r.intermediate for r in recs)
    st.close()


class _Broken(Pruner):
    name = "broken"

    def decide(self, trial, history):  # type: ignore[no-untyped-def]
        raise ZeroDivisionError("bug in the pruner")


def test_a_failing_pruner_never_stops_a_trial():
    st = _study(pruner=_Broken())
    t = st.ask()
    t.report(1, {"f1": 1.0})
    with pytest.warns(RuntimeWarning, match="pruner _Broken failed on trial 0"):
        assert t.should_stop() is False


def test_tell_with_a_state_string_and_bad_states(tmp_path):
    st = _study(tmp_path / "s")
    t = st.ask()
    assert st.tell(t, None, state="failed").state is TrialState.FAILED
    t = st.ask()
    t.report(1, {"f1": 0.5, "f2": 0.5})
    rec = st.tell(t, state="pruned")
    assert rec.state is TrialState.PRUNED and rec.values == {"f1": 0.5, "f2": 0.5}
    t = st.ask()
    for bad in ("complete", "running", "done"):
        with pytest.raises(ValueError, match="state must be one of"):
            st.tell(t, {"f1": 1, "f2": 1}, state=bad)
    assert st.tell(t, {"f1": 1, "f2": 1}).state is TrialState.COMPLETE
    st.close()


def test_kill_during_a_reporting_trial_keeps_its_curve_and_energy(tmp_path):
    # A real process reports twice, then is killed with SIGKILL mid-trial.
    d = tmp_path / "s"
    code = textwrap.dedent(f"""
        import os, signal, time, ecopt
        st = ecopt.Study(ecopt.SearchSpace({{"x": ecopt.Float(0, 1), "y": ecopt.Float(0, 1)}}),
                         [ecopt.Objective("f1", "min"), ecopt.Objective("f2", "min")],
                         storage={str(d)!r}, sampler="random", meter="estimate")
        def objective(trial):
            with trial.phase("train"):
                for step in (1, 2):
                    end = time.thread_time() + 0.05
                    while time.thread_time() < end:
                        pass
                    trial.report(step, {{"f1": 1.0 / step, "f2": 0.5}})
                os.kill(os.getpid(), signal.SIGKILL)
        st.optimize(objective, n_trials=1, show_progress=False)
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == -9, proc.stderr
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        st = _study(d)
    rec = st.records[0]
    assert rec.state is TrialState.FAILED and rec.interrupted
    assert [p.step for p in rec.intermediate] == [1, 2]
    assert rec.intermediate[-1].values == {"f1": 0.5, "f2": 0.5}
    assert rec.energy_j == pytest.approx(rec.intermediate[-1].energy_j) and rec.energy_j > 0
    assert "2 intermediate report(s)" in rec.error.message
    st.close()


def test_records_without_reports_keep_their_old_shape(tmp_path):
    st = _study(tmp_path / "s")
    st.optimize(T.quick, n_trials=1, show_progress=False)
    line = json.loads((tmp_path / "s" / "trials.jsonl").read_text().splitlines()[0])
    assert "intermediate" not in line
    st.close()


class _Always(Pruner):
    name = "always"

    def decide(self, trial, history):  # type: ignore[no-untyped-def]
        return Decision(True, "always")


def test_pruner_by_name_and_bad_pruner():
    with pytest.raises(ValueError, match=r"unknown pruner 'nope'; expected one of \[.*'hyperband'"
                                         r".*entry point in group 'ecopt.pruners'"):
        _study(pruner="nope")
    with pytest.raises(ValueError, match="pruner must be a name in .* or a Pruner instance"):
        _study(pruner=object())
    assert _study(pruner="none").pruner.name == "none"
    st = _study(pruner=_Always())
    rec = st.optimize(T.Curve(steps=3, epoch_s=0.0), n_trials=1, show_progress=False)[0]
    assert rec.state is TrialState.PRUNED and len(rec.intermediate) == 1


def test_an_objective_that_opens_no_phase_is_metered_as_one_phase(tmp_path):
    st = _study(tmp_path / "s")

    def objective(trial):
        _spin(0.02)
        return {"f1": 1.0, "f2": 2.0}

    rec = st.optimize(objective, n_trials=1, show_progress=False)[0]
    assert list(rec.phases) == ["trial"] and rec.energy_j > 0 and not rec.measured
    assert rec.phases["trial"].measurement.components["cpu"].source == "estimate-cpu-time"
    # With a phase of its own, no "trial" phase is added (it would count twice).
    rec = st.optimize(T.Curve(steps=1), n_trials=1, show_progress=False)[0]
    assert list(rec.phases) == ["train"]
    st.close()


class _BadMeter(ecopt.meters.Meter):
    name = "bad"

    def __init__(self, value: float) -> None:
        super().__init__()
        self.value = value

    def _start(self):  # type: ignore[no-untyped-def]
        return None

    def _stop(self, state, duration_s):  # type: ignore[no-untyped-def]
        return {"cpu": ecopt.meters.ComponentEnergy(self.value, "test", True)}


@pytest.mark.parametrize("value", [-10.0, float("nan"), float("inf")])
def test_negative_or_nan_energy_fails_the_trial_with_a_clear_error(value):
    st = ecopt.Study(ecopt.SearchSpace(SPACE), OBJS, sampler="random", meter=_BadMeter(value))

    def objective(trial):
        with trial.phase("train"):
            pass
        return {"f1": 1.0, "f2": 2.0}

    rec = st.optimize(objective, n_trials=1, show_progress=False)[0]
    assert rec.state is TrialState.FAILED and rec.error.type == "MeterError"
    assert "energy must be a finite number >= 0" in rec.error.message
    assert "'bad'" in rec.error.message


def test_samples_per_joule_of_a_too_short_phase_warns():
    t = _study().ask()
    with t.phase("inference", samples=1000):
        pass
    with pytest.warns(RuntimeWarning, match="is mostly meter noise"):
        t.samples_per_joule("inference")
