"""A fake ``pynvml`` (nvidia-ml-py) and a fake ``torch.cuda``, for the tests and for
``scripts/gpu_check.py --dry-run`` (this machine has no GPU).

It mirrors the real module's behaviour that ecopt depends on, so the tests can
fail where real hardware would disagree with the code:

* **Energy counter** (``nvmlDeviceGetTotalEnergyConsumption``, mJ). With
  ``live=True`` it grows with the GPU's draw over wall time and is refreshed
  only every ``counter_period_s``, as NVML's is, so a window shorter than a
  period may read 0 J; without ``live`` it is the number tests set.
* **Two power readings.** ``nvmlDeviceGetPowerUsage`` returns the draw
  *averaged over the last* ``average_window_s`` (1 s: what NVML documents for
  Ampere, except GA100, and newer; 0 gives the instantaneous draw of GA100 and
  older), while ``nvmlDeviceGetFieldValues(h, [NVML_FI_DEV_POWER_INSTANT])``
  returns the draw now (``instant_field=False``: that field is unsupported).
  The draw's history is kept, so a change of ``power_mw`` shows at once in the
  instant field and only gradually in the average.
* **Power limits**: the requested limit (``nvmlDeviceGetPowerManagementLimit``)
  and the enforced one (``nvmlDeviceGetEnforcedPowerLimit``: the lower of the
  request and any other cap, ``external_cap_mw``, e.g. a node power manager);
  the draw is capped by the enforced limit; constraints, default, permission
  and "not supported" as NVML answers them.
* **MIG**: a GPU with ``mig_devices`` is in MIG mode; each ``MIG-...`` UUID
  resolves (``nvmlDeviceGetHandleByUUID``) to a MIG device handle, which has
  no energy counter, power reading or power limit (NVML_ERROR_NOT_SUPPORTED).
* **PCI order**: NVML lists GPUs in the order given here; each has a PCI bus
  id. :class:`FakeCuda` orders the same GPUs the way CUDA does by default
  (fastest first, by ``speed``) or by PCI bus id (``CUDA_DEVICE_ORDER=PCI_BUS_ID``),
  and plays ``torch.cuda`` for a process that initialised CUDA on them: device
  UUIDs, per-device ``synchronize`` (recorded, and waiting for the work a test
  queued on that device).

Nothing here is a measurement; numbers from the fake mean nothing about hardware.
"""

from __future__ import annotations

import math
import os
import sys
import threading
import time
import types
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

__all__ = ["FakeGpu", "FakeCuda", "MigHandle", "make_fake_pynvml", "installed_fake_pynvml",
           "NVML_ERROR_UNINITIALIZED", "NVML_ERROR_INVALID_ARGUMENT", "NVML_ERROR_NOT_SUPPORTED",
           "NVML_ERROR_NO_PERMISSION", "NVML_ERROR_NOT_FOUND", "NVML_ERROR_DRIVER_NOT_LOADED",
           "NVML_ERROR_GPU_IS_LOST"]

NVML_SUCCESS = 0
NVML_ERROR_UNINITIALIZED = 1
NVML_ERROR_INVALID_ARGUMENT = 2
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_NO_PERMISSION = 4
NVML_ERROR_NOT_FOUND = 6
NVML_ERROR_DRIVER_NOT_LOADED = 9
NVML_ERROR_GPU_IS_LOST = 15
NVML_FI_DEV_POWER_AVERAGE = 185
NVML_FI_DEV_POWER_INSTANT = 186
NVML_POWER_SCOPE_GPU = 0
NVML_VALUE_TYPE_UNSIGNED_INT = 1
NVML_DEVICE_MIG_DISABLE = 0
NVML_DEVICE_MIG_ENABLE = 1

_MESSAGES = {1: "Uninitialized", 2: "Invalid Argument", 3: "Not Supported",
             4: "Insufficient Permissions", 6: "Not Found", 9: "Driver Not Loaded",
             15: "GPU is lost"}

#: Draw-tracking attributes: changing one starts a new segment of the draw's history.
_DRAW_FIELDS = ("power_mw", "power_limit_mw", "external_cap_mw")


