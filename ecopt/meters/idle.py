"""Idle power: measure it once per study, and optionally subtract it from every window.

``measure_idle(meter, seconds)`` opens one window while the process sleeps and
returns the average power of each component. :class:`IdleSubtracted` is the
meter a study uses for it (``meter=IdleSubtracted("auto", idle_s=5)``): it
measures idle power when the study opens (once per study: a re-opened study
reuses its record) and subtracts ``idle power x window duration`` from each
component (never below zero), keeping the raw joules next to the net ones
(:class:`IdleSubtractingMeter` does the same with a record given):

* ``ComponentEnergy.energy_j`` is the **net** energy; its ``note`` states the
  raw joules and the idle power subtracted;
* ``Measurement.extras`` holds ``raw_energy_j`` and ``idle_energy_j`` (totals)
  and ``raw_energy_j/<component>`` for each component;
* ``Measurement.details["idle_subtracted"]`` holds the idle record.

The subtraction happens when the window closes, so what an objective reads
(``trial.energy_j()``, ``trial.samples_per_joule()``) and what the log keeps
agree. With the estimate meter at ``scope="process"`` a sleeping process burns
~0 CPU-s, so idle CPU power is ~0 W and only the RAM term is subtracted; idle
subtraction matters for measured, machine-wide meters (NVML, RAPL).
"""

from __future__ import annotations

import datetime as _dt
import math
import time
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from ecopt.meters.base import ComponentEnergy, Measurement, Meter, WindowHandle

__all__ = ["measure_idle", "IdleSubtracted", "IdleSubtractingMeter", "subtract_idle"]


def measure_idle(meter: Meter, seconds: float) -> dict[str, Any]:
    """Measure the average power of each component while this process sleeps.

    Args:
        meter: The meter to read (the study's meter).
        seconds: How long to measure (a few seconds; ``> 0``).

    Returns:
        A JSON-able dict: ``seconds`` (measured duration), ``power_w`` (total),
        ``components`` (name -> ``{"power_w", "source", "measured"}``),
        ``measured`` (every component measured), ``meter`` and ``measured_at``.

    Raises:
        ValueError: for ``seconds <= 0`` or not finite.
    """
    if not (isinstance(seconds, (int, float)) and math.isfinite(seconds) and seconds > 0):
        raise ValueError(f"idle seconds must be finite and > 0, got {seconds!r}")
    at = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    h = meter.start()
    time.sleep(float(seconds))
    m = meter.stop(h)
    d = m.duration_s if m.duration_s > 0 else float(seconds)
    return {
        "seconds": m.duration_s,
        "power_w": m.energy_j / d,
        "components": {k: {"power_w": c.energy_j / d, "source": c.source, "measured": c.measured}
                       for k, c in m.components.items()},
        "measured": m.measured,
        "meter": m.meter,
        "measured_at": at,
    }


class IdleSubtractingMeter(Meter):
    """Wrap a meter and subtract idle power x duration per component (raw kept).

    Args:
        inner: The meter that measures.
        idle: A record from :func:`measure_idle`.
    """

    def __init__(self, inner: Meter, idle: dict[str, Any]) -> None:
        super().__init__()
        self.inner = inner
        self.idle = dict(idle)
        self.name = inner.name

    def min_window_s(self) -> float:
        return self.inner.min_window_s()

    def start(self) -> WindowHandle:
        return self.inner.start()

    def stop(self, handle: WindowHandle) -> Measurement:
        m = self.inner.stop(handle)
        return subtract_idle(m, self.idle)

    def _start(self) -> Any:  # pragma: no cover - start/stop delegate to the inner meter
        raise NotImplementedError

    def _stop(self, state: Any, duration_s: float) -> dict[str, ComponentEnergy]:  # pragma: no cover
        raise NotImplementedError

    def describe(self) -> dict[str, Any]:
        d = dict(self.inner.describe())
        d["idle_subtracted"] = True
        d["idle_power_w"] = self.idle.get("power_w")
        return d

    def close(self) -> None:
        self.inner.close()


