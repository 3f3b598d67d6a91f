"""Systems on a chip through Zeus: Apple Silicon (``meter="apple"``) and NVIDIA Jetson (``meter="jetson"``).

Both read cumulative energy counters through Zeus's device layer
(``zeus.device.soc``); a window's energy is the difference of two reads, so
windows may overlap.

* **Apple Silicon** (``zeus.device.soc.apple.AppleSilicon``, which reads the
  chip's IOReport energy counters through the ``zeus-apple-silicon`` package,
  no ``sudo`` and no ``powermetrics``): components ``cpu`` (all CPU clusters),
  ``gpu:0`` (the on-chip GPU), ``gpu-sram:0``, ``dram`` and ``ane`` (the Neural
  Engine) where the chip reports them; ``source="apple-ioreport"``, measured.
* **Jetson** (``zeus.device.soc.jetson.Jetson``, which reads the INA3221 power
  monitor's rails under ``/sys/bus/i2c/drivers/ina3221*`` and integrates them
  in a process of its own about every 0.1 s): components ``cpu`` and
  ``gpu:0`` (their rails) and ``module-other`` (the module's input rail less
  those two: memory, I/O and the rest; so the components add up to the
  module's total and nothing is counted twice); ``source=
  "jetson-ina3221-power-sampling"``, measured. Being sampled at ~10 Hz, a
  window shorter than about a second is flagged ``short-window``.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from ecopt.errors import MeterError, MeterUnavailableError
from ecopt.meters._zeus import ZeusMeter, zeus_module
from ecopt.meters.base import FLAG_SHORT_WINDOW, MIN_WINDOW_PERIODS, ComponentEnergy

__all__ = ["AppleSiliconMeter", "JetsonMeter"]

#: Zeus's field of AppleSiliconMeasurement -> ecopt's component (per-core and
#: per-cluster fields lie inside cpu_total_mj and are not added).
_APPLE_FIELDS = {"cpu_total_mj": "cpu", "gpu_mj": "gpu:0", "gpu_sram_mj": "gpu-sram:0",
                 "dram_mj": "dram", "ane_mj": "ane"}
#: Zeus's JetsonMeasurement fields.
_JETSON_FIELDS = {"cpu_energy_mj": "cpu", "gpu_energy_mj": "gpu:0"}
#: How often Zeus's Jetson process integrates the rails (its queue timeout), seconds.
JETSON_PERIOD_S = 0.1


class _SocMeter(ZeusMeter):
    """Differences of a Zeus SoC's cumulative counters (mJ) as components."""

    source = ""
    _components: list[str]

    def __init__(self) -> None:
        super().__init__()
        self._setup()

    def __getstate__(self) -> dict[str, Any]:
        return {}

    def _totals(self) -> dict[str, float]:
        raise NotImplementedError

    def _read(self) -> dict[str, float]:
        try:
            return self._totals()
        except MeterError:
            raise
        except Exception as exc:  # noqa: BLE001 - Zeus's and the sensor's errors alike
            raise MeterError(f"{self.name}: reading the energy counters failed: "
                             f"{type(exc).__name__}: {exc}") from None

    @property
    def components(self) -> list[str]:
        """Component names this meter reports."""
        return list(self._components)

    def _start(self) -> Any:
        return self._read()

    def _stop(self, state: Any, duration_s: float) -> dict[str, ComponentEnergy]:
        end = self._read()
        short = duration_s < self.min_window_s()
        flags = (FLAG_SHORT_WINDOW,) if short and self.min_window_s() > 0.01 else ()
        return {k: ComponentEnergy(max(0.0, end[k] - state[k]) / 1000.0, self.source, True,
                                   flags=flags)
                for k in self._components if k in end and k in state}

    def describe(self) -> dict[str, Any]:
        return {"meter": self.name, "measured": True,
                "sources": {c: self.source for c in self._components}}


