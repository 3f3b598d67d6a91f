"""Kept for code written against earlier releases: use :mod:`ecopt.report.cli`."""

from __future__ import annotations

from ecopt.report.cli import compare_main, plot_main, report_main, show_main, show_text

__all__ = ["report_main", "plot_main", "compare_main", "show_main", "show_text"]
