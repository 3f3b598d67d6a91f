"""Shared helpers of the experiment scripts: arguments, progress lines, markdown summaries.

Every script: ``--out DIR`` (study directories + ``summary.md``), ``--meter``,
``--seed``, ``--threads``, ``--overwrite``, ``--quiet``. Progress goes to stderr,
one line per trial; the summary goes to ``<out>/summary.md`` and stdout. The
scripts that run models add ``--device`` (:func:`add_device_arg`), ``--quick``
(a seconds-long run of the whole flow: :func:`add_quick_arg`) and
``--time-budget-s`` (no new trial starts after it: :func:`add_budget_arg`).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import importlib.util
import logging
import os
import shlex
import sys
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

__all__ = ["base_parser", "setup", "say", "run_trials", "provenance", "machine_line",
           "md_table", "write_summary", "fmt", "command_line", "study_dir", "add_device_arg",
           "resolve_device_arg", "add_quick_arg", "apply_quick", "add_budget_arg",
           "out_of_time", "budget_note", "run_header", "load_script"]

_T0 = time.monotonic()
_QUIET = False
_DEADLINE: float | None = None
_STOPPED: list[str] = []
_TABLES: dict[str, dict[str, Any]] = {}
_GIT: list[str | None] = []  # the checkout's commit when the run started

# A clean clone without `pip install -e .` can still run the scripts: fall back to the
# checkout's ecopt (appended, so an installed ecopt wins).
_ROOT = str(Path(__file__).resolve().parents[1])
if _ROOT not in sys.path:
    sys.path.append(_ROOT)


def load_script(name: str) -> ModuleType:
    """Import ``experiments/<name>.py`` as a module, once per process.

    For code outside the scripts that reuses their parts (the tests,
    ``scripts/gpu_check.py``): the module is registered as
    ``_ecopt_experiment_<name>``, so every caller gets the same one.
    """
    key = f"_ecopt_experiment_{name}"
    if key in sys.modules:
        return sys.modules[key]
    here = Path(__file__).resolve().parent
    if str(here) not in sys.path:
        sys.path.insert(0, str(here))
    spec = importlib.util.spec_from_file_location(key, here / f"{name}.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[key] = mod
    spec.loader.exec_module(mod)
    return mod


def base_parser(description: str, default_out: str) -> argparse.ArgumentParser:
    """An ``ArgumentParser`` with the options every experiment script shares."""
    p = argparse.ArgumentParser(description=description,
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--out", default=default_out,
                   help="output folder: one study directory per search, plus summary.md")
    p.add_argument("--meter", default="auto",
                   help="energy meter: auto (best available; an ESTIMATE on machines without "
                        "NVML/RAPL/CodeCarbon), estimate, wallclock, or any name ecopt knows")
    p.add_argument("--seed", type=int, default=0, help="seed of samplers, weights and data")
    p.add_argument("--threads", type=int, default=1,
                   help="torch CPU threads (1 keeps CPU-time energy estimates comparable on a "
                        "shared machine)")
    p.add_argument("--overwrite", action="store_true",
                   help="start afresh: earlier studies in --out are renamed to "
                        "<name>.old-<time> (never deleted). Without it a re-run resumes them")
    p.add_argument("--quiet", action="store_true", help="no per-trial progress lines")
    return p


def add_device_arg(p: argparse.ArgumentParser) -> None:
    """``--device``: ``auto`` (the GPU when torch can use one), ``cpu``, ``cuda`` or ``cuda:N``."""
    p.add_argument("--device", default="auto",
                   help="auto (the GPU when torch can use one, else the CPU), cpu, cuda or cuda:N")


def resolve_device_arg(args: argparse.Namespace) -> str:
    """The resolved ``--device``; a clear exit (before anything runs) when it is not available."""
    from ecopt.errors import DeviceUnavailableError
    from ecopt.workloads.device import resolve_device

    try:
        return resolve_device(args.device)
    except (ValueError, DeviceUnavailableError) as exc:
        raise SystemExit(f"--device: {exc}") from None


def add_quick_arg(p: argparse.ArgumentParser, what: str) -> None:
    """``--quick``: tiny sizes and budgets that run the whole flow in seconds."""
    p.add_argument("--quick", action="store_true",
                   help=f"a seconds-long run of the whole flow ({what}); options given "
                        "explicitly still win. For checking a setup, not for results")


def apply_quick(args: argparse.Namespace, parser: argparse.ArgumentParser,
                quick: dict[str, Any]) -> None:
    """With ``--quick``, set each option in ``quick`` that the user left at its default."""
    if not getattr(args, "quick", False):
        return
    for key, value in quick.items():
        if getattr(args, key) == parser.get_default(key):
            setattr(args, key, value)


def add_budget_arg(p: argparse.ArgumentParser) -> None:
    """``--time-budget-s``: start no new trial after this many seconds (summary still written)."""
    p.add_argument("--time-budget-s", type=float, default=None,
                   help="start no new trial once this many seconds have passed since the start "
                        "(the running trial finishes, the summary is written; a re-run resumes)")


def out_of_time() -> bool:
    """Whether ``--time-budget-s`` has run out."""
    return _DEADLINE is not None and time.monotonic() >= _DEADLINE


def budget_note() -> str | None:
    """What the time budget cut short, for the summary (``None`` when nothing was)."""
    if not _STOPPED:
        return None
    return ("The time budget (--time-budget-s) ran out: " + "; ".join(_STOPPED)
            + ". A re-run with the same --out resumes.")


def setup(args: argparse.Namespace) -> None:
    """Thread count, quiet library warnings, progress on/off, the time budget."""
    global _QUIET, _T0, _DEADLINE
    _QUIET = bool(args.quiet)
    _T0 = time.monotonic()
    budget = getattr(args, "time_budget_s", None)
    if budget is not None and not budget > 0:
        raise ValueError(f"--time-budget-s > 0 must hold, got {budget}")
    _DEADLINE = None if budget is None else _T0 + float(budget)
    _STOPPED.clear()
    _TABLES.clear()
    _GIT[:] = [_git_commit()]
    if args.threads < 1:
        raise ValueError(f"--threads >= 1 must hold, got {args.threads}")
    import torch

    torch.set_num_threads(args.threads)
    logging.basicConfig(level=logging.ERROR, format="%(levelname)s %(name)s: %(message)s")
    # ecopt logs each infeasible/failed trial at WARNING; the progress lines say it already.
    logging.getLogger("ecopt").setLevel(logging.ERROR)
    for mod in ("torch", "linear_operator", "gpytorch", "botorch", "transformers", "ecopt"):
        warnings.filterwarnings("ignore", category=FutureWarning, module=mod)
        warnings.filterwarnings("ignore", category=UserWarning, module=mod)
    warnings.filterwarnings("ignore", message=".*MeterFallback.*")
    warnings.filterwarnings("ignore", message=".*energy is ESTIMATED.*")
    try:
        from transformers.utils import logging as hf_logging

        hf_logging.set_verbosity_error()
    except ImportError:  # pragma: no cover - transformers is optional
        pass
    Path(args.out).mkdir(parents=True, exist_ok=True)


def study_dir(path: str | Path, overwrite: bool) -> Path:
    """The storage directory of one study; with ``overwrite`` an existing one is renamed aside.

    ``ecopt.Study`` resumes a directory that holds the same space and objectives;
    a script run with ``--overwrite`` means "measure again", so the old study is
    kept as ``<name>.old-<YYYYmmddTHHMMSS>`` next to it.
    """
    path = Path(path)
    if overwrite and path.exists():
        stamp = _dt.datetime.now().strftime("%Y%m%dT%H%M%S")
        dest = path.with_name(f"{path.name}.old-{stamp}")
        path.rename(dest)
        say(f"--overwrite: moved the previous study {path} to {dest}")
    return path


def say(msg: str) -> None:
    """A progress line on stderr, prefixed with the elapsed time."""
    if not _QUIET:
        print(f"[{time.monotonic() - _T0:7.1f}s] {msg}", file=sys.stderr, flush=True)


def fmt(v: Any, digits: int = 4) -> str:
    """A number for tables: ``digits`` significant figures; ints as ints; None as ``-``."""
    if v is None:
        return "-"
    if isinstance(v, bool):
        return str(v)
    if isinstance(v, int):
        return f"{v:,}"
    if isinstance(v, float):
        if v != v:
            return "nan"
        return f"{v:.{digits}g}"
    return str(v)


def run_trials(study: Any, objective: Callable[[Any], Any], n_trials: int, label: str,
               show: Sequence[str] = ()) -> list[Any]:
    """``study.optimize`` one trial at a time, printing a progress line after each.

    Args:
        study: An ``ecopt.Study``.
        objective: The objective.
        n_trials: Trials to run (fewer when the sampler runs out, e.g. a finished grid).
        label: Prefix of the progress lines.
        show: Metric names to print for each trial.

    Returns:
        The records of the trials run.
    """
    done: list[Any] = []
    for i in range(n_trials):
        if out_of_time():
            _STOPPED.append(f"{label} stopped after {i} of {n_trials} trials")
            say(f"{label}: time budget spent; stopping after {i} of {n_trials} trials")
            break
        recs = study.optimize(objective, n_trials=1, show_progress=False)
        if not recs:
            say(f"{label}: the sampler has nothing left to propose after {i} trials")
            break
        r = recs[-1]
        done.append(r)
        vals = {**r.metrics, **r.values}
        shown = "  ".join(f"{k}={fmt(vals[k])}" for k in show if k in vals)
        params = ", ".join(f"{k}={fmt(v, 3)}" for k, v in r.params.items())
        extra = "" if r.state.value == "complete" else f"  ({r.error.type}: {r.error.message[:90]})"
        say(f"{label} trial {r.number:3d} [{r.proposed_by}] {params} -> {r.state.value}  "
            f"{shown}{extra}")
    return done


def provenance(study: Any) -> tuple[str, bool, str]:
    """``(meter name, measured?, one-line statement)`` for a study's energy figures."""
    meter = study.spec.get("meter", {}) or {}
    name = str(meter.get("meter", meter.get("name", "?")))
    recs = [r for r in study.records if r.phases]
    measured = bool(recs) and all(r.measured for r in recs)
    sources: set[str] = set()
    for r in recs:
        for ph in r.phases.values():
            for c in ph.measurement.components.values():
                sources.add(c.source)
    src = ", ".join(sorted(sources)) or "none"
    if measured:
        line = f"Energy MEASURED by meter `{name}` (sources: {src})."
    else:
        line = (f"Energy ESTIMATED by meter `{name}` (sources: {src}; measured=False): no "
                "hardware energy counter was read, so joules are CPU time x watts per core "
                "(+ a small RAM term) and every per-joule figure is nearly throughput x a "
                "constant.")
    return name, measured, line


