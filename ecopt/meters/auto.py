"""``meter="auto"``: the best meter this machine allows, and why it was chosen.

Order (documented in docs/energy.md):

1. **NVML** for every visible NVIDIA GPU, **plus RAPL** for CPU packages and
   DRAM when readable; with GPUs but no readable RAPL, the CPU/RAM side is the
   labelled estimate (so a trial's energy still covers the host).
2. Else **CodeCarbon**, if installed *and* it can measure something ecopt's own
   meters cannot (Apple powermetrics, Windows EMI, Intel Power Gadget, AMD
   GPUs, a Raspberry Pi's PMIC).
3. Else the **estimate** (:class:`~ecopt.meters.estimate.EstimateMeter`).

Why CodeCarbon is skipped when it could only estimate: its CPU fallback is
TDP x whole-machine load sampled once a second (or TDP/2 flat), and its RAM
term is a model; ecopt's estimate uses this process's exact CPU time, states
its constants, costs no background thread and no 1-2 s hardware probe. Both
are estimates, so the cheaper, more transparent one wins. Ask for
``meter="codecarbon"`` to get CodeCarbon anyway (labelled
``codecarbon-estimate``).

Every fallback emits a :class:`MeterFallbackWarning` and is recorded in the
meter's ``describe()`` (hence in ``study.json``).
"""

from __future__ import annotations

import logging
import platform
import warnings
from collections.abc import Sequence
from typing import Any

from ecopt.errors import MeterError
from ecopt.meters.base import ComponentEnergy, Measurement, Meter, WindowHandle

__all__ = ["CompositeMeter", "MeterFallbackWarning", "build_auto", "probe_backends"]

log = logging.getLogger("ecopt")


class MeterFallbackWarning(UserWarning):
    """``meter="auto"`` could not use a better meter and fell back."""


class CompositeMeter(Meter):
    """Several meters measuring disjoint components over the same windows.

    Args:
        parts: Meters whose component names do not collide (e.g. NVML's
            ``gpu:0`` and RAPL's ``cpu:package-0``).
        why: Human-readable reasons for the choice, kept in ``describe()``.
        name: Name recorded in measurements (default: part names joined by ``+``).

    Raises:
        ValueError: for an empty ``parts`` list.
    """

    def __init__(self, parts: list[Meter], why: list[str] | None = None,
                 name: str | None = None, auto: bool = False) -> None:
        super().__init__()
        if not parts:
            raise ValueError("a CompositeMeter needs at least one part, got []")
        self.parts = list(parts)
        self.why = list(why or [])
        self.auto = auto
        self.name = name or "+".join(p.name for p in self.parts)

    def min_window_s(self) -> float:
        """The longest of the parts' (every component must be resolved)."""
        return max(p.min_window_s() for p in self.parts)

    def start(self) -> WindowHandle:
        if len(self.parts) == 1:  # no layer of our own: auto costs what its meter costs
            return self.parts[0].start()
        return super().start()

    def cuda_devices(self) -> Sequence[int] | None:
        """Every part's devices, so the composite's timestamps come after all their work."""
        found: set[int] = set()
        for p in self.parts:
            d = p.cuda_devices()
            found.update(d if d is not None else ())
        if not found:
            return super().cuda_devices()
        scope = super().cuda_devices()
        return sorted(found | set(scope or ()))

    def _start(self) -> Any:
        handles: list[WindowHandle] = []
        try:
            for p in self.parts:
                handles.append(p.start())
        except BaseException:
            for p, h in zip(self.parts, handles):
                try:
                    p.stop(h)
                except Exception:
                    pass
            raise
        return {"handles": handles, "extras": {}}

    def _stop(self, state: Any, duration_s: float) -> dict[str, ComponentEnergy]:
        # Stopped in reverse so the cheapest counters (opened first) bracket the rest.
        comps: dict[str, ComponentEnergy] = {}
        extras: dict[str, float] = {}
        errors: list[str] = []
        for p, h in reversed(list(zip(self.parts, state["handles"]))):
            try:
                m = p.stop(h)
            except Exception as exc:
                errors.append(f"{p.name}: {exc}")
                continue
            for k, c in m.components.items():
                comps[k if k not in comps else f"{p.name}:{k}"] = c
            extras.update(m.extras)
        if errors:
            raise MeterError("meter failed while measuring: " + "; ".join(errors))
        state["extras"] = extras  # per window, so overlapping windows never mix extras
        return comps

    def stop(self, handle: WindowHandle) -> Measurement:
        from dataclasses import replace

        if len(self.parts) == 1:
            return self.parts[0].stop(handle)
        m = super().stop(handle)
        extras = handle.state["extras"]
        return replace(m, extras={**m.extras, **extras}) if extras else m

    def window_details(self) -> dict[str, Any]:
        # Per-window details stay lean (no "why" list in every phase record).
        if len(self.parts) == 1:
            return self.parts[0].window_details()
        return {"meter": self.name, "parts": [p.window_details() for p in self.parts]}

    def describe(self) -> dict[str, Any]:
        parts = [p.describe() for p in self.parts]
        d: dict[str, Any] = {"meter": self.name,
                             "measured": all(bool(x.get("measured", False)) for x in parts)}
        if self.auto:
            d["auto"] = True
            d["chosen"] = [p.name for p in self.parts]
            d["why"] = list(self.why)
        if len(parts) == 1:
            d.update({k: v for k, v in parts[0].items() if k not in d})
        else:
            d["parts"] = parts
        return d

    def close(self) -> None:
        for p in self.parts:
            p.close()


