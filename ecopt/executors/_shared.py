"""What the cluster executors (Ray, Spark, Dask) share: their task's fallbacks and their close.

* :func:`unpickle_failure` and :func:`unpicklable_result`: the outcomes a
  trial's task sends back when the worker cannot unpickle the objective or
  trial, or the driver could not unpickle the trial's result;
* :func:`interrupt_jobs`: on ``close``, take every job in flight, resolve its
  future as interrupted and cancel its work.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import replace
from typing import Any, Protocol, TypeVar

from ecopt.executors.base import fault_outcome
from ecopt.trial import ErrorInfo, Trial, TrialOutcome

__all__ = ["interrupt_jobs", "unpicklable_result", "unpickle_failure"]


def unpickle_failure(exc: BaseException, who: str, hint: str, *, worker: str) -> TrialOutcome:
    """The outcome a task sends when its worker cannot unpickle the objective or trial.

    Args:
        exc: What unpickling raised.
        who: The worker's Python, in words (``"the Ray worker's Python"``).
        hint: How to make the objective importable there.
        worker: The worker's label.

    Returns:
        An outcome numbered ``-1`` (the driver fills in the trial) with the error.
    """
    return TrialOutcome(number=-1, error=ErrorInfo(
        type(exc).__name__, f"{who} could not unpickle the objective or trial: {exc}; {hint}",
        ""), host=socket.gethostname(), worker=worker)


def unpicklable_result(out: TrialOutcome, exc: BaseException) -> TrialOutcome:
    """``out`` without its result, failed: its result cannot be pickled back to the driver."""
    return replace(out, returned=None, user_attrs={}, infeasible=False, pruned=False,
                   error=ErrorInfo(type(exc).__name__,
                                   "the trial's result cannot be pickled back to the driver "
                                   f"({exc}); return plain numbers and JSON-able user attrs",
                                   ""))


class _Job(Protocol):
    trial: Trial
    future: Future[TrialOutcome]


J = TypeVar("J", bound=_Job)


def interrupt_jobs(lock: threading.Lock, jobs: dict[str, J], cancel: Callable[[J], Any],
                   where: Callable[[J], tuple[str, str]] | None = None) -> None:
    """Take every job in flight; resolve each unresolved future as interrupted, cancel its work.

    Args:
        lock: Guards ``jobs``.
        jobs: The executor's jobs in flight, emptied here.
        cancel: Cancels one job's work; what it raises is ignored.
        where: ``(worker, host)`` of a job's outcome, where known (default: unknown).
    """
    with lock:
        taken = list(jobs.values())
        jobs.clear()
    for job in taken:
        if not job.future.done():
            worker, host = where(job) if where is not None else ("", "")
            job.future.set_result(fault_outcome(
                job.trial, "Interrupted", "the executor was closed while the trial ran",
                worker=worker, host=host))
        try:
            cancel(job)
        except Exception:
            pass
