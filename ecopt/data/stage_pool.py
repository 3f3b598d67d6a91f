"""Threads per stage: a :class:`StagedDataset` whose waiting stages run on thread pools.

A DataLoader worker (or the training process, with ``num_workers=0``) fetches
a whole batch of indices at once through ``__getitems__``; this dataset runs
each stage over the batch in order, stage ``name`` on ``threads[name]``
threads. Threads share one interpreter lock, so they add nothing to a stage
that computes in Python, but a stage that waits (a file read, a remote fetch,
a sleep) overlaps its waits: such a stage can use more threads than the
machine has cores, where worker processes are capped at the core count.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ecopt.data.pipeline import StagedDataset

__all__ = ["StagePoolDataset", "MAX_STAGE_THREADS"]

MAX_STAGE_THREADS = 64
"""Most threads one stage may get (per process)."""


class StagePoolDataset(StagedDataset):
    """``dataset``'s items and stages, with a thread pool for each stage named in ``threads``.

    Args:
        dataset: The per-sample pipeline.
        threads: ``stage name -> threads`` (``1``: run in the calling thread).

    Raises:
        ValueError: for an unknown stage name or a thread count outside
            ``[1, MAX_STAGE_THREADS]``.

    Example:
        >>> ds = StagePoolDataset(staged, {"fetch": 16})   # 16 fetches in flight per process
        >>> loader = make_loader(ds, batch_size=32)
    """

    def __init__(self, dataset: StagedDataset, threads: Mapping[str, int]) -> None:
        names = list(dataset.stage_names)
        for name, n in threads.items():
            if name not in names:
                raise ValueError(f"threads names stage {name!r}, which is not one of {names}")
            if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MAX_STAGE_THREADS:
                raise ValueError(f"threads[{name!r}] must be an integer in "
                                 f"[1, {MAX_STAGE_THREADS}], got {n!r}")
        super().__init__(dataset.items, dataset.stages, dataset.labels)
        self.threads = {k: int(v) for k, v in threads.items() if int(v) > 1}
        self._pools: dict[str, ThreadPoolExecutor] = {}
        self._pid = os.getpid()

    def _pool(self, name: str) -> ThreadPoolExecutor:
        if self._pid != os.getpid():  # a forked DataLoader worker: the parent's threads are gone
            self._pools, self._pid = {}, os.getpid()
        pool = self._pools.get(name)
        if pool is None:
            pool = ThreadPoolExecutor(self.threads[name], thread_name_prefix=f"ecopt-{name}")
            self._pools[name] = pool
        return pool

    def __getitems__(self, indices: Sequence[int]) -> list[Any]:
        """Items ``indices`` through every stage, stage by stage over the whole batch."""
        xs = [self.items[i] for i in indices]
        for name, fn in self.stages:
            if name in self.threads and len(xs) > 1:
                xs = list(self._pool(name).map(fn, xs))
            else:
                xs = [fn(x) for x in xs]
        if self.labels is None:
            return xs
        return [(x, self.labels[i]) for x, i in zip(xs, indices)]

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_pools"] = {}
        return state

    def close(self) -> None:
        """Stop this process's thread pools (they are rebuilt on the next batch)."""
        for pool in self._pools.values():
            pool.shutdown(wait=False)
        self._pools = {}

    def __repr__(self) -> str:
        return f"StagePoolDataset({len(self)} items, stages={list(self.stage_names)}, " \
               f"threads={self.threads})"
