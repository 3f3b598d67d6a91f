"""Ctrl-C in every executor: finished trials are kept complete, only running ones interrupted."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

import ecopt
import executor_objectives as T
from ecopt.trial import TrialState
from faults_helpers import assert_saved, make_study


@pytest.fixture(autouse=True)
def _ctrl_c_raises():
    """SIGINT raises KeyboardInterrupt here, as at a terminal, even when this process was
    started with SIGINT ignored (Python keeps a parent's SIG_IGN: e.g. a job started with
    ``&`` from a non-interactive shell)."""
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, old)


class _Ctrl:
    """Ctrl-C from a timer: SIGINT once, then again every few seconds until optimize returns.

    One is what the library needs; repeating it keeps the test from hanging if
    the interpreter ever delivers the first one where it cannot surface.
    """

    def __init__(self, after_s: float,
                 when: threading.Event | Callable[[], bool] | None = None) -> None:
        self.after_s = after_s
        self.when = when
        self.done = threading.Event()
        self.sent = 0
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        # First the moment the test waits for (on a loaded machine start-up can take seconds).
        if isinstance(self.when, threading.Event):
            self.when.wait(120.0)
        elif self.when is not None:
            deadline = time.monotonic() + 120.0
            while not self.when() and time.monotonic() < deadline:
                if self.done.wait(0.05):
                    return
        if self.done.wait(self.after_s):
            return
        while not self.done.is_set():
            self.sent += 1
            os.kill(os.getpid(), signal.SIGINT)
            self.done.wait(5.0)

    def __enter__(self) -> _Ctrl:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.done.set()
        self.thread.join()


class StopAt:
    """Each trial a short ``work`` phase; trial ``at`` raises KeyboardInterrupt inside its phase."""

    def __init__(self, at: int) -> None:
        self.at = at

    def __call__(self, trial: ecopt.Trial) -> dict[str, float]:
        with trial.phase("work"):
            time.sleep(0.02 * (trial.number + 1))
            if trial.number == self.at:
                raise KeyboardInterrupt
        return T.zdt1(trial["x"], trial["y"])


def test_local_batch_keeps_the_trials_that_finished(run_dir):
    st = make_study(run_dir)
    with pytest.raises(KeyboardInterrupt):
        st.optimize(StopAt(2), n_trials=4, batch_size=3, show_progress=False)
    recs = st.records
    assert [(r.number, r.state.value) for r in recs] == [(0, "complete"), (1, "complete"),
                                                         (2, "failed")]
    assert recs[2].interrupted and "KeyboardInterrupt" in recs[2].error.message
    assert recs[0].values and recs[1].values
    assert recs[0].duration_s != recs[1].duration_s  # their own, not the moment of the stop
    assert recs[2].phases["work"].energy_j > 0  # what the interrupted trial spent is kept
    assert st.running == []
    assert_saved(run_dir, recs)
    st.close()


def _saved(run_dir: Path, n: int) -> Callable[[], bool]:
    """True once the study's trial log holds ``n`` finished trials (and the others run)."""
    log = run_dir / "trials.jsonl"

    def ready() -> bool:
        try:
            return len(log.read_text().splitlines()) >= n
        except OSError:
            return False

    return ready


class _SignalAt(T.SleepByNumber):
    """SleepByNumber that sets ``started`` when trial ``at`` starts its work."""

    def __init__(self, at: int, durations: dict[int, float], default_s: float) -> None:
        super().__init__(durations, default_s)
        self.at, self.started = at, threading.Event()

    def __call__(self, trial: ecopt.Trial) -> dict[str, float]:
        if trial.number == self.at:
            self.started.set()
        return super().__call__(trial)


def test_local_real_sigint(run_dir, caplog):
    st = make_study(run_dir)
    objective = _SignalAt(2, {0: 0.05, 1: 0.05}, default_s=30.0)
    # Ctrl-C 0.3 s into trial 2 (not at a fixed time: trials 0 and 1 may be slow to start
    # on a loaded machine, and they must have finished).
    with _Ctrl(after_s=0.3, when=objective.started), pytest.raises(KeyboardInterrupt), \
            caplog.at_level("WARNING", logger="ecopt"):
        st.optimize(objective, n_trials=4, show_progress=False)
    states = [(r.number, r.state.value, r.interrupted) for r in st.records]
    assert states == [(0, "complete", False), (1, "complete", False), (2, "failed", True)]
    # Issue 28: the log said "the study goes on" for the interrupted trial, then it stopped.
    said = [r.getMessage() for r in caplog.records if r.getMessage().startswith("trial 2 ")]
    assert len(said) == 1 and "the study goes on" not in said[0], said
    assert "optimize() stops here" in said[0] and "KeyboardInterrupt" in said[0]
    st.close()
    with caplog.at_level("WARNING", logger="ecopt"):  # a failure the call goes on after
        caplog.clear()
        with ecopt.Study(st.space, st.objectives, sampler="random", meter="wallclock") as s2:
            s2.optimize(_fails_once, n_trials=2, show_progress=False)
    said = [r.getMessage() for r in caplog.records if r.getMessage().startswith("trial 0 ")]
    assert len(said) == 1 and said[0].endswith("(the study goes on)"), said


