"""experiments/dataframe_energy.py: its statistics and a tiny end-to-end run."""

from __future__ import annotations

import importlib.util
import json
import logging
import math
import sys
from pathlib import Path

import pytest

EXPERIMENTS = Path(__file__).resolve().parents[2] / "experiments"


def _script():
    key = "_ecopt_experiment_dataframe_energy"
    if key in sys.modules:
        return sys.modules[key]
    spec = importlib.util.spec_from_file_location(key, EXPERIMENTS / "dataframe_energy.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[key] = mod
    spec.loader.exec_module(mod)
    return mod


def test_trimmed_mean_interval_by_hand():
    tm, lo, hi = _script().trimmed_stats([1.0, 2.0, 3.0, 4.0, 100.0])
    assert tm == pytest.approx(3.0)  # 20 % cut: the 1 and the 100 go
    # Winsorised sample (2, 2, 3, 4, 4): sd 1.0; se = 1 / (0.6 * sqrt(5)); t(0.975, df=2) = 4.303
    half = 4.302653 / (0.6 * math.sqrt(5))
    assert lo == pytest.approx(3.0 - half, rel=1e-4) and hi == pytest.approx(3.0 + half, rel=1e-4)
    assert _script().trimmed_stats([2.0]) == (2.0, 2.0, 2.0)


@pytest.mark.slow
def test_tiny_run_writes_studies_tables_and_plot(tmp_path):
    out = tmp_path / "dfe"
    level = logging.getLogger("ecopt").level
    try:
        rc = _script().main(["--quiet", "--meter", "estimate", "--out", str(out), "--repeats", "2",
                             "--only", "mlp-regression", "svr", "--backends", "pandas", "polars",
                             "--tab-epochs", "1", "--no-operators"])
    finally:
        logging.getLogger("ecopt").setLevel(level)
    assert rc == 0
    text = (out / "summary.md").read_text()
    assert "ESTIMATED" in text and "generated stand-in (Insurance schema" in text
    run = json.loads((out / "summary.json").read_text())
    assert run["script"] == "experiments/dataframe_energy.py" and run["energy"]["measured"] is False
    rows = run["tables"]["workflow"]["rows"]
    assert [(r[0], r[1], r[2]) for r in rows] == [
        ("insurance-mlp-regression", "pandas", 2), ("insurance-mlp-regression", "polars", 2),
        ("insurance-svr", "pandas", 2), ("insurance-svr", "polars", 2)]
    assert all(r[5]["value"] > 0 and r[6]["value"] > 0 for r in rows)  # total s, CPU s
    recs = [json.loads(x) for x in (out / "insurance-svr" / "trials.jsonl")
            .read_text().splitlines()]
    assert sorted((r["params"]["backend"], r["params"]["repeat"]) for r in recs) == [
        ("pandas", 0), ("pandas", 1), ("polars", 0), ("polars", 1)]
    assert (out / "dataframe_energy.png").stat().st_size > 0


def test_device_cuda_without_a_gpu_stops_before_anything_runs(tmp_path, monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(SystemExit, match=r"--device: device 'cuda' was asked for"):
        _script().main(["--quiet", "--out", str(tmp_path / "x"), "--device", "cuda"])
    assert not (tmp_path / "x").exists()


@pytest.mark.slow
def test_vision_workload_on_the_device_with_its_masking_finding(tmp_path):
    out = tmp_path / "dfe"
    level = logging.getLogger("ecopt").level
    try:
        rc = _script().main(["--quiet", "--meter", "estimate", "--out", str(out), "--repeats", "1",
                             "--only", "coco", "--vision", "--vision-images", "8",
                             "--vision-size", "16", "--device", "cpu", "--no-operators"])
    finally:
        logging.getLogger("ecopt").setLevel(level)
    assert rc == 0
    run = json.loads((out / "summary.json").read_text())
    assert run["facts"]["device"] == "cpu"
    rows = run["tables"]["workflow"]["rows"]
    assert [(r[0], r[1]) for r in rows] == [("coco-resnet18", b) for b in ("pandas", "polars",
                                                                            "dask")]
    found = [r for r in run["tables"]["findings"]["rows"]
             if r[0] == "a heavy model masks the backend"]
    assert len(found) == 2 and "backends differ by" in found[1][-1]
    text = (out / "summary.md").read_text()
    assert "generated COCO-sized images (8 quality-90 JPEGs of 640x480" in text
    assert "Device cpu" in text
