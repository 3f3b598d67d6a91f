"""The pruner contract: decide, from a running trial's reports, whether it should stop.

A pruner sees the trial's learning curve (:attr:`ecopt.Trial.intermediate`:
objective values per step and the energy spent so far) and the study's
finished trials (their curves and final values), and answers with a
:class:`Decision`. The objective asks through :meth:`ecopt.Trial.should_stop`
and raises :class:`ecopt.TrialPruned` when told to stop.

Where trials run in worker processes, the pruner and a snapshot of the
finished trials travel with the trial (both must be picklable).

Example:
    >>> class StopAfter(Pruner):
    ...     name = "stop-after"
    ...     def __init__(self, steps: int) -> None:
    ...         self.steps = steps
    ...     def decide(self, trial, history):
    ...         done = trial.intermediate[-1].step >= self.steps
    ...         return Decision(done, f"reached step {self.steps}" if done else "")
"""

from __future__ import annotations

import numbers
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ecopt.objective import Constraint, Objective
    from ecopt.trial import Trial, TrialRecord

__all__ = ["Pruner", "Decision", "NopPruner", "PruningHook"]


@dataclass(frozen=True)
class Decision:
    """A pruner's answer for one trial at its latest report.

    Attributes:
        prune: Stop the trial now.
        reason: Why, in one sentence (kept in the pruned trial's record).
        info: Numbers behind the decision (rung, rank, probability...), JSON-able.
    """

    prune: bool
    reason: str = ""
    info: dict[str, Any] = field(default_factory=dict)


class Pruner(ABC):
    """Base class of multi-objective pruners.

    Subclasses implement :meth:`decide`; :meth:`bind` gives them the study's
    objectives (names, directions, thresholds) before the first trial.
    """

    name: str = "pruner"

    def __init__(self) -> None:
        self.objectives: list[Objective] = []
        self.constraints: list[Constraint] = []

    def bind(self, objectives: Sequence[Objective], constraints: Sequence[Constraint] = ()
             ) -> None:
        """Called by the study with its objectives and constraints."""
        self.objectives = list(objectives)
        self.constraints = list(constraints)

    @abstractmethod
    def decide(self, trial: Trial, history: Sequence[TrialRecord]) -> Decision:
        """Whether ``trial`` should stop at its latest report.

        Args:
            trial: The running trial; ``trial.intermediate`` holds its reports
                (at least one), oldest first.
            history: The study's finished trials (any state), with their
                ``intermediate`` curves.
        """

    def describe(self) -> dict[str, Any]:
        """Name and settings, recorded in ``study.json``."""
        return {"name": self.name, **{k: v for k, v in vars(self).items()
                                      if not k.startswith("_") and k not in
                                      ("objectives", "constraints")}}


class PruningHook:
    """A pruner bound to a study's finished trials: what a live trial's ``should_stop`` asks.

    ``hook(trial)`` is ``pruner.decide(trial, history)``. In the driver's
    process ``history`` is the study's own growing list of finished trials;
    pickled (a trial sent to a worker process), a snapshot of it travels.

    Args:
        pruner: The pruner.
        history: The study's finished trials.
    """

    def __init__(self, pruner: Pruner, history: Sequence[TrialRecord]) -> None:
        self.pruner = pruner
        self.history = history

    @property
    def label(self) -> str:
        """The pruner's class name (for warnings)."""
        return type(self.pruner).__name__

    def __call__(self, trial: Trial) -> Decision:
        return self.pruner.decide(trial, self.history)

    def __getstate__(self) -> dict[str, Any]:
        return {"pruner": self.pruner, "history": list(self.history)}


def check_int(name: str, value: Any, low: int) -> None:
    """Raise ``ValueError`` unless ``value`` is an integer ``>= low`` (a pruner setting)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < low:
        raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")


class NopPruner(Pruner):
    """Never prunes (the default when a study has no pruner)."""

    name = "none"

    def decide(self, trial: Trial, history: Sequence[TrialRecord]) -> Decision:
        return Decision(False)
