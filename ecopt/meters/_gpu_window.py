"""The window logic the GPU meters share (NVML's and AMD's): one home for both.

A GPU meter reads each GPU either by its energy counter (the counter-window
rule of :mod:`ecopt.meters._counter`) or, where no trustworthy counter exists,
by sampled power: :class:`PowerSampler` integrates power (trapezoid) in a
background thread, and a window's energy is the difference of two marks.
:class:`GpuWindowMeter` opens and closes windows over both kinds of GPU; each
meter supplies its reads (counters, power), which GPUs a window covers, and its
counter's wrap/reset rule.
"""

from __future__ import annotations

import threading
import time
from abc import abstractmethod
from collections.abc import Callable
from typing import Any, ClassVar, Generic, Protocol, TypeVar

from ecopt.errors import MeterError
from ecopt.meters.base import FLAG_AVERAGE_POWER, MIN_WINDOW_PERIODS, ComponentEnergy, Meter

__all__ = ["GpuWindowMeter", "PowerSampler"]


class _MeteredGpu(Protocol):
    """What the shared window logic reads of one metered GPU."""

    counter: bool
    instant: bool
    period_s: float

    @property
    def index(self) -> int: ...

    @property
    def reading(self) -> str: ...


G = TypeVar("G", bound=_MeteredGpu)


class PowerSampler(Generic[G]):
    """Background thread integrating sampled power (trapezoid) into a running total per GPU.

    ``mark()`` takes a sample now and returns ``{index: (energy_j, n_samples)}``;
    a window's energy is the difference of two marks, so it is integrated
    exactly from its first to its last sample.

    Args:
        gpus: The GPUs to sample.
        power_w: Reads one GPU's power now, watts.
        period_s: Seconds between samples.
        thread_name: The sampling thread's name.
        read_errors: What ``power_w`` raises when the library fails (turned into
            :class:`MeterError` by ``mark``).
        failed: Words that open the errors, e.g. ``"NVML power sampling failed"``.
        read_failed: Likewise for a failed read in ``mark``.
        hint: Appended to both errors (e.g. what the failure may mean).
    """

    def __init__(self, gpus: list[G], power_w: Callable[[G], float], period_s: float, *,
                 thread_name: str, read_errors: tuple[type[BaseException], ...],
                 failed: str, read_failed: str, hint: str = "") -> None:
        self._power_w = power_w
        self._gpus = gpus
        self._period_s = period_s
        self._read_errors = read_errors
        self._failed = failed
        self._read_failed = read_failed
        self._hint = hint
        self._lock = threading.Lock()
        self._energy_j = {g.index: 0.0 for g in gpus}
        self._last: dict[int, tuple[float, float]] = {}
        self._count = 0
        self._error: BaseException | None = None
        self._stop_event = threading.Event()
        self._sample()
        self._thread = threading.Thread(target=self._run, name=thread_name, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        t = time.perf_counter()
        readings = {g.index: self._power_w(g) for g in self._gpus}
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
        """Sample now; ``{index: (joules so far, samples so far)}``."""
        if self._error is not None:
            raise MeterError(f"{self._failed}: {self._error}{self._hint}")
        try:
            self._sample()
        except self._read_errors as exc:
            raise MeterError(f"{self._read_failed}: {exc}{self._hint}") from None
        with self._lock:
            return {k: (e, self._count) for k, e in self._energy_j.items()}

    def stop(self) -> None:
        self._stop_event.set()
        self._thread.join(timeout=5)


class GpuWindowMeter(Meter, Generic[G]):
    """A meter over GPUs read by energy counter or, where none is trustworthy, sampled power.

    Subclasses set ``_gpus`` (``{index: gpu}``), ``sampling_period_s``,
    ``_sampler = None`` and ``_sampler_lock`` when they set up, and implement
    the reads; the ``<source_prefix>-power-sampling`` and counter sources are
    theirs.
    """

    #: The prefix of the sources (``"nvml"``, ``"amd"``).
    source_prefix: ClassVar[str]
    _gpus: dict[int, G]
    sampling_period_s: float
    _sampler: PowerSampler[G] | None
    _sampler_lock: threading.Lock

    @abstractmethod
    def _window_gpus(self) -> list[G]:
        """The GPUs a window opened now reads: ``gpus=``, else the declared scope, else all."""

    @abstractmethod
    def _read_counters(self, gpus: list[G]) -> dict[int, int]:
        """``{index: counter, mJ}`` of the GPUs in ``gpus`` that have a counter."""

    @abstractmethod
    def _counter_energy(self, g: G, start_mj: int, end_mj: int, duration_s: float
                        ) -> ComponentEnergy:
        """One GPU's energy from its counter at both ends of a window."""

    @abstractmethod
    def _new_sampler(self, gpus: list[G]) -> PowerSampler[G]:
        """A power sampler over ``gpus`` (those without a counter)."""

    @property
    def components(self) -> list[str]:
        """Component names this meter can report (``gpu:<index>``)."""
        return [f"gpu:{i}" for i in self._gpus]

    @property
    def update_period_s(self) -> float:
        """How often a reading changes: the slowest counter period, or the sampling period."""
        return max(g.period_s if g.counter else self.sampling_period_s
                   for g in self._gpus.values())

    def min_window_s(self) -> float:
        """:data:`~ecopt.meters.base.MIN_WINDOW_PERIODS` update periods (the slowest GPU's)."""
        return MIN_WINDOW_PERIODS * self.update_period_s

    def cuda_devices(self) -> list[int]:
        try:
            return [g.index for g in self._window_gpus()]
        except MeterError:  # a scope naming an unseen device: _start says so; sync all here
            return list(self._gpus)

    def _ensure_sampler(self) -> PowerSampler[G]:
        with self._sampler_lock:
            if self._sampler is None:
                self._sampler = self._new_sampler([g for g in self._gpus.values()
                                                   if not g.counter])
            return self._sampler

    def _start(self) -> Any:
        gpus = self._window_gpus()
        sampled = self._ensure_sampler().mark() if any(not g.counter for g in gpus) else {}
        return ([g.index for g in gpus], self._read_counters(gpus), sampled)

    def _stop(self, state: Any, duration_s: float) -> dict[str, ComponentEnergy]:
        indices, start_counters, start_sampled = state
        gpus = [self._gpus[i] for i in indices]
        end_counters = self._read_counters(gpus)
        end_sampled = self._sampler.mark() if self._sampler is not None and start_sampled else {}
        comps: dict[str, ComponentEnergy] = {}
        for g in gpus:
            key = f"gpu:{g.index}"
            if g.counter:
                comps[key] = self._counter_energy(g, start_counters[g.index],
                                                  end_counters[g.index], duration_s)
            else:
                e0, n0 = start_sampled[g.index]
                e1, n1 = end_sampled[g.index]
                comps[key] = ComponentEnergy(
                    max(0.0, e1 - e0), f"{self.source_prefix}-power-sampling", True,
                    note=f"trapezoid over {n1 - n0 + 1} power samples, period "
                         f"{self.sampling_period_s:g} s, {g.reading} power",
                    flags=() if g.instant else (FLAG_AVERAGE_POWER,))
        return comps

    def close(self) -> None:
        sampler = getattr(self, "_sampler", None)
        if sampler is not None:
            sampler.stop()
            self._sampler = None