def machine_line() -> str:
    """CPU model, cores, RAM and GPUs of this machine."""
    from ecopt.host import host_facts

    h = host_facts()
    cpu = h.get("cpu_model") or h.get("cpu") or "?"
    cores = h.get("cpu_count") or os.cpu_count()
    ram = h.get("ram_gb")
    gpus = h.get("gpus") or []
    return (f"{cpu}, {cores} cores, {ram if ram is not None else '?'} GiB RAM, "
            f"GPU: {', '.join(map(str, gpus)) if gpus else 'none'}")


def command_line(argv: Sequence[str] | None, script: str) -> str:
    """The command that reproduces a run, for the summary."""
    args = list(sys.argv[1:] if argv is None else argv)
    return " ".join(["python", f"experiments/{script}", *map(shlex.quote, args)])


def md_table(headers: Sequence[str], rows: Sequence[Sequence[Any]],
             table_id: str | None = None) -> str:
    """A markdown table (cells formatted with :func:`fmt`).

    With ``table_id`` the table is also kept, cell for cell as printed, for
    ``summary.json``'s ``tables`` (docs copy recorded tables from there).
    """
    cells = [[c if isinstance(c, str) else fmt(c) for c in row] for row in rows]
    if table_id is not None:
        _TABLES[table_id] = {"columns": list(headers), "rows": cells}
    out = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    out += ["| " + " | ".join(row) + " |" for row in cells]
    return "\n".join(out)


