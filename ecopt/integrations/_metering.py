"""What the framework callbacks share: one open phase at a time, batch counts, reports.

A framework's hooks say when training, evaluation, testing or prediction
starts and ends; :class:`PhaseSwitch` turns those moments into ecopt phases
(:meth:`ecopt.Trial.phase` windows). Phases do not nest, so an evaluation
during training *suspends* the ``train`` phase, runs in its own ``eval``
phase and then resumes ``train``: every joule is counted once, in the phase
that spent it.

The framework callbacks (:mod:`ecopt.integrations.transformers`,
:mod:`ecopt.integrations.lightning`) only translate their hooks into these
calls, so both behave the same way.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterable, Mapping
from contextlib import AbstractContextManager
from dataclasses import replace
from typing import Any, Literal

from ecopt.trial import Trial, is_out_of_memory

__all__ = ["PhaseSwitch", "MeteredCallback", "batch_counts", "scalar_metrics", "Unit",
           "StepRule"]

log = logging.getLogger("ecopt")

#: What a phase's ``samples`` count: examples, or tokens (attention-mask ones).
Unit = Literal["samples", "tokens"]
#: How intermediate reports are numbered: by the framework's schedule, epochs completed,
#: or optimiser steps.
StepRule = Literal["auto", "epoch", "global_step"]

#: Metric names that describe the run's speed, not the model (left out of reports).
_SPEED_SUFFIXES = ("_runtime", "_per_second", "_model_preparation_time")


def _numel(x: Any) -> int | None:
    n = getattr(x, "numel", None)
    if callable(n):
        try:
            return int(n())
        except (TypeError, ValueError):
            return None
    return None


def _first_dim(x: Any) -> int | None:
    shape = getattr(x, "shape", None)
    if shape is not None and len(shape) >= 1:
        return int(shape[0])
    return None


def _counts(batch: Any) -> tuple[int | None, Any]:
    """``(samples, tokens)`` of one batch; tokens may be a 0-d tensor (summed lazily)."""
    if isinstance(batch, Mapping):
        ids = batch.get("input_ids")
        mask = batch.get("attention_mask")
        samples = _first_dim(ids) if ids is not None else None
        if samples is None:
            for v in batch.values():
                samples = _first_dim(v)
                if samples is not None:
                    break
        tokens: Any = None
        if mask is not None and callable(getattr(mask, "sum", None)):
            # Kept as a tensor: int() here would wait for the GPU at every step.
            tokens = mask.sum()
        if tokens is None and ids is not None:
            tokens = _numel(ids)
        return samples, tokens
    if isinstance(batch, (tuple, list)):
        for v in batch:
            n = _first_dim(v)
            if n is not None:
                return n, None
            if isinstance(v, (Mapping, tuple, list)):
                return _counts(v)
        return None, None
    return _first_dim(batch), None


def batch_counts(batch: Any) -> tuple[int | None, int | None]:
    """``(samples, tokens)`` in one batch as frameworks hand it over.

    * A mapping (a tokenizer's output, a Trainer's inputs): samples are the
      first dimension of ``input_ids`` (else of the first tensor); tokens are
      the ones of ``attention_mask`` (padding excluded), else every element of
      ``input_ids``; ``None`` when there is no ``input_ids``.
    * A tuple or list (``(x, y)``): samples from its first tensor; no tokens.
    * A tensor: its first dimension; no tokens.

    Returns ``(None, None)`` for anything else (the phase then has no count).
    """
    samples, tokens = _counts(batch)
    return samples, (int(tokens) if tokens is not None else None)


def scalar_metrics(metrics: Mapping[str, Any], skip: Iterable[str] = ()) -> dict[str, float]:
    """The finite scalar numbers of a metrics dict (0-d tensors and numpy scalars too).

    Speed figures (``*_runtime``, ``*_per_second``) and the names in ``skip``
    are left out: they describe the run, not the model.
    """
    skipped = set(skip)
    out: dict[str, float] = {}
    for k, v in metrics.items():
        if not isinstance(k, str) or k in skipped or k.endswith(_SPEED_SUFFIXES):
            continue
        if hasattr(v, "item") and not isinstance(v, (int, float)):
            if _numel(v) not in (None, 1):
                continue
            try:
                v = v.item()
            except (TypeError, ValueError):
                continue
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            continue
        if math.isfinite(v):
            out[k] = float(v)
    return out


class PhaseSwitch:
    """Keeps at most one phase of a trial open and counts what passes through it.

    Args:
        trial: The trial whose meter measures the phases.
        unit: What each phase's ``samples`` count (``"samples"`` or ``"tokens"``).
            Both counts are also kept as trial metrics ``<phase>_samples`` and
            ``<phase>_tokens`` (the latter when batches carry ``input_ids``).
        values_fn: Maps the framework's evaluation metrics to the values
            reported (default: every finite scalar but speed figures).
    """

    def __init__(self, trial: Trial, unit: Unit = "samples",
                 values_fn: Callable[[dict[str, float]], Mapping[str, float]] | None = None
                 ) -> None:
        if not isinstance(trial, Trial):
            raise ValueError(f"trial must be the ecopt.Trial the objective received, got {trial!r}")
        if unit not in ("samples", "tokens"):
            raise ValueError(f"unit must be 'samples' or 'tokens', got {unit!r}")
        if values_fn is not None and not callable(values_fn):
            raise ValueError(f"values_fn must be callable as values_fn(metrics) -> dict, "
                             f"got {values_fn!r}")
        self.trial = trial
        self.unit: Unit = unit
        self.values_fn = values_fn
        self.current: str | None = None
        self._cm: AbstractContextManager[Trial] | None = None
        self._suspended: list[str] = []
        self._window: list[Any] = [0, 0]  # samples, tokens (maybe a tensor) of the open window
        self._window_tokens_known = False
        self.samples: dict[str, int] = {}
        self.tokens: dict[str, int] = {}
        #: Set when the study's pruner said stop; the framework stops training cleanly.
        self.pruned = False
        self.prune_step: int | None = None
        self._warned_step = False
        self._failed: BaseException | None = None

    # -- phases ------------------------------------------------------------------
    def open(self, name: str) -> None:
        """Make ``name`` the open phase (closing another one first); no-op if it is open."""
        if self.current == name:
            return
        self.close()
        cm = self.trial.phase(name)
        cm.__enter__()
        self._cm, self.current = cm, name
        self._window = [0, 0]
        self._window_tokens_known = False

    def close(self) -> None:
        """Close the open phase (its window's counts go into the phase record)."""
        if self._cm is None or self.current is None:
            return
        cm, name = self._cm, self.current
        self._cm, self.current = None, None
        cm.__exit__(None, None, None)
        samples, tokens = int(self._window[0]), int(self._window[1])
        count = tokens if self.unit == "tokens" else samples
        if self.unit == "tokens" and not self._window_tokens_known:
            count = 0
        rec = self.trial.phases.get(name)
        if rec is not None and count:
            # The count is known only once the window closes: add it to the phase's total.
            self.trial.phases[name] = replace(rec, samples=(rec.samples or 0) + count)
        self.samples[name] = self.samples.get(name, 0) + samples
        self.trial.set_metric(f"{name}_samples", self.samples[name])
        if self._window_tokens_known:
            self.tokens[name] = self.tokens.get(name, 0) + tokens
        if name in self.tokens:
            self.trial.set_metric(f"{name}_tokens", self.tokens[name])

    def suspend(self, name: str) -> None:
        """Open ``name`` in place of the open phase, which :meth:`resume` reopens."""
        if self.current is not None and self.current != name:
            self._suspended.append(self.current)
        self.open(name)

    def reopen(self) -> None:
        """Reopen the phase :meth:`suspend` set aside, if any (closing the open one)."""
        if self._suspended:
            self.open(self._suspended.pop())
        else:
            self.close()

    @property
    def suspended(self) -> tuple[str, ...]:
        """Phases set aside by :meth:`suspend`, innermost last."""
        return tuple(self._suspended)

    def close_all(self) -> None:
        """Close the open phase and forget suspended ones (end of a run, or an error)."""
        self._suspended.clear()
        self.close()

    def count(self, batch: Any) -> None:
        """Add one batch to the open phase's counts (nothing when no phase is open)."""
        if self.current is None:
            return
        samples, tokens = _counts(batch)
        if samples:
            self._window[0] += samples
        if tokens is not None:
            self._window[1] += tokens
            self._window_tokens_known = True

    # -- reports and pruning -------------------------------------------------------
    def values(self, metrics: Mapping[str, Any]) -> dict[str, float]:
        """The values to report for the framework's evaluation ``metrics``."""
        clean = scalar_metrics(metrics, skip=("epoch",))
        if self.values_fn is None:
            return clean
        return dict(self.values_fn(clean))

    def report(self, step: int, metrics: Mapping[str, Any]) -> bool:
        """Report one evaluation and ask the pruner; ``True`` when the trial should stop.

        A step not above the last reported one (a second ``train()`` call, two
        evaluations at one step) is skipped with a warning: a trial's curve
        only moves forward.
        """
        values = self.values(metrics)
        if not values:
            return False
        last = self.trial.intermediate[-1].step if self.trial.intermediate else -1
        if step <= last:
            if not self._warned_step:
                log.warning("trial %d: evaluation at step %d not reported (step %d was already "
                            "reported; steps must increase within a trial)", self.trial.number,
                            step, last)
                self._warned_step = True
            return False
        self.trial.report(step, values)
        if self.trial.should_stop():
            self.pruned = True
            self.prune_step = step
            return True
        return False

    def failed(self, exc: BaseException, where: Mapping[str, Any]) -> None:
        """A run raised: close the phases (their energy is kept) and note an out-of-memory.

        The exception itself goes on to the study, which records an
        out-of-memory (``torch.cuda.OutOfMemoryError`` and the like, see
        :func:`ecopt.trial.is_out_of_memory`) as an *infeasible* trial.
        """
        if exc is self._failed:  # seen by an inner wrapper already (evaluate inside train)
            return
        self._failed = exc
        phase = self.current
        self.close_all()
        if is_out_of_memory(exc):
            self.trial.set_user_attr("out_of_memory", {"phase": phase, **dict(where)})
            _free_cuda_cache()


class MeteredCallback:
    """What both framework callbacks hold: a :class:`PhaseSwitch` and the report settings.

    A mixin placed before the framework's callback class
    (``class EcoptCallback(MeteredCallback, TrainerCallback)``).

    Raises:
        ValueError: for a bad ``unit``, ``step`` or ``values_fn`` (see :class:`PhaseSwitch`).
    """

    def __init__(self, trial: Trial, *, unit: Unit = "samples",
                 values_fn: Callable[[dict[str, float]], Mapping[str, float]] | None = None,
                 step: StepRule = "auto", raise_pruned: bool = True) -> None:
        if step not in ("auto", "epoch", "global_step"):
            raise ValueError(f"step must be 'auto', 'epoch' or 'global_step', got {step!r}")
        self.switch = PhaseSwitch(trial, unit, values_fn)
        self.step_rule: StepRule = step
        self.raise_pruned = bool(raise_pruned)
        #: Whether a training run is going on (reports are made only then).
        self._training = False

    @property
    def trial(self) -> Trial:
        """The trial whose phases this callback meters."""
        return self.switch.trial

    @property
    def pruned(self) -> bool:
        """Whether the study's pruner stopped the last training run."""
        return self.switch.pruned

    def __repr__(self) -> str:
        return f"{type(self).__name__}(trial={self.trial.number}, unit={self.switch.unit!r})"


def _free_cuda_cache() -> None:
    """Hand cached CUDA blocks back after an out-of-memory, so the next trial starts clean."""
    import sys

    torch = sys.modules.get("torch")
    if torch is None:
        return
    try:
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            torch.cuda.empty_cache()
    except Exception:  # noqa: BLE001 - best effort after a failure
        pass
