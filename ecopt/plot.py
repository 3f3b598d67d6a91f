"""Matplotlib figures of a study (public name; the code lives in :mod:`ecopt.report.figures`).

Importing this module needs no matplotlib (so ``from ecopt import *`` works
without the ``plot`` extra); the first figure function used imports it, with
an install hint when it is missing.

Example:
    >>> import ecopt.plot
    >>> fig = ecopt.plot.pareto("runs/quickstart")
    >>> ecopt.plot.hypervolume("runs/quickstart").savefig("hv.png")
"""

from __future__ import annotations

from typing import Any

__all__ = ["pareto", "hypervolume", "phase_energy", "compare", "report_data", "Figure", "DPI"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from ecopt.report import figures  # ImportError with the install hint without matplotlib

        return getattr(figures, name)
    raise AttributeError(f"module 'ecopt.plot' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
