"""Matplotlib figures of a study: Pareto front, hypervolume, per-phase energy, comparisons.

Every function takes a :class:`~ecopt.Study`, a study directory or a
:class:`~ecopt.report.ReportData`, and returns a :class:`matplotlib.figure.Figure`
built without ``pyplot`` (no global state; a notebook shows the returned figure
once, a script saves it with ``fig.savefig(path)``). The numbers come from
:mod:`ecopt.report`; this module only draws them.

Conventions, in every figure:

* front trials: large orange dots, joined (by the front's staircase with two
  objectives, a dotted line in projections) and labelled with their trial
  numbers; other complete trials: small blue dots;
  trials that broke a constraint: hollow grey squares; failed and infeasible
  trials: red crosses / purple triangles where the axes have values for them
  (``energy_j``, ``duration_s``...), else listed in the legend;
* the reference point (red plus) and explicit thresholds and constraint bounds
  (dashed lines) are drawn;
* axis labels carry the objective's direction and "(estimated)" on every
  energy-derived axis when the study's energy was estimated.

Example:
    >>> import ecopt.plot
    >>> fig = ecopt.plot.pareto("runs/quickstart")              # 2 objectives: one panel
    >>> fig = ecopt.plot.pareto("runs/quickstart", x="energy_j", y="accuracy")
    >>> ecopt.plot.hypervolume("runs/quickstart").savefig("hv.png")
"""

from __future__ import annotations

import io
import itertools
import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

try:
    from matplotlib.figure import Figure as _MplFigure
except ImportError as _exc:  # pragma: no cover - matplotlib is in the [plot] extra
    raise ImportError("ecopt.plot needs matplotlib: pip install 'ecopt[plot]'") from _exc

from ecopt import pareto as _pareto
from ecopt.fmt import fmt_number
from ecopt.report.data import (
    CompareData,
    ReportData,
    axis_values,
    build_compare,
    build_report,
    check_axis,
)
from ecopt.trial import TrialRecord

if TYPE_CHECKING:
    from matplotlib.axes import Axes

    from ecopt.study import Study

__all__ = ["pareto", "hypervolume", "phase_energy", "compare", "report_data", "Figure", "DPI"]

#: Pixels per inch of every figure (sizes below are in inches).
DPI = 100

_FRONT: dict[str, Any] = dict(color="#e8710a", s=60, edgecolors="black", linewidths=0.8, zorder=4)
_DOMINATED: dict[str, Any] = dict(color="#4a7fb5", s=22, alpha=0.75, zorder=3)
_VIOLATES: dict[str, Any] = dict(facecolors="none", edgecolors="#888888", marker="s", s=30, zorder=2)
_FAILED: dict[str, Any] = dict(color="#c0392b", marker="x", s=30, zorder=2)
_INFEASIBLE: dict[str, Any] = dict(color="#8e44ad", marker="v", s=30, zorder=2)
_PRUNED: dict[str, Any] = dict(facecolors="none", edgecolors="#4a7fb5", marker="D", s=22, zorder=2)
_MAX_LISTED = 12


class Figure(_MplFigure):
    """A matplotlib Figure that a notebook shows inline as PNG, without pyplot.

    Built without ``pyplot`` there is no global figure list (nothing to close,
    no double display); ``_repr_png_`` lets Jupyter draw it when it is a cell's
    value, whatever backend is active.
    """

    def _repr_png_(self) -> bytes:
        buf = io.BytesIO()
        self.savefig(buf, format="png", dpi=DPI)
        return buf.getvalue()


def _t(text: object) -> str:
    """Study text made safe for matplotlib (``$`` would start mathtext)."""
    return str(text).replace("$", r"\$")


def report_data(source: Study | str | Path | ReportData) -> ReportData:
    """The :class:`ReportData` of a study, a study directory or a ReportData (returned as is)."""
    if isinstance(source, ReportData):
        return source
    return build_report(source)


def _new_figure(width_in: float, height_in: float) -> Figure:
    return Figure(figsize=(width_in, height_in), dpi=DPI, layout="constrained")