@dataclass
class FakeGpu:
    """One fake GPU's state (tests change it between calls).

    Attributes:
        energy_mj: Total-energy counter (mJ); ``None``: not supported (pre-Volta).
            With ``live`` it is the counter's value when the GPU was created.
        power_mw: What the GPU would draw unconstrained (mW); it draws
            ``min(power_mw, enforced limit)``.
        power_limit_mw: The requested power limit (what NVML was last told).
        default_limit_mw, min_limit_mw, max_limit_mw: The board's default and range.
        external_cap_mw: Another cap in force (``None``: none); the enforced
            limit is the lower of it and ``power_limit_mw``.
        can_set_limit: ``False``: setting a limit raises NVML_ERROR_NO_PERMISSION.
        limit_supported: ``False``: power-limit calls raise NVML_ERROR_NOT_SUPPORTED.
        live: The counter follows wall time (see the module docstring).
        counter_period_s: Refresh period of a live counter.
        average_window_s: ``nvmlDeviceGetPowerUsage`` averages the draw over this
            many trailing seconds (0: the instantaneous draw).
        instant_field: ``NVML_FI_DEV_POWER_INSTANT`` is supported.
        mig_devices: UUIDs (``MIG-...``) of this GPU's MIG devices; non-empty
            means MIG mode is on.
        pci_bus_id: NVML's PCI bus id (assigned in NVML order when ``None``).
        speed: How fast CUDA thinks the GPU is (:class:`FakeCuda` orders by it).
        lost: Every call raises NVML_ERROR_GPU_IS_LOST.
        calls: Call counts by kind (``energy``, ``power``, ``instant``, ``set_limit``).
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
    external_cap_mw: int | None = None
    can_set_limit: bool = True
    limit_supported: bool = True
    live: bool = False
    counter_period_s: float = 0.1
    average_window_s: float = 1.0
    instant_field: bool = True
    mig_devices: list[str] = field(default_factory=list)
    pci_bus_id: str | None = None
    speed: float = 1.0
    lost: bool = False
    calls: dict[str, int] = field(default_factory=dict)
    limit_history: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        now = time.perf_counter()
        self._t0 = now
        self._e0 = float(self.energy_mj or 0)
        # The draw was steady for an hour before the GPU was created.
        self._hist: list[tuple[float, int]] = [(now - 3600.0, self.draw_mw)]

    def __setattr__(self, name: str, value: Any) -> None:
        super().__setattr__(name, value)
        if name in _DRAW_FIELDS and "_hist" in self.__dict__:
            draw = self.draw_mw
            if draw != self._hist[-1][1]:
                self._hist.append((time.perf_counter(), draw))

    @property
    def enforced_limit_mw(self) -> int:
        """The limit in force: the request, or a lower external cap."""
        cap = self.external_cap_mw
        return self.power_limit_mw if cap is None else min(self.power_limit_mw, cap)

    @property
    def draw_mw(self) -> int:
        """What the GPU draws now: its power, capped by the enforced limit."""
        return min(self.power_mw, self.enforced_limit_mw)

    def _energy_mj(self, a: float, b: float) -> float:
        """Millijoules drawn over ``[a, b]`` (perf_counter seconds), from the draw's history."""
        total = 0.0
        for k, (start, mw) in enumerate(self._hist):
            end = self._hist[k + 1][0] if k + 1 < len(self._hist) else math.inf
            lo, hi = max(a, start), min(b, end)
            if hi > lo:
                total += mw * (hi - lo)
        return total

    def counter_mj(self) -> int:
        if self.energy_mj is None:
            raise _error(NVML_ERROR_NOT_SUPPORTED)
        if not self.live:
            return self.energy_mj
        now = time.perf_counter()
        p = self.counter_period_s
        # The counter shows the energy at its last refresh tick.
        tick = math.floor(now / p) * p if p > 0 else now
        return int(self._e0 + self._energy_mj(self._t0, max(self._t0, tick)))

    def average_mw(self) -> int:
        """The draw averaged over the trailing ``average_window_s`` (nvmlDeviceGetPowerUsage)."""
        w = self.average_window_s
        if w <= 0:
            return self.draw_mw
        now = time.perf_counter()
        return int(round(self._energy_mj(now - w, now) / w))

    def set_limit(self, mw: int) -> None:
        self.power_limit_mw = int(mw)
        self.limit_history.append(int(mw))


