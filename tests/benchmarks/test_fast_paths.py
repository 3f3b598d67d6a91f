"""benchmarks/fast_paths.py: a tiny run through its subprocesses and its tables."""

from __future__ import annotations

import pytest

from benchmarks import fast_paths


@pytest.mark.slow
def test_a_tiny_run_switches_each_path_off_in_its_own_process():
    rows = []
    for config in ("all on", "no pruning", "no sweep_boxes"):
        got, libs = fast_paths.run_config(config, ["dtlz2"], [8], 1, None)
        rows += got
    assert set(libs) == {"botorch", "gpytorch", "linear_operator"}
    by = {r["config"]: r for r in rows}
    assert by["all on"]["off"] == [] and by["all on"]["proposed_by"] == "qlognehvi"
    assert by["no pruning"]["off"] == ["pruning"]  # the switch reached the worker
    assert by["no sweep_boxes"]["off"] == []  # two objectives: no boxes to sweep
    cols, table = fast_paths.gains(rows)
    assert cols == ["fast path", "M=2, n=8"]
    cells = {r[0]: r[1] for r in table}
    assert cells["pruning"] == pytest.approx(by["no pruning"]["cpu_s"] / by["all on"]["cpu_s"],
                                             abs=0.01)
    assert cells["sweep_boxes"] is None and cells["closed_form_fit"] is None


def test_unknown_configurations_are_refused():
    with pytest.raises(SystemExit):
        fast_paths.main(["--configs", "no magic"])
