"""Tune a small causal LM with the Hugging Face Trainer: perplexity vs training tokens per joule.

The model is a small Llama architecture built from a config (random weights:
nothing is downloaded), trained on CPU for one epoch on a synthetic corpus
(token sequences from a fixed random Markov chain, so there is something to
learn and the best achievable perplexity is known to be about
``exp(entropy)`` of the chain). The study searches batch size, precision
(float32 or bfloat16 autocast) and learning rate for:

* ``perplexity`` (min): ``exp(eval_loss)`` on held-out sequences;
* ``tokens_per_joule`` (max): training tokens (attention-mask ones) per joule of
  the ``train`` phase.

The one ecopt line in the training code is ``callbacks=[EcoptCallback(trial,
unit="tokens")]``: it meters ``train`` and ``eval`` as separate phases, counts
tokens, reports perplexity after each epoch (a study with a pruner can stop a
trial there) and makes an out-of-memory configuration an infeasible trial.

Run (a few minutes on 2 CPU cores)::

    python examples/tune_causal_lm.py --trials 10 --out runs/tune_causal_lm
    ecopt dashboard runs/tune_causal_lm     # watch it from another terminal

On a machine without an energy counter the energy is estimated from CPU
time (labelled so everywhere): tokens/J then ranks configurations by the CPU
time they burn per token.
"""

from __future__ import annotations

import argparse
import math
import tempfile
from pathlib import Path

import torch
from transformers import (
    AutoModelForCausalLM,
    LlamaConfig,
    PrinterCallback,
    Trainer,
    TrainingArguments,
)
from transformers.utils import logging as hf_logging

import ecopt
from ecopt.integrations.transformers import EcoptCallback

VOCAB, SEQ = 96, 32


def markov_corpus(n: int, seed: int) -> torch.Tensor:
    """``(n, SEQ)`` token ids from a fixed random Markov chain (4 likely successors per token)."""
    g = torch.Generator().manual_seed(1234)  # the chain: the same for train and eval
    logits = torch.full((VOCAB, VOCAB), -4.0)
    for t in range(VOCAB):
        logits[t, torch.randperm(VOCAB, generator=g)[:4]] = 2.0
    probs = logits.softmax(-1)
    g.manual_seed(seed)  # the sequences
    out = torch.empty(n, SEQ, dtype=torch.long)
    out[:, 0] = torch.randint(0, VOCAB, (n,), generator=g)
    for i in range(1, SEQ):
        out[:, i] = torch.multinomial(probs[out[:, i - 1]], 1, generator=g).squeeze(1)
    return out


class Sequences(torch.utils.data.Dataset):
    def __init__(self, ids: torch.Tensor) -> None:
        self.ids = ids

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        ids = self.ids[i]
        return {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": ids}


TRAIN, EVAL = Sequences(markov_corpus(768, seed=0)), Sequences(markov_corpus(128, seed=1))


def build_model() -> torch.nn.Module:
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=VOCAB, hidden_size=64, intermediate_size=128,
                      num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                      max_position_embeddings=SEQ)
    return AutoModelForCausalLM.from_config(cfg)


def objective(trial: ecopt.Trial) -> dict[str, float]:
    """Train one epoch with the trial's batch size, precision and learning rate."""
    with tempfile.TemporaryDirectory() as out:
        args = TrainingArguments(
            output_dir=out, num_train_epochs=1, eval_strategy="epoch", save_strategy="no",
            per_device_train_batch_size=int(trial["batch_size"]), per_device_eval_batch_size=64,
            learning_rate=float(trial["lr"]), bf16=trial["precision"] == "bfloat16",
            use_cpu=True, report_to="none", disable_tqdm=True, logging_strategy="no", seed=0)
        trainer = Trainer(build_model(), args, train_dataset=TRAIN, eval_dataset=EVAL,
                          callbacks=[EcoptCallback(trial, unit="tokens", values_fn=lambda m: {
                              "perplexity": math.exp(m["eval_loss"])})])
        trainer.remove_callback(PrinterCallback)  # the study prints; the Trainer need not
        trainer.train()
        perplexity = trial.intermediate[-1].values["perplexity"]
    return {"perplexity": perplexity, "tokens_per_joule": trial.samples_per_joule("train")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=10)
    ap.add_argument("--out", default="runs/tune_causal_lm")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    hf_logging.set_verbosity_error()
    torch.set_num_threads(1)
    space = ecopt.SearchSpace({
        "batch_size": ecopt.Categorical([4, 8, 16, 32]),
        "precision": ecopt.Categorical(["float32", "bfloat16"]),
        "lr": ecopt.Float(3e-4, 1e-2, log=True),
    })
    study = ecopt.Study(space, [ecopt.Objective("perplexity", "min"),
                                ecopt.Objective("tokens_per_joule", "max")],
                        storage=Path(args.out), seed=args.seed, name="tune_causal_lm")
    with study:
        study.optimize(objective, n_trials=args.trials)
        est = " (estimated)" if not all(r.measured for r in study.best_trials()) else ""
        print(f"Pareto front ({len(study.best_trials())} of {len(study.records)} trials):")
        for r in sorted(study.best_trials(), key=lambda r: r.values["perplexity"]):
            print(f"  trial {r.number:>2}: batch {r.params['batch_size']:>2} "
                  f"{r.params['precision']:<8} lr {r.params['lr']:.2g}  perplexity "
                  f"{r.values['perplexity']:6.2f}  {r.values['tokens_per_joule']:8.1f} tokens/J{est}")


if __name__ == "__main__":
    main()
