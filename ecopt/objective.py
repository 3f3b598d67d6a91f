"""What a study optimises (:class:`Objective`) and what it must respect (:class:`Constraint`)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ecopt._types import is_finite_number

__all__ = ["Objective", "Constraint", "validate_objectives"]

_DIRECTIONS = ("max", "min")
_OPS = ("<=", ">=")


def _check_name(name: object, what: str) -> str:
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"{what} name must be a non-empty string, got {name!r}")
    return name


@dataclass(frozen=True)
class Objective:
    """A metric to maximise or minimise.

    Args:
        name: The key the objective function returns it under.
        direction: ``"max"`` or ``"min"``.
        threshold: The worst value still worth having. For multi-objective
            search the thresholds form the hypervolume reference point; when
            ``None`` one is inferred from the data (and recorded).

    Example:
        >>> ecopt.Objective("accuracy", "max", threshold=0.5)
    """

    name: str
    direction: str = "max"
    threshold: float | None = None

    def __post_init__(self) -> None:
        _check_name(self.name, "objective")
        if self.direction not in _DIRECTIONS:
            raise ValueError(
                f"direction must be 'max' or 'min', got {self.direction!r} for objective {self.name!r}"
            )
        if self.threshold is not None:
            if isinstance(self.threshold, bool) or not isinstance(self.threshold, (int, float)) \
                    or not is_finite_number(self.threshold):
                raise ValueError(
                    f"threshold must be a finite number or None, got {self.threshold!r} "
                    f"for objective {self.name!r}"
                )
            object.__setattr__(self, "threshold", float(self.threshold))

    @property
    def sign(self) -> float:
        """+1 for ``max``, -1 for ``min``: multiply to get a maximisation value."""
        return 1.0 if self.direction == "max" else -1.0

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "direction": self.direction, "threshold": self.threshold}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Objective:
        return cls(d["name"], d.get("direction", "max"), d.get("threshold"))


@dataclass(frozen=True)
class Constraint:
    """An outcome constraint on a reported metric, e.g. ``Constraint("latency_ms", "<=", 50)``.

    Trials that break it stay in the log but never enter the Pareto front, and
    the model-based samplers model it as an outcome constraint.
    """

    name: str
    op: str
    bound: float

    def __post_init__(self) -> None:
        _check_name(self.name, "constraint")
        if self.op not in _OPS:
            raise ValueError(f"constraint op must be '<=' or '>=', got {self.op!r} for {self.name!r}")
        if isinstance(self.bound, bool) or not isinstance(self.bound, (int, float)) \
                or not is_finite_number(self.bound):
            raise ValueError(f"constraint bound must be a finite number, got {self.bound!r}")
        object.__setattr__(self, "bound", float(self.bound))

    def satisfied(self, value: float) -> bool:
        """Whether ``value`` respects the constraint."""
        return value <= self.bound if self.op == "<=" else value >= self.bound

    def slack(self, value: float) -> float:
        """Signed slack: ``<= 0`` when satisfied (BoTorch's convention)."""
        return value - self.bound if self.op == "<=" else self.bound - value

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "op": self.op, "bound": self.bound}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Constraint:
        return cls(d["name"], d["op"], d["bound"])


def validate_objectives(objectives: Sequence[Objective], constraints: Sequence[Constraint]) -> None:
    """Check a study's objectives and constraints together.

    Raises:
        ValueError: for no objectives, non-Objective items or duplicate names.
    """
    if isinstance(objectives, Objective):
        raise ValueError("objectives must be a list of Objective, got a single Objective")
    if len(objectives) == 0:
        raise ValueError("a study needs at least one objective, got []")
    for o in objectives:
        if not isinstance(o, Objective):
            raise ValueError(f"objectives must be Objective instances, got {o!r}")
    for c in constraints:
        if not isinstance(c, Constraint):
            raise ValueError(f"constraints must be Constraint instances, got {c!r}")
    names = [o.name for o in objectives]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ValueError(f"objective names must be unique, got duplicates {dupes}")
    overlap = sorted(set(names) & {c.name for c in constraints})
    if overlap:
        raise ValueError(f"a metric cannot be both objective and constraint, got {overlap}")
