"""Recorded runs: the small files that back every number in the docs, and the doc tables made from them.

A script whose numbers appear in ``docs/`` writes one *recorded run*: two small,
deterministic files in ``docs/results/<script-stem>/<YYYY-MM-DD>[-<tag>]/``
(e.g. ``docs/results/plumber/2026-12-04/``), committed with the docs.

``summary.json`` (UTF-8, 2-space indent, keys in this order)::

    {
      "script": "benchmarks/plumber.py",          # path from the repository root
      "command": "python benchmarks/plumber.py --repeats 5 ...",   # exact, reproducible
      "date": "2026-12-04",                       # UTC date the run finished
      "git_commit": "<40-hex sha of the code that ran>",
      "git_dirty": false,                         # uncommitted changes to tracked files?
      "versions": {"ecopt": ..., "python": ..., "torch": ..., ...},
      "machine": "<cpu model>, <n> cores, <ram> GiB RAM, GPU: <models or none>",
      "energy": {"meter": "estimate", "measured": false, "note": "..."} | null,
      "tables": {"<table_id>": {"columns": [...], "rows": [[cell, ...], ...]}},
      "notes": ["...", ...],                      # caveats a reader must see (shared machine...)
      "facts": {...}                              # any other facts of the run (optional)
    }

``energy`` is ``null`` when no energy is involved; otherwise ``measured`` says
whether a hardware counter was read (``false``: an estimate, and every table
that shows joules says ESTIMATED in a column name or note). A cell is a string,
a number, a boolean, ``null`` (shown as ``-``), or an interval
``{"value": v, "low": lo, "high": hi}`` (shown as ``v [lo, hi]``). Floats are
stored with 6 significant digits, so re-running the formatter never changes a
file.

``summary.md`` holds the same facts for people: a title, the command, date,
commit, machine, versions and energy provenance on top, then every table in
Markdown under a ``### <table_id>`` heading.

**Cells in Markdown** are rendered by :func:`render_cell`: numbers with
:func:`ecopt.fmt.fmt_number` (the project's one number-format rule),
intervals as ``fmt(v) [fmt(lo), fmt(hi)]``, strings verbatim (``|`` escaped).

**Doc tables.** In a page under ``docs/``, a table copied from a recorded run sits
between two markers::

    <!-- table: <script-stem>/<date-tag>#<table_id> -->
    | ... the Markdown of that table, exactly as render_table gives it ... |
    <!-- /table -->

``python -m docs.tables`` rewrites every such block from
``docs/results/<script-stem>/<date-tag>/summary.json``; ``python -m docs.tables
--check`` writes nothing and exits non-zero listing every block that differs,
points at a missing file or table, or is not closed (``tests/test_doc_tables.py``
runs the check in CI). ``python -m docs.tables --print REF`` prints a block,
markers included, ready to paste into a page.

Example:
    >>> from docs.recorded import Table, interval, write_run, read_run
    >>> t = Table(["backend", "epoch s"], [["polars", interval(1.2, 1.1, 1.3)]])
    >>> run = write_run("docs/results/demo/2026-12-04", script="benchmarks/demo.py",
    ...                 command="python benchmarks/demo.py", tables={"epochs": t}, energy=None)
    >>> read_run(run.path).tables["epochs"] == t
    True
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import platform
import re
import shlex
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from ecopt.fmt import fmt_number

__all__ = [
    "Table", "RecordedRun", "MarkerProblem", "interval", "render_cell", "render_table",
    "write_run", "read_run", "rewrite_run", "results_dir", "command_line", "git_commit",
    "library_versions",
    "DATAFRAME_LIBRARIES", "versions_table",
    "machine_line", "estimated_energy", "render_markers", "check_docs", "update_docs",
    "marker_block", "RESULTS_ROOT", "DEFAULT_LIBRARIES", "trimmed_mean_ci", "trimmed_interval",
    "record_dirs", "adopt_tables",
]

#: Where recorded runs live, relative to the repository root.
RESULTS_ROOT = Path("docs") / "results"
#: Libraries whose versions every recorded run lists (those installed).
DEFAULT_LIBRARIES = ("ecopt", "numpy", "scipy", "pandas", "torch", "botorch", "gpytorch",
                     "scikit-learn", "polars", "dask", "distributed", "pyarrow", "xgboost",
                     "codecarbon", "nvidia-ml-py", "transformers")
_SIG_DIGITS = 6
_DATE_TAG = re.compile(r"^\d{4}-\d{2}-\d{2}(-[A-Za-z0-9_.-]+)?$")
_TABLE_ID = re.compile(r"^[A-Za-z0-9_.-]+$")

Cell = Any


def interval(value: float, low: float, high: float) -> dict[str, float]:
    """A table cell holding an estimate and its interval (rendered ``v [lo, hi]``)."""
    return {"value": float(value), "low": float(low), "high": float(high)}


def _is_interval(c: Any) -> bool:
    return isinstance(c, Mapping) and set(c) == {"value", "low", "high"}


def trimmed_mean_ci(xs: Iterable[float], cut: float = 0.2) -> tuple[float, float, float]:
    """Trimmed mean and its 95 % interval (Tukey-McLaughlin), NaNs dropped.

    ``cut`` of the values go at each end (``floor(cut * n)``); the interval uses
    the Winsorised standard deviation and Student's t with ``n - 2g - 1``
    degrees of freedom. One value (or nothing left to spread) gives a
    zero-width interval; no values give NaNs.

    Returns:
        ``(trimmed_mean, low, high)``.
    """
    from scipy import stats

    x = sorted(float(v) for v in xs if v is not None and not math.isnan(float(v)))
    n = len(x)
    if n == 0:
        return math.nan, math.nan, math.nan
    g = int(math.floor(cut * n))
    kept = x[g:n - g]
    tm = sum(kept) / len(kept)
    if n - 2 * g < 2:
        return tm, tm, tm
    wins = [x[g]] * g + kept + [x[n - g - 1]] * g
    mw = sum(wins) / n
    sw = math.sqrt(sum((v - mw) ** 2 for v in wins) / (n - 1))
    se = sw / ((1 - 2 * cut) * math.sqrt(n)) if g > 0 else sw / math.sqrt(n)
    t = float(stats.t.ppf(0.975, n - 2 * g - 1))
    return tm, tm - t * se, tm + t * se


def trimmed_interval(xs: Iterable[float], cut: float = 0.2, nonnegative: bool = True
                     ) -> dict[str, float]:
    """:func:`trimmed_mean_ci` as a table cell; ``nonnegative`` clips the low end at 0
    (times, joules and bytes cannot be negative)."""
    tm, lo, hi = trimmed_mean_ci(xs, cut)
    return interval(tm, max(lo, 0.0) if nonnegative and not math.isnan(lo) else lo, hi)


def render_cell(c: Cell) -> str:
    """One table cell as Markdown text (see the module docstring for the rules)."""
    if _is_interval(c):
        return f"{fmt_number(c['value'])} [{fmt_number(c['low'])}, {fmt_number(c['high'])}]"
    if isinstance(c, str):
        return c.replace("|", "\\|").replace("\n", " ")
    return fmt_number(c)


def _round(x: Any) -> Any:
    """Floats to 6 significant digits, NaN/inf to None (JSON has neither), recursively."""
    if isinstance(x, bool) or x is None or isinstance(x, (int, str)):
        return x
    if isinstance(x, float) or hasattr(x, "item"):
        try:
            v = float(x)
        except (TypeError, ValueError):
            return str(x)
        if not math.isfinite(v):
            return None
        return float(f"{v:.{_SIG_DIGITS}g}")
    if isinstance(x, Mapping):
        return {str(k): _round(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_round(v) for v in x]
    return str(x)


@dataclass(frozen=True)
class Table:
    """A table of a recorded run.

    Args:
        columns: Column headers (name units and provenance in them, e.g.
            ``"energy J (ESTIMATED)"``).
        rows: Rows of cells, each as long as ``columns``.

    Raises:
        ValueError: when a row's length differs from the number of columns.
    """

    columns: Sequence[str]
    rows: Sequence[Sequence[Cell]]

    def __post_init__(self) -> None:
        object.__setattr__(self, "columns", tuple(str(c) for c in self.columns))
        rows = tuple(tuple(_round(c) for c in r) for r in self.rows)
        for i, r in enumerate(rows):
            if len(r) != len(self.columns):
                raise ValueError(f"every row needs {len(self.columns)} cells (one per column), "
                                 f"row {i} has {len(r)}: {list(r)}")
        object.__setattr__(self, "rows", rows)

    def to_dict(self) -> dict[str, Any]:
        return {"columns": list(self.columns), "rows": [list(r) for r in self.rows]}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Table:
        return cls(d["columns"], d["rows"])


def render_table(table: Table) -> str:
    """The Markdown of a table (header, ``|---|`` rule, one line per row), no trailing newline."""
    lines = ["| " + " | ".join(render_cell(c) for c in table.columns) + " |",
             "|" + "|".join("---" for _ in table.columns) + "|"]
    lines += ["| " + " | ".join(render_cell(c) for c in r) + " |" for r in table.rows]
    return "\n".join(lines)


@dataclass(frozen=True)
class RecordedRun:
    """A recorded run as read back from ``summary.json`` (see the module docstring)."""

    script: str
    command: str
    date: str
    git_commit: str
    git_dirty: bool
    versions: dict[str, str]
    machine: str
    energy: dict[str, Any] | None
    tables: dict[str, Table]
    notes: list[str] = field(default_factory=list)
    facts: dict[str, Any] = field(default_factory=dict)
    path: Path | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"script": self.script, "command": self.command, "date": self.date,
                "git_commit": self.git_commit, "git_dirty": self.git_dirty,
                "versions": dict(self.versions), "machine": self.machine,
                "energy": self.energy,
                "tables": {k: t.to_dict() for k, t in self.tables.items()},
                "notes": list(self.notes), "facts": _round(self.facts)}

    def to_markdown(self, title: str = "") -> str:
        """``summary.md``: provenance on top, then each table under ``### <id>``."""
        e = self.energy
        if e is None:
            energy = "none involved"
        else:
            energy = (f"{'MEASURED' if e.get('measured') else 'ESTIMATED'} by meter "
                      f"`{e.get('meter', '?')}`" + (f": {e['note']}" if e.get("note") else ""))
        vers = ", ".join(f"{k} {v}" for k, v in self.versions.items())
        lines = [f"# {title or self.script}", "",
                 f"- command: `{self.command}`",
                 f"- date: {self.date}",
                 f"- git commit: {self.git_commit}"
                 + (" (with uncommitted changes)" if self.git_dirty else ""),
                 f"- machine: {self.machine}",
                 f"- versions: {vers}",
                 f"- energy: {energy}"]
        lines += [f"- note: {n}" for n in self.notes]
        for tid, t in self.tables.items():
            lines += ["", f"### {tid}", "", render_table(t)]
        return "\n".join(lines) + "\n"


