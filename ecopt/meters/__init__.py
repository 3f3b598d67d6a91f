"""Energy meters with provenance.

``get_meter(spec)`` turns a name (``"auto"``, ``"nvml"``, ``"amd"``,
``"apple"``, ``"jetson"``, ``"rapl"``, ``"rapl-zeusd"``, ``"codecarbon"``,
``"estimate"``, ``"wallclock"``) or a :class:`Meter` instance into a meter,
through :mod:`ecopt.registry` (where installed packages add their own meters by
entry point; ``"auto"`` considers them too). Heavy backends (NVML, Zeus,
CodeCarbon) are imported only when asked for. :class:`IdleSubtracted` wraps any meter to
measure idle power once per study and subtract it. See docs/energy.md for how
each meter measures and how "auto" chooses.
"""

from __future__ import annotations

from typing import Any

from ecopt import registry
from ecopt.meters.base import ComponentEnergy, Measurement, Meter, WallClockMeter, WindowHandle
from ecopt.meters.estimate import EstimateMeter
from ecopt.meters.idle import IdleSubtracted

__all__ = [
    "ComponentEnergy",
    "Measurement",
    "Meter",
    "WindowHandle",
    "WallClockMeter",
    "EstimateMeter",
    "IdleSubtracted",
    "get_meter",
    "measure_idle",
    "METER_NAMES",
]

#: Built-in names ``get_meter`` understands (third-party ones come through
#: :mod:`ecopt.registry`'s entry points).
METER_NAMES = tuple(registry.BUILTIN["meters"])


def measure_idle(meter: Meter, seconds: float) -> dict[str, Any]:
    """Average power per component while idle (see :mod:`ecopt.meters.idle`)."""
    from ecopt.meters.idle import measure_idle as _measure_idle

    return _measure_idle(meter, seconds)


def get_meter(spec: str | Meter = "auto", **options: Any) -> Meter:
    """Build a meter from a name (:mod:`ecopt.registry`), or pass a :class:`Meter` instance through.

    Args:
        spec: A meter name (:data:`METER_NAMES`, or one a package registered) or a ``Meter``.
        **options: Passed to the meter's constructor (for ``"auto"``:
            ``rapl_root``, ``warn`` and the estimate's options).

    Raises:
        ValueError: for an unknown name or bad options.
        MeterUnavailableError: when a named backend cannot work here (NVML
            missing, RAPL absent or root-only, CodeCarbon not installed); the
            message says how to fix it. ``"auto"`` never raises this: it warns
            and falls back (see :mod:`ecopt.meters.auto`).
    """
    return registry.create("meters", spec, base=Meter, **options)
