"""The sampler contract: ``propose(space, records, pending, n) -> list[Proposal]``.

A sampler sees only finished trial records and the params of trials still in
flight (``pending``); it never sees meters. For a given seed and history its
proposals are the same (samplers derive randomness from the seed and the
history's length, not from hidden state, so a resumed study proposes what an
uninterrupted one would have).

A new sampler is one file: subclass :class:`Sampler`, implement ``propose``,
and add a line to :data:`ecopt.registry.BUILTIN` (or, from another package, an
entry point in the group ``ecopt.samplers``; see docs/architecture.md).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ecopt._types import Params
from ecopt.objective import Constraint, Objective
from ecopt.space import SearchSpace
from ecopt.trial import TrialRecord

__all__ = ["FallbackWarning", "Proposal", "Sampler"]


@dataclass(frozen=True)
class Proposal:
    """One proposed configuration.

    Attributes:
        params: The configuration.
        proposed_by: Short name recorded in the trial log.
        info: JSON-able notes kept with the trial (reference point, model fit...).
    """

    params: Params
    proposed_by: str
    info: dict[str, Any] = field(default_factory=dict)


class Sampler(ABC):
    """Base class of every sampler.

    Args:
        seed: Seed for reproducible proposals (``None``: the study's seed).
    """

    #: Short name recorded as ``proposed_by``.
    name: str = "sampler"
    #: Smallest number of objectives the sampler can work with.
    min_objectives: int = 1

    def __init__(self, seed: int | None = None) -> None:
        self.seed = seed
        #: How many trials the study will have when the running :meth:`ecopt.Study.optimize`
        #: call ends (trials started before it plus its ``n_trials``); ``None`` outside
        #: ``optimize()`` or when the call has no ``n_trials``. Set by the study; a sampler
        #: may size its initial design by it (``QLogNEHVISampler`` does).
        self.planned_trials: int | None = None
        self.objectives: list[Objective] = []
        self.constraints: list[Constraint] = []

    def bind(self, objectives: Sequence[Objective], constraints: Sequence[Constraint],
             seed: int | None) -> None:
        """Called once by the study: what is optimised, and the study's seed.

        Raises:
            ValueError: when the sampler cannot handle this many objectives.
        """
        if len(objectives) < self.min_objectives:
            raise ValueError(
                f"sampler {self.name!r} needs at least {self.min_objectives} objectives, "
                f"got {len(objectives)}"
            )
        self.objectives = list(objectives)
        self.constraints = list(constraints)
        if self.seed is None:
            self.seed = seed if seed is not None else 0

    @abstractmethod
    def propose(self, space: SearchSpace, records: Sequence[TrialRecord],
                pending: Sequence[Params], n: int) -> list[Proposal]:
        """Propose ``n`` configurations (fewer only when the sampler is exhausted).

        Args:
            space: The search space.
            records: Every finished trial (complete, failed, infeasible).
            pending: Params of trials running now (not to be proposed again).
            n: How many to propose.
        """

    def describe(self) -> dict[str, Any]:
        """Settings recorded in ``study.json``."""
        return {"name": self.name, "seed": self.seed}


class FallbackWarning(UserWarning):
    """A sampler took a slower path (a fast path off) or fell back to model-free points."""
