"""A self-contained HTML report of a study: one file that opens offline.

Figures are embedded as base64 PNG (``data:`` URIs); there is no script, no
stylesheet or font from elsewhere, and a Content-Security-Policy
(``default-src 'none'``) forbids the page any request at all. Every string
that comes from a study directory (study name, parameter names and values,
metric names, error messages, host facts) goes through :func:`html.escape`,
so a crafted ``trials.jsonl`` cannot put markup or script into the page.

Example:
    >>> from ecopt.report.html import write_report
    >>> path, data = write_report("runs/quickstart", baseline=0)
"""

from __future__ import annotations

import base64
import html
import io
import json
import math
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ecopt._version import __version__
from ecopt.report.data import ReportData, build_report, fallback_line
from ecopt.fmt import fmt_number, safe_text
from ecopt.trial import TrialRecord

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from ecopt.study import Study

__all__ = ["render_html", "write_report", "figures", "CSP"]

#: The page may load nothing but its own inline style and data: images.
CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'"

_CSS = """
body{font-family:system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;margin:0 auto;max-width:1180px;
padding:0 24px 48px;color:#1d2733;line-height:1.45}
h1{font-size:1.6em;margin:24px 0 4px}h2{font-size:1.2em;margin:32px 0 8px;border-bottom:1px solid #dde;
padding-bottom:4px}.sub{color:#667;margin:0 0 16px;font-size:.9em}
.fallback{color:#c0392b;font-weight:bold}
.banner{background:#fff4d6;border:2px solid #e0a800;border-radius:6px;padding:10px 14px;margin:12px 0;
font-weight:600}.banner span{font-weight:400}
.warn{background:#fdecea;border:1px solid #e57373;border-radius:6px;padding:8px 14px;margin:12px 0}
.note{background:#eef4fb;border:1px solid #9ab;border-radius:6px;padding:8px 14px;margin:12px 0}
table{border-collapse:collapse;font-size:.85em;margin:8px 0}th,td{border:1px solid #d5dbe3;
padding:3px 8px;text-align:left;vertical-align:top}th{background:#f1f4f8}
td.num{text-align:right;font-variant-numeric:tabular-nums}
.src{color:#667;font-size:.85em;white-space:nowrap}.est{color:#a66d00;font-weight:600;font-size:.8em}
.meas{color:#2a7a2a;font-weight:600;font-size:.8em}
tr.front td:first-child{font-weight:700}img{max-width:100%;height:auto;border:1px solid #eee}
.kv th{width:220px}pre{background:#f6f8fa;padding:10px;overflow:auto;font-size:.8em;max-height:480px}
.state-failed{color:#c0392b}.state-infeasible{color:#8e44ad}.muted{color:#889}
figure{margin:8px 0}figcaption{font-size:.85em;color:#556}
.scroll{overflow-x:auto;max-width:100%}
"""


def _e(value: object) -> str:
    """Escape anything for HTML text and attribute values (bidi controls written out)."""
    return html.escape(safe_text(value), quote=True)


_num = fmt_number


def _cell(v: Any, cls: str = "") -> str:
    num = isinstance(v, (int, float)) and not isinstance(v, bool)
    klass = (cls + (" num" if num else "")).strip()
    attr = f' class="{_e(klass)}"' if klass else ""
    return f"<td{attr}>{_e(_num(v))}</td>"


def _row(cells: Iterable[str], cls: str = "") -> str:
    attr = f' class="{_e(cls)}"' if cls else ""
    return f"<tr{attr}>" + "".join(cells) + "</tr>"


def _th(names: Iterable[object]) -> str:
    return "<tr>" + "".join(f"<th>{_e(n)}</th>" for n in names) + "</tr>"


def _kv(rows: Iterable[tuple[str, Any]]) -> str:
    body = "".join(f"<tr><th>{_e(k)}</th><td>{_e(_num(v) if not isinstance(v, str) else v)}</td></tr>"
                   for k, v in rows)
    return f'<table class="kv">{body}</table>'


def _badge(measured: bool) -> str:
    return '<span class="meas">measured</span>' if measured else '<span class="est">estimated</span>'


def _png_b64(fig: Figure) -> str:
    from ecopt.report.figures import DPI

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def figures(data: ReportData) -> dict[str, Figure]:
    """The report's figures: ``pareto``, ``hypervolume``, ``phase_energy`` (those that apply)."""
    from ecopt.report import figures as plot

    out: dict[str, Figure] = {}
    if data.records:
        out["pareto"] = plot.pareto(data)
        out["hypervolume"] = plot.hypervolume(data)
    if data.front and data.phase_energy:
        out["phase_energy"] = plot.phase_energy(data)
    return out


