"""A local pool of worker processes, one trial per process at a time.

Unlike :class:`concurrent.futures.ProcessPoolExecutor` (where one dead worker
breaks the whole pool and every trial in it), each worker here is watched on
its own: a worker that dies fails only its trial (``WorkerLost``) and is
replaced; a trial past ``trial_timeout_s`` has its process killed and replaced
(``TrialTimeout``). Workers are started with ``spawn`` by default, so they
share no CUDA or thread state with the driver, and they are reused between
trials (imports are paid once per worker, not per trial).

Example:
    >>> from ecopt.executors import ProcessExecutor
    >>> with ProcessExecutor(n_workers=4, trial_timeout_s=600) as ex:
    ...     study.optimize(objective, n_trials=40, executor=ex)
"""

from __future__ import annotations

import logging
import multiprocessing
import multiprocessing.connection as mpc
import os
import pickle
import signal
import socket
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ecopt.executors.base import (
    TRIAL_TIMEOUT,
    WORKER_LOST,
    Executor,
    _now_iso,
    execute_trial,
    fault_outcome,
    objective_name,
)
from ecopt.executors.orphans import die_with_parent, record_worker
from ecopt.trial import ErrorInfo, Trial, TrialOutcome

__all__ = ["ProcessExecutor"]

log = logging.getLogger("ecopt")


#: What a worker sends when it starts a trial (an outcome is a pickle, never this).
_STARTED = b"S"


def _worker_main(conn: Any, device: str | None = None, meter: str | None = None,
                 parent_pid: int | None = None) -> None:
    """Loop in a worker process: receive a pickled (objective, trial), send its outcome back."""
    if parent_pid is not None:  # never outlive the driver (no orphan keeps running a trial)
        die_with_parent(parent_pid)
    if device is not None:  # before any trial can initialise CUDA
        os.environ["CUDA_VISIBLE_DEVICES"] = device
    # The driver handles Ctrl-C; a worker must not die of the terminal's SIGINT mid-trial.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    worker = f"pid:{os.getpid()}"
    while True:
        try:
            payload = conn.recv_bytes()
        except (EOFError, OSError):
            return
        if not payload:
            return
        conn.send_bytes(_STARTED)  # the trial's clock (and timeout) starts now
        try:
            objective, trial = pickle.loads(payload)
        except Exception as exc:  # the objective's module is not importable here...
            out = TrialOutcome(number=-1, error=ErrorInfo(
                type(exc).__name__,
                f"the worker process could not unpickle the objective or trial: {exc}; "
                "define the objective in a module the worker can import", ""),
                host=socket.gethostname(), worker=worker)
        else:
            out = execute_trial(objective, trial, worker=worker, meter=meter)
        try:
            data = pickle.dumps(out)
        except Exception as exc:
            out = replace(out, returned=None, user_attrs={}, infeasible=False, pruned=False,
                          error=ErrorInfo(
                              type(exc).__name__,
                              "the trial's result cannot be pickled back to the driver "
                              f"({exc}); return plain numbers and JSON-able user attrs", ""))
            data = pickle.dumps(out)
        conn.send_bytes(data)


@dataclass
class _Job:
    trial: Trial
    payload: bytes
    future: Future[TrialOutcome]


@dataclass
class _Worker:
    process: Any
    conn: Any
    job: _Job | None = None
    started: float = 0.0
    started_at: str = ""
    deadline: float | None = None
    trials_run: int = 0
    device: str | None = None

    @property
    def label(self) -> str:
        return f"pid:{self.process.pid}"


def _exit_text(code: int | None) -> str:
    if code is None:
        return "an unknown status"
    if code < 0:
        try:
            return f"signal {signal.Signals(-code).name}"
        except ValueError:
            return f"signal {-code}"
    return f"exit code {code}"


