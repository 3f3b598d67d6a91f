"""Kept for code written against earlier releases: use :mod:`ecopt.report.html`."""

from __future__ import annotations

from ecopt.report.html import CSP, figures, render_html, write_report

__all__ = ["render_html", "write_report", "figures", "CSP"]