@dataclass(frozen=True)
class MigHandle:
    """The fake's handle of a MIG device (the k-th of GPU ``parent``)."""

    parent: int
    k: int


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


class NVMLError_NotFound(NVMLError):  # pynvml's name
    pass


def _error(code: int) -> NVMLError:
    cls = {NVML_ERROR_NOT_SUPPORTED: NVMLError_NotSupported,
           NVML_ERROR_NO_PERMISSION: NVMLError_NoPermission,
           NVML_ERROR_NOT_FOUND: NVMLError_NotFound}.get(code, NVMLError)
    return cls(code)


def make_fake_pynvml(gpus: list[FakeGpu], init_error: int | None = None) -> types.ModuleType:
    """A module object that behaves like ``pynvml`` for the given fake GPUs.

    Args:
        gpus: The GPUs, in NVML index order (PCI bus ids are assigned in this
            order where a GPU has none).
        init_error: ``nvmlInit`` raises this NVML error code (e.g. no driver).
    """
    mod = types.ModuleType("pynvml")
    state = {"init": False}
    for i, g in enumerate(gpus):
        if g.pci_bus_id is None:
            g.pci_bus_id = f"00000000:{0x18 + 0x10 * i:02X}:00.0"

    def _check(h: Any) -> FakeGpu:
        if not state["init"]:
            raise _error(NVML_ERROR_UNINITIALIZED)
        g = gpus[h.parent if isinstance(h, MigHandle) else h]
        if g.lost:
            raise _error(NVML_ERROR_GPU_IS_LOST)
        return g

    def _whole(h: Any) -> FakeGpu:
        """The GPU of a physical handle; MIG devices have no power or energy reading."""
        g = _check(h)
        if isinstance(h, MigHandle):
            raise _error(NVML_ERROR_NOT_SUPPORTED)
        return g

    def _count(g: FakeGpu, kind: str) -> None:
        g.calls[kind] = g.calls.get(kind, 0) + 1

    def _limits(h: Any) -> FakeGpu:
        g = _whole(h)
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

    def nvmlDeviceGetHandleByUUID(uuid: Any) -> Any:
        uuid = uuid.decode() if isinstance(uuid, bytes) else str(uuid)
        for i, g in enumerate(gpus):
            if g.uuid == uuid:
                return i
            if uuid in g.mig_devices:
                return MigHandle(i, g.mig_devices.index(uuid))
        raise _error(NVML_ERROR_NOT_FOUND)

    def nvmlDeviceGetIndex(h: Any) -> int:
        if isinstance(h, MigHandle):
            raise _error(NVML_ERROR_NOT_SUPPORTED)
        return h

    def nvmlDeviceGetName(h: Any) -> str:
        g = _check(h)
        return f"{g.name} MIG 1g.10gb" if isinstance(h, MigHandle) else g.name

    def nvmlDeviceGetUUID(h: Any) -> str:
        g = _check(h)
        return g.mig_devices[h.k] if isinstance(h, MigHandle) else g.uuid

    def nvmlDeviceGetPciInfo(h: Any) -> types.SimpleNamespace:
        g = _check(h)
        bus = int(str(g.pci_bus_id).split(":")[1], 16)
        return types.SimpleNamespace(busId=g.pci_bus_id, busIdLegacy=g.pci_bus_id[4:],
                                     domain=0, bus=bus, device=0, pciDeviceId=0x20B010DE)

    def nvmlDeviceGetMigMode(h: Any) -> list[int]:
        g = _whole(h)
        mode = NVML_DEVICE_MIG_ENABLE if g.mig_devices else NVML_DEVICE_MIG_DISABLE
        return [mode, mode]

    def nvmlDeviceIsMigDeviceHandle(h: Any) -> int:
        _check(h)
        return int(isinstance(h, MigHandle))

    def nvmlDeviceGetDeviceHandleFromMigDeviceHandle(h: Any) -> int:
        _check(h)
        if not isinstance(h, MigHandle):
            raise _error(NVML_ERROR_INVALID_ARGUMENT)
        return h.parent

    def nvmlDeviceGetMaxMigDeviceCount(h: Any) -> int:
        return len(_whole(h).mig_devices)

    def nvmlDeviceGetMigDeviceHandleByIndex(h: Any, k: int) -> MigHandle:
        g = _whole(h)
        if not 0 <= k < len(g.mig_devices):
            raise _error(NVML_ERROR_NOT_FOUND)
        return MigHandle(h, k)

    def nvmlDeviceGetTotalEnergyConsumption(h: Any) -> int:
        g = _whole(h)
        _count(g, "energy")
        return g.counter_mj()

    def nvmlDeviceGetPowerUsage(h: Any) -> int:
        g = _whole(h)
        _count(g, "power")
        return g.average_mw()

    def nvmlDeviceGetFieldValues(h: Any, field_ids: list[Any]) -> list[types.SimpleNamespace]:
        g = _check(h)
        out = []
        for fid in field_ids:
            fid, scope = fid if isinstance(fid, tuple) else (fid, 0)
            ret, mw = NVML_ERROR_NOT_SUPPORTED, 0
            if not isinstance(h, MigHandle):
                if fid == NVML_FI_DEV_POWER_INSTANT and g.instant_field:
                    _count(g, "instant")
                    ret, mw = NVML_SUCCESS, g.draw_mw
                elif fid == NVML_FI_DEV_POWER_AVERAGE:
                    ret, mw = NVML_SUCCESS, g.average_mw()
            out.append(types.SimpleNamespace(
                fieldId=fid, scopeId=scope, timestamp=int(time.time() * 1e6), latencyUsec=0,
                valueType=NVML_VALUE_TYPE_UNSIGNED_INT, nvmlReturn=ret,
                value=types.SimpleNamespace(uiVal=mw, ulVal=mw, ullVal=mw, dVal=float(mw))))
        return out

    def nvmlDeviceGetPowerManagementLimit(h: Any) -> int:
        return _limits(h).power_limit_mw

    def nvmlDeviceGetEnforcedPowerLimit(h: Any) -> int:
        return _limits(h).enforced_limit_mw

    def nvmlDeviceGetPowerManagementDefaultLimit(h: Any) -> int:
        return _limits(h).default_limit_mw

    def nvmlDeviceGetPowerManagementLimitConstraints(h: Any) -> list[int]:
        g = _limits(h)
        return [g.min_limit_mw, g.max_limit_mw]

    def nvmlDeviceSetPowerManagementLimit(h: Any, limit_mw: int) -> None:
        g = _limits(h)
        _count(g, "set_limit")
        if not g.can_set_limit:
            raise _error(NVML_ERROR_NO_PERMISSION)
        if not g.min_limit_mw <= int(limit_mw) <= g.max_limit_mw:
            raise _error(NVML_ERROR_INVALID_ARGUMENT)
        g.set_limit(int(limit_mw))

    def nvmlDeviceGetPersistenceMode(h: Any) -> int:
        _whole(h)
        return 1

    for k, v in dict(locals()).items():
        if k.startswith("nvml"):
            setattr(mod, k, v)
    for cls in (NVMLError, NVMLError_NotSupported, NVMLError_NoPermission, NVMLError_NotFound):
        setattr(mod, cls.__name__, cls)
    for name, value in list(globals().items()):
        if name.startswith("NVML_") and isinstance(value, int):
            setattr(mod, name, value)
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


