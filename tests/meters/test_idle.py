"""Study-level idle power: measured once, recorded, optionally subtracted with raw kept."""

from __future__ import annotations

import json

import pytest

import ecopt
from ecopt.meters import ComponentEnergy, IdleSubtracted, Meter, measure_idle


class ConstantPowerMeter(Meter):
    """``watts`` per component over every window (a power source the test controls)."""

    name = "const"

    def __init__(self, watts: dict[str, float]) -> None:
        super().__init__()
        self.watts = watts

    def _start(self):
        return None

    def _stop(self, state, duration_s):
        return {k: ComponentEnergy(w * duration_s, "test", True) for k, w in self.watts.items()}


def _space():
    return ecopt.SearchSpace({"x": ecopt.Float(0, 1)})


OBJ = [ecopt.Objective("a", "max"), ecopt.Objective("b", "max")]


def test_measure_idle_reports_power_per_component():
    rec = measure_idle(ConstantPowerMeter({"gpu:0": 60.0, "cpu": 20.0}), 0.05)
    assert rec["power_w"] == pytest.approx(80.0)
    assert rec["components"]["gpu:0"]["power_w"] == pytest.approx(60.0)
    assert rec["measured"] is True and rec["meter"] == "const" and rec["seconds"] >= 0.05
    with pytest.raises(ValueError, match="idle seconds"):
        measure_idle(ConstantPowerMeter({}), 0)


def test_idle_recorded_and_subtracted_with_raw_kept(run_dir):
    meter = ConstantPowerMeter({"gpu:0": 100.0})
    study = ecopt.Study(_space(), OBJ, storage=run_dir, sampler="random",
                        meter=IdleSubtracted(meter, idle_s=0.05))
    meter.watts["gpu:0"] = 250.0  # under load: 150 W above idle

    def objective(trial):
        with trial.phase("train"):
            pass
        return {"a": 1.0, "b": trial.energy_j()}

    rec = study.optimize(objective, n_trials=1, show_progress=False)[0]
    study.close()
    spec = json.loads((run_dir / "study.json").read_text())
    assert spec["idle"]["power_w"] == pytest.approx(100.0) and spec["idle"]["subtracted"] is True
    assert spec["meter"]["idle_subtracted"] is True
    m = rec.phases["train"].measurement
    d = m.duration_s
    assert m.components["gpu:0"].energy_j == pytest.approx(150.0 * d)
    assert m.extras["raw_energy_j"] == pytest.approx(250.0 * d)
    assert m.extras["raw_energy_j/gpu:0"] == pytest.approx(250.0 * d)
    assert m.extras["idle_energy_j"] == pytest.approx(100.0 * d)
    assert rec.values["b"] == pytest.approx(150.0 * d)  # the objective saw net energy too
    assert "raw" in m.components["gpu:0"].note
    # Re-opening keeps the study's idle record (not re-measured).
    again = ecopt.Study(_space(), OBJ, storage=run_dir, sampler="random",
                        meter=IdleSubtracted(ConstantPowerMeter({"gpu:0": 1.0}), idle_s=0.05))
    assert again.idle["measured_at"] == spec["idle"]["measured_at"]
    assert again.idle["power_w"] == pytest.approx(100.0)
    again.close()
    assert ecopt.load_study(run_dir).idle["power_w"] == pytest.approx(100.0)


def test_idle_without_subtraction_and_bad_input(run_dir):
    study = ecopt.Study(_space(), OBJ, sampler="random",
                        meter=IdleSubtracted(ConstantPowerMeter({"cpu": 10.0}), idle_s=0.02,
                                             subtract=False))
    assert study.idle["subtracted"] is False and study.idle["power_w"] == pytest.approx(10.0)
    t = study.ask()
    with t.phase("p"):
        pass
    assert "raw_energy_j" not in t.measurement("p").extras
    with pytest.raises(ValueError, match="subtracting idle power needs an idle measurement: "
                                         "pass idle_s > 0"):
        ecopt.Study(_space(), OBJ, sampler="random", meter=IdleSubtracted("estimate", idle_s=0))
    with pytest.raises(ValueError, match="idle_s must be a finite number >= 0, got -1"):
        IdleSubtracted("estimate", idle_s=-1)
    with pytest.raises(ValueError, match="subtract must be True or False"):
        IdleSubtracted("estimate", subtract="yes")  # type: ignore[arg-type]
    # A study that failed to open released the directory's lock.
    with pytest.raises(ValueError, match="needs an idle measurement"):
        ecopt.Study(_space(), OBJ, storage=run_dir, sampler="random",
                    meter=IdleSubtracted("estimate", idle_s=0))
    ecopt.Study(_space(), OBJ, storage=run_dir, sampler="random", meter="estimate").close()


def test_used_alone_it_measures_idle_before_its_first_window():
    meter = ConstantPowerMeter({"gpu:0": 40.0})
    idle = IdleSubtracted(meter, idle_s=0.02)
    w = idle.start()
    meter.watts["gpu:0"] = 100.0
    m = idle.stop(w)
    assert idle.idle["power_w"] == pytest.approx(40.0)
    assert m.components["gpu:0"].energy_j == pytest.approx(60.0 * m.duration_s)


def test_deprecated_study_keywords_still_work_and_say_where_the_option_went(run_dir):
    with pytest.warns(DeprecationWarning, match=r"idle power belongs to the meter; pass "
                                                r"meter=ecopt.meters.IdleSubtracted"):
        study = ecopt.Study(_space(), OBJ, storage=run_dir, sampler="random",
                            meter=ConstantPowerMeter({"cpu": 10.0}), idle_s=0.02,
                            subtract_idle=True)
    assert study.idle["subtracted"] is True and isinstance(study.meter, IdleSubtracted)
    study.close()
    with pytest.warns(DeprecationWarning), pytest.raises(ValueError, match="idle_s must be"):
        ecopt.Study(_space(), OBJ, sampler="random", meter="estimate", idle_s=-1)
    with pytest.warns(DeprecationWarning, match=r"the option belongs to the sampler; pass "
                                                r"sampler=ecopt.samplers.QLogNEHVISampler\("
                                                r"cost_aware=True\)"):
        study = ecopt.Study(_space(), OBJ, cost_aware=True, meter="estimate")
    assert study.sampler.cost_aware is True
