"""Meters that read known joules, for tests of what ecopt does with energy."""

from __future__ import annotations

from typing import Any

from ecopt.meters.base import ComponentEnergy, Meter


class FixedJoules(Meter):
    """``joules`` per window, whatever ran: a deterministic stand-in for an energy counter
    (every equal-sized phase gets the same samples/J)."""

    name = "fixed-joules"

    def __init__(self, joules: float = 2.0) -> None:
        super().__init__()
        self.joules = joules

    def _start(self) -> None:
        pass

    def _stop(self, state: Any, duration_s: float) -> dict[str, ComponentEnergy]:
        return {"cpu": ComponentEnergy(self.joules, "fake-fixed-joules", True)}


#: Joules the next window of :class:`ScriptedJoules` reads (set by :class:`CostScript`).
NEXT_J: float = 0.0


class ScriptedJoules(Meter):
    """Reads :data:`NEXT_J` joules per window: a meter whose readings a test scripts
    (any cost, ``nan`` for a broken counter, ``0`` for a meter that reads nothing).
    Works in worker processes too: the objective sets the worker's copy."""

    name = "scripted-joules"

    def _start(self) -> None:
        pass

    def _stop(self, state: Any, duration_s: float) -> dict[str, ComponentEnergy]:
        return {"cpu": ComponentEnergy(NEXT_J, "fake-scripted-joules", True)}


class CostScript:
    """An objective whose trial ``n`` reads ``costs[n % len(costs)]`` joules (in one ``work``
    phase of ``sleep_s``); picklable, for executors with worker processes."""

    def __init__(self, costs: tuple[float, ...], sleep_s: float = 0.002) -> None:
        self.costs = tuple(costs)
        self.sleep_s = sleep_s

    def __call__(self, trial: Any) -> dict[str, float]:
        import time

        global NEXT_J
        NEXT_J = self.costs[trial.number % len(self.costs)]
        try:
            with trial.phase("work"):
                time.sleep(self.sleep_s)
        finally:
            NEXT_J = 0.0  # proposals read nothing
        return {"f1": float(trial["x"]), "f2": float(trial["y"])}
