"""Worker processes that must not outlive their driver, and a record a reopen checks.

A worker process started for a study's trials

* dies with its driver: on Linux the kernel sends it ``SIGKILL`` when the
  driver's thread that started it ends (``PR_SET_PDEATHSIG``), and on every
  platform a watcher thread ends it within about a second once its parent
  process is gone;
* is listed in ``<study dir>/.workers`` (pid and the process's start time, so
  a reused pid is never mistaken for it). Opening the study for writing waits
  a few seconds for listed workers that still run, then refuses with
  :class:`~ecopt.StudyLockedError` naming them: two trials never share a GPU
  because a killed driver left one running.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

__all__ = ["die_with_parent", "WORKERS_FILE", "record_worker", "live_workers", "wait_for_orphans"]

#: File in a study directory listing the worker processes started for it.
WORKERS_FILE = ".workers"


def die_with_parent(parent_pid: int, poll_s: float = 0.5) -> None:
    """Make this (worker) process end when ``parent_pid`` ends.

    Call first thing in the worker. Linux: ``prctl(PR_SET_PDEATHSIG, SIGKILL)``;
    everywhere: a daemon thread that exits the process once the parent is gone.
    """
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, int(signal.SIGKILL), 0, 0, 0)  # 1 = PR_SET_PDEATHSIG
    except Exception:  # noqa: BLE001 - not Linux: the watcher below does it
        pass
    if os.getppid() != parent_pid:  # the parent died before we got here
        os._exit(1)

    def watch() -> None:
        while True:
            time.sleep(poll_s)
            if os.getppid() != parent_pid:
                os._exit(1)

    threading.Thread(target=watch, name="ecopt-parent-watch", daemon=True).start()


def _start_ticks(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (Linux), or None."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # Field 22, counted after the parenthesised command name (which may hold spaces).
    fields = stat[stat.rfind(")") + 2:].split()
    return fields[19] if len(fields) > 19 else None


def record_worker(study_dir: Path, pid: int) -> None:
    """Append a worker to ``<study_dir>/.workers`` (best effort: never fails a trial)."""
    ticks = _start_ticks(pid) or ""
    try:
        with open(study_dir / WORKERS_FILE, "a", encoding="utf-8") as f:
            f.write(f"{pid} {ticks} {os.getpid()}\n")
    except OSError:
        pass


def live_workers(study_dir: Path) -> list[int]:
    """Pids listed in ``.workers`` that are still the same processes and still run."""
    try:
        lines = (study_dir / WORKERS_FILE).read_text(encoding="utf-8").splitlines()
    except OSError:
        return []
    alive: list[int] = []
    for line in lines:
        parts = line.split()
        try:
            pid = int(parts[0])
        except (IndexError, ValueError):
            continue
        if pid == os.getpid():
            continue
        ticks = _start_ticks(pid)
        if ticks is None:
            try:
                os.kill(pid, 0)
            except OSError:
                continue
            if len(parts) > 1 and parts[1]:
                continue  # /proc says nothing but we recorded ticks: not Linux now? skip
        elif len(parts) < 2 or parts[1] != ticks:
            continue  # the pid was reused by another process
        if _is_zombie(pid):
            continue
        alive.append(pid)
    return alive


def _is_zombie(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2:].split()[:1] == ["Z"]


def wait_for_orphans(study_dir: Path, timeout_s: float = 5.0) -> list[int]:
    """Wait up to ``timeout_s`` for listed workers to end; return those still running.

    When none runs any more the list is cleared.
    """
    deadline = time.monotonic() + timeout_s
    alive = live_workers(study_dir)
    while alive and time.monotonic() < deadline:
        time.sleep(0.1)
        alive = live_workers(study_dir)
    if not alive:
        try:
            (study_dir / WORKERS_FILE).unlink()
        except OSError:
            pass
    return alive
