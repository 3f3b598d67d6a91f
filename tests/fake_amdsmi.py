"""A fake ``amdsmi`` (AMD's SMI Python bindings), the lowest layer under Zeus's AMD GPUs.

It answers the calls Zeus makes (``zeus/device/gpu/amd.py``) the way amdsmi
does on ROCm 6.2+:

* ``amdsmi_get_processor_handles()`` in amd-smi's order (PCI), and
  ``amdsmi_get_gpu_enumeration_info(h)["hip_id"]``: the HIP index (what torch
  calls ``cuda:N``), which may differ from that order (as on MI350X);
* ``amdsmi_get_energy_count(h)``: ``energy_accumulator`` ticks of
  ``counter_resolution`` uJ, refreshed every ``counter_period_s`` and following
  the draw over wall time (Zeus checks it against power over 0.5 s at start);
* ``amdsmi_get_power_info(h)``: ``current_socket_power`` and
  ``average_socket_power`` in whole watts, or ``"N/A"`` where unsupported;
* ``amdsmi_get_power_cap_info`` / ``amdsmi_set_power_cap`` in uW;
* errors as ``AmdSmiLibraryException`` with amdsmi's status codes.

Nothing here is a measurement; numbers from the fake mean nothing about hardware.
"""

from __future__ import annotations

import math
import sys
import time
import types
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

__all__ = ["FakeAmdGpu", "make_fake_amdsmi", "installed_fake_amdsmi"]

AMDSMI_STATUS_NOT_SUPPORTED = 2
AMDSMI_STATUS_NO_PERM = 10
AMDSMI_STATUS_INIT_ERROR = 18
AMDSMI_STATUS_DRIVER_NOT_LOADED = 34


@dataclass
class FakeAmdGpu:
    """One fake AMD GPU (tests change it between calls).

    Attributes:
        name: ``market_name``.
        hip_id: HIP index (``None``: its place in amd-smi's order).
        power_w: What it draws (W); the energy counter follows it over wall time.
        counter: The energy accumulator is trustworthy (Zeus validates it).
        counter_period_s: How often the accumulator is refreshed.
        resolution_uj: ``counter_resolution``.
        instant: ``current_socket_power`` is reported (else ``"N/A"``).
        power_cap_uw, min_cap_uw, max_cap_uw, default_cap_uw: Power cap facts.
        can_set_cap: ``False``: setting the cap answers AMDSMI_STATUS_NO_PERM.
    """

    name: str = "AMD Instinct MI300X"
    hip_id: int | None = None
    power_w: int = 300
    counter: bool = True
    counter_period_s: float = 0.001
    resolution_uj: float = 15.259
    instant: bool = True
    power_cap_uw: int = 750_000_000
    min_cap_uw: int = 200_000_000
    max_cap_uw: int = 750_000_000
    default_cap_uw: int = 750_000_000
    can_set_cap: bool = True
    calls: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._t0 = time.perf_counter()
        self._e0_uj = 5e9
        self._hist: list[tuple[float, int]] = [(self._t0, self.power_w)]

    def __setattr__(self, name: str, value: Any) -> None:
        super().__setattr__(name, value)
        if name == "power_w" and "_hist" in self.__dict__:
            self._hist.append((time.perf_counter(), int(value)))

    def energy_uj(self, at: float) -> float:
        total = self._e0_uj
        for k, (start, w) in enumerate(self._hist):
            end = self._hist[k + 1][0] if k + 1 < len(self._hist) else math.inf
            lo, hi = max(self._t0, start), min(at, end)
            if hi > lo:
                total += w * (hi - lo) * 1e6
        return total

    def accumulator(self) -> int:
        now = time.perf_counter()
        p = self.counter_period_s
        tick = math.floor(now / p) * p if p > 0 else now
        if not self.counter:  # amdsmi issue 38: a counter far off the draw
            return int(self.energy_uj(tick) / self.resolution_uj / 1000)
        return int(self.energy_uj(tick) / self.resolution_uj)


class AmdSmiException(Exception):
    """amdsmi's base exception."""


class AmdSmiLibraryException(AmdSmiException):
    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code

    def get_error_code(self) -> int:
        return self.code

    def get_error_info(self) -> str:
        return {2: "AMDSMI_STATUS_NOT_SUPPORTED", 10: "AMDSMI_STATUS_NO_PERM",
                18: "AMDSMI_STATUS_INIT_ERROR",
                34: "AMDSMI_STATUS_DRIVER_NOT_LOADED"}.get(self.code, f"status {self.code}")


