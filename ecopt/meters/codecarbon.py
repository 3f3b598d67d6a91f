"""An adapter over CodeCarbon's ``OfflineEmissionsTracker`` (never the network).

Each window is one CodeCarbon *task* (``start_task`` / ``stop_task``), so
windows cannot overlap: opening a second one while one is open raises
:class:`~ecopt.errors.MeterError`. The adapter reports CodeCarbon's CPU, GPU
and RAM energy as components and its CO2-eq as ``extras["co2_kg"]``.

Provenance stays honest: CodeCarbon silently falls back to estimates when it
cannot measure, so each component's ``source`` names the mode CodeCarbon used:

=====================  ==========================  ==========
CodeCarbon mode        ecopt ``source``            measured
=====================  ==========================  ==========
CPU ``intel_rapl``     ``codecarbon-rapl``         yes
CPU ``windows_emi``    ``codecarbon-windows-emi``  yes
CPU power gadget       ``codecarbon-power-gadget`` yes
Apple powermetrics     ``codecarbon-powermetrics`` yes
GPU (pynvml/amdsmi)    ``codecarbon-nvml``/-amdsmi yes
CPU ``cpu_load``       ``codecarbon-estimate``     **no** (TDP x load)
CPU ``constant``       ``codecarbon-estimate``     **no** (TDP/2 or 85 W)
RAM (always a model)   ``codecarbon-estimate``     **no**
=====================  ==========================  ==========
"""

from __future__ import annotations

import importlib
import logging
import platform
import re
from pathlib import Path
import tempfile
from typing import Any

from ecopt.errors import MeterError, MeterUnavailableError
from ecopt.meters.base import ComponentEnergy, Meter

__all__ = ["CodeCarbonMeter", "codecarbon_installed", "codecarbon_can_measure"]

_INSTALL_HINT = "pip install 'ecopt[codecarbon]'"
_KWH_TO_J = 3.6e6
_MEASURED_CPU_MODES = {
    "intel_rapl": "codecarbon-rapl",
    "windows_emi": "codecarbon-windows-emi",
    "intel_power_gadget": "codecarbon-power-gadget",
}


def codecarbon_installed() -> bool:
    """Whether ``codecarbon`` can be imported (cheap: finds the spec only)."""
    import importlib.util

    try:
        return importlib.util.find_spec("codecarbon") is not None
    except (ImportError, ValueError):
        return False


def codecarbon_can_measure() -> tuple[bool, str]:
    """Whether installed CodeCarbon would *measure* here (cheap probes, no tracker)."""
    if not codecarbon_installed():
        return False, "codecarbon is not installed (pip install 'ecopt[codecarbon]')"
    system = platform.system()
    if system == "Linux" and not _linux_might_need_codecarbon():
        # On Linux CodeCarbon measures only through RAPL and NVML (probed by ecopt
        # itself), amdsmi or a Raspberry Pi PMIC; skip importing it (~0.3 s) otherwise.
        return False, ("codecarbon is installed but could only estimate here (its TDP x "
                       "CPU-load fallback and RAM model); ecopt's estimate is used instead "
                       "(per-process CPU time, stated constants, no background thread)")
    try:
        from codecarbon.core import cpu as cccpu
        from codecarbon.core import gpu as ccgpu

        if system == "Darwin":
            from codecarbon.core import powermetrics

            if powermetrics.is_powermetrics_available():
                return True, "CodeCarbon can read Apple powermetrics"
            if cccpu.is_powergadget_available():
                return True, "CodeCarbon can read Intel Power Gadget"
        elif system == "Windows":
            from codecarbon.core import windows_emi

            if windows_emi.is_emi_available():
                return True, "CodeCarbon can read the Windows Energy Meter Interface"
            if cccpu.is_powergadget_available():
                return True, "CodeCarbon can read Intel Power Gadget"
        if ccgpu.is_rocm_system():
            return True, "CodeCarbon can read AMD GPUs through amdsmi"
        if cccpu.is_raspberry():
            return True, "CodeCarbon can read the Raspberry Pi PMIC"
    except Exception as exc:  # a broken optional install must not break auto
        return False, f"codecarbon probe failed ({type(exc).__name__}: {exc})"
    return False, ("codecarbon is installed but could only estimate here (its TDP x CPU-load "
                   "fallback and RAM model); ecopt's estimate is used instead (per-process CPU "
                   "time, stated constants, no background thread)")


def _linux_might_need_codecarbon() -> bool:
    import importlib.util

    try:
        # AMD GPUs are ecopt's own through Zeus (meter "amd"); CodeCarbon's amdsmi path
        # matters only where Zeus is not installed.
        if (importlib.util.find_spec("amdsmi") is not None
                and importlib.util.find_spec("zeus") is None):
            return True
    except (ImportError, ValueError):
        pass
    try:
        return "raspberry" in Path("/proc/device-tree/model").read_text(errors="ignore").lower()
    except OSError:
        return False