def _two_panels() -> tuple[Figure, Axes, Axes]:
    """An 11 x 4.2 in figure with two side-by-side panels (hypervolume, phase energy)."""
    fig = _new_figure(11, 4.2)
    return fig, fig.add_subplot(1, 2, 1), fig.add_subplot(1, 2, 2)


def _say_empty(axes: Sequence[Axes], message: str) -> None:
    """``message`` centred in each of ``axes`` (a panel with nothing to draw)."""
    for ax in axes:
        ax.text(0.5, 0.5, message, transform=ax.transAxes, ha="center")


def _listing(nums: Sequence[int]) -> str:
    shown = ", ".join(str(n) for n in nums[:_MAX_LISTED])
    return shown + (f", ... (+{len(nums) - _MAX_LISTED})" if len(nums) > _MAX_LISTED else "")


def _staircase(ax: Axes, xs: np.ndarray, ys: np.ndarray, dir_x: str, dir_y: str,
               **kw: Any) -> None:
    """Join the 2-D non-dominated points of (xs, ys) by the attainment staircase."""
    if xs.size == 0:
        return
    Y = np.column_stack([xs, ys])
    mask = _pareto.non_dominated(Y, [dir_x, dir_y])
    P = Y[mask]
    P = P[np.argsort(P[:, 0], kind="stable")]
    ax.step(P[:, 0], P[:, 1], where="pre" if dir_x == "max" else "post", **kw)


def _direction(data: ReportData | CompareData, name: str) -> str | None:
    for o in data.objectives:
        if o.name == name:
            return o.direction
    return None


def _draw_guides(ax: Axes, data: ReportData, x: str, y: str) -> None:
    """Reference point, explicit thresholds and constraint bounds on one panel."""
    names = data.objective_names
    if data.reference_point is not None and x in names and y in names:
        ix, iy = names.index(x), names.index(y)
        inferred = data.reference_inferred[ix] or data.reference_inferred[iy]
        ax.scatter([data.reference_point[ix]], [data.reference_point[iy]], marker="P", s=80,
                   color="#d62728", zorder=5,
                   label="reference point" + (" (inferred)" if inferred else ""))
    for o in data.objectives:
        if o.threshold is not None:
            _guide_line(ax, o.name, x, y, o.threshold, _t(f"threshold {o.name} = {o.threshold:g}"),
                        color="#d62728", ls="--", lw=1)
    for c in data.constraints:
        _guide_line(ax, c.name, x, y, c.bound, _t(f"constraint {c.name} {c.op} {c.bound:g}"),
                    color="#555555", ls=":", lw=1.2)


def _guide_line(ax: Axes, name: str, x: str, y: str, value: float, label: str,
                **style: Any) -> None:
    """A vertical line at ``value`` when ``name`` is the x axis, a horizontal one when y."""
    if name == x:
        ax.axvline(value, label=label, **style)
    if name == y:
        ax.axhline(value, label=label, **style)