def _banner(data: ReportData) -> str:
    if not data.records:
        return ""
    if not data.energy_known:
        return ('<div class="banner">No energy readings: the meter recorded durations only. '
                "<span>Energy figures are empty.</span></div>")
    if not data.energy_estimated:
        return ""
    meters = sorted({p.meter for p in data.provenance if not p.measured})
    sources = sorted({p.source for p in data.provenance if not p.measured})
    mixed = " Some components were measured; the estimated ones taint every total they enter." \
        if data.energy_measured_any else ""
    return ('<div class="banner" id="estimate-banner">Energy in this report is ESTIMATED, not '
            f"measured (meter: {_e(', '.join(meters))}; sources: {_e(', '.join(sources))}). "
            "<span>Where only a CPU-time estimate exists, samples/J is nearly throughput times "
            "a constant: it ranks configurations by the CPU they burn, not by the power the "
            f"hardware really draws.{_e(mixed)}</span></div>")


def _fallbacks(data: ReportData) -> str:
    line = fallback_line(data)
    return f'<p class="fallback" id="sobol-fallbacks">{_e(line)}</p>' if line else ""


def _summary(data: ReportData) -> str:
    c = data.counts
    rows: list[tuple[str, Any]] = [
        ("trials finished", len(data.records)),
        ("complete (within constraints)", c["complete"]),
        ("broke a constraint", c["violates_constraints"]),
        ("failed", c["failed"]),
        ("infeasible (out of memory...)", c["infeasible"]),
        ("pruned (stopped early)", c.get("pruned", 0)),
        ("on the Pareto front", len(data.front)),
    ]
    if data.unfinished:
        rows.append(("started, not finished (running or interrupted)",
                     ", ".join(str(n) for n in data.unfinished)))
    if data.reference_point is not None:
        ref = ", ".join(f"{o.name}={fmt_number(v)}{' (inferred)' if inf else ' (threshold)'}"
                        for o, v, inf in zip(data.objectives, data.reference_point,
                                             data.reference_inferred))
        rows.append(("hypervolume", data.hypervolume))
        rows.append(("reference point", ref))
    for name, n in data.best.items():
        r = data.record(n)
        rows.append((f"best {name}", f"trial {n}: {_num(r.values[name])}"))
    if data.knee is not None:
        rows.append(("knee of the front", f"trial {data.knee}"))
    est = " (estimated)" if data.energy_estimated else ""
    rows.append(("energy spent by the search (trials + proposals)",
                 f"{_num(data.search_energy_j)} J{est} ({_num(data.trial_energy_j)} J + "
                 f"{_num(data.proposal_energy_j)} J)"))
    if data.stop_reason:
        rows.append(("last optimize() stopped", data.stop_reason))
    conv = data.convergence
    if conv and conv != data.stop_reason:
        rows.append(("stopping rule", conv))
    rows.append(("trial time, summed", f"{_num(data.search_duration_s)} s"))
    return _kv(rows)


def _energy_cell(rec: TrialRecord, phase: str) -> str:
    p = rec.phases.get(phase)
    if p is None:
        return '<td class="muted">-</td>'
    srcs = ";".join(f"{k}={c.source}" for k, c in p.measurement.components.items()) or "no energy"
    per = ""
    if p.samples:
        per = f"<br>{_e(_num(p.samples))} items"
        if p.energy_j > 0:
            per += f", {_e(_num(p.samples / p.energy_j))} /J"
    return (f'<td class="num">{_e(_num(p.energy_j))} J {_badge(p.measured)}'
            f'<br><span class="src">{_e(srcs)}</span>{per}</td>')


