"""Measurement windows a number can stand on (issue 28 item 1).

A phase shorter than its meter resolves is flagged ``short-window``; a trial whose
returned figure was drawn from such a phase is marked unreliable in its record and
kept off the front, the knee, the best-of and the payback, visibly.
"""

from __future__ import annotations

import json
import time
import warnings

import pytest
from fake_meters import FixedJoules

import ecopt
from ecopt import pareto
from ecopt.meters.base import FLAG_SHORT_WINDOW, ComponentEnergy
from ecopt.report.cli import show_text
from ecopt.report.data import build_report
from ecopt.trial import TrialRecord, excluded_reason

SPACE = {"x": ecopt.Float(0, 1)}
OBJS = [ecopt.Objective("accuracy", "max"), ecopt.Objective("samples_per_joule", "max")]


def noisy(trial: ecopt.Trial) -> dict[str, float]:
    """x < 0.5: an inference window of a few microseconds (what the quickstart once had),
    whose samples/J (1000 items / 2 J) beats every honest trial's (100 / 2 J)."""
    short = trial["x"] < 0.5
    with trial.phase("train"):
        time.sleep(0.015)
    with trial.phase("inference", samples=1000 if short else 100):
        if not short:
            time.sleep(0.015)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        spj = trial.samples_per_joule("inference")
    return {"accuracy": float(trial["x"]) if not short else 0.9 + 0.1 * float(trial["x"]),
            "samples_per_joule": spj}


@pytest.fixture(scope="module")
def study_dir(tmp_path_factory):
    path = tmp_path_factory.mktemp("noise") / "s"
    with ecopt.Study(ecopt.SearchSpace(SPACE), OBJS, storage=path, sampler="random",
                     meter=FixedJoules(2.0), seed=0) as st:
        st.optimize(noisy, n_trials=12, show_progress=False)
    return path


def test_noise_never_reaches_the_front_the_knee_or_the_best_of(study_dir):
    st = ecopt.load_study(study_dir)
    noise = [r for r in st.records if r.params["x"] < 0.5]
    honest = [r for r in st.records if r.params["x"] >= 0.5]
    assert noise and honest  # the random design drew both kinds
    for r in noise:
        assert r.unreliable == ("inference",) and r.phases["inference"].short_window
        assert r.phases["inference"].measurement.flags == (FLAG_SHORT_WINDOW,)
        assert r.values["samples_per_joule"] == 500.0  # the noise figure is still recorded
    assert all(r.unreliable == () for r in honest)
    # Every noise trial dominates every honest one; none is on the front all the same.
    front = st.best_trials()
    assert front and all(not r.unreliable for r in front)
    assert {r.number for r in front} == {r.number for r in pareto.front_records(
        st.records, st.objectives)}
    data = build_report(study_dir)
    noise_nums = {r.number for r in noise}
    assert not noise_nums & set(data.front)
    assert data.knee not in noise_nums and not noise_nums & set(data.best.values())
    assert set(data.excluded) == noise_nums
    assert all(w.startswith("excluded: window too short for the meter (phase 'inference': ")
               for w in data.excluded.values())
    assert pareto.study_reference_point(st.records, st.objectives)[1] < 100  # honest scale
    text = show_text(data)
    assert "excluded: window too short for the meter" in text
    assert f"  {min(noise_nums)}: excluded" in text


def test_payback_never_stands_on_a_noise_window(study_dir):
    st = ecopt.load_study(study_dir)
    noise = next(r for r in st.records if r.params["x"] < 0.5)
    honest = next(r for r in st.records if r.params["x"] >= 0.5)
    data = build_report(study_dir, baseline=honest.number)
    assert data.payback is not None and data.payback.best_trial not in data.excluded
    data = build_report(study_dir, baseline=noise.number)
    assert data.payback is None
    assert any("window too short for the meter" in w for w in data.warnings)
    data = build_report(study_dir, inferences=1e6)
    assert not set(data.lifecycle_energy_j) & set(data.excluded)


