"""Hugging Face ``Trainer``: one callback makes a training script an energy-aware trial.

``EcoptCallback(trial)`` meters the Trainer's work as ecopt phases of the
trial, with their sample and token counts:

* ``train``: ``trainer.train()`` from ``on_train_begin`` to ``on_train_end``
  (forward, backward, optimiser steps, logging and checkpoints);
* ``eval``: every ``trainer.evaluate()``, also the evaluations the Trainer
  runs *during* training (they are taken out of ``train``: phases do not
  nest, so ``train`` is suspended while one runs and resumed after it);
* ``predict``: every ``trainer.predict()``.

Why ``Trainer.evaluate`` is wrapped: ``TrainerCallback`` has a hook *after*
an evaluation (``on_evaluate``) but none before it, so a callback alone
cannot tell when evaluation energy starts. The callback therefore wraps the
bound methods ``train``, ``evaluate``, ``predict``, ``training_step`` and
``prediction_step`` *of the one Trainer it was given to* (an instance
attribute each; the class and other Trainers are untouched). It finds that
Trainer when the Trainer announces itself (``on_init_end``, or
``on_train_begin`` for a callback added later with ``add_callback``); call
:meth:`EcoptCallback.attach` to do it by hand.

Counts: each batch that reaches ``training_step``/``prediction_step`` adds
its examples and tokens (ones of ``attention_mask``, else every ``input_ids``
element) to the open phase. The phase's ``samples`` count examples by default
(``unit="tokens"`` counts tokens instead, for tokens per joule); both are also
kept as trial metrics ``train_samples``, ``train_tokens``, ``eval_samples``...

Intermediate reports and pruning: after each evaluation *during training*,
its metrics (every finite scalar but speed figures, e.g. ``eval_loss``;
``values_fn`` maps them to the study's names) are reported with
:meth:`ecopt.Trial.report`. The step is the number of epochs completed when
the Trainer evaluates once per epoch (``eval_strategy="epoch"``), else the
optimiser step (``state.global_step``). When the study's pruner says stop,
the callback sets ``control.should_training_stop``: the Trainer ends the run
cleanly (``on_train_end``, phases closed), and ``trainer.train()`` then
raises :class:`ecopt.TrialPruned`, so the trial is recorded ``pruned`` with its
energy and its curve (``raise_pruned=False`` only sets :attr:`EcoptCallback.pruned`).

Out of memory: an exception inside a step (``torch.cuda.OutOfMemoryError``)
closes the open phase (the energy spent is kept), notes where it happened
(user attribute ``out_of_memory``: phase, step, batch size), frees the CUDA
cache and goes on to the study, which records the trial *infeasible*.

Example:
    >>> from ecopt.integrations.transformers import EcoptCallback
    >>> def objective(trial):
    ...     args = TrainingArguments("out", per_device_train_batch_size=trial["batch_size"],
    ...                              eval_strategy="epoch", num_train_epochs=3)
    ...     trainer = Trainer(model_init(), args, train_dataset=train, eval_dataset=val,
    ...                       callbacks=[EcoptCallback(trial, unit="tokens")])
    ...     trainer.train()
    ...     loss = trainer.evaluate()["eval_loss"]
    ...     return {"eval_loss": loss, "tokens_per_joule": trial.samples_per_joule("train")}
"""

from __future__ import annotations

import functools
import inspect
import logging
import math
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from ecopt.errors import EcoptError, TrialPruned
from ecopt.integrations._metering import MeteredCallback, StepRule, Unit
from ecopt.trial import Trial

try:
    from transformers import (
        TrainerCallback,
        TrainerControl,
        TrainerState,
        TrainingArguments,
    )
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise ImportError(
        "ecopt.integrations.transformers needs transformers: pip install 'ecopt[hf]'"
    ) from exc

if TYPE_CHECKING:
    from transformers import Trainer

    from ecopt.workloads.generation import GenerationMeasurement

__all__ = ["EcoptCallback", "measure_generate"]

log = logging.getLogger("ecopt")

#: Phase names the callback opens.
TRAIN, EVAL, PREDICT = "train", "eval", "predict"


