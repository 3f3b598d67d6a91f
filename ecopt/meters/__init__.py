"""Energy meters with provenance.

``get_meter(spec)`` turns a name (``"auto"``, ``"nvml"``, ``"rapl"``,
``"codecarbon"``, ``"estimate"``, ``"wallclock"``) or a :class:`Meter` instance
into a meter. Heavy backends (NVML, CodeCarbon) are imported only when asked
for. See docs/energy.md for how each meter measures and how "auto" chooses.
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
    "measure_idle",
    "METER_NAMES",
]

#: Names ``get_meter`` understands.
METER_NAMES = ("auto", "nvml", "rapl", "codecarbon", "estimate", "wallclock")


def measure_idle(meter: Meter, seconds: float) -> dict[str, Any]:
    """Average power per component while idle (see :mod:`ecopt.meters.idle`)."""
    from ecopt.meters.idle import measure_idle as _measure_idle

    return _measure_idle(meter, seconds)


def get_meter(spec: str | Meter = "auto", **options: Any) -> Meter:
    """Build a meter from a name, or pass a :class:`Meter` instance through.

    Args:
        spec: A meter name from :data:`METER_NAMES` or a ``Meter``.
        **options: Passed to the meter's constructor (for ``"auto"``:
            ``rapl_root``, ``warn`` and the estimate's options).

    Raises:
        ValueError: for an unknown name or bad options.
        MeterUnavailableError: when a named backend cannot work here (NVML
            missing, RAPL absent or root-only, CodeCarbon not installed); the
            message says how to fix it. ``"auto"`` never raises this: it warns
            and falls back (see :mod:`ecopt.meters.auto`).
    """
    if isinstance(spec, Meter):
        return spec
    if spec == "estimate":
        return EstimateMeter(**options)
    if spec == "wallclock":
        return WallClockMeter()
    if spec == "auto":
        from ecopt.meters.auto import build_auto

        return build_auto(**options)
    if spec == "nvml":
        from ecopt.meters.nvml import NVMLMeter

        return NVMLMeter(**options)
    if spec == "rapl":
        from ecopt.meters.rapl import RaplMeter

        return RaplMeter(**options)
    if spec == "codecarbon":
        from ecopt.meters.codecarbon import CodeCarbonMeter

        return CodeCarbonMeter(**options)
    raise ValueError(f"unknown meter {spec!r}; expected one of {list(METER_NAMES)} or a Meter")
