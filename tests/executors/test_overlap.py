"""Which trials overlapped on which host, from the log's host/started_at/duration_s."""

from __future__ import annotations

import datetime as dt

from ecopt.executors import overlapping_trials
from ecopt.executors.overlap import max_concurrency, shared_host_energy_note
from ecopt.meters.base import ComponentEnergy, Measurement
from ecopt.trial import PhaseRecord, TrialRecord, TrialState

T0 = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)


def rec(n: int, host: str, start_s: float, dur_s: float, cpu_measured: bool = False
        ) -> TrialRecord:
    comps = {"gpu:0": ComponentEnergy(100.0, "nvml-energy-counter", True),
             "cpu:package-0": ComponentEnergy(50.0, "rapl" if cpu_measured else
                                              "estimate-cpu-time", cpu_measured)}
    phase = PhaseRecord("train", Measurement(dur_s, comps, "test"))
    return TrialRecord(number=n, state=TrialState.COMPLETE, params={"x": 0.5},
                       values={"f1": 1.0, "f2": 1.0},
                       phases={"train": phase},
                       started_at=(T0 + dt.timedelta(seconds=start_s)).isoformat(),
                       duration_s=dur_s, host=host)


def test_overlaps_are_per_host_and_touching_ends_do_not_count() -> None:
    recs = [rec(0, "a", 0, 10), rec(1, "a", 5, 10), rec(2, "a", 15, 1),  # 2 starts as 1 ends
            rec(3, "b", 0, 100), rec(4, "a", 30, 1), rec(5, "", 0, 100)]
    assert overlapping_trials(recs) == {0: [1], 1: [0], 2: [], 3: [], 4: []}
    assert max_concurrency(recs) == {"a": 2, "b": 1}


def test_note_only_for_overlapping_trials_with_host_wide_measured_energy() -> None:
    assert shared_host_energy_note([rec(0, "a", 0, 10), rec(1, "a", 5, 10)]) is None
    assert shared_host_energy_note([rec(0, "a", 0, 10, True), rec(1, "a", 20, 10, True)]) is None
    note = shared_host_energy_note([rec(0, "a", 0, 10, True), rec(1, "a", 5, 10, True),
                                    rec(2, "b", 5, 10, True)])
    assert note is not None and note.startswith("trials 0, 1 ran concurrently")
    assert "cannot be split honestly" in note
