"""Progress bar of Study.optimize (a callback) and the trials DataFrame columns."""

from __future__ import annotations

import io
import logging

import pytest

import ecopt
from ecopt.callbacks import ProgressBar
from ecopt.fmt import fmt_number
from ecopt.meters.base import WallClockMeter

SPACE = ecopt.SearchSpace({"x": ecopt.Float(0, 1), "c": ecopt.Categorical(["a", "b"])})
OBJS = [ecopt.Objective("acc", "max"), ecopt.Objective("samples_per_joule", "max")]


def objective(trial):
    if trial["x"] > 0.9:
        raise RuntimeError("diverged")
    with trial.phase("train"):
        sum(range(2000))
    trial.repeat_in_phase("inference", lambda: sum(range(1000)), samples_per_call=10)
    trial.set_metric("loss", 1 - trial["x"])
    return {"acc": trial["x"], "samples_per_joule": trial.samples_per_joule("inference")}


def test_bar_shows_trials_hypervolume_and_estimated_energy(tmp_path):
    with ecopt.Study(SPACE, OBJS, storage=tmp_path / "s", sampler="random",
                     meter="estimate", seed=0) as s:
        recs = s.optimize(objective, n_trials=4, show_progress=False)
        buf = io.StringIO()
        p = ProgressBar(enabled=True, file=buf)
        p.on_start(s, 4)
        # A resumed study: the energy spent earlier (trials + proposals) counts from the start.
        assert p.energy_j == pytest.approx(sum(r.energy_j + r.proposal["search"]["energy_j"]
                                               for r in recs))
        p.energy_j = 0.0
        for r in recs:
            p(s, r)
        p.on_end(s, "n_trials")
        p.close()
    text = buf.getvalue()
    assert "4/4" in text and "ecopt s" in text
    assert f"hv={fmt_number(s.hypervolume())}" in text  # the one number format
    assert f"front={len(s.best_trials())}" in text
    assert "J (estimated)" in text
    spent = sum(r.energy_j + r.proposal["search"]["energy_j"] for r in recs)
    assert p.energy_label == f"{spent:.4g} J (estimated)"


def test_optimize_progress_goes_to_stderr_and_quiet_mode(tmp_path, capsys, monkeypatch):
    with ecopt.Study(SPACE, OBJS, sampler="random", meter="estimate") as s:
        s.optimize(objective, n_trials=2, show_progress=True)
        err = capsys.readouterr().err
        assert "2/2" in err and "energy=" in err and "(estimated)" in err
        s.optimize(objective, n_trials=2, show_progress=False)
        assert capsys.readouterr().err == ""
        monkeypatch.setenv("ECOPT_QUIET", "1")
        monkeypatch.setattr("sys.stderr.isatty", lambda: True, raising=False)
        p = ProgressBar()
        p.on_start(s, 1)
        assert p._bar is None


def test_lines_mode_writes_one_plain_line_per_finished_trial():
    # For pipes and log files, where a bar is never redrawn (issue 28: `ecopt quickstart | tee`
    # printed nothing until the end).
    buf = io.StringIO()
    with ecopt.Study(SPACE, OBJS, sampler="random", meter="estimate", name="s", seed=2) as s:
        s.optimize(objective, n_trials=3, show_progress=False,
                   callbacks=[ProgressBar(enabled=True, file=buf, lines=True)])
        s.optimize(objective, n_trials=1, show_progress=False,
                   callbacks=[ProgressBar(enabled=False, file=buf, lines=True)])
    lines = buf.getvalue().splitlines()
    assert len(lines) == 3 and "\r" not in buf.getvalue()
    for k, line in enumerate(lines):
        assert line.startswith(f"ecopt s: trial {k} ") and f"({k + 1}/3): hv=" in line
        assert "energy=" in line and "(estimated)" in line


def test_no_energy_meter_says_na_and_logs_each_trial(caplog):
    with ecopt.Study(SPACE, [ecopt.Objective("acc", "max")], sampler="random",
                     meter=WallClockMeter()) as s:
        with caplog.at_level(logging.INFO, logger="ecopt"):
            s.optimize(lambda t: {"acc": t["x"]}, n_trials=2, show_progress=False)
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("trial ")]
    assert len(lines) == 2 and "energy=n/a" in lines[-1] and "(2/2)" in lines[-1]


def test_dataframe_columns_are_stable(tmp_path):
    with ecopt.Study(SPACE, OBJS, [ecopt.Constraint("loss", "<=", 0.8)], storage=tmp_path / "s",
                     sampler="random", meter="estimate", seed=1) as s:
        s.optimize(objective, n_trials=6, show_progress=False)
        df = s.trials_dataframe()
    assert list(df.columns) == [
        "number", "state", "feasible", "proposed_by", "started_at", "duration_s", "energy_j",
        "energy_measured", "params_x", "params_c", "values_acc", "values_samples_per_joule",
        "metrics_loss", "metrics_inference_calls",
        "phase_train_duration_s", "phase_train_energy_j", "phase_train_source",
        "phase_train_measured",
        "phase_inference_duration_s", "phase_inference_energy_j", "phase_inference_source",
        "phase_inference_measured",
        "error_type", "error_message", "host", "worker", "device"]
    assert len(df) == 6 and list(df["number"]) == list(range(6))
    ok = df[df["state"] == "complete"]
    assert (ok["phase_inference_source"] == "cpu=estimate-cpu-time;ram=estimate-ram").all()
    assert not ok["energy_measured"].any()
    front = ecopt.load_study(tmp_path / "s").pareto_front()
    assert list(front.columns) == list(df.columns)


def test_progress_says_when_the_inferred_reference_point_moved():
    """A trial that changes the front can move the inferred reference point and lower the
    hypervolume; the progress line says so, and only then."""
    space = ecopt.SearchSpace({"x": ecopt.Float(0.0, 1.0)})
    study = ecopt.Study(space, [ecopt.Objective("f1", "min"), ecopt.Objective("f2", "min")],
                        storage=None, sampler="random", meter=WallClockMeter())
    bar = ProgressBar(enabled=False)
    bar.on_start(study, None)

    def tell(f1: float, f2: float) -> str:
        study.tell(study.ask(), {"f1": f1, "f2": f2})
        return bar.postfix()

    tell(1.0, 10.0)
    tell(10.0, 1.0)  # the front widens: its point moves too
    assert "moved" not in tell(9.0, 9.5)  # dominated: same front, same point
    hv_before = study.hypervolume()
    moved = tell(0.5, 0.5)  # dominates both: the front and its inferred point change
    assert "(reference point moved)" in moved
    assert study.hypervolume() != hv_before
    assert "moved" not in tell(5.0, 5.0)
