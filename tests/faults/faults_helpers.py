"""Fault injection for the trial log: shared helpers (driver side).

Every test here asserts the same invariant: each trial that ``tell()`` or
``optimize()`` reported as saved is in ``load_study(...)`` with its values.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable
from pathlib import Path

import ecopt

SPACE = {"x": ecopt.Float(0, 1), "y": ecopt.Float(0, 1)}
OBJECTIVES = [ecopt.Objective("f1", "min"), ecopt.Objective("f2", "min")]


def make_study(path: Path | None, **kw) -> ecopt.Study:
    kw.setdefault("sampler", "random")
    kw.setdefault("meter", "estimate")
    return ecopt.Study(ecopt.SearchSpace(SPACE), OBJECTIVES, storage=path, **kw)


def f(trial: ecopt.Trial) -> dict[str, float]:
    with trial.phase("work", samples=10):
        sum(range(2000))
    return {"f1": float(trial["x"]), "f2": float(trial["y"])}


def assert_saved(path: Path, saved: Iterable[ecopt.TrialRecord]) -> None:
    """The invariant: every record reported saved is on disk with its values."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        on_disk = {r.number: r for r in ecopt.load_study(path).records}
    for rec in saved:
        assert rec.number in on_disk, f"trial {rec.number} was reported saved but is not on disk"
        got = on_disk[rec.number]
        assert got.state == rec.state and got.values == rec.values, (rec, got)