class EcoptCallback(MeteredCallback, TrainerCallback):  # type: ignore[misc]
    """A ``TrainerCallback`` metering ``train``/``eval``/``predict`` phases of an ecopt trial.

    See the module docstring for what is measured, reported and stopped.

    Args:
        trial: The :class:`ecopt.Trial` the objective received.
        unit: What each phase's ``samples`` count: ``"samples"`` (examples,
            default) or ``"tokens"`` (attention-mask tokens).
        values_fn: Maps the evaluation metrics (``{"eval_loss": ...}``) to the
            values reported to the trial, e.g.
            ``lambda m: {"perplexity": math.exp(m["eval_loss"])}``.
        step: How reports are numbered: ``"auto"`` (epochs completed when
            evaluating once per epoch, else the optimiser step),
            ``"epoch"`` or ``"global_step"``.
        raise_pruned: Make ``trainer.train()`` raise :class:`ecopt.TrialPruned`
            after a pruned run has stopped (default). With ``False`` check
            :attr:`pruned` yourself.

    Attributes:
        pruned: Whether the study's pruner stopped the last ``train()`` run.
        trainer: The Trainer it meters, once known.

    Example:
        >>> cb = EcoptCallback(trial)
        >>> trainer = Trainer(model, args, train_dataset=ds, callbacks=[cb])
        >>> trainer.train()          # phases train (+ eval), reports, pruning
        >>> trial.samples_per_joule("train")
    """

    def __init__(self, trial: Trial, *, unit: Unit = "samples",
                 values_fn: Callable[[dict[str, float]], Mapping[str, float]] | None = None,
                 step: StepRule = "auto", raise_pruned: bool = True) -> None:
        super().__init__(trial, unit=unit, values_fn=values_fn, step=step,
                         raise_pruned=raise_pruned)
        self.trainer: Trainer | None = None
        self._eval_depth = 0
        self._warned_unbound = False

    # -- binding to the Trainer ------------------------------------------------------
    def attach(self, trainer: Trainer) -> Trainer:
        """Meter ``trainer`` (adds this callback to it when missing); returns it.

        Done automatically when the callback is passed to ``Trainer(callbacks=...)``
        or ``trainer.add_callback``; needed only by code that calls the
        Trainer's methods before any callback event.

        Raises:
            ValueError: for something that is not a ``transformers.Trainer``, or
                when this callback already meters another Trainer.
        """
        from transformers import Trainer as _Trainer

        if not isinstance(trainer, _Trainer):
            raise ValueError(f"attach() needs a transformers.Trainer, got {trainer!r}")
        if self.trainer is trainer:
            return trainer
        if self.trainer is not None:
            raise ValueError("this EcoptCallback already meters another Trainer; create one "
                             "callback per Trainer (and per trial)")
        if self not in trainer.callback_handler.callbacks:
            trainer.add_callback(self)
        self.trainer = trainer
        self._wrap(trainer)
        return trainer

    def _find_trainer(self) -> None:
        """Bind to the Trainer whose event is being dispatched (it is on the call stack)."""
        if self.trainer is not None:
            return
        from transformers import Trainer as _Trainer

        frame = inspect.currentframe()
        try:
            f = frame.f_back if frame is not None else None
            for _ in range(16):
                if f is None:
                    break
                obj = f.f_locals.get("self")
                handler = getattr(obj, "callback_handler", None)
                if isinstance(obj, _Trainer) and handler is not None and any(
                        cb is self for cb in handler.callbacks):
                    self.attach(obj)
                    return
                f = f.f_back
        finally:
            del frame

    def _wrap(self, trainer: Trainer) -> None:
        sw = self.switch
        train, evaluate, predict = trainer.train, trainer.evaluate, trainer.predict
        training_step, prediction_step = trainer.training_step, trainer.prediction_step

        def where() -> dict[str, Any]:
            args = trainer.args
            return {"step": int(trainer.state.global_step),
                    "per_device_train_batch_size": int(args.per_device_train_batch_size),
                    "per_device_eval_batch_size": int(args.per_device_eval_batch_size)}

        @functools.wraps(train)
        def train_(*args: Any, **kwargs: Any) -> Any:
            sw.pruned = False
            try:
                out = train(*args, **kwargs)
            except BaseException as exc:
                self._training = False
                sw.failed(exc, where())
                raise
            self._training = False
            sw.close_all()
            if sw.pruned and self.raise_pruned:
                raise TrialPruned()
            return out

        def metered(phase: str, fn: Callable[..., Any], report: bool) -> Callable[..., Any]:
            @functools.wraps(fn)
            def run(*args: Any, **kwargs: Any) -> Any:
                if self._eval_depth:  # evaluate() calls itself once per dataset of a dict
                    return fn(*args, **kwargs)
                self._eval_depth += 1
                sw.suspend(phase)
                try:
                    out = fn(*args, **kwargs)
                except BaseException as exc:
                    self._training = False
                    sw.failed(exc, where())
                    raise
                finally:
                    self._eval_depth -= 1
                sw.close()
                if report and self._training and isinstance(out, Mapping):
                    if sw.report(self._step(), out):
                        trainer.control.should_training_stop = True
                if self._training:
                    sw.reopen()
                return out
            return run

        @functools.wraps(training_step)
        def training_step_(model: Any, inputs: Any, *args: Any, **kwargs: Any) -> Any:
            sw.count(inputs)
            return training_step(model, inputs, *args, **kwargs)

        @functools.wraps(prediction_step)
        def prediction_step_(model: Any, inputs: Any, *args: Any, **kwargs: Any) -> Any:
            sw.count(inputs)
            return prediction_step(model, inputs, *args, **kwargs)

        trainer.train = train_  # type: ignore[method-assign]
        trainer.evaluate = metered(EVAL, evaluate, True)  # type: ignore[method-assign]
        trainer.predict = metered(PREDICT, predict, False)  # type: ignore[method-assign]
        trainer.training_step = training_step_  # type: ignore[method-assign]
        trainer.prediction_step = prediction_step_  # type: ignore[method-assign]

    def _step(self) -> int:
        assert self.trainer is not None
        state, args = self.trainer.state, self.trainer.args
        rule = self.step_rule
        if rule == "auto":
            rule = "epoch" if str(getattr(args.eval_strategy, "value", args.eval_strategy)) \
                == "epoch" else "global_step"
        if rule == "epoch":
            return int(math.floor((state.epoch or 0.0) + 1e-6))
        return int(state.global_step)

    # -- TrainerCallback events ------------------------------------------------------
    def on_init_end(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
                    **kwargs: Any) -> None:
        self._find_trainer()

    def on_train_begin(self, args: TrainingArguments, state: TrainerState,
                       control: TrainerControl, **kwargs: Any) -> None:
        self._find_trainer()
        if self.trainer is None and not self._warned_unbound:
            log.warning("EcoptCallback could not find its Trainer: evaluations during training "
                        "are metered as part of 'train' and batches are not counted; call "
                        "callback.attach(trainer) before trainer.train()")
            self._warned_unbound = True
        self._training = True
        self.switch.open(TRAIN)

    def on_train_end(self, args: TrainingArguments, state: TrainerState,
                     control: TrainerControl, **kwargs: Any) -> None:
        self._training = False
        self.switch.close_all()

    def on_evaluate(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
                    metrics: Mapping[str, float] | None = None, **kwargs: Any) -> None:
        if self.trainer is not None or not self._training or not metrics:
            return  # bound: the evaluate() wrapper reports, with the eval phase closed
        if self.switch.report(int(state.global_step), metrics):
            control.should_training_stop = True


