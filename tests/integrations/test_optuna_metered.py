"""metered(): ecopt phases inside an Optuna objective, kept in the trial's user attributes."""

from __future__ import annotations

import json
import time

import pytest

optuna = pytest.importorskip("optuna")

from ecopt.errors import EcoptError  # noqa: E402
from ecopt.integrations.optuna import MeteredPhase, metered  # noqa: E402
from ecopt.integrations.optuna.metering import process_meter  # noqa: E402
from ecopt.meters import EstimateMeter  # noqa: E402
from ecopt.trial import PhaseRecord  # noqa: E402

optuna.logging.set_verbosity(optuna.logging.ERROR)


def _spin(cpu_s: float) -> None:
    end = time.thread_time() + cpu_s
    while time.thread_time() < end:
        pass


def test_samples_per_joule_is_an_objective_and_the_phase_is_in_user_attrs(tmp_path):
    storage = f"sqlite:///{tmp_path / 'o.db'}"
    study = optuna.create_study(directions=["maximize", "maximize"], storage=storage,
                                sampler=optuna.samplers.RandomSampler(seed=0))

    def objective(trial):
        x = trial.suggest_float("x", 0, 1)
        with metered(trial, "train", meter="estimate"):
            _spin(0.02)
        with metered(trial, "inference", samples=500, meter="estimate") as phase:
            _spin(0.03)
        return x, phase.samples_per_joule

    study.optimize(objective, n_trials=2)
    for t in optuna.load_study(study_name=study.study_name, storage=storage).trials:
        inf = t.user_attrs["ecopt.phase.inference"]
        assert inf["samples"] == 500 and inf["count"] == 1
        assert inf["energy_j"] > 0 and inf["duration_s"] >= 0.03
        assert inf["samples_per_joule"] == pytest.approx(500 / inf["energy_j"])
        assert t.values[1] == pytest.approx(inf["samples_per_joule"])
        # Provenance: an estimate, and it says so, component by component.
        assert inf["measured"] is False and inf["meter"] == "estimate"
        assert inf["source"] == {"cpu": "estimate-cpu-time", "ram": "estimate-ram"}
        assert inf["components"]["cpu"]["measured"] is False
        train = t.user_attrs["ecopt.phase.train"]
        assert train["samples"] is None and train["samples_per_joule"] is None
        # What ecopt import-optuna reads back: ecopt's own phase record.
        rec = PhaseRecord.from_dict("inference", inf)
        assert rec.energy_j == pytest.approx(inf["energy_j"]) and rec.samples == 500
        json.dumps(t.user_attrs)  # JSON-able for every storage


def test_repeated_phases_add_up_and_phases_do_not_nest():
    trial = optuna.trial.FixedTrial({"x": 1.0})
    meter = EstimateMeter()
    for _ in range(2):
        with metered(trial, "eval", samples=10, meter=meter) as phase:
            phase.add_samples(5)
            _spin(0.01)
    assert isinstance(phase, MeteredPhase)
    rec = trial.user_attrs["ecopt.phase.eval"]
    assert rec["count"] == 2 and rec["samples"] == 30
    assert phase.samples == 30 and phase.energy_j == pytest.approx(rec["energy_j"])
    with metered(trial, "train", meter=meter):
        with pytest.raises(EcoptError, match="do not nest"):
            with metered(trial, "inner", meter=meter):
                pass
    assert "ecopt.phase.inner" not in trial.user_attrs
    with metered(trial, "after", meter=meter):  # the outer phase closed cleanly
        pass


def test_a_block_that_raises_still_records_its_energy_and_notes_the_error():
    study = optuna.create_study(directions=["minimize", "minimize"])

    def objective(trial):
        trial.suggest_float("x", 0, 1)
        with metered(trial, "train", samples=8, meter="estimate"):
            _spin(0.01)
            if trial.number == 0:
                raise RuntimeError("CUDA out of memory. Tried to allocate 2 GiB")
            raise ValueError("bad batch")

    study.optimize(objective, n_trials=2, catch=(RuntimeError, ValueError))
    oom, bad = study.trials
    assert oom.state == bad.state == optuna.trial.TrialState.FAIL
    assert oom.user_attrs["ecopt.phase.train"]["raised"] == "RuntimeError"
    assert oom.user_attrs["ecopt.phase.train"]["energy_j"] > 0
    assert oom.user_attrs["ecopt.error"] == {
        "type": "RuntimeError", "message": "CUDA out of memory. Tried to allocate 2 GiB",
        "phase": "train", "out_of_memory": True}
    assert bad.user_attrs["ecopt.error"]["out_of_memory"] is False


def test_the_meter_is_built_once_per_process_and_bad_input_is_refused():
    assert process_meter("estimate") is process_meter("estimate")
    assert process_meter("wallclock") is not process_meter("estimate")
    trial = optuna.trial.FixedTrial({})
    with pytest.raises(ValueError, match="non-negative integer"):
        with metered(trial, "x", samples=-1):
            pass
    with pytest.raises(ValueError, match="non-empty string"):
        with metered(trial, "", meter="estimate"):
            pass
    with pytest.raises(ValueError, match="optuna Trial"):
        with metered(object(), "x"):
            pass
    with pytest.raises(ValueError, match="unknown meter"):
        with metered(trial, "x", meter="nope"):
            pass
    with metered(trial, "timing", samples=3, meter="wallclock") as phase:
        pass
    with pytest.raises(ValueError, match="samples/J is undefined"):
        phase.samples_per_joule
    assert trial.user_attrs["ecopt.phase.timing"]["samples_per_joule"] is None


def test_queued_gpu_work_is_waited_for_before_the_window_closes(monkeypatch):
    import torch

    events: list[str] = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a, **k: events.append("sync"))

    class Recording(EstimateMeter):
        def _stop(self, state, duration_s):
            events.append("stop")
            return super()._stop(state, duration_s)

    with metered(optuna.trial.FixedTrial({}), "inference", samples=1, meter=Recording()):
        events.append("work")
    # The window ends only after the queued work is done (the meter may sync at its
    # start too, as ecopt's phases do).
    work, stop = events.index("work"), events.index("stop")
    assert "sync" in events[work + 1:stop] and events[-1] == "stop"
