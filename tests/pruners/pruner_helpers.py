"""Building trials and finished records with learning curves, for pruner tests."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence

import numpy as np

import ecopt
from ecopt.meters.base import WallClockMeter
from ecopt.trial import Intermediate, Trial, TrialRecord, TrialState

OBJS = [ecopt.Objective("acc", "max"), ecopt.Objective("energy_j", "min")]


def points(values: Sequence[Mapping[str, float]], start: int = 1,
           energy_per_step: float = 0.0) -> tuple[Intermediate, ...]:
    """Reports at steps ``start, start + 1, ...``; energy grows by ``energy_per_step``."""
    return tuple(Intermediate(start + i, dict(v), energy_per_step * (i + 1), float(i))
                 for i, v in enumerate(values))


def record(number: int, curve: Sequence[Intermediate], final: Mapping[str, float] | None = None,
           state: TrialState = TrialState.COMPLETE) -> TrialRecord:
    """A finished trial with a learning curve (``final`` defaults to the last report)."""
    vals = dict(final if final is not None else curve[-1].values)
    if state is not TrialState.COMPLETE:
        vals = {k: v for k, v in curve[-1].values.items()}
    return TrialRecord(number=number, state=state, params={"x": 0.5}, values=vals,
                       intermediate=tuple(curve))


def live(number: int, curve: Sequence[Intermediate]) -> Trial:
    """A running trial whose reports so far are ``curve``."""
    t = Trial(number, {"x": 0.5}, WallClockMeter())
    t.intermediate.extend(curve)
    return t


def saturating(final_acc: float, tau: float = 2.0, start_acc: float = 0.1
               ) -> Callable[[int], float]:
    """An accuracy curve rising from ``start_acc`` towards ``final_acc`` (power law in steps)."""
    return lambda s: final_acc - (final_acc - start_acc) * (1.0 + s / tau) ** -1.5


def curve_of(acc: Callable[[int], float], energy_per_step: float, steps: int,
             noise: float = 0.0, seed: int = 0) -> tuple[Intermediate, ...]:
    """Reports ``acc`` and ``energy_j`` (energy so far) at steps 1..steps."""
    rng = np.random.default_rng(seed)
    return tuple(Intermediate(s, {"acc": acc(s) + noise * float(rng.standard_normal()),
                                  "energy_j": energy_per_step * s}, energy_per_step * s, float(s))
                 for s in range(1, steps + 1))


def bound(pruner: ecopt.pruners.Pruner, objectives: Sequence[ecopt.Objective] = OBJS
          ) -> ecopt.pruners.Pruner:
    pruner.bind(objectives)
    return pruner


def finite(x: float) -> bool:
    return isinstance(x, float) and math.isfinite(x)
