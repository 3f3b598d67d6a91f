"""Handlers of ``ecopt report``, ``ecopt plot``, ``ecopt compare`` and ``ecopt show``.

Exit statuses (every handler):

* ``0``: the output was written / printed. Anything that could not be shown
  (skipped log lines, no complete trial, an unusable ``--baseline``...) is
  printed as ``ecopt CMD: warning: ...`` on stderr;
* ``1``: only with ``--strict``: output written, but there were such warnings;
* ``2``: nothing could be produced (not a study, unknown metric, nothing to
  plot, unwritable output); the message says why. Raised errors are turned
  into that one line by :func:`ecopt.cli.main`.

A closed pipe (``ecopt show DIR | head``) ends the command quietly.

Strings from a study directory are printed with control characters escaped,
so a crafted log cannot drive the terminal.
"""

from __future__ import annotations

import argparse
import functools
import math
import os
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ecopt.errors import EcoptError
from ecopt.fmt import fmt_number, safe_text
from ecopt.report.data import (
    CompareData,
    ReportData,
    axis_values,
    build_compare,
    build_report,
    check_axis,
    failure_line,
    failure_summary,
    fallback_line,
)
from ecopt.trial import TrialRecord

__all__ = ["report_main", "plot_main", "compare_main", "show_main"]

_clean = safe_text


def _warn(cmd: str, warnings: Sequence[str]) -> None:
    for w in warnings:
        print(f"ecopt {cmd}: warning: {_clean(w)}", file=sys.stderr)


def _fmt(v: Any) -> str:
    return _clean(fmt_number(v))


def _spans(numbers: Sequence[int]) -> str:
    """``[0, 1, 2, 5, 7, 8]`` -> ``"0-2, 5, 7-8"``."""
    parts: list[str] = []
    nums = sorted(numbers)
    i = 0
    while i < len(nums):
        j = i
        while j + 1 < len(nums) and nums[j + 1] == nums[j] + 1:
            j += 1
        parts.append(f"{nums[i]}" if i == j else f"{nums[i]}-{nums[j]}")
        i = j + 1
    return ", ".join(parts)


def _proposers_line(records: Sequence[TrialRecord]) -> str:
    """Which trials each sampler proposed, in order of first use, with the rule that sized
    the Sobol initial design when a trial recorded it (``proposal["why"]``).

    Example: ``sobol: 3 trials (0-2), initial design (n_init=3: ...); qlognehvi: 7 trials (3-9)``.
    """
    by: dict[str, list[int]] = {}
    why: dict[str, str] = {}
    for r in sorted(records, key=lambda r: r.number):
        by.setdefault(r.proposed_by, []).append(r.number)
        w = r.proposal.get("why") if isinstance(r.proposal, dict) else None
        if isinstance(w, str) and r.proposed_by not in why:
            why[r.proposed_by] = w
    return "; ".join(f"{_clean(name)}: {len(nums)} trial{'s' if len(nums) != 1 else ''} "
                     f"({_spans(nums)})" + (f", {_clean(why[name])}"
                                            if name in why else "")
                     for name, nums in by.items())


