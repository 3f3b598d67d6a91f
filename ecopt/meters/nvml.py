"""NVIDIA GPU energy through NVML (the ``nvidia-ml-py`` package, module ``pynvml``).

Two ways to get joules, chosen per GPU at construction:

* **Energy counter** (``source="nvml-energy-counter"``): Volta and newer GPUs keep
  a total-energy counter in millijoules since the driver loaded
  (``nvmlDeviceGetTotalEnergyConsumption``). A window's energy is the difference
  of two reads, which costs a few microseconds and misses nothing in between.
  The counter is refreshed periodically (every ~20-100 ms depending on the GPU),
  so each read is up to one period stale: **the period is measured per GPU
  model when the meter starts** (the counter is polled until it has changed a
  few times, as Zeus infers its power counter's period at start-up:
  ``zeus/monitor/power.py``, ``infer_counter_update_period``) and recorded in
  ``describe()``, every measurement's ``details`` and the host facts. A window
  shorter than :data:`~ecopt.meters.base.MIN_WINDOW_PERIODS` (10) periods is
  flagged ``short-window`` (one period of rounding at each end is then more
  than ~10%); one shorter than a period, or in which the counter did not move,
  cannot be resolved by the counter at all and is priced at **instant power x
  duration** (``source="nvml-instant-power"``, flagged), never reported as a
  silent 0 J (Zeus's ``approx_instant_energy`` makes the same choice), nor as
  the counter's jump when a tick falls inside it (a whole period's energy).
* **Power sampling** (``source="nvml-power-sampling"``): GPUs without the
  counter report power only. A background thread samples it every
  ``sampling_period_s`` and integrates over time with the trapezoid rule; each
  window also takes one sample at its start and at its end, so the integral
  covers the window exactly.

**Which power reading.** ``nvmlDeviceGetPowerUsage`` is "power averaged over
1 sec interval" on Ampere (except GA100) and newer GPUs, instantaneous only on
GA100 and older (NVML API reference, ``nvmlDeviceGetPowerUsage``), so a 0.1 s
window priced with it is mostly the power of the second before. The
instantaneous draw is the field ``NVML_FI_DEV_POWER_INSTANT`` of
``nvmlDeviceGetFieldValues`` (what Zeus reads since v0.9.1, ``get_instant_power_usage``
in ``zeus/device/gpu/nvidia.py``); ecopt uses it wherever the GPU supports it
(GPU scope, the field's default) and falls back to ``nvmlDeviceGetPowerUsage``
otherwise, labelled ``nvml-average-power`` and flagged ``average-power``.
The sampling path samples the same reading.

**Which GPUs.** Components are ``gpu:<cuda index>``; CUDA indices are matched
to NVML's devices by UUID (:mod:`ecopt.meters.gpus`). With ``gpus=[...]`` the
meter reads those GPUs; without, each window reads the GPUs the work declared
with :func:`ecopt.meters.gpus.gpu_scope` (every workload declares its
``device``), and every GPU this process can see (``CUDA_VISIBLE_DEVICES``)
when nothing was declared. MIG devices are refused (see :mod:`ecopt.meters.gpus`).
Queued CUDA work on the window's GPUs is waited for, device by device, before
both timestamps (:meth:`ecopt.meters.base.Meter.start` / ``stop``).
"""

from __future__ import annotations

import importlib
import os
import threading
import weakref
from dataclasses import dataclass
from typing import Any

from ecopt.errors import MeterError, MeterUnavailableError
from ecopt.meters._counter import counter_window_energy, measure_update_period
from ecopt.meters._gpu_window import GpuWindowMeter, PowerSampler
from ecopt.meters.base import (
    FLAG_LOWER_BOUND,
    MIN_WINDOW_PERIODS,
    ComponentEnergy,
)
from ecopt.meters.gpus import (
    CudaGpu,
    cuda_gpus,
    current_gpu_scope,
    mig_refusal,
    select_gpus,
    visible_gpu_selectors,
)

