"""The Spark executor on a real ``local-cluster`` (a standalone master, worker and executor JVMs)."""

from __future__ import annotations

import os
import socket
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import ecopt
import executor_objectives as T
from ecopt.executors import ExecutorLostError, get_executor
from executor_helpers import SpySampler, no_ecopt_python, states, study

pytest.importorskip("pyspark")

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")


@pytest.fixture(scope="module")
def spark() -> Iterator[ecopt.executors.SparkExecutor]:
    """Two executor JVMs with one task slot each, on 127.0.0.1 (one per test module: Spark
    allows one SparkContext per process)."""
    ex = ecopt.executors.SparkExecutor(n_executors=2, trial_timeout_s=20.0)
    yield ex
    ex.close()


def test_arguments_are_checked() -> None:
    from ecopt.executors.spark import SparkExecutor

    with pytest.raises(ValueError, match="either master= or context="):
        SparkExecutor("local[2]", context=object())
    with pytest.raises(ValueError, match="n_executors >= 1 must hold, got n_executors=0"):
        SparkExecutor(n_executors=0)
    with pytest.raises(ValueError, match="n_executors= sizes the embedded"):
        SparkExecutor("spark://127.0.0.1:7077", n_executors=2)
    with pytest.raises(ValueError, match="trial_timeout_s > 0 must hold"):
        SparkExecutor(trial_timeout_s=0)
    assert "spark" in ecopt.executors.EXECUTOR_NAMES


