"""``ecopt dashboard DIR``: a live page of a running study, served on 127.0.0.1 only.

What the page shows (refreshed every ``refresh_s`` seconds without reloading):
the Pareto front (every trial, the front joined by its staircase), the
hypervolume over trials and over the energy the search spent, the summary and
estimate banner of the HTML report, the trials still running, the front
table with per-phase energy and sources, and every trial (newest first) with
its state, energy, whether it was measured or estimated, and the source of
each component.

How it reads the study: exactly as :func:`ecopt.report.build_report` does,
from ``study.json``, ``trials.jsonl`` and ``running.jsonl``, read-only and
without the writer's lock, so it runs beside the process that writes the
study. The log is re-read only when one of those files changed (size or
modification time). A line the writer is still appending is a torn last
line: it is skipped (and not shown as a problem: it is complete at the next
refresh).

What it sends: the page's first request gets the full state; after that the
page says which version it holds and gets only what changed
(:class:`DashboardFeed`, :func:`state_changes`): the new rows of the trials
table, the new points of each chart, and the small blocks that changed, so a
refresh of a 50,000-trial study sends about as much as one of a 50-trial
study (docs/benchmarks.md, "Costs that do not grow with the log").

Security: the server binds ``127.0.0.1`` only (there is no option to bind
another address), answers only ``GET``/``HEAD``, and only for the hosts
``127.0.0.1`` and ``localhost`` (a page elsewhere cannot reach it through DNS
rebinding). It never writes anything. Every string from the study directory
goes through the HTML report's escaping (:func:`ecopt.report.html._e`),
including those drawn in the charts, and a Content-Security-Policy lets the
page run only the two scripts it serves itself (no inline script, no
request to any other origin).

Libraries, and why: the server is a `Starlette <https://www.starlette.io>`_
app run by `uvicorn <https://www.uvicorn.org>`_ (a small, typed,
well-maintained ASGI toolkit and its reference server: routing, static
files, trusted-host checking and a server object that runs in a background
thread for notebooks and tests, with nothing hand-written at the HTTP
level). The charts are `Plotly.js <https://plotly.com/javascript/>`_ served
from the ``plotly`` Python package's own copy (``plotly/package_data``):
installed by pip with the ``dashboard`` extra, served by this server, never
fetched from a CDN, so the page works offline. The figures are plain JSON
built here (:func:`dashboard_state`), testable without a browser.

Example:
    >>> from ecopt.report.dashboard import serve
    >>> server = serve("runs/quickstart", port=0)   # a background thread
    >>> server.url
    'http://127.0.0.1:40531/'
    >>> server.stop()
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import importlib.resources
import math
import os
import socket
import threading
import time
import warnings
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ecopt._version import __version__
from ecopt.errors import EcoptError, NotAStudyError
from ecopt.fmt import fmt_number
from ecopt.report.data import ReportData, axis_values, build_report
from ecopt.report.html import (
    _CSS,
    _badge,
    _banner,
    _cell,
    _e,
    _front_table,
    _summary,
    _th,
)
from ecopt.storage import RUNNING_FILE, STUDY_FILE, TRIALS_FILE
from ecopt.trial import TrialRecord, TrialState

if TYPE_CHECKING:
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response

__all__ = ["HOST", "CSP", "dashboard_state", "state_changes", "DashboardFeed", "Snapshot",
           "create_app", "DashboardServer", "serve", "dashboard_main"]

#: The only address the dashboard listens on.
HOST = "127.0.0.1"
#: Host names the server answers to (others get 400: no DNS rebinding).
ALLOWED_HOSTS = ("127.0.0.1", "localhost")
#: Scripts only from this server; Plotly needs inline styles; data only from this server.
CSP = ("default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
       "img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'")
#: Sent as a header too, with what a <meta> policy cannot say (no framing by other sites).
CSP_HEADER = CSP + "; frame-ancestors 'none'"
DEFAULT_PORT = 8765

_COLORS = {"front": "#e07b00", "complete": "#5b6b7f", "violates constraints": "#8aa0b8",
           "pruned": "#8e44ad", "ref": "#c0392b"}

_PAGE_CSS = """
.grid{display:grid;grid-template-columns:repeat(auto-fit,minmax(340px,1fr));gap:12px}
.chart{border:1px solid #e3e7ee;border-radius:6px;min-height:360px}
#status{font-size:.85em;color:#556}#status.offline{color:#c0392b;font-weight:600}
.state-pruned{color:#8e44ad}.state-running{color:#2a6fb0}
"""


# ---------------------------------------------------------------------------
# the data of one refresh (pure: no server, no browser)
# ---------------------------------------------------------------------------


def log_version(study_dir: str | os.PathLike[str]) -> str:
    """A token that changes whenever the study's log files change (size, mtime)."""
    parts = []
    for name in (STUDY_FILE, TRIALS_FILE, RUNNING_FILE):
        try:
            st = os.stat(Path(study_dir) / name)
            parts.append(f"{name}:{st.st_size}:{st.st_mtime_ns}")
        except OSError:
            parts.append(f"{name}:-")
    return hashlib.sha1("|".join(parts).encode()).hexdigest()[:16]


def _hover(data: ReportData, r: TrialRecord, kind: str | None = None) -> str:
    """Hover text of one trial: escaped (Plotly renders a few HTML tags in text)."""
    lines = [f"trial {r.number} ({data.kind(r) if kind is None else kind})"]
    lines += [f"{k} = {v}" for k, v in r.params.items()]
    for k, v in r.values.items():
        lines.append(f"{k} = {fmt_number(v)}")
    if r.phases:
        lines.append(f"energy = {fmt_number(r.energy_j)} J "
                     f"({'measured' if r.measured else 'estimated'})")
    return "<br>".join(_e(x) for x in lines)


def _axes(data: ReportData) -> tuple[str, str]:
    names = data.objective_names
    if len(names) >= 2:
        return names[0], names[1]
    return "energy_j", names[0]


def _layout(title: str, x: str, y: str, **extra: Any) -> dict[str, Any]:
    return {"title": {"text": _e(title), "font": {"size": 14}, "x": 0.01, "xanchor": "left"},
            "xaxis": {"title": {"text": _e(x)}, "zeroline": False},
            "yaxis": {"title": {"text": _e(y)}, "zeroline": False},
            "margin": {"l": 64, "r": 16, "t": 56, "b": 52}, "height": 360,
            "legend": {"orientation": "h", "y": -0.22}, "hovermode": "closest", **extra}


def front_figure(data: ReportData) -> dict[str, Any]:
    """The Pareto front as a Plotly figure (``{"data": [...], "layout": {...}}``).

    Every complete trial is in the ``complete`` trace (the front too, drawn
    again on top in the ``front`` trace with its staircase), so that the
    traces of trials only grow as the log grows (a refresh then sends the new
    points: :func:`state_changes`); each trace has a ``uid``.
    """
    x, y = _axes(data)
    groups: dict[str, list[TrialRecord]] = {}
    front: list[TrialRecord] = []
    for r in data.records:
        kind = data.kind(r)
        if kind in ("front", "complete", "violates constraints", "pruned"):
            xv, yv = axis_values(data, x, r), axis_values(data, y, r)
            if math.isfinite(xv) and math.isfinite(yv):
                groups.setdefault("pruned" if kind == "pruned" else "violates constraints"
                                  if kind == "violates constraints" else "complete", []).append(r)
                if kind == "front":
                    front.append(r)
    groups["front"] = sorted(front, key=lambda r: axis_values(data, x, r))
    traces: list[dict[str, Any]] = []
    symbols = {"complete": "circle", "violates constraints": "square-open",
               "pruned": "circle-open", "front": "circle"}
    direction = next((o.direction for o in data.objectives if o.name == x), "max")
    for kind in ("complete", "violates constraints", "pruned", "front"):
        recs = groups.get(kind, [])
        if not recs:
            continue
        traces.append({
            "type": "scatter", "uid": kind, "name": _e(f"{kind} ({len(recs)})"),
            "mode": "lines+markers" if kind == "front" and len(recs) > 1 else "markers",
            "x": [axis_values(data, x, r) for r in recs],
            "y": [axis_values(data, y, r) for r in recs],
            "hovertext": [_hover(data, r, "front" if kind == "front" else r.state.value
                                 if kind == "complete" else kind) for r in recs],
            "hoverinfo": "text",
            "marker": {"color": _COLORS[kind], "symbol": symbols[kind],
                       "size": 10 if kind == "front" else 7},
            # The staircase bounding what the front dominates (see figures.pareto).
            "line": {"color": _COLORS["front"], "shape": "vh" if direction == "max" else "hv"},
        })
    if data.reference_point is not None and x in data.objective_names \
            and y in data.objective_names:
        ref = dict(zip(data.objective_names, data.reference_point))
        traces.append({"type": "scatter", "uid": "ref", "mode": "markers",
                       "name": "reference point",
                       "x": [ref[x]], "y": [ref[y]], "hoverinfo": "name",
                       "marker": {"color": _COLORS["ref"], "symbol": "cross-thin-open",
                                  "size": 12, "line": {"width": 2, "color": _COLORS["ref"]}}})
    return {"data": traces,
            "layout": _layout(f"Pareto front: {len(data.front)} of {len(data.records)} trials",
                              data.axis_label(x), data.axis_label(y))}


def hypervolume_figures(data: ReportData) -> tuple[dict[str, Any], dict[str, Any]]:
    """Hypervolume over trials and over the energy spent, as two Plotly figures."""
    s = data.hv_series
    est = " (estimated)" if data.energy_estimated else ""
    line = {"color": "#2a6fb0", "shape": "hv"}
    hover = [_e(f"trial {p.trial}: hypervolume {fmt_number(p.hypervolume)}, "
                f"{fmt_number(p.cumulative_energy_j)} J{est} spent") for p in s]
    by_trials = {"data": [{"type": "scatter", "uid": "hv", "mode": "lines+markers",
                           "name": "hypervolume",
                           "x": [p.n_trials for p in s], "y": [p.hypervolume for p in s],
                           "hovertext": hover, "hoverinfo": "text", "line": line,
                           "marker": {"size": 5}}],
                 "layout": _layout("Hypervolume over trials", "trials finished", "hypervolume",
                                   showlegend=False)}
    by_energy = {"data": [{"type": "scatter", "uid": "hv", "mode": "lines+markers",
                           "name": "hypervolume",
                           "x": [p.cumulative_energy_j for p in s],
                           "y": [p.hypervolume for p in s], "hovertext": hover,
                           "hoverinfo": "text", "line": line, "marker": {"size": 5}}],
                 "layout": _layout("Hypervolume over energy spent",
                                   f"energy spent by the search (J){est}", "hypervolume",
                                   showlegend=False)}
    return by_trials, by_energy


def _sources(r: TrialRecord) -> str:
    seen: list[str] = []
    for p in r.phases.values():
        for comp, c in p.measurement.components.items():
            s = f"{comp}={c.source}"
            if s not in seen:
                seen.append(s)
    return ";".join(seen)


def _trial_rows(data: ReportData) -> tuple[str, list[tuple[int, str]]]:
    """The head and the rows (``(number, <tr>)``, newest first) of the all-trials table."""
    params: list[str] = list(data.spec.get("space", {}) or {})
    for r in data.records:
        for k in r.params:
            if k not in params:
                params.append(k)
    objs = data.objective_names
    est = " (estimated)" if data.energy_estimated else ""
    head = _th(["trial", "state", "proposed by"] + params + objs
               + [f"energy (J){est}", "energy sources", "duration (s)", "error"])
    on_front = set(data.front)
    rows = []
    for r in sorted(data.records, key=lambda r: -r.number):
        kind = "front" if r.number in on_front and r.state is TrialState.COMPLETE \
            and r.feasible else data.kind(r)
        energy = (f'<td class="num">{_e(fmt_number(r.energy_j))} {_badge(r.measured)}</td>'
                  if r.phases else '<td class="muted">-</td>')
        err = f"{r.error.type}: {r.error.message}" if r.error else ""
        cells = [_cell(r.number), f'<td class="state-{_e(r.state.value)}">{_e(kind)}</td>',
                 _cell(r.proposed_by)]
        cells += [_cell(r.params.get(p, "")) for p in params]
        cells += [_cell(r.values.get(o)) for o in objs]
        cells += [energy, f'<td class="src">{_e(_sources(r) or "-")}</td>',
                  _cell(r.duration_s), _cell(err)]
        klass = ' class="front"' if kind == "front" else ""
        rows.append((r.number, f'<tr id="trial-{r.number}" data-n="{r.number}"{klass}>'
                     + "".join(cells) + "</tr>"))
    return head, rows


def _table(head: str, rows: Sequence[tuple[int, str]]) -> str:
    return (f'<div class="scroll"><table id="trials-table"><thead>{head}</thead><tbody>'
            f'{"".join(html for _, html in rows)}</tbody></table></div>')


def trials_table(data: ReportData) -> str:
    """Every trial, newest first: state, params, objectives, energy with its kind and sources."""
    return _table(*_trial_rows(data))


def _running(data: ReportData) -> str:
    if not data.unfinished:
        return '<p class="muted">No trial is running.</p>'
    nums = ", ".join(str(n) for n in data.unfinished)
    return (f'<p><span class="state-running">running (or interrupted)</span>: trial(s) '
            f"{_e(nums)}</p>")


def _warnings(items: Sequence[str]) -> str:
    if not items:
        return ""
    return ('<div class="warn"><b>Problems found</b><ul>'
            + "".join(f"<li>{_e(w)}</li>" for w in items) + "</ul></div>")


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


@dataclass
class Snapshot:
    """One refresh of the page: the full state, and its trial rows by number (for deltas)."""

    state: dict[str, Any]
    head: str = ""
    rows: dict[int, str] = field(default_factory=dict)


def _snapshot(study_dir: str | os.PathLike[str]) -> Snapshot:
    version = log_version(study_dir)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            data = build_report(Path(study_dir))
    except NotAStudyError as exc:
        return Snapshot({"version": version, "checked_at": _now(),
                         "waiting": f"waiting for a study in {study_dir}: {exc}"})
    # A torn last line is the writer's append in progress: complete at the next refresh.
    shown = [w for w in data.warnings if "torn last line" not in w]
    front_fig = front_figure(data)
    hv_trials, hv_energy = hypervolume_figures(data)
    head, rows = _trial_rows(data)
    state = {
        "version": version,
        "checked_at": _now(),
        "name": data.name,
        "n_trials": len(data.records),
        "title": f"ecopt dashboard: {data.name}",
        "html": {
            "banner": _banner(data),
            "warnings": _warnings(shown),
            "summary": _summary(data),
            "running": _running(data),
            "front-table": _front_table(data),
            "trials": _table(head, rows),
        },
        "figures": {"fig-front": front_fig, "fig-hv-trials": hv_trials,
                    "fig-hv-energy": hv_energy},
    }
    return Snapshot(state, head, dict(rows))


def dashboard_state(study_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """Everything one refresh of the page shows, as JSON-able data.

    Returns:
        ``{"version", "checked_at", "name", "n_trials", "title", "html": {element id:
        escaped HTML}, "figures": {element id: Plotly figure}}``; while the
        directory holds no study yet, ``{"version", "checked_at", "waiting":
        message}``.
    """
    return _snapshot(study_dir).state


_ARRAYS = ("x", "y", "hovertext")


def _trace_change(old: dict[str, Any] | None, new: dict[str, Any]) -> dict[str, Any] | None:
    """How a trace changed: ``None`` (not at all), new points and name, or the whole trace."""
    if old is None:
        return {"uid": new["uid"], "trace": new}
    if old == new:
        return None
    rest = [k for k in set(old) | set(new) if k not in _ARRAYS and k != "name"]
    grown = all(old.get(k) == new.get(k) for k in rest) and all(
        isinstance(new.get(k), list) and isinstance(old.get(k), list)
        and new[k][:len(old[k])] == old[k] for k in _ARRAYS if k in new or k in old)
    if not grown:
        return {"uid": new["uid"], "trace": new}
    change: dict[str, Any] = {"uid": new["uid"]}
    tails = {k: new[k][len(old[k]):] for k in _ARRAYS if k in new}
    if any(tails.values()):
        change["extend"] = tails
    if old.get("name") != new.get("name"):
        change["name"] = new.get("name")
    return change


def state_changes(old: Snapshot, new: Snapshot) -> dict[str, Any] | None:
    """What changed from ``old`` to ``new``, keyed by element, trace and trial number.

    A trial log only grows, so a refresh mostly adds trials: the delta holds
    the new rows of the trials table (and the rows whose front membership
    changed), the new points of each chart's traces (a trace that changed
    otherwise, e.g. the front's staircase, whole), and the small HTML blocks
    and layouts that changed. Its size grows with the change, not with the
    study.

    Returns:
        ``{"version", "since", "changes": True, "checked_at", "name", "n_trials",
        "title", "html": {id: HTML}, "rows": {"add": [[number, <tr>], ...],
        "replace": [[number, <tr>], ...]}, "figures": {id: {"order": [uid, ...],
        "traces": [change, ...], "layout": ...}}}``, or ``None`` when only a full
        state can say it (no study before or now, a changed table head, a
        trial gone).
    """
    a, b = old.state, new.state
    if "waiting" in a or "waiting" in b or old.head != new.head \
            or not set(old.rows) <= set(new.rows):
        return None
    out: dict[str, Any] = {"version": b["version"], "since": a["version"], "changes": True,
                           "checked_at": b["checked_at"], "name": b["name"],
                           "n_trials": b["n_trials"], "title": b["title"]}
    out["html"] = {k: v for k, v in b["html"].items()
                   if k != "trials" and a["html"].get(k) != v}
    out["rows"] = {
        "add": [[n, html] for n, html in new.rows.items() if n not in old.rows],
        "replace": [[n, new.rows[n]] for n, html in old.rows.items() if new.rows[n] != html]}
    figures: dict[str, Any] = {}
    for fid, fig in b["figures"].items():
        before = {t.get("uid"): t for t in a["figures"].get(fid, {}).get("data", [])}
        traces = [c for t in fig["data"] if (c := _trace_change(before.get(t.get("uid")), t))]
        order = [t.get("uid") for t in fig["data"]]
        change: dict[str, Any] = {}
        if traces:
            change["traces"] = traces
        if order != list(before):
            change["order"] = order
        if fig["layout"] != a["figures"].get(fid, {}).get("layout"):
            change["layout"] = fig["layout"]
        if change:
            change.setdefault("order", order)
            figures[fid] = change
    out["figures"] = figures
    return out


class DashboardFeed:
    """What the page is sent at each refresh: the full state first, then only the changes.

    The log is re-read only when one of its files changed; the last few
    states are kept, so a page that says which version it has (``since``)
    gets :func:`state_changes` from it (or ``{"unchanged": True}``), and a
    page that has none, or one too old, gets the full state. Thread-safe.

    Args:
        study_dir: The study directory.
        keep: How many past versions a page can ask changes from.
    """

    def __init__(self, study_dir: str | os.PathLike[str], keep: int = 3) -> None:
        self.study_dir = Path(study_dir)
        self.keep = keep
        self._lock = threading.Lock()
        self._snapshots: OrderedDict[str, Snapshot] = OrderedDict()

    def latest(self) -> Snapshot:
        """The state now (rebuilt when the log changed)."""
        with self._lock:
            version = log_version(self.study_dir)
            last = next(reversed(self._snapshots.values()), None)
            if last is None or last.state["version"] != version:
                last = _snapshot(self.study_dir)
                self._snapshots[last.state["version"]] = last
                self._snapshots.move_to_end(last.state["version"])
                while len(self._snapshots) > self.keep:
                    self._snapshots.popitem(last=False)
            return last

    def changes(self, since: str | None = None) -> dict[str, Any]:
        """The reply to a page that holds version ``since`` (``None``: nothing yet)."""
        last = self.latest()
        now = last.state["version"]
        if since == now:
            return {"version": now, "checked_at": _now(), "unchanged": True}
        with self._lock:
            base = self._snapshots.get(since) if since is not None else None
        delta = state_changes(base, last) if base is not None else None
        if delta is None:
            return {**last.state, "checked_at": _now()}
        return delta


# ---------------------------------------------------------------------------
# the page and the server
# ---------------------------------------------------------------------------


def _page(state: dict[str, Any], refresh_s: float, study_dir: Path) -> str:
    title = state.get("title") or f"ecopt dashboard: {study_dir.name}"
    h = state.get("html", {})
    waiting = state.get("waiting")
    body = f"""<h1 id="title">{_e(title)}</h1>
<p class="sub">{_e(str(study_dir))} · ecopt {_e(__version__)} · <span id="status">live, \
refreshed every {_e(fmt_number(refresh_s))} s</span></p>
<div id="waiting" class="note"{'' if waiting else ' hidden'}>{_e(waiting or '')}</div>
<div id="banner">{h.get('banner', '')}</div>
<div id="warnings">{h.get('warnings', '')}</div>
<div class="grid">
<div id="fig-front" class="chart"></div>
<div id="fig-hv-trials" class="chart"></div>
<div id="fig-hv-energy" class="chart"></div>
</div>
<h2>Summary</h2><div id="summary">{h.get('summary', '')}</div>
<h2>Running</h2><div id="running">{h.get('running', '')}</div>
<h2>Pareto front</h2><div id="front-table">{h.get('front-table', '')}</div>
<h2>All trials (newest first)</h2><div id="trials">{h.get('trials', '')}</div>"""
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f'<meta http-equiv="Content-Security-Policy" content="{_e(CSP)}">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            '<link rel="icon" href="data:,">'
            f"<title>{_e(title)}</title><style>{_CSS}{_PAGE_CSS}</style></head>"
            f'<body data-refresh-ms="{int(refresh_s * 1000)}">{body}'
            '<script src="static/plotly.min.js"></script>'
            '<script src="static/dashboard.js"></script></body></html>\n')


def _plotly_js() -> Path:
    try:
        import plotly
    except ImportError as exc:
        raise EcoptError("the dashboard draws with Plotly.js from the plotly package: "
                         "pip install 'ecopt[dashboard]'") from exc
    path = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
    if not path.is_file():
        raise EcoptError(f"the plotly package has no {path}; reinstall it "
                         "(pip install --force-reinstall plotly)")
    return path


def create_app(study_dir: str | os.PathLike[str], refresh_s: float = 2.0) -> Starlette:
    """The dashboard as an ASGI app (read-only: ``GET``/``HEAD`` routes only).

    Args:
        study_dir: The study directory (it may not hold a study yet).
        refresh_s: Seconds between the page's refreshes.

    Raises:
        ValueError: for ``refresh_s`` outside 0.2..3600.
        EcoptError: when Starlette or plotly is missing (install hint).
    """
    if not (isinstance(refresh_s, (int, float)) and 0.2 <= refresh_s <= 3600):
        raise ValueError(f"refresh_s must be between 0.2 and 3600 seconds, got {refresh_s!r}")
    try:
        from starlette.applications import Starlette
        from starlette.middleware import Middleware
        from starlette.middleware.trustedhost import TrustedHostMiddleware
        from starlette.responses import (
            FileResponse,
            HTMLResponse,
            JSONResponse,
            PlainTextResponse,
            Response,
        )
        from starlette.routing import Route
    except ImportError as exc:
        raise EcoptError("ecopt dashboard needs Starlette and uvicorn: "
                         "pip install 'ecopt[dashboard]'") from exc
    root = Path(study_dir)
    feed = DashboardFeed(root)
    plotly_js = _plotly_js()
    own_js = importlib.resources.files("ecopt.report") / "static" / "dashboard.js"
    headers = {"Content-Security-Policy": CSP_HEADER, "X-Content-Type-Options": "nosniff",
               "Referrer-Policy": "no-referrer", "X-Frame-Options": "DENY",
               "Cache-Control": "no-store"}

    def page(request: Request) -> Response:
        return HTMLResponse(_page(feed.latest().state, refresh_s, root), headers=headers)

    def state(request: Request) -> Response:
        return JSONResponse(feed.changes(request.query_params.get("since")), headers=headers)

    def script(request: Request) -> Response:
        h = {**headers, "Cache-Control": "max-age=3600"}
        name = request.path_params["name"]
        if name == "plotly.min.js":
            return FileResponse(plotly_js, media_type="text/javascript", headers=h)
        if name == "dashboard.js":
            return Response(own_js.read_text(encoding="utf-8"), media_type="text/javascript",
                            headers=h)
        return PlainTextResponse("not found", status_code=404, headers=headers)

    routes = [Route("/", page, methods=["GET", "HEAD"]),
              Route("/api/state", state, methods=["GET", "HEAD"]),
              Route("/static/{name:str}", script, methods=["GET", "HEAD"])]

    return Starlette(routes=routes, middleware=[
        Middleware(TrustedHostMiddleware, allowed_hosts=list(ALLOWED_HOSTS))])


class DashboardServer:
    """The dashboard's HTTP server on ``127.0.0.1`` (foreground or a background thread).

    Args:
        study_dir: The study directory.
        port: TCP port (``0``: any free one).
        refresh_s: Seconds between the page's refreshes.

    Raises:
        EcoptError: when the port is taken or the extra is not installed.
    """

    def __init__(self, study_dir: str | os.PathLike[str], port: int = DEFAULT_PORT,
                 refresh_s: float = 2.0) -> None:
        if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
            raise ValueError(f"port must be an integer in 0..65535, got {port!r}")
        app = create_app(study_dir, refresh_s)
        try:
            import uvicorn
        except ImportError as exc:
            raise EcoptError("ecopt dashboard needs uvicorn: pip install 'ecopt[dashboard]'"
                             ) from exc
        # Bound here, on 127.0.0.1 only, so a taken port is a clear error before serving.
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((HOST, port))
        except OSError as exc:
            sock.close()
            raise EcoptError(f"cannot listen on {HOST}:{port} ({exc.strerror or exc}); pass "
                             "another --port (0 picks a free one)") from None
        sock.listen(64)
        self._sock = sock
        self.port = int(sock.getsockname()[1])
        self._server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False,
                                                     lifespan="off"))
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT/``."""
        return f"http://{HOST}:{self.port}/"

    def __repr__(self) -> str:
        return f"DashboardServer({self.url})"

    def run(self) -> None:
        """Serve in this thread until Ctrl-C (or :meth:`stop` from another thread)."""
        self._server.run(sockets=[self._sock])

    def start(self) -> DashboardServer:
        """Serve in a daemon thread; returns once the server accepts connections."""
        self._thread = threading.Thread(target=self.run, name="ecopt-dashboard", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise EcoptError(f"the dashboard server did not start on {self.url}")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        """Stop serving and release the port."""
        self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._sock.close()

    def __enter__(self) -> DashboardServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def serve(study_dir: str | os.PathLike[str], port: int = 0, refresh_s: float = 2.0
          ) -> DashboardServer:
    """Start the dashboard in a background thread (a notebook, a script); returns the server.

    Example:
        >>> server = serve("runs/demo")
        >>> print(server.url)      # open it; server.stop() when done
    """
    return DashboardServer(study_dir, port, refresh_s).start()


def dashboard_main(args: Any) -> int:
    """``ecopt dashboard DIR [--port PORT] [--refresh-s S]``: serve until Ctrl-C."""
    root = Path(args.run_dir)
    if not root.is_dir():
        raise NotADirectoryError(f"{str(root)!r} is not a directory (start the study first, "
                                 "or create the directory it will write to)")
    server = DashboardServer(root, int(args.port), float(args.refresh_s))
    print(f"ecopt dashboard: serving {root} on {server.url} (127.0.0.1 only, read-only); "
          "Ctrl-C stops", flush=True)
    server.run()
    return 0

