"""Plumber-style diagnosis: a deliberately slow stage is named, and the advice speeds things up."""

from __future__ import annotations

import time

import pytest
import torch

from ecopt.data import (
    INSURANCE,
    LoaderConfig,
    StagedDataset,
    TablePipeline,
    make_loader,
    profile,
    write_insurance,
)
from ecopt.data.backends.pandas_backend import PandasBackend


def _slow(i: int) -> torch.Tensor:
    time.sleep(0.003)  # a stage waiting on I/O: the known bottleneck
    return torch.full((4,), float(i))


def _load(i: int) -> int:
    return i


def _scale(x: torch.Tensor) -> torch.Tensor:
    return x * 0.5


def _epochs_s(source, cfg: LoaderConfig, epochs: int = 3) -> float:
    loader = make_loader(source, cfg)
    t0 = time.perf_counter()
    for _ in range(epochs):
        for batch in loader:
            batch[0].sum()
    return time.perf_counter() - t0


def test_slow_sample_stage_is_named_and_the_recommendation_speeds_it_up():
    ds = StagedDataset(list(range(80)), [("load", _load), ("slow", _slow), ("scale", _scale)],
                       labels=[i % 2 for i in range(80)])
    cfg = LoaderConfig(batch_size=16, num_workers=0, cache=False)
    diag = profile(ds, lambda b: b[0].sum(), config=cfg, epochs=3, trace_samples=40,
                   meter="estimate")
    assert diag.bottleneck == "slow"
    assert diag.input_bound
    assert diag.stage("slow").time_share > 0.5
    assert diag.recommendations and diag.recommendations[0].predicted_gain > 1
    assert not diag.measured and "ESTIMATED" in diag.to_text()
    better = diag.recommended_config
    assert better != cfg
    assert _epochs_s(ds, better) < _epochs_s(ds, cfg)
    # The LP allocation sees the same sleepy stage: it caches (3 epochs) and predicts a gain.
    alloc = diag.allocation
    assert alloc is not None and alloc.setting.cache_after in ("slow", "scale")
    assert alloc.predicted_gain > 1 and "LP allocation:" in diag.to_text()
    assert diag.to_dict()["allocation"]["setting"]["cache_after"] == alloc.setting.cache_after


class _SlowEncode(PandasBackend):
    """pandas with a deliberately slow encode stage."""

    def encode(self, frame, schema, stats):
        time.sleep(0.15)
        return super().encode(frame, schema, stats)


def test_slow_table_stage_is_named_and_caching_it_helps(tmp_path):
    p = write_insurance(tmp_path / "ins.csv", n_rows=200)
    pipe = TablePipeline(p, INSURANCE, _SlowEncode())
    cfg = LoaderConfig(batch_size=50, cache=False)
    diag = profile(pipe, config=cfg, epochs=3, meter="estimate")
    assert diag.bottleneck == "encode"
    assert [s.name for s in diag.stages] == ["read", "impute", "encode", "normalise",
                                             "to_tensor", "batch"]
    assert sum(s.energy_share for s in diag.stages) == pytest.approx(1.0)
    top = diag.recommendations[0]
    assert (top.kind, top.knob, top.value) == ("caching", "cache", True)
    assert _epochs_s(pipe, diag.recommended_config) < _epochs_s(pipe, cfg)


def test_a_consumer_bound_pipeline_is_called_so():
    ds = StagedDataset(list(range(40)), [("load", _load), ("scale", lambda i: torch.ones(2) * i)],
                       labels=[0] * 40)

    def slow_step(batch):
        time.sleep(0.01)

    diag = profile(ds, slow_step, config=LoaderConfig(batch_size=8, cache=True), epochs=2,
                   meter="estimate")
    assert not diag.input_bound
    assert diag.consumer_rate is not None and diag.consumer_rate < diag.stage("scale").rate
    with pytest.raises(ValueError, match="epochs >= 1"):
        profile(ds, epochs=0)


@pytest.mark.slow
def test_cli_profile_prints_the_diagnosis(capsys):
    from ecopt.cli import main

    assert main(["profile", "insurance", "--backend", "polars", "--meter", "estimate",
                 "--batch-size", "128"]) == 0
    out = capsys.readouterr().out
    assert "limited by: " in out and "ESTIMATED" in out and "backend polars" in out
    assert "LP allocation: backend=polars" in out
    assert main(["profile", "insurance", "--num-workers", "999"]) == 2
    assert "num_workers=999" in capsys.readouterr().err


def test_a_tensor_producer_is_one_stage_and_a_loader_brings_its_config():
    def produce():
        time.sleep(0.05)
        return torch.zeros(64, 3), torch.zeros(64)

    loader = make_loader(produce, batch_size=16, cache=False)
    diag = profile(loader, epochs=2, meter="estimate")
    assert diag.config is loader.config and diag.bottleneck == "produce"
    assert diag.recommended_config.cache is True


def test_ecopt_data_profile_stays_the_function_after_the_profiler_module_is_imported():
    import inspect

    import ecopt
    import ecopt.data.profiler  # noqa: F401 - its own name, so nothing is rebound

    assert inspect.isfunction(ecopt.data.profile)

    ds = StagedDataset([1, 2, 3], [("load", _load)], labels=[0, 1, 0])
    diag = ecopt.data.profile(ds, config=LoaderConfig(batch_size=2), meter="estimate")
    assert diag.bottleneck in ("load", "collate", "slice")