def _front_table(data: ReportData) -> str:
    if not data.front:
        return '<p class="muted">No Pareto front: no trial completed within the constraints.</p>'
    params = list(data.spec.get("space", {}) or {})
    for r in data.records:
        for k in r.params:
            if k not in params:
                params.append(k)
    objs = data.objective_names
    metric_names: list[str] = []
    for r in data.front_records():
        for m in r.metrics:
            if m not in metric_names:
                metric_names.append(m)
    head = ["trial", "proposed by"] + params + [data.axis_label(o) for o in objs] + metric_names
    head += [f"{ph} energy" for ph in data.phases] + ["total energy (J)"]
    if data.lifecycle_energy_j:
        head.append(f"lifecycle energy, {_num(data.inferences)} inferences (J)")
    rows = []
    for r in data.front_records():
        star = " (knee)" if r.number == data.knee else ""
        cells = [f"<td>{_e(r.number)}{_e(star)}</td>", _cell(r.proposed_by)]
        cells += [_cell(r.params.get(p, "")) for p in params]
        cells += [_cell(r.values.get(o)) for o in objs]
        cells += [_cell(r.metrics.get(m)) for m in metric_names]
        cells += [_energy_cell(r, ph) for ph in data.phases]
        cells.append(f'<td class="num">{_e(_num(r.energy_j))} {_badge(r.measured)}</td>')
        if data.lifecycle_energy_j:
            cells.append(_cell(data.lifecycle_energy_j.get(r.number)))
        rows.append(_row(cells, "front"))
    return f'<div class="scroll"><table id="front-table">{_th(head)}{"".join(rows)}</table></div>'


def _trials_table(data: ReportData) -> str:
    params: list[str] = []
    for r in data.records:
        for k in r.params:
            if k not in params:
                params.append(k)
    objs = data.objective_names
    head = ["trial", "state", "proposed by"] + params + objs + ["energy (J)", "duration (s)",
                                                                "error"]
    rows = []
    for r in data.records:
        kind = data.kind(r)
        err = f"{r.error.type}: {r.error.message}" if r.error else ""
        cells = [_cell(r.number), f'<td class="state-{_e(r.state.value)}">{_e(kind)}</td>',
                 _cell(r.proposed_by)]
        cells += [_cell(r.params.get(p, "")) for p in params]
        cells += [_cell(r.values.get(o)) for o in objs]
        cells += [_cell(r.energy_j if r.phases else None), _cell(r.duration_s), _cell(err)]
        rows.append(_row(cells, "front" if kind == "front" else ""))
    return f'<div class="scroll"><table id="trials-table">{_th(head)}{"".join(rows)}</table></div>'


def _excluded(data: ReportData) -> str:
    """Complete trials kept off the front because a figure of theirs is meter noise."""
    if not data.excluded:
        return ""
    items = "".join(f"<li>trial {_e(n)}: {_e(why)}</li>" for n, why in data.excluded.items())
    return (f'<div class="warn" id="excluded"><p>{len(data.excluded)} complete trial(s) kept '
            "off the front, the knee, the best-of and the payback: a figure they returned "
            "came from a window too short for the meter (repeat the work inside the phase: "
            f"<code>trial.repeat_in_phase</code>).</p><ul>{items}</ul></div>")


def _failures(data: ReportData) -> str:
    bad = [r for r in data.records if r.error is not None]
    if not bad:
        return ""
    items = []
    for r in bad:
        assert r.error is not None
        tb = (f"<details><summary>traceback</summary><pre>{_e(r.error.traceback)}</pre></details>"
              if r.error.traceback else "")
        items.append(f"<li>trial {_e(r.number)} <b class=\"state-{_e(r.state.value)}\">"
                     f"{_e(r.state.value)}</b>: {_e(r.error.type)}: {_e(r.error.message)}{tb}</li>")
    return (f"<h2 id=\"failures\">Failed, infeasible and pruned trials</h2>"
            f"<ul>{''.join(items)}</ul>")


def _payback(data: ReportData) -> str:
    est = " (estimated)" if data.energy_estimated else ""
    parts = [f"<p>The search spent <b>{_e(_num(data.search_energy_j))} J{_e(est)}</b> "
             f"(trials + proposals): {_e(_num(data.trial_energy_j))} J inside the trials' "
             f"measured phases ({_e(len(data.records))} trials, failed and pruned ones "
             f"included) and {_e(_num(data.proposal_energy_j))} J in the sampler's proposals "
             "(model fitting and acquisition optimisation, metered like a phase).</p>"]
    pb = data.payback
    if pb is not None:
        n = pb.items_to_recover
        parts.append(_kv([
            ("phase compared", pb.phase),
            ("baseline trial", f"trial {pb.baseline_trial}: {_num(pb.baseline_j_per_item)} J per item{est}"),
            ("best front trial", f"trial {pb.best_trial}: {_num(pb.best_j_per_item)} J per item{est}"),
            ("saving per item", f"{_num(pb.saving_j_per_item)} J{est}"),
            ("items to recover the search", "never (no saving)" if n is None
             else f"{math.ceil(n):,}"),
        ]))
        parts.append(f'<p id="payback-sentence">{_e(pb.describe())}</p>')
    elif data.payback_note:
        parts.append(f'<p class="muted">{_e(data.payback_note)}</p>')
    return "".join(parts)


