"""benchmarks/plumber.py: a tiny run of the I/O-latency pipeline through every method, its
comparison table and the verdicts that follow the intervals."""

from __future__ import annotations

import json
import math

import pytest

from benchmarks import plumber


def test_verdicts_follow_the_interval():
    """The one rule (ecopt._verdict): a winner only when the interval excludes the threshold."""
    assert plumber.faster_verdict("LP", "tuner", {"value": 2.0, "low": 1.2, "high": 2.8}) \
        == "holds: LP faster"
    assert plumber.faster_verdict("LP", "tuner", {"value": 0.5, "low": 0.3, "high": 0.8}) \
        == "does not hold: tuner faster"
    assert plumber.faster_verdict("LP", "rule", {"value": 1.5, "low": 0.8, "high": 2.2}) \
        .startswith("not shown")
    assert plumber.faster_verdict("LP", "rule", {"value": 1.5, "low": math.nan, "high": math.nan}) \
        .startswith("cannot tell")
    assert plumber.half_better_verdict({"value": 2.0, "low": 1.6, "high": 2.4}) == "holds"
    assert plumber.half_better_verdict({"value": 1.2, "low": 1.1, "high": 1.4}) == "does not hold"
    assert plumber.half_better_verdict({"value": 1.6, "low": 1.1, "high": 2.4}).startswith(
        "not shown")


@pytest.mark.slow
def test_a_tiny_run_of_the_remote_files_pipeline(tmp_path):
    out = tmp_path / "run"
    assert plumber.main(["--only", "remote", "--repeats", "2", "--epochs", "2", "--trials", "1",
                         "--files", "48", "--latency-ms", "2", "--out", str(out)]) == 0
    summary = json.loads((out / "summary.json").read_text())
    tables = summary["tables"]
    assert set(tables) == {"comparisons", "speedup", "prediction"}
    methods = [r[1] for r in tables["speedup"]["rows"]]
    assert methods == list(plumber.METHODS)
    comps = [r[1] for r in tables["comparisons"]["rows"]]
    assert comps == [f"{a} vs {b}" for a, b in plumber.COMPARISONS]
    runs = summary["facts"]["runs"]["remote files (I/O latency, num_workers=0)"]
    for rep in runs:
        tuner = rep["tuner"]["setting"]
        assert "cache=off" in tuner and "workers=" in tuner  # the tuner never caches
    # The tuner stays within 2 threads per stage on a 2-core budget; the LP is not capped.
    for t in summary["facts"]["tuner"]["remote files (I/O latency, num_workers=0)"]:
        assert all(v <= max(2, summary["facts"]["cores"])
                   for v in t["setting"]["stage_threads"].values())
