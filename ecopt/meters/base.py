"""The meter contract: start a window, stop it, get a :class:`Measurement`.

A meter measures energy over windows of time. Windows may overlap (counter-based
meters read the counter at both ends), and each reading says which component it
covers (``gpu:0``, ``cpu:package-0``, ``dram:0``, ``ram``...), where the number
came from (``source``) and whether it was measured or estimated.

A new meter is one file: subclass :class:`Meter`, implement ``is_available``,
``_start`` and ``_stop``, set ``auto_priority`` and ``auto_covers`` if
``meter="auto"`` should consider it, and add one line to
:data:`ecopt.registry.BUILTIN` (or, from another package, one entry point in
group ``ecopt.meters``): ``auto`` and ``ecopt meters`` iterate the registry.
"""

from __future__ import annotations

import itertools
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ecopt._cuda import sync_cuda_if_used
from ecopt.errors import MeterError
from ecopt.meters.gpus import current_gpu_scope
# The window's record types live on the ground floor of the core; re-exported here.
from ecopt.record import (
    DEFAULT_MIN_WINDOW_S,
    FLAG_AVERAGE_POWER,
    FLAG_LOWER_BOUND,
    FLAG_SHORT_WINDOW,
    ComponentEnergy,
    Measurement,
)

__all__ = [
    "ComponentEnergy",
    "Measurement",
    "Meter",
    "WindowHandle",
    "WallClockMeter",
    "sync_cuda_if_used",
    "FLAG_SHORT_WINDOW",
    "FLAG_AVERAGE_POWER",
    "FLAG_LOWER_BOUND",
    "MIN_WINDOW_PERIODS",
    "DEFAULT_MIN_WINDOW_S",
    "AUTO_COVERS",
]

#: What a meter can measure, for ``meter="auto"`` to combine meters without counting a
#: device twice (:attr:`Meter.auto_covers`): GPUs (or an SoC's GPU), CPU packages, DRAM.
AUTO_COVERS = frozenset({"gpu", "cpu", "dram"})

#: A window shorter than ``MIN_WINDOW_PERIODS`` update periods of its meter is flagged
#: :data:`FLAG_SHORT_WINDOW`: one period of rounding at each end is then more than ~10%.
MIN_WINDOW_PERIODS = 10


@dataclass(frozen=True)
class WindowHandle:
    """An open window: pass it back to :meth:`Meter.stop`."""

    id: int
    start_time: float  # time.perf_counter() at start
    state: Any = field(default=None, compare=False, repr=False)