def _git_commit() -> str | None:
    """HEAD of the checkout, with ``-dirty`` when tracked files had uncommitted changes."""
    import subprocess

    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=_ROOT, capture_output=True,
                                text=True, timeout=10, check=False).stdout.strip() or None
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               cwd=_ROOT, capture_output=True, text=True, timeout=10,
                               check=False).stdout
    except (OSError, subprocess.SubprocessError):  # pragma: no cover - no git here
        return None
    return commit + "-dirty" if commit and dirty.strip() else commit


def run_header(command: str, provenance_info: str | tuple[str, bool, str]) -> dict[str, Any]:
    """The recorded-run facts every summary.json starts with.

    ``script``, ``command``, ``date``, ``git_commit`` (with ``-dirty`` when the
    checkout had uncommitted changes, read when the run started), ``versions``,
    ``machine`` and ``energy`` (``meter``, ``measured``, ``note``), as docs/results/
    expects.
    """
    import platform

    versions: dict[str, Any] = {"python": platform.python_version()}
    for mod in ("ecopt", "torch", "transformers", "botorch", "numpy"):
        m = sys.modules.get(mod)
        if m is None:
            try:
                m = __import__(mod)
            except ImportError:
                continue
        versions[mod] = getattr(m, "__version__", "?")
    commit = _GIT[0] if _GIT else _git_commit()
    if isinstance(provenance_info, tuple):
        meter, measured, note = provenance_info
        energy: dict[str, Any] = {"meter": meter, "measured": measured, "note": note}
    else:
        energy = {"note": provenance_info}
    script = command.split()[1] if len(command.split()) > 1 else command
    return {"script": script, "command": command,
            "date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "git_commit": commit, "versions": versions, "machine": machine_line(),
            "energy": energy}