class AppleSiliconMeter(_SocMeter):
    """Apple Silicon energy (CPU, GPU, DRAM, Neural Engine) through Zeus's IOReport reader.

    Raises:
        MeterUnavailableError: not an Apple Silicon Mac, or Zeus / its
            ``zeus-apple-silicon`` package missing (``pip install 'zeus[apple]'``).

    Example:
        >>> meter = ecopt.meters.get_meter("apple")
        >>> w = meter.start(); train(); m = meter.stop(w)
        >>> sorted(m.components)
        ['ane', 'cpu', 'dram', 'gpu-sram:0', 'gpu:0']
    """

    name = "apple"
    source = "apple-ioreport"
    auto_priority = 80
    auto_covers = frozenset({"gpu", "cpu", "dram"})

    def _setup(self) -> None:
        apple = zeus_module("zeus.device.soc.apple", "the Apple Silicon meter")
        ok, why = self.probe()
        if not ok:
            raise MeterUnavailableError(why)
        try:
            self._soc = apple.AppleSilicon()
        except Exception as exc:  # noqa: BLE001 - ZeusAppleInitError and the like
            raise MeterUnavailableError(f"Zeus could not open the Apple energy counters: "
                                        f"{exc}") from None
        first = self._totals()
        self._components = [c for c in _APPLE_FIELDS.values() if c in first]
        if not self._components:
            raise MeterUnavailableError("the Apple energy counters report nothing on this chip")

    @classmethod
    def probe(cls, **options: Any) -> tuple[bool, str]:
        """An Apple Silicon Mac with ``zeus-apple-silicon`` installed."""
        try:
            apple = zeus_module("zeus.device.soc.apple", "the Apple Silicon meter")
        except MeterUnavailableError as exc:
            return False, str(exc)
        if not apple.zeus_apple_available:
            return False, ("Apple Silicon energy needs the zeus-apple-silicon package "
                           "(pip install 'zeus[apple]'), which only installs on macOS")
        if not apple.apple_silicon_is_available():
            return False, "not an Apple Silicon Mac"
        return True, ""

    def _totals(self) -> dict[str, float]:
        m = self._soc.get_total_energy_consumption()
        return {c: float(getattr(m, f)) for f, c in _APPLE_FIELDS.items()
                if getattr(m, f, None) is not None}

    def summary(self) -> str:
        return "Zeus (Apple IOReport) reads " + ", ".join(self._components)


class JetsonMeter(_SocMeter):
    """NVIDIA Jetson energy from its INA3221 power rails, integrated by Zeus.

    Raises:
        MeterUnavailableError: not a Jetson, no readable rails, or Zeus missing.

    Example:
        >>> meter = ecopt.meters.get_meter("jetson")
        >>> w = meter.start(); infer(); m = meter.stop(w)
        >>> sorted(m.components)
        ['cpu', 'gpu:0', 'module-other']
    """

    name = "jetson"
    source = "jetson-ina3221-power-sampling"
    auto_priority = 80
    auto_covers = frozenset({"gpu", "cpu", "dram"})

    def _setup(self) -> None:
        jet = zeus_module("zeus.device.soc.jetson", "the Jetson meter")
        ok, why = self.probe()
        if not ok:
            raise MeterUnavailableError(why)
        try:
            self._soc = jet.Jetson()
        except Exception as exc:  # noqa: BLE001 - ZeusJetsonInitError and the like
            raise MeterUnavailableError(f"Zeus could not open the Jetson power rails: {exc}"
                                        ) from None
        first = self._totals()
        self._components = [c for c in ("cpu", "gpu:0", "module-other") if c in first]
        if not self._components:
            raise MeterUnavailableError(
                "no CPU, GPU or module input rail found under /sys/bus/i2c/drivers/ina3221*")

    @classmethod
    def probe(cls, **options: Any) -> tuple[bool, str]:
        """A Jetson (Zeus: aarch64 Linux with the Tegra release file or libraries)."""
        try:
            jet = zeus_module("zeus.device.soc.jetson", "the Jetson meter")
        except MeterUnavailableError as exc:
            return False, str(exc)
        if not jet.jetson_is_available():
            return False, "not an NVIDIA Jetson"
        return True, ""

    def min_window_s(self) -> float:
        return MIN_WINDOW_PERIODS * JETSON_PERIOD_S

    def _totals(self) -> dict[str, float]:
        d = asdict(self._soc.get_total_energy_consumption())
        out = {c: float(d[f]) for f, c in _JETSON_FIELDS.items() if d.get(f) is not None}
        if d.get("total_energy_mj") is not None:
            out["module-other"] = float(d["total_energy_mj"]) - sum(out.values())
        return out

    def summary(self) -> str:
        return "Zeus (Jetson INA3221 rails) reads " + ", ".join(self._components)

    def close(self) -> None:
        # Zeus's Jetson integrates in a process of its own and stops it only at exit (an
        # atexit hook calling _stop_process); a closed meter stops it now, the same way.
        soc = getattr(self, "_soc", None)
        stop = getattr(soc, "_stop_process", None)
        if callable(stop):
            stop()
        self._soc = None
