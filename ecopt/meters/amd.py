"""AMD GPU energy through Zeus's device layer over amdsmi (``meter="amd"``).

The reads are Zeus's (``zeus.device.gpu.AMDGPUs``: amdsmi on ROCm 6.2+); the
window rules are ecopt's, the same as the NVML meter's
(:mod:`ecopt.meters.nvml`):

* **Energy counter** (``source="amd-energy-counter"``): amdsmi's energy
  accumulator, in mJ through Zeus (``get_total_energy_consumption``). Zeus
  checks it against power for 0.5 s when it starts and turns it off where it
  is known to be wrong (some MI250 dies, `ROCm/amdsmi#38`_); such GPUs are
  power-sampled instead. The counter's update period is measured when the
  meter starts (polled until it changed a few times) and recorded; a window
  shorter than :data:`~ecopt.meters.base.MIN_WINDOW_PERIODS` periods is
  flagged ``short-window``, and one shorter than a period (or in which the
  counter did not move) is priced at **instant power x duration**
  (``source="amd-instant-power"``, flagged), never a silent 0 J.
* **Power sampling** (``source="amd-power-sampling"``): GPUs without a
  trustworthy counter: a background thread samples power every
  ``sampling_period_s`` and integrates (trapezoid); each window also samples
  at both ends.

Power is ``current_socket_power`` (instant) where amdsmi reports it, else
``average_socket_power`` (flagged ``average-power``); both are whole watts.

**Which GPUs.** Components are ``gpu:<HIP index>``, the index torch's ROCm
build calls ``cuda:N``: Zeus maps it to amdsmi's handle by
``amdsmi_get_gpu_enumeration_info(...)["hip_id"]`` (amdsmi's own order is by
PCI address and can differ) and honours ``HIP_VISIBLE_DEVICES`` /
``CUDA_VISIBLE_DEVICES``. As for NVML, ``gpus=[...]`` fixes the GPUs, else each
window reads the GPUs the work declared with
:func:`ecopt.meters.gpus.gpu_scope`, else every visible one.

.. _ROCm/amdsmi#38: https://github.com/ROCm/amdsmi/issues/38
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ecopt.errors import MeterError, MeterUnavailableError
from ecopt.meters._counter import counter_window_energy, measure_update_period
from ecopt.meters._gpu_window import GpuWindowMeter, PowerSampler
from ecopt.meters._zeus import ZeusMeter, zeus_module
from ecopt.meters.base import (
    FLAG_LOWER_BOUND,
    MIN_WINDOW_PERIODS,
    ComponentEnergy,
)
from ecopt.meters.gpus import current_gpu_scope, select_gpus

__all__ = ["AMDMeter", "forget_managers", "zeus_amd_gpus"]

_WHAT = "the AMD GPU meter"
#: The period assumed when the counter did not move while polled (recorded as assumed).
DEFAULT_COUNTER_PERIOD_S = 0.001

# One Zeus AMDGPUs per amdsmi module: each instance shuts amdsmi down when it is collected,
# which would pull the handles from under a second one.
_MANAGERS: dict[int, Any] = {}
_MANAGERS_LOCK = threading.Lock()


def forget_managers() -> None:
    """Drop the cached Zeus ``AMDGPUs`` (tests that swap the amdsmi module call it)."""
    with _MANAGERS_LOCK:
        _MANAGERS.clear()


def _manager() -> Any:
    zamd = zeus_module("zeus.device.gpu.amd", _WHAT)
    gerr = zeus_module("zeus.device.exception", _WHAT)
    key = id(zamd.amdsmi)
    with _MANAGERS_LOCK:
        if key in _MANAGERS:
            return _MANAGERS[key]
        if not zamd.amdsmi_is_available():
            raise MeterUnavailableError(
                "amdsmi is not usable here (not installed, no ROCm 6.2+ library, or no AMD GPU "
                "driver: `amd-smi list` should list the GPUs); pip install amdsmi matching the "
                "ROCm version, or use meter='estimate'")
        try:
            mgr = zamd.AMDGPUs()
        except gerr.ZeusBaseGPUError as exc:
            raise MeterUnavailableError(f"Zeus could not start AMD GPU management: {exc}"
                                        ) from None
        if len(mgr) == 0:
            raise MeterUnavailableError("amdsmi lists no visible AMD GPU (HIP_VISIBLE_DEVICES="
                                        "/CUDA_VISIBLE_DEVICES hide them?); use "
                                        "meter='estimate'")
        _MANAGERS[key] = mgr
        return mgr


def zeus_amd_gpus() -> list[Any]:
    """Zeus's ``AMDGPU`` objects of the visible AMD GPUs, by HIP index (the meter's own manager).

    Raises:
        MeterUnavailableError: without Zeus, amdsmi or an AMD GPU.
    """
    return list(_manager().gpus)


@dataclass
class _AmdGpu:
    index: int
    dev: Any  # zeus.device.gpu.amd.AMDGPU
    name: str
    counter: bool
    instant: bool
    period_s: float
    period_how: str

    @property
    def reading(self) -> str:
        return ("instant (current_socket_power)" if self.instant
                else "averaged (average_socket_power)")

    def facts(self) -> dict[str, Any]:
        return {"component": f"gpu:{self.index}", "hip_index": self.index, "name": self.name,
                "method": "energy-counter" if self.counter else "power-sampling",
                "power_reading": self.reading,
                "counter_period_s": self.period_s if self.counter else None,
                "counter_period": self.period_how if self.counter else None,
                "via": "zeus.device.gpu.AMDGPUs (amdsmi)"}


class AMDMeter(GpuWindowMeter[_AmdGpu], ZeusMeter):
    """AMD GPU energy through Zeus (amdsmi): the energy counter where trustworthy, else sampled power.

    Args:
        gpus: HIP indices to measure (torch's ``cuda:N`` on ROCm). Default: per
            window, the GPUs declared with :func:`ecopt.meters.gpus.gpu_scope`,
            else every visible GPU.
        mode: ``"auto"`` (the counter where trustworthy, else sampling),
            ``"counter"`` (error if a GPU lacks it) or ``"sampling"``.
        sampling_period_s: Seconds between power samples for GPUs without a
            trustworthy counter (or every GPU with ``mode="sampling"``).
        counter_period_s: The counter's update period; ``None`` (default):
            measured per GPU model at start.

    Raises:
        MeterUnavailableError: without Zeus or amdsmi, or without an AMD GPU.
        ValueError: for a bad GPU index or a non-positive period.

    Example:
        >>> meter = ecopt.meters.get_meter("amd")
        >>> w = meter.start(); train(); m = meter.stop(w)
        >>> m.components["gpu:0"].source
        'amd-energy-counter'
    """

    name = "amd"
    source_prefix = "amd"
    auto_priority = 90
    auto_covers = frozenset({"gpu"})

    def __init__(self, gpus: list[int] | None = None, mode: str = "auto",
                 sampling_period_s: float = 0.1, counter_period_s: float | None = None) -> None:
        super().__init__()
        if mode not in ("auto", "counter", "sampling"):
            raise ValueError(f"mode must be 'auto', 'counter' or 'sampling', got {mode!r}")
        self.mode = mode
        if not sampling_period_s > 0:
            raise ValueError(f"sampling_period_s > 0 must hold, got {sampling_period_s}")
        if counter_period_s is not None and not counter_period_s >= 0:
            raise ValueError(f"counter_period_s >= 0 must hold, got {counter_period_s}")
        self.gpus_requested = None if gpus is None else [int(g) for g in gpus]
        self.sampling_period_s = float(sampling_period_s)
        self.counter_period_s = counter_period_s
        self._setup()

    def _setup(self) -> None:
        gerr = zeus_module("zeus.device.exception", _WHAT)
        self._gerr = gerr.ZeusBaseGPUError
        mgr = _manager()
        devs = list(mgr.gpus)
        chosen = select_gpus(self.gpus_requested, len(devs))
        periods: dict[str, tuple[float, str]] = {}
        self._gpus: dict[int, _AmdGpu] = {}
        for i in chosen:
            dev = devs[i]
            try:
                name = str(dev.get_name())
                counter = (self.mode != "sampling"
                           and bool(dev.supports_get_total_energy_consumption()))
                if self.mode == "counter" and not counter:
                    raise MeterUnavailableError(
                        f"AMD GPU {i} ({name}) has no trustworthy energy counter (Zeus turned it "
                        "off at start-up); use mode='sampling' or 'auto'")
                instant = self._supports(dev.get_instant_power_usage)
                if not instant and not self._supports(dev.get_average_power_usage) \
                        and not counter:
                    raise MeterUnavailableError(
                        f"AMD GPU {i} ({name}) reports neither an energy counter nor power "
                        "(a dual-die MI250's second die: its energy is in the first die's "
                        "reading); meter the first die, or use meter='estimate'")
            except self._gerr as exc:
                raise MeterUnavailableError(f"AMD GPU {i}: {exc}") from None
            period, how = 0.0, ""
            if counter:
                if self.counter_period_s is not None:
                    period, how = self.counter_period_s, "given"
                elif name in periods:
                    period, how = periods[name]
                else:
                    p = measure_update_period(dev.get_total_energy_consumption)
                    period, how = ((p, "measured at start-up") if p is not None else
                                   (DEFAULT_COUNTER_PERIOD_S, "assumed: the counter did not "
                                    "change while polled for 0.5 s at start-up"))
                    periods[name] = (period, how)
            self._gpus[i] = _AmdGpu(i, dev, name, counter, instant, period, how)
        from ecopt.host import note_gpu_facts

        for g in self._gpus.values():
            note_gpu_facts(f"amd-hip{g.index}", g.facts())
        self._sampler: PowerSampler[_AmdGpu] | None = None
        self._sampler_lock = threading.Lock()

    def _supports(self, fn: Callable[[], Any]) -> bool:
        try:
            fn()
            return True
        except self._gerr:
            return False

    def __getstate__(self) -> dict[str, Any]:
        return {"gpus_requested": self.gpus_requested, "mode": self.mode,
                "sampling_period_s": self.sampling_period_s,
                "counter_period_s": self.counter_period_s}

    @classmethod
    def probe(cls, **options: Any) -> tuple[bool, str]:
        """Zeus and amdsmi start and list an AMD GPU (no counter polling)."""
        try:
            _manager()
        except Exception as exc:  # noqa: BLE001 - a probe never raises
            return False, f"{type(exc).__name__}: {exc}"
        return True, ""

    def _window_gpus(self) -> list[_AmdGpu]:
        scope = current_gpu_scope() if self.gpus_requested is None else None
        if scope is None:
            return list(self._gpus.values())
        missing = [i for i in scope if i not in self._gpus]
        if missing:
            raise MeterError(f"the work declared device(s) {['cuda:%d' % i for i in missing]}, "
                             f"but this AMD meter sees only {self.components}; declare a "
                             "visible device")
        return [self._gpus[i] for i in scope]

    def power_w(self, g: _AmdGpu) -> float:
        """The GPU's power now, watts (instant where reported, else averaged)."""
        mw = g.dev.get_instant_power_usage() if g.instant else g.dev.get_average_power_usage()
        return float(mw) / 1000.0

    def _read_counters(self, gpus: list[_AmdGpu]) -> dict[int, int]:
        out: dict[int, int] = {}
        for g in gpus:
            if g.counter:
                try:
                    out[g.index] = int(g.dev.get_total_energy_consumption())
                except self._gerr as exc:
                    raise MeterError(f"amdsmi failed reading the energy counter of gpu:{g.index} "
                                     f"({g.name}): {exc}") from None
        return out

    def _new_sampler(self, gpus: list[_AmdGpu]) -> PowerSampler[_AmdGpu]:
        return PowerSampler(gpus, self.power_w, self.sampling_period_s,
                            thread_name="ecopt-amd-sampler", read_errors=(Exception,),
                            failed="AMD power sampling failed",
                            read_failed="amdsmi failed reading GPU power")

    def _counter_energy(self, g: _AmdGpu, start_mj: int, end_mj: int, duration_s: float
                        ) -> ComponentEnergy:
        # The rule every GPU meter shares (ecopt.meters._counter), over amdsmi's accumulator.
        delta = end_mj - start_mj
        notes: list[str] = []
        flags: list[str] = []
        if delta < 0:  # the driver reloaded: the accumulator restarted
            delta = end_mj
            notes.append("energy counter reset during the window (driver reload); energy is a "
                         "lower bound")
            flags.append(FLAG_LOWER_BOUND)
        return counter_window_energy(delta, duration_s, g.period_s, g.period_how,
                                     lambda: self.power_w(g), (self._gerr,), prefix="amd",
                                     instant=g.instant, reading=g.reading, notes=notes,
                                     flags=flags)

    def describe(self) -> dict[str, Any]:
        return {"meter": self.name, "measured": True,
                "gpus": [g.facts() for g in self._gpus.values()],
                "sources": {f"gpu:{g.index}": "amd-energy-counter" if g.counter
                            else "amd-power-sampling" for g in self._gpus.values()},
                "mode": self.mode, "sampling_period_s": self.sampling_period_s,
                "counter_period_s": self.counter_period_s,
                "min_window_periods": MIN_WINDOW_PERIODS}

    def summary(self) -> str:
        return (f"Zeus (amdsmi) reads {len(self._gpus)} AMD GPU(s): "
                + ", ".join(f"gpu:{g.index} {g.name} "
                            f"({'energy-counter' if g.counter else 'power-sampling'})"
                            for g in self._gpus.values()))
