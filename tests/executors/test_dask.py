"""The Dask executor on a real LocalCluster, and on a scheduler this test starts and kills."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import ecopt
from ecopt.executors import ExecutorLostError, get_executor
import executor_objectives as T
from ecopt.samplers import QLogNEHVISampler
from executor_helpers import SpySampler, kill_when_pid_file, states, study

pytest.importorskip("distributed")


@pytest.fixture(scope="module")
def gpu_cluster() -> Iterator[ecopt.DaskExecutor]:
    """Two workers on 127.0.0.1, each owning one (pretend) GPU: GPU=1 and CUDA_VISIBLE_DEVICES."""
    ex = ecopt.DaskExecutor(gpus=[0, 1], resources={"GPU": 1}, trial_timeout_s=4.0)
    yield ex
    ex.close()


def test_arguments_are_checked() -> None:
    with pytest.raises(ValueError, match="either address= or client="):
        ecopt.DaskExecutor("tcp://127.0.0.1:1", client=object())
    with pytest.raises(ValueError, match="n_workers=3 must equal len\\(gpus\\)=2"):
        ecopt.DaskExecutor(gpus=[0, 1], n_workers=3)
    with pytest.raises(ValueError, match="resources must map names to amounts > 0"):
        ecopt.DaskExecutor(resources={"GPU": 0})
    with pytest.raises(ValueError, match="gpus= places the embedded"):
        ecopt.DaskExecutor("tcp://127.0.0.1:1", gpus=[0])


def test_unreachable_scheduler_says_how_to_start_one() -> None:
    from ecopt.executors.dask import DaskUnavailableError

    with pytest.raises(DaskUnavailableError, match="dask scheduler"):
        ecopt.DaskExecutor(f"tcp://127.0.0.1:{_free_port()}", connect_timeout_s=0.5)


def test_embedded_cluster_is_local_and_places_one_trial_per_gpu(gpu_cluster, run_dir) -> None:
    ex = gpu_cluster
    assert ex.address.startswith("tcp://127.0.0.1:") and ex.slots == 2
    info = ex.client.scheduler_info(n_workers=-1)
    assert all(w["host"] == "127.0.0.1" and w["resources"] == {"GPU": 1}
               for w in info["workers"].values())
    spy = SpySampler()
    st = study(run_dir, sampler=spy)
    recs = st.optimize(T.report_env, n_trials=6, executor=ex)
    assert states(recs) == {i: "complete" for i in range(6)}
    # Each trial saw exactly its worker's GPU, and the record says which.
    assert {r.device for r in recs} == {"0", "1"}
    assert all(r.user_attrs["cuda_visible_devices"] == r.device for r in recs)
    by_worker = {}
    for r in recs:
        by_worker.setdefault(r.worker, set()).add(r.device)
    assert len(by_worker) == 2 and all(len(d) == 1 for d in by_worker.values())
    assert all(r.host == socket.gethostname() and "tcp://127.0.0.1:" in r.worker for r in recs)
    # Asynchronous: both slots filled one proposal at a time, then new proposals were
    # made while the other trial still ran (told to the sampler as pending).
    assert [len(c["pending"]) for c in spy.calls[:2]] == [0, 1]
    assert all(c["n"] == 1 for c in spy.calls)
    assert any(len(c["pending"]) == 1 and c["n_records"] > 0 for c in spy.calls[2:])
    assert len((run_dir / "trials.jsonl").read_text().splitlines()) == 6


def test_unpicklable_objective_fails_before_any_trial(gpu_cluster) -> None:
    class Holder:
        def __init__(self) -> None:
            self.lock = threading.Lock()

        def __call__(self, trial):  # type: ignore[no-untyped-def]
            return T.quick(trial)

    st = study()
    with pytest.raises(ValueError, match="Holder cannot be pickled.*module-level function"):
        st.optimize(Holder(), n_trials=2, executor=gpu_cluster)
    assert st.records == [] and st.running == []
    # A lambda is fine on Dask (cloudpickle sends it by value).
    recs = st.optimize(lambda t: T.zdt1(t["x"], t["y"]), n_trials=1, executor=gpu_cluster)
    assert recs[0].state is ecopt.TrialState.COMPLETE


@pytest.mark.slow
def test_killed_worker_fails_its_trial_and_the_study_finishes(gpu_cluster, run_dir,
                                                              tmp_path) -> None:
    pids = tmp_path / "pids"
    pids.mkdir()
    st = study(run_dir)
    killer = kill_when_pid_file(pids, number=1)
    recs = st.optimize(T.PidThenSleep(pids, victim=1, duration_s=0.2, victim_s=60),
                       n_trials=5, executor=gpu_cluster)
    killer.join(5)
    assert states(recs) == {0: "complete", 1: "failed", 2: "complete", 3: "complete",
                            4: "complete"}
    lost = next(r for r in recs if r.number == 1)
    assert lost.error.type == "WorkerLost" and lost.interrupted
    assert "tcp://127.0.0.1:" in lost.error.message
    assert len(ecopt.load_study(run_dir).records) == 5


@pytest.mark.slow
def test_hung_trial_times_out_and_frees_its_worker(gpu_cluster) -> None:
    st = study()
    recs = st.optimize(T.Sleepy(0.1, hang_numbers=(0,), hang_s=600), n_trials=4,
                       executor=gpu_cluster)
    assert states(recs) == {0: "failed", 1: "complete", 2: "complete", 3: "complete"}
    hung = recs[[r.number for r in recs].index(0)]
    assert hung.error.type == "TrialTimeout" and "trial_timeout_s=4" in hung.error.message
    # The hung worker was replaced: both GPU workers serve trials again.
    gpu_cluster.client.wait_for_workers(2, timeout=30)
    more = st.optimize(T.report_env, n_trials=4, executor=gpu_cluster)
    assert states(more) == {i: "complete" for i in range(4, 8)}
    assert {r.device for r in more} == {"0", "1"}


@pytest.mark.slow
def test_qlognehvi_batches_of_two_on_dask(gpu_cluster) -> None:
    sampler = QLogNEHVISampler(n_init=4, num_restarts=2, raw_samples=32, mc_samples=32)
    st = study(sampler=sampler)
    recs = st.optimize(T.quick, n_trials=6, batch_size=2, executor=gpu_cluster)
    assert states(recs) == {i: "complete" for i in range(6)}
    assert {r.proposed_by for r in recs} >= {"qlognehvi"}
    assert st.hypervolume() > 0


def test_dask_by_name_starts_and_closes_its_own_cluster() -> None:
    ex = get_executor("dask", n_workers=1)
    try:
        assert ex.slots == 1 and ex.address.startswith("tcp://127.0.0.1:")
        # Nothing listens beyond loopback: the scheduler's HTTP endpoints included.
        http = ex.client.run_on_scheduler(
            lambda dask_scheduler: [s.getsockname()[0] for s in
                                    dask_scheduler.http_server._sockets.values()])
        assert http and all(h == "127.0.0.1" for h in http)
    finally:
        ex.close()
    assert ex.client.status == "closed"


# -- a scheduler started and killed by the test --------------------------------------------

def _free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return int(port)


def _start_cluster(port: int, log_dir: Path) -> list[subprocess.Popen]:
    addr = f"tcp://127.0.0.1:{port}"
    env = {**os.environ, "DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES": "0",
           # the objectives (tests/executor_objectives.py) must import on the workers
           "PYTHONPATH": os.pathsep.join([str(Path(__file__).resolve().parent.parent),
                                          os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
    logs = [open(log_dir / f"{n}-{port}-{time.monotonic_ns()}.log", "w")
            for n in ("scheduler", "worker")]
    sched = subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_scheduler",
                              "--host", "127.0.0.1", "--port", str(port), "--no-dashboard"],
                             env=env, stdout=logs[0], stderr=subprocess.STDOUT,
                             start_new_session=True)
    worker = subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_worker", addr,
                               "--nthreads", "1", "--nworkers", "2", "--no-dashboard",
                               "--host", "127.0.0.1"],
                              env=env, stdout=logs[1], stderr=subprocess.STDOUT,
                              start_new_session=True)
    return [sched, worker]


def _stop(procs: list[subprocess.Popen]) -> None:
    for p in procs:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        p.wait(timeout=10)


@pytest.mark.slow
def test_scheduler_going_away_stops_cleanly_and_the_study_resumes(run_dir, tmp_path) -> None:
    port = _free_port()
    addr = f"tcp://127.0.0.1:{port}"
    procs = _start_cluster(port, tmp_path)
    try:
        st = study(run_dir)
        ex = ecopt.DaskExecutor(addr, connect_timeout_s=5)
        ex.client.wait_for_workers(2, timeout=60)
        assert ex.slots == 2 and not ex.embedded

        def kill_scheduler() -> None:
            while len(st.records) < 2:
                time.sleep(0.02)
            os.killpg(procs[0].pid, signal.SIGKILL)

        killer = threading.Thread(target=kill_scheduler, daemon=True)
        killer.start()
        with pytest.raises(ExecutorLostError, match="went away.*recorded as failed.*resume"):
            st.optimize(T.Sleepy(0.5), n_trials=20, executor=ex)
        ex.close()
        killer.join(5)
        first = st.records
        n_done = sum(r.state is ecopt.TrialState.COMPLETE for r in first)
        assert n_done >= 2 and len(first) < 20
        assert st.running == []
        interrupted = [r for r in first if r.interrupted]
        assert interrupted and all("went away" in r.error.message for r in interrupted)
        st.close()
    finally:
        _stop(procs)

    # Everything that happened is on disk; a fresh scheduler resumes the study.
    procs = _start_cluster(port, tmp_path)
    try:
        st2 = study(run_dir)
        assert len(st2.records) == len(first)
        with ecopt.DaskExecutor(addr, connect_timeout_s=30) as ex2:
            ex2.client.wait_for_workers(1, timeout=60)
            more = st2.optimize(T.Sleepy(0.1), n_trials=3, executor=ex2)
        assert [r.number for r in sorted(more, key=lambda r: r.number)] == \
            list(range(len(first), len(first) + 3))
        assert all(r.state is ecopt.TrialState.COMPLETE for r in more)
        assert len(ecopt.load_study(run_dir).records) == len(first) + 3
        st2.close()
    finally:
        _stop(procs)


def test_tls_cluster_and_a_users_own_client() -> None:
    pytest.importorskip("cryptography")
    import distributed

    st = study()
    with ecopt.DaskExecutor(n_workers=1, security=True, worker_meter="wallclock") as ex:
        assert ex.address.startswith("tls://127.0.0.1:")
        recs = st.optimize(T.Sleepy(0.05), n_trials=2, executor=ex)
        # Measured by a meter built on the worker, not the study's (estimate) meter.
        assert st.meter.name != "wallclock"
        assert all(r.phases["work"].measurement.meter == "wallclock" for r in recs)
        assert all(r.worker.endswith(")") and "tls://127.0.0.1:" in r.worker for r in recs)
        # A Client the user made (with its Security) is used as is, and left open.
        client = distributed.Client(ex.address, security=ex.client.security,
                                    set_as_default=False)
        try:
            with ecopt.DaskExecutor(client=client) as ex2:
                assert ex2.client is client and not ex2.embedded
                more = st.optimize(T.quick, n_trials=2, executor=ex2)
            assert client.status == "running"
        finally:
            client.close()
        # Plain TCP is refused by a TLS scheduler.
        from ecopt.executors.dask import DaskUnavailableError

        with pytest.raises(DaskUnavailableError):
            ecopt.DaskExecutor(ex.address.replace("tls://", "tcp://"), connect_timeout_s=1)
    assert [r.state for r in recs + more] == [ecopt.TrialState.COMPLETE] * 4


@pytest.mark.slow
@pytest.mark.timeout(1500)  # 30 mixed-space proposals: over 600 s at load 20
def test_a_failing_region_is_tried_at_most_twice_with_batches_on_dask(gpu_cluster) -> None:
    """Issue 36 on the Dask executor, two trials at a time: failed configurations reach
    every later proposal (as pending points) also while other trials run."""
    st = T.corner_study()
    recs = st.optimize(T.failing_corner, n_trials=30, batch_size=2, executor=gpu_cluster)
    assert len(recs) == 30 and st.stop_reason == "n_trials"
    assert sum(T.in_failing_corner(r.params) for r in recs) <= 2