class ProcessExecutor(Executor):
    """Run trials in a pool of local worker processes.

    Args:
        n_workers: Processes (default: ``os.cpu_count()``); at most this many
            trials run at once.
        trial_timeout_s: Kill a trial's process after this many seconds and
            record the trial failed (``TrialTimeout``); ``None``: no limit.
        start_method: ``"spawn"`` (default) or ``"forkserver"``. ``"fork"`` is
            refused: forking a process that holds threads or CUDA state is unsafe.
        max_trials_per_worker: Replace a worker after this many trials (frees
            memory an objective leaks); ``None``: never.
        gpus: One worker per GPU id: worker ``i`` runs with
            ``CUDA_VISIBLE_DEVICES=gpus[i]`` (a replacement worker takes over
            the GPU of the one it replaces). Sets ``n_workers``.
        worker_meter: A meter name (``"auto"``, ``"nvml"``...) built in each
            worker process instead of using the study's meter (which was
            chosen where the study was created). ``None``: the study's meter.

    Objectives and their arguments must be picklable, and importable by
    module path in the workers: define objectives at module level (in a
    script, under ``if __name__ == "__main__":`` for the driver part).
    """

    name = "processes"

    def __init__(self, n_workers: int | None = None, trial_timeout_s: float | None = None,
                 start_method: str = "spawn", max_trials_per_worker: int | None = None,
                 gpus: Sequence[int | str] | None = None,
                 worker_meter: str | None = None) -> None:
        self.gpus: list[str] | None = None
        self.worker_meter = worker_meter
        if gpus is not None:
            ids = [str(g) for g in gpus]
            if not ids or len(set(ids)) != len(ids):
                raise ValueError(f"gpus must list distinct GPU ids, got {list(gpus)!r}")
            if n_workers is not None and n_workers != len(ids):
                raise ValueError(f"n_workers={n_workers} must equal len(gpus)={len(ids)} "
                                 "(one worker per GPU)")
            n_workers = len(ids)
            self.gpus = ids
        n = (os.cpu_count() or 1) if n_workers is None else n_workers
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"n_workers >= 1 must hold, got n_workers={n_workers!r}")
        if trial_timeout_s is not None and not trial_timeout_s > 0:
            raise ValueError(f"trial_timeout_s > 0 must hold, got {trial_timeout_s!r}")
        if start_method not in ("spawn", "forkserver"):
            raise ValueError(f"start_method must be 'spawn' or 'forkserver', got {start_method!r}")
        if max_trials_per_worker is not None and max_trials_per_worker < 1:
            raise ValueError(f"max_trials_per_worker >= 1 must hold, got {max_trials_per_worker}")
        self.slots = n
        self.n_workers = n
        self.trial_timeout_s = trial_timeout_s
        self.start_method = start_method
        self.max_trials_per_worker = max_trials_per_worker
        self._ctx = multiprocessing.get_context(start_method)
        self._lock = threading.Lock()
        self._queue: deque[_Job] = deque()
        self._workers: list[_Worker] = []
        self._wake_r, self._wake_w = self._ctx.Pipe(duplex=False)
        self._closed = False
        self._thread: threading.Thread | None = None
        self._study_dir: Path | None = None

    # -- driver side -----------------------------------------------------------
    def attach(self, study_dir: Path | None) -> None:
        self._study_dir = study_dir
        if study_dir is not None:
            with self._lock:
                for w in self._workers:
                    record_worker(study_dir, w.process.pid)

    def check_objective(self, objective: Callable[[Trial], Any]) -> None:
        name = objective_name(objective)
        try:
            pickle.dumps(objective)
        except Exception as exc:
            raise ValueError(
                f"the objective {name} cannot be pickled ({type(exc).__name__}: {exc}), so it "
                "cannot be sent to worker processes; define it as a module-level function (or a "
                "module-level class instance holding picklable settings) in an importable module"
            ) from None
        mod = getattr(objective, "__module__", None)
        main = sys.modules.get("__main__")
        if mod == "__main__" and main is not None and not getattr(main, "__file__", None):
            raise ValueError(
                f"the objective {name} is defined in an interactive session (no __main__ file), "
                "which spawned worker processes cannot import; move it to a module-level function "
                "in a .py module, or use ecopt.DaskExecutor (which pickles it by value)"
            )

    def submit(self, objective: Callable[[Trial], Any], trial: Trial) -> Future[TrialOutcome]:
        if self._closed:
            raise RuntimeError("this ProcessExecutor is closed")
        fut: Future[TrialOutcome] = Future()
        payload = pickle.dumps((objective, trial))
        with self._lock:
            self._queue.append(_Job(trial, payload, fut))
            if self._thread is None:
                self._thread = threading.Thread(target=self._monitor, name="ecopt-processes",
                                                daemon=True)
                self._thread.start()
        self._wake()
        return fut

    def _wake(self) -> None:
        try:
            self._wake_w.send_bytes(b"x")
        except OSError:  # closed
            pass

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._wake()
        if self._thread is not None:
            self._thread.join(timeout=30)
        with self._lock:
            for w in self._workers:
                self._stop_worker(w, graceful=w.job is None)
                if w.job is not None and not w.job.future.done():
                    w.job.future.set_result(fault_outcome(
                        w.job.trial, "Interrupted", "the executor was closed while the trial "
                        "ran", started_at=w.started_at,
                        duration_s=time.monotonic() - w.started, host=socket.gethostname(),
                        worker=w.label))
            self._workers.clear()
            for job in self._queue:
                job.future.cancel()
            self._queue.clear()
        for c in (self._wake_r, self._wake_w):
            c.close()

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "slots": self.slots, "n_workers": self.n_workers,
                "trial_timeout_s": self.trial_timeout_s, "start_method": self.start_method,
                "gpus": self.gpus, "worker_meter": self.worker_meter}

    # -- monitor thread ------------------------------------------------------------
    def _start_worker(self) -> _Worker:
        device = None
        if self.gpus is not None:
            taken = {w.device for w in self._workers}
            device = next(g for g in self.gpus if g not in taken)
        parent, child = self._ctx.Pipe(duplex=True)
        proc = self._ctx.Process(  # type: ignore[attr-defined]
            target=_worker_main, args=(child, device, self.worker_meter, os.getpid()), daemon=True,
            name="ecopt-trial-worker")
        proc.start()
        child.close()
        if self._study_dir is not None:
            record_worker(self._study_dir, proc.pid)
        w = _Worker(proc, parent, device=device)
        self._workers.append(w)
        return w

    @staticmethod
    def _stop_worker(w: _Worker, graceful: bool) -> None:
        try:
            if graceful and w.process.is_alive():
                w.conn.send_bytes(b"")
                w.process.join(timeout=2)
        except OSError:
            pass
        if w.process.is_alive():
            w.process.kill()
            w.process.join(timeout=5)
        w.conn.close()

    def _dispatch(self) -> None:
        while self._queue:
            idle = [w for w in self._workers if w.job is None and w.process.is_alive()]
            if not idle:
                if len(self._workers) >= self.n_workers:
                    return
                idle = [self._start_worker()]
            w = idle[0]
            job = self._queue.popleft()
            if not job.future.set_running_or_notify_cancel():
                continue
            w.job = job
            w.started = time.monotonic()
            w.started_at = _now_iso()
            w.deadline = None  # set when the worker says it started (spawning takes a while)
            try:
                w.conn.send_bytes(job.payload)
            except OSError:  # it died between trials: let the loop replace it
                pass

    def _finish(self, w: _Worker, outcome: TrialOutcome) -> None:
        job = w.job
        assert job is not None
        w.job = None
        w.deadline = None
        w.trials_run += 1
        if outcome.number != job.trial.number:  # could not even unpickle the trial
            outcome = TrialOutcome.of(job.trial, error=outcome.error,
                                      duration_s=time.monotonic() - w.started,
                                      host=outcome.host, worker=outcome.worker)
        job.future.set_result(outcome)
        if self.max_trials_per_worker and w.trials_run >= self.max_trials_per_worker:
            self._workers.remove(w)
            self._stop_worker(w, graceful=True)

    def _lose(self, w: _Worker, error_type: str, message: str) -> None:
        """Fail the worker's trial, kill and forget the worker (a new one starts on demand)."""
        self._workers.remove(w)
        self._stop_worker(w, graceful=False)
        if w.job is not None:
            w.job.future.set_result(fault_outcome(
                w.job.trial, error_type, message, started_at=w.started_at,
                duration_s=time.monotonic() - w.started,
                host=socket.gethostname(), worker=w.label))
            w.job = None

    def _monitor(self) -> None:
        while True:
            with self._lock:
                if self._closed:
                    return
                self._dispatch()
                busy = [w for w in self._workers if w.job is not None]
                waitables: list[Any] = [self._wake_r]
                waitables += [w.conn for w in busy]
                waitables += [w.process.sentinel for w in self._workers]
                deadlines = [w.deadline for w in busy if w.deadline is not None]
            timeout = None if not deadlines else max(0.0, min(deadlines) - time.monotonic())
            try:
                ready = mpc.wait(waitables, timeout=timeout)
            except OSError:  # a handle was closed under us (close()); re-check
                continue
            with self._lock:
                if self._closed:
                    return
                if self._wake_r in ready:
                    while self._wake_r.poll():
                        self._wake_r.recv_bytes()
                for w in list(self._workers):
                    if w.job is not None and (w.conn in ready or w.process.sentinel in ready):
                        try:
                            finished = False
                            while w.conn.poll():
                                msg = w.conn.recv_bytes()
                                if msg == _STARTED:
                                    w.started = time.monotonic()
                                    w.started_at = _now_iso()
                                    if self.trial_timeout_s is not None:
                                        w.deadline = w.started + self.trial_timeout_s
                                else:
                                    self._finish(w, pickle.loads(msg))
                                    finished = True
                                    break
                            if finished or w.process.is_alive():
                                continue
                        except (EOFError, OSError, pickle.UnpicklingError):
                            pass
                        if not w.process.is_alive() or w.process.sentinel in ready:
                            w.process.join(timeout=5)
                            code = w.process.exitcode
                            self._lose(w, WORKER_LOST, (
                                f"the worker process ({w.label}) died with {_exit_text(code)} "
                                f"while running trial {w.job.trial.number}"  # type: ignore[union-attr]
                                "; the trial is recorded failed and may be proposed again, "
                                "the study goes on with the other workers"))
                    elif w.job is None and w.process.sentinel in ready:
                        self._workers.remove(w)
                        w.process.join(timeout=1)
                        w.conn.close()
                now = time.monotonic()
                for w in list(self._workers):
                    if w.job is not None and w.deadline is not None and now >= w.deadline:
                        self._lose(w, TRIAL_TIMEOUT, (
                            f"trial {w.job.trial.number} ran longer than trial_timeout_s="
                            f"{self.trial_timeout_s:g} s; its worker process ({w.label}) was "
                            "killed and replaced, the study goes on"))