def subtract_idle(m: Measurement, idle: dict[str, Any]) -> Measurement:
    """A copy of ``m`` with idle power x duration subtracted per component, raw joules kept."""
    idle_comps = idle.get("components", {})
    comps: dict[str, ComponentEnergy] = {}
    extras = dict(m.extras)
    raw_total = 0.0
    idle_total = 0.0
    for k, c in m.components.items():
        p_idle = float(idle_comps.get(k, {}).get("power_w", 0.0))
        idle_j = p_idle * m.duration_s
        net = max(0.0, c.energy_j - idle_j)
        raw_total += c.energy_j
        idle_total += idle_j
        extras[f"raw_energy_j/{k}"] = c.energy_j
        note = f"net of idle {p_idle:.4g} W x {m.duration_s:.4g} s (raw {c.energy_j:.6g} J)"
        comps[k] = replace(c, energy_j=net, note=f"{c.note}; {note}" if c.note else note)
    extras["raw_energy_j"] = raw_total
    extras["idle_energy_j"] = idle_total
    details = {**m.details, "idle_subtracted": {"power_w": idle.get("power_w"),
                                                "seconds": idle.get("seconds"),
                                                "measured_at": idle.get("measured_at")}}
    return replace(m, components=comps, extras=extras, details=details)


class IdleSubtracted(Meter):
    """A meter whose study measures idle power once and subtracts it from every window.

    The idle power is measured for ``idle_s`` seconds when the study opens
    (:meth:`prepare`), or taken from the study's ``study.json`` when an earlier
    session measured it with the same meter; the record is kept there under
    ``"idle"`` (with ``subtracted``). Every window then has ``idle power x
    duration`` subtracted per component, never below zero, with the raw
    joules kept (:func:`subtract_idle`). Used without a study, it measures
    idle power before its first window.

    Args:
        meter: The meter that measures (a name or a :class:`~ecopt.Meter`;
            default ``"auto"``).
        idle_s: Seconds to measure idle power (a few; ``0``: only reuse a
            recorded measurement).
        subtract: Subtract it (default); ``False`` only measures and records it.

    Raises:
        ValueError: for a negative or non-finite ``idle_s``; when the study
            opens, for ``subtract`` with nothing to subtract (``idle_s=0`` and
            no record).

    Example:
        >>> study = ecopt.Study(space, objectives, storage="runs/gpu",
        ...                     meter=ecopt.meters.IdleSubtracted("nvml", idle_s=5))
    """

    def __init__(self, meter: str | Meter = "auto", *, idle_s: float = 5.0,
                 subtract: bool = True) -> None:
        super().__init__()
        if isinstance(idle_s, bool) or not isinstance(idle_s, (int, float)) \
                or not math.isfinite(idle_s) or idle_s < 0:
            raise ValueError(f"idle_s must be a finite number >= 0, got {idle_s!r}")
        if not isinstance(subtract, bool):
            raise ValueError(f"subtract must be True or False, got {subtract!r}")
        from ecopt.meters import get_meter

        self.inner = get_meter(meter)
        self.idle_s = float(idle_s)
        self.subtract = subtract
        #: The idle record in use (``None`` until measured or restored).
        self.idle: dict[str, Any] | None = None
        self.name = self.inner.name

    def prepare(self, recorded: Mapping[str, Any]) -> dict[str, Any]:
        old = recorded.get("idle")
        if not isinstance(old, dict) or old.get("meter") != self.inner.name:
            old = None  # none, or measured with another meter: not comparable
        if old is not None:
            idle = dict(old)
        elif self.idle_s > 0:
            idle = measure_idle(self.inner, self.idle_s)
        elif self.subtract:
            raise ValueError("subtracting idle power needs an idle measurement: pass idle_s > 0 "
                             "(a few seconds), got idle_s=0 and none recorded in the study")
        else:
            return {}
        idle["subtracted"] = self.subtract
        self.idle = idle
        return {"idle": dict(idle)}

    def min_window_s(self) -> float:
        return self.inner.min_window_s()

    def start(self) -> WindowHandle:
        if self.idle is None and self.idle_s > 0:
            self.prepare({})  # used on its own: measure before the first window
        return self.inner.start()

    def stop(self, handle: WindowHandle) -> Measurement:
        m = self.inner.stop(handle)
        return subtract_idle(m, self.idle) if self.subtract and self.idle is not None else m

    def _start(self) -> Any:  # pragma: no cover - start/stop delegate to the inner meter
        raise NotImplementedError

    def _stop(self, state: Any, duration_s: float) -> dict[str, ComponentEnergy]:  # pragma: no cover
        raise NotImplementedError

    def describe(self) -> dict[str, Any]:
        d = dict(self.inner.describe())
        if self.subtract and self.idle is not None:
            d["idle_subtracted"] = True
            d["idle_power_w"] = self.idle.get("power_w")
        return d

    def close(self) -> None:
        self.inner.close()
