"""Energy meters with provenance.

``get_meter(spec)`` turns a name (``"auto"``, ``"estimate"``, ``"wallclock"``...)
or a :class:`Meter` instance into a meter. Heavy backends (NVML, CodeCarbon) are
imported only when asked for.
"""

from __future__ import annotations

from typing import Any

from ecopt.meters.base import ComponentEnergy, Measurement, Meter, WallClockMeter, WindowHandle
from ecopt.meters.estimate import EstimateMeter

__all__ = [
    "ComponentEnergy",
    "Measurement",
    "Meter",
    "WindowHandle",
    "WallClockMeter",
    "EstimateMeter",
    "get_meter",
    "METER_NAMES",
]

#: Names ``get_meter`` understands.
METER_NAMES = ("auto", "estimate", "wallclock")


def get_meter(spec: str | Meter = "auto", **options: Any) -> Meter:
    """Build a meter from a name, or pass a :class:`Meter` instance through.

    Args:
        spec: A meter name from :data:`METER_NAMES` or a ``Meter``.
        **options: Passed to the meter's constructor.

    Raises:
        ValueError: for an unknown name.
    """
    if isinstance(spec, Meter):
        return spec
    if spec == "estimate":
        return EstimateMeter(**options)
    if spec == "wallclock":
        return WallClockMeter()
    if spec == "auto":
        # Until the hardware meters land, "auto" is the labelled estimate.
        return EstimateMeter(**options)
    raise ValueError(f"unknown meter {spec!r}; expected one of {list(METER_NAMES)} or a Meter")