def make_fake_amdsmi(gpus: list[FakeAmdGpu], init_error: int | None = None) -> types.ModuleType:
    """A module object that plays ``amdsmi`` for ``gpus`` (in amd-smi's order)."""
    mod = types.ModuleType("amdsmi")
    mod.gpus = gpus  # type: ignore[attr-defined]
    mod.AmdSmiException = AmdSmiException  # type: ignore[attr-defined]
    mod.AmdSmiLibraryException = AmdSmiLibraryException  # type: ignore[attr-defined]
    mod.AmdSmiInitFlags = types.SimpleNamespace(INIT_AMD_GPUS=2)  # type: ignore[attr-defined]
    state = {"init": False}

    def _gpu(h: Any) -> FakeAmdGpu:
        if not state["init"]:
            raise AmdSmiLibraryException(32)
        return gpus[int(h)]

    def _count(g: FakeAmdGpu, kind: str) -> None:
        g.calls[kind] = g.calls.get(kind, 0) + 1

    def amdsmi_init(flags: Any = None) -> None:
        if init_error is not None:
            raise AmdSmiLibraryException(init_error)
        state["init"] = True

    def amdsmi_shut_down() -> None:
        state["init"] = False

    def amdsmi_get_processor_handles() -> list[int]:
        if not state["init"]:
            raise AmdSmiLibraryException(32)
        return list(range(len(gpus)))

    def amdsmi_get_gpu_enumeration_info(h: Any) -> dict[str, Any]:
        g = _gpu(h)
        return {"hip_id": int(h) if g.hip_id is None else g.hip_id}

    def amdsmi_get_gpu_asic_info(h: Any) -> dict[str, Any]:
        return {"market_name": _gpu(h).name}

    def amdsmi_get_power_info(h: Any) -> dict[str, Any]:
        g = _gpu(h)
        _count(g, "power")
        return {"current_socket_power": g.power_w if g.instant else "N/A",
                "average_socket_power": g.power_w}

    def amdsmi_get_energy_count(h: Any) -> dict[str, Any]:
        g = _gpu(h)
        _count(g, "energy")
        return {"energy_accumulator": g.accumulator(), "counter_resolution": g.resolution_uj,
                "timestamp": time.time_ns()}

    def amdsmi_get_power_cap_info(h: Any) -> dict[str, Any]:
        g = _gpu(h)
        return {"power_cap": g.power_cap_uw, "min_power_cap": g.min_cap_uw,
                "max_power_cap": g.max_cap_uw, "default_power_cap": g.default_cap_uw}

    def amdsmi_set_power_cap(h: Any, sensor: int, cap: int) -> None:
        g = _gpu(h)
        if not g.can_set_cap:
            raise AmdSmiLibraryException(AMDSMI_STATUS_NO_PERM)
        g.power_cap_uw = int(cap)

    for f in (amdsmi_init, amdsmi_shut_down, amdsmi_get_processor_handles,
              amdsmi_get_gpu_enumeration_info, amdsmi_get_gpu_asic_info, amdsmi_get_power_info,
              amdsmi_get_energy_count, amdsmi_get_power_cap_info, amdsmi_set_power_cap):
        setattr(mod, f.__name__, f)
    return mod


@contextmanager
def installed_fake_amdsmi(gpus: list[FakeAmdGpu], monkeypatch: Any,
                          init_error: int | None = None) -> Iterator[types.ModuleType]:
    """Make Zeus's AMD layer see the fake (and forget what it cached about the real one).

    Zeus binds ``amdsmi`` when ``zeus.device.gpu.amd`` is imported and caches
    its availability and HIP-index map (``lru_cache``); both are reset here and
    again when the block ends.
    """
    import zeus.device.gpu.amd as zamd

    mod = make_fake_amdsmi(gpus, init_error)
    monkeypatch.setitem(sys.modules, "amdsmi", mod)
    monkeypatch.setattr(zamd, "amdsmi", mod)
    caches = (zamd.amdsmi_is_available, zamd._hip_to_amdsmi_handle)
    for c in caches:
        c.cache_clear()
    from ecopt.meters import amd as ecopt_amd

    ecopt_amd.forget_managers()
    try:
        yield mod
    finally:
        ecopt_amd.forget_managers()
        for c in caches:
            c.cache_clear()