class CodeCarbonMeter(Meter):
    """Energy and CO2-eq from CodeCarbon's offline tracker, with its mode in the provenance.

    Args:
        country_iso_code: 3-letter ISO code of the grid's country, for CO2-eq
            (CodeCarbon's offline energy-mix table; no network).
        measure_power_secs: CodeCarbon's power measurement interval, seconds.
        tracking_mode: ``"machine"`` (CodeCarbon's default: whole-machine load)
            or ``"process"`` (this process's CPU load).
        gpu_ids: GPU indices for CodeCarbon to track (default: all).

    Raises:
        MeterUnavailableError: when codecarbon is not installed.
        ValueError: for a malformed country code, interval or tracking mode.

    Example:
        >>> meter = CodeCarbonMeter(country_iso_code="FRA")
        >>> w = meter.start(); work(); m = meter.stop(w)
        >>> m.components["cpu"].source, m.extras["co2_kg"]
        ('codecarbon-estimate', ...)
    """

    name = "codecarbon"
    #: Last: auto takes it only where nothing of ecopt's own measures (see ecopt.meters.auto).
    auto_priority = 10
    auto_covers = frozenset({"gpu", "cpu", "dram"})

    def __init__(self, country_iso_code: str = "USA", measure_power_secs: float = 1.0,
                 tracking_mode: str = "machine", gpu_ids: list[int] | None = None) -> None:
        super().__init__()
        if not (isinstance(country_iso_code, str) and re.fullmatch(r"[A-Za-z]{3}", country_iso_code)):
            raise ValueError(f"country_iso_code must be a 3-letter ISO code like 'USA' or 'FRA', "
                             f"got {country_iso_code!r}")
        if not measure_power_secs > 0:
            raise ValueError(f"measure_power_secs > 0 must hold, got {measure_power_secs}")
        if tracking_mode not in ("machine", "process"):
            raise ValueError(f"tracking_mode must be 'machine' or 'process', got {tracking_mode!r}")
        self.country_iso_code = country_iso_code.upper()
        self.measure_power_secs = float(measure_power_secs)
        self.tracking_mode = tracking_mode
        self.gpu_ids = None if gpu_ids is None else [int(g) for g in gpu_ids]
        self._import()
        self._tracker: Any = None
        self._modes: dict[str, str] | None = None

    @staticmethod
    def _import() -> Any:
        try:
            return importlib.import_module("codecarbon")
        except ImportError as exc:
            raise MeterUnavailableError(
                f"the CodeCarbon meter needs codecarbon, which is not installed ({exc}); "
                f"{_INSTALL_HINT}, or use meter='estimate'") from None

    def __getstate__(self) -> dict[str, Any]:
        return {"country_iso_code": self.country_iso_code,
                "measure_power_secs": self.measure_power_secs,
                "tracking_mode": self.tracking_mode, "gpu_ids": self.gpu_ids}

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(state)
        self._tracker = None
        self._modes = None

    @classmethod
    def is_available(cls, **options: Any) -> bool:
        """Whether CodeCarbon is installed (so ``meter="codecarbon"`` works)."""
        return codecarbon_installed()

    @classmethod
    def probe(cls, **options: Any) -> tuple[bool, str]:
        """For ``auto``: only where CodeCarbon would *measure* (:func:`codecarbon_can_measure`)."""
        return codecarbon_can_measure()

    def _ensure(self) -> Any:
        """Build CodeCarbon's tracker and detect its hardware (about 1-2 s, once)."""
        if self._tracker is not None:
            return self._tracker
        cc = self._import()
        logging.getLogger("codecarbon").setLevel(logging.ERROR)
        kwargs: dict[str, Any] = dict(
            country_iso_code=self.country_iso_code,
            measure_power_secs=self.measure_power_secs,
            tracking_mode=self.tracking_mode,
            output_methods=[], save_to_file=False, output_dir=tempfile.gettempdir(),
            log_level="error", allow_multiple_runs=True, project_name="ecopt",
        )
        if self.gpu_ids is not None:
            kwargs["gpu_ids"] = self.gpu_ids
        try:
            tracker = cc.OfflineEmissionsTracker(**kwargs)
            tracker._ensure_hardware_ready()  # detection happens here, not mid-window
        except Exception as exc:
            raise MeterError(f"CodeCarbon could not set up its tracker: {exc}") from None
        if not getattr(tracker, "_hardware", None):
            raise MeterError("CodeCarbon detected no hardware to track (see its log)")
        self._tracker = tracker
        self._modes = self._detect_modes(tracker)
        return tracker

    @staticmethod
    def _detect_modes(tracker: Any) -> dict[str, str]:
        """Component -> the CodeCarbon mode that produces it."""
        modes: dict[str, str] = {}
        for hw in tracker._hardware:
            kind = type(hw).__name__
            if kind == "CPU":
                modes["cpu"] = str(getattr(hw, "_mode", "unknown"))
            elif kind == "GPU":
                try:
                    from codecarbon.core import gpu as ccgpu

                    modes["gpu"] = "nvml" if ccgpu.is_nvidia_system() else "amdsmi"
                except Exception:  # pragma: no cover
                    modes["gpu"] = "nvml"
            elif kind == "RAM":
                modes["ram"] = "ram-model"
            elif kind == "AppleSiliconChip":
                modes[str(getattr(hw, "chip_part", "cpu")).lower()] = "powermetrics"
            elif kind == "Raspberry":
                modes[str(getattr(hw, "chip_part", "cpu")).lower()] = "raspberry-pmic"
        return modes

    @property
    def modes(self) -> dict[str, str]:
        """Component -> CodeCarbon mode (``cpu_load``, ``intel_rapl``, ``nvml``, ``ram-model``...)."""
        self._ensure()
        assert self._modes is not None
        return dict(self._modes)

    @staticmethod
    def source_of(mode: str) -> tuple[str, bool]:
        """ecopt ``(source, measured)`` for a CodeCarbon mode."""
        if mode in _MEASURED_CPU_MODES:
            return _MEASURED_CPU_MODES[mode], True
        if mode in ("nvml", "amdsmi", "powermetrics", "raspberry-pmic"):
            return f"codecarbon-{mode}", True
        return "codecarbon-estimate", False

    @property
    def estimates(self) -> bool:
        """Whether any component CodeCarbon reports here is an estimate."""
        return any(not self.source_of(m)[1] for m in self.modes.values())

    def _start(self) -> Any:
        tracker = self._ensure()
        if tracker._active_task is not None:
            raise MeterError("CodeCarbon measures one task at a time: this meter's windows "
                             "cannot overlap (close the open window first)")
        name = f"ecopt-{id(self)}-{len(tracker._tasks)}"
        tracker.start_task(name)
        if tracker._active_task != name:
            raise MeterError("CodeCarbon did not start its task (see the codecarbon log)")
        return name

    def _stop(self, state: Any, duration_s: float) -> dict[str, ComponentEnergy]:
        tracker = self._tracker
        data = tracker.stop_task(state)
        tracker._tasks.pop(state, None)  # keep memory flat over thousands of windows
        if data is None:
            raise MeterError(f"CodeCarbon lost task {state!r}")
        assert self._modes is not None
        comps: dict[str, ComponentEnergy] = {}
        for comp, kwh, power_w in (("cpu", data.cpu_energy, data.cpu_power),
                                   ("gpu", data.gpu_energy, data.gpu_power),
                                   ("ram", data.ram_energy, data.ram_power)):
            mode = self._modes.get(comp)
            if mode is None:
                continue
            source, measured = self.source_of(mode)
            comps[comp] = ComponentEnergy(
                max(0.0, float(kwh) * _KWH_TO_J), source, measured,
                note=f"CodeCarbon mode {mode!r}, {float(power_w):.4g} W")
        self._last_co2_kg = max(0.0, float(data.emissions or 0.0))
        return comps

    def stop(self, handle: Any) -> Any:  # adds CO2-eq to the base Measurement
        from dataclasses import replace

        m = super().stop(handle)
        return replace(m, extras={**m.extras, "co2_kg": self._last_co2_kg})

    def describe(self) -> dict[str, Any]:
        d: dict[str, Any] = {"meter": self.name, "country_iso_code": self.country_iso_code,
                             "measure_power_secs": self.measure_power_secs,
                             "tracking_mode": self.tracking_mode}
        try:
            modes = self.modes
        except MeterError as exc:
            d["error"] = str(exc)
            return d
        d["modes"] = modes
        d["sources"] = {c: self.source_of(m)[0] for c, m in modes.items()}
        d["measured"] = not self.estimates
        try:
            import codecarbon

            d["codecarbon_version"] = codecarbon.__version__
        except Exception:  # pragma: no cover
            pass
        return d

    def close(self) -> None:
        tracker = getattr(self, "_tracker", None)
        if tracker is not None:
            try:
                sched = getattr(tracker, "_scheduler_monitor_power", None)
                if sched is not None:
                    sched.stop()
            except Exception:  # pragma: no cover - best effort
                pass
            self._tracker = None
