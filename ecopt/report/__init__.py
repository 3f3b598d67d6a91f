"""Reports of a study: data, figures, HTML and the CLI commands, each in its own module.

A report is a pure function of a study directory (or a live study). The layers,
in the order data flows (Optuna's ``visualization/`` is the model):

* :mod:`ecopt.report.data`: what a report shows, computed (front, hypervolume
  series, per-phase energy and its provenance, payback); no drawing.
* :mod:`ecopt.report.figures`: matplotlib figures of that data (public as
  :mod:`ecopt.plot`).
* :mod:`ecopt.report.html`: the self-contained HTML report.
* :mod:`ecopt.report.dashboard`: ``ecopt dashboard``, a live page of a study.
* :mod:`ecopt.report.live`: the notebook front of ``Study.optimize(live=True)``.
* :mod:`ecopt.report.cli`: ``ecopt report / plot / compare / show``.

What the core needs of this (number formatting, trial DataFrames, the
progress bar) lives in the core: :mod:`ecopt.fmt`, :mod:`ecopt.frames`,
:mod:`ecopt.callbacks` (docs/architecture.md).

Importing this package needs neither matplotlib nor pandas.

Example:
    >>> from ecopt.report import build_report, write_report, show_text
    >>> data = build_report("runs/quickstart", baseline=0)
    >>> print(show_text(data))
    >>> path, _ = write_report("runs/quickstart")
"""

from __future__ import annotations

from typing import Any

from ecopt.report.data import (
    DERIVED_AXES,
    CompareData,
    CompareEntry,
    HypervolumePoint,
    Payback,
    PhaseEnergy,
    Provenance,
    ReportData,
    axis_names,
    axis_values,
    build_compare,
    build_report,
    check_axis,
    hypervolume_series,
    is_energy_metric,
    open_study,
)
from ecopt.report import data
from ecopt.fmt import fmt_number

__all__ = ["fmt_number", "write_report", "render_html", "show_text"]
__all__ += data.__all__

_LAZY = {"write_report": "ecopt.report.html", "render_html": "ecopt.report.html",
         "show_text": "ecopt.report.cli"}


def __getattr__(name: str) -> Any:
    # The HTML and CLI layers import on first use (the figures they draw need matplotlib).
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'ecopt.report' has no attribute {name!r}")
