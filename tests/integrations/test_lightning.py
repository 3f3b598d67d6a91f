"""EcoptCallback with a real Lightning Trainer on a tiny model (CPU, seconds)."""

from __future__ import annotations

import json
import logging
import warnings
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
L = pytest.importorskip("lightning.pytorch")

import ecopt  # noqa: E402
from ecopt.integrations.lightning import EcoptCallback  # noqa: E402
from ecopt.pruners import Decision, Pruner  # noqa: E402

N_TRAIN, N_VAL, BATCH = 32, 16, 8

# Lightning's own use of a deprecated torch pytree API; nothing of ours.
pytestmark = pytest.mark.filterwarnings("ignore:.*LeafSpec.*:DeprecationWarning")

for name in ("lightning", "lightning.pytorch", "lightning.fabric"):
    logging.getLogger(name).setLevel(logging.ERROR)
warnings.filterwarnings("ignore", module="lightning")


class _Regressor(L.LightningModule):
    """A linear model; dict batches with token fields so both counts are exercised."""

    def __init__(self, oom_above: int | None = None) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.net = torch.nn.Linear(4, 1)
        self.oom_above = oom_above

    def _loss(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        x = batch["x"]
        if self.oom_above is not None and x.shape[0] > self.oom_above:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 4.00 GiB")
        return torch.nn.functional.mse_loss(self.net(x).squeeze(-1), batch["y"])

    def training_step(self, batch, batch_idx):
        loss = self._loss(batch)
        self.log("train_loss", loss, on_epoch=True, on_step=False, batch_size=len(batch["x"]))
        return loss

    def validation_step(self, batch, batch_idx):
        self.log("val_loss", self._loss(batch), batch_size=len(batch["x"]))

    def test_step(self, batch, batch_idx):
        self.log("test_loss", self._loss(batch), batch_size=len(batch["x"]))

    def predict_step(self, batch, batch_idx):
        return self.net(batch["x"])

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.05)


class _Rows(torch.utils.data.Dataset):
    def __init__(self, n: int, seed: int) -> None:
        g = torch.Generator().manual_seed(seed)
        self.x = torch.randn(n, 4, generator=g)
        self.y = self.x.sum(1)

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        # Three "tokens" of four, the last one padding.
        return {"x": self.x[i], "y": self.y[i], "input_ids": torch.arange(4),
                "attention_mask": torch.tensor([1, 1, 1, 0])}


def _dl(n: int, seed: int, bs: int = BATCH) -> torch.utils.data.DataLoader:
    return torch.utils.data.DataLoader(_Rows(n, seed), batch_size=bs)


def _trainer(cb: EcoptCallback, epochs: int = 2) -> L.Trainer:
    return L.Trainer(max_epochs=epochs, accelerator="cpu", devices=1, logger=False,
                     enable_checkpointing=False, enable_progress_bar=False,
                     enable_model_summary=False, num_sanity_val_steps=1, callbacks=[cb])


def _study(path: Path | None, **kw) -> ecopt.Study:
    space = ecopt.SearchSpace({"batch_size": ecopt.Categorical([8, 16])})
    return ecopt.Study(space, [ecopt.Objective("val_loss", "min"),
                               ecopt.Objective("samples_per_joule", "max")],
                       storage=path, sampler="random", meter="estimate", **kw)


def _log(path: Path) -> list[dict]:
    return [json.loads(line) for line in (path / "trials.jsonl").read_text().splitlines()]


def test_fit_validate_test_predict_phases_counts_reports_and_provenance(tmp_path):
    def objective(trial: ecopt.Trial) -> dict[str, float]:
        trainer = _trainer(EcoptCallback(trial))
        model = _Regressor()
        trainer.fit(model, _dl(N_TRAIN, 0), _dl(N_VAL, 1))
        val = trainer.validate(model, _dl(N_VAL, 1), verbose=False)[0]["val_loss"]
        trainer.test(model, _dl(N_VAL, 2), verbose=False)
        trainer.predict(model, _dl(4, 3))
        return {"val_loss": val, "samples_per_joule": trial.samples_per_joule("train")}

    with _study(tmp_path / "s") as st:
        st.optimize(objective, n_trials=1, show_progress=False)
    (rec,) = _log(tmp_path / "s")
    assert rec["state"] == "complete", rec["error"]
    ph = rec["phases"]
    assert set(ph) == {"train", "eval", "test", "predict"}
    assert ph["train"]["samples"] == 2 * N_TRAIN
    # Sanity check (one batch) + two validations in fit + validate(): eval, never train.
    assert ph["eval"]["samples"] == BATCH + 3 * N_VAL
    assert ph["test"]["samples"] == N_VAL and ph["predict"]["samples"] == 4
    assert ph["train"]["count"] >= 2  # suspended for the first validation, resumed after it
    m = rec["metrics"]
    assert m["train_tokens"] == 3 * 2 * N_TRAIN and m["test_tokens"] == 3 * N_VAL
    for p in ph.values():
        assert p["energy_j"] > 0 and p["meter"] == "estimate"
        assert all(not c["measured"] for c in p["components"].values())
    curve = rec["intermediate"]
    assert [c["step"] for c in curve] == [1, 2]  # one report per epoch, not the sanity check
    # What trainer.callback_metrics holds then: the epoch's train loss only from epoch 2 on
    # (Lightning validates before it closes the training epoch).
    assert "val_loss" in curve[0]["values"] and {"val_loss", "train_loss"} <= set(curve[1]["values"])


