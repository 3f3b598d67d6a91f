"""ecopt import-optuna: real SQLite and journal storages -> ecopt study directories."""

from __future__ import annotations

import json

import pytest

optuna = pytest.importorskip("optuna")

import ecopt  # noqa: E402
from ecopt.cli import main  # noqa: E402
from ecopt.integrations.optuna import import_study, metered  # noqa: E402
from ecopt.storage import StudyStorage  # noqa: E402

optuna.logging.set_verbosity(optuna.logging.ERROR)
pytestmark = pytest.mark.filterwarnings("ignore::optuna.exceptions.ExperimentalWarning",
                                        "ignore:phase .* lasted:RuntimeWarning")


def _mo_objective(trial: optuna.Trial) -> tuple[float, float]:
    x = trial.suggest_float("x", 0.0, 1.0)
    lr = trial.suggest_float("lr", 1e-4, 1e-1, log=True)
    n = trial.suggest_int("n", 2, 10, step=2)
    act = trial.suggest_categorical("act", ["relu", None])
    trial.suggest_float("q", 0.0, 1.0, step=0.25)
    with metered(trial, "inference", samples=100, meter="estimate") as phase:
        sum(i * i for i in range(20000))
        if trial.number == 2:
            raise MemoryError("out of memory")
        if trial.number == 3:
            raise ValueError("diverged")
    trial.set_constraint("mem", x - 0.7)
    trial.set_user_attr("note", f"trial {trial.number}")
    return x + lr + n / 10 + (act is None), phase.samples_per_joule


def _make_mo_study(storage: object) -> optuna.Study:
    study = optuna.create_study(study_name="mo", storage=storage,
                                directions=["minimize", "maximize"],
                                sampler=optuna.samplers.RandomSampler(seed=0))
    study.set_metric_names(["loss", "samples_per_joule"])
    study.optimize(_mo_objective, n_trials=6, catch=(MemoryError, ValueError))
    t = study.ask()  # a trial still running at import time
    t.suggest_float("x", 0.0, 1.0)
    study.enqueue_trial({"x": 0.5})  # waiting: never started
    return study


def test_sqlite_study_becomes_an_ecopt_study_that_show_and_report_read(tmp_path, capsys):
    db = tmp_path / "optuna.db"
    _make_mo_study(f"sqlite:///{db}")
    out = tmp_path / "imported"
    assert main(["import-optuna", f"sqlite:///{db}", str(out), "--study", "mo"]) == 0
    said = capsys.readouterr()
    assert "4 complete, 1 failed, 1 infeasible, 1 running" in said.out
    assert "WAITING" in said.err and "step" in said.err and "repr()" in said.err

    spec = StudyStorage(out, writable=False).read_spec()
    assert spec["objectives"] == [{"name": "loss", "direction": "min", "threshold": None},
                                  {"name": "samples_per_joule", "direction": "max",
                                   "threshold": None}]
    assert spec["space"]["lr"] == {"type": "float", "low": 1e-4, "high": 0.1, "log": True}
    assert spec["space"]["n"] == {"type": "int", "low": 2, "high": 10, "log": False, "step": 2}
    assert spec["space"]["act"] == {"type": "categorical", "choices": ["relu", "None"],
                                    "ordered": False}
    assert spec["space"]["q"]["type"] == "float"  # its step is said not to carry over
    assert spec["constraints"] == [{"name": "constraint_mem", "op": "<=", "bound": 0.0}]
    assert spec["imported_from"]["study_name"] == "mo" and spec["imported_from"]["not_carried"]

    study = ecopt.load_study(out)
    recs = {r.number: r for r in study.records}
    assert sorted(recs) == [0, 1, 2, 3, 4, 5]
    assert recs[2].state.value == "infeasible" and recs[2].error.type == "MemoryError"
    assert recs[3].state.value == "failed" and "diverged" in recs[3].error.message
    done = [r for r in recs.values() if r.state.value == "complete"]
    for r in done:
        ph = r.phases["inference"]
        assert ph.samples == 100 and ph.energy_j > 0 and not ph.measured
        assert {c.source for c in ph.measurement.components.values()} == {
            "estimate-cpu-time", "estimate-ram"}
        assert r.values["samples_per_joule"] == pytest.approx(100 / ph.energy_j)
        assert r.feasible == (r.params["x"] <= 0.7)
        assert r.metrics["constraint_mem"] == pytest.approx(r.params["x"] - 0.7)
        assert r.user_attrs["note"] == f"trial {r.number}" and r.proposed_by == "optuna"
        assert r.started_at.endswith("+00:00") and r.duration_s > 0
    running = [line for line in StudyStorage(out, writable=False).read_running()
               if "number" in line]
    assert [line["number"] for line in running] == [6]

    assert main(["show", str(out)]) == 0
    shown = capsys.readouterr().out
    assert "ESTIMATED" in shown and "samples_per_joule" in shown
    assert main(["report", str(out), "--out", str(tmp_path / "r.html")]) == 0
    assert (tmp_path / "r.html").stat().st_size > 1000
    pytest.importorskip("starlette")
    from ecopt.report.dashboard import dashboard_state

    page = dashboard_state(out)  # what the live page shows
    assert "6" in page["html"]["running"] and "samples_per_joule" in json.dumps(page)


