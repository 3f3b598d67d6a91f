"""Study: ask/tell/optimize, failures never kill a study, resume, results."""

from __future__ import annotations

import json
import logging
import math

import numpy as np
import pytest

import ecopt
from ecopt import pareto
from ecopt.errors import EcoptError, SpecMismatchError
from ecopt.trial import TrialState

SPACE = ecopt.SearchSpace({"x": ecopt.Float(0, 1), "k": ecopt.Int(1, 4),
                           "c": ecopt.Categorical(["a", "b"]), "e": ecopt.Fixed(3)})
OBJS = [ecopt.Objective("acc", "max", threshold=0.0), ecopt.Objective("energy", "min", threshold=2.0)]


def good(t):
    with t.phase("train", samples=100):
        sum(i * i for i in range(2000))
    with t.phase("inference", samples=50):
        sum(range(1000))
    return {"acc": t["x"], "energy": (1 - t["x"]) ** 2 + 0.1 * t["k"]}


def _study(path=None, **kw):
    kw.setdefault("sampler", "random")
    kw.setdefault("meter", "estimate")
    return ecopt.Study(SPACE, OBJS, storage=path, **kw)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"sampler": "bayes"}, r"unknown sampler 'bayes'; expected one of"),
        ({"meter": "magic"}, r"unknown meter 'magic'"),
        ({"seed": "zero"}, r"seed must be an integer"),
    ],
)
def test_bad_arguments_fail_at_construction(kwargs, match):
    with pytest.raises(ValueError, match=match):
        _study(**kwargs)


def test_qlognehvi_needs_two_objectives_and_directions_are_checked():
    with pytest.raises(ValueError, match=r"sampler 'qlognehvi' needs at least 2 objectives, got 1"):
        ecopt.Study(SPACE, [ecopt.Objective("acc", "max")], sampler="qlognehvi")
    with pytest.raises(ValueError, match="direction must be 'max' or 'min'"):
        ecopt.Study(SPACE, [ecopt.Objective("acc", "up"), ecopt.Objective("e")])
    with pytest.raises(ValueError, match="duplicates"):
        ecopt.Study(SPACE, [ecopt.Objective("acc"), ecopt.Objective("acc", "min")])


def test_optimize_argument_checks():
    s = _study()
    with pytest.raises(ValueError, match=r"n_trials >= 1 must hold, got n_trials=0"):
        s.optimize(good, n_trials=0)
    with pytest.raises(ValueError, match=r"batch_size >= 1 must hold"):
        s.optimize(good, n_trials=1, batch_size=0)
    with pytest.raises(ValueError, match="objective must be callable"):
        s.optimize(42, n_trials=1)  # type: ignore[arg-type]


def test_failures_are_recorded_and_the_study_goes_on(caplog):
    caplog.set_level(logging.WARNING, logger="ecopt")
    outcomes = iter([
        lambda t: 1 / 0,
        lambda t: {"acc": float("nan"), "energy": 1.0},
        lambda t: {"acc": 0.5},
        lambda t: {"acc": 0.5, "energy": 1.0, "bogus": 3},
        lambda t: {"acc": "high", "energy": 1.0},
        lambda t: (_ for _ in ()).throw(MemoryError("no room")),
        lambda t: (_ for _ in ()).throw(ecopt.Infeasible("too big for VRAM")),
        lambda t: (_ for _ in ()).throw(RuntimeError("CUDA out of memory. Tried to allocate")),
        good,
    ])
    s = _study()
    # Five failures in a row from the start: fail_fast's first rule would stop at three.
    recs = s.optimize(lambda t: next(outcomes)(t), n_trials=9, fail_fast=None)
    states = [r.state for r in recs]
    assert states == [TrialState.FAILED] * 5 + [TrialState.INFEASIBLE] * 3 + [TrialState.COMPLETE]
    errs = [r.error for r in recs[:8]]
    assert errs[0].type == "ZeroDivisionError" and "division by zero" in errs[0].message
    assert "Traceback" in errs[0].traceback
    assert "must be finite" in errs[1].message
    assert "did not return metric(s) ['energy']" in errs[2].message
    assert "unknown metric name(s) ['bogus']" in errs[3].message and "set_metric" in errs[3].message
    assert "must be a number, got 'high'" in errs[4].message
    assert errs[5].type == "MemoryError" and errs[6].type == "Infeasible"
    assert "trial 0 failed" in caplog.text


def test_keyboard_interrupt_stops_cleanly_with_log_intact(run_dir):
    calls = {"n": 0}

    def f(t):
        calls["n"] += 1
        if calls["n"] == 3:
            raise KeyboardInterrupt
        return good(t)

    s = _study(run_dir)
    with pytest.raises(KeyboardInterrupt):
        s.optimize(f, n_trials=10, batch_size=2)
    s.close()
    recs = ecopt.load_study(run_dir).records
    # Trials 0-1 complete; of the second batch, 2 was interrupted, 3 never ran.
    assert [r.state.value for r in recs] == ["complete", "complete", "failed", "failed"]
    assert all(r.interrupted for r in recs[2:])