class Meter(ABC):
    """Base class of every meter.

    Subclasses implement :meth:`is_available` (a cheap probe), :meth:`_start`
    (read whatever the window needs at its start; cheap) and :meth:`_stop`
    (read again and return the components). Windows may overlap.

    Example:
        >>> meter = ecopt.meters.get_meter("estimate")
        >>> w = meter.start()
        >>> sum(i * i for i in range(10**6))
        >>> m = meter.stop(w)
        >>> m.energy_j, m.measured
        (..., False)
    """

    #: Short name recorded in the trial log.
    name: str = "meter"
    #: Where ``meter="auto"`` tries this meter among the registered ones: higher first.
    #: ``None`` (the default) keeps it out of ``auto``: it is used only when named.
    auto_priority: ClassVar[int | None] = None
    #: What it measures (a subset of :data:`AUTO_COVERS`): ``auto`` takes a meter only
    #: when no meter it already took covers any of these (no device counted twice).
    auto_covers: ClassVar[frozenset[str]] = frozenset()

    def __init__(self) -> None:
        self._ids = itertools.count(1)
        self._open: set[int] = set()
        self._lock = threading.Lock()

    @classmethod
    def is_available(cls, **options: Any) -> bool:
        """Whether this meter can work on this machine (a cheap probe; never raises).

        Args:
            **options: The constructor's options that decide it (e.g. RAPL's
                ``root``); others are ignored.
        """
        return True

    @classmethod
    def probe(cls, **options: Any) -> tuple[bool, str]:
        """:meth:`is_available`, and why not: what ``auto`` and ``ecopt meters`` report.

        Meters override it to say what is missing and how to fix it; the
        default says only that :meth:`is_available` is false.
        """
        try:
            ok = bool(cls.is_available(**options))
        except Exception as exc:  # noqa: BLE001 - a probe never raises
            return False, f"{type(exc).__name__}: {exc}"
        return ok, "" if ok else f"{cls.__name__}.is_available() is False on this machine"

    def summary(self) -> str:
        """One line on what this meter reads here (for ``ecopt meters``)."""
        sources = self.describe().get("sources")
        if isinstance(sources, dict) and sources:
            return f"{self.name} reads " + ", ".join(f"{k} ({v})" for k, v in sources.items())
        return f"{self.name} is usable"

    def __getstate__(self) -> dict[str, Any]:
        # Meters travel to worker processes with their settings, not their
        # open windows or locks; subclasses drop library handles likewise.
        state = dict(self.__dict__)
        for k in ("_ids", "_open", "_lock"):
            state.pop(k, None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._ids = itertools.count(1)
        self._open = set()
        self._lock = threading.Lock()

    def start(self) -> WindowHandle:
        """Open a window and return its handle.

        CUDA work already queued on :meth:`cuda_devices` is waited for first, so
        the window's timestamp and readings come after it (it belongs to the
        window before).
        """
        sync_cuda_if_used(self.cuda_devices())
        state = self._start()
        with self._lock:
            wid = next(self._ids)
            self._open.add(wid)
        return WindowHandle(wid, time.perf_counter(), state)

    def stop(self, handle: WindowHandle) -> Measurement:
        """Close a window and measure it.

        CUDA work queued on :meth:`cuda_devices` inside the window is waited for
        before the end timestamp and the readings, so the window's duration
        and energy include it.

        Raises:
            MeterError: if the handle is not an open window of this meter.
        """
        sync_cuda_if_used(self.cuda_devices())
        end = time.perf_counter()
        with self._lock:
            if handle.id not in self._open:
                raise MeterError(
                    f"window {handle.id} is not open on meter {self.name!r} "
                    "(stopped twice, or started on another meter)"
                )
            self._open.discard(handle.id)
        components = self._stop(handle.state, end - handle.start_time)
        return Measurement(
            duration_s=end - handle.start_time,
            components=components,
            meter=self.name,
            details=self.window_details(),
        )

    @abstractmethod
    def _start(self) -> Any:
        """Read the starting state of a window (counters, CPU times...)."""

    @abstractmethod
    def _stop(self, state: Any, duration_s: float) -> dict[str, ComponentEnergy]:
        """Read the end state and return the energy of each component."""

    def cuda_devices(self) -> Sequence[int] | None:
        """CUDA devices whose queued work a window waits for at both ends.

        Default: the devices declared with :func:`ecopt.meters.gpus.gpu_scope`,
        else ``None`` (the current device). GPU meters return the GPUs they read.
        """
        return current_gpu_scope()

    def min_window_s(self) -> float:
        """The shortest window whose energy this meter resolves, seconds.

        A phase shorter than this is flagged :data:`FLAG_SHORT_WINDOW` by the
        trial that measured it, and figures drawn from it are kept off the
        front, the knee, the best-of and the payback. Default
        :data:`DEFAULT_MIN_WINDOW_S` (10 ms); a meter with an update period
        returns :data:`MIN_WINDOW_PERIODS` of them.
        """
        return DEFAULT_MIN_WINDOW_S

    def describe(self) -> dict[str, Any]:
        """Settings and facts recorded with every measurement and in ``study.json``."""
        return {"meter": self.name}

    def window_details(self) -> dict[str, Any]:
        """What each :class:`Measurement` records in ``details`` (default: :meth:`describe`)."""
        return self.describe()

    def prepare(self, recorded: Mapping[str, Any]) -> dict[str, Any]:
        """Called by a study once its storage is open, before its first trial.

        A meter that measures something once per study (idle power:
        :class:`~ecopt.meters.IdleSubtracted`) does it here, or takes it from
        what earlier sessions recorded.

        Args:
            recorded: The study's ``study.json`` so far (empty for a new or an
                in-memory study).

        Returns:
            Facts to keep in ``study.json`` (top-level keys; default: none).
        """
        return {}

    def close(self) -> None:
        """Release resources (threads, library handles). Safe to call twice."""

    def __enter__(self) -> Meter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class WallClockMeter(Meter):
    """Durations only: no energy components. For tests and for timing-only studies."""

    name = "wallclock"

    def _start(self) -> None:
        return None

    def _stop(self, state: Any, duration_s: float) -> dict[str, ComponentEnergy]:
        return {}