def test_journal_file_single_objective_curves_prunes_and_names(tmp_path, capsys):
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend

    path = tmp_path / "journal.log"
    study = optuna.create_study(study_name="so", direction="minimize",
                                storage=JournalStorage(JournalFileBackend(str(path))),
                                sampler=optuna.samplers.RandomSampler(seed=1),
                                pruner=optuna.pruners.ThresholdPruner(upper=0.5))

    def objective(trial):
        x = trial.suggest_float("x", 0, 1)
        for step in range(3):
            trial.report(x + step * 0.1, step)
            if trial.should_prune():
                raise optuna.TrialPruned()
        return x

    study.optimize(objective, n_trials=6)
    out = tmp_path / "so"
    # A journal file is given by its path; the only study needs no --study.
    assert main(["import-optuna", str(path), str(out), "--objectives", "error"]) == 0
    recs = ecopt.load_study(out).records
    states = {r.state.value for r in recs}
    assert states <= {"complete", "pruned"} and "pruned" in states
    for r, t in zip(recs, study.trials):
        assert [(p.step, p.values) for p in r.intermediate] == [
            (s, {"error": v}) for s, v in sorted(t.intermediate_values.items())]
    assert "learning curves" in capsys.readouterr().err


def test_import_study_api_and_errors(tmp_path):
    db = f"sqlite:///{tmp_path / 'o.db'}"
    _make_mo_study(db)
    res = import_study(db, "mo", tmp_path / "a", objectives=["err", "spj"])
    assert res.counts == {"complete": 4, "failed": 1, "infeasible": 1} and res.running == 1
    assert res.not_imported == {"waiting": 1}
    with pytest.raises(ecopt.errors.EcoptError, match="already holds a study"):
        import_study(db, "mo", tmp_path / "a")
    again = import_study(db, "mo", tmp_path / "a", overwrite=True)  # old files kept aside
    assert list((tmp_path / "a").glob("replaced-*/trials.jsonl")) and again.counts == res.counts
    with pytest.raises(ValueError, match="no study named 'x'.*'mo'"):
        import_study(db, "x", tmp_path / "b")
    with pytest.raises(ValueError, match="name each of the study's 2"):
        import_study(db, "mo", tmp_path / "b", objectives=["one"])
    with pytest.raises(FileNotFoundError, match="no Optuna storage"):
        import_study(str(tmp_path / "missing.log"), None, tmp_path / "b")
    with pytest.raises(ValueError, match="no SQLite file"):
        import_study(f"sqlite:///{tmp_path / 'missing.db'}", None, tmp_path / "b")
    assert not (tmp_path / "missing.db").exists()  # Optuna was not let create it


def test_cli_errors_are_one_line_and_exit_2(tmp_path, capsys):
    assert main(["import-optuna", str(tmp_path / "none.db"), str(tmp_path / "d")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("ecopt import-optuna: error: no Optuna storage") and \
        err.count("\n") == 1
    (tmp_path / "junk.log").write_text("not a journal\n")
    assert main(["import-optuna", str(tmp_path / "junk.log"), str(tmp_path / "d")]) == 2
    assert "ecopt import-optuna: error:" in capsys.readouterr().err


def test_ecopt_sampler_proposals_keep_their_proposer(tmp_path):
    from ecopt.integrations.optuna import EcoptSampler

    db = f"sqlite:///{tmp_path / 'o.db'}"
    study = optuna.create_study(study_name="e", storage=db, directions=["minimize"] * 2,
                                sampler=EcoptSampler(seed=0, n_init=3))
    study.optimize(lambda t: (t.suggest_float("x", 0, 1), 1 - t.suggest_float("y", 0, 1)),
                   n_trials=3)
    recs = ecopt.load_study(import_study(db, "e", tmp_path / "d").path).records
    assert [r.proposed_by for r in recs] == ["sobol", "sobol", "sobol"]  # trial 0: point 0
    assert recs[0].proposal["index"] == 0 and recs[1].proposal["index"] == 1
    json.dumps([r.to_dict() for r in recs])
