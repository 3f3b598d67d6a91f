"""Peak resident memory of a phase, sampled in a background thread.

``/proc/self/statm`` is read every ``period_s``; the peak covers this process
only (DataLoader workers are separate processes and are not included).
"""

from __future__ import annotations

import contextlib
import os
import resource
import threading
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

__all__ = ["rss_bytes", "PeakRSS", "measured_phase", "measured_repeat"]

T = TypeVar("T")

_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def rss_bytes() -> int:
    """Resident set size of this process, bytes."""
    try:
        with open("/proc/self/statm", encoding="ascii") as f:
            return int(f.read().split()[1]) * _PAGE
    except OSError:  # pragma: no cover - non-Linux: lifetime peak is the best we have
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


class PeakRSS:
    """Context manager recording the peak RSS while it is open.

    Attributes:
        peak_bytes: Highest RSS seen (bytes).
        start_bytes: RSS on entry.

    Example:
        >>> with PeakRSS() as mem:
        ...     big = bytearray(10**8)
        >>> mem.peak_bytes - mem.start_bytes >= 10**8
        True
    """

    def __init__(self, period_s: float = 0.005) -> None:
        if not period_s > 0:
            raise ValueError(f"period_s > 0 must hold, got {period_s}")
        self.period_s = period_s
        self.peak_bytes = 0
        self.start_bytes = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _run(self) -> None:
        while not self._stop.wait(self.period_s):
            self.peak_bytes = max(self.peak_bytes, rss_bytes())

    def __enter__(self) -> PeakRSS:
        self.start_bytes = self.peak_bytes = rss_bytes()
        self._thread = threading.Thread(target=self._run, daemon=True, name="ecopt-peak-rss")
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.peak_bytes = max(self.peak_bytes, rss_bytes())


@contextlib.contextmanager
def measured_phase(trial: Any, name: str, samples: int | None = None) -> Iterator[Any]:
    """``trial.phase(name, samples)`` that also records peak RSS metrics.

    ``peak_ram_mb_<name>``: the process's peak RSS during the phase (MB);
    ``ram_delta_mb_<name>``: that peak minus the RSS when the phase began
    (what the phase added; comparable between trials of one process).
    """
    with PeakRSS() as mem, trial.phase(name, samples=samples):
        yield trial
    trial.set_metric(f"peak_ram_mb_{name}", mem.peak_bytes / 1e6)
    trial.set_metric(f"ram_delta_mb_{name}", (mem.peak_bytes - mem.start_bytes) / 1e6)


def measured_repeat(trial: Any, name: str, fn: Callable[[], T], *,
                    samples_per_call: int | None = None) -> T:
    """``trial.repeat_in_phase(name, fn, ...)`` that also records peak RSS metrics.

    The work is repeated in one window until the window is long enough for the
    trial's meter (:meth:`ecopt.Trial.repeat_in_phase`); the metrics are those
    of :func:`measured_phase`.

    Returns:
        What the last call of ``fn`` returned.
    """
    with PeakRSS() as mem:
        out: T = trial.repeat_in_phase(name, fn, samples_per_call=samples_per_call)
    trial.set_metric(f"peak_ram_mb_{name}", mem.peak_bytes / 1e6)
    trial.set_metric(f"ram_delta_mb_{name}", (mem.peak_bytes - mem.start_bytes) / 1e6)
    return out