def git_commit(where: str | Path | None = None) -> tuple[str, bool]:
    """``(sha, dirty)`` of the git checkout holding ``where`` (``("unknown", False)`` outside one).

    ``dirty`` is true when tracked files outside the doc pages and recorded runs
    have uncommitted changes: the numbers then come from code that differs from ``sha``.
    """
    cwd = Path(where) if where is not None else Path(__file__).resolve().parent
    if cwd.is_file():
        cwd = cwd.parent
    try:
        sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True,
                             text=True, check=True, timeout=10).stdout.strip()
        # Pages and recorded runs under docs/ do not change the numbers a run produces.
        status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--",
                                 ":/", ":(exclude,top)docs/*.md", ":(exclude,top)docs/results"],
                                cwd=cwd, capture_output=True, text=True, check=True,
                                timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return "unknown", False
    return sha, bool(status.strip())


def library_versions(extra: Iterable[str] = ()) -> dict[str, str]:
    """``python`` and every installed library of :data:`DEFAULT_LIBRARIES` and ``extra``."""
    out = {"python": platform.python_version()}
    for name in (*DEFAULT_LIBRARIES, *extra):
        if name in out:
            continue
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return out


#: The libraries a dataframe study's figures depend on, listed in every dataframe summary.
DATAFRAME_LIBRARIES = ("pandas", "polars", "dask", "pyarrow", "torch")
#: The seed material gives no library versions for the dataframe study; a summary says so
#: beside this run's instead of leaving the column out.
_STUDY_VERSIONS_UNKNOWN = "not given in the study material available here"


