"""Shared bits of the executor tests (driver-side only: nothing here is sent to workers)."""

from __future__ import annotations

import os
import signal
import stat
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import ecopt
from ecopt.samplers import RandomSampler


def space() -> ecopt.SearchSpace:
    return ecopt.SearchSpace({"x": ecopt.Float(0, 1), "y": ecopt.Float(0, 1)})


def objectives() -> list[ecopt.Objective]:
    return [ecopt.Objective("f1", "min"), ecopt.Objective("f2", "min")]


def study(storage: Any = None, sampler: Any = "random", **kw: Any) -> ecopt.Study:
    return ecopt.Study(space(), objectives(), storage=storage, sampler=sampler,
                       meter="estimate", **kw)


class SpySampler(RandomSampler):
    """Random search that remembers what each proposal round was given."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[dict[str, Any]] = []

    def propose(self, space, records, pending, n):  # type: ignore[no-untyped-def]
        self.calls.append({"n_records": len(records), "pending": [dict(p) for p in pending],
                           "n": n})
        return super().propose(space, records, pending, n)


def kill_when_pid_file(directory: Path, number: int, timeout_s: float = 60.0
                       ) -> threading.Thread:
    """Start a thread that SIGKILLs the process named in ``<directory>/<number>.pid``."""

    def run() -> None:
        path = directory / f"{number}.pid"
        end = time.monotonic() + timeout_s
        while not path.exists() and time.monotonic() < end:
            time.sleep(0.02)
        if path.exists():
            time.sleep(0.2)  # well inside the trial's sleep
            os.kill(int(path.read_text()), signal.SIGKILL)

    th = threading.Thread(target=run, daemon=True)
    th.start()
    return th


def states(records: Sequence[ecopt.TrialRecord]) -> dict[int, str]:
    return {r.number: r.state.value for r in records}


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def no_ecopt_python(path: Path, keep: str = r"pyspark\.zip|py4j") -> Path:
    """A Python without ecopt (a worker node's own Python): the base interpreter with no
    site processing (so no editable-install finder), and of ``PYTHONPATH`` only the
    entries matching the regex ``keep`` (default: what Spark adds for its own workers)."""
    base = getattr(sys, "_base_executable", "") or "/usr/bin/python3"
    path.write_text("#!/bin/sh\n"
                    "PYTHONPATH=$(printf '%s' \"$PYTHONPATH\" | tr ':' '\\n' | "
                    f"grep -E '{keep}' | paste -sd: -)\n"
                    f"export PYTHONPATH\nexec {base} -S \"$@\"\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path