def _table(head: Sequence[str], rows: Sequence[Sequence[Any]], indent: str = "  ") -> str:
    cells = [[_clean(h) for h in head]] + [[_fmt(v) for v in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(head))]
    lines = []
    for k, r in enumerate(cells):
        lines.append(indent + "  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
        if k == 0:
            lines.append(indent + "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _quiet_stdout() -> None:
    """The reader went away (``| head``): point stdout at /dev/null so exit stays silent."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


def _guarded(cmd: str) -> Callable[[Callable[[argparse.Namespace], int]],
                                    Callable[[argparse.Namespace], int]]:
    """Turn an unexpected exception into one line and exit status 2 (``ECOPT_DEBUG=1``
    re-raises it); the errors :func:`ecopt.cli.main` formats itself pass through."""

    def deco(fn: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
        @functools.wraps(fn)
        def wrapper(args: argparse.Namespace) -> int:
            try:
                return fn(args)
            except BrokenPipeError:
                _quiet_stdout()
                return 0
            except (EcoptError, ValueError, FileNotFoundError, NotADirectoryError):
                raise
            except Exception as exc:  # noqa: BLE001 - a report command never shows a traceback
                if os.environ.get("ECOPT_DEBUG"):
                    raise
                print(f"ecopt {cmd}: error: {type(exc).__name__}: {_clean(exc)} "
                      "(set ECOPT_DEBUG=1 to see the traceback)", file=sys.stderr)
                return 2
        return wrapper

    return deco


def _write_error(cmd: str, path: object, exc: OSError) -> int:
    """One line naming the file that could not be written (the OS's own name for it first)."""
    where = exc.filename if exc.filename is not None else path
    print(f"ecopt {cmd}: error: cannot write {_clean(where)}: {exc.strerror or exc}",
          file=sys.stderr)
    return 2


def _done(cmd: str, args: argparse.Namespace, warnings: Sequence[str]) -> int:
    """Print the warnings; 0, or 1 with ``--strict`` when there were any."""
    _warn(cmd, warnings)
    return 1 if warnings and getattr(args, "strict", False) else 0


# ---------------------------------------------------------------------------
# ecopt report
# ---------------------------------------------------------------------------


@_guarded("report")
def report_main(args: argparse.Namespace) -> int:
    """``ecopt report RUN_DIR [--out FILE.html] [--png DIR] [--baseline TRIAL]``."""
    from ecopt.report.html import write_report

    data = build_report(args.run_dir, baseline=getattr(args, "baseline", None),
                        phase=getattr(args, "phase", None),
                        inferences=getattr(args, "inferences", None))
    try:
        path, _ = write_report(data, args.out, png_dir=args.png)
    except OSError as exc:
        return _write_error("report", args.out or Path(args.run_dir) / "report.html", exc)
    print(f"wrote {path}")
    if args.png:
        print(f"wrote figures to {args.png}")
    if data.energy_estimated:
        print("note: energy in this study is ESTIMATED, not measured (the report says so)")
    if data.payback is not None:
        print(_clean(data.payback.describe()))
    if data.excluded:
        print(f"{len(data.excluded)} complete trial(s) kept off the front, the knee, the "
              "best-of and the payback: excluded: window too short for the meter "
              f"(trials {', '.join(map(str, data.excluded))}; ecopt show lists why)")
    return _done("report", args, data.warnings)


# ---------------------------------------------------------------------------
# ecopt plot
# ---------------------------------------------------------------------------


def _plottable(data: ReportData, x: str, y: str) -> int:
    n = 0
    for r in data.records:
        if math.isfinite(axis_values(data, x, r)) and math.isfinite(axis_values(data, y, r)):
            n += 1
    return n


@_guarded("plot")
def plot_main(args: argparse.Namespace) -> int:
    """``ecopt plot RUN_DIR [--x METRIC --y METRIC] -o front.png``."""
    from ecopt.report import figures as plot

    data = build_report(args.run_dir)
    for a in (args.x, args.y):
        if a is not None:
            check_axis(data, a)
    names = data.objective_names
    x = args.x or (names[0] if len(names) > 1 else "energy_j")
    y = args.y or (names[1] if len(names) > 1 else names[0])
    if _plottable(data, x, y) == 0:
        _warn("plot", data.warnings)
        print(f"ecopt plot: error: no trial of {data.name!r} has values for {x!r} and {y!r}; "
              "nothing to plot (see `ecopt show` for the trials' states and errors)",
              file=sys.stderr)
        return 2
    chosen = args.x is not None or args.y is not None
    out = Path(args.out) if args.out else \
        Path(args.run_dir) / plot_file_name(x, y) if chosen else Path(args.run_dir) / "front.png"
    existed = out.exists()
    fig = plot.pareto(data, args.x, args.y)
    try:
        fig.savefig(out, dpi=plot.DPI)
    except OSError as exc:
        return _write_error("plot", out, exc)
    print(f"wrote {_clean(out)}" + (" (replacing the file that was there)" if existed else ""))
    return _done("plot", args, data.warnings)


def plot_file_name(x: str, y: str) -> str:
    """The file ``ecopt plot --x X --y Y`` writes into the study directory without ``-o``.

    ``front_<y>_vs_<x>.png``, so a plot of other axes never replaces the default
    axes' ``front.png`` (characters other than letters, digits, ``.``, ``-`` and
    ``_`` become ``_``).
    """
    safe = [re.sub(r"[^\w.-]", "_", a) for a in (y, x)]
    return f"front_{safe[0]}_vs_{safe[1]}.png"


# ---------------------------------------------------------------------------
# ecopt compare
# ---------------------------------------------------------------------------


def _parse_ref(text: str | None) -> list[float] | None:
    if text is None:
        return None
    try:
        vals = [float(v) for v in text.split(",")]
    except ValueError:
        raise ValueError(f"--ref-point must be comma-separated numbers, got {text!r}") from None
    if not all(math.isfinite(v) for v in vals):
        raise ValueError(f"--ref-point values must be finite, got {text!r}")
    return vals


@_guarded("compare")
def compare_main(args: argparse.Namespace) -> int:
    """``ecopt compare RUN_A RUN_B ... [-o overlay.png] [--ref-point a,b]``."""
    data = build_compare(args.run_dirs, _parse_ref(args.ref_point))
    as_json = getattr(args, "json", False)
    if as_json:
        from ecopt.fmt import json_text

        print(json_text(compare_dict(data)))
    est = " (estimated)" if data.energy_estimated else ""
    ref = ("shared reference point: "
           + ", ".join(f"{o.name}={fmt_number(v)}" for o, v in zip(data.objectives, data.reference_point))
           + ("" if data.reference_given else " (inferred from all studies)")
           if data.reference_point is not None else "no reference point: no complete trial")
    rows = [[e.name, e.sampler, e.n_trials, e.n_complete, len(e.front_numbers), e.hypervolume,
             e.search_energy_j, e.host] for e in data.entries]
    if not as_json:
        print(_clean(ref))
        print(_table(["study", "sampler", "trials", "complete", "front", "hypervolume",
                      f"search energy J{est} (trials + proposals)", "host"], rows))
    if args.out:
        from ecopt.report import figures as plot

        try:
            plot.compare(data).savefig(args.out, dpi=plot.DPI)
        except OSError as exc:
            return _write_error("compare", args.out, exc)
        print(f"wrote {args.out}", file=sys.stderr if as_json else sys.stdout)
    return _done("compare", args, data.warnings)


def compare_dict(data: CompareData) -> dict[str, Any]:
    """What ``ecopt compare --json`` prints.

    Args:
        data: The comparison.
    """
    return {
        "objectives": [{"name": o.name, "direction": o.direction} for o in data.objectives],
        "reference_point": list(data.reference_point) if data.reference_point else None,
        "reference_given": data.reference_given,
        "energy_estimated": data.energy_estimated,
        "studies": [{"name": e.name, "path": e.path, "sampler": e.sampler, "host": e.host,
                     "trials": e.n_trials, "complete": e.n_complete,
                     "front": list(e.front_numbers), "hypervolume": e.hypervolume,
                     "search_energy_j": e.search_energy_j,
                     "energy_estimated": e.energy_estimated} for e in data.entries],
        "warnings": list(data.warnings),
    }


# ---------------------------------------------------------------------------
# ecopt show
# ---------------------------------------------------------------------------


#: Stands where the Sobol-fallback line goes until the text is cleaned (then coloured).
_FALLBACK_SLOT = "@@ecopt-fallback-line@@"


def show_text(data: ReportData, color: bool = False) -> str:
    """The terminal summary of ``ecopt show`` as a string.

    Args:
        data: The report data.
        color: Print the Sobol-fallback warning in red (ANSI), for a terminal.
    """
    out: list[str] = []
    spec = data.spec
    out.append(f"study {_clean(data.name)}  ({_clean(data.path)})")
    objs = ", ".join(f"{o.name} [{o.direction}"
                     + (f", threshold {o.threshold:g}" if o.threshold is not None else "") + "]"
                     for o in data.objectives)
    out.append(f"objectives: {objs}")
    if data.constraints:
        out.append("constraints: " + ", ".join(f"{c.name} {c.op} {c.bound:g}"
                                               for c in data.constraints))
    sampler = spec.get("sampler", {})
    meter = spec.get("meter", {})
    host = spec.get("host", {}) if isinstance(spec.get("host"), dict) else {}
    sname = sampler.get("name", "?") if isinstance(sampler, dict) else sampler
    mname = meter.get("meter", "?") if isinstance(meter, dict) else meter
    out.append(f"sampler: {sname}   meter: {mname}   host: {host.get('cpu_model', '?')}"
               + (f" + {', '.join(map(str, host.get('gpus') or []))}" if host.get("gpus") else ""))
    from ecopt.report.transfer import transfer_lines

    out += transfer_lines(spec, data.records)
    if data.energy_estimated:
        out.append("ENERGY IS ESTIMATED, NOT MEASURED ("
                   + ", ".join(sorted({p.source for p in data.provenance if not p.measured}))
                   + ")")
    c = data.counts
    out.append(f"trials: {len(data.records)} finished: {c['complete']} complete, "
               f"{c['violates_constraints']} broke a constraint, {c['failed']} failed, "
               f"{c['infeasible']} infeasible, {c.get('pruned', 0)} pruned"
               + (f"; started but unfinished: {list(data.unfinished)}" if data.unfinished else ""))
    if data.records:
        out.append("proposed by: " + _proposers_line(data.records))
    failures = failure_summary(data.records)
    if failures is not None:
        out.append(failure_line(failures))
    if data.sobol_fallbacks:
        out.append(_FALLBACK_SLOT)
    est = " (estimated)" if data.energy_estimated else ""
    out.append(f"search energy (trials + proposals): {fmt_number(data.search_energy_j)} J{est} "
               f"= {fmt_number(data.trial_energy_j)} J in trials + "
               f"{fmt_number(data.proposal_energy_j)} J in proposals, over "
               f"{fmt_number(data.search_duration_s)} s of trials")
    if data.stop_reason:
        out.append(f"last optimize() stopped: {data.stop_reason}")
    conv = data.convergence
    if conv and conv != data.stop_reason:
        out.append(f"stopping rule: {conv}")
    if data.reference_point is not None:
        out.append(f"hypervolume: {data.hypervolume:.6g} (reference point "
                   + ", ".join(f"{fmt_number(v)}" for v in data.reference_point)
                   + (", inferred" if any(data.reference_inferred) else "") + ")")
    if data.front:
        params: list[str] = []
        for r in data.front_records():
            for k in r.params:
                if k not in params:
                    params.append(k)
        head = ["trial"] + params + [data.axis_label(n) for n in data.objective_names] \
            + [f"energy J{est}", "source", "proposed by"]
        rows = []
        for r in data.front_records():
            srcs = sorted({cmp.source for p in r.phases.values()
                           for cmp in p.measurement.components.values()})
            rows.append([f"{r.number}{'*' if r.number == data.knee else ''}"]
                        + [r.params.get(p) for p in params]
                        + [r.values.get(n) for n in data.objective_names]
                        + [r.energy_j if r.phases else None, ",".join(srcs) or "-",
                           r.proposed_by])
        out.append(f"\nPareto front ({len(data.front)} trials, * = knee):")
        out.append(_table(head, rows))
        out.append("\nbest per objective:")
        for name, n in data.best.items():
            out.append(f"  {name}: trial {n} ({data.record(n).values[name]:.6g})")
    if data.excluded:
        out.append(f"\nkept off the front, the knee and the best-of ({len(data.excluded)} "
                   "complete trials; repeat the work inside the phase, trial.repeat_in_phase):")
        for n, why in list(data.excluded.items())[:20]:
            out.append(f"  {n}: {why}")
        if len(data.excluded) > 20:
            out.append(f"  ... and {len(data.excluded) - 20} more")
    bad = [r for r in data.records if r.error is not None]
    if bad:
        out.append(f"\nfailed / infeasible / pruned trials ({len(bad)}):")
        for r in bad[:20]:
            assert r.error is not None
            msg = r.error.message.splitlines()[0] if r.error.message else ""
            out.append(f"  {r.number}: {r.state.value}: {r.error.type}: {msg[:160]}")
        if len(bad) > 20:
            out.append(f"  ... and {len(bad) - 20} more")
    text = _clean("\n".join(out))
    line = fallback_line(data)
    if line is not None:
        line = _clean(line)
        text = text.replace(_FALLBACK_SLOT, f"\x1b[31m{line}\x1b[0m" if color else line)
    return text


@_guarded("show")
def show_main(args: argparse.Namespace) -> int:
    """``ecopt show RUN_DIR``: trials by state, front table, best per objective."""
    data = build_report(args.run_dir)
    if getattr(args, "json", False):
        from ecopt.fmt import json_text

        print(json_text(show_dict(data)))
        return _done("show", args, data.warnings)
    color = sys.stdout.isatty() and not os.environ.get("NO_COLOR")
    print(show_text(data, color=color))
    return _done("show", args, data.warnings)


def show_dict(data: ReportData) -> dict[str, Any]:
    """What ``ecopt show --json`` prints: the summary as data, energies with their source.

    Args:
        data: The report data.
    """
    by_number = {r.number: r for r in data.records}
    return {
        "name": data.name, "path": data.path,
        "objectives": [{"name": o.name, "direction": o.direction} for o in data.objectives],
        "counts": dict(data.counts), "unfinished": list(data.unfinished),
        "stop_reason": data.stop_reason,
        "hypervolume": data.hypervolume,
        "reference_point": list(data.reference_point) if data.reference_point else None,
        "front": [{"trial": n, "params": dict(by_number[n].params),
                   "values": dict(by_number[n].values), "energy_j": by_number[n].energy_j}
                  for n in data.front if n in by_number],
        "best": dict(data.best), "knee": data.knee,
        "excluded": {str(k): v for k, v in data.excluded.items()},
        "search_energy_j": data.search_energy_j,
        "trial_energy_j": data.trial_energy_j, "proposal_energy_j": data.proposal_energy_j,
        "energy_estimated": data.energy_estimated,
        "energy_measured_any": data.energy_measured_any,
        "provenance": [{"meter": p.meter, "component": p.component, "source": p.source,
                        "measured": p.measured, "energy_j": p.energy_j}
                       for p in data.provenance],
        "sobol_fallbacks": list(data.sobol_fallbacks),
        "failures": failure_summary(data.records),
        "warnings": list(data.warnings),
    }
