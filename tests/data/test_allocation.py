"""The Plumber-style allocation: an LP with a known optimum, cache placement under a memory
limit, the backend choice, and the settings applied to real pipelines."""

from __future__ import annotations

import math

import pytest
import torch

from ecopt.data import (
    INSURANCE,
    LoaderConfig,
    StagedDataset,
    TablePipeline,
    make_loader,
)
from ecopt.data.allocation import (
    PipelineProfile,
    PipelineSetting,
    StageCost,
    allocate,
    apply_setting,
    predict_epochs,
    solve_lp,
)
from ecopt.data.datasets import write_insurance


def _profile(table=None, worker_start_s=0.0) -> PipelineProfile:
    # 1,000 samples; decode 4 CPU-s, to_tensor 1 CPU-s per epoch; consumer 1 s per epoch.
    return PipelineProfile(
        n_samples=1000, batch_size=10, table=table or {None: []},
        sample=[StageCost("decode", "sample", 4.0, 4.0, 10e6),
                StageCost("to_tensor", "sample", 1.0, 1.0, 40e6)],
        collate_s=0.1, slice_s=0.01, consumer_s=1.0, consumer_cpu_s=1.0, batch_bytes=1e4,
        burst=1.5, worker_start_s=worker_start_s)


def test_lp_optimum_by_hand():
    # X * (1 + 5.1) ms of CPU per sample <= 4 cores -> X* = 4 / 0.0061; the workers need
    # X* * 5.1 ms = 3.34 cores, the consumer 0.66: the core budget binds.
    lp = solve_lp(1000, 5.1, 5.1, 1.0, 1.0, cores=4, max_workers=4)
    assert lp.throughput == pytest.approx(4 / 0.0061, rel=1e-6)
    assert lp.theta_workers == pytest.approx(lp.throughput * 0.0051, rel=1e-6)
    assert lp.workers == pytest.approx(lp.theta_workers, rel=1e-6)
    assert "cores" in lp.binding and "consumer thread" not in lp.binding
    # With 8 cores the single training thread binds instead: X* = 1,000/s, 5.1 workers.
    lp8 = solve_lp(1000, 5.1, 5.1, 1.0, 1.0, cores=8, max_workers=8)
    assert lp8.throughput == pytest.approx(1000.0) and lp8.workers == pytest.approx(5.1)
    assert lp8.binding == ("consumer thread",)


def test_allocation_rounds_workers_and_places_the_cache_under_the_memory_limit():
    prof = _profile()
    one = allocate(prof, cores=4, epochs=1, memory_limit_bytes=1e9)
    assert one.setting == PipelineSetting(None, None, 4, 2)  # ceil(3.34); no cache for 1 epoch
    assert one.predicted_epoch_s == pytest.approx([5.1 / 4])
    # Ten epochs: the 40 MB tensors do not fit 20 MB, the 10 MB decoded images do.
    tight = allocate(prof, cores=4, epochs=10, memory_limit_bytes=20e6)
    assert tight.setting.cache_after == "decode"
    # Epoch 0: decode in 4 workers (1 s), then to_tensor + collate (1.1 s) in 4 workers under the
    # 1 s consumer; later epochs only the latter. The LP of the repeating epochs: consumer-bound.
    assert tight.setting.num_workers == 4 and tight.lp.binding == ("consumer thread",)
    assert tight.predicted_epoch_s == pytest.approx([2.0] + [1.0] * 9)
    none = allocate(prof, cores=4, epochs=10, memory_limit_bytes=5e6)
    assert none.setting.cache_after is None and none.predicted_total_s == pytest.approx(12.75)
    roomy = allocate(prof, cores=4, epochs=10, memory_limit_bytes=1e9)
    assert roomy.predicted_total_s <= tight.predicted_total_s
    # Every candidate was costed with the same model the allocation reports.
    for s, t in roomy.candidates[:5]:
        assert t == pytest.approx(sum(predict_epochs(prof, s, 10, 4)))
    with pytest.raises(ValueError, match="cache_after must be one of"):
        predict_epochs(prof, PipelineSetting(None, "resize", 0), 1, 4)


def test_allocation_picks_the_cheaper_backend():
    slow = [StageCost("read", "table", 2.0, 2.0, 1e6), StageCost("to_tensor", "table", 0.5, 0.5, 1e6)]
    fast = [StageCost("read", "table", 0.2, 0.2, 1e6), StageCost("to_tensor", "table", 0.1, 0.1, 1e6)]
    prof = PipelineProfile(1000, 10, {"pandas": slow, "polars": fast}, [], 0.0, 0.05, 0.5, 0.5,
                           1e4, backend="pandas")
    alloc = allocate(prof, cores=2, epochs=1, memory_limit_bytes=1e9,
                     current=PipelineSetting("pandas", None, 0))
    assert alloc.setting.backend == "polars"
    assert alloc.predicted_gain == pytest.approx((2.5 + 0.55) / (0.3 + 0.55))


def _double(i: int) -> torch.Tensor:
    return torch.full((3,), float(i))


def _scale(x: torch.Tensor) -> torch.Tensor:
    return x / 2


def _epochs(source, cfg, before, epochs=3):
    loader = make_loader(source, cfg)
    out = []
    for _ in range(epochs):
        before()
        x = torch.cat([b[0] for b in loader])
        out.append(x[x[:, 0].argsort()])  # epochs shuffle: compare the rows as a set
    return out


@pytest.mark.parametrize("cache", [None, "decode", "to_tensor"])
def test_applied_settings_give_the_same_data(cache):
    ds = StagedDataset(list(range(40)), [("decode", _double), ("to_tensor", _scale)], [0] * 40)
    base = LoaderConfig(batch_size=8, cache=False)
    want = _epochs(ds, base, lambda: None, 1)[0]
    src, cfg, before = apply_setting(ds, PipelineSetting(None, cache, 1, 3), base)
    assert cfg.num_workers == 1 and cfg.prefetch_factor == 3
    for got in _epochs(src, cfg, before):
        assert torch.equal(got, want)


@pytest.mark.parametrize("cache", [None, "read", "encode", "to_tensor"])
def test_applied_table_settings_give_the_same_tensors(tmp_path, cache):
    path = write_insurance(tmp_path / "ins.csv", 120, 0, 0.1)
    pipe = TablePipeline(path, INSURANCE, "pandas")
    want = pipe.run().features.sum(0)
    src, cfg, before = apply_setting(pipe, PipelineSetting("polars", cache, 0), LoaderConfig(
        batch_size=32, cache=False))
    loader = make_loader(src, cfg)
    for _ in range(2):
        before()
        got = torch.cat([b[0] for b in loader]).sum(0)
        assert torch.allclose(got, want, atol=1e-3)
    assert math.isfinite(float(got[0]))
