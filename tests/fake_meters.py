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
