"""A fake ``pynvml`` module, for the tests and ``scripts/gpu_check.py --dry-run`` (no GPU here).

It mirrors the surface of the real module (``nvidia-ml-py``) that ecopt uses:
error classes with ``.value`` and NVML's error codes, millijoule energy
counters, milliwatt power, power limits with their constraints and the
permission check. Each GPU is a :class:`FakeGpu` whose state tests change
between calls. With ``live=True`` a GPU behaves like a busy real one over
wall time: its energy counter grows at ``min(power, power limit)`` and is
refreshed only every ``counter_period_s`` (as NVML's counter is), so short
windows read zero.

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

__all__ = ["FakeGpu", "make_fake_pynvml", "installed_fake_pynvml",
           "NVML_ERROR_UNINITIALIZED", "NVML_ERROR_INVALID_ARGUMENT", "NVML_ERROR_NOT_SUPPORTED",
           "NVML_ERROR_NO_PERMISSION", "NVML_ERROR_DRIVER_NOT_LOADED", "NVML_ERROR_GPU_IS_LOST"]

NVML_ERROR_UNINITIALIZED = 1
NVML_ERROR_INVALID_ARGUMENT = 2
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_NO_PERMISSION = 4
NVML_ERROR_DRIVER_NOT_LOADED = 9
NVML_ERROR_GPU_IS_LOST = 15

_MESSAGES = {1: "Uninitialized", 2: "Invalid Argument", 3: "Not Supported",
             4: "Insufficient Permissions", 9: "Driver Not Loaded", 15: "GPU is lost"}


@dataclass
class FakeGpu:
    """One fake GPU's state (tests mutate it).

    Attributes:
        energy_mj: Total-energy counter (mJ); ``None``: not supported (pre-Volta).
            With ``live`` it is the counter's value when the GPU was created.
        power_mw: Power draw (mW) reported by ``nvmlDeviceGetPowerUsage``.
        power_limit_mw, default_limit_mw, min_limit_mw, max_limit_mw: Power limit
            state and constraints.
        can_set_limit: ``False``: setting a limit raises NVML_ERROR_NO_PERMISSION.
        limit_supported: ``False``: power-limit calls raise NVML_ERROR_NOT_SUPPORTED.
        live: The counter follows wall time (see the module docstring).
        counter_period_s: Refresh period of a live counter.
        lost: Every call raises NVML_ERROR_GPU_IS_LOST.
        calls: Call counts by kind (``energy``, ``power``, ``set_limit``).
        limit_history: Every limit set (mW), in order.
    """

    name: str = "NVIDIA A100-SXM4-40GB"
    uuid: str = "GPU-00000000-0000-0000-0000-000000000000"
    energy_mj: int | None = 1_000_000
    power_mw: int = 150_000
    power_limit_mw: int = 400_000
    default_limit_mw: int = 400_000
    min_limit_mw: int = 100_000
    max_limit_mw: int = 400_000
    can_set_limit: bool = True
    limit_supported: bool = True
    live: bool = False
    counter_period_s: float = 0.1
    lost: bool = False
    calls: dict[str, int] = field(default_factory=dict)
    limit_history: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._t0 = time.perf_counter()
        self._e0 = float(self.energy_mj or 0)

    @property
    def draw_mw(self) -> int:
        """What the GPU draws: its power, capped by the power limit."""
        return min(self.power_mw, self.power_limit_mw)

    def _fold(self) -> None:
        """Account the energy drawn so far at the current draw (before the draw changes)."""
        now = time.perf_counter()
        self._e0 += self.draw_mw * (now - self._t0)
        self._t0 = now

    def counter_mj(self) -> int:
        if self.energy_mj is None:
            raise _error(NVML_ERROR_NOT_SUPPORTED)
        if not self.live:
            return self.energy_mj
        now = time.perf_counter()
        p = self.counter_period_s
        # The counter shows the energy at the last refresh tick.
        tick = math.floor(now / p) * p if p > 0 else now
        return int(self._e0 + self.draw_mw * max(0.0, tick - self._t0))

    def set_limit(self, mw: int) -> None:
        if self.live:
            self._fold()
        self.power_limit_mw = int(mw)
        self.limit_history.append(int(mw))


class NVMLError(Exception):
    """The fake's ``pynvml.NVMLError`` (``.value`` is the NVML error code)."""

    def __init__(self, value: int) -> None:
        super().__init__(value)
        self.value = value

    def __str__(self) -> str:
        return _MESSAGES.get(self.value, f"NVML error {self.value}")


class NVMLError_NotSupported(NVMLError):  # pynvml's name
    pass


class NVMLError_NoPermission(NVMLError):  # pynvml's name
    pass


def _error(code: int) -> NVMLError:
    if code == NVML_ERROR_NOT_SUPPORTED:
        return NVMLError_NotSupported(code)
    if code == NVML_ERROR_NO_PERMISSION:
        return NVMLError_NoPermission(code)
    return NVMLError(code)