def test_the_mark_is_kept_in_the_log(study_dir):
    lines = [json.loads(x) for x in (study_dir / "trials.jsonl").read_text().splitlines()
             if '"number"' in x]
    marked = [d for d in lines if d.get("unreliable")]
    assert marked and all(d["unreliable"] == ["inference"] for d in marked)
    r = TrialRecord.from_dict(marked[0])
    assert r.unreliable == ("inference",) and r.to_dict()["unreliable"] == ["inference"]
    assert excluded_reason(r).startswith("excluded: window too short for the meter")
    bad = dict(marked[0], unreliable=[3])
    with pytest.raises(ValueError, match="'unreliable' must be a list of phase names"):
        TrialRecord.from_dict(bad)


def test_a_figure_read_off_the_phase_record_is_caught_too():
    def sneaky(trial):
        with trial.phase("inference", samples=10):
            pass
        return {"accuracy": 0.5, "samples_per_joule": trial.phases["inference"].samples_per_joule}

    st = ecopt.Study(ecopt.SearchSpace(SPACE), OBJS, sampler="random", meter=FixedJoules())
    st.optimize(sneaky, n_trials=2)
    assert all(r.unreliable == ("inference",) for r in st.records) and st.best_trials() == []


def test_a_short_phase_nobody_read_does_not_exclude_the_trial():
    def loads_fast(trial):
        with trial.phase("load"):
            pass  # cached data: a short window, but no returned figure comes from it
        with trial.phase("inference", samples=100):
            time.sleep(0.015)
        return {"accuracy": float(trial["x"]),
                "samples_per_joule": trial.samples_per_joule("inference")}

    st = ecopt.Study(ecopt.SearchSpace(SPACE), OBJS, sampler="random", meter=FixedJoules())
    st.optimize(loads_fast, n_trials=2)
    r = st.records[0]
    assert r.phases["load"].short_window and not r.phases["inference"].short_window
    assert r.unreliable == () and st.best_trials()


class CoarseMeter(FixedJoules):
    """A meter resolving only windows of 1 s or more (an NVML-like counter period)."""

    name = "coarse"

    def min_window_s(self) -> float:
        return 1.0


class SelfFlagging(FixedJoules):
    """A meter that flags its own windows, as the NVML meter does under 10 counter periods."""

    name = "self-flagging"

    def _stop(self, state, duration_s):
        return {"gpu:0": ComponentEnergy(2.0, "fake", True, "fewer than 10 periods",
                                         (FLAG_SHORT_WINDOW,))}


@pytest.mark.parametrize("meter", [CoarseMeter(), SelfFlagging()])
def test_the_meter_says_what_is_short(meter):
    def obj(trial):
        with trial.phase("inference", samples=100):
            time.sleep(0.015)
        with pytest.warns(RuntimeWarning, match="kept off the front"):
            spj = trial.samples_per_joule("inference")
        return {"accuracy": 1.0, "samples_per_joule": spj}

    st = ecopt.Study(ecopt.SearchSpace(SPACE), OBJS, sampler="random", meter=meter)
    st.optimize(obj, n_trials=1)
    assert st.records[0].unreliable == ("inference",) and st.best_trials() == []


def test_min_duration_s_and_repeat_in_phase():
    t = ecopt.Trial(0, {"x": 0.1}, FixedJoules())
    with t.phase("a", samples=5, min_duration_s=0.5):
        time.sleep(0.02)
    assert t.phases["a"].short_window
    assert "asked for (min_duration_s)" in t.phases["a"].measurement.components["cpu"].note
    calls = []
    out = t.repeat_in_phase("inference", lambda: calls.append(1) or len(calls),
                         samples_per_call=7, min_duration_s=0.03)
    p = t.phases["inference"]
    assert out == len(calls) and len(calls) > 1 and p.duration_s >= 0.03
    assert p.samples == 7 * len(calls) and t.metrics["inference_calls"] == len(calls)
    assert not p.short_window and p.count == 1
    t.repeat_in_phase("b", lambda: None)  # default: twice what the meter resolves
    assert t.phases["b"].duration_s >= 0.02 and not t.phases["b"].short_window
    t.repeat_in_phase("c", lambda: None, max_calls=1, min_duration_s=10.0)
    assert t.phases["c"].short_window and t.metrics["c_calls"] == 1
    with pytest.raises(ValueError, match="max_calls must be an integer >= 1"):
        t.repeat_in_phase("d", lambda: None, max_calls=0)
    with pytest.raises(ValueError, match="min_duration_s must be None or a finite number"):
        with t.phase("e", min_duration_s=-1):
            pass
