"""The Ray executor on a real local Ray (2 CPUs, one Ray session for this module)."""

from __future__ import annotations

import importlib.util
import os
import sys
import textwrap
from collections.abc import Iterator

import pytest

import ecopt
import executor_objectives as T
from ecopt.executors import ExecutorLostError
from executor_helpers import SpySampler, kill_when_pid_file, no_ecopt_python, states, study

if importlib.util.find_spec("ray") is None:
    pytest.skip("ray is not installed (pip install 'ecopt[ray]')", allow_module_level=True)

pytestmark = pytest.mark.slow  # a Ray session takes seconds to start


@pytest.fixture(scope="module")
def ray_session(tmp_path_factory) -> Iterator[None]:
    from ecopt.executors.ray import import_ray, init_ray, shutdown_ray

    # Ray puts the driver's working directory on its workers' path: started from a
    # folder without ecopt in it, the workers find ecopt only as the driver does.
    here = os.getcwd()
    os.chdir(tmp_path_factory.mktemp("ray-cwd"))
    try:
        assert init_ray(num_cpus=2)  # started here: ours to stop
    finally:
        os.chdir(here)
    yield
    if import_ray().is_initialized():
        shutdown_ray()


def test_arguments_are_checked() -> None:
    from ecopt.executors.ray import RayExecutor

    with pytest.raises(ValueError, match="num_cpus >= 0 and num_gpus >= 0, not both 0"):
        RayExecutor(num_cpus=0)
    with pytest.raises(ValueError, match="local_cpus= and local_gpus= size a local Ray"):
        RayExecutor("auto", local_cpus=2)
    with pytest.raises(ValueError, match="trial_timeout_s > 0 must hold"):
        RayExecutor(trial_timeout_s=0)
    assert "ray" in ecopt.executors.EXECUTOR_NAMES


def test_trials_are_ray_tasks_metered_on_the_worker(ray_session, run_dir) -> None:
    spy = SpySampler()
    st = study(run_dir, sampler=spy)
    with ecopt.executors.RayExecutor() as ex:
        assert ex.slots == 2 and not ex.embedded  # the module's Ray, not started by ex
        recs = st.optimize(T.Sleepy(0.3), n_trials=6, executor=ex)
    assert states(recs) == {i: "complete" for i in range(6)}
    assert all(r.worker.startswith("ray node ") for r in recs)
    pids = {int(r.worker.split("pid:")[1].rstrip(")")) for r in recs}
    assert os.getpid() not in pids
    for r in recs:  # the work phase was metered inside the task
        assert r.phases["work"].duration_s >= 0.3 and r.phases["work"].energy_j >= 0
    # Asynchronous: a new proposal while the other trial still ran (told as pending).
    assert [len(c["pending"]) for c in spy.calls[:2]] == [0, 1]
    assert len((run_dir / "trials.jsonl").read_text().splitlines()) == 6
    from ray import is_initialized

    assert is_initialized()  # an executor that did not start Ray leaves it running


def test_by_name_and_unpicklable_objectives(ray_session) -> None:
    import threading

    class Holder:
        def __init__(self) -> None:
            self.lock = threading.Lock()

        def __call__(self, trial):  # type: ignore[no-untyped-def]
            return T.quick(trial)

    st = study()
    with pytest.raises(ValueError, match="Holder cannot be pickled.*Ray workers"):
        st.optimize(Holder(), n_trials=2, executor="ray")
    assert st.records == []
    recs = st.optimize(lambda t: T.zdt1(t["x"], t["y"]), n_trials=2, executor="ray")
    assert states(recs) == {0: "complete", 1: "complete"}


def test_an_objective_the_workers_cannot_import_fails_its_trial_clearly(ray_session,
                                                                        tmp_path) -> None:
    """A module only the driver has (added to sys.path after Ray started)."""
    (tmp_path / "driver_only_objective.py").write_text(textwrap.dedent("""
        def objective(trial):
            return {"f1": trial["x"], "f2": trial["y"]}
    """))
    sys.path.insert(0, str(tmp_path))
    try:
        import driver_only_objective

        recs = study().optimize(driver_only_objective.objective, n_trials=1, executor="ray",
                                fail_fast=None)
    finally:
        sys.path.remove(str(tmp_path))
    assert recs[0].state is ecopt.TrialState.FAILED
    assert recs[0].error.type == "ModuleNotFoundError"
    assert "could not unpickle the objective" in recs[0].error.message
    assert "driver_only_objective" in recs[0].error.message


def test_workers_without_ecopt_stop_the_study_at_once_naming_the_fix(ray_session,
                                                                     tmp_path) -> None:
    python = no_ecopt_python(tmp_path / "python-without-ecopt", keep="site-packages|ecopt-ray-")
    st = study()
    with ecopt.executors.RayExecutor(runtime_env={"py_executable": str(python)}) as ex, \
            pytest.raises(ExecutorLostError) as err:
        st.optimize(T.quick, n_trials=6, batch_size=2, executor=ex)
    msg = str(err.value)
    assert "cannot import ecopt" in msg and "pip install 'ecopt[ray]'" in msg, msg
    assert "py_executable" in msg, msg
    assert 1 <= len(st.records) <= 2 and all(r.interrupted for r in st.records)


def test_killed_worker_fails_its_trial_and_the_study_finishes(ray_session, run_dir,
                                                              tmp_path) -> None:
    kill_when_pid_file(tmp_path, 1)
    recs = study(run_dir).optimize(
        T.PidThenSleep(tmp_path, victim=1, duration_s=0.2, victim_s=120), n_trials=4,
        executor="ray")
    assert states(recs) == {0: "complete", 1: "failed", 2: "complete", 3: "complete"}
    lost = next(r for r in recs if r.number == 1)
    assert lost.error.type == "WorkerLost" and lost.interrupted and "died" in lost.error.message
    assert len(ecopt.load_study(run_dir).records) == 4


def test_hung_trial_times_out_and_frees_its_slot(ray_session) -> None:
    st = study()
    with ecopt.executors.RayExecutor(trial_timeout_s=15) as ex:
        recs = st.optimize(T.Sleepy(0.1, hang_numbers=(0,), hang_s=600), n_trials=4,
                           executor=ex)
        assert states(recs) == {0: "failed", 1: "complete", 2: "complete", 3: "complete"}
        hung = next(r for r in recs if r.number == 0)
        assert hung.error.type == "TrialTimeout" and "trial_timeout_s=15" in hung.error.message
        # Its worker was stopped, so both CPUs serve trials again.
        more = st.optimize(T.Sleepy(0.5), n_trials=2, executor=ex)
    assert states(more) == {4: "complete", 5: "complete"}


def test_ray_going_away_stops_cleanly_and_the_study_resumes(ray_session, run_dir) -> None:
    """Last in this module: it stops the module's Ray."""
    import threading

    from ecopt.executors.ray import shutdown_ray

    st = study(run_dir)

    def stop_ray() -> None:
        while len(st.records) < 2:
            import time

            time.sleep(0.02)
        shutdown_ray()

    stopper = threading.Thread(target=stop_ray, daemon=True)
    stopper.start()
    with pytest.raises(ExecutorLostError, match="went away"):
        st.optimize(T.Sleepy(1.0), n_trials=20, executor="ray")
    stopper.join(10)
    first = st.records
    assert len(first) >= 2 and st.running == []
    assert any(r.interrupted for r in first)
    st.close()
    assert len(ecopt.load_study(run_dir).records) == len(first)