class _Uuid:
    """torch's ``_CUuuid``: ``str()`` gives the UUID without NVML's ``GPU-`` prefix."""

    def __init__(self, text: str) -> None:
        self._text = text.split("-", 1)[1] if text.startswith(("GPU-", "MIG-")) else text

    def __str__(self) -> str:
        return self._text


class FakeCuda:
    """``torch.cuda`` of a process that initialised CUDA on fake GPUs.

    CUDA enumerates GPUs fastest first (by :attr:`FakeGpu.speed`, ties in PCI
    order) unless ``CUDA_DEVICE_ORDER=PCI_BUS_ID``; ``CUDA_VISIBLE_DEVICES``
    (indices into that order, ``GPU-`` UUIDs or ``MIG-`` UUIDs) picks the
    devices this process sees. ``synchronize(d)`` is recorded in
    :attr:`synced` (device index, ``perf_counter`` when it returned) and waits
    for the seconds of work :meth:`queue` put on that device.

    Example:
        >>> cuda = FakeCuda(nv.gpus)
        >>> cuda.install(monkeypatch)       # torch.cuda.* patched for the test
        >>> cuda.queue(1, 0.2)              # 0.2 s of kernels pending on cuda:1
    """

    def __init__(self, gpus: list[FakeGpu], initialized: bool = True,
                 in_use: set[int] | None = None) -> None:
        self.gpus = gpus
        self.initialized = initialized
        #: CUDA devices where torch holds memory (default: all); a sync of another would
        #: create a CUDA context there, which :attr:`contexts_created` counts.
        self.in_use = in_use
        self.contexts_created: list[int] = []
        self.synced: list[tuple[int, float]] = []
        self.current = 0
        self._queued: dict[int, float] = {}
        self._lock = threading.Lock()
        self.devices = self._enumerate()

    def _enumerate(self) -> list[tuple[str, FakeGpu]]:
        """``(uuid, gpu)`` of each device this process sees, in CUDA's order."""
        phys = sorted(self.gpus, key=lambda g: str(g.pci_bus_id))
        if os.environ.get("CUDA_DEVICE_ORDER") != "PCI_BUS_ID":
            phys = sorted(phys, key=lambda g: -g.speed)  # stable: ties stay in PCI order
        cvd = os.environ.get("CUDA_VISIBLE_DEVICES")
        if cvd is None:
            return [(g.uuid, g) for g in phys]
        out: list[tuple[str, FakeGpu]] = []
        for item in (s.strip() for s in cvd.split(",")):
            if item.isdigit() and int(item) < len(phys):
                out.append((phys[int(item)].uuid, phys[int(item)]))
            elif item.startswith("GPU-") and any(g.uuid.startswith(item) for g in phys):
                g = next(g for g in phys if g.uuid.startswith(item))
                out.append((g.uuid, g))
            elif item.startswith("MIG-") and any(item in g.mig_devices for g in phys):
                out.append((item, next(g for g in phys if item in g.mig_devices)))
            else:
                break  # CUDA ignores every entry after an invalid one
        return out

    def queue(self, device: int, seconds: float) -> None:
        """Pretend ``seconds`` of kernels are queued on CUDA device ``device``."""
        with self._lock:
            self._queued[device] = self._queued.get(device, 0.0) + seconds

    def synchronize(self, device: Any = None) -> None:
        if device is None:
            d = self.current
        elif isinstance(device, int):
            d = device
        else:
            text = str(device)
            d = int(text.split(":")[1]) if ":" in text else self.current
        if not 0 <= d < len(self.devices):
            raise RuntimeError(f"CUDA error: invalid device ordinal {d}")
        if self.in_use is not None and d not in self.in_use:
            self.contexts_created.append(d)
        with self._lock:
            wait = self._queued.pop(d, 0.0)
        if wait:
            time.sleep(wait)
        self.synced.append((d, time.perf_counter()))

    def memory_reserved(self, device: Any = None) -> int:
        d = self.current if device is None else (
            device if isinstance(device, int) else int(str(device).split(":")[1]))
        return 0 if self.in_use is not None and d not in self.in_use else 1 << 28

    def get_device_properties(self, device: Any) -> types.SimpleNamespace:
        d = device if isinstance(device, int) else int(str(device).split(":")[1])
        uuid, g = self.devices[d]
        return types.SimpleNamespace(name=g.name, uuid=_Uuid(uuid), total_memory=40 * 2**30,
                                     major=8, minor=0, multi_processor_count=108)

    def install(self, monkeypatch: Any) -> FakeCuda:
        """Patch ``torch.cuda`` (with pytest's ``monkeypatch``) to be this fake."""
        import torch

        def name_of(device: Any = None) -> str:
            return str(self.get_device_properties(self.current if device is None else device).name)

        for name, fn in (("is_available", lambda: True),
                         ("is_initialized", lambda: self.initialized),
                         ("device_count", lambda: len(self.devices)),
                         ("current_device", lambda: self.current),
                         ("synchronize", self.synchronize),
                         ("get_device_properties", self.get_device_properties),
                         ("get_device_name", name_of),
                         ("memory_reserved", self.memory_reserved),
                         ("reset_peak_memory_stats", lambda device=None: None),
                         ("max_memory_allocated", lambda device=None: 0),
                         ("empty_cache", lambda: None)):
            monkeypatch.setattr(torch.cuda, name, fn)
        return self
