"""The executor contract: run trials somewhere, hand back :class:`~ecopt.trial.TrialOutcome`.

The study (the driver) asks the sampler, submits trials to an executor and
writes every outcome to the log itself (single writer). An executor only runs
``run_objective(objective, trial)`` where it can and returns a future.

Faults have two levels:

* one trial's worker died, or the trial ran past ``trial_timeout_s``: the
  future resolves to a :class:`~ecopt.trial.TrialOutcome` whose error type is
  ``"WorkerLost"`` (the record's ``interrupted`` is true, so it may be proposed
  again) or ``"TrialTimeout"``; the study goes on with the other workers;
* the executor as a whole is gone (the Dask scheduler went away): futures
  raise :class:`ExecutorLostError`; the study records every trial in flight as
  interrupted and re-raises, with its log intact for a resume.
"""

from __future__ import annotations

import datetime as _dt
import os
import socket
import sys
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import replace
from pathlib import Path
from typing import Any

from ecopt.errors import ExecutorLostError
from ecopt.trial import ErrorInfo, Trial, TrialOutcome, run_objective

__all__ = [
    "Executor",
    "ExecutorLostError",
    "WORKER_LOST",
    "TRIAL_TIMEOUT",
    "fault_outcome",
    "execute_trial",
    "worker_meter",
    "objective_name",
    "driver_python_path",
]

#: Error type of a trial whose worker process died (``TrialRecord.interrupted`` is true).
WORKER_LOST = "WorkerLost"
#: Error type of a trial that ran longer than the executor's ``trial_timeout_s``.
TRIAL_TIMEOUT = "TrialTimeout"


def _now_iso() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="milliseconds")


def objective_name(objective: Any) -> str:
    """A readable name of an objective for error messages (``module.qualname``)."""
    mod = getattr(objective, "__module__", None) or type(objective).__module__
    qual = getattr(objective, "__qualname__", None) or type(objective).__qualname__
    return f"{mod}.{qual}"


def check_picklable(objective: Callable[[Trial], Any], dumps: Callable[[Any], bytes],
                    destination: str) -> None:
    """Check that ``objective`` can be pickled with ``dumps`` to go to remote workers.

    Shared by the executors that ship objectives to other processes (Dask,
    Spark), so a study fails before its first trial instead of on every one.

    Args:
        objective: The study's objective.
        dumps: The serializer the executor sends it with (e.g. cloudpickle's).
        destination: Where it would go, for the message (e.g. ``"Dask workers"``).

    Raises:
        ValueError: The objective cannot be pickled; the message names it, the
            pickling error and how to make it picklable.
    """
    try:
        dumps(objective)
    except Exception as exc:
        raise ValueError(
            f"the objective {objective_name(objective)} cannot be pickled "
            f"({type(exc).__name__}: {exc}), so it cannot be sent to {destination}; define it "
            "as a module-level function (or a class instance holding only picklable settings) "
            f"in a module the {destination.split()[-1]} can import"
        ) from None


def driver_python_path() -> str:
    """The driver's import path (``sys.path``'s existing entries) as a ``PYTHONPATH`` value.

    Given to worker processes that an executor starts on this host, so they
    import what the driver imports (the script's folder, folders a notebook
    added to ``sys.path``...).
    """
    keep = [os.path.abspath(p) for p in sys.path if p and os.path.exists(p)]
    return os.pathsep.join(dict.fromkeys(keep))


def fault_outcome(trial: Trial, error_type: str, message: str, *, started_at: str | None = None,
                  duration_s: float | None = None, host: str = "", worker: str = "",
                  device: str = "") -> TrialOutcome:
    """The outcome of a trial that produced nothing (its worker died, it timed out...).

    Args:
        trial: The driver's live trial.
        error_type: :data:`WORKER_LOST`, :data:`TRIAL_TIMEOUT`, ...
        message: What happened and what the study did about it.
        started_at: When it started on its worker (default: when it was asked).
        duration_s: Seconds it ran (default: since it was asked).
        host, worker, device: Where it ran, when known.
    """
    return TrialOutcome.of(trial, error=ErrorInfo(error_type, message, ""),
                           started_at=started_at or trial.started_at, duration_s=duration_s,
                           host=host, worker=worker, device=device)


_WORKER_METERS: dict[str, Any] = {}


def worker_meter(spec: str) -> Any:
    """The meter named ``spec`` built in this (worker) process, once, then reused."""
    meter = _WORKER_METERS.get(spec)
    if meter is None:
        from ecopt.meters import get_meter

        meter = _WORKER_METERS[spec] = get_meter(spec)
    return meter


def execute_trial(objective: Callable[[Trial], Any], trial: Trial, *, worker: str | None = None,
                  device: str | None = None, meter: str | None = None) -> TrialOutcome:
    """Run one trial where it landed (in a worker process), stamping where and when.

    The trial's start time is reset to now, so ``started_at``/``duration_s``
    cover the run itself, not the time it waited in a queue (overlaps between
    concurrent trials are computed from these).

    Args:
        meter: Measure with this meter name, resolved in this process (e.g.
            ``"auto"`` on a GPU worker of a driver that has no GPU) instead of
            the study's meter. Each measurement names the meter that made it.
    """
    out = run_objective(objective, trial, restart_clock=True,
                        meter=worker_meter(meter) if meter is not None else None)
    return replace(out, host=out.host or socket.gethostname(),
                   worker=out.worker if worker is None else worker,
                   device=out.device if device is None else device)


class SlotsCache:
    """A cluster's trial capacity, asked of it at most every ``every_s`` seconds.

    Args:
        capacity: Asks the cluster how many trials it can run at once now.
        every_s: How long an answer is kept, in seconds.
    """

    def __init__(self, capacity: Callable[[], int], every_s: float = 2.0) -> None:
        self._capacity, self._every_s = capacity, every_s
        self._at, self._n = 0.0, 1

    def get(self, alive: bool) -> int:
        """The capacity (at least 1); not asked again while the cluster is not ``alive``
        (the last answer stands: the running trials' futures report the loss)."""
        if alive and time.monotonic() - self._at > self._every_s:
            try:
                self._n = max(int(self._capacity()), 1)
            except Exception:  # noqa: BLE001 - the cluster is going away: the futures say so
                pass
            self._at = time.monotonic()
        return self._n


class Executor(ABC):
    """Runs trials.

    Attributes:
        slots: How many trials it can run at once (the study keeps at most this
            many in flight).
    """

    name: str = "executor"
    slots: int = 1

    @abstractmethod
    def submit(self, objective: Callable[[Trial], Any], trial: Trial) -> Future[TrialOutcome]:
        """Start one trial; the future resolves to its outcome.

        Trial-level faults (worker died, timeout) resolve to an outcome with an
        error. A future that raises :class:`ExecutorLostError` means the whole
        executor is gone; any other exception fails that trial only.
        """

    def attach(self, study_dir: Path | None) -> None:
        """Called by the study before its trials are submitted.

        Executors that start local worker processes list them in
        ``<study_dir>/.workers`` (see :mod:`ecopt.executors.orphans`), so a
        later open of the study can refuse while orphans of a killed driver
        still run trials. The default does nothing.
        """

    def check_objective(self, objective: Callable[[Trial], Any]) -> None:
        """Raise ``ValueError`` when ``objective`` cannot be sent to this executor's workers.

        Called by the study before any trial starts. In-process executors
        accept anything callable.
        """

    def close(self) -> None:
        """Release workers (safe to call twice)."""

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "slots": self.slots}

    def __enter__(self) -> Executor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