def _spec(data: ReportData) -> str:
    spec = data.spec
    out = []
    obj_rows = "".join(_row([_cell(o.name), _cell(o.direction),
                             _cell("inferred" if o.threshold is None else o.threshold)])
                       for o in data.objectives)
    out.append(f"<h3>Objectives</h3><table>{_th(['name', 'direction', 'threshold'])}{obj_rows}</table>")
    if data.constraints:
        rows = "".join(_row([_cell(c.name), _cell(c.op), _cell(c.bound)]) for c in data.constraints)
        out.append(f"<h3>Constraints</h3><table>{_th(['metric', 'op', 'bound'])}{rows}</table>")
    space = spec.get("space") or {}
    if isinstance(space, Mapping) and space:
        rows = "".join(_row([_cell(k), _cell(json.dumps(v, ensure_ascii=False))])
                       for k, v in space.items())
        out.append(f"<h3>Search space</h3><table>{_th(['parameter', 'definition'])}{rows}</table>")
    facts: list[tuple[str, Any]] = []
    for k in ("created_at", "seed", "ecopt_version"):
        if k in spec:
            facts.append((k, str(spec[k])))
    if "sampler" in spec:
        facts.append(("sampler", json.dumps(spec["sampler"], ensure_ascii=False)))
    for k in ("meter", "idle"):
        if spec.get(k) is not None:
            facts.append((k, json.dumps(spec[k], ensure_ascii=False, default=str)))
    if facts:
        out.append("<h3>Study</h3>" + _kv(facts))
    host = spec.get("host") or {}
    if isinstance(host, Mapping) and host:
        rows2 = [(k, json.dumps(v, ensure_ascii=False) if not isinstance(v, str) else v)
                 for k, v in host.items() if k != "libraries"]
        libs = host.get("libraries")
        if isinstance(libs, Mapping):
            rows2.append(("libraries", ", ".join(f"{k} {v}" for k, v in libs.items())))
        out.append("<h3>Host</h3>" + _kv(rows2))
    if data.provenance:
        rows = "".join(_row([_cell(p.meter), _cell(p.component), _cell(p.source),
                             f"<td>{_badge(p.measured)}</td>", _cell(p.energy_j),
                             _cell(p.note or "")]) for p in data.provenance)
        out.append("<h3>Energy provenance</h3><table>"
                   f"{_th(['meter', 'component', 'source', 'kind', 'joules (all trials)', 'example note'])}"
                   f"{rows}</table>")
    if spec:
        raw = json.dumps(spec, indent=2, ensure_ascii=False, default=str)
        out.append(f"<details><summary>study.json</summary><pre>{_e(raw)}</pre></details>")
    return "".join(out)


def _figure(figs: Mapping[str, str], key: str, alt: str, caption: str) -> str:
    if key not in figs:
        return ""
    return (f'<figure id="fig-{_e(key)}"><img alt="{_e(alt)}" '
            f'src="data:image/png;base64,{figs[key]}"><figcaption>{_e(caption)}</figcaption></figure>')


def _transfer(data: ReportData) -> str:
    from ecopt.report.transfer import transfer_rows

    rows = transfer_rows(data.spec, data.records)
    if not rows:
        return ""
    head = _th(["source", "study id", "trials used", "hash", "trials from its Pareto set",
                "proposals modelled with it", "trust at first", "trust now"])
    body = "".join(_row([_cell(r["label"]), _cell(r["study_id"]), _cell(r["n_records"]),
                         _cell(r["hash"]), _cell(r["design_trials"]), _cell(r["pooled_trials"]),
                         _cell(r["trust_first"]), _cell(r["trust_last"])]) for r in rows)
    return ('<h2 id="transfer">Transfer sources</h2><p>Earlier studies this one learned from, '
            "read-only: none of their trials is in this study's log, front or counts. Trust is "
            "the ranking agreement of a source's model with this study's trials (0: none, 1: "
            "perfect), as recorded with each proposal.</p>"
            f"<table>{head}{body}</table>")


