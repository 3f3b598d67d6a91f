"""EcoptCallback with a real transformers Trainer on a tiny GPT-2 (CPU, seconds)."""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path

import pytest

pytest.importorskip("transformers")
torch = pytest.importorskip("torch")

import ecopt  # noqa: E402
from ecopt.pruners import Decision, Pruner  # noqa: E402
from ecopt.trial import run_objective  # noqa: E402

from transformers import (  # noqa: E402
    GPT2Config,
    GPT2LMHeadModel,
    Trainer,
    TrainingArguments,
)
from transformers.utils import logging as hf_logging  # noqa: E402

from ecopt.integrations.transformers import EcoptCallback  # noqa: E402

hf_logging.set_verbosity_error()

N_TRAIN, N_EVAL, SEQ, PAD = 24, 8, 8, 2  # the last PAD positions of every sequence are padding


class _Tokens(torch.utils.data.Dataset):
    """Random token sequences with an attention mask that hides the last PAD positions."""

    def __init__(self, n: int, seed: int) -> None:
        g = torch.Generator().manual_seed(seed)
        self.ids = torch.randint(0, 32, (n, SEQ), generator=g)

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        mask = torch.ones(SEQ, dtype=torch.long)
        mask[-PAD:] = 0
        labels = self.ids[i].clone()
        labels[-PAD:] = -100
        return {"input_ids": self.ids[i], "attention_mask": mask, "labels": labels}


def _oom_above(model: GPT2LMHeadModel, max_batch: int) -> GPT2LMHeadModel:
    """Make every forward pass with a batch above ``max_batch`` run out of (CUDA) memory."""

    def hook(module, args, kwargs):
        ids = kwargs.get("input_ids", args[0] if args else None)
        if ids is not None and ids.shape[0] > max_batch:
            raise torch.cuda.OutOfMemoryError(
                f"CUDA out of memory. Tried to allocate 2.00 GiB (batch {ids.shape[0]})")

    model.transformer.register_forward_pre_hook(hook, with_kwargs=True)
    return model


def _model() -> GPT2LMHeadModel:
    torch.manual_seed(0)
    return GPT2LMHeadModel(GPT2Config(vocab_size=32, n_positions=SEQ, n_embd=16, n_layer=1,
                                      n_head=2))


def _trainer(trial: ecopt.Trial, out: Path, model=None, cb: EcoptCallback | None = None,
             **args) -> tuple[Trainer, EcoptCallback]:
    kw = dict(output_dir=str(out), per_device_train_batch_size=int(trial.params.get("batch_size", 4)),
              per_device_eval_batch_size=4, num_train_epochs=2, eval_strategy="epoch",
              save_strategy="no", logging_strategy="no", report_to="none", use_cpu=True,
              disable_tqdm=True, dataloader_num_workers=0, seed=0)
    kw.update(args)
    cb = cb or EcoptCallback(trial)
    trainer = Trainer(model or _model(), TrainingArguments(**kw), train_dataset=_Tokens(N_TRAIN, 0),
                      eval_dataset=_Tokens(N_EVAL, 1), callbacks=[cb])
    return trainer, cb


def _study(path: Path, **kw) -> ecopt.Study:
    space = ecopt.SearchSpace({"batch_size": ecopt.Categorical([4, 8])})
    return ecopt.Study(space, [ecopt.Objective("eval_loss", "min"),
                               ecopt.Objective("samples_per_joule", "max")],
                       storage=path, sampler="random", meter="estimate", **kw)


def _log(path: Path) -> list[dict]:
    return [json.loads(line) for line in (path / "trials.jsonl").read_text().splitlines()]


def test_trainer_phases_counts_reports_and_provenance_reach_the_trial_log(tmp_path):
    def objective(trial: ecopt.Trial) -> dict[str, float]:
        trainer, _ = _trainer(trial, tmp_path / "out")
        trainer.train()
        loss = trainer.evaluate()["eval_loss"]
        trainer.predict(_Tokens(4, 2))
        return {"eval_loss": loss, "samples_per_joule": trial.samples_per_joule("train")}

    with _study(tmp_path / "s") as st:
        st.optimize(objective, n_trials=1, show_progress=False)
    (rec,) = _log(tmp_path / "s")
    assert rec["state"] == "complete", rec["error"]
    ph = rec["phases"]
    assert set(ph) == {"train", "eval", "predict"}  # evaluations are not in train
    assert ph["train"]["samples"] == 2 * N_TRAIN  # two epochs, every example
    # Two evaluations during training and one after: the eval set three times.
    assert ph["eval"]["samples"] == 3 * N_EVAL
    assert ph["predict"]["samples"] == 4
    # train was suspended for each evaluation during training and resumed after it.
    assert ph["train"]["count"] >= 3
    m = rec["metrics"]
    assert m["train_samples"] == 2 * N_TRAIN
    assert m["train_tokens"] == 2 * N_TRAIN * (SEQ - PAD)  # attention-mask tokens only
    assert m["eval_tokens"] == 3 * N_EVAL * (SEQ - PAD)
    for p in ph.values():  # energy with its provenance: the estimate is labelled as such
        assert p["energy_j"] > 0 and p["meter"] == "estimate"
        assert all(c["measured"] is False and c["source"].startswith("estimate")
                   for c in p["components"].values())
    # One report per epoch, at steps 1 and 2, with the Trainer's eval metrics.
    curve = rec["intermediate"]
    assert [c["step"] for c in curve] == [1, 2]
    assert all("eval_loss" in c["values"] and "eval_runtime" not in c["values"] for c in curve)
    assert curve[0]["energy_j"] < curve[1]["energy_j"] <= rec["energy_j"]


