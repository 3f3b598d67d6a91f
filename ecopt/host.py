"""Facts about the machine a study ran on (recorded in ``study.json``)."""

from __future__ import annotations

import os
import platform
import socket
from importlib import metadata
from pathlib import Path
from collections.abc import Mapping
from typing import Any

__all__ = ["host_facts", "library_versions", "cpu_model", "note_gpu_facts"]

#: Facts meters learnt about each GPU in this process, by its id (see note_gpu_facts).
_GPU_FACTS: dict[str, dict[str, Any]] = {}

_LIBS = ("ecopt", "torch", "botorch", "gpytorch", "numpy", "pandas", "scipy", "scikit-learn",
         "nvidia-ml-py", "zeus", "amdsmi", "codecarbon", "transformers", "polars", "dask",
         "distributed")


def library_versions() -> dict[str, str]:
    """Installed versions of the libraries that shape results (missing ones omitted)."""
    out: dict[str, str] = {}
    for name in _LIBS:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return out


def cpu_model() -> str:
    """The CPU's model name (from /proc/cpuinfo, else platform's answer)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _ram_gb() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 1024**2, 2)
    except OSError:
        pass
    return None


def _gpus() -> list[str]:
    """GPU models from the NVIDIA driver's procfs (no library needed); [] when none."""
    root = Path("/proc/driver/nvidia/gpus")
    out: list[str] = []
    if root.is_dir():
        for d in sorted(root.iterdir()):
            try:
                for line in (d / "information").read_text().splitlines():
                    if line.startswith("Model:"):
                        out.append(line.split(":", 1)[1].strip())
            except OSError:
                continue
    return out


def note_gpu_facts(uuid: str, facts: Mapping[str, Any]) -> None:
    """Record what a meter learnt about a GPU (its CUDA index in this process and how it was
    matched, the energy counter's measured update period, which power reading it has...);
    :func:`host_facts` lists them under ``gpu_devices``.

    Args:
        uuid: NVML's UUID of the GPU; for an AMD GPU, which Zeus names by HIP
            index only, ``"amd-hip<N>"``.
        facts: JSON-able facts, merged into those already noted.
    """
    _GPU_FACTS.setdefault(str(uuid), {}).update(facts)


def host_facts() -> dict[str, Any]:
    """CPU model, cores, RAM, GPUs, OS, Python and library versions.

    ``gpu_devices`` (present once a GPU meter ran in this process) holds, per
    GPU, its NVML identity, CUDA index and how the two were matched, and what
    the meter measured about it (e.g. ``counter_period_s``).
    """
    out: dict[str, Any] = {
        "hostname": socket.gethostname(),
        "cpu_model": cpu_model(),
        "cpu_count": os.cpu_count(),
        "ram_gb": _ram_gb(),
        "gpus": _gpus(),
        "rapl": Path("/sys/class/powercap/intel-rapl").exists(),
        "os": platform.platform(),
        "python": platform.python_version(),
        "libraries": library_versions(),
    }
    if _GPU_FACTS:
        out["gpu_devices"] = [{"uuid": u, **f} for u, f in _GPU_FACTS.items()]
        out["cuda_env"] = {k: os.environ.get(k)
                           for k in ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER",
                                     "HIP_VISIBLE_DEVICES")}
    return out
