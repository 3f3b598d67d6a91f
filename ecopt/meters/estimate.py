"""A clearly labelled estimate for machines where nothing can measure energy.

Energy over a window is modelled as::

    cpu_j = cpu_time_s * cpu_w_per_core          # busy core-seconds x watts per busy core
    ram_j = rss_gb * ram_w_per_gb * duration_s   # resident memory x watts per GB

``cpu_time_s`` is this process's user + system CPU time (with its reaped
children, e.g. DataLoader workers) over the window, or, with
``scope="system"``, the whole machine's busy CPU time from ``/proc/stat``.
Every constant is recorded in the measurement's ``details``; every component
has ``measured=False`` and ``source="estimate-cpu-time"`` / ``"estimate-ram"``.

Because the CPU term is proportional to CPU time, samples/J from this meter is
(nearly) throughput times a constant: it ranks configurations by how much CPU
they burn, not by how the hardware really draws power.
"""

from __future__ import annotations

import os
import resource
from typing import Any

from ecopt.meters.base import ComponentEnergy, Meter

__all__ = ["EstimateMeter", "DEFAULT_CPU_W_PER_CORE", "DEFAULT_RAM_W_PER_GB"]

#: Watts drawn per fully busy core. A 2020s server CPU's TDP divided by its
#: core count is 5-15 W (e.g. 205 W / 28 cores = 7.3 W; 280 W / 64 = 4.4 W);
#: desktop parts run hotter per core. 10 W is a middle value; override it with
#: your CPU's TDP / cores for a better estimate.
DEFAULT_CPU_W_PER_CORE = 10.0
#: Watts per GB of resident memory: CodeCarbon's 3 W per 8 GB DIMM.
DEFAULT_RAM_W_PER_GB = 3.0 / 8.0


def _process_cpu_s() -> float:
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def _system_busy_cpu_s() -> float:
    """Busy CPU seconds of the whole machine since boot, from /proc/stat."""
    with open("/proc/stat", encoding="ascii") as f:
        fields = f.readline().split()[1:]
    ticks = [int(x) for x in fields]
    # user nice system idle iowait irq softirq steal guest guest_nice
    busy = sum(ticks[:8]) - ticks[3] - ticks[4]
    return busy / os.sysconf("SC_CLK_TCK")


_PAGE_GB = os.sysconf("SC_PAGE_SIZE") / 1e9
_statm: tuple[int, int] | None = None  # (pid, fd): kept open, re-read with pread (cheap)


def _rss_gb() -> float:
    global _statm
    try:
        pid = os.getpid()
        if _statm is None or _statm[0] != pid:  # first call, or a forked child
            _statm = (pid, os.open("/proc/self/statm", os.O_RDONLY))
        pages = int(os.pread(_statm[1], 256, 0).split()[1])
        return pages * _PAGE_GB
    except (OSError, IndexError, ValueError):  # pragma: no cover - non-Linux
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e9


class EstimateMeter(Meter):
    """Estimate energy from CPU time and resident memory (``measured=False``).

    Args:
        cpu_w_per_core: Watts per fully busy core (default
            :data:`DEFAULT_CPU_W_PER_CORE`).
        ram_w_per_gb: Watts per GB of resident memory (default
            :data:`DEFAULT_RAM_W_PER_GB`); 0 disables the RAM term.
        scope: ``"process"`` (this process and its reaped children) or
            ``"system"`` (all busy CPU time on the machine, Linux only).

    Raises:
        ValueError: for negative constants or an unknown scope.

    Example:
        >>> meter = EstimateMeter(cpu_w_per_core=7.3)
        >>> w = meter.start(); _ = sum(range(10**6)); m = meter.stop(w)
        >>> m.components["cpu"].source
        'estimate-cpu-time'
    """

    name = "estimate"

    def __init__(self, cpu_w_per_core: float = DEFAULT_CPU_W_PER_CORE,
                 ram_w_per_gb: float = DEFAULT_RAM_W_PER_GB, scope: str = "process") -> None:
        super().__init__()
        if not cpu_w_per_core >= 0:
            raise ValueError(f"cpu_w_per_core >= 0 must hold, got {cpu_w_per_core}")
        if not ram_w_per_gb >= 0:
            raise ValueError(f"ram_w_per_gb >= 0 must hold, got {ram_w_per_gb}")
        if scope not in ("process", "system"):
            raise ValueError(f"scope must be 'process' or 'system', got {scope!r}")
        self.cpu_w_per_core = float(cpu_w_per_core)
        self.ram_w_per_gb = float(ram_w_per_gb)
        self.scope = scope
        self._cpu_s = _process_cpu_s if scope == "process" else _system_busy_cpu_s

    def _start(self) -> Any:
        return self._cpu_s()

    def _stop(self, state: Any, duration_s: float) -> dict[str, ComponentEnergy]:
        cpu_s = max(0.0, self._cpu_s() - float(state))
        comps = {
            "cpu": ComponentEnergy(
                cpu_s * self.cpu_w_per_core, "estimate-cpu-time", False,
                note=f"{cpu_s:.4g} CPU-s x {self.cpu_w_per_core:g} W/core ({self.scope})",
            )
        }
        if self.ram_w_per_gb > 0:
            rss = _rss_gb()
            comps["ram"] = ComponentEnergy(
                rss * self.ram_w_per_gb * duration_s, "estimate-ram", False,
                note=f"{rss:.3g} GB RSS x {self.ram_w_per_gb:g} W/GB",
            )
        return comps

    def describe(self) -> dict[str, Any]:
        return {"meter": self.name, "measured": False, "cpu_w_per_core": self.cpu_w_per_core,
                "ram_w_per_gb": self.ram_w_per_gb, "scope": self.scope,
                "model": "cpu_time_s * cpu_w_per_core + rss_gb * ram_w_per_gb * duration_s"}