def _panel(ax: Axes, data: ReportData, x: str, y: str, legend: bool = True) -> int:
    """Draw every trial on (x, y); return how many points were drawn."""
    groups: dict[str, list[tuple[TrialRecord, float, float]]] = {
        "front": [], "complete": [], "violates constraints": [], "failed": [], "infeasible": [],
        "pruned": []}
    unplotted: dict[str, list[int]] = {"failed": [], "infeasible": [], "complete": [],
                                       "violates constraints": [], "front": [], "pruned": []}
    for r in data.records:
        kind = data.kind(r)
        vx, vy = axis_values(data, x, r), axis_values(data, y, r)
        if math.isfinite(vx) and math.isfinite(vy):
            groups[kind].append((r, vx, vy))
        else:
            unplotted[kind].append(r.number)
    drawn = 0
    styles: dict[str, dict[str, Any]] = {
        "complete": _DOMINATED, "violates constraints": _VIOLATES, "failed": _FAILED,
        "infeasible": _INFEASIBLE, "pruned": _PRUNED}
    labels = {"complete": "dominated", "violates constraints": "breaks a constraint",
              "failed": "failed", "infeasible": "infeasible (OOM...)",
              "pruned": "pruned (last report)"}
    for kind in ("complete", "violates constraints", "pruned", "failed", "infeasible"):
        pts = groups[kind]
        if pts:
            ax.scatter([p[1] for p in pts], [p[2] for p in pts], label=f"{labels[kind]} ({len(pts)})",
                       **styles[kind])
            drawn += len(pts)
    for kind in ("failed", "infeasible"):
        if unplotted[kind]:
            ax.scatter([], [], label=f"{labels[kind]}, no values: #{_listing(unplotted[kind])}",
                       **styles[kind])
    front = groups["front"]
    if front:
        xs = np.array([p[1] for p in front])
        ys = np.array([p[2] for p in front])
        dx, dy = _direction(data, x), _direction(data, y)
        if dx is not None and dy is not None and len(data.objectives) == 2:
            _staircase(ax, xs, ys, dx, dy, color=_FRONT["color"], lw=1.5, zorder=3)
        else:
            # A projection of a 3+-objective front (or non-objective axes) has no
            # staircase: join the front points in x order.
            order = np.argsort(xs, kind="stable")
            ax.plot(xs[order], ys[order], color=_FRONT["color"], lw=1, ls=":", zorder=3)
        ax.scatter(xs, ys, label=f"Pareto front ({len(front)})", **_FRONT)
        labelled = _labelled(data, [p[0].number for p in front])
        for r, vx, vy in front:
            if r.number not in labelled:
                continue
            star = "*" if r.number == data.knee else ""
            ax.annotate(f"{r.number}{star}", (vx, vy), xytext=(4, 4), textcoords="offset points",
                        fontsize=8, zorder=6)
        drawn += len(front)
    _draw_guides(ax, data, x, y)
    ax.set_xlabel(_t(data.axis_label(x)))
    ax.set_ylabel(_t(data.axis_label(y)))
    ax.grid(True, alpha=0.3)
    if drawn == 0:
        why = data.warnings[-1] if data.warnings else "no trial has values on these axes"
        ax.text(0.5, 0.5, _t(_wrap(why, 60)), transform=ax.transAxes, ha="center",
                va="center", fontsize=9, color="#a33")
    if legend and ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7, loc="best", framealpha=0.85)
    return drawn


#: Most front points labelled with their number in one panel (the knee and the
#: best trial per objective always are; the rest evenly spaced).
_MAX_LABELS = 30


def _labelled(data: ReportData, numbers: Sequence[int]) -> set[int]:
    if len(numbers) <= _MAX_LABELS:
        return set(numbers)
    keep = {n for n in (data.knee, *data.best.values()) if n is not None}
    step = len(numbers) / max(1, _MAX_LABELS - len(keep))
    keep |= {numbers[int(i * step)] for i in range(_MAX_LABELS - len(keep))}
    return keep


def _wrap(text: str, width: int) -> str:
    import textwrap

    return "\n".join(textwrap.wrap(text, width)) or text


def _title(data: ReportData) -> str:
    n = len(data.records)
    t = f"{data.name}: Pareto front ({len(data.front)} of {n} trials; * = knee)"
    if data.energy_estimated:
        t += "\nenergy ESTIMATED, not measured"
    return _t(t)


def pareto(study_or_dir: Study | str | Path | ReportData, x: str | None = None,
           y: str | None = None) -> Figure:
    """The Pareto front: every trial as a point, the front joined and labelled.

    With two objectives (or with ``x`` and ``y`` given) one panel; with three
    or more objectives one panel per pair of objectives, the front being the
    full M-objective front. A two-objective front is joined by its staircase;
    a projection (3+ objectives, or axes that are not both objectives) joins
    the front points in x order with a dotted line.

    Args:
        study_or_dir: A :class:`~ecopt.Study`, a study directory or a ReportData.
        x: Metric on the x axis (an objective, constraint metric, other metric,
            numeric parameter, ``energy_j`` or ``duration_s``). Default: the first objective.
        y: Metric on the y axis. Default: the second objective.

    Returns:
        A matplotlib Figure (7 x 5 in at :data:`DPI` for one panel).

    Raises:
        ValueError: for an unknown metric name (the message lists the choices).
        NotAStudyError: when a directory holds no study.
    """
    data = report_data(study_or_dir)
    names = data.objective_names
    for a in (x, y):
        if a is not None:
            check_axis(data, a)
    if x is not None or y is not None or len(names) <= 2:
        if len(names) == 1 and (x is None or y is None):
            x = x or "energy_j"
            y = y or names[0]
        x = x or names[0]
        y = y or (names[1] if names[1] != x else names[0])
        fig = _new_figure(7, 5)
        ax = fig.add_subplot(1, 1, 1)
        _panel(ax, data, x, y)
        ax.set_title(_title(data), fontsize=10)
        return fig
    pairs = list(itertools.combinations(names, 2))
    ncols = min(3, len(pairs))
    nrows = math.ceil(len(pairs) / ncols)
    fig = _new_figure(5 * ncols, 4.4 * nrows + 0.4)
    for i, (a, b) in enumerate(pairs):
        ax = fig.add_subplot(nrows, ncols, i + 1)
        _panel(ax, data, a, b, legend=(i == 0))
    fig.suptitle(_title(data), fontsize=10)
    return fig


