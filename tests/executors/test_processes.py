"""The local process pool, for real: spawned workers, killed workers, hung trials."""

from __future__ import annotations

import json
import threading

import pytest

import ecopt
from ecopt.executors import ProcessExecutor, get_executor
import executor_objectives as T
from executor_helpers import SpySampler, kill_when_pid_file, pid_alive, states, study


def test_get_executor_names() -> None:
    assert ecopt.executors.EXECUTOR_NAMES == ("local", "processes", "dask", "spark", "ray")
    ex = get_executor("processes", n_workers=3, trial_timeout_s=5)
    assert isinstance(ex, ProcessExecutor) and ex.slots == 3 and ex.trial_timeout_s == 5
    ex.close()
    with pytest.raises(ValueError, match="unknown executor 'threads'"):
        get_executor("threads")


@pytest.mark.parametrize("kw, rule", [
    ({"n_workers": 0}, "n_workers >= 1"),
    ({"trial_timeout_s": 0}, "trial_timeout_s > 0"),
    ({"start_method": "fork"}, "'spawn' or 'forkserver'"),
    ({"gpus": [0, 0]}, "distinct GPU ids"),
    ({"gpus": [0, 1], "n_workers": 3}, "n_workers=3 must equal len\\(gpus\\)=2"),
])
def test_bad_arguments(kw: dict, rule: str) -> None:
    with pytest.raises(ValueError, match=rule):
        ProcessExecutor(**kw)


def test_unpicklable_objective_fails_before_any_trial(run_dir) -> None:
    st = study(run_dir)
    with pytest.raises(ValueError, match="cannot be pickled.*module-level function") as e:
        st.optimize(lambda t: T.zdt1(t["x"], t["y"]), n_trials=2, executor="processes")
    assert "<lambda>" in str(e.value)
    assert st.records == [] and st.running == []
    started = [line for line in (run_dir / "running.jsonl").read_text().splitlines()
               if '"number"' in line]
    assert started == []  # only the copy of study.json is there


@pytest.mark.slow
def test_async_pool_runs_trials_in_two_processes_and_sees_pending(run_dir, tmp_path) -> None:
    spy = SpySampler()
    st = study(run_dir, sampler=spy)
    # Trial 1 runs 2.5 s while trials 0, 2, 3, 4 (0.2 s each) come and go on the other
    # worker; 2, 3 and 4 wait for trial 1 to start.
    obj = T.Leader(tmp_path, leader=1, leader_s=2.5, others_s=0.2)
    with ProcessExecutor(n_workers=2) as ex:
        recs = st.optimize(obj, n_trials=5, executor=ex)
    assert states(recs) == {i: "complete" for i in range(5)}
    assert len({r.worker for r in recs}) == 2 and all(r.worker.startswith("pid:") for r in recs)
    # One proposal per freed slot, each told about the trial still running.
    assert [c["n"] for c in spy.calls] == [1] * 5
    p1 = next(r.params for r in recs if r.number == 1)
    later = [c for c in spy.calls if c["n_records"] > 0]
    assert later and all(c["pending"] == [p1] for c in later)
    # Trial 1 overlapped every other trial on this host; the driver wrote the whole log.
    assert {2, 3, 4} <= set(ecopt.executors.overlapping_trials(recs)[1])
    lines = (run_dir / "trials.jsonl").read_text().splitlines()
    assert sorted(json.loads(x)["number"] for x in lines) == [0, 1, 2, 3, 4]


def test_synchronous_batches_on_one_worker_per_gpu() -> None:
    spy = SpySampler()
    st = study(sampler=spy)
    with ProcessExecutor(gpus=[3, 5], worker_meter="wallclock") as ex:
        assert ex.slots == 2
        recs = st.optimize(T.report_env, n_trials=4, batch_size=2, executor=ex,
                           asynchronous=False)
    assert len(recs) == 4
    # q=2 proposals together, the next pair only once both finished.
    assert [(c["n"], len(c["pending"]), c["n_records"]) for c in spy.calls] == [(2, 0, 0), (2, 0, 2)]
    # Each worker process saw only its own GPU, and the record says which.
    assert {r.device for r in recs} == {"3", "5"}
    assert all(r.user_attrs["cuda_visible_devices"] == r.device for r in recs)
    # Measured by the meter built in the workers, not the study's estimate meter.
    assert st.meter.name != "wallclock"
    assert all(list(r.phases) == ["work"] and r.phases["work"].measurement.meter == "wallclock"
               for r in recs)
    pid_gpu = {(r.user_attrs["pid"], r.device) for r in recs}
    assert len(pid_gpu) == 2 and len({p for p, _ in pid_gpu}) == 2


@pytest.mark.slow
def test_killed_worker_fails_its_trial_and_the_study_finishes(run_dir, tmp_path) -> None:
    pids = tmp_path / "pids"
    pids.mkdir()
    st = study(run_dir)
    killer = kill_when_pid_file(pids, number=1)
    with ProcessExecutor(n_workers=2) as ex:
        recs = st.optimize(T.PidThenSleep(pids, victim=1, duration_s=0.2, victim_s=60),
                           n_trials=5, executor=ex)
    killer.join(5)
    assert states(recs) == {0: "complete", 1: "failed", 2: "complete", 3: "complete",
                            4: "complete"}
    lost = next(r for r in recs if r.number == 1)
    assert lost.error is not None and lost.error.type == "WorkerLost"
    assert "SIGKILL" in lost.error.message and lost.interrupted
    assert lost.worker == f"pid:{(pids / '1.pid').read_text()}"
    # The log on disk says the same (the driver wrote it).
    reopened = ecopt.load_study(run_dir)
    assert [r.interrupted for r in sorted(reopened.records, key=lambda r: r.number)] == \
        [False, True, False, False, False]


def test_own_crash_is_worker_lost_too() -> None:
    st = study()
    with ProcessExecutor(n_workers=1) as ex:
        recs = st.optimize(T.Suicide(victim=0), n_trials=2, executor=ex)
    assert states(recs) == {0: "failed", 1: "complete"}
    assert recs[0].error.type == "WorkerLost" and recs[0].interrupted


@pytest.mark.slow
def test_hung_trial_times_out_and_its_process_is_killed() -> None:
    st = study()
    with ProcessExecutor(n_workers=2, trial_timeout_s=2.0) as ex:
        recs = st.optimize(T.Sleepy(0.1, hang_numbers=(0,), hang_s=600), n_trials=4,
                           executor=ex)
    assert states(recs) == {0: "failed", 1: "complete", 2: "complete", 3: "complete"}
    hung = next(r for r in recs if r.number == 0)
    assert hung.error.type == "TrialTimeout" and "trial_timeout_s=2" in hung.error.message
    assert not hung.interrupted
    assert not pid_alive(int(hung.worker.removeprefix("pid:")))


# Ctrl-C with this executor: tests/faults/test_interrupts.py.


def test_importing_executors_does_not_import_dask() -> None:
    import subprocess
    import sys

    code = ("import sys, ecopt, ecopt.executors; "
            "print(sorted(m for m in ('dask', 'distributed', 'torch') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=120)
    assert out.stdout.strip() == "[]"
