"""Parallelism per stage: the per-stage LP, threads for waiting stages past the core count,
their execution on real thread pools inside real DataLoaders, and the hill-climbing tuner."""

from __future__ import annotations

import threading
import time

import pytest
import torch

from ecopt.data import LoaderConfig, StagedDataset, make_loader
from ecopt.data.allocation import (
    PipelineProfile,
    PipelineSetting,
    StageCost,
    allocate,
    apply_setting,
    predict_epochs,
    solve_lp,
    solve_stage_lp,
)
from ecopt.data.stage_pool import StagePoolDataset
from ecopt.data.tuner import hill_climb


def _io_profile() -> PipelineProfile:
    # 1,000 samples: fetch waits 8 s per epoch (0.4 s of it on a CPU), decode computes 1 s;
    # the training step takes 1 s.
    return PipelineProfile(
        n_samples=1000, batch_size=10, table={None: []},
        sample=[StageCost("fetch", "sample", 8.0, 0.4, 1e6),
                StageCost("decode", "sample", 1.0, 1.0, 4e6)],
        collate_s=0.0, slice_s=0.0, consumer_s=1.0, consumer_cpu_s=1.0, batch_bytes=1e4,
        burst=1.0, worker_start_s=0.0)


def test_stage_lp_gives_a_waiting_stage_slots_past_the_cores_by_hand():
    prof = _io_profile()
    lp = solve_stage_lp(1000, prof.sample, 1.0, 1.0, cores=2, max_workers=2, max_threads=32)
    # CPU per sample: 1 (consumer) + 0.4 + 1 ms = 2.4 ms on 2 cores -> X* = 2 / 0.0024.
    x = 2 / 0.0024
    assert lp.throughput == pytest.approx(x, rel=1e-6)
    assert "cores" in lp.binding
    fetch, decode = lp.stages
    assert fetch.slots == pytest.approx(x * 0.008, rel=1e-6)  # 6.7 fetches in flight
    assert fetch.slots > 2 and fetch.cores == pytest.approx(x * 0.0004, rel=1e-6)
    assert decode.cores == pytest.approx(x * 0.001, rel=1e-6)
    assert lp.workers >= decode.cores - 1e-9  # CPU parallelism needs processes
    # Threads per process: ceil(6.7 / W) for fetch; none for the CPU-bound decode.
    assert dict(lp.threads(1, 32)) == {"fetch": 7}
    assert dict(lp.threads(2, 32)) == {"fetch": 4}
    assert lp.threads(1, 3) == (("fetch", 3),)
    # The collapsed chain LP, one item per worker and workers <= cores, cannot go past
    # W / chain = 2 / 9 ms.
    one = solve_lp(1000, 9.0, 1.4, 1.0, 1.0, cores=2, max_workers=2)
    assert one.throughput == pytest.approx(2 / 0.009, rel=1e-6)
    assert lp.throughput > 3 * one.throughput


def test_stage_lp_caps_threads_and_rejects_bad_arguments():
    prof = _io_profile()
    lp = solve_stage_lp(1000, prof.sample, 1.0, 1.0, cores=2, max_workers=1, max_threads=2)
    assert lp.throughput == pytest.approx(2 / 0.008, rel=1e-6)  # 2 fetches in flight
    assert "fetch max threads" in lp.binding
    with pytest.raises(ValueError, match="max_threads"):
        solve_stage_lp(1000, prof.sample, 1.0, 1.0, cores=2, max_workers=1, max_threads=0)


def test_allocation_gives_the_waiting_stage_threads_past_the_core_count():
    prof = _io_profile()
    alloc = allocate(prof, cores=2, epochs=1, memory_limit_bytes=1e9, max_threads=32)
    threads = alloc.setting.threads("fetch")
    assert threads * max(alloc.setting.num_workers, 1) > 2
    assert alloc.setting.threads("decode") == 1
    plain = PipelineSetting(None, None, alloc.setting.num_workers, alloc.setting.prefetch_factor)
    assert alloc.predicted_total_s < 0.5 * sum(predict_epochs(prof, plain, 1, 2))
    assert alloc.stage_lp is not None and "per-stage LP" in alloc.to_text()
    assert alloc.to_dict()["setting"]["stage_threads"] == dict(alloc.setting.stage_threads)
    # A CPU-bound pipeline gets no threads.
    cpu = PipelineProfile(1000, 10, {None: []}, [StageCost("decode", "sample", 4.0, 4.0, 1e6)],
                          0.0, 0.0, 1.0, 1.0, 1e4)
    assert allocate(cpu, cores=2, epochs=1, memory_limit_bytes=1e9).setting.stage_threads == ()


