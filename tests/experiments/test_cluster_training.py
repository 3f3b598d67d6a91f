"""experiments/cluster_training.py --quick on a real Dask LocalCluster: both engines, one summary."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("dask_ml")
pytest.importorskip("xgboost")
pytest.importorskip("distributed")

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_quick_run_trains_every_model_locally_and_on_a_local_cluster(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    res = subprocess.run([sys.executable, "experiments/cluster_training.py", "--quick",
                          "--out", str(tmp_path)], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    run = json.loads((tmp_path / "summary.json").read_text())
    rows = run["tables"]["training"]["rows"]
    assert [(r[0], r[1]) for r in rows] == [(m, e) for m in ("logistic_regression",
                                                              "gradient_boosting",
                                                              "text_classifier")
                                            for e in ("local", "dask")]
    for r in rows:
        assert r[2] == 1 and r[5]["value"] > 0 and r[6]["value"] > 0 and r[7]["value"] > 0
        assert 0.5 <= r[9] <= 1.0
    # The same rows, the same algorithm: the cluster's accuracy is the local one (+-2 points).
    for local, dask in zip(rows[::2], rows[1::2]):
        assert abs(local[9] - dask[9]) <= 0.02
    assert run["energy"]["measured"] is False and "LocalCluster" in run["notes"][0]
    assert "--quick: a smoke run" in run["notes"][-1]
