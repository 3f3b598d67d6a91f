"""NVIDIA GPU energy through NVML (the ``nvidia-ml-py`` package, module ``pynvml``).

Two ways to get joules, chosen per GPU at construction:

* **Energy counter** (``source="nvml-energy-counter"``): Volta and newer GPUs keep
  a total-energy counter in millijoules since the driver loaded
  (``nvmlDeviceGetTotalEnergyConsumption``). A window's energy is the difference
  of two reads, which costs a few microseconds and misses nothing in between.
  The counter is refreshed every ~20-100 ms, so a window shorter than that may
  read 0 J: such windows are **flagged** and their energy is taken as the
  instant power times the window length (``source="nvml-instant-power"``),
  never reported as a silent zero (Zeus does the same with
  ``approx_instant_energy``).
* **Power sampling** (``source="nvml-power-sampling"``): older GPUs only report
  power (``nvmlDeviceGetPowerUsage``, milliwatts). A background thread samples
  it every ``sampling_period_s`` and integrates over time with the trapezoid
  rule; each window also takes one sample at its start and at its end, so the
  integral covers the window exactly. The sampling period is recorded.

GPUs are selected by CUDA index (what ``torch`` calls ``cuda:0``), honouring
``CUDA_VISIBLE_DEVICES`` (indices or ``GPU-<uuid>`` entries). Components are
named ``gpu:<cuda index>``.
"""

from __future__ import annotations

import importlib
import os
import threading
import time
from dataclasses import dataclass
from typing import Any

from ecopt.errors import MeterError, MeterUnavailableError
from ecopt.meters.base import ComponentEnergy, Meter, sync_cuda_if_used

__all__ = ["NVMLMeter", "visible_gpu_selectors", "visible_gpus", "select_gpus"]

_INSTALL_HINT = "pip install 'ecopt[gpu]' (nvidia-ml-py)"
#: NVML energy counters are unsigned 64-bit millijoules.
_U64 = 1 << 64


def _pynvml() -> Any:
    """Import ``pynvml`` (patched into ``sys.modules`` by tests as a fake)."""
    try:
        return importlib.import_module("pynvml")
    except ImportError as exc:
        raise MeterUnavailableError(
            f"the NVML meter needs nvidia-ml-py, which is not installed ({exc}); {_INSTALL_HINT}, "
            "or use meter='estimate'") from None


def visible_gpu_selectors(env: str | None = None) -> list[str] | None:
    """Entries of ``CUDA_VISIBLE_DEVICES`` (``None`` when unset: every GPU is visible).

    Args:
        env: The variable's value (default: read from the environment).
    """
    value = os.environ.get("CUDA_VISIBLE_DEVICES") if env is None else env
    if value is None:
        return None
    out: list[str] = []
    for item in value.split(","):
        item = item.strip()
        if not item:
            continue
        # CUDA stops at the first invalid entry (e.g. "-1" hides every GPU).
        if item.lstrip("-").isdigit() and int(item) < 0:
            break
        out.append(item)
    return out


def visible_gpus(nv: Any, count: int | None = None) -> list[tuple[int, Any]]:
    """``(nvml index, handle)`` of each GPU CUDA can see, in CUDA's order.

    ``CUDA_VISIBLE_DEVICES`` is honoured (indices or ``GPU-<uuid>`` entries, stopping at
    the first invalid one as CUDA does); unset, every GPU in NVML's order.

    Args:
        nv: The initialised ``pynvml`` module.
        count: ``nvmlDeviceGetCount()`` if already known.

    Raises:
        pynvml.NVMLError: from NVML.
    """
    if count is None:
        count = int(nv.nvmlDeviceGetCount())
    selectors = visible_gpu_selectors()
    if selectors is None:
        return [(i, nv.nvmlDeviceGetHandleByIndex(i)) for i in range(count)]
    visible: list[tuple[int, Any]] = []
    for sel in selectors:
        if sel.isdigit():
            if int(sel) >= count:
                break  # CUDA ignores entries after an invalid one
            visible.append((int(sel), nv.nvmlDeviceGetHandleByIndex(int(sel))))
        else:
            h = nv.nvmlDeviceGetHandleByUUID(sel if sel.startswith("GPU-") else f"GPU-{sel}")
            visible.append((int(nv.nvmlDeviceGetIndex(h)), h))
    return visible