def test_token_unit_and_values_fn(tmp_path):
    trial = _study(None).ask()
    cb = EcoptCallback(trial, unit="tokens", values_fn=lambda m: {"val_loss": m["val_loss"]},
                       step="global_step")
    _trainer(cb, epochs=1).fit(_Regressor(), _dl(N_TRAIN, 0), _dl(N_VAL, 1))
    assert trial.phases["train"].samples == 3 * N_TRAIN
    (point,) = trial.intermediate
    assert set(point.values) == {"val_loss"} and point.step == N_TRAIN // BATCH


class _StopAtFirstReport(Pruner):
    name = "stop-at-first"

    def decide(self, trial, history):
        return Decision(True, f"test pruner: stop at step {trial.intermediate[-1].step}")


def test_pruner_stops_fit_cleanly_and_the_trial_is_pruned(tmp_path):
    seen: dict[str, object] = {}

    def objective(trial: ecopt.Trial) -> dict[str, float]:
        cb = EcoptCallback(trial)
        trainer = _trainer(cb, epochs=6)
        seen["cb"], seen["trainer"] = cb, trainer
        trainer.fit(_Regressor(), _dl(N_TRAIN, 0), _dl(N_VAL, 1))
        raise AssertionError("fit() must raise TrialPruned")  # pragma: no cover

    with _study(tmp_path / "s", pruner=_StopAtFirstReport()) as st:
        st.optimize(objective, n_trials=1, show_progress=False)
    (rec,) = _log(tmp_path / "s")
    assert rec["state"] == "pruned"
    assert "step 1" in rec["error"]["message"]
    assert seen["cb"].pruned and seen["trainer"].current_epoch == 1  # one of six epochs
    assert rec["phases"]["train"]["samples"] == N_TRAIN
    assert [c["step"] for c in rec["intermediate"]] == [1]
    assert rec["values"] == {"val_loss": rec["intermediate"][0]["values"]["val_loss"]}


def test_cuda_oom_in_a_step_makes_the_trial_infeasible_and_keeps_its_energy(tmp_path):
    def objective(trial: ecopt.Trial) -> dict[str, float]:
        trainer = _trainer(EcoptCallback(trial))
        bs = int(trial.params["batch_size"])
        trainer.fit(_Regressor(oom_above=8), _dl(N_TRAIN, 0, bs), _dl(N_VAL, 1, 8))
        return {"val_loss": float(trainer.callback_metrics["val_loss"]),
                "samples_per_joule": trial.samples_per_joule("train")}

    with _study(tmp_path / "s") as st:
        for bs in (16, 8):
            t = st.ask(params={"batch_size": bs})
            st.tell(t, outcome=ecopt.trial.run_objective(objective, t))
    big, small = _log(tmp_path / "s")
    assert big["state"] == "infeasible" and big["error"]["type"] == "OutOfMemoryError"
    assert big["user_attrs"]["out_of_memory"] == {"phase": "train", "step": 0, "epoch": 0}
    assert big["phases"]["train"]["energy_j"] > 0 and big["phases"]["eval"]["energy_j"] > 0
    assert small["state"] == "complete", small["error"]


def test_bad_arguments():
    trial = _study(None).ask()
    with pytest.raises(ValueError, match="unit must be"):
        EcoptCallback(trial, unit="rows")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="step must be"):
        EcoptCallback(trial, step="batch")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="values_fn must be callable"):
        EcoptCallback(trial, values_fn=3)  # type: ignore[arg-type]
