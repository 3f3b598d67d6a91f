"""``meter="auto"``: the best meters this machine allows, found through the registry, and why.

``auto`` iterates every meter the registry knows (:mod:`ecopt.registry`:
built in, registered at run time, or from an installed package's entry point
in group ``ecopt.meters``) whose class sets ``auto_priority``, highest first,
and takes each one that

1. measures nothing a meter already taken measures (``auto_covers``: any of
   ``gpu``, ``cpu``, ``dram``: no device is counted twice), and
2. says it works here (:meth:`~ecopt.meters.base.Meter.probe`) and builds.

The built-in priorities (documented in docs/energy.md):

=====================  ========  ==================  =====================================
meter                  priority  covers              reads
=====================  ========  ==================  =====================================
``nvml``               100       gpu                 NVIDIA GPUs (ecopt's NVML code)
``amd``                90        gpu                 AMD GPUs (Zeus over amdsmi)
``apple``              80        gpu, cpu, dram      Apple Silicon (Zeus, IOReport)
``jetson``             80        gpu, cpu            NVIDIA Jetson power rails (Zeus)
``rapl``               50        cpu, dram           RAPL through powercap sysfs (root)
``rapl-zeusd``         45        cpu, dram           RAPL through zeusd (no root needed)
``codecarbon``         10        gpu, cpu, dram      only where it would *measure*
=====================  ========  ==================  =====================================

So a machine with NVIDIA GPUs and readable RAPL gets ``nvml+rapl``; an AMD
GPU node whose user has no root but a zeusd gets ``amd+rapl-zeusd``. When a
GPU meter was taken but nothing measures the CPU, the CPU/RAM side is the
labelled **estimate** (so a trial's energy still covers the host); when
nothing measures at all, the estimate alone
(:class:`~ecopt.meters.estimate.EstimateMeter`).

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
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
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


@dataclass(frozen=True)
class _Candidate:
    name: str
    cls: type[Meter] | None
    priority: int
    error: str = ""


def _candidates() -> list[_Candidate]:
    """Every registered meter ``auto`` may consider (``auto_priority`` set), best first.

    A third-party entry point that fails to load is listed with its error
    (``cls=None``) rather than breaking ``auto``.
    """
    from ecopt import registry

    out: list[_Candidate] = []
    for name in registry.names("meters"):
        try:
            f = registry.factory("meters", name)
        except Exception as exc:  # noqa: BLE001 - a broken plug-in must not break auto
            out.append(_Candidate(name, None, -1, f"{type(exc).__name__}: {exc}"))
            continue
        prio = getattr(f, "auto_priority", None)
        if isinstance(f, type) and issubclass(f, Meter) and isinstance(prio, int):
            out.append(_Candidate(name, f, prio))
    return sorted(out, key=lambda c: (-c.priority, c.name))


def _options(rapl_root: str | None, meter_options: Mapping[str, Mapping[str, Any]] | None
             ) -> dict[str, dict[str, Any]]:
    opts = {k: dict(v) for k, v in (meter_options or {}).items()}
    if rapl_root is not None:
        opts.setdefault("rapl", {})["root"] = rapl_root
    return opts


def probe_backends(rapl_root: str | None = None,
                   meter_options: Mapping[str, Mapping[str, Any]] | None = None
                   ) -> dict[str, dict[str, Any]]:
    """Probe every meter ``auto`` may use (the registry's, best first) and say why not.

    Nothing is built: each meter's :meth:`~ecopt.meters.base.Meter.probe` answers.

    Args:
        rapl_root: Powercap root for ``rapl`` (tests use a fake tree).
        meter_options: Meter name -> options its probe and constructor get.

    Returns:
        Meter name -> ``{"available": bool, "why": str, "priority": int,
        "covers": [...]}``, plus ``"estimate"`` (always available).
    """
    opts = _options(rapl_root, meter_options)
    out: dict[str, dict[str, Any]] = {}
    for c in _candidates():
        if c.cls is None:
            out[c.name] = {"available": False, "why": c.error, "priority": None, "covers": []}
            continue
        ok, why = c.cls.probe(**opts.get(c.name, {}))
        out[c.name] = {"available": ok, "why": why or "usable", "priority": c.priority,
                       "covers": sorted(c.cls.auto_covers)}
    out["estimate"] = {"available": True, "priority": None, "covers": ["cpu", "ram"],
                       "why": "always available: CPU time x W/core + RSS x W/GB (an estimate)"}
    return out


def build_auto(rapl_root: str | None = None, warn: bool = True,
               meter_options: Mapping[str, Mapping[str, Any]] | None = None,
               **estimate_options: Any) -> CompositeMeter:
    """Build the ``auto`` meter (see the module docstring for the rule).

    Args:
        rapl_root: Powercap root for ``rapl`` (tests use a fake tree).
        warn: Emit :class:`MeterFallbackWarning` when falling back.
        meter_options: Meter name -> options for its probe and constructor
            (e.g. ``{"amd": {"gpus": [0]}}``).
        **estimate_options: Passed to :class:`EstimateMeter` where it is used.
    """
    from ecopt.meters.estimate import EstimateMeter

    opts = _options(rapl_root, meter_options)
    why: list[str] = []
    parts: list[Meter] = []
    covered: dict[str, str] = {}  # "gpu" -> the name of the meter that measures it
    cpu_why: list[str] = []
    for c in _candidates():
        if c.cls is None:
            why.append(f"{c.name}: {c.error}")
            continue
        overlap = sorted(c.cls.auto_covers & set(covered))
        if overlap:
            why.append(f"{c.name}: not used: {', '.join(overlap)} already measured by "
                       + ", ".join(sorted({covered[k] for k in overlap})))
            continue
        o = opts.get(c.name, {})
        ok, reason = c.cls.probe(**o)
        if ok:
            try:
                m = c.cls(**o)
            except Exception as exc:  # noqa: BLE001 - recorded, and auto goes on
                ok, reason = False, f"{type(exc).__name__}: {exc}"
        if not ok:
            why.append(f"{c.name}: {reason}")
            if "cpu" in c.cls.auto_covers and "gpu" not in c.cls.auto_covers:
                cpu_why.append(f"{c.name}: {reason}")
            continue
        parts.append(m)
        covered.update({k: c.name for k in c.cls.auto_covers})
        why.append(f"{c.name}: {m.summary()}")
    if parts and "cpu" not in covered:
        parts.append(EstimateMeter(**estimate_options))
        why.append("no CPU meter works here: the host CPU/RAM side is the estimate "
                   "(measured=False)")
        _fallback(warn, f"meter='auto': {' + '.join(p.name for p in parts[:-1])} measures the "
                        "GPU(s) but no CPU meter works here, so CPU/RAM energy is estimated "
                        "(labelled estimate-*); " + "; ".join(cpu_why))
    if parts:
        why.append("chose " + " + ".join(p.name for p in parts))
        return CompositeMeter(parts, why, auto=True)
    why.append("chose the estimate: nothing here can measure energy")
    _fallback(warn, "meter='auto': no registered meter can measure energy on this machine (no "
                    "NVIDIA or AMD GPU, Apple Silicon, Jetson, readable RAPL, zeusd or "
                    "CodeCarbon measuring backend); energy is ESTIMATED from CPU time "
                    "(source estimate-cpu-time, measured=False). Run `ecopt meters` for details.")
    return CompositeMeter([EstimateMeter(**estimate_options)], why, auto=True)


def _fallback(warn: bool, msg: str) -> None:
    # Python's default warning filter already shows each message once per call site.
    log.info(msg)
    if warn:
        warnings.warn(msg, MeterFallbackWarning, stacklevel=4)
