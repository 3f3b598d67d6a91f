"""docs/results/gemma_batch/2026-12-04-h200 is the H200 run of docs/gpu/2026-12-04, unchanged."""

from __future__ import annotations

from docs import gpu_runs
from docs.recorded import read_run


def test_recorded_h200_run_equals_its_sources():
    assert gpu_runs.main(["--check"]) == 0


def test_paper_table_states_where_the_optimum_sits_and_who_spent_less():
    run = read_run(gpu_runs.TARGET)
    rows = {r[0]: r[1:] for r in run.tables["paper"].rows}
    # Both bests at the largest feasible batch each evaluated: no optimum below the ceiling.
    assert "largest feasible batch" in rows["best batch"][1]
    assert "largest grid point" in rows["best batch"][2]
    # The grid found more tokens/J for less energy than the search.
    assert rows["best tokens/J (end to end)"][2] > rows["best tokens/J (end to end)"][1]
    energy = rows["energy of the search: sum of its trials (J)"]
    assert energy[1] > energy[2]
