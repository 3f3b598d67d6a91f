"""``ecopt meters``: what ``meter="auto"`` picks on this machine, why, and each component's source."""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from typing import Any

__all__ = ["cli_main", "probe_report"]


def probe_report(probe_s: float = 0.0, rapl_root: str | None = None) -> dict[str, Any]:
    """Probe every backend, build ``auto``, optionally measure an idle window.

    Args:
        probe_s: Also measure a window of this many seconds (the process sleeps)
            with the chosen meter; 0 skips it.
        rapl_root: Powercap root (tests use a fake tree).

    Returns:
        JSON-able dict: ``backends`` (name -> available, why), ``auto``
        (the chosen meter's ``describe()``), ``warnings`` and, with
        ``probe_s``, ``window`` (a Measurement dict).

    Raises:
        ValueError: for a negative ``probe_s``.
    """
    if not probe_s >= 0:
        raise ValueError(f"--probe-s >= 0 must hold, got {probe_s}")
    from ecopt.meters.auto import build_auto, probe_backends

    backends = {k: {"available": v["available"], "why": v["why"]}
                for k, v in probe_backends(rapl_root).items()}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        meter = build_auto(rapl_root=rapl_root)
    try:
        report: dict[str, Any] = {
            "backends": backends,
            "auto": meter.describe(),
            "warnings": [str(w.message) for w in caught],
        }
        if probe_s > 0:
            import time

            h = meter.start()
            time.sleep(probe_s)
            report["window"] = meter.stop(h).to_dict()
    finally:
        meter.close()
    return report


def _components_of(auto: dict[str, Any]) -> list[tuple[str, str, bool]]:
    """(component, source, measured) rows from an auto meter's describe()."""
    parts = auto.get("parts") or [auto]
    rows: list[tuple[str, str, bool]] = []
    for p in parts:
        m = p.get("meter")
        if m == "nvml":
            for g in p.get("gpus", []):
                rows.append((g["component"], "nvml-energy-counter" if g["method"] == "energy-counter"
                             else "nvml-power-sampling", True))
        elif m == "rapl":
            rows += [(c, "rapl", True) for c in p.get("domains", {})]
        elif m == "codecarbon":
            for c, src in p.get("sources", {}).items():
                rows.append((c, src, src != "codecarbon-estimate"))
        elif m == "estimate":
            rows.append(("cpu", "estimate-cpu-time", False))
            if p.get("ram_w_per_gb", 0) > 0:
                rows.append(("ram", "estimate-ram", False))
        else:  # every other meter (Zeus-backed ones, third-party ones) names its sources
            for c, src in (p.get("sources") or {}).items():
                rows.append((c, str(src), bool(p.get("measured", False))))
    return rows


def cli_main(args: argparse.Namespace) -> int:
    """Handler of ``ecopt meters`` (``--json``, ``--probe-s``)."""
    report = probe_report(float(getattr(args, "probe_s", 0.0) or 0.0))
    if getattr(args, "json", False):
        json.dump(report, sys.stdout, indent=2, default=str)
        print()
        return 0
    out = sys.stdout
    print("Energy meters on this machine", file=out)
    print("", file=out)
    width = max(len(k) for k in report["backends"])
    print(f"  {'backend':<{width}}  usable  why", file=out)
    for name, b in report["backends"].items():
        mark = "yes" if b["available"] else "no "
        print(f"  {name:<{width}}  {mark}     {b['why']}", file=out)
    auto = report["auto"]
    print("", file=out)
    print(f"auto picks: {auto['meter']}"
          f" ({'MEASURED' if auto.get('measured') else 'ESTIMATED: energy figures are estimates'})",
          file=out)
    for line in auto.get("why", []):
        if line.startswith("chose") or line.startswith("no CPU meter"):
            print(f"  because: {line}", file=out)
    print("", file=out)
    print("  component        source                    measured", file=out)
    for comp, src, measured in _components_of(auto):
        print(f"  {comp:<16} {src:<25} {'yes' if measured else 'no (estimate)'}", file=out)
    if auto.get("meter") == "estimate":
        print("", file=out)
        print(f"  estimate constants: cpu_w_per_core={auto.get('cpu_w_per_core')} W, "
              f"ram_w_per_gb={auto.get('ram_w_per_gb')} W/GB, scope={auto.get('scope')}; "
              f"model: {auto.get('model')}", file=out)
    if "window" in report:
        w = report["window"]
        print("", file=out)
        print(f"probe window: {w['duration_s']:.3f} s idle, {w['energy_j']:.4g} J "
              f"({w['energy_j'] / max(w['duration_s'], 1e-9):.4g} W), "
              f"{'measured' if w['measured'] else 'ESTIMATED'}", file=out)
        for comp, c in w["components"].items():
            print(f"  {comp:<16} {c['energy_j']:.4g} J  {c['source']}", file=out)
    return 0