def test_ask_tell_by_hand_and_user_params():
    s = _study()
    t1, t2 = s.ask(2)
    assert t1.number == 0 and t2.number == 1 and len(s.running) == 2
    r = s.tell(t2, {"acc": 0.3, "energy": 1.0})
    assert r.state is TrialState.COMPLETE and r.number == 1
    r1 = s.tell(t1, ValueError("diverged"))
    assert r1.state is TrialState.FAILED and r1.error.type == "ValueError"
    with pytest.raises(ValueError, match="not running in this study"):
        s.tell(t1, {"acc": 1, "energy": 1})
    t3 = s.ask(params={"x": 0.25, "k": 2, "c": "b", "e": 3})
    assert t3.proposed_by == "user" and t3.params["x"] == 0.25
    s.tell(t3, {"acc": 0.9, "energy": 0.5})
    with pytest.raises(ValueError, match="must lie in"):
        s.ask(params={"x": 3.0, "k": 2, "c": "b", "e": 3})
    with pytest.raises(ValueError, match="n >= 1 must hold"):
        s.ask(0)


def test_phases_energy_and_helpers():
    s = _study()
    t = s.ask()
    with t.phase("inference", samples=10):
        sum(range(200_000))
    with t.phase("inference", samples=5):
        sum(range(200_000))
    assert t.phases["inference"].count == 2 and t.phases["inference"].samples == 15
    assert t.energy_j("inference") > 0 and t.energy_j() == t.energy_j("inference")
    assert t.samples_per_joule("inference") == pytest.approx(15 / t.energy_j("inference"))
    m = t.measurement("inference")
    assert not m.measured and m.components["cpu"].source == "estimate-cpu-time"
    with pytest.raises(ValueError, match="no phase 'train' was measured"):
        t.energy_j("train")
    with pytest.raises(EcoptError, match="phases do not nest"):
        with t.phase("a"):
            with t.phase("b"):
                pass
    with pytest.raises(ValueError, match="samples must be a non-negative integer"):
        with t.phase("c", samples=-1):
            pass


def test_wallclock_meter_gives_clear_samples_per_joule_error():
    s = _study(meter="wallclock")
    t = s.ask()
    with t.phase("inference", samples=10):
        pass
    with pytest.raises(ValueError, match="samples/J is undefined"):
        t.samples_per_joule("inference")


def test_constraints_keep_infeasible_trials_off_the_front():
    s = ecopt.Study(SPACE, OBJS, constraints=[ecopt.Constraint("latency_ms", "<=", 50)],
                    sampler="random", meter="estimate")
    for x, lat, e in [(0.9, 80.0, 0.0), (0.5, 10.0, 0.5), (0.2, 5.0, 0.1)]:
        t = s.ask(params={"x": x, "k": 1, "c": "a", "e": 3})
        t.set_metric("latency_ms", lat)
        s.tell(t, {"acc": x, "energy": e})
    front = s.pareto_front()
    assert sorted(front["number"]) == [1, 2]
    df = s.trials_dataframe()
    assert df.loc[0, "feasible"] == False  # noqa: E712
    assert list(df["metrics_latency_ms"]) == [80.0, 10.0, 5.0]
    # Returning the constraint metric works too.
    t = s.ask(params={"x": 0.3, "k": 1, "c": "a", "e": 3})
    assert s.tell(t, {"acc": 0.3, "energy": 0.1, "latency_ms": 1.0}).feasible


def test_results_match_brute_force():
    s = _study(seed=3)
    s.optimize(good, n_trials=12)
    df = s.trials_dataframe()
    for col in ["number", "state", "feasible", "proposed_by", "started_at", "duration_s",
                "energy_j", "energy_measured", "params_x", "params_k", "params_c", "params_e",
                "values_acc", "values_energy", "phase_train_duration_s", "phase_train_energy_j",
                "phase_train_source", "phase_train_measured", "phase_inference_energy_j",
                "error_type", "error_message", "host", "worker", "device"]:
        assert col in df.columns
    assert (df["phase_train_source"] == "cpu=estimate-cpu-time;ram=estimate-ram").all()
    assert not df["energy_measured"].any()
    Y = df[["values_acc", "values_energy"]].to_numpy()
    mask = pareto.non_dominated(Y, ["max", "min"])
    assert sorted(s.pareto_front()["number"]) == sorted(df["number"][mask])
    assert s.hypervolume() == pytest.approx(pareto.hypervolume(Y, [0.0, 2.0], ["max", "min"]))
    assert s.reference_point() == [0.0, 2.0]


def test_reference_point_inferred_when_no_thresholds():
    s = ecopt.Study(SPACE, [ecopt.Objective("acc"), ecopt.Objective("energy", "min")],
                    sampler="random", meter="estimate")
    assert s.reference_point() is None and s.hypervolume() == 0.0
    s.optimize(good, n_trials=5)
    ref = s.reference_point()
    assert ref is not None and s.hypervolume() > 0


