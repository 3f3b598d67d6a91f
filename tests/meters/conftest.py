"""Fakes for hardware this machine lacks: a ``pynvml`` module and a powercap sysfs tree.

The fake ``pynvml`` mirrors the real module's surface that ecopt uses (error
classes with ``.value``, millijoule energy counters, milliwatt power); tests
change the fake GPUs' state between a window's start and stop.
"""

from __future__ import annotations

import sys
import types
from dataclasses import dataclass, field
from pathlib import Path

import pytest

NVML_ERROR_UNINITIALIZED = 1
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_DRIVER_NOT_LOADED = 9
NVML_ERROR_GPU_IS_LOST = 15


@dataclass
class FakeGpu:
    name: str = "NVIDIA A100-SXM4-40GB"
    uuid: str = "GPU-00000000-0000-0000-0000-000000000000"
    energy_mj: int | None = 1_000_000  # None: counter not supported (pre-Volta)
    power_mw: int = 150_000
    lost: bool = False
    calls: dict[str, int] = field(default_factory=dict)


def make_fake_pynvml(gpus: list[FakeGpu], init_error: int | None = None) -> types.ModuleType:
    """A module object that behaves like ``pynvml`` for the given fake GPUs."""
    mod = types.ModuleType("pynvml")

    class NVMLError(Exception):
        def __init__(self, value: int) -> None:
            super().__init__(value)
            self.value = value

        def __str__(self) -> str:
            return {1: "Uninitialized", 3: "Not Supported", 9: "Driver Not Loaded",
                    15: "GPU is lost"}.get(self.value, f"NVML error {self.value}")

    class NVMLError_NotSupported(NVMLError):
        pass

    def _err(code: int) -> NVMLError:
        return NVMLError_NotSupported(code) if code == NVML_ERROR_NOT_SUPPORTED else NVMLError(code)

    state = {"init": False}

    def _check(h: int) -> FakeGpu:
        if not state["init"]:
            raise _err(NVML_ERROR_UNINITIALIZED)
        g = gpus[h]
        if g.lost:
            raise _err(NVML_ERROR_GPU_IS_LOST)
        return g

    def nvmlInit() -> None:
        if init_error is not None:
            raise _err(init_error)
        state["init"] = True

    def nvmlShutdown() -> None:
        state["init"] = False

    def nvmlDeviceGetCount() -> int:
        if not state["init"]:
            raise _err(NVML_ERROR_UNINITIALIZED)
        return len(gpus)

    def nvmlDeviceGetHandleByIndex(i: int) -> int:
        if not 0 <= i < len(gpus):
            raise _err(2)
        return i

    def nvmlDeviceGetHandleByUUID(uuid: str) -> int:
        for i, g in enumerate(gpus):
            if g.uuid == uuid:
                return i
        raise _err(6)

    def nvmlDeviceGetIndex(h: int) -> int:
        return h

    def nvmlDeviceGetName(h: int) -> str:
        return _check(h).name

    def nvmlDeviceGetUUID(h: int) -> str:
        return _check(h).uuid

    def nvmlDeviceGetTotalEnergyConsumption(h: int) -> int:
        g = _check(h)
        g.calls["energy"] = g.calls.get("energy", 0) + 1
        if g.energy_mj is None:
            raise _err(NVML_ERROR_NOT_SUPPORTED)
        return g.energy_mj

    def nvmlDeviceGetPowerUsage(h: int) -> int:
        g = _check(h)
        g.calls["power"] = g.calls.get("power", 0) + 1
        return g.power_mw

    for k, v in dict(locals()).items():
        if k.startswith("nvml") or k.startswith("NVMLError"):
            setattr(mod, k, v)
    mod.NVML_ERROR_NOT_SUPPORTED = NVML_ERROR_NOT_SUPPORTED
    mod.gpus = gpus
    return mod


@pytest.fixture
def fake_nvml(monkeypatch):
    """Install a fake ``pynvml``; call the fixture's value with a list of FakeGpu."""
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)

    def install(gpus: list[FakeGpu] | None = None, init_error: int | None = None):
        mod = make_fake_pynvml(gpus if gpus is not None else [FakeGpu()], init_error)
        monkeypatch.setitem(sys.modules, "pynvml", mod)
        return mod

    return install


def make_powercap(root: Path, sockets: int = 1, dram: bool = True,
                  max_range_uj: int = 262_143_328_850, start_uj: int = 1_000_000) -> Path:
    """Write a powercap tree with the kernel's layout (intel_rapl driver).

    ``root/intel-rapl:S`` is package-S with sub-zones ``intel-rapl:S:0`` (core)
    and ``intel-rapl:S:1`` (dram); top-level symlinks ``intel-rapl:S:N`` point
    into them, as in ``/sys/class/powercap``; ``intel-rapl-mmio:0`` duplicates
    package-0 (must be skipped).
    """
    root.mkdir(parents=True, exist_ok=True)
    (root / "intel-rapl").mkdir(exist_ok=True)
    (root / "intel-rapl" / "enabled").write_text("1\n")

    def zone(path: Path, name: str) -> None:
        path.mkdir(parents=True, exist_ok=True)
        (path / "name").write_text(name + "\n")
        (path / "energy_uj").write_text(f"{start_uj}\n")
        (path / "max_energy_range_uj").write_text(f"{max_range_uj}\n")
        (path / "enabled").write_text("1\n")
        (path / "constraint_0_name").write_text("long_term\n")
        (path / "constraint_0_power_limit_uw").write_text("150000000\n")

    for s in range(sockets):
        top = root / f"intel-rapl:{s}"
        zone(top, f"package-{s}")
        zone(top / f"intel-rapl:{s}:0", "core")
        (root / f"intel-rapl:{s}:0").symlink_to(top / f"intel-rapl:{s}:0")
        if dram:
            zone(top / f"intel-rapl:{s}:1", "dram")
            (root / f"intel-rapl:{s}:1").symlink_to(top / f"intel-rapl:{s}:1")
    zone(root / "intel-rapl-mmio:0", "package-0")
    return root


def set_uj(root: Path, zone: str, value: int) -> None:
    """Set a zone's counter, e.g. ``set_uj(root, "intel-rapl:0/intel-rapl:0:1", 5)``.

    Written atomically (sysfs reads never see a half-written value), keeping the mode.
    """
    import os

    target = root / zone / "energy_uj"
    tmp = target.with_name("energy_uj.tmp")
    tmp.write_text(f"{value}\n")
    tmp.chmod(target.stat().st_mode & 0o777)
    os.replace(tmp, target)


def get_uj(root: Path, zone: str) -> int:
    return int((root / zone / "energy_uj").read_text())


@pytest.fixture
def powercap(tmp_path):
    """A fake powercap tree with one socket (package-0 + dram)."""
    return make_powercap(tmp_path / "powercap")


@pytest.fixture
def hw():
    """The helpers above (test modules cannot import conftest under importlib mode)."""
    return types.SimpleNamespace(FakeGpu=FakeGpu, make_fake_pynvml=make_fake_pynvml,
                                 make_powercap=make_powercap, set_uj=set_uj, get_uj=get_uj)