def _parent(pid: int) -> int:
    """The parent pid of ``pid`` (from /proc)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat.rsplit(")", 1)[1].split()[1])


def test_trials_are_spark_tasks_metered_on_the_executor(spark, run_dir) -> None:
    ex = spark
    assert ex.embedded and ex.master == "local-cluster[2,1,1024]" and ex.slots == 2
    assert ex.context.getConf().get("spark.driver.bindAddress") == "127.0.0.1"
    assert ex.python == sys.executable and ex.context.pythonExec == sys.executable
    spy = SpySampler()
    st = study(run_dir, sampler=spy)
    recs = st.optimize(T.Sleepy(0.3), n_trials=6, executor=ex)
    assert states(recs) == {i: "complete" for i in range(6)}
    # Each trial ran in an executor's Python worker (not the driver), on this host.
    assert all(r.host == socket.gethostname() and r.worker.startswith("executor ") for r in recs)
    pids = {int(r.worker.split("pid:")[1].rstrip(")")) for r in recs}
    assert os.getpid() not in pids
    # The work phase was metered inside the task (the estimate meter of the executor's process).
    for r in recs:
        work = r.phases["work"]
        assert work.duration_s >= 0.3 and work.energy_j >= 0
    # Asynchronous: a new proposal while the other trial still ran (told as pending).
    assert [len(c["pending"]) for c in spy.calls[:2]] == [0, 1]
    assert any(len(c["pending"]) == 1 and c["n_records"] > 0 for c in spy.calls[2:])
    # The driver alone wrote the log, one line per trial.
    assert len((run_dir / "trials.jsonl").read_text().splitlines()) == 6


def test_unpicklable_objective_fails_before_any_trial(spark) -> None:
    class Holder:
        def __init__(self) -> None:
            self.lock = threading.Lock()

        def __call__(self, trial):  # type: ignore[no-untyped-def]
            return T.quick(trial)

    st = study()
    with pytest.raises(ValueError, match="Holder cannot be pickled.*Spark executors"):
        st.optimize(Holder(), n_trials=2, executor=spark)
    assert st.records == [] and st.running == []
    # A lambda is fine (cloudpickle sends it by value).
    recs = st.optimize(lambda t: T.zdt1(t["x"], t["y"]), n_trials=1, executor=spark)
    assert recs[0].state is ecopt.TrialState.COMPLETE


def test_workers_without_ecopt_stop_the_study_at_once_naming_the_fix(spark, run_dir, tmp_path,
                                                                     monkeypatch) -> None:
    """A cluster whose workers' Python lacks ecopt (as PYSPARK_PYTHON may name on a remote
    cluster): one clear error at the first trial, not fail_fast after opaque Py4JJavaErrors."""
    python = str(no_ecopt_python(tmp_path / "python-without-ecopt"))
    monkeypatch.setattr(spark.context, "pythonExec", python)
    monkeypatch.setattr(spark, "python", python)
    monkeypatch.setattr(spark, "python_source", "PYSPARK_PYTHON")
    st = study(run_dir)
    with pytest.raises(ExecutorLostError) as err:
        st.optimize(T.quick, n_trials=6, batch_size=2, executor=spark)
    msg = str(err.value)
    assert f"cannot import ecopt: their Python workers run {python!r} (from PYSPARK_PYTHON)" \
        in msg and "pip install ecopt[spark]" in msg and "spark.pyspark.python" in msg, msg
    # No trial is recorded with Spark's opaque error; the ones a worker got to are
    # recorded interrupted (re-proposable). (On a loaded machine a worker may not start
    # within the fixture's 20 s: such trials are TrialTimeout, before the stop.)
    recs = st.records
    assert all(r.error.type in ("Interrupted", "TrialTimeout") for r in recs), recs
    assert 1 <= sum(r.error.type == "Interrupted" for r in recs) <= 2
    monkeypatch.undo()
    # The executor still serves a study once the workers' Python is right.
    assert study().optimize(T.quick, n_trials=2, executor=spark)[0].state is \
        ecopt.TrialState.COMPLETE


@pytest.mark.slow
def test_killed_executor_jvm_fails_its_trial_and_the_study_finishes(spark, run_dir,
                                                                    tmp_path) -> None:
    pids = tmp_path / "pids"
    pids.mkdir()

    def kill_executor_jvm() -> None:
        path = pids / "1.pid"
        end = time.monotonic() + 120
        while not path.exists() and time.monotonic() < end:
            time.sleep(0.05)
        time.sleep(0.3)
        worker = int(path.read_text())
        jvm = _parent(_parent(worker))  # Python worker <- pyspark daemon <- executor JVM
        assert "java" in Path(f"/proc/{jvm}/cmdline").read_text()
        os.kill(jvm, 9)

    killer = threading.Thread(target=kill_executor_jvm, daemon=True)
    killer.start()
    st = study(run_dir)
    recs = st.optimize(T.PidThenSleep(pids, victim=1, duration_s=0.2, victim_s=120),
                       n_trials=5, executor=spark)
    killer.join(5)
    assert states(recs) == {0: "complete", 1: "failed", 2: "complete", 3: "complete",
                            4: "complete"}
    lost = next(r for r in recs if r.number == 1)
    assert lost.error.type == "WorkerLost" and lost.interrupted
    assert "died" in lost.error.message and "executor" in lost.error.message
    assert len(ecopt.load_study(run_dir).records) == 5


@pytest.mark.slow
def test_hung_trial_times_out_and_frees_its_slot(spark) -> None:
    st = study()
    recs = st.optimize(T.Sleepy(0.1, hang_numbers=(0,), hang_s=600), n_trials=4,
                       executor=spark)
    assert states(recs) == {0: "failed", 1: "complete", 2: "complete", 3: "complete"}
    hung = recs[[r.number for r in recs].index(0)]
    assert hung.error.type == "TrialTimeout" and "trial_timeout_s=20" in hung.error.message
    # Its task was killed, so its slot came back: two trials run at once again.
    tracker = spark.context.statusTracker()
    end = time.monotonic() + 60
    while tracker.getActiveStageIds() and time.monotonic() < end:
        time.sleep(0.2)
    assert tracker.getActiveStageIds() == [] and spark.slots == 2
    more = st.optimize(T.Sleepy(0.5), n_trials=2, executor=spark)
    assert states(more) == {4: "complete", 5: "complete"}


@pytest.mark.slow
def test_context_going_away_stops_cleanly_and_the_study_resumes_by_name(spark, run_dir) -> None:
    """Last in this module: it stops the shared context."""
    st = study(run_dir)

    def stop_context() -> None:
        while len(st.records) < 2:
            time.sleep(0.02)
        spark.context.stop()  # as when the master removes the application

    stopper = threading.Thread(target=stop_context, daemon=True)
    stopper.start()
    with pytest.raises(ExecutorLostError, match="went away.*recorded as failed.*resume"):
        st.optimize(T.Sleepy(1.0), n_trials=20, executor=spark)
    stopper.join(5)
    spark.close()
    first = st.records
    assert sum(r.state is ecopt.TrialState.COMPLETE for r in first) >= 2 and len(first) < 20
    assert st.running == []
    interrupted = [r for r in first if r.interrupted]
    assert interrupted and all("went away" in r.error.message for r in interrupted)
    st.close()

    # The log is intact; one changed line resumes it on a fresh embedded Spark.
    st2 = study(run_dir)
    assert len(st2.records) == len(first)
    more = st2.optimize(T.quick, n_trials=2, executor="spark")
    assert sorted(r.number for r in more) == [len(first), len(first) + 1]
    assert all(r.state is ecopt.TrialState.COMPLETE and r.worker.startswith("executor ")
               for r in more)
    assert len(ecopt.load_study(run_dir).records) == len(first) + 2
    st2.close()
    from pyspark import SparkContext

    assert SparkContext._active_spark_context is None  # "spark" by name stopped its own
    assert get_executor is not None
