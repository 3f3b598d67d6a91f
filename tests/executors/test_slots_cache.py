"""The cluster executors' capacity cache (:class:`ecopt.executors.base.SlotsCache`)."""

from __future__ import annotations

import time

from ecopt.executors.base import SlotsCache


class Cluster:
    def __init__(self) -> None:
        self.capacity, self.asked, self.fail = 3, 0, False

    def __call__(self) -> int:
        self.asked += 1
        if self.fail:
            raise RuntimeError("scheduler gone")
        return self.capacity


def test_asks_at_most_every_every_s_and_floors_at_one() -> None:
    c = Cluster()
    cache = SlotsCache(c, every_s=0.05)
    assert cache.get(alive=True) == 3 and cache.get(alive=True) == 3 and c.asked == 1
    c.capacity = 0
    time.sleep(0.06)
    assert cache.get(alive=True) == 1 and c.asked == 2  # an empty cluster still takes one


def test_a_dead_or_failing_cluster_keeps_the_last_answer() -> None:
    c = Cluster()
    cache = SlotsCache(c, every_s=0.0)
    assert cache.get(alive=False) == 1 and c.asked == 0  # never asked before it is up
    assert cache.get(alive=True) == 3
    c.fail, c.capacity = True, 7
    assert cache.get(alive=True) == 3 and c.asked == 2
    c.fail = False
    assert cache.get(alive=False) == 3 and c.asked == 2
    assert cache.get(alive=True) == 7