__all__ = ["NVMLMeter", "visible_gpu_selectors", "visible_gpus", "select_gpus",
           "measure_counter_period", "instant_power_mw", "DEFAULT_COUNTER_PERIOD_S"]

_INSTALL_HINT = "pip install 'ecopt[gpu]' (nvidia-ml-py)"
#: NVML energy counters are unsigned 64-bit millijoules.
_U64 = 1 << 64
#: The counter period assumed when it cannot be measured (the slow end of the 20-100 ms
#: NVML is reported to refresh at; recorded as assumed).
DEFAULT_COUNTER_PERIOD_S = 0.1
#: pynvml's NVML_FI_DEV_POWER_INSTANT (nvml.h), for bindings that predate the constant.
_FI_DEV_POWER_INSTANT = 186

# Measured counter periods, per pynvml module (the real one, or a test's fake) and GPU model.
_PERIODS: weakref.WeakKeyDictionary[Any, dict[str, float | None]] = weakref.WeakKeyDictionary()
_PERIODS_LOCK = threading.Lock()


def _pynvml() -> Any:
    """Import ``pynvml`` (patched into ``sys.modules`` by tests as a fake)."""
    try:
        return importlib.import_module("pynvml")
    except ImportError as exc:
        raise MeterUnavailableError(
            f"the NVML meter needs nvidia-ml-py, which is not installed ({exc}); {_INSTALL_HINT}, "
            "or use meter='estimate'") from None


def visible_gpus(nv: Any, count: int | None = None) -> list[tuple[int, Any]]:
    """``(nvml index, handle)`` of each GPU CUDA can see, in CUDA's order, matched by UUID.

    See :func:`ecopt.meters.gpus.cuda_gpus` (which also says how each was
    matched and whether it is MIG). ``count`` is accepted for compatibility and
    not needed.

    Raises:
        MeterError: when CUDA's order cannot be known on this host.
        pynvml.NVMLError: from NVML.
    """
    return [(g.nvml_index, g.handle) for g in cuda_gpus(nv)]


def instant_power_mw(nv: Any, handle: Any) -> int | None:
    """The GPU's instantaneous draw in mW (``NVML_FI_DEV_POWER_INSTANT``), ``None`` if unsupported.

    Raises:
        pynvml.NVMLError: when the call itself fails (GPU lost, driver gone).
    """
    fid = int(getattr(nv, "NVML_FI_DEV_POWER_INSTANT", _FI_DEV_POWER_INSTANT))
    fn = getattr(nv, "nvmlDeviceGetFieldValues", None)
    if fn is None:
        return None
    v = fn(handle, [fid])[0]
    if int(v.nvmlReturn) != int(getattr(nv, "NVML_SUCCESS", 0)):
        return None
    return int(v.value.uiVal)


def measure_counter_period(nv: Any, handle: Any, max_s: float = 0.5, changes: int = 4,
                           poll_s: float = 0.0005) -> float | None:
    """The energy counter's update period, measured by polling it until it changed ``changes`` times.

    :func:`ecopt.meters._counter.measure_update_period` over
    ``nvmlDeviceGetTotalEnergyConsumption``.

    Args:
        nv: The initialised ``pynvml`` module.
        handle: The GPU's handle.
        max_s, changes, poll_s: See :func:`~ecopt.meters._counter.measure_update_period`.

    Returns:
        Seconds, or ``None`` when fewer than two changes were seen in ``max_s``.
    """
    return measure_update_period(lambda: nv.nvmlDeviceGetTotalEnergyConsumption(handle), max_s,
                                 changes, poll_s)


