"""benchmarks/plumber.py: a tiny run of the I/O-latency pipeline through every method, its
comparison table, Plumber's 4x bound on its real predictions, the tf.data AUTOTUNE baseline
(when TensorFlow is installed) and the verdicts that follow the intervals."""

from __future__ import annotations

import argparse
import json
import math

import pytest

from benchmarks import plumber
from docs.recorded import Table

_TF_REASON = ("the tf.data AUTOTUNE baseline needs TensorFlow (pip install 'ecopt[tfdata]'; "
              "not in `all`: tensorflow-cpu is ~1.3 GB)")


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


def test_the_bound_verdict_follows_the_band():
    """Inside [1/4, 4] on both sides holds; wholly outside on one side does not; mixed: not
    shown."""
    assert plumber.bound_verdict(0.5, 3.0) == "holds"
    assert plumber.bound_verdict(0.26, 3.99) == "holds"
    assert plumber.bound_verdict(4.5, 9.0) == "does not hold"
    assert plumber.bound_verdict(0.01, 0.2) == "does not hold"
    assert plumber.bound_verdict(0.5, 6.0).startswith("not shown")
    assert plumber.bound_verdict(0.1, 2.0).startswith("not shown")
    t = Table(["pipeline", "settings", "predictions", "within 4x", "m/p", "worst", "verdict"],
              [["p", "every setting run", 3, "2/3 (67%)", {"value": 1.0, "low": 0.5, "high": 5.0},
                5.0, "holds"]])
    assert plumber.judge_bound(t).rows[0][6].startswith("not shown")


@pytest.mark.slow
def test_a_tiny_run_of_the_remote_files_pipeline(tmp_path):
    out = tmp_path / "run"
    assert plumber.main(["--only", "remote", "--repeats", "2", "--epochs", "2", "--trials", "2",
                         "--files", "48", "--latency-ms", "2", "--tfdata", "off",
                         "--out", str(out)]) == 0
    summary = json.loads((out / "summary.json").read_text())
    tables = summary["tables"]
    assert set(tables) == {"comparisons", "speedup", "prediction", "bound"}
    methods = [r[1] for r in tables["speedup"]["rows"]]
    assert methods == [m for m in plumber.METHODS if m != plumber.TFDATA]
    comps = [r[1] for r in tables["comparisons"]["rows"]]
    assert comps == [f"{a} vs {b}" for a, b in plumber.COMPARISONS if plumber.TFDATA not in (a, b)]
    assert {r[-1] for r in tables["comparisons"]["rows"]} == {2}  # every repeat, paired
    # The 4x bound, on this run's own predictions: 2 repeats x (2 random + 2 LP trials + 6
    # final runs); the LP's scope is its 2 trials and its 2 final choices per repeat.
    preds = [p for rep in summary["facts"]["predictions"]["remote files (I/O latency, "
                                                          "num_workers=0)"] for p in rep]
    assert len(preds) == 2 * (2 + 2 + 6)
    ratios = [p["measured_s"] / p["predicted_s"] for p in preds]
    bound = {r[1]: r for r in tables["bound"]["rows"]}
    every, lp = bound["every setting run"], bound["settings the LP ranked (its trials and choices)"]
    assert every[2] == len(preds) and lp[2] == 2 * (2 + 2)
    inside = sum(0.25 <= x <= 4 for x in ratios)
    assert every[3].startswith(f"{inside}/{len(preds)} ")
    assert every[4]["low"] == pytest.approx(min(ratios), rel=1e-4)
    assert every[4]["high"] == pytest.approx(max(ratios), rel=1e-4)
    assert every[5] == pytest.approx(max(max(ratios), 1 / min(ratios)), rel=1e-4)
    assert every[6] == plumber.bound_verdict(min(ratios), max(ratios))
    assert every[6] == "holds" if inside == len(preds) else every[6] != "holds"
    runs = summary["facts"]["runs"]["remote files (I/O latency, num_workers=0)"]
    for rep in runs:
        tuner = rep["tuner"]["setting"]
        assert "cache=off" in tuner and "workers=" in tuner  # the tuner never caches
    # The tuner stays within 2 threads per stage on a 2-core budget; the LP is not capped.
    for t in summary["facts"]["tuner"]["remote files (I/O latency, num_workers=0)"]:
        assert all(v <= max(2, summary["facts"]["cores"])
                   for v in t["setting"]["stage_threads"].values())


def _tiny_pipelines(tmp_path):
    args = argparse.Namespace(images=8, image_px=32, rows=600, files=12, latency_ms=1.0)
    return plumber.pipelines(args, tmp_path)


@pytest.mark.slow
def test_the_tfdata_pipelines_carry_every_sample(tmp_path):
    """The tf.data twin of each pipeline yields every sample once per epoch, batched as the
    DataLoader batches them, with the same features."""
    pytest.importorskip("tensorflow", reason=_TF_REASON)
    import numpy as np
    import torch

    from ecopt.data import make_loader

    for name, spec in _tiny_pipelines(tmp_path).items():
        base = spec["base"]
        ds = plumber.tfdata_dataset(spec["source"], base, epochs=2, cores=2)
        got = [(np.array(x), np.array(y)) for x, y in ds.as_numpy_iterator()]
        ref = [(b[0], b[-1]) for b in make_loader(spec["source"], base)]
        n = sum(len(b[0]) for b in ref)
        assert sum(len(x) for x, _ in got) == 2 * n, name
        assert max(len(x) for x, _ in got) == min(base.batch_size, n), name
        assert got[0][0].shape[1:] == tuple(ref[0][0].shape[1:]), name
        # the same rows (order aside): sums of every feature over an epoch agree
        epoch = np.concatenate([x for x, _ in got])[:n]
        want = torch.cat([b[0] for b in ref]).numpy()
        assert np.allclose(epoch.sum(0), want.sum(0), rtol=1e-4, atol=1e-3), name


@pytest.mark.slow
def test_a_tiny_run_with_the_tfdata_baseline(tmp_path):
    """tf.data AUTOTUNE runs beside the others and is compared with the LP, paired per
    repeat; the model predicts nothing for it."""
    pytest.importorskip("tensorflow", reason=_TF_REASON)
    out = tmp_path / "run"
    assert plumber.main(["--only", "remote", "--repeats", "2", "--epochs", "1", "--trials", "1",
                         "--files", "32", "--latency-ms", "2", "--tfdata", "on",
                         "--out", str(out)]) == 0
    summary = json.loads((out / "summary.json").read_text())
    tables = summary["tables"]
    assert [r[1] for r in tables["speedup"]["rows"]] == list(plumber.METHODS)
    rows = {r[1]: r for r in tables["comparisons"]["rows"]}
    for a in ("LP", "LP top-1"):
        r = rows[f"{a} vs {plumber.TFDATA}"]
        assert r[-1] == 2 and r[2]["value"] > 0
        assert r[4] == plumber.faster_verdict(a, plumber.TFDATA, r[2])
    assert plumber.TFDATA not in [r[1] for r in tables["prediction"]["rows"]]
    runs = summary["facts"]["runs"]["remote files (I/O latency, num_workers=0)"]
    assert all(rep[plumber.TFDATA]["cpu_s"] > 0 and rep[plumber.TFDATA]["wall_s"] > 0
               for rep in runs)
    assert not any(p["run"].startswith(plumber.TFDATA)
                   for rep in summary["facts"]["predictions"]["remote files (I/O latency, "
                                                              "num_workers=0)"] for p in rep)