def _fails_once(trial: ecopt.Trial) -> dict[str, float]:
    if trial.number == 0:
        raise RuntimeError("diverged")
    return {name: 1.0 for name in ("f1", "f2")}


@pytest.mark.slow
def test_processes_keep_finished_and_interrupt_in_flight(run_dir):
    st = make_study(run_dir)
    ex = ecopt.executors.ProcessExecutor(n_workers=2)
    try:
        with _Ctrl(after_s=1.5, when=_saved(run_dir, 1)), pytest.raises(KeyboardInterrupt):
            st.optimize(T.SleepByNumber({0: 0.1}, default_s=60.0), n_trials=3,
                        executor=ex, show_progress=False)
    finally:
        ex.close()
    by = {r.number: r for r in st.records}
    assert by[0].state is TrialState.COMPLETE and by[0].values
    assert all(by[n].interrupted for n in by if n != 0) and len(by) == 3
    assert_saved(run_dir, st.records)
    st.close()


@pytest.mark.slow
def test_dask_keeps_finished_and_interrupts_in_flight(run_dir):
    st = make_study(run_dir)
    with ecopt.DaskExecutor(n_workers=2) as ex:
        with _Ctrl(after_s=1.5, when=_saved(run_dir, 1)), pytest.raises(KeyboardInterrupt):
            st.optimize(T.SleepByNumber({0: 0.1}, default_s=60.0), n_trials=3, executor=ex,
                        show_progress=False)
    by = {r.number: r for r in st.records}
    assert by[0].state is TrialState.COMPLETE and by[0].values
    assert all(by[n].interrupted for n in by if n != 0) and len(by) == 3
    st.close()


DRIVER = textwrap.dedent("""
    import sys
    sys.path[:0] = [{here!r}, {tests!r}]
    import ecopt
    import executor_objectives as T
    from faults_helpers import make_study
    if __name__ == "__main__":
        st = make_study({path!r})
        ex = ecopt.executors.ProcessExecutor(n_workers=2)
        st.optimize(T.PidThenSleep({pids!r}, victim=0, duration_s=600.0, victim_s=600.0),
                    n_trials=2, executor=ex,
                    show_progress=False)
""")


@pytest.mark.slow
def test_killing_the_driver_takes_its_workers_with_it(run_dir, tmp_path):
    pids = tmp_path / "pids"
    pids.mkdir()
    script = tmp_path / "driver.py"
    script.write_text(DRIVER.format(here=str(Path(__file__).parent),
                                    tests=str(Path(__file__).parent.parent), path=str(run_dir),
                                    pids=str(pids)))
    proc = subprocess.Popen([sys.executable, str(script)], stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + 120
        while len(list(pids.iterdir())) < 2 and time.time() < deadline and proc.poll() is None:
            time.sleep(0.1)
        workers = [int(p.read_text()) for p in pids.iterdir()]
        assert len(workers) == 2, proc.stderr.read() if proc.poll() is not None else "timeout"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
    deadline = time.time() + 10
    while any(_alive(p) for p in workers) and time.time() < deadline:
        time.sleep(0.1)
    assert not any(_alive(p) for p in workers), "orphaned workers still run their trials"
    st = make_study(run_dir)  # nothing runs any more: the study opens, both trials interrupted
    assert [r.interrupted for r in st.records] == [True, True]
    st.close()


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2:].split()[:1] != ["Z"]


def test_a_reopen_refuses_while_an_orphan_still_runs(run_dir):
    make_study(run_dir).close()
    orphan = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        from ecopt.executors.orphans import record_worker

        record_worker(run_dir, orphan.pid)
        t0 = time.monotonic()
        with pytest.raises(ecopt.StudyLockedError, match=f"kill {orphan.pid}"):
            make_study(run_dir)
        assert time.monotonic() - t0 >= 4  # it waited for the orphan first
    finally:
        orphan.kill()
        orphan.wait()
    make_study(run_dir).close()  # gone: the study opens and the list is cleared
    assert not (run_dir / ".workers").exists()