def measure_generate(model: Any, input_ids: Any, trial: Trial, *, max_new_tokens: int,
                     **kwargs: Any) -> GenerationMeasurement:
    """Tokens per joule of greedy ``model.generate``, decode and prefill measured apart.

    The measurement itself lives in one place,
    :func:`ecopt.workloads.generation.measure_generation`: it decodes greedily
    with the model's forward pass and KV cache (token for token what
    ``model.generate(do_sample=False)`` produces), opening the trial's phases
    ``warmup``, ``prefill`` (``samples`` = prompts) and ``decode``
    (``samples`` = tokens), so each figure carries its meter's provenance.

    Args:
        model: A transformers causal LM in eval mode, on the device of ``input_ids``.
        input_ids: ``(batch, prompt_len)`` prompt token ids (unpadded).
        trial: The trial whose meter measures the phases.
        max_new_tokens: Tokens generated per sequence.
        **kwargs: Passed on (``use_cache``, ``min_window_s``, ``max_rounds``,
            ``warmup_steps``, ``meter_period_s``, ``max_window_repeats``).

    Returns:
        The :class:`~ecopt.workloads.generation.GenerationMeasurement`:
        ``decode_tokens_per_joule``, ``prefill_j_per_prompt`` (prefill apart),
        ``tokens_per_joule`` end to end, latencies; ``.metrics()`` gives them
        as trial metrics.

    Example:
        >>> m = measure_generate(model, ids, trial, max_new_tokens=32)
        >>> return {"perplexity": ppl, "tokens_per_joule": m.decode_tokens_per_joule}
    """
    try:
        from ecopt.workloads.generation import measure_generation
    except ImportError as exc:  # the generation workload's measurement is the one home
        raise EcoptError(
            "measure_generate needs ecopt.workloads.generation.measure_generation, which this "
            f"ecopt version lacks ({exc}); upgrade ecopt") from exc
    return measure_generation(model, input_ids, trial, max_new_tokens=max_new_tokens, **kwargs)
