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


def test_touching_runs_within_the_logs_millisecond_are_not_an_overlap() -> None:
    # started_at has millisecond resolution: a trial that starts the moment another ends
    # may carry a stamp up to 1 ms before that end.
    recs = [rec(0, "a", 0, 0.0105), rec(1, "a", 0.010, 1), rec(2, "a", 1.005, 1)]
    assert overlapping_trials(recs) == {0: [], 1: [2], 2: [1]}
    assert max_concurrency(recs) == {"a": 2}
    assert max_concurrency(recs[:2]) == {"a": 1}


def test_local_batch_trials_start_when_they_run_not_when_their_batch_was_proposed(
        tmp_path) -> None:
    """A q-batch run locally runs its trials one after another: none overlaps another
    (issue 28 item 7: they used to carry the batch's start, a false "ran concurrently").

    The order comes from the trials themselves (each notes when its objective was entered
    and left), never from sleeps, so the machine's load cannot change the outcome.
    """
    import time

    import ecopt

    space = ecopt.SearchSpace({"x": ecopt.Float(0, 1)})
    study = ecopt.Study(space, [ecopt.Objective("a", "min"), ecopt.Objective("b", "min")],
                        sampler="sobol", meter="wallclock", seed=0, storage=tmp_path / "s")
    ran: dict[int, tuple[dt.datetime, dt.datetime]] = {}

    def objective(t: ecopt.Trial) -> dict[str, float]:
        entered = dt.datetime.now(dt.timezone.utc)
        # Busy until the wall clock has moved 3 ms on (the log stamps milliseconds).
        while dt.datetime.now(dt.timezone.utc) - entered < dt.timedelta(milliseconds=3):
            pass
        ran[t.number] = (entered, dt.datetime.now(dt.timezone.utc))
        return {"a": t["x"], "b": 1 - t["x"]}

    t0 = time.perf_counter()
    study.optimize(objective, n_trials=6, batch_size=3, show_progress=False)
    wall_s = time.perf_counter() - t0
    recs = sorted(ecopt.load_study(tmp_path / "s").records, key=lambda r: r.number)
    assert [r.number for r in recs] == list(range(6)) == sorted(ran)
    starts = [dt.datetime.fromisoformat(r.started_at) for r in recs]
    for n, start in enumerate(starts):
        entered, _ = ran[n]
        assert start <= entered  # stamped before its objective ran...
        if n:  # ...and after the previous one's had returned (to the stamp's millisecond)
            left = ran[n - 1][1]
            assert start >= left.replace(microsecond=left.microsecond // 1000 * 1000)
    assert all(v == [] for v in overlapping_trials(recs).values())
    assert max_concurrency(recs) == {recs[0].host: 1}
    # Each trial's duration is its own run: together they fit in the call's wall time.
    assert sum(r.duration_s for r in recs) <= wall_s
