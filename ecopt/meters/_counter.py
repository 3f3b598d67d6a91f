"""The energy-counter window rule, one home for every GPU meter (NVML's, AMD's through Zeus).

A GPU energy counter is refreshed every *period* (NVML: 20-100 ms; amdsmi:
about 1 ms), so each read is up to one period stale. For a window of
``duration_s``:

* shorter than one period, or the counter did not move: the counter cannot
  resolve it; the energy is **power now x duration** (``<prefix>-instant-power``,
  or ``<prefix>-average-power`` flagged ``average-power`` when only an averaged
  reading exists), flagged ``short-window``; never a silent 0 J, and never the
  counter's jump when a tick falls inside (a whole period's energy: +60% to
  +380% on 10-60 ms windows at a 100 ms period on an H200);
* shorter than :data:`~ecopt.meters.base.MIN_WINDOW_PERIODS` periods: the
  counter's difference, flagged ``short-window`` (each end may be a period stale);
* else the counter's difference (``<prefix>-energy-counter``).

:func:`measure_update_period` measures the period by polling the counter, as
Zeus infers its power counter's period (``zeus/monitor/power.py``).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from ecopt.meters.base import (
    FLAG_AVERAGE_POWER,
    FLAG_SHORT_WINDOW,
    MIN_WINDOW_PERIODS,
    ComponentEnergy,
)

__all__ = ["counter_window_energy", "measure_update_period"]


def measure_update_period(read: Callable[[], float], max_s: float = 0.5, changes: int = 4,
                          poll_s: float = 0.0005) -> float | None:
    """A counter's update period: poll ``read`` until its value changed ``changes`` times.

    The period is the mean gap between the observed changes (each seen within
    ``poll_s`` of happening, so the mean over ``changes - 1`` gaps is off by at
    most ``poll_s / (changes - 1)``).

    Args:
        read: Reads the counter (any unit).
        max_s: Give up after this long (a device that draws power changes its
            counter at every refresh, so only a stuck or fake counter gets here).
        changes: Changes to observe (``>= 2``).
        poll_s: Sleep between reads.

    Returns:
        Seconds, or ``None`` when fewer than two changes were seen in ``max_s``.
    """
    t_end = time.perf_counter() + max_s
    last = read()
    seen: list[float] = []
    while len(seen) < changes and time.perf_counter() < t_end:
        time.sleep(poll_s)
        e = read()
        if e != last:
            seen.append(time.perf_counter())
            last = e
    if len(seen) < 2:
        return None
    return (seen[-1] - seen[0]) / (len(seen) - 1)


def counter_window_energy(delta_mj: int, duration_s: float, period_s: float, period_how: str,
                          power_w: Callable[[], float], power_errors: tuple[type[BaseException], ...],
                          *, prefix: str, instant: bool, reading: str,
                          notes: list[str] | None = None, flags: list[str] | None = None
                          ) -> ComponentEnergy:
    """One GPU's energy over a window from its counter's difference (see the module docstring).

    Args:
        delta_mj: The counter's difference over the window, mJ (wraps and resets
            already handled by the caller, with their notes and flags).
        duration_s: The window's length, seconds.
        period_s: The counter's update period, seconds.
        period_how: How the period is known ("measured at start-up", "given"...).
        power_w: Reads the device's power now, watts.
        power_errors: What ``power_w`` raises when power is unreadable.
        prefix: Source prefix (``"nvml"``, ``"amd"``).
        instant: ``power_w`` is an instantaneous reading (else averaged).
        reading: Words for the reading, in the note.
        notes, flags: Notes and flags so far (the caller's wrap or reset).
    """
    notes = list(notes or [])
    flags = list(flags or [])
    counter_j = delta_mj / 1000.0
    ms = duration_s * 1000
    if delta_mj == 0 or duration_s < period_s:
        flags.append(FLAG_SHORT_WINDOW)
        try:
            watts = power_w()
        except power_errors as exc:
            notes.append(f"window of {ms:.3g} ms is shorter than the energy counter's "
                         f"update period ({period_s * 1000:.3g} ms) and power is unreadable "
                         f"({exc}): energy may be underestimated")
            return ComponentEnergy(counter_j, f"{prefix}-energy-counter", True,
                                   "; ".join(notes), tuple(sorted(set(flags))))
        if not instant:
            flags.append(FLAG_AVERAGE_POWER)
        notes.append(f"window of {ms:.3g} ms is shorter than the energy counter's update "
                     f"period ({period_s * 1000:.3g} ms, {period_how}; counter moved "
                     f"{counter_j:.4g} J): energy = {watts:.4g} W {reading} power x duration")
        return ComponentEnergy(watts * duration_s,
                               f"{prefix}-instant-power" if instant else f"{prefix}-average-power",
                               True, "; ".join(notes), tuple(sorted(set(flags))))
    if duration_s < MIN_WINDOW_PERIODS * period_s:
        flags.append(FLAG_SHORT_WINDOW)
        notes.append(f"window of {ms:.3g} ms spans {duration_s / period_s:.3g} energy-counter "
                     f"periods ({period_s * 1000:.3g} ms, {period_how}), fewer than "
                     f"{MIN_WINDOW_PERIODS}: each end may be one period stale, up to "
                     f"{100 * period_s / duration_s:.0f}% of the energy")
    return ComponentEnergy(counter_j, f"{prefix}-energy-counter", True,
                           "; ".join(notes) or None, tuple(sorted(set(flags))))