class _Gauge:
    """Counts how many calls run at once (real threads, real sleeps)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.now = self.peak = 0

    def __call__(self, x: int) -> int:
        with self.lock:
            self.now += 1
            self.peak = max(self.peak, self.now)
        time.sleep(0.01)
        with self.lock:
            self.now -= 1
        return x


def _staged(gauge: _Gauge) -> StagedDataset:
    return StagedDataset(list(range(40)), [("fetch", gauge),
                                           ("to_tensor", lambda x: torch.tensor([x, 2 * x]))],
                         labels=[i % 3 for i in range(40)])


def test_stage_threads_run_concurrently_and_give_the_same_batches():
    gauge = _Gauge()
    ds = _staged(gauge)
    cfg = LoaderConfig(batch_size=16, num_workers=0, shuffle=False, cache=False)
    serial = [b for b in make_loader(ds, cfg)]
    assert gauge.peak == 1
    src, cfg2, before = apply_setting(ds, PipelineSetting(None, None, 0, 2, (("fetch", 8),)), cfg)
    assert isinstance(src, StagePoolDataset) and src.threads == {"fetch": 8}
    before()
    threaded = [b for b in make_loader(src, cfg2)]
    assert gauge.peak == 8  # 8 fetches in flight in one process, on a 2-core machine
    assert len(threaded) == len(serial)
    for (x1, y1), (x2, y2) in zip(serial, threaded):
        assert torch.equal(x1, x2) and torch.equal(y1, y2)


def test_stage_threads_work_inside_worker_processes_and_with_a_full_cache():
    ds = _staged(_Gauge())
    cfg = LoaderConfig(batch_size=16, num_workers=0, shuffle=False, cache=False)
    serial = torch.cat([x for x, _ in make_loader(ds, cfg)])
    for setting in (PipelineSetting(None, None, 1, 2, (("fetch", 4),)),
                    PipelineSetting(None, "to_tensor", 1, 2, (("fetch", 4),))):
        src, cfg2, before = apply_setting(ds, setting, cfg)
        loader = make_loader(src, cfg2)
        for _ in range(2):
            before()
            got = torch.cat([x for x, _ in loader])
            assert torch.equal(got, serial)


def test_stage_pool_rejects_bad_threads_and_settings():
    ds = _staged(_Gauge())
    with pytest.raises(ValueError, match="not one of"):
        StagePoolDataset(ds, {"decode": 2})
    with pytest.raises(ValueError, match=r"\[1, 64\]"):
        StagePoolDataset(ds, {"fetch": 0})
    with pytest.raises(ValueError, match="cache after the last stage"):
        apply_setting(ds, PipelineSetting(None, "fetch", 0, 2, (("fetch", 2),)),
                      LoaderConfig(batch_size=4, cache=False))


def test_hill_climb_raises_parallelism_within_the_cpu_budget_and_never_caches():
    prof = _io_profile()
    start = PipelineSetting(None, None, 0, 2)
    res = hill_climb(prof, start, cores=2, epochs=3)
    s = res.setting
    assert s.cache_after is None and s.backend is None
    assert s.num_workers <= 2 and all(t <= 2 for _, t in s.stage_threads)
    assert s.threads("fetch") == 2  # the waiting stage is raised to the budget, no further
    assert res.steps and res.predicted_total_s < sum(predict_epochs(prof, start, 3, 2))
    assert res.predicted_total_s == pytest.approx(sum(predict_epochs(prof, s, 3, 2)))
    # Each step lowered the prediction.
    costs = [sum(predict_epochs(prof, start, 3, 2))] + [t for _, t in res.steps]
    assert all(b < a for a, b in zip(costs, costs[1:]))
    # The LP, free to cache and to thread past the cores, predicts better than the climb.
    alloc = allocate(prof, cores=2, epochs=3, memory_limit_bytes=1e9)
    assert alloc.predicted_total_s < res.predicted_total_s
    with pytest.raises(ValueError, match="epochs"):
        hill_climb(prof, start, cores=2, epochs=0)