def make_fake_pynvml(gpus: list[FakeGpu], init_error: int | None = None) -> types.ModuleType:
    """A module object that behaves like ``pynvml`` for the given fake GPUs.

    Args:
        gpus: The GPUs, in NVML index order.
        init_error: ``nvmlInit`` raises this NVML error code (e.g. no driver).
    """
    mod = types.ModuleType("pynvml")
    state = {"init": False}

    def _check(h: int) -> FakeGpu:
        if not state["init"]:
            raise _error(NVML_ERROR_UNINITIALIZED)
        g = gpus[h]
        if g.lost:
            raise _error(NVML_ERROR_GPU_IS_LOST)
        return g

    def _count(g: FakeGpu, kind: str) -> None:
        g.calls[kind] = g.calls.get(kind, 0) + 1

    def _limits(h: int) -> FakeGpu:
        g = _check(h)
        if not g.limit_supported:
            raise _error(NVML_ERROR_NOT_SUPPORTED)
        return g

    def nvmlInit() -> None:
        if init_error is not None:
            raise _error(init_error)
        state["init"] = True

    def nvmlShutdown() -> None:
        state["init"] = False

    def nvmlSystemGetDriverVersion() -> str:
        if not state["init"]:
            raise _error(NVML_ERROR_UNINITIALIZED)
        return "fake-driver"

    def nvmlDeviceGetCount() -> int:
        if not state["init"]:
            raise _error(NVML_ERROR_UNINITIALIZED)
        return len(gpus)

    def nvmlDeviceGetHandleByIndex(i: int) -> int:
        if not 0 <= i < len(gpus):
            raise _error(NVML_ERROR_INVALID_ARGUMENT)
        return i

    def nvmlDeviceGetHandleByUUID(uuid: str) -> int:
        for i, g in enumerate(gpus):
            if g.uuid == uuid:
                return i
        raise _error(6)

    def nvmlDeviceGetIndex(h: int) -> int:
        return h

    def nvmlDeviceGetName(h: int) -> str:
        return _check(h).name

    def nvmlDeviceGetUUID(h: int) -> str:
        return _check(h).uuid

    def nvmlDeviceGetTotalEnergyConsumption(h: int) -> int:
        g = _check(h)
        _count(g, "energy")
        return g.counter_mj()

    def nvmlDeviceGetPowerUsage(h: int) -> int:
        g = _check(h)
        _count(g, "power")
        return g.draw_mw if g.live else g.power_mw

    def nvmlDeviceGetPowerManagementLimit(h: int) -> int:
        return _limits(h).power_limit_mw

    def nvmlDeviceGetEnforcedPowerLimit(h: int) -> int:
        return _limits(h).power_limit_mw

    def nvmlDeviceGetPowerManagementDefaultLimit(h: int) -> int:
        return _limits(h).default_limit_mw

    def nvmlDeviceGetPowerManagementLimitConstraints(h: int) -> list[int]:
        g = _limits(h)
        return [g.min_limit_mw, g.max_limit_mw]

    def nvmlDeviceSetPowerManagementLimit(h: int, limit_mw: int) -> None:
        g = _limits(h)
        _count(g, "set_limit")
        if not g.can_set_limit:
            raise _error(NVML_ERROR_NO_PERMISSION)
        if not g.min_limit_mw <= int(limit_mw) <= g.max_limit_mw:
            raise _error(NVML_ERROR_INVALID_ARGUMENT)
        g.set_limit(int(limit_mw))

    for k, v in dict(locals()).items():
        if k.startswith("nvml"):
            setattr(mod, k, v)
    mod.NVMLError = NVMLError  # type: ignore[attr-defined]
    mod.NVMLError_NotSupported = NVMLError_NotSupported  # type: ignore[attr-defined]
    mod.NVMLError_NoPermission = NVMLError_NoPermission  # type: ignore[attr-defined]
    for name, code in (("NVML_ERROR_UNINITIALIZED", NVML_ERROR_UNINITIALIZED),
                       ("NVML_ERROR_INVALID_ARGUMENT", NVML_ERROR_INVALID_ARGUMENT),
                       ("NVML_ERROR_NOT_SUPPORTED", NVML_ERROR_NOT_SUPPORTED),
                       ("NVML_ERROR_NO_PERMISSION", NVML_ERROR_NO_PERMISSION),
                       ("NVML_ERROR_DRIVER_NOT_LOADED", NVML_ERROR_DRIVER_NOT_LOADED),
                       ("NVML_ERROR_GPU_IS_LOST", NVML_ERROR_GPU_IS_LOST)):
        setattr(mod, name, code)
    mod.gpus = gpus  # type: ignore[attr-defined]
    mod.IS_FAKE = True  # type: ignore[attr-defined]
    return mod


@contextmanager
def installed_fake_pynvml(gpus: list[FakeGpu]) -> Iterator[types.ModuleType]:
    """Put a fake ``pynvml`` in ``sys.modules`` for the block (the real one, if any, comes back)."""
    old = sys.modules.get("pynvml")
    mod = make_fake_pynvml(gpus)
    sys.modules["pynvml"] = mod
    try:
        yield mod
    finally:
        if old is None:
            sys.modules.pop("pynvml", None)
        else:
            sys.modules["pynvml"] = old
