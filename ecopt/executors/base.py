"""The executor contract: run trials somewhere, hand back :class:`~ecopt.trial.TrialOutcome`.

The study (the driver) asks the sampler, submits trials to an executor and
writes every outcome to the log itself (single writer). An executor only runs
``run_objective(objective, trial)`` where it can and returns a future.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from ecopt.trial import Trial, TrialOutcome

__all__ = ["Executor"]


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

        A future that raises means the trial could not run or its worker was
        lost; the study records it as failed.
        """

    def close(self) -> None:
        """Release workers (safe to call twice)."""

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "slots": self.slots}

    def __enter__(self) -> Executor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