def _codecarbon_can_measure() -> tuple[bool, str]:
    """Whether installed CodeCarbon would *measure* here (cheap probes, no tracker)."""
    from ecopt.meters.codecarbon import codecarbon_installed

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
    from pathlib import Path

    try:
        if importlib.util.find_spec("amdsmi") is not None:
            return True
    except (ImportError, ValueError):
        pass
    try:
        return "raspberry" in Path("/proc/device-tree/model").read_text(errors="ignore").lower()
    except OSError:
        return False


def probe_backends(rapl_root: str | None = None) -> dict[str, dict[str, Any]]:
    """Try each backend and say whether it works here and why not.

    Returns:
        Backend name -> ``{"available": bool, "why": str, "meter": Meter | None}``.
        Meters returned here are open: close the ones you do not keep.
    """
    out: dict[str, dict[str, Any]] = {}
    from ecopt.meters.nvml import NVMLMeter
    from ecopt.meters.rapl import DEFAULT_POWERCAP_ROOT, RaplMeter

    try:
        m: Meter = NVMLMeter()
        out["nvml"] = {"available": True, "meter": m,
                       "why": f"NVML reads {len(m.components)} GPU(s): "  # type: ignore[attr-defined]
                              + ", ".join(f"{g['component']} {g['name']} ({g['method']})"
                                          for g in m.describe()["gpus"])}
    except Exception as exc:
        out["nvml"] = {"available": False, "meter": None, "why": f"{type(exc).__name__}: {exc}"}
    try:
        m = RaplMeter(root=rapl_root or DEFAULT_POWERCAP_ROOT)
        out["rapl"] = {"available": True, "meter": m,
                       "why": "RAPL reads " + ", ".join(m.components)}  # type: ignore[attr-defined]
    except Exception as exc:
        out["rapl"] = {"available": False, "meter": None, "why": f"{type(exc).__name__}: {exc}"}
    ok, why = _codecarbon_can_measure()
    out["codecarbon"] = {"available": ok, "meter": None, "why": why}
    out["estimate"] = {"available": True, "meter": None,
                       "why": "always available: CPU time x W/core + RSS x W/GB (an estimate)"}
    return out


def build_auto(rapl_root: str | None = None, warn: bool = True, **estimate_options: Any
               ) -> CompositeMeter:
    """Build the ``auto`` meter (see the module docstring for the order).

    Args:
        rapl_root: Powercap root (tests use a fake tree).
        warn: Emit :class:`MeterFallbackWarning` when falling back.
        **estimate_options: Passed to :class:`EstimateMeter` where it is used.
    """
    from ecopt.meters.estimate import EstimateMeter

    probes = probe_backends(rapl_root)
    why: list[str] = [f"{k}: {v['why']}" for k, v in probes.items() if k != "estimate"]
    parts: list[Meter] = []
    nv, rp = probes["nvml"], probes["rapl"]
    if nv["available"]:
        parts.append(nv["meter"])
    if rp["available"]:
        parts.append(rp["meter"])
    elif nv["available"]:
        est = EstimateMeter(**estimate_options)
        parts.append(est)
        why.append("no readable RAPL: the host CPU/RAM side is the estimate (measured=False)")
        _fallback(warn, "meter='auto': GPUs are measured with NVML but no RAPL is readable, so "
                        "CPU/RAM energy is estimated (labelled estimate-*); " + rp["why"])
    if parts:
        return CompositeMeter(parts, why, auto=True)
    if probes["codecarbon"]["available"]:
        from ecopt.meters.codecarbon import CodeCarbonMeter

        cc = CodeCarbonMeter()
        why.append("chose CodeCarbon: " + probes["codecarbon"]["why"])
        return CompositeMeter([cc], why, auto=True)
    why.append("chose the estimate: nothing here can measure energy")
    _fallback(warn, "meter='auto': no NVML GPU, no readable RAPL and no CodeCarbon measuring "
                    "backend on this machine; energy is ESTIMATED from CPU time "
                    "(source estimate-cpu-time, measured=False). Run `ecopt meters` for details.")
    return CompositeMeter([EstimateMeter(**estimate_options)], why, auto=True)


def _fallback(warn: bool, msg: str) -> None:
    # Python's default warning filter already shows each message once per call site.
    log.info(msg)
    if warn:
        warnings.warn(msg, MeterFallbackWarning, stacklevel=4)
