"""Loader knobs: validation, caching, workers."""

from __future__ import annotations

import pytest
import torch

from ecopt.data import INSURANCE, LoaderConfig, TablePipeline, cpu_cores, make_loader, write_insurance


def test_num_workers_beyond_the_machine_is_refused_with_the_value():
    too_many = cpu_cores() + 1
    with pytest.raises(ValueError, match=rf"num_workers={too_many} exceeds the {cpu_cores()} CPU"):
        LoaderConfig(num_workers=too_many)
    with pytest.raises(ValueError, match="batch_size >= 1 must hold, got batch_size=0"):
        LoaderConfig(batch_size=0)
    with pytest.raises(ValueError, match="pin_memory must be a boolean, got 'maybe'"):
        LoaderConfig.from_params({"pin_memory": "maybe"})


def test_from_params_reads_knobs_and_ignores_the_rest():
    cfg = LoaderConfig.from_params({"batch_size": 32, "cache": "false", "lr": 0.1}, num_workers=1)
    assert (cfg.batch_size, cfg.cache, cfg.num_workers) == (32, False, 1)
    assert LoaderConfig(pin_memory=True).effective_pin_memory is torch.cuda.is_available()


def test_cache_runs_the_producer_once_and_without_cache_every_epoch():
    calls = []

    def produce():
        calls.append(1)
        return torch.arange(10.0).unsqueeze(1), torch.arange(10)

    for cache, expected in ((True, 1), (False, 3)):
        calls.clear()
        loader = make_loader(produce, batch_size=4, cache=cache)
        seen = [sorted(torch.cat([b[1] for b in loader]).tolist()) for _ in range(3)]
        assert seen == [list(range(10))] * 3
        assert len(calls) == expected


def test_table_loader_with_a_worker_yields_every_row_once(tmp_path):
    p = write_insurance(tmp_path / "ins.csv", n_rows=50)
    loader = make_loader(TablePipeline(p, INSURANCE, "pandas"), batch_size=16, num_workers=1)
    batches = list(loader)
    assert [len(b[2]) for b in batches] == [16, 16, 16, 2]
    rows = torch.cat([b[2] for b in batches])
    assert sorted(rows.tolist()) == sorted(TablePipeline(p, INSURANCE, "pandas").run().target.tolist())
