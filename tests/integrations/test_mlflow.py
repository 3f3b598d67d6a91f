"""MLflowLogger against a real local MLflow store (sqlite in a temp dir), read back."""

from __future__ import annotations

import logging
import time

import pytest

pytest.importorskip("mlflow")

import ecopt  # noqa: E402
from ecopt.integrations.mlflow import MLflowLogger, run_status  # noqa: E402
from ecopt.pruners import Decision, Pruner  # noqa: E402
from ecopt.trial import TrialState  # noqa: E402

for name in ("mlflow", "alembic", "sqlalchemy"):
    logging.getLogger(name).setLevel(logging.WARNING)

# MLflow's own use of a deprecated SQLAlchemy loader; nothing of ours.
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning:mlflow.*",
                                        "ignore:.*noload.*")


def _spin(seconds: float) -> None:
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


class _PruneTrial2(Pruner):
    name = "prune-trial-2"

    def decide(self, trial, history):
        return Decision(trial.number == 2 and trial.intermediate[-1].step >= 1, "test pruner")


def objective(trial: ecopt.Trial) -> dict[str, float]:
    if trial.number == 1:
        raise RuntimeError("boom <b>")
    for step in range(3):
        with trial.phase("train", samples=10):
            _spin(0.01)
        trial.report(step, {"loss": 1.0 / (step + 1 + trial.params["x"])})
        if trial.should_stop():
            raise ecopt.TrialPruned()
    with trial.phase("inference", samples=100):
        _spin(0.01)
    return {"loss": 1.0 / (3 + trial.params["x"]),
            "samples_per_joule": trial.samples_per_joule("inference")}


@pytest.mark.slow
def test_each_trial_becomes_a_run_with_params_energy_provenance_state_and_curve(tmp_path,
                                                                               monkeypatch):
    monkeypatch.chdir(tmp_path)  # MLflow's default artifact folder is ./mlruns
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    space = ecopt.SearchSpace({"x": ecopt.Float(0, 1), "name": ecopt.Categorical(["a", "b c"])})
    logger = MLflowLogger(uri, tags={"team": "green"})
    with ecopt.Study(space, [ecopt.Objective("loss", "min"),
                             ecopt.Objective("samples_per_joule", "max")],
                     storage=tmp_path / "s", sampler="random", meter="estimate",
                     name="mlflow-demo", pruner=_PruneTrial2()) as st:
        st.optimize(objective, n_trials=3, show_progress=False, callbacks=[logger])
        records = {r.number: r for r in st.records}
    assert logger.flush(120) and logger.failed == []

    # Read everything back through a fresh client on the same store.
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name("mlflow-demo")
    assert exp is not None and exp.tags["ecopt.objectives"] == "loss (min), samples_per_joule (max)"
    runs = {int(r.data.tags["ecopt.trial_number"]): r
            for r in client.search_runs([exp.experiment_id])}
    assert set(runs) == {0, 1, 2}
    ok, failed, pruned = runs[0], runs[1], runs[2]

    rec = records[0]
    assert ok.info.run_name == "trial-0" and ok.info.status == "FINISHED"
    assert ok.data.params == {"x": str(rec.params["x"]), "name": str(rec.params["name"])}
    d = ok.data
    assert d.metrics["loss"] == pytest.approx(rec.values["loss"])
    assert d.metrics["samples_per_joule"] == pytest.approx(rec.values["samples_per_joule"])
    assert d.metrics["energy_j"] == pytest.approx(rec.energy_j)
    for ph in ("train", "inference"):
        p = rec.phases[ph]
        assert d.metrics[f"phase.{ph}.energy_j"] == pytest.approx(p.energy_j)
        assert d.metrics[f"phase.{ph}.samples"] == p.samples
        assert d.metrics[f"phase.{ph}.measured"] == 0.0
        assert d.tags[f"ecopt.phase.{ph}.measured"] == "false"
        srcs = d.tags[f"ecopt.phase.{ph}.source"]
        assert srcs == ";".join(f"{c}={e.source}" for c, e in p.measurement.components.items())
        assert "estimate" in srcs
        for comp, c in p.measurement.components.items():
            assert d.metrics[f"phase.{ph}.{comp.replace(':', '_')}.energy_j"] == \
                pytest.approx(c.energy_j)
    assert d.tags["ecopt.state"] == "complete" and d.tags["ecopt.energy_measured"] == "false"
    assert d.tags["ecopt.energy_meter"] == "estimate" and d.tags["team"] == "green"
    assert d.tags["ecopt.proposed_by"] == rec.proposed_by
    # The learning curve as step metrics, the final value latest.
    hist = client.get_metric_history(ok.info.run_id, "loss")
    curve = sorted((m.step, m.value) for m in hist)
    assert [s for s, _ in curve][:3] == [0, 1, 2]
    assert [v for _, v in curve[:3]] == pytest.approx([i.values["loss"] for i in rec.intermediate])
    energy = sorted(client.get_metric_history(ok.info.run_id, "curve.energy_j"),
                    key=lambda m: m.step)
    assert [m.value for m in energy] == pytest.approx([i.energy_j for i in rec.intermediate])
    start = ok.info.start_time
    assert ok.info.end_time - start == pytest.approx(rec.duration_s * 1000, abs=2)

    assert failed.info.status == "FAILED" and failed.data.tags["ecopt.state"] == "failed"
    assert failed.data.tags["ecopt.error_type"] == "RuntimeError"
    assert failed.data.tags["ecopt.error_message"] == "boom <b>"
    assert "loss" not in failed.data.metrics

    assert pruned.info.status == "KILLED" and pruned.data.tags["ecopt.state"] == "pruned"
    assert pruned.data.metrics["loss"] == pytest.approx(records[2].values["loss"])
    # Its curve is the two reports; the final value is the last one (MLflow keeps a point
    # logged twice at the same step, time and value once).
    hist = client.get_metric_history(pruned.info.run_id, "loss")
    assert sorted({m.step for m in hist}) == [0, 1]
    assert max(hist, key=lambda m: (m.step, m.timestamp)).value == pytest.approx(records[2].values["loss"])

    # Back-filling the same study logs nothing twice; a new experiment gets every trial.
    assert logger.log_study(tmp_path / "s") == []
    other = MLflowLogger(uri, experiment_name="copy", run_name="t{number}-{state}")
    ids = other.log_study(tmp_path / "s")
    assert len(ids) == 3
    names = sorted(r.info.run_name for r in client.search_runs(
        [client.get_experiment_by_name("copy").experiment_id]))
    assert names == ["t0-complete", "t1-failed", "t2-pruned"]


