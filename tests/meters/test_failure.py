"""A meter failing mid-trial fails that trial, not the study."""

from __future__ import annotations

from typing import Any

import pytest

import ecopt
from ecopt.errors import MeterError
from ecopt.meters import ComponentEnergy, Meter
from ecopt.trial import TrialState


class FlakyMeter(Meter):
    """Fails at the stop of the windows listed in ``fail_at`` (1-based)."""

    name = "flaky"

    def __init__(self, fail_at: set[int]) -> None:
        super().__init__()
        self.fail_at = fail_at
        self.n = 0

    def _start(self) -> Any:
        return None

    def _stop(self, state: Any, duration_s: float) -> dict[str, ComponentEnergy]:
        self.n += 1
        if self.n in self.fail_at:
            raise MeterError("sensor vanished")
        return {"cpu": ComponentEnergy(1.0, "test", True)}


def _study(meter: Meter, run_dir) -> ecopt.Study:
    space = ecopt.SearchSpace({"x": ecopt.Float(0, 1)})
    return ecopt.Study(space, [ecopt.Objective("a", "max"), ecopt.Objective("spj", "max")],
                       storage=run_dir, sampler="random", meter=meter, seed=1)


def _objective(trial: ecopt.Trial) -> dict[str, float]:
    with trial.phase("inference", samples=10):
        pass
    return {"a": trial["x"], "spj": trial.samples_per_joule("inference")}


def test_meter_failure_fails_only_that_trial(run_dir):
    # Each trial closes three windows: its proposal's (Study.ask meters the sampler), its
    # phase, then the whole-call window that would stand in for a trial that opened no
    # phase. The 5th stop is trial 1's phase.
    study = _study(FlakyMeter({5}), run_dir)
    records = study.optimize(_objective, n_trials=3, show_progress=False)
    study.close()
    states = [r.state for r in records]
    assert states == [TrialState.COMPLETE, TrialState.FAILED, TrialState.COMPLETE]
    assert records[1].error.type == "MeterError" and "sensor vanished" in records[1].error.message
    assert ecopt.load_study(run_dir).records[1].state is TrialState.FAILED


def test_gpu_lost_mid_trial_fails_the_trial(run_dir, fake_nvml, hw):
    nv = fake_nvml([hw.FakeGpu()])
    meter = ecopt.meters.get_meter("nvml", counter_period_s=0.0)
    study = _study(meter, run_dir)

    def objective(trial):
        nv.gpus[0].lost = False  # the driver recovered between trials
        with trial.phase("inference", samples=10):
            nv.gpus[0].energy_mj += 1000
            nv.gpus[0].lost = trial.number == 0
        return {"a": trial["x"], "spj": trial.samples_per_joule("inference")}

    records = study.optimize(objective, n_trials=2, show_progress=False)
    study.close()
    assert records[0].state is TrialState.FAILED and "GPU is lost" in records[0].error.message
    assert records[1].state is TrialState.COMPLETE
    assert records[1].phases["inference"].measurement.components["gpu:0"].source == \
        "nvml-energy-counter"
    assert records[1].phases["inference"].energy_j == pytest.approx(1.0)
