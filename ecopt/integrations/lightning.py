"""PyTorch Lightning: one callback makes a ``Trainer`` script an energy-aware trial.

``EcoptCallback(trial)`` meters Lightning's work as ecopt phases of the trial,
with their sample and token counts:

* ``train``: the training loop of ``trainer.fit`` (``on_train_start`` to
  ``on_train_end``);
* ``eval``: every validation run, the ones inside ``fit`` (sanity check
  included) and ``trainer.validate``; during ``fit`` the ``train`` phase is
  suspended while validation runs and resumed after it, so no joule is
  counted twice (phases do not nest);
* ``test``: ``trainer.test``; ``predict``: ``trainer.predict``.

Lightning has a hook before and after each of these, so nothing is wrapped.
Each batch (``on_*_batch_end``) adds its examples and tokens (ones of
``attention_mask``, else every ``input_ids`` element, for dict batches) to the
open phase; ``unit="tokens"`` makes the phase's ``samples`` count tokens. Both
counts are kept as trial metrics (``train_samples``, ``train_tokens``...).

Intermediate reports and pruning: after each validation during ``fit`` (not
the sanity check), ``trainer.callback_metrics`` (every finite scalar, e.g.
``val_loss``; ``values_fn`` maps them to the study's names) are reported with
:meth:`ecopt.Trial.report`, numbered by epochs completed when validation runs
once per epoch (``val_check_interval=1.0``), else by ``trainer.global_step``.
When the study's pruner says stop, the callback sets ``trainer.should_stop``:
Lightning ends the run cleanly, the phases are closed, and the callback
raises :class:`ecopt.TrialPruned` from ``on_fit_end``, so ``trainer.fit()``
raises it and the trial is recorded ``pruned`` (``raise_pruned=False`` only
sets :attr:`EcoptCallback.pruned`).

Out of memory: Lightning calls ``on_exception`` for an exception inside a
step (``torch.cuda.OutOfMemoryError``); the callback closes the open phase
(its energy is kept), notes where it happened (user attribute
``out_of_memory``: phase, step, epoch), frees the CUDA cache, and the
exception goes on to the study, which records the trial *infeasible*.

Example:
    >>> from ecopt.integrations.lightning import EcoptCallback
    >>> def objective(trial):
    ...     trainer = L.Trainer(max_epochs=5, callbacks=[EcoptCallback(trial)])
    ...     trainer.fit(Model(lr=trial["lr"]), train_loader, val_loader)
    ...     return {"val_loss": float(trainer.callback_metrics["val_loss"]),
    ...             "samples_per_joule": trial.samples_per_joule("train")}
"""

from __future__ import annotations

from typing import Any

from ecopt.errors import TrialPruned
from ecopt.integrations._metering import MeteredCallback

try:
    import lightning.pytorch as pl
    from lightning.pytorch.callbacks import Callback
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise ImportError(
        "ecopt.integrations.lightning needs Lightning: pip install 'ecopt[lightning]'"
    ) from exc

__all__ = ["EcoptCallback"]

#: Phase names the callback opens.
TRAIN, EVAL, TEST, PREDICT = "train", "eval", "test", "predict"


class EcoptCallback(MeteredCallback, Callback):  # type: ignore[misc]
    """A Lightning ``Callback`` metering ``train``/``eval``/``test``/``predict`` phases of a trial.

    See the module docstring for what is measured, reported and stopped.

    Args:
        trial: The :class:`ecopt.Trial` the objective received.
        unit: What each phase's ``samples`` count: ``"samples"`` (default) or
            ``"tokens"``.
        values_fn: Maps ``trainer.callback_metrics`` (as floats) to the values
            reported to the trial, e.g. ``lambda m: {"accuracy": m["val_acc"]}``.
        step: How reports are numbered: ``"auto"`` (epochs completed when
            validating once per epoch, else the global step), ``"epoch"`` or
            ``"global_step"``.
        raise_pruned: Raise :class:`ecopt.TrialPruned` from ``on_fit_end``
            after a pruned run stopped (default); with ``False`` check
            :attr:`pruned` yourself.

    Attributes:
        pruned: Whether the study's pruner stopped the last ``fit``.

    Example:
        >>> cb = EcoptCallback(trial)
        >>> L.Trainer(max_epochs=3, callbacks=[cb]).fit(model, train_dl, val_dl)
        >>> trial.samples_per_joule("train")
    """

    @property
    def state_key(self) -> str:
        # One instance per trial: two of them in one Trainer must not share checkpoint state.
        return f"EcoptCallback[trial={self.trial.number}]"

    def _step(self, trainer: pl.Trainer) -> int:
        rule = self.step_rule
        if rule == "auto":
            interval = getattr(trainer, "val_check_interval", 1.0)
            rule = "epoch" if isinstance(interval, float) and interval == 1.0 else "global_step"
        if rule == "epoch":
            # Validation at the end of epoch e (0-based) reports step e + 1: epochs completed.
            return int(trainer.current_epoch) + 1
        return int(trainer.global_step)

    # -- fit ---------------------------------------------------------------------------
    def on_fit_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.switch.pruned = False

    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._training = True
        self.switch.open(TRAIN)

    def on_train_batch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule,
                           outputs: Any, batch: Any, batch_idx: int) -> None:
        self.switch.count(batch)

    def on_train_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._training = False
        self.switch.close_all()

    def on_fit_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.switch.close_all()
        if self.switch.pruned and self.raise_pruned:
            raise TrialPruned()

    # -- validation (inside fit, or trainer.validate) ------------------------------------
    def on_validation_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.switch.suspend(EVAL)

    def on_validation_batch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule,
                                outputs: Any, batch: Any, batch_idx: int,
                                dataloader_idx: int = 0) -> None:
        self.switch.count(batch)

    def on_validation_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.switch.close()
        if self._training and not trainer.sanity_checking:
            if self.switch.report(self._step(trainer), dict(trainer.callback_metrics)):
                trainer.should_stop = True
        self.switch.reopen()

    # -- test and predict ------------------------------------------------------------------
    def on_test_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.switch.suspend(TEST)

    def on_test_batch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule,
                          outputs: Any, batch: Any, batch_idx: int,
                          dataloader_idx: int = 0) -> None:
        self.switch.count(batch)

    def on_test_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.switch.reopen()

    def on_predict_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.switch.suspend(PREDICT)

    def on_predict_batch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule,
                             outputs: Any, batch: Any, batch_idx: int,
                             dataloader_idx: int = 0) -> None:
        self.switch.count(batch)

    def on_predict_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.switch.reopen()

    # -- errors ----------------------------------------------------------------------------
    def on_exception(self, trainer: pl.Trainer, pl_module: pl.LightningModule,
                     exception: BaseException) -> None:
        self._training = False
        if isinstance(exception, TrialPruned):
            return  # ours, from on_fit_end: the phases are closed already
        self.switch.failed(exception, {"step": int(trainer.global_step),
                                       "epoch": int(trainer.current_epoch)})