def write_summary(out: str | Path, title: str, command: str,
                  provenance_line: str | tuple[str, bool, str], body: str,
                  facts: dict[str, Any] | None = None) -> Path:
    """Write ``<out>/summary.md`` (and ``summary.json`` with ``facts``) and print it.

    Args:
        out: The output folder.
        title: The summary's title.
        command: The command that reproduces the run (:func:`command_line`).
        provenance_line: :func:`provenance`'s triple (or its statement alone).
        body: Markdown below the header.
        facts: Figures for ``summary.json``, after :func:`run_header`'s keys.

    Returns:
        The path of ``summary.md``.
    """
    import json

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    header = run_header(command, provenance_line)
    note = budget_note()
    text = "\n".join([
        f"# {title}", "",
        f"- command: `{command}`",
        f"- date: {header['date']}",
        f"- code: {header['git_commit'] or 'unknown'}",
        f"- machine: {header['machine']}",
        f"- energy: {header['energy']['note']}",
        f"- wall time: {time.monotonic() - _T0:.0f} s",
        *([f"- **stopped early**: {note}"] if note else []),
        "", body.rstrip(), "",
    ])
    path = out / "summary.md"
    path.write_text(text, encoding="utf-8")
    if facts is not None:
        full = {**header, "wall_time_s": round(time.monotonic() - _T0, 1),
                "stopped_early": note, **facts}
        if _TABLES:
            full["tables"] = dict(_TABLES)
        (out / "summary.json").write_text(json.dumps(full, indent=2, default=str) + "\n",
                                          encoding="utf-8")
    if not _QUIET:
        print(text)
    return path