def versions_table(libraries: Sequence[str] = DATAFRAME_LIBRARIES,
                   study: Mapping[str, str] | None = None) -> Table:
    """One row per library: its version in this run beside the study's.

    Args:
        libraries: Package names (distribution names, as ``importlib.metadata`` knows them).
        study: The study's version per library, where the study gives one.

    Returns:
        A ``library | this run | study`` table; ``not installed`` where a library is
        missing here, a sentence saying the version is not given where the study is silent.
    """
    here = library_versions(libraries)
    study = dict(study or {})
    rows = [[lib, here.get(lib, "not installed"), study.get(lib, _STUDY_VERSIONS_UNKNOWN)]
            for lib in libraries]
    return Table(["library", "this run", "study"], rows)


def machine_line() -> str:
    """CPU model, logical cores, RAM and GPUs of this machine, in one line."""
    from ecopt.host import host_facts

    h = host_facts()
    gpus = h.get("gpus") or []
    ram = h.get("ram_gb")
    return (f"{h.get('cpu_model') or '?'}, {h.get('cpu_count') or '?'} cores, "
            f"{ram if ram is not None else '?'} GiB RAM, "
            f"GPU: {', '.join(map(str, gpus)) if gpus else 'none'}"
            + ("" if h.get("rapl") else ", no RAPL"))


