"""Shared helpers of the experiment scripts: arguments, progress lines, markdown summaries.

Every script: ``--out DIR`` (study directories + ``summary.md``), ``--meter``,
``--seed``, ``--threads``, ``--overwrite``, ``--quiet``. Progress goes to stderr,
one line per trial; the summary goes to ``<out>/summary.md`` and stdout.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import logging
import os
import shlex
import sys
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

__all__ = ["base_parser", "setup", "say", "run_trials", "provenance", "machine_line",
           "md_table", "write_summary", "fmt", "command_line", "study_dir"]

_T0 = time.monotonic()
_QUIET = False

# A clean clone without `pip install -e .` can still run the scripts: fall back to the
# checkout's ecopt (appended, so an installed ecopt wins).
_ROOT = str(Path(__file__).resolve().parents[1])
if _ROOT not in sys.path:
    sys.path.append(_ROOT)


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


def setup(args: argparse.Namespace) -> None:
    """Thread count, quiet library warnings, progress on/off."""
    global _QUIET, _T0
    _QUIET = bool(args.quiet)
    _T0 = time.monotonic()
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


def md_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A markdown table (cells formatted with :func:`fmt`)."""
    out = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    for row in rows:
        out.append("| " + " | ".join(c if isinstance(c, str) else fmt(c) for c in row) + " |")
    return "\n".join(out)


def write_summary(out: str | Path, title: str, command: str, provenance_line: str,
                  body: str, facts: dict[str, Any] | None = None) -> Path:
    """Write ``<out>/summary.md`` (and ``summary.json`` with ``facts``) and print it.

    Returns:
        The path of ``summary.md``.
    """
    import json

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    now = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    text = "\n".join([
        f"# {title}", "",
        f"- command: `{command}`",
        f"- date: {now}",
        f"- machine: {machine_line()}",
        f"- energy: {provenance_line}",
        f"- wall time: {time.monotonic() - _T0:.0f} s",
        "", body.rstrip(), "",
    ])
    path = out / "summary.md"
    path.write_text(text, encoding="utf-8")
    if facts is not None:
        (out / "summary.json").write_text(json.dumps(facts, indent=2, default=str) + "\n",
                                          encoding="utf-8")
    if not _QUIET:
        print(text)
    return path