def hypervolume(study_or_dir: Study | str | Path | ReportData) -> Figure:
    """Hypervolume against trial number and against the energy the search spent.

    Both panels use one fixed reference point (the study's final one), so the
    curves never decrease and end at :meth:`Study.hypervolume`.

    Returns:
        A matplotlib Figure (11 x 4.2 in at :data:`DPI`).
    """
    data = report_data(study_or_dir)
    fig, ax1, ax2 = _two_panels()
    s = data.hv_series
    est = " (estimated)" if data.energy_estimated else ""
    if s:
        nums = np.array([p.trial for p in s])
        hv = np.array([p.hypervolume for p in s])
        ej = np.array([p.cumulative_energy_j for p in s])
        up = np.concatenate([[hv[0] > 0], np.diff(hv) > 0])
        ax1.step(nums, hv, where="post", color="#4a7fb5")
        ax1.scatter(nums[up], hv[up], color=_FRONT["color"], zorder=3, s=20,
                    label="trial improved the front")
        ax2.step(ej, hv, where="post", color="#4a7fb5")
        ax2.scatter(ej[up], hv[up], color=_FRONT["color"], zorder=3, s=20)
        ax1.legend(fontsize=8, loc="lower right")
    else:
        _say_empty((ax1, ax2), "no finished trials")
    ref = ("reference point " + ", ".join(f"{fmt_number(v)}" for v in data.reference_point)
           + (" (inferred)" if any(data.reference_inferred) else "")
           if data.reference_point is not None else "no reference point yet")
    ax1.set_xlabel("trial number")
    ax1.set_ylabel("hypervolume")
    ax1.set_title(_t(f"hypervolume vs trials: {ref}"), fontsize=9)
    ax2.set_xlabel(f"cumulative energy of the search (J){est}")
    ax2.set_ylabel("hypervolume")
    ax2.set_title(f"hypervolume vs energy spent{est}", fontsize=9)
    for ax in (ax1, ax2):
        ax.grid(True, alpha=0.3)
    fig.suptitle(_t(f"{data.name}: search progress"), fontsize=10)
    return fig


