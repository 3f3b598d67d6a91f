"""The trial log: ``study.json`` + ``trials.jsonl`` (+ ``running.jsonl``) in a directory.

* ``study.json``: the spec (space, objectives, constraints, sampler and meter
  settings, seed, ecopt version, host facts). Written atomically (temp file,
  fsync, rename).
* ``trials.jsonl``: one JSON object per finished trial, appended and fsynced
  when it ends. A torn last line (crash mid-write) is skipped with a warning.
* ``running.jsonl``: one line per trial when it starts, one per intermediate
  report, and a copy of the spec each time ``study.json`` is written (so
  ``ecopt repair`` can rebuild a lost ``study.json``). On re-opening, every
  started trial without a finished record is recorded as failed
  (``Interrupted``), so a killed study loses nothing and numbering continues.
* The writer holds an exclusive ``flock`` on the directory itself (deleting a
  file cannot let a second writer in); ``.lock`` names the writer's pid.

Guarantees: an append writes every byte and fsyncs before it returns; a short
write or a full disk raises :class:`~ecopt.errors.StorageError` after cutting
the partial line off again, so ``tell()`` never returns for a trial that is not
on disk. Every line read is checked against the record schema; one that does
not fit is skipped with a warning, like a torn line.

Everything is plain JSON: reading a study never unpickles or runs anything.
"""

from __future__ import annotations

import contextlib
import errno
import gc
import json
import math
import os
import tempfile
import threading
import warnings
import weakref
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from ecopt._nesting import MAX_LINE_DEPTH, nesting_depth
from ecopt.errors import NotAStudyError, StorageError, StudyLockedError
from ecopt.record import Intermediate, TrialRecord

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
    naming its line number (the log is never fatal to read), and so is a valid
    line nested deeper than :data:`~ecopt._nesting.MAX_LINE_DEPTH` levels (the
    decoder, and every walk over such a value, would exhaust the recursion
    limit).
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
        except RecursionError:  # the decoder's own depth limit, near the interpreter's
            obj = None
        if obj is None or nesting_depth(obj, MAX_LINE_DEPTH) > MAX_LINE_DEPTH:
            warnings.warn(f"{path}: skipping line {i + 1} (JSON nested deeper than "
                          f"{MAX_LINE_DEPTH} levels)", RuntimeWarning, stacklevel=2)
            continue
        yield obj


@contextlib.contextmanager
def _no_gc() -> Iterator[None]:
    """Pause the cyclic garbage collector (it would scan every object read so far, again and
    again: reading 50,000 records took 1.9x longer with it, 71 against 37 µs per record)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _write_all(fd: int, data: bytes, path: Path) -> None:
    """Write every byte of ``data`` (looping over short writes) and fsync.

    Raises:
        OSError: from the write or the fsync; a write that makes no progress
            raises ``ENOSPC``.
    """
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        if n <= 0:
            raise OSError(errno.ENOSPC, f"no progress writing to {path} (disk full?)")
        view = view[n:]
    os.fsync(fd)


def _umask_mode(mode: int = 0o666) -> int:
    """``mode`` as the process's umask leaves it (what ``open()`` would create)."""
    mask = os.umask(0)
    os.umask(mask)
    return mode & ~mask


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


#: Writers open in this process: resolved directory -> its storage (for a clean handover).
_WRITERS: weakref.WeakValueDictionary[str, StudyStorage] = weakref.WeakValueDictionary()
_WRITERS_LOCK = threading.Lock()