def render_html(data: ReportData, figure_png_b64: Mapping[str, str] | None = None) -> str:
    """The report page as one HTML string.

    Args:
        data: The study's :class:`ReportData`.
        figure_png_b64: Figure key (``pareto``, ``hypervolume``, ``phase_energy``)
            -> base64 PNG. ``None`` draws them with :mod:`ecopt.plot`.
    """
    if figure_png_b64 is None:
        figure_png_b64 = {k: _png_b64(f) for k, f in figures(data).items()}
    figs = figure_png_b64
    title = f"ecopt report: {data.name}"
    sub = (f"{data.path or 'in-memory study'} · generated {data.generated_at} by ecopt "
           f"{__version__}")
    warn = ""
    if data.warnings:
        warn = ('<div class="warn" id="warnings"><b>Problems found</b><ul>'
                + "".join(f"<li>{_e(w)}</li>" for w in data.warnings) + "</ul></div>")
    body = [
        f"<h1>{_e(title)}</h1>",
        f'<p class="sub">{_e(sub)}</p>',
        _banner(data),
        _fallbacks(data),
        warn,
        '<h2 id="summary">Summary</h2>', _summary(data),
        _transfer(data),
        '<h2 id="front">Pareto front</h2>',
        _figure(figs, "pareto", "Pareto front plot",
                "Every trial is a point; the front (orange) is joined by its staircase and "
                "labelled with trial numbers (* marks the knee). Hollow squares broke a "
                "constraint; crosses failed. The red plus is the hypervolume reference point; "
                "dashed lines are explicit thresholds."),
        _front_table(data),
        _excluded(data),
        '<h2 id="progress">Hypervolume</h2>',
        _figure(figs, "hypervolume", "Hypervolume against trials and energy",
                "Hypervolume of the trials so far against the final reference point, by trial "
                "number (left) and by the energy the search had spent (right)."),
        '<h2 id="phases">Energy per phase</h2>',
        _figure(figs, "phase_energy", "Per-phase energy of the front trials",
                "Stacked energy of each phase of each front trial, in joules (left) and as a "
                "share of the trial's energy (right)."),
        '<h2 id="payback">Search energy and payback</h2>', _payback(data),
        _failures(data),
        '<h2 id="trials">All trials</h2>',
        f"<details open><summary>{_e(len(data.records))} trials</summary>"
        f"{_trials_table(data)}</details>",
        '<h2 id="spec">Study specification</h2>', _spec(data),
    ]
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f'<meta http-equiv="Content-Security-Policy" content="{_e(CSP)}">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{_e(title)}</title><style>{_CSS}</style></head><body>"
            + "\n".join(b for b in body if b) + "\n</body></html>\n")


def write_report(source: Study | str | Path | ReportData, out: str | Path | None = None, *,
                 png_dir: str | Path | None = None, baseline: int | None = None,
                 phase: str | None = None, inferences: float | None = None
                 ) -> tuple[Path, ReportData]:
    """Write the HTML report (and optionally each figure as PNG).

    Args:
        source: A study, a study directory or a :class:`ReportData`.
        out: The HTML file (default ``<study dir>/report.html``).
        png_dir: Also write ``pareto.png``, ``hypervolume.png`` and
            ``phase_energy.png`` here.
        baseline, phase, inferences: See :func:`ecopt.report.build_report`.

    Returns:
        ``(html_path, data)``; ``data.warnings`` lists what could not be shown.

    Raises:
        NotAStudyError: when a directory holds no study.
        ValueError: when no ``out`` is given for an in-memory study.
    """
    data = source if isinstance(source, ReportData) else build_report(
        source, baseline=baseline, phase=phase, inferences=inferences)
    if out is None:
        if not data.path:
            raise ValueError("an in-memory study has no directory: pass out='report.html'")
        out = Path(data.path) / "report.html"
    out = Path(out)
    figs = figures(data)
    b64: dict[str, str] = {}
    png_path = Path(png_dir) if png_dir is not None else None
    if png_path is not None:
        png_path.mkdir(parents=True, exist_ok=True)
    for key, fig in figs.items():
        from ecopt.report.figures import DPI

        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=DPI)
        raw = buf.getvalue()
        b64[key] = base64.b64encode(raw).decode("ascii")
        if png_path is not None:
            (png_path / f"{key}.png").write_bytes(raw)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render_html(data, b64), encoding="utf-8")
    return out, data