def test_resume_continues_numbering_and_checks_spec(run_dir):
    s = _study(run_dir, seed=1)
    s.optimize(good, n_trials=3)
    first = [r.params for r in s.records]
    s.close()
    s2 = _study(run_dir, seed=1)
    assert [r.number for r in s2.records] == [0, 1, 2]
    s2.optimize(good, n_trials=2)
    assert [r.number for r in s2.records] == [0, 1, 2, 3, 4]
    assert [r.params for r in s2.records[:3]] == first
    s2.close()
    spec = json.loads((run_dir / "study.json").read_text())
    assert len(spec["sessions"]) == 2
    other = ecopt.SearchSpace({"x": ecopt.Float(0, 2)})
    with pytest.raises(SpecMismatchError, match="different space"):
        ecopt.Study(other, OBJS, storage=run_dir, sampler="random")
    with pytest.raises(SpecMismatchError, match="different objectives"):
        ecopt.Study(SPACE, [OBJS[0], ecopt.Objective("energy", "max")], storage=run_dir,
                    sampler="random")
    with pytest.warns(UserWarning, match="moved to"):
        s3 = ecopt.Study(other, OBJS, storage=run_dir, sampler="random", overwrite=True)
    assert s3.records == []
    s3.close()
    kept = list(run_dir.glob("replaced-*/trials.jsonl"))
    assert len(kept) == 1 and len(kept[0].read_text().splitlines()) == 5


def test_resumed_random_proposals_match_an_uninterrupted_run(tmp_path):
    a = _study(tmp_path / "a", seed=7)
    a.optimize(good, n_trials=6)
    a.close()
    b = _study(tmp_path / "b", seed=7)
    b.optimize(good, n_trials=3)
    b.close()
    b = _study(tmp_path / "b", seed=7)
    b.optimize(good, n_trials=3)
    b.close()
    pa = [r.params for r in ecopt.load_study(tmp_path / "a").records]
    pb = [r.params for r in ecopt.load_study(tmp_path / "b").records]
    assert pa == pb


def test_read_only_study_refuses_writes(run_dir):
    s = _study(run_dir)
    s.optimize(good, n_trials=2)
    s.close()
    ro = ecopt.load_study(run_dir)
    assert ro.readonly and len(ro.records) == 2 and ro.name == "study"
    with pytest.raises(EcoptError, match="read-only"):
        ro.ask()
    assert len(ro.pareto_front()) >= 1


def test_numpy_and_tensor_values_are_accepted():
    import torch

    s = _study()
    t = s.ask()
    r = s.tell(t, {"acc": np.float32(0.5), "energy": torch.tensor(0.25)})
    assert r.state is TrialState.COMPLETE and r.values == {"acc": 0.5, "energy": 0.25}
    assert isinstance(r.values["acc"], float) and not math.isnan(r.values["energy"])


def test_a_reopened_or_loaded_study_knows_why_its_last_optimize_stopped(tmp_path):
    st = _study(tmp_path / "s")
    st.optimize(lambda t: {"acc": t["x"], "energy": 1 - t["x"]}, n_trials=2)
    assert st.stop_reason == "n_trials"
    st.close()
    assert ecopt.load_study(tmp_path / "s").stop_reason == "n_trials"
    reopened = _study(tmp_path / "s")
    assert reopened.stop_reason == "n_trials"
    reopened.close()
    assert _study(tmp_path / "fresh").stop_reason is None


def test_reports_after_tell_are_refused_not_silently_dropped(tmp_path):
    st = _study(tmp_path / "s")
    t = st.ask()
    t.report(0, {"acc": 0.5})
    st.tell(t, {"acc": 0.5, "energy": 1.0})
    with pytest.raises(EcoptError, match=r"report\(\) on trial 0 after it was told \(complete\)"):
        t.report(1, {"acc": 0.6})
    with pytest.raises(EcoptError, match="after it was told"):
        t.set_user_attr("k", 1)
    with pytest.raises(EcoptError, match="after it was told"):
        with t.phase("train"):
            pass  # pragma: no cover
    assert st.records[0].intermediate[-1].step == 0


@pytest.mark.parametrize("huge", [10**400, -(10**400)])
def test_numbers_too_large_for_a_float_are_value_errors(tmp_path, huge):
    with pytest.raises(ValueError, match="energy_budget_j > 0 must hold"):
        _study().optimize(lambda t: {"acc": 1, "energy": 1}, n_trials=1, energy_budget_j=huge)
    with pytest.raises(ValueError, match="threshold must be a finite number"):
        ecopt.Objective("acc", "max", threshold=huge)
    with pytest.raises(ValueError, match="bounds must be finite"):
        ecopt.Float(0, huge) if huge > 0 else ecopt.Float(huge, 0)
    st = _study()
    rec = st.tell(st.ask(), {"acc": huge, "energy": 1.0})
    assert rec.state is TrialState.FAILED and rec.error.type == "ValueError"
    assert "too large for a float" in rec.error.message
