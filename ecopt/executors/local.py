"""In-process, sequential execution (the default)."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from ecopt.executors.base import Executor
from ecopt.trial import Trial, TrialOutcome, run_objective

__all__ = ["LocalExecutor"]


class LocalExecutor(Executor):
    """Run each trial in this process, one after another.

    ``slots`` is unbounded: a q-batch of proposals is submitted together and
    then run in order, which is synchronous batch BO.
    """

    name = "local"
    slots = 1 << 30

    def submit(self, objective: Callable[[Trial], Any], trial: Trial) -> Future[TrialOutcome]:
        fut: Future[TrialOutcome] = Future()
        # The trial starts when it runs, not when its batch was proposed: a q-batch runs
        # one trial after another, and none of them overlaps the others.
        fut.set_result(run_objective(objective, trial, restart_clock=True))
        return fut