class StudyStorage:
    """A study directory.

    Args:
        path: The directory (created when writing and missing).
        writable: Take the writer's lock. Only one process may hold it.
        on_handover: Called when a later writer in this same process takes the
            directory over (the owner stops writing).

    Raises:
        StudyLockedError: when another process already writes to ``path``, or a
            writer in this process cannot hand it over (it is busy).
    """

    def __init__(self, path: str | os.PathLike[str], writable: bool = True,
                 on_handover: Callable[[], bool] | None = None) -> None:
        self.path = Path(path)
        self.writable = writable
        self._lock_fd: int | None = None
        self._on_handover = on_handover
        self.handed_over = False
        if writable:
            self.path.mkdir(parents=True, exist_ok=True)
            self._acquire_lock()

    # -- locking -------------------------------------------------------------
    def _acquire_lock(self) -> None:
        import fcntl

        key = os.path.realpath(self.path)
        with _WRITERS_LOCK:
            old = _WRITERS.get(key)
            if old is not None and old._lock_fd is not None:
                # The same directory opened again in this process (a notebook cell
                # run twice): the earlier writer hands over, unless it is busy.
                if old._on_handover is None or not old._on_handover():
                    raise StudyLockedError(
                        f"study directory {str(self.path)!r} is open for writing by another "
                        "Study object in this process that is still running trials; let "
                        "its optimize() finish (or stop it) before opening the directory again")
                old.close()
                old.handed_over = True
            # The lock is on the directory itself: deleting .lock cannot let a
            # second writer in.
            fd = os.open(self.path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                os.close(fd)
                try:
                    holder = (self.path / LOCK_FILE).read_text().strip()
                except OSError:
                    holder = ""
                raise StudyLockedError(
                    f"study directory {str(self.path)!r} is open for writing in another process "
                    f"({holder or 'pid unknown'}); wait for it to finish, or open it read-only "
                    "with ecopt.load_study()"
                ) from None
            self._lock_fd = fd
            _WRITERS[key] = self
        try:  # who holds it, for the message above (informational only)
            info = os.open(self.path / LOCK_FILE, os.O_WRONLY | os.O_CREAT | os.O_TRUNC,
                           0o644)
            try:
                os.write(info, f"pid {os.getpid()}\n".encode())
            finally:
                os.close(info)
        except OSError:
            pass

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
            raise NotAStudyError(f"{str(self.path)!r} is not an ecopt study: it has no "
                                 f"{STUDY_FILE}{self._what_is_here()}")
        try:
            spec = json.loads(f.read_text(encoding="utf-8"))
        except (OSError, ValueError, RecursionError) as exc:
            raise NotAStudyError(f"{str(f)!r} is not valid JSON: {exc}") from None
        if nesting_depth(spec, MAX_LINE_DEPTH) > MAX_LINE_DEPTH:
            raise NotAStudyError(f"{str(f)!r} is not an ecopt study file (JSON nested deeper "
                                 f"than {MAX_LINE_DEPTH} levels); `ecopt repair` rebuilds it "
                                 "from the copy in running.jsonl")
        if not isinstance(spec, dict) or spec.get("format") != FORMAT:
            raise NotAStudyError(f"{str(f)!r} is not an ecopt study file (format != {FORMAT!r})")
        return spec

    def _what_is_here(self) -> str:
        """What a directory without ``study.json`` holds instead, as advice (or ``""``)."""
        if (self.path / RUNNING_FILE).is_file():
            return (f"; it holds a trial log, so {STUDY_FILE} was lost: `ecopt repair "
                    f"{self.path}` rebuilds it from the copy in {RUNNING_FILE}")
        if (self.path / TRIALS_FILE).is_file():  # no running.jsonl: no copy to repair from
            return (f"; it holds a trial log ({TRIALS_FILE}), so {STUDY_FILE} was lost, and "
                    f"{RUNNING_FILE}, whose copy of it `ecopt repair` uses, is missing too: "
                    f"restore {STUDY_FILE} (and {RUNNING_FILE}) from where the study was copied")
        try:
            inside = sorted(d.name for d in self.path.iterdir()
                            if d.is_dir() and (d / STUDY_FILE).is_file())
        except OSError:
            return ""
        if not inside:
            return ""
        shown = ", ".join(inside[:8]) + (f" and {len(inside) - 8} more" if len(inside) > 8 else "")
        return (f"; it is a folder of {len(inside)} "
                f"stud{'y' if len(inside) == 1 else 'ies'} ({shown}): name one of them, e.g. "
                f"{self.path / inside[0]}")

    def write_spec(self, spec: dict[str, Any]) -> None:
        """Atomically write ``study.json`` (and keep a copy in ``running.jsonl``).

        Raises:
            StorageError: when the file cannot be written (disk full...); the
                previous ``study.json`` is left as it was.
        """
        self._require_writable()
        spec = {"format": FORMAT, "format_version": FORMAT_VERSION, **spec}
        data = (json.dumps(_sanitize(spec), indent=2, default=_json_default,
                           ensure_ascii=False) + "\n").encode("utf-8")
        fd, tmp = tempfile.mkstemp(dir=self.path, prefix=".study.", suffix=".tmp")
        try:
            try:
                os.fchmod(fd, _umask_mode())  # mkstemp makes 0600; match the other files
                _write_all(fd, data, Path(tmp))
            finally:
                os.close(fd)
            os.replace(tmp, self.path / STUDY_FILE)
        except OSError as exc:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise StorageError(f"could not write {str(self.path / STUDY_FILE)!r}: {exc}; "
                               "free disk space (or fix permissions) and open the study "
                               "again") from exc
        _fsync_dir(self.path)
        self._append(RUNNING_FILE, {"spec": spec})

    # -- trials --------------------------------------------------------------
    def _require_writable(self) -> None:
        if not self.writable:
            raise PermissionError(f"study {str(self.path)!r} was opened read-only")

    def _append(self, name: str, obj: dict[str, Any]) -> None:
        """Append one line, every byte of it, and fsync.

        Raises:
            StorageError: the line could not be saved (disk full, I/O error);
                what was written of it is cut off again, so the file keeps
                only whole lines.
        """
        self._require_writable()
        if self.handed_over:
            raise StorageError(
                f"this Study object no longer writes to {str(self.path)!r}: a newer "
                "ecopt.Study(...) in this process opened the same directory; use that one")
        line = (dumps(obj) + "\n").encode("utf-8")
        path = self.path / name
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        except OSError as exc:
            raise StorageError(f"could not open {str(path)!r} to append: {exc}") from exc
        size = None
        try:
            size = os.fstat(fd).st_size
            # A torn tail from a crash would glue onto our line: start a new one.
            if size > 0:
                with open(path, "rb") as r:
                    r.seek(-1, os.SEEK_END)
                    if r.read(1) != b"\n":
                        line = b"\n" + line
            _write_all(fd, line, path)
        except OSError as exc:
            if size is not None:
                try:
                    os.ftruncate(fd, size)  # no half line left behind
                    os.fsync(fd)
                except OSError:
                    pass  # a reader skips a torn last line; the next append starts afresh
            raise StorageError(
                f"could not save a line to {str(path)!r}: {exc}; nothing was lost from the "
                "file, but this line is not on disk. Free disk space (or fix the device) and "
                "try again: re-open the study to resume") from exc
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
        """Every finished trial, in file order; bad lines skipped with a warning.

        A line that is valid JSON but not a trial record (wrong shape, a state
        that is not a finished one, wrong types) is skipped like a torn line.
        """
        with _no_gc():  # records hold no reference cycles: collecting while reading is waste
            return self._read_records()

    def _read_records(self) -> list[TrialRecord]:
        out: list[TrialRecord] = []
        seen: set[int] = set()
        for i, obj in enumerate(read_jsonl(self.path / TRIALS_FILE)):
            try:
                rec = TrialRecord.from_dict(obj)
            except Exception as exc:  # noqa: BLE001 - no line can make a study unreadable
                warnings.warn(f"{self.path / TRIALS_FILE}: skipping record {i + 1} (not a "
                              f"valid trial record: {type(exc).__name__}: {exc})",
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
        """Every line of ``running.jsonl``: trial starts, intermediate reports, spec copies."""
        return list(read_jsonl(self.path / RUNNING_FILE))

    def has_trials(self) -> bool:
        """Whether the directory holds any trial line (finished or started)."""
        if (self.path / TRIALS_FILE).is_file() and (self.path / TRIALS_FILE).stat().st_size:
            return True
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return any("number" in line for line in read_jsonl(self.path / RUNNING_FILE))

    def last_spec_copy(self) -> dict[str, Any] | None:
        """The latest copy of ``study.json`` kept in ``running.jsonl`` (for ``ecopt repair``)."""
        spec = None
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for line in read_jsonl(self.path / RUNNING_FILE):
                if isinstance(line.get("spec"), dict) and line["spec"].get("format") == FORMAT:
                    spec = line["spec"]
        return spec

    def repair_spec(self) -> dict[str, Any]:
        """Rebuild a missing ``study.json`` from its copy in ``running.jsonl``.

        Returns:
            The restored spec.

        Raises:
            NotAStudyError: when ``study.json`` exists, or no copy is found.
        """
        self._require_writable()
        if self.exists():
            raise NotAStudyError(f"{str(self.path / STUDY_FILE)!r} exists; nothing to repair")
        spec = self.last_spec_copy()
        if spec is None:
            raise NotAStudyError(
                f"{str(self.path)!r} keeps no copy of its study.json (written by ecopt older "
                "than 0.2?); restore study.json from a backup, or start afresh with "
                "ecopt.Study(..., overwrite=True) (the old files are kept aside)")
        spec = {k: v for k, v in spec.items() if k not in ("format", "format_version")}
        self.write_spec(spec)
        return spec


def repair_main(args: Any) -> int:
    """``ecopt repair RUN_DIR``: rebuild a missing ``study.json`` from its copy in the log."""
    st = StudyStorage(args.run_dir, writable=True)
    try:
        spec = st.repair_spec()
    finally:
        st.close()
    if getattr(args, "json", False):
        from ecopt.fmt import json_text

        print(json_text({"restored": str(st.path / STUDY_FILE), "name": spec.get("name"),
                         "created_at": spec.get("created_at")}))
        return 0
    print(f"restored {st.path / STUDY_FILE} (study {spec.get('name', '?')!r}, created "
          f"{spec.get('created_at', '?')}); open it with ecopt.Study(..., storage=...) to resume")
    return 0