def test_status_mapping_and_bad_run_name():
    assert run_status(TrialState.COMPLETE) == "FINISHED"
    assert run_status(TrialState.PRUNED) == "KILLED"
    assert run_status(TrialState.INFEASIBLE) == "FAILED"
    with pytest.raises(ValueError, match="run_name may use only"):
        MLflowLogger("sqlite:///unused.db", run_name="trial-{trial}")


def _silent_server():
    """A TCP server that accepts connections and never answers (a hung tracking server)."""
    import socket

    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(16)
    return srv


@pytest.mark.parametrize("down", ["refused", "hung"])
def test_a_down_tracking_server_never_stalls_the_study(tmp_path, caplog, down):
    # MLflow's HTTP client retries a down server for about four minutes per call.
    import socket
    import time

    if down == "refused":
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()  # nothing listens there: connection refused
        srv = None
    else:
        srv = _silent_server()
        port = srv.getsockname()[1]
    logger = MLflowLogger(f"http://127.0.0.1:{port}", timeout_s=0.5)
    space = ecopt.SearchSpace({"x": ecopt.Float(0, 1)})
    t0 = time.monotonic()
    with caplog.at_level("WARNING", logger="ecopt"):
        with ecopt.Study(space, [ecopt.Objective("a", "min"), ecopt.Objective("b", "min")],
                         storage=tmp_path / "s", sampler="random", meter="estimate") as st:
            st.optimize(lambda t: {"a": t["x"], "b": 1 - t["x"]}, n_trials=4,
                        show_progress=False, callbacks=[logger])
            n = len(st.records)
    took = time.monotonic() - t0
    assert n == 4  # every trial saved
    # One bounded wait (the first trial), then no waiting while MLflow is behind.
    assert took < 30, took
    warned = [r for r in caplog.records if "MLflow" in r.getMessage()]
    assert len(warned) == 1, [r.getMessage() for r in warned]
    assert "log_study" in warned[0].getMessage() and "trials are saved" in warned[0].getMessage()
    if srv is not None:
        srv.close()


def test_timeout_s_must_be_positive():
    with pytest.raises(ValueError, match="timeout_s > 0 must hold"):
        MLflowLogger("sqlite:///unused.db", timeout_s=0)