def estimated_energy(note: str = "", meter: str = "estimate") -> dict[str, Any]:
    """The ``energy`` entry of a run whose joules come from the CPU-time estimate."""
    from ecopt.meters.estimate import DEFAULT_CPU_W_PER_CORE, DEFAULT_RAM_W_PER_GB

    base = (f"ESTIMATED, not measured: CPU seconds x {DEFAULT_CPU_W_PER_CORE:g} W per busy "
            f"core + resident GB x {DEFAULT_RAM_W_PER_GB:g} W/GB; no hardware counter was "
            "read, so joules rank configurations by CPU time")
    return {"meter": meter, "measured": False, "note": base + (f". {note}" if note else "")}


def command_line(script: str, argv: Sequence[str] | None = None) -> str:
    """The shell command that reproduces this run (``python <script> <args>``)."""
    args = list(sys.argv[1:] if argv is None else argv)
    return " ".join(["python", script, *map(shlex.quote, args)])


def results_dir(script_stem: str, tag: str | None = None, date: str | None = None,
                root: str | Path = RESULTS_ROOT) -> Path:
    """``<root>/<script_stem>/<YYYY-MM-DD>[-<tag>]`` (today's UTC date by default)."""
    day = date or _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d")
    name = f"{day}-{tag}" if tag else day
    if not _DATE_TAG.match(name):
        raise ValueError(f"a result folder is named YYYY-MM-DD[-tag] (tag: letters, digits, "
                         f"'_', '.', '-'), got {name!r}")
    return Path(root) / script_stem / name


def add_record_args(parser: Any, script_stem: str) -> None:
    """``--report-only``, ``--record [TAG]`` and ``--note`` on a benchmark's parser (an
    :class:`argparse.ArgumentParser`), as every recording benchmark spells them."""
    parser.add_argument("--report-only", action="store_true", help="only rebuild the report")
    parser.add_argument("--record", nargs="?", const="", default=None, metavar="TAG",
                        help=f"also write docs/results/{script_stem}/<date>[-TAG]")
    parser.add_argument("--note", action="append", default=[], help="a caveat to record")


def record_dirs(out: str | Path, script_stem: str, record: str | None) -> list[Path]:
    """Where a script writes its summary: ``out``, plus ``docs/results/<stem>/<date>[-<tag>]``
    when ``record`` is given (``""`` for no tag)."""
    dirs = [Path(out)]
    if record is not None:
        dirs.append(results_dir(script_stem, tag=record or None))
    return dirs