def phase_energy(study_or_dir: Study | str | Path | ReportData) -> Figure:
    """Per-phase energy of the front trials as stacked bars (joules, and shares).

    Returns:
        A matplotlib Figure (11 x 4.2 in at :data:`DPI`).
    """
    data = report_data(study_or_dir)
    fig, ax1, ax2 = _two_panels()
    est = " (estimated)" if data.energy_estimated else ""
    trials = list(data.front)
    shown_note = ""
    if len(trials) > _MAX_LABELS:
        keep = _labelled(data, trials)
        shown_note = f" ({len(keep)} of {len(trials)} front trials shown)"
        trials = [t for t in trials if t in keep]
    phases = [p for p in data.phases if any(pe.phase == p for pe in data.phase_energy)]
    if not trials or not phases:
        _say_empty((ax1, ax2), "no front trial with energy readings")
    else:
        table = {(pe.trial, pe.phase): pe.energy_j for pe in data.phase_energy}
        xs = np.arange(len(trials))
        bottom = np.zeros(len(trials))
        bottom2 = np.zeros(len(trials))
        totals = np.array([sum(table.get((t, p), 0.0) for p in phases) for t in trials])
        cmap = ["#4a7fb5", "#e8710a", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
                "#bcbd22", "#17becf", "#d62728"]
        for i, p in enumerate(phases):
            vals = np.array([table.get((t, p), 0.0) for t in trials])
            share = np.divide(vals, totals, out=np.zeros_like(vals), where=totals > 0)
            color = cmap[i % len(cmap)]
            ax1.bar(xs, vals, bottom=bottom, color=color, label=_t(p))
            ax2.bar(xs, share * 100, bottom=bottom2, color=color, label=_t(p))
            bottom += vals
            bottom2 += share * 100
        for ax in (ax1, ax2):
            ax.set_xticks(xs, [f"#{t}" for t in trials], rotation=45 if len(trials) > 12 else 0,
                          fontsize=8)
            ax.set_xlabel("front trial")
            ax.grid(True, axis="y", alpha=0.3)
        ax1.legend(fontsize=8, title="phase", title_fontsize=8)
    ax1.set_ylabel(f"energy (J){est}")
    ax2.set_ylabel(f"share of the trial's energy (%){est}")
    ax1.set_title(f"energy per phase{est}", fontsize=9)
    ax2.set_title("where each front trial spends its energy", fontsize=9)
    fig.suptitle(_t(f"{data.name}: per-phase energy of the Pareto front{shown_note}"), fontsize=10)
    return fig


def compare(sources: Sequence[Study | str | Path] | CompareData,
            ref_point: Sequence[float] | None = None) -> Figure:
    """Fronts of several studies overlaid, and their hypervolume against one reference point.

    Args:
        sources: Two or more studies / study directories, or a CompareData.
        ref_point: Shared reference point (default: see :func:`ecopt.report.build_compare`).

    Returns:
        A matplotlib Figure: one panel per pair of objectives, plus hypervolume
        against trial number.
    """
    data = sources if isinstance(sources, CompareData) else build_compare(sources, ref_point)
    names = [o.name for o in data.objectives]
    dirs = [o.direction for o in data.objectives]
    pairs = list(itertools.combinations(range(len(names)), 2))  # none for one objective
    n_panels = len(pairs) + 1
    ncols = min(3, n_panels)
    nrows = math.ceil(n_panels / ncols)
    fig = _new_figure(5 * ncols, 4.4 * nrows + 0.4)
    colors = ["#4a7fb5", "#e8710a", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf"]
    for k, (i, j) in enumerate(pairs):
        ax = fig.add_subplot(nrows, ncols, k + 1)
        for e_i, e in enumerate(data.entries):
            if not e.front_values:
                continue
            F = np.array(e.front_values)
            c = colors[e_i % len(colors)]
            _staircase(ax, F[:, i], F[:, j], dirs[i], dirs[j], color=c, lw=1.3)
            ax.scatter(F[:, i], F[:, j], color=c, edgecolors="black", linewidths=0.5, s=36,
                       zorder=3, label=_t(f"{e.name} (HV {fmt_number(e.hypervolume)})"))
        if data.reference_point is not None:
            ax.scatter([data.reference_point[i]], [data.reference_point[j]], marker="P",
                       color="#d62728", s=80, zorder=4,
                       label="shared reference point" + ("" if data.reference_given else
                                                         " (inferred)"))
        ax.set_xlabel(_t(data.axis_label(names[i])))
        ax.set_ylabel(_t(data.axis_label(names[j])))
        ax.grid(True, alpha=0.3)
        if k == 0:
            ax.legend(fontsize=7)
    ax = fig.add_subplot(nrows, ncols, len(pairs) + 1)
    for e_i, e in enumerate(data.entries):
        if e.hv_series:
            ax.step([p.n_trials for p in e.hv_series], [p.hypervolume for p in e.hv_series],
                    where="post", color=colors[e_i % len(colors)], label=_t(e.name))
    ax.set_xlabel("trials run")
    ax.set_ylabel("hypervolume (shared reference point)")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7)
    title = "comparison of " + ", ".join(e.name for e in data.entries)
    if data.energy_estimated:
        title += "\nenergy ESTIMATED, not measured"
    fig.suptitle(_t(title), fontsize=10)
    return fig
