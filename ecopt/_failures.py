"""What a failed trial says about the search space: one home for the failure rules.

Used by the samplers (failed configurations are pending points for ever; failures
that form a region train a failure model) and by ``optimize(fail_fast=k)`` (a
broken objective is told from a bad region). The rules:

- A trial **counts as a failure** when its objective ran and raised (``failed``,
  not interrupted from outside, not left unstarted by a budget or a stop), or
  when it was pruned before it reported any value. Infeasible trials (out of
  memory, :class:`ecopt.Infeasible`) have their own feasibility model.
- A failure's **error key** is its exception type and the line that raised it
  (the last frame of its traceback, ``file.py:LINE``): a NaN loss at a high
  learning rate raised from one line is one error whatever its message says.
- Two failures with the same key belong to **one region** when the box they span
  holds no complete trial (numeric columns: the unit-cube interval between them;
  categorical columns: the categories they have). A failure with no such partner
  is **isolated** (a flaky node, a one-off): it stays a pending point, but does not
  condemn its neighbourhood.
- Failures with the same key are **spread** (the objective's fault, not a region's)
  when the box spanned by all of them holds a complete trial: the error struck on
  both sides of a configuration that works.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ecopt.record import TrialRecord, TrialState
from ecopt.space import SearchSpace

__all__ = ["NOT_FAILURES", "Box", "Split", "counts_as_failure", "tells_nothing",
           "distance", "enclosed", "error_key", "span", "split"]

#: Error types that say nothing about the configuration (a stop from outside, a budget).
NOT_FAILURES = ("Interrupted", "KeyboardInterrupt", "WorkerLost", "NotStarted")

_FRAME = re.compile(r'File "([^"]+)", line (\d+)')


def error_key(rec: TrialRecord) -> tuple[str, str]:
    """``(exception type, "file.py:LINE")`` of a failed trial (``""`` where unknown).

    The line is the last frame of the recorded traceback: where the exception
    was raised. Trials without a traceback (imported from Optuna, pruned) key
    on the type alone.
    """
    if rec.error is None:
        return ("Pruned" if rec.state is TrialState.PRUNED else "", "")
    frames = _FRAME.findall(rec.error.traceback or "")
    where = ""
    if frames:
        path, line = frames[-1]
        where = f"{_basename(path)}:{line}"
    return (rec.error.type, where)


def _basename(path: str) -> str:
    return re.split(r"[/\\\\]", path)[-1]


def tells_nothing(rec: TrialRecord) -> bool:
    """Whether a trial failed for a reason outside its configuration (:data:`NOT_FAILURES`:
    interrupted by a crash, kill, Ctrl-C or lost worker, or never started)."""
    return rec.state is TrialState.FAILED and rec.error is not None \
        and rec.error.type in NOT_FAILURES


def counts_as_failure(rec: TrialRecord) -> bool:
    """Whether ``rec`` failed because of its configuration or the objective (see the rules)."""
    if rec.state is TrialState.FAILED:
        return rec.error is not None and rec.error.type not in NOT_FAILURES
    if rec.state is TrialState.PRUNED:
        return not rec.intermediate and not rec.values
    return False


@dataclass(frozen=True)
class Box:
    """The box spanned by some configurations: numeric ranges and category sets.

    Attributes:
        low, high: ``(d,)`` unit-cube bounds (categorical columns: unused).
        cats: Categorical column -> the category cells present.
        ncat: Categorical column -> its number of categories.
    """

    low: np.ndarray
    high: np.ndarray
    cats: dict[int, frozenset[int]]
    ncat: dict[int, int]

    def contains(self, u: np.ndarray) -> bool:
        """Whether the unit-cube point ``u`` ``(d,)`` lies in the box."""
        for i in range(len(u)):
            if i in self.cats:
                if _cell(u[i], self.ncat[i]) not in self.cats[i]:
                    return False
            elif not self.low[i] - 1e-9 <= u[i] <= self.high[i] + 1e-9:
                return False
        return True


def _cell(v: float, n: int) -> int:
    return int(min(n - 1, max(0, np.floor(v * n))))


def distance(u: np.ndarray, v: np.ndarray, cat: dict[int, int]) -> float:
    """Root-mean-square distance of two unit-cube points ``(d,)``; a categorical column
    (``cat``: column -> number of categories) counts 1 where the categories differ."""
    if not len(u):
        return 0.0
    diff = np.abs(np.asarray(u, dtype=float) - np.asarray(v, dtype=float))
    for i, n in cat.items():
        diff[i] = float(_cell(u[i], n) != _cell(v[i], n))
    return float(np.sqrt(np.mean(diff ** 2)))


def _encode(space: SearchSpace, params: Sequence[dict]) -> np.ndarray | None:
    try:
        return np.array([space.encode(p) for p in params], dtype=float).reshape(
            len(params), space.dim)
    except (KeyError, TypeError, ValueError):  # a trial from an older, different space
        return None


def span(space: SearchSpace, U: np.ndarray) -> Box:
    """The box spanned by the unit-cube rows ``U`` ``(n, d)``, n >= 1."""
    cat = space.categorical_columns
    return Box(U.min(axis=0), U.max(axis=0),
               {i: frozenset(_cell(v, n) for v in U[:, i]) for i, n in cat.items()}, cat)


def enclosed(space: SearchSpace, failed: Sequence[TrialRecord],
             complete: Sequence[TrialRecord]) -> TrialRecord | None:
    """A complete trial inside the box the ``failed`` configurations span, else ``None``."""
    U = _encode(space, [r.params for r in failed])
    C = _encode(space, [r.params for r in complete])
    if U is None or C is None or not len(U):
        return None
    box = span(space, U)
    for r, u in zip(complete, C):
        if box.contains(u):
            return r
    return None


@dataclass(frozen=True)
class Split:
    """The failures of a history, as the samplers use them.

    Attributes:
        failures: Every trial that counts as a failure (:func:`counts_as_failure`).
        regional: Those with a same-key partner whose box holds no complete trial.
        isolated: The rest.
    """

    failures: list[TrialRecord]
    regional: list[TrialRecord]
    isolated: list[TrialRecord]

    @property
    def params(self) -> list[dict]:
        """The failed configurations, each once, in trial order."""
        seen: set[str] = set()
        out = []
        for r in self.failures:
            k = repr(sorted(r.params.items()))
            if k not in seen:
                seen.add(k)
                out.append(dict(r.params))
        return out


def split(space: SearchSpace, records: Sequence[TrialRecord]) -> Split:
    """Sort the failures of ``records`` into regional and isolated ones (see the rules)."""
    encoded = [(r, _encode(space, [r.params])) for r in records if counts_as_failure(r)]
    failures = [r for r, U in encoded if U is not None]
    complete = [r for r in records if r.state is TrialState.COMPLETE]
    C = _encode(space, [r.params for r in complete])
    if C is None:
        C = np.empty((0, space.dim))
    by_key: dict[tuple[str, str], list[tuple[TrialRecord, np.ndarray]]] = {}
    for r, U in encoded:
        if U is not None:
            by_key.setdefault(error_key(r), []).append((r, U[0]))
    regional: set[int] = set()
    for group in by_key.values():
        for i, (a, ua) in enumerate(group):
            for b, ub in group[i + 1:]:
                if a.number in regional and b.number in regional:
                    continue
                box = span(space, np.vstack([ua, ub]))
                if not any(box.contains(c) for c in C):
                    regional.update((a.number, b.number))
    return Split(failures, [r for r in failures if r.number in regional],
                 [r for r in failures if r.number not in regional])