def write_run(out_dir: str | Path, *, script: str, command: str, tables: Mapping[str, Table],
              energy: Mapping[str, Any] | None, title: str = "", notes: Sequence[str] = (),
              facts: Mapping[str, Any] | None = None, date: str | None = None,
              extra_libraries: Iterable[str] = (), git: tuple[str, bool] | None = None
              ) -> RecordedRun:
    """Write ``summary.json`` and ``summary.md`` of a run into ``out_dir``.

    The git commit, library versions and machine are filled in here.

    Args:
        out_dir: The run's folder (created); for a docs run, :func:`results_dir`.
        script: The script's path from the repository root (``benchmarks/plumber.py``).
        command: The exact command (see :func:`command_line`).
        tables: ``table_id -> Table``; ids use letters, digits, ``_ . -``.
        energy: ``{"meter", "measured", "note"}`` (see :func:`estimated_energy`),
            or ``None`` when the run involves no energy.
        title: Heading of ``summary.md``.
        notes: Caveats shown with the provenance.
        facts: Other facts worth keeping (small; floats are rounded).
        date: ``YYYY-MM-DD`` (default: today, UTC).
        extra_libraries: Package names whose versions matter too.
        git: ``(sha, dirty)`` from :func:`git_commit` taken when the run started
            (default: taken now; files edited during a long run would then
            count as the run's).

    Returns:
        The :class:`RecordedRun` as written.

    Raises:
        ValueError: for a bad table id, or an ``energy`` without ``meter`` and ``measured``.
    """
    for tid in tables:
        if not _TABLE_ID.match(tid):
            raise ValueError(f"table ids use letters, digits, '_', '.', '-', got {tid!r}")
    if energy is not None and not {"meter", "measured"} <= set(energy):
        raise ValueError(f"energy needs 'meter' and 'measured' keys (or None), got {dict(energy)}")
    sha, dirty = git if git is not None else git_commit(Path.cwd())
    run = RecordedRun(
        script=script, command=command,
        date=date or _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d"),
        git_commit=sha, git_dirty=dirty, versions=library_versions(extra_libraries),
        machine=machine_line(), energy=dict(energy) if energy is not None else None,
        tables=dict(tables), notes=list(notes), facts=dict(facts or {}), path=Path(out_dir))
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "summary.json").write_text(
        json.dumps(run.to_dict(), indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    (out / "summary.md").write_text(run.to_markdown(title), encoding="utf-8")
    return run


def rewrite_run(run: RecordedRun, *, tables: Mapping[str, Table] | None = None,
                facts: Mapping[str, Any] | None = None, note: str = "") -> RecordedRun:
    """Rewrite a recorded run's derived cells in place, keeping its provenance.

    For cells computed from the run's own committed cells (a verdict column judged
    again by a corrected rule): the command, date, commit, versions and machine stay
    the run's; ``note`` says what was re-derived and by which code. Nothing is re-run.

    Args:
        run: The run as :func:`read_run` gave it (its ``path`` is where it is written).
        tables: Tables that replace the run's tables of the same ids.
        facts: Facts that replace the run's facts of the same keys.
        note: Appended to the run's notes (once).

    Raises:
        ValueError: when the run has no path, or a table id is not the run's.
    """
    if run.path is None:
        raise ValueError("a run read with read_run (with a path) must be given, got path=None")
    unknown = set(tables or {}) - set(run.tables)
    if unknown:
        raise ValueError(f"tables must be the run's own, got unknown ids {sorted(unknown)}")
    out = run.path if run.path.is_dir() else run.path.parent
    md = out / "summary.md"
    first = md.read_text(encoding="utf-8").splitlines()[0] if md.exists() else ""
    title = first[2:] if first.startswith("# ") else ""
    notes = list(run.notes) + ([note] if note and note not in run.notes else [])
    new = RecordedRun(script=run.script, command=run.command, date=run.date,
                      git_commit=run.git_commit, git_dirty=run.git_dirty,
                      versions=dict(run.versions), machine=run.machine, energy=run.energy,
                      tables={**run.tables, **dict(tables or {})}, notes=notes,
                      facts={**run.facts, **dict(facts or {})}, path=out)
    (out / "summary.json").write_text(
        json.dumps(new.to_dict(), indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    md.write_text(new.to_markdown(title), encoding="utf-8")
    return new


def read_run(path: str | Path) -> RecordedRun:
    """A recorded run from its folder or its ``summary.json``.

    Raises:
        FileNotFoundError: when there is no ``summary.json``.
        ValueError: when the file lacks a required key or a table is malformed.
    """
    p = Path(path)
    if p.is_dir() or p.suffix != ".json":
        p = p / "summary.json"
    if not p.exists():
        raise FileNotFoundError(f"no recorded run at {str(p)!r} (expected summary.json)")
    d = json.loads(p.read_text(encoding="utf-8"))
    need = ("script", "command", "date", "git_commit", "versions", "machine", "energy", "tables")
    missing = [k for k in need if k not in d]
    if missing:
        raise ValueError(f"{str(p)!r} is not a recorded run: keys {missing} are missing")
    try:
        tables = {k: Table.from_dict(v) for k, v in d["tables"].items()}
    except (KeyError, TypeError) as exc:
        raise ValueError(f"{str(p)!r}: a table needs 'columns' and 'rows' ({exc})") from exc
    return RecordedRun(script=d["script"], command=d["command"], date=d["date"],
                       git_commit=d["git_commit"], git_dirty=bool(d.get("git_dirty", False)),
                       versions=dict(d["versions"]), machine=d["machine"], energy=d["energy"],
                       tables=tables, notes=list(d.get("notes", [])),
                       facts=dict(d.get("facts", {})), path=p.parent)


# ---- doc tables ---------------------------------------------------------------------------

_OPEN = re.compile(r"<!-- table: (?P<ref>\S+) -->")
_CLOSE = "<!-- /table -->"
_REF = re.compile(r"^(?P<stem>[A-Za-z0-9_.-]+)/(?P<tag>[A-Za-z0-9_.-]+)#(?P<table>[A-Za-z0-9_.-]+)$")


@dataclass(frozen=True)
class MarkerProblem:
    """A doc-table block that is wrong: out of date, or pointing at nothing."""

    doc: str
    line: int
    ref: str
    message: str

    def __str__(self) -> str:
        return f"{self.doc}:{self.line}: table {self.ref}: {self.message}"


def marker_block(ref: str, results_root: str | Path = RESULTS_ROOT) -> str:
    """The block for ``ref`` (``stem/date-tag#table``), markers included, ready to paste.

    Raises:
        ValueError: for a malformed ref or a missing table; FileNotFoundError for a missing run.
    """
    return f"<!-- table: {ref} -->\n{_expected(ref, Path(results_root), {})}\n{_CLOSE}"


def _expected(ref: str, root: Path, cache: dict[Path, RecordedRun]) -> str:
    m = _REF.match(ref)
    if not m:
        raise ValueError(f"a table reference is <script-stem>/<date-tag>#<table_id>, got {ref!r}")
    folder = root / m["stem"] / m["tag"]
    if folder not in cache:
        cache[folder] = read_run(folder)
    run = cache[folder]
    if m["table"] not in run.tables:
        raise ValueError(f"{str(folder / 'summary.json')!r} has no table {m['table']!r} "
                         f"(tables: {sorted(run.tables)})")
    return render_table(run.tables[m["table"]])


def render_markers(text: str, results_root: str | Path = RESULTS_ROOT, doc: str = "<doc>"
                   ) -> tuple[str, list[MarkerProblem]]:
    """Rewrite every table block of a page from its recorded run.

    Returns:
        ``(new_text, problems)``: the page with each resolvable block regenerated,
        and one :class:`MarkerProblem` per block that differed (message
        ``"differs from the recorded run"``), could not be resolved, or was not closed.
    """
    root = Path(results_root)
    cache: dict[Path, RecordedRun] = {}
    out: list[str] = []
    problems: list[MarkerProblem] = []
    pos = 0
    for m in _OPEN.finditer(text):
        if m.start() < pos:  # inside a block already consumed (an unclosed one)
            continue
        line = text.count("\n", 0, m.start()) + 1
        ref = m["ref"]
        end = text.find(_CLOSE, m.end())
        nxt = _OPEN.search(text, m.end())
        if end < 0 or (nxt is not None and nxt.start() < end):
            problems.append(MarkerProblem(doc, line, ref, f"no '{_CLOSE}' closes this block"))
            continue
        body = text[m.end():end]
        out.append(text[pos:m.end()])
        try:
            want = "\n" + _expected(ref, root, cache) + "\n"
        except (ValueError, FileNotFoundError, json.JSONDecodeError) as exc:
            problems.append(MarkerProblem(doc, line, ref, str(exc)))
            out.append(body)
        else:
            if body != want:
                problems.append(MarkerProblem(doc, line, ref, "differs from the recorded run"))
            out.append(want)
        pos = end
    out.append(text[pos:])
    return "".join(out), problems


def _docs(docs_dir: Path) -> list[Path]:
    return sorted(p for p in docs_dir.rglob("*.md") if RESULTS_ROOT.name not in p.parts)


def check_docs(docs_dir: str | Path = "docs", results_root: str | Path | None = None
               ) -> list[MarkerProblem]:
    """Every problem of every table block in ``docs_dir/**/*.md`` (recorded runs excluded)."""
    d = Path(docs_dir)
    root = Path(results_root) if results_root is not None else d / RESULTS_ROOT.name
    problems: list[MarkerProblem] = []
    for page in _docs(d):
        _, probs = render_markers(page.read_text(encoding="utf-8"), root, str(page))
        problems += probs
    return problems


def update_docs(docs_dir: str | Path = "docs", results_root: str | Path | None = None
                ) -> tuple[list[Path], list[MarkerProblem]]:
    """Rewrite the table blocks of every page; returns (pages changed, unresolved problems)."""
    d = Path(docs_dir)
    root = Path(results_root) if results_root is not None else d / RESULTS_ROOT.name
    changed: list[Path] = []
    left: list[MarkerProblem] = []
    for page in _docs(d):
        text = page.read_text(encoding="utf-8")
        new, probs = render_markers(text, root, str(page))
        left += [p for p in probs if p.message != "differs from the recorded run"]
        if new != text:
            page.write_text(new, encoding="utf-8")
            changed.append(page)
    return changed, left


def _norm_table(lines: Sequence[str]) -> tuple[str, ...]:
    return tuple(" ".join(c.strip() for c in ln.strip().strip("|").split("|")) for ln in lines)


def adopt_tables(text: str, results_root: str | Path = RESULTS_ROOT
                 ) -> tuple[str, list[str], list[str]]:
    """Wrap hand-written tables that equal a recorded table in markers.

    Every Markdown table of the page outside a marker block is compared (cell
    by cell, whitespace ignored) with every table of every recorded run under
    ``results_root``; an exact match is replaced by its marker block.

    Returns:
        ``(new_text, adopted, near)``: the page, one ``"line N: ref"`` per
        table wrapped, and one ``"line N: same columns as ref, rows differ"``
        per table whose header matches a recorded table but whose rows do not
        (regenerate or re-record those by hand).
    """
    root = Path(results_root)
    index: dict[tuple[str, ...], str] = {}
    headers: dict[tuple[str, ...], list[str]] = {}
    for summary in sorted(root.glob("*/*/summary.json")):
        try:
            run = read_run(summary)
        except (ValueError, json.JSONDecodeError):
            continue
        ref0 = f"{summary.parent.parent.name}/{summary.parent.name}"
        for tid, t in run.tables.items():
            lines = render_table(t).splitlines()
            index.setdefault(_norm_table(lines), f"{ref0}#{tid}")
            headers.setdefault(_norm_table(lines[:1]), []).append(f"{ref0}#{tid}")
    lines = text.split("\n")
    out: list[str] = []
    adopted: list[str] = []
    near: list[str] = []
    inside = False
    i = 0
    while i < len(lines):
        ln = lines[i]
        if _OPEN.search(ln):
            inside = True
        if ln.strip() == _CLOSE:
            inside = False
        if inside or not ln.lstrip().startswith("|"):
            out.append(ln)
            i += 1
            continue
        j = i
        while j < len(lines) and lines[j].lstrip().startswith("|"):
            j += 1
        block = lines[i:j]
        key = _norm_table(block)
        if key in index:
            out += [f"<!-- table: {index[key]} -->", *block, _CLOSE]
            adopted.append(f"line {i + 1}: {index[key]}")
        else:
            if _norm_table(block[:1]) in headers:
                near.append(f"line {i + 1}: same columns as "
                            f"{', '.join(headers[_norm_table(block[:1])])}, rows differ")
            out += block
        i = j
    return "\n".join(out), adopted, near