def select_gpus(requested: list[int] | tuple[int, ...] | None, n_visible: int) -> list[int]:
    """The CUDA indices asked for (default: all ``n_visible``), checked.

    Raises:
        ValueError: for an empty list, an index outside ``[0, n_visible - 1]`` or a repeat.
    """
    wanted = [int(g) for g in requested] if requested is not None else list(range(n_visible))
    if not wanted:
        raise ValueError("gpus must name at least one GPU index, got []")
    for g in wanted:
        if not 0 <= g < n_visible:
            raise ValueError(
                f"GPU index must be in [0, {n_visible - 1}] ({n_visible} visible GPU(s), "
                f"CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES')!r}), got {g}")
    if len(set(wanted)) != len(wanted):
        raise ValueError(f"GPU indices must be unique, got {wanted}")
    return wanted


@dataclass
class _Gpu:
    cuda_index: int
    nvml_index: int
    name: str
    uuid: str
    handle: Any
    counter: bool


class NVMLMeter(Meter):
    """GPU energy from NVML: energy counter where supported, else sampled power.

    Args:
        gpus: CUDA indices to measure (default: every visible GPU). Index ``i``
            is the ``i``-th GPU of ``CUDA_VISIBLE_DEVICES`` when it is set.
        mode: ``"auto"`` (counter where supported, else sampling),
            ``"counter"`` (error if a GPU lacks the counter) or ``"sampling"``.
        sampling_period_s: Seconds between power samples in sampling mode.
        counter_period_s: The counter's refresh period assumed when flagging
            short windows (NVML does not report it; ~0.1 s on current GPUs).

    Raises:
        MeterUnavailableError: when nvidia-ml-py is missing, NVML cannot start
            (no driver) or there is no GPU.
        ValueError: for a GPU index out of range, a bad mode or period.
        MeterError: with ``mode="counter"`` on a GPU without the counter.

    Example:
        >>> meter = NVMLMeter(gpus=[0])
        >>> w = meter.start(); train(); m = meter.stop(w)
        >>> m.components["gpu:0"].source
        'nvml-energy-counter'
    """

    name = "nvml"

    def __init__(self, gpus: list[int] | tuple[int, ...] | None = None, mode: str = "auto",
                 sampling_period_s: float = 0.1, counter_period_s: float = 0.1) -> None:
        super().__init__()
        if mode not in ("auto", "counter", "sampling"):
            raise ValueError(f"mode must be 'auto', 'counter' or 'sampling', got {mode!r}")
        if not (sampling_period_s > 0):
            raise ValueError(f"sampling_period_s > 0 must hold, got {sampling_period_s}")
        if not (counter_period_s >= 0):
            raise ValueError(f"counter_period_s >= 0 must hold, got {counter_period_s}")
        self.gpus_requested = None if gpus is None else [int(g) for g in gpus]
        self.mode = mode
        self.sampling_period_s = float(sampling_period_s)
        self.counter_period_s = float(counter_period_s)
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
            count = int(nv.nvmlDeviceGetCount())
            visible = visible_gpus(nv, count)
        except nv.NVMLError as exc:
            raise MeterError(f"NVML failed while listing GPUs: {exc}") from None
        if not visible:
            raise MeterUnavailableError(
                f"NVML sees no usable GPU (device count {count}, CUDA_VISIBLE_DEVICES="
                f"{os.environ.get('CUDA_VISIBLE_DEVICES')!r}); use meter='estimate'")
        wanted = select_gpus(self.gpus_requested, len(visible))
        self._gpus: list[_Gpu] = []
        for g in wanted:
            nvml_index, h = visible[g]
            counter = False
            if self.mode != "sampling":
                try:
                    nv.nvmlDeviceGetTotalEnergyConsumption(h)
                    counter = True
                except nv.NVMLError as exc:
                    if self.mode == "counter":
                        raise MeterError(
                            f"GPU {g} has no NVML energy counter ({exc}; Volta or newer is "
                            "needed); use mode='sampling' or 'auto'") from None
            try:
                name = _text(nv.nvmlDeviceGetName(h))
                uuid = _text(nv.nvmlDeviceGetUUID(h))
                if not counter:
                    nv.nvmlDeviceGetPowerUsage(h)  # fail now, not mid-trial
            except nv.NVMLError as exc:
                raise MeterError(f"NVML cannot read GPU {g}: {exc}") from None
            self._gpus.append(_Gpu(g, nvml_index, name, uuid, h, counter))
        self._sampler: _PowerSampler | None = None
        self._sampler_lock = threading.Lock()

    def __getstate__(self) -> dict[str, Any]:
        # Settings only: handles and threads are rebuilt in the receiving process.
        return {"gpus_requested": self.gpus_requested, "mode": self.mode,
                "sampling_period_s": self.sampling_period_s,
                "counter_period_s": self.counter_period_s}

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(state)
        self._setup()

    @classmethod
    def is_available(cls) -> bool:
        try:
            nv = importlib.import_module("pynvml")
            nv.nvmlInit()
            return int(nv.nvmlDeviceGetCount()) > 0
        except Exception:
            return False

    @property
    def update_period_s(self) -> float:
        """How often a reading changes: the counter's refresh period, or the sampling period."""
        periods = [self.counter_period_s if g.counter else self.sampling_period_s
                   for g in self._gpus]
        return max(periods)

    @property
    def components(self) -> list[str]:
        """Component names this meter reports (``gpu:<cuda index>``)."""
        return [f"gpu:{g.cuda_index}" for g in self._gpus]

    # -- windows ---------------------------------------------------------------
    def _sampling_gpus(self) -> list[_Gpu]:
        return [g for g in self._gpus if not g.counter]

    def _ensure_sampler(self) -> _PowerSampler:
        with self._sampler_lock:
            if self._sampler is None:
                self._sampler = _PowerSampler(self._nv, self._sampling_gpus(),
                                              self.sampling_period_s)
            return self._sampler

    def _read_counters(self) -> dict[int, int]:
        nv = self._nv
        out: dict[int, int] = {}
        for g in self._gpus:
            if g.counter:
                try:
                    out[g.cuda_index] = int(nv.nvmlDeviceGetTotalEnergyConsumption(g.handle))
                except nv.NVMLError as exc:
                    raise MeterError(
                        f"NVML failed reading the energy counter of gpu:{g.cuda_index} "
                        f"({g.name}): {exc}; the GPU may be lost or the driver reset") from None
        return out

    def _start(self) -> Any:
        sampled = self._ensure_sampler().mark() if self._sampling_gpus() else {}
        return (self._read_counters(), sampled, time.perf_counter())

    def _stop(self, state: Any, duration_s: float) -> dict[str, ComponentEnergy]:
        sync_cuda_if_used()
        start_counters, start_sampled, _ = state
        end_counters = self._read_counters()
        end_sampled = self._sampler.mark() if self._sampler is not None and start_sampled else {}
        comps: dict[str, ComponentEnergy] = {}
        for g in self._gpus:
            key = f"gpu:{g.cuda_index}"
            if g.counter:
                comps[key] = self._counter_energy(g, start_counters[g.cuda_index],
                                                  end_counters[g.cuda_index], duration_s)
            else:
                e0, n0 = start_sampled[g.cuda_index]
                e1, n1 = end_sampled[g.cuda_index]
                comps[key] = ComponentEnergy(
                    max(0.0, e1 - e0), "nvml-power-sampling", True,
                    note=f"trapezoid over {n1 - n0 + 1} power samples, period "
                         f"{self.sampling_period_s:g} s")
        return comps

    def _counter_energy(self, g: _Gpu, start_mj: int, end_mj: int, duration_s: float
                        ) -> ComponentEnergy:
        delta = end_mj - start_mj
        note = None
        if delta < 0:
            if start_mj > _U64 - (1 << 40):
                delta += _U64  # the 64-bit counter wrapped
                note = "energy counter wrapped around 2**64 mJ during the window"
            else:
                # The driver reloaded or the GPU was reset: the counter restarted at 0.
                delta = end_mj
                note = ("energy counter reset during the window (driver reload or GPU reset); "
                        "energy is a lower bound")
        if delta == 0 or duration_s < self.counter_period_s:
            counter_j = delta / 1000.0
            try:
                power_w = self._nv.nvmlDeviceGetPowerUsage(g.handle) / 1000.0
            except self._nv.NVMLError as exc:
                # The counter was just read, so the GPU is there; only power is missing.
                return ComponentEnergy(
                    counter_j, "nvml-energy-counter", True,
                    note=f"window of {duration_s * 1000:.3g} ms is shorter than the energy "
                         f"counter's update period and power is unreadable ({exc}): energy may "
                         "be underestimated")
            return ComponentEnergy(
                max(counter_j, power_w * duration_s), "nvml-instant-power", True,
                note=f"window of {duration_s * 1000:.3g} ms is shorter than the energy counter's "
                     f"update period (~{self.counter_period_s * 1000:.0f} ms; counter moved "
                     f"{counter_j:.4g} J): energy = {power_w:.4g} W instant power x duration")
        return ComponentEnergy(delta / 1000.0, "nvml-energy-counter", True, note=note)

    def describe(self) -> dict[str, Any]:
        return {
            "meter": self.name,
            "measured": True,
            "gpus": [{"component": f"gpu:{g.cuda_index}", "nvml_index": g.nvml_index,
                      "name": g.name, "uuid": g.uuid,
                      "method": "energy-counter" if g.counter else "power-sampling"}
                     for g in self._gpus],
            "mode": self.mode,
            "sampling_period_s": self.sampling_period_s,
            "counter_period_s": self.counter_period_s,
        }

    def close(self) -> None:
        sampler = getattr(self, "_sampler", None)
        if sampler is not None:
            sampler.stop()
            self._sampler = None


