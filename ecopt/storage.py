"""The trial log: ``study.json`` + ``trials.jsonl`` (+ ``running.jsonl``) in a directory.

* ``study.json``: the spec (space, objectives, constraints, sampler and meter
  settings, seed, ecopt version, host facts). Written atomically (temp file,
  fsync, rename).
* ``trials.jsonl``: one JSON object per finished trial, appended and fsynced
  when it ends. A torn last line (crash mid-write) is skipped with a warning.
* ``running.jsonl``: one line per trial when it starts. On re-opening, every
  started trial without a finished record is recorded as failed
  (``Interrupted``), so a killed study loses nothing and numbering continues.
* ``.lock``: an exclusive ``flock`` held by the one writer.

Everything is plain JSON: reading a study never unpickles or runs anything.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ecopt.errors import NotAStudyError, StudyLockedError
from ecopt.trial import Intermediate, TrialRecord

__all__ = ["StudyStorage", "read_jsonl", "STUDY_FILE", "TRIALS_FILE", "RUNNING_FILE"]

STUDY_FILE = "study.json"
TRIALS_FILE = "trials.jsonl"
RUNNING_FILE = "running.jsonl"
LOCK_FILE = ".lock"
FORMAT = "ecopt-study"
FORMAT_VERSION = 1


def _json_default(obj: Any) -> Any:
    # numpy scalars and similar reach the log through user metrics.
    if hasattr(obj, "item"):
        return obj.item()
    if isinstance(obj, (set, tuple)):
        return list(obj)
    return str(obj)


def _sanitize(obj: Any) -> Any:
    """Replace non-finite floats by strings so the file stays strict JSON."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return str(obj)
    if isinstance(obj, dict):
        return {k: _sanitize(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_sanitize(v) for v in obj]
    return obj


def dumps(obj: Any) -> str:
    """One line of strict JSON."""
    return json.dumps(_sanitize(obj), default=_json_default, allow_nan=False,
                      separators=(",", ":"), ensure_ascii=False)


def read_jsonl(path: Path) -> Iterator[dict[str, Any]]:
    """Yield each JSON object of a ``.jsonl`` file; skip a torn last line with a warning.

    A corrupt line that is *not* the last one is also skipped with a warning
    naming its line number (the log is never fatal to read).
    """
    if not path.exists():
        return
    with open(path, "rb") as f:
        data = f.read()
    lines = data.split(b"\n")
    last = len(lines) - 1
    while last >= 0 and not lines[last].strip():
        last -= 1
    for i, raw in enumerate(lines):
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw.decode("utf-8"))
            if not isinstance(obj, dict):
                raise ValueError("not a JSON object")
        except (ValueError, UnicodeDecodeError):
            where = "torn last line" if i == last else "corrupt line"
            warnings.warn(f"{path}: skipping {where} {i + 1} (not valid JSON)", RuntimeWarning,
                          stacklevel=2)
            continue
        yield obj


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # pragma: no cover - e.g. Windows
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover
        pass
    finally:
        os.close(fd)


