"""Fakes for hardware this machine lacks: a ``pynvml`` module, ``torch.cuda`` and a powercap tree.

The fake ``pynvml`` and ``torch.cuda`` (``tests/fake_pynvml.py``, shared with
``scripts/gpu_check.py --dry-run``) mirror what ecopt relies on in the real
ones (see that module's docstring); tests change the fake GPUs' state between calls.
"""

from __future__ import annotations

import sys
import types
from pathlib import Path

import pytest

from fake_pynvml import FakeCuda, FakeGpu, make_fake_pynvml


@pytest.fixture
def fake_nvml(monkeypatch):
    """Install a fake ``pynvml``; call the fixture's value with a list of FakeGpu."""
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.delenv("CUDA_DEVICE_ORDER", raising=False)

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
def fake_amd(monkeypatch):
    """Install a fake ``amdsmi`` under Zeus; call the fixture's value with a list of FakeAmdGpu."""
    pytest.importorskip("zeus.device")
    from contextlib import ExitStack

    from fake_amdsmi import FakeAmdGpu, installed_fake_amdsmi

    monkeypatch.delenv("HIP_VISIBLE_DEVICES", raising=False)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    with ExitStack() as stack:
        def install(gpus=None, init_error=None):
            return stack.enter_context(installed_fake_amdsmi(
                gpus if gpus is not None else [FakeAmdGpu()], monkeypatch, init_error))

        yield install


@pytest.fixture
def zeusd(tmp_path, monkeypatch):
    """Start a fake zeusd on a Unix socket in a temp dir; ZEUSD_SOCK_PATH names it.

    Call the fixture's value with the daemon's state (``powercap=``, ``nvml=``,
    ``groups=``...); it returns the :class:`fake_zeusd.FakeZeusd`.
    """
    pytest.importorskip("zeus.utils.zeusd")
    from contextlib import ExitStack

    from fake_zeusd import running_zeusd

    monkeypatch.delenv("ZEUSD_HOST_PORT", raising=False)
    monkeypatch.delenv("ZEUSD_TOKEN", raising=False)
    import shutil
    import tempfile

    # Not under tmp_path: a Unix socket's path must stay under ~108 bytes.
    folder = Path(tempfile.mkdtemp(prefix="ecopt-zeusd-"))
    sock = folder / "zeusd.sock"
    stack = ExitStack()
    stack.callback(shutil.rmtree, folder, True)
    with stack:
        def start(**state):
            z = stack.enter_context(running_zeusd(sock, **state))
            monkeypatch.setenv("ZEUSD_SOCK_PATH", str(sock))
            return z

        yield start


class _FakeAppleMonitor:
    """Plays zeus_apple_silicon.AppleEnergyMonitor: cumulative mJ per subsystem."""

    totals = {"cpu_total_mj": 1000, "gpu_mj": 500, "gpu_sram_mj": 10, "dram_mj": 200,
              "ane_mj": 0}

    def get_cumulative_energy(self):
        import types

        fields = ("cpu_total_mj", "efficiency_cores_mj", "performance_cores_mj",
                  "efficiency_cluster_mj", "performance_cluster_mj",
                  "efficiency_core_manager_mj", "performance_core_manager_mj", "dram_mj",
                  "gpu_mj", "gpu_sram_mj", "ane_mj")
        return types.SimpleNamespace(**{f: self.totals.get(f) for f in fields})


@pytest.fixture
def fake_apple(monkeypatch):
    """An Apple Silicon Mac under Zeus: its zeus_apple_silicon module and platform check."""
    import types

    zapple = pytest.importorskip("zeus.device.soc.apple")

    mod = types.SimpleNamespace(AppleEnergyMonitor=_FakeAppleMonitor)
    monkeypatch.setattr(zapple, "zeus_apple_silicon", mod)
    monkeypatch.setattr(zapple, "zeus_apple_available", True)
    monkeypatch.setattr(zapple, "apple_silicon_is_available", lambda: True)
    monkeypatch.setattr(_FakeAppleMonitor, "totals", dict(_FakeAppleMonitor.totals))
    return _FakeAppleMonitor


@pytest.fixture
def hw():
    """The helpers above (test modules cannot import conftest under importlib mode)."""
    return types.SimpleNamespace(FakeGpu=FakeGpu, FakeCuda=FakeCuda,
                                 make_fake_pynvml=make_fake_pynvml,
                                 make_powercap=make_powercap, set_uj=set_uj, get_uj=get_uj)