def _text(v: Any) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


class _PowerSampler:
    """Background thread integrating sampled power (trapezoid) into a running total per GPU.

    ``mark()`` takes a sample now and returns ``{cuda_index: (energy_j, n_samples)}``;
    a window's energy is the difference of two marks, so it is integrated
    exactly from its first to its last sample.
    """

    def __init__(self, nv: Any, gpus: list[_Gpu], period_s: float) -> None:
        self._nv = nv
        self._gpus = gpus
        self._period_s = period_s
        self._lock = threading.Lock()
        self._energy_j = {g.cuda_index: 0.0 for g in gpus}
        self._last: dict[int, tuple[float, float]] = {}
        self._count = 0
        self._error: BaseException | None = None
        self._stop_event = threading.Event()
        self._sample()
        self._thread = threading.Thread(target=self._run, name="ecopt-nvml-sampler", daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        t = time.perf_counter()
        readings = {}
        for g in self._gpus:
            readings[g.cuda_index] = self._nv.nvmlDeviceGetPowerUsage(g.handle) / 1000.0
        with self._lock:
            for k, p in readings.items():
                if k in self._last:
                    t0, p0 = self._last[k]
                    self._energy_j[k] += 0.5 * (p0 + p) * (t - t0)
                self._last[k] = (t, p)
            self._count += 1

    def _run(self) -> None:
        while not self._stop_event.wait(self._period_s):
            try:
                self._sample()
            except Exception as exc:  # reported by the next mark(), i.e. the window's stop
                self._error = exc
                return

    def mark(self) -> dict[int, tuple[float, int]]:
        if self._error is not None:
            raise MeterError(f"NVML power sampling failed: {self._error}; the GPU may be lost "
                             "or the driver reset")
        try:
            self._sample()
        except self._nv.NVMLError as exc:
            raise MeterError(f"NVML failed reading GPU power: {exc}; the GPU may be lost or "
                             "the driver reset") from None
        with self._lock:
            return {k: (e, self._count) for k, e in self._energy_j.items()}

    def stop(self) -> None:
        self._stop_event.set()
        self._thread.join(timeout=5)