def test_token_unit_and_values_fn(tmp_path):
    st = _study(None)
    trial = st.ask()
    cb = EcoptCallback(trial, unit="tokens",
                       values_fn=lambda m: {"perplexity": math.exp(m["eval_loss"])})
    trainer, _ = _trainer(trial, tmp_path / "out", cb=cb, num_train_epochs=1)
    trainer.train()
    assert trial.phases["train"].samples == N_TRAIN * (SEQ - PAD)
    assert trial.phases["eval"].samples == N_EVAL * (SEQ - PAD)
    (point,) = trial.intermediate
    assert set(point.values) == {"perplexity"} and point.values["perplexity"] > 1
    assert trial.samples_per_joule("train") > 0


class _StopAtFirstReport(Pruner):
    name = "stop-at-first"

    def decide(self, trial, history):
        return Decision(True, f"test pruner: stop at step {trial.intermediate[-1].step}")


def test_pruner_stops_training_cleanly_and_the_trial_is_pruned(tmp_path):
    seen: dict[str, object] = {}

    def objective(trial: ecopt.Trial) -> dict[str, float]:
        trainer, cb = _trainer(trial, tmp_path / "out", num_train_epochs=5)
        seen["cb"] = cb
        try:
            trainer.train()
        finally:
            seen["epoch"] = trainer.state.epoch
        raise AssertionError("train() must raise TrialPruned")  # pragma: no cover

    with _study(tmp_path / "s", pruner=_StopAtFirstReport()) as st:
        st.optimize(objective, n_trials=1, show_progress=False)
    (rec,) = _log(tmp_path / "s")
    assert rec["state"] == "pruned"
    assert rec["error"]["type"] == "TrialPruned" and "step 1" in rec["error"]["message"]
    assert seen["epoch"] == pytest.approx(1.0)  # stopped after the first of five epochs
    assert seen["cb"].pruned
    assert [c["step"] for c in rec["intermediate"]] == [1]
    assert rec["values"] == {"eval_loss": rec["intermediate"][0]["values"]["eval_loss"]}
    assert rec["phases"]["train"]["samples"] == N_TRAIN and rec["phases"]["eval"]["energy_j"] > 0


def test_cuda_oom_in_a_step_makes_the_trial_infeasible_and_keeps_its_energy(tmp_path):
    def objective(trial: ecopt.Trial) -> dict[str, float]:
        trainer, _ = _trainer(trial, tmp_path / "out", model=_oom_above(_model(), 4))
        trainer.train()
        return {"eval_loss": trainer.evaluate()["eval_loss"],
                "samples_per_joule": trial.samples_per_joule("train")}

    with _study(tmp_path / "s") as st:
        for bs in (8, 4):
            t = st.ask(params={"batch_size": bs})
            st.tell(t, outcome=run_objective(objective, t))
    big, small = _log(tmp_path / "s")
    assert big["state"] == "infeasible" and big["error"]["type"] == "OutOfMemoryError"
    assert big["user_attrs"]["out_of_memory"] == {
        "phase": "train", "step": 0, "per_device_train_batch_size": 8,
        "per_device_eval_batch_size": 4}
    assert big["phases"]["train"]["energy_j"] > 0  # the energy spent before the OOM is kept
    assert small["state"] == "complete"


def test_standalone_evaluate_is_metered_but_not_reported(tmp_path):
    st = _study(None)
    trial = st.ask()
    trainer, _ = _trainer(trial, tmp_path / "out")
    trainer.evaluate()
    assert set(trial.phases) == {"eval"} and trial.phases["eval"].samples == N_EVAL
    assert trial.intermediate == []


def test_attach_and_bad_arguments(tmp_path, caplog):
    st = _study(None)
    trial = st.ask()
    with pytest.raises(ValueError, match="unit must be"):
        EcoptCallback(trial, unit="bytes")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="step must be"):
        EcoptCallback(trial, step="batch")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="ecopt.Trial"):
        EcoptCallback("trial")  # type: ignore[arg-type]
    cb = EcoptCallback(trial)
    with pytest.raises(ValueError, match="transformers.Trainer"):
        cb.attach(object())  # type: ignore[arg-type]
    trainer, _ = _trainer(trial, tmp_path / "out", cb=cb)
    assert cb.trainer is trainer
    other, _ = _trainer(trial, tmp_path / "out2", cb=EcoptCallback(trial))
    with pytest.raises(ValueError, match="another Trainer"):
        cb.attach(other)
    # A callback added after construction binds at on_train_begin.
    late = EcoptCallback(st.ask())
    t3 = Trainer(_model(), TrainingArguments(output_dir=str(tmp_path / "o3"), num_train_epochs=1,
                                             per_device_train_batch_size=8, eval_strategy="epoch",
                                             report_to="none", use_cpu=True, save_strategy="no",
                                             disable_tqdm=True),
                 train_dataset=_Tokens(8, 0), eval_dataset=_Tokens(4, 1))
    t3.add_callback(late)
    assert late.trainer is None
    with caplog.at_level(logging.WARNING, logger="ecopt"):
        t3.train()
    assert late.trainer is t3 and "could not find" not in caplog.text
    assert set(late.trial.phases) == {"train", "eval"}