class StudyStorage:
    """A study directory.

    Args:
        path: The directory (created when writing and missing).
        writable: Take the writer's lock. Only one process may hold it.

    Raises:
        StudyLockedError: when another process already writes to ``path``.
    """

    def __init__(self, path: str | os.PathLike[str], writable: bool = True) -> None:
        self.path = Path(path)
        self.writable = writable
        self._lock_fd: int | None = None
        if writable:
            self.path.mkdir(parents=True, exist_ok=True)
            self._acquire_lock()

    # -- locking -------------------------------------------------------------
    def _acquire_lock(self) -> None:
        import fcntl

        fd = os.open(self.path / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            try:
                holder = (self.path / LOCK_FILE).read_text().strip()
            except OSError:
                holder = "?"
            raise StudyLockedError(
                f"study directory {str(self.path)!r} is open for writing in another process "
                f"({holder or 'unknown pid'}); wait for it to finish, or open it read-only "
                "with ecopt.load_study()"
            ) from None
        os.ftruncate(fd, 0)
        os.write(fd, f"pid {os.getpid()}\n".encode())
        self._lock_fd = fd

    def close(self) -> None:
        """Release the writer's lock (safe to call twice)."""
        if self._lock_fd is not None:
            import fcntl

            try:
                fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
            finally:
                os.close(self._lock_fd)
                self._lock_fd = None

    def __del__(self) -> None:  # pragma: no cover - best effort
        try:
            self.close()
        except Exception:
            pass

    # -- study.json ----------------------------------------------------------
    def exists(self) -> bool:
        """Whether ``study.json`` is there."""
        return (self.path / STUDY_FILE).is_file()

    def read_spec(self) -> dict[str, Any]:
        """The parsed ``study.json``.

        Raises:
            NotAStudyError: when the directory holds no readable ecopt study.
        """
        f = self.path / STUDY_FILE
        if not self.path.is_dir():
            raise NotAStudyError(f"{str(self.path)!r} is not a directory")
        if not f.is_file():
            raise NotAStudyError(
                f"{str(self.path)!r} is not an ecopt study: it has no {STUDY_FILE}"
            )
        try:
            spec = json.loads(f.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise NotAStudyError(f"{str(f)!r} is not valid JSON: {exc}") from None
        if not isinstance(spec, dict) or spec.get("format") != FORMAT:
            raise NotAStudyError(f"{str(f)!r} is not an ecopt study file (format != {FORMAT!r})")
        return spec

    def write_spec(self, spec: dict[str, Any]) -> None:
        """Atomically write ``study.json``."""
        self._require_writable()
        spec = {"format": FORMAT, "format_version": FORMAT_VERSION, **spec}
        fd, tmp = tempfile.mkstemp(dir=self.path, prefix=".study.", suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(_sanitize(spec), f, indent=2, default=_json_default, ensure_ascii=False)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path / STUDY_FILE)
        _fsync_dir(self.path)

    # -- trials --------------------------------------------------------------
    def _require_writable(self) -> None:
        if not self.writable:
            raise PermissionError(f"study {str(self.path)!r} was opened read-only")

    def _append(self, name: str, obj: dict[str, Any]) -> None:
        self._require_writable()
        line = (dumps(obj) + "\n").encode("utf-8")
        path = self.path / name
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            # A torn tail from a crash would glue onto our line: start a new one.
            if os.fstat(fd).st_size > 0:
                with open(path, "rb") as r:
                    r.seek(-1, os.SEEK_END)
                    if r.read(1) != b"\n":
                        line = b"\n" + line
            os.write(fd, line)
            os.fsync(fd)
        finally:
            os.close(fd)

    def append_record(self, record: TrialRecord) -> None:
        """Append one finished trial and fsync."""
        self._append(TRIALS_FILE, record.to_dict())

    def mark_running(self, number: int, params: dict[str, Any], proposed_by: str,
                     proposal: dict[str, Any], started_at: str) -> None:
        """Note that a trial started (so a crash cannot lose it)."""
        self._append(RUNNING_FILE, {"number": number, "params": params, "proposed_by": proposed_by,
                                    "proposal": proposal, "started_at": started_at})

    def mark_report(self, number: int, report: Intermediate, phases: dict[str, Any]) -> None:
        """Note a running trial's intermediate report (and its phases so far)."""
        self._append(RUNNING_FILE, {"number": number, "report": report.to_dict(),
                                    "phases": phases})

    def read_records(self) -> list[TrialRecord]:
        """Every finished trial, in file order; bad lines skipped with a warning."""
        out: list[TrialRecord] = []
        seen: set[int] = set()
        for i, obj in enumerate(read_jsonl(self.path / TRIALS_FILE)):
            try:
                rec = TrialRecord.from_dict(obj)
            except (KeyError, TypeError, ValueError) as exc:
                warnings.warn(f"{self.path / TRIALS_FILE}: skipping record {i + 1}: {exc}",
                              RuntimeWarning, stacklevel=2)
                continue
            if rec.number in seen:
                warnings.warn(f"{self.path / TRIALS_FILE}: duplicate trial number {rec.number}; "
                              "keeping the first", RuntimeWarning, stacklevel=2)
                continue
            seen.add(rec.number)
            out.append(rec)
        return out

    def read_running(self) -> list[dict[str, Any]]:
        """Every trial that was started (from ``running.jsonl``)."""
        return list(read_jsonl(self.path / RUNNING_FILE))