@dataclass
class _Gpu:
    """One metered GPU: its identity, what NVML offers on it, and its counter's period."""

    cuda: CudaGpu
    counter: bool
    instant: bool
    period_s: float
    period_how: str

    @property
    def cuda_index(self) -> int:
        return self.cuda.cuda_index

    @property
    def index(self) -> int:
        """The CUDA index (the shared window logic's key)."""
        return self.cuda.cuda_index

    @property
    def handle(self) -> Any:
        return self.cuda.handle

    @property
    def name(self) -> str:
        return self.cuda.name

    @property
    def reading(self) -> str:
        return ("instant (NVML_FI_DEV_POWER_INSTANT)" if self.instant
                else "averaged (nvmlDeviceGetPowerUsage: 1 s on Ampere and newer except GA100)")

    def facts(self) -> dict[str, Any]:
        return {**self.cuda.facts(), "component": f"gpu:{self.cuda_index}",
                "method": "energy-counter" if self.counter else "power-sampling",
                "power_reading": self.reading,
                "counter_period_s": self.period_s if self.counter else None,
                "counter_period": self.period_how if self.counter else None}


class NVMLMeter(GpuWindowMeter[_Gpu]):
    """GPU energy from NVML: energy counter where supported, else sampled power.

    Args:
        gpus: CUDA indices to measure. Index ``i`` is what torch calls
            ``cuda:i`` (the ``i``-th GPU of ``CUDA_VISIBLE_DEVICES`` when it is
            set). Default: per window, the GPUs the work declared with
            :func:`ecopt.meters.gpus.gpu_scope` (the workloads declare their
            ``device``), else every visible GPU.
        mode: ``"auto"`` (counter where supported, else sampling),
            ``"counter"`` (error if a GPU lacks the counter) or ``"sampling"``.
        sampling_period_s: Seconds between power samples in sampling mode.
        counter_period_s: The energy counter's update period. ``None``
            (default): measured per GPU model when the meter starts (about
            0.1-0.4 s, once per process), 0.1 s assumed (and recorded so) if the
            counter does not move. A number is taken as given.

    Raises:
        MeterUnavailableError: when nvidia-ml-py is missing, NVML cannot start
            (no driver), there is no GPU, or a GPU to meter is MIG.
        ValueError: for a GPU index out of range, a bad mode or period.
        MeterError: with ``mode="counter"`` on a GPU without the counter, or
            when CUDA's GPU order cannot be known (see :mod:`ecopt.meters.gpus`).

    Example:
        >>> meter = NVMLMeter(gpus=[0])
        >>> w = meter.start(); train(); m = meter.stop(w)
        >>> m.components["gpu:0"].source, m.flags
        ('nvml-energy-counter', ())
    """

    name = "nvml"
    source_prefix = "nvml"
    auto_priority = 100
    auto_covers = frozenset({"gpu"})

    def __init__(self, gpus: list[int] | tuple[int, ...] | None = None, mode: str = "auto",
                 sampling_period_s: float = 0.1, counter_period_s: float | None = None) -> None:
        super().__init__()
        if mode not in ("auto", "counter", "sampling"):
            raise ValueError(f"mode must be 'auto', 'counter' or 'sampling', got {mode!r}")
        if not (sampling_period_s > 0):
            raise ValueError(f"sampling_period_s > 0 must hold, got {sampling_period_s}")
        if counter_period_s is not None and not (counter_period_s >= 0):
            raise ValueError(f"counter_period_s >= 0 (or None: measured) must hold, got "
                             f"{counter_period_s}")
        self.gpus_requested = None if gpus is None else [int(g) for g in gpus]
        self.mode = mode
        self.sampling_period_s = float(sampling_period_s)
        self.counter_period_s = None if counter_period_s is None else float(counter_period_s)
        self._carried_periods: dict[str, tuple[float, str]] = {}
        self._setup()

    # -- setup ---------------------------------------------------------------
    def _setup(self) -> None:
        nv = _pynvml()
        self._nv = nv
        try:
            nv.nvmlInit()
        except nv.NVMLError as exc:
            raise MeterUnavailableError(
                f"NVML could not start ({exc}): no NVIDIA driver on this machine? Install the "
                "driver, or use meter='estimate'") from None
        try:
            visible = cuda_gpus(nv)
        except nv.NVMLError as exc:
            raise MeterError(f"NVML failed while listing GPUs: {exc}") from None
        if not visible:
            raise MeterUnavailableError(
                f"NVML sees no usable GPU (CUDA_VISIBLE_DEVICES="
                f"{os.environ.get('CUDA_VISIBLE_DEVICES')!r}); use meter='estimate'")
        chosen = [visible[i] for i in select_gpus(self.gpus_requested, len(visible))]
        for c in chosen:
            if c.mig:
                raise MeterUnavailableError(
                    mig_refusal(c) + ("" if self.gpus_requested is not None else
                                      "; or meter other GPUs: pass gpus=[...] or set "
                                      "CUDA_VISIBLE_DEVICES to whole GPUs only"))
        self._gpus: dict[int, _Gpu] = {c.cuda_index: self._probe(c) for c in chosen}
        self._sampler: PowerSampler[_Gpu] | None = None
        self._sampler_lock = threading.Lock()
        from ecopt.host import note_gpu_facts

        for g in self._gpus.values():
            note_gpu_facts(g.cuda.uuid, {k: v for k, v in g.facts().items() if k != "uuid"})

    def _probe(self, c: CudaGpu) -> _Gpu:
        """What NVML offers on one GPU, failing now rather than mid-trial."""
        nv = self._nv
        counter = False
        if self.mode != "sampling":
            try:
                nv.nvmlDeviceGetTotalEnergyConsumption(c.handle)
                counter = True
            except nv.NVMLError as exc:
                if self.mode == "counter":
                    raise MeterError(
                        f"GPU {c.cuda_index} has no NVML energy counter ({exc}; Volta or newer is "
                        "needed); use mode='sampling' or 'auto'") from None
        try:
            instant = instant_power_mw(nv, c.handle) is not None
        except nv.NVMLError:
            instant = False
        if not instant:
            try:
                nv.nvmlDeviceGetPowerUsage(c.handle)  # the fallback reading: fail now if absent
            except nv.NVMLError as exc:
                if not counter:  # with the counter, short windows say power is unreadable
                    raise MeterError(f"NVML cannot read the power of GPU {c.cuda_index}: "
                                     f"{exc}") from None
        period, how = 0.0, ""
        if counter:
            period, how = self._counter_period(c)
        return _Gpu(c, counter, instant, period, how)

    def _counter_period(self, c: CudaGpu) -> tuple[float, str]:
        if self.counter_period_s is not None:
            return self.counter_period_s, "given"
        if c.uuid in self._carried_periods:
            return self._carried_periods[c.uuid]
        with _PERIODS_LOCK:
            cache = _PERIODS.setdefault(self._nv, {})
            if c.name not in cache:
                try:
                    cache[c.name] = measure_counter_period(self._nv, c.handle)
                except self._nv.NVMLError:
                    cache[c.name] = None
            period = cache[c.name]
        if period is None:
            return DEFAULT_COUNTER_PERIOD_S, ("assumed: the counter did not change while polled "
                                              "for 0.5 s at start-up")
        return period, "measured at start-up"

    def __getstate__(self) -> dict[str, Any]:
        # Settings only (and the measured periods, by GPU UUID, so workers on the same GPUs
        # need not poll again): handles and threads are rebuilt in the receiving process.
        gpus = getattr(self, "_gpus", {})
        return {"gpus_requested": self.gpus_requested, "mode": self.mode,
                "sampling_period_s": self.sampling_period_s,
                "counter_period_s": self.counter_period_s,
                "_carried_periods": {g.cuda.uuid: (g.period_s, g.period_how)
                                     for g in gpus.values() if g.counter}}

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(state)
        self._carried_periods = {k: (float(v[0]), str(v[1]))
                                 for k, v in state.get("_carried_periods", {}).items()}
        self._setup()

    @classmethod
    def is_available(cls, **options: Any) -> bool:
        return cls.probe(**options)[0]

    @classmethod
    def probe(cls, **options: Any) -> tuple[bool, str]:
        """Whether NVML starts and lists a GPU (no counter polling), and why not."""
        try:
            nv = _pynvml()
            nv.nvmlInit()
            n = int(nv.nvmlDeviceGetCount())
        except Exception as exc:  # noqa: BLE001 - a probe never raises
            return False, f"{type(exc).__name__}: {exc}"
        return (True, "") if n > 0 else (False, "NVML starts but lists no GPU")

    def summary(self) -> str:
        return (f"NVML reads {len(self._gpus)} GPU(s): "
                + ", ".join(f"{g['component']} {g['name']} ({g['method']})"
                            for g in self.describe()["gpus"]))

    # -- windows ---------------------------------------------------------------
    def _window_gpus(self) -> list[_Gpu]:
        """The GPUs a window opened now reads: ``gpus=``, else the declared scope, else all."""
        scope = current_gpu_scope() if self.gpus_requested is None else None
        if scope is None:
            return list(self._gpus.values())
        missing = [i for i in scope if i not in self._gpus]
        if missing:
            raise MeterError(
                f"the work declared device(s) {['cuda:%d' % i for i in missing]}, but this NVML "
                f"meter sees only {self.components} (CUDA_VISIBLE_DEVICES="
                f"{os.environ.get('CUDA_VISIBLE_DEVICES')!r}); declare a visible device")
        return [self._gpus[i] for i in scope]

    def _read_counters(self, gpus: list[_Gpu]) -> dict[int, int]:
        nv = self._nv
        out: dict[int, int] = {}
        for g in gpus:
            if g.counter:
                try:
                    out[g.cuda_index] = int(nv.nvmlDeviceGetTotalEnergyConsumption(g.handle))
                except nv.NVMLError as exc:
                    raise MeterError(
                        f"NVML failed reading the energy counter of gpu:{g.cuda_index} "
                        f"({g.name}): {exc}; the GPU may be lost or the driver reset") from None
        return out

    def power_w(self, g: _Gpu) -> float:
        """The GPU's power now, watts: the instant field where supported, else the average."""
        nv = self._nv
        if g.instant:
            mw = instant_power_mw(nv, g.handle)
            if mw is not None:
                return mw / 1000.0
        return float(nv.nvmlDeviceGetPowerUsage(g.handle)) / 1000.0

    def _new_sampler(self, gpus: list[_Gpu]) -> PowerSampler[_Gpu]:
        return PowerSampler(gpus, self.power_w, self.sampling_period_s,
                            thread_name="ecopt-nvml-sampler", read_errors=(self._nv.NVMLError,),
                            failed="NVML power sampling failed",
                            read_failed="NVML failed reading GPU power",
                            hint="; the GPU may be lost or the driver reset")

    def _counter_energy(self, g: _Gpu, start_mj: int, end_mj: int, duration_s: float
                        ) -> ComponentEnergy:
        delta = end_mj - start_mj
        notes: list[str] = []
        flags: list[str] = []
        if delta < 0:
            if start_mj > _U64 - (1 << 40):
                delta += _U64  # the 64-bit counter wrapped
                notes.append("energy counter wrapped around 2**64 mJ during the window")
            else:
                # The driver reloaded or the GPU was reset: the counter restarted at 0.
                delta = end_mj
                notes.append("energy counter reset during the window (driver reload or GPU "
                             "reset); energy is a lower bound")
                flags.append(FLAG_LOWER_BOUND)
        return counter_window_energy(delta, duration_s, g.period_s, g.period_how,
                                     lambda: self.power_w(g), (self._nv.NVMLError,),
                                     prefix="nvml", instant=g.instant, reading=g.reading,
                                     notes=notes, flags=flags)

    def describe(self) -> dict[str, Any]:
        return {
            "meter": self.name,
            "measured": True,
            "gpus": [g.facts() for g in self._gpus.values()],
            "scope": ("gpus=" if self.gpus_requested is not None else
                      "the devices the work declares (gpu_scope), else every visible GPU"),
            "mode": self.mode,
            "sampling_period_s": self.sampling_period_s,
            "counter_period_s": self.counter_period_s,
            "min_window_periods": MIN_WINDOW_PERIODS,
        }
