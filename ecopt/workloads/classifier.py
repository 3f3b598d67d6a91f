"""A ready objective: train a torch MLP classifier, then measure its inference samples/J.

Data defaults to scikit-learn's digits (1,797 real 8x8 images, shipped with
scikit-learn: no download). The objective reads these params from the trial
(missing ones take the defaults of :class:`ClassifierObjective`):

``width`` (hidden units), ``depth`` (hidden layers), ``lr`` (Adam learning
rate), ``batch_size`` (training batch), ``epochs``, ``inference_batch_size``,
``precision`` (``float32``, ``bfloat16`` or ``float16`` autocast, training and
inference; see :class:`ecopt.workloads.device.Precision`).

It runs on ``device`` (``auto``: the GPU when there is one; see
:mod:`ecopt.workloads.device`): model, batches and loss there, batches copied
from pinned memory on CUDA; a CUDA out-of-memory makes the trial infeasible;
``peak_host_rss_gb`` (and on CUDA ``peak_device_memory_gb``) are recorded.

It measures the phases ``train`` and ``inference`` (``inference_passes``
passes over the test set, so the window is long enough for a meter to resolve)
and returns ``accuracy`` and ``samples_per_joule`` (inference). With
``report_curve`` (the default) it reports a learning curve: after each epoch
the test accuracy and the samples per joule of that evaluation (measured in the
``validate`` phase) and the training loss (:func:`train_with_curve`), and stops
when the study's pruner says so (``ecopt.TrialPruned``).

Example:
    >>> objective = ClassifierObjective(epochs=4)
    >>> study.optimize(objective, n_trials=20)
"""

from __future__ import annotations

import math
import time

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from ecopt.trial import Trial
from ecopt.workloads.device import (
    Precision,
    place_model,
    resolve_device,
    to_device,
    trial_on_device,
)

__all__ = ["ClassifierObjective", "CachedDataObjective", "build_mlp", "load_digits_split",
           "train_classifier", "train_epochs", "train_with_curve", "evaluate",
           "count_parameters"]


def load_digits_split(test_fraction: float = 0.2, seed: int = 0
                      ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """scikit-learn's digits, standardised with training statistics, split stratified.

    Returns:
        ``(X_train, y_train, X_test, y_test)``; X as float32 ``(n, 64)``, y as int64.
    """
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    if not 0 < test_fraction < 1:
        raise ValueError(f"0 < test_fraction < 1 must hold, got {test_fraction}")
    X, y = load_digits(return_X_y=True)
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=test_fraction, random_state=seed,
                                          stratify=y)
    mu, sd = Xtr.mean(axis=0), Xtr.std(axis=0) + 1e-6
    return (((Xtr - mu) / sd).astype(np.float32), ytr.astype(np.int64),
            ((Xte - mu) / sd).astype(np.float32), yte.astype(np.int64))


def build_mlp(in_dim: int, n_classes: int, width: int, depth: int) -> Any:
    """An MLP: ``depth`` hidden layers of ``width`` units with ReLU.

    Raises:
        ValueError: for non-positive sizes.
    """
    import torch.nn as nn

    for what, v in (("in_dim", in_dim), ("n_classes", n_classes), ("width", width),
                    ("depth", depth)):
        if int(v) < 1:
            raise ValueError(f"{what} >= 1 must hold, got {what}={v}")
    layers: list[nn.Module] = []
    d = in_dim
    for _ in range(int(depth)):
        layers += [nn.Linear(d, int(width)), nn.ReLU()]
        d = int(width)
    layers.append(nn.Linear(d, n_classes))
    return nn.Sequential(*layers)


def count_parameters(model: Any) -> int:
    """Number of trainable parameters."""
    return int(sum(p.numel() for p in model.parameters() if p.requires_grad))


def train_classifier(model: Any, X: np.ndarray, y: np.ndarray, lr: float, batch_size: int,
                     epochs: int, seed: int = 0, device: str = "cpu",
                     precision: str = "float32") -> float:
    """Train with Adam and cross-entropy; returns the last epoch's mean loss.

    Args:
        model: A torch module, already on ``device`` (:func:`place_model`).
        X, y: Training data (host arrays; each batch is copied to ``device``).
        lr, batch_size, epochs, seed: Adam's rate, batch, passes, shuffling seed.
        device: A resolved device (``cpu``, ``cuda[:N]``).
        precision: ``float32``, ``bfloat16`` or ``float16`` autocast.
    """
    import torch

    if batch_size < 1 or epochs < 1 or not lr > 0:
        raise ValueError(f"batch_size >= 1, epochs >= 1 and lr > 0 must hold, got "
                         f"batch_size={batch_size}, epochs={epochs}, lr={lr}")
    last = float("nan")
    for last in train_epochs(model, X, y, lr, batch_size, epochs, seed, device, precision):
        pass
    return last


def train_epochs(model: Any, X: np.ndarray, y: np.ndarray, lr: float, batch_size: int,
                 epochs: int, seed: int = 0, device: str = "cpu",
                 precision: str = "float32") -> Iterator[float]:
    """:func:`train_classifier` one epoch at a time: yields each epoch's mean loss.

    The caller may evaluate the model between epochs (each epoch puts it back
    in training mode); the training is the same as :func:`train_classifier`'s.
    """
    import torch

    if batch_size < 1 or epochs < 1 or not lr > 0:
        raise ValueError(f"batch_size >= 1, epochs >= 1 and lr > 0 must hold, got "
                         f"batch_size={batch_size}, epochs={epochs}, lr={lr}")
    prec = Precision(precision, device)
    g = torch.Generator().manual_seed(seed)
    Xt, yt = torch.from_numpy(X), torch.from_numpy(y)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    loss_fn = torch.nn.CrossEntropyLoss()
    for _ in range(epochs):
        model.train()
        perm = torch.randperm(len(Xt), generator=g)
        # Summed on the device: one host sync per epoch, not one per batch.
        total = torch.zeros((), device=device)
        for i in range(0, len(Xt), batch_size):
            idx = perm[i:i + batch_size]
            xb, yb = to_device((Xt[idx], yt[idx]), device)
            opt.zero_grad()
            with prec.autocast():
                loss = loss_fn(model(xb), yb)
            prec.step(loss, opt)
            total += loss.detach().float() * len(idx)
        yield float(total) / len(Xt)


def train_with_curve(trial: Trial, model: Any, X: np.ndarray, y: np.ndarray,
                     X_val: np.ndarray, y_val: np.ndarray, lr: float, batch_size: int,
                     epochs: int, seed: int, device: str, precision: str,
                     eval_batch_size: int = 256, curve: bool = True) -> None:
    """Train in the trial's ``train`` phase; with ``curve``, report a learning curve.

    After each epoch the model's accuracy on ``X_val`` is measured in the
    ``validate`` phase and reported as ``trial.report(epoch, {"accuracy": ...,
    "train_loss": ..., "samples_per_joule": ...})``: the last is the
    ``validate`` passes' samples per joule so far (when the meter reads energy),
    an early, noisier reading of the model's inference figure (one pass of the
    same evaluation per epoch), so that a pruner sees both objectives of a
    study of accuracy and inference samples/J. When the study's pruner says so
    the trial stops (:class:`ecopt.TrialPruned`). Without ``curve`` it is one
    ``train`` window, the same training.

    Raises:
        TrialPruned: when the pruner stops the trial.
    """
    from ecopt.errors import TrialPruned

    if not curve:
        with trial.phase("train", samples=len(X) * epochs):
            train_classifier(model, X, y, lr, batch_size, epochs, seed=seed, device=device,
                             precision=precision)
        return
    steps = train_epochs(model, X, y, lr, batch_size, epochs, seed=seed, device=device,
                         precision=precision)
    for epoch in range(1, epochs + 1):
        with trial.phase("train", samples=len(X)):
            loss = next(steps)
        with trial.phase("validate", samples=len(X_val)):
            acc = evaluate(model, X_val, y_val, eval_batch_size, device=device,
                           precision=precision)
        values = {"accuracy": acc, "train_loss": loss}
        spj = trial.phases["validate"].samples_per_joule
        if spj is not None:  # the model's inference throughput per joule, so far
            values["samples_per_joule"] = spj
        trial.report(epoch, values)
        if trial.should_stop():
            raise TrialPruned()


def evaluate(model: Any, X: np.ndarray, y: np.ndarray, batch_size: int = 256,
             passes: int = 1, device: str = "cpu", precision: str = "float32") -> float:
    """Accuracy over ``X``; ``passes`` repeats the whole inference (for metering).

    Batches are copied to ``device`` inside the loop (the copy is part of inference).
    """
    import torch

    prec = Precision(precision, device)
    model.eval()
    Xt, yt = torch.from_numpy(X), torch.from_numpy(y)
    correct = torch.zeros((), dtype=torch.int64, device=device)
    with torch.inference_mode():
        for _ in range(passes):
            correct.zero_()
            for i in range(0, len(Xt), batch_size):
                xb, yb = to_device((Xt[i:i + batch_size], yt[i:i + batch_size]), device)
                with prec.autocast():
                    out = model(xb)
                correct += (out.argmax(dim=1) == yb).sum()
    return int(correct) / len(Xt)


#: At most this many inference passes, however fast one pass is.
_MAX_PASSES = 100_000


class CachedDataObjective:
    """Mixin for objective dataclasses that load their data once and stay picklable.

    The data cache (``_data``) is dropped when pickled, so an executor ships the
    settings, not the arrays; each worker loads the data on its first trial.
    """

    inference_passes: int

    def __post_init__(self) -> None:
        if self.inference_passes < 1:
            raise ValueError(f"inference_passes >= 1 must hold, got {self.inference_passes}")
        min_s = getattr(self, "inference_min_s", 0.0)
        if not min_s >= 0:
            raise ValueError(f"inference_min_s >= 0 must hold, got {min_s}")
        self._data: tuple[np.ndarray, ...] | None = None

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_data"] = None
        return state


@dataclass
class ClassifierObjective(CachedDataObjective):
    """Train + evaluate an MLP on digits; returns accuracy and inference samples/J.

    Picklable (a plain dataclass), so process and Dask executors can ship it.

    Args:
        epochs: Training epochs when the trial has no ``epochs`` param.
        width, depth, lr, batch_size: Defaults for params the space does not search.
        inference_batch_size: Default inference batch.
        inference_passes: Least passes over the test set inside the ``inference``
            phase.
        inference_min_s: Least seconds the ``inference`` phase lasts: a timed
            ``warmup`` pass first sets how many passes that takes, so the
            window is long enough for a meter to resolve (a 2 ms window gives
            samples/J that are mostly noise). The passes run are recorded as
            the metric ``inference_passes``.
        seed: Data split and training seed.
        device: ``auto``, ``cpu``, ``cuda`` or ``cuda:N``.
        precision: Default ``precision`` (``float32``, ``bfloat16``, ``float16``).
        report_curve: After each epoch, measure the test accuracy (phase
            ``validate``) and ``trial.report`` it with the training loss, so a
            study's pruner can stop the trial (:func:`train_with_curve`).
            ``False``: one ``train`` window and no curve. The curve costs one
            evaluation pass per epoch; its joules are the ``validate`` phase's,
            counted in the trial's energy (turn it off when no pruner is used and
            every joule of the trial should be training and inference).
    """

    epochs: int = 4
    width: int = 64
    depth: int = 2
    lr: float = 1e-2
    batch_size: int = 64
    inference_batch_size: int = 256
    inference_passes: int = 20
    inference_min_s: float = 0.25
    seed: int = 0
    device: str = "auto"
    precision: str = "float32"
    report_curve: bool = True

    def _p(self, trial: Trial, name: str) -> Any:
        return trial.params.get(name, getattr(self, name))

    def __call__(self, trial: Trial) -> dict[str, float]:
        import torch

        device = resolve_device(self.device)
        precision = str(self._p(trial, "precision"))
        Precision(precision, device)  # validate before anything runs
        with trial_on_device(trial, device):
            with trial.phase("load"):
                if self._data is None:
                    self._data = load_digits_split(seed=self.seed)
                Xtr, ytr, Xte, yte = self._data
            torch.manual_seed(self.seed + trial.number)
            model = place_model(build_mlp(Xtr.shape[1], int(ytr.max()) + 1,
                                          int(self._p(trial, "width")),
                                          int(self._p(trial, "depth"))), device)
            trial.set_metric("n_params", count_parameters(model))
            inf_batch = int(self._p(trial, "inference_batch_size"))
            train_with_curve(trial, model, Xtr, ytr, Xte, yte, float(self._p(trial, "lr")),
                             int(self._p(trial, "batch_size")), int(self._p(trial, "epochs")),
                             self.seed + trial.number, device, precision, inf_batch,
                             self.report_curve)
            with trial.phase("warmup", samples=2 * len(Xte)):
                # The first pass pays one-time costs (allocations, kernels): time the second.
                evaluate(model, Xte, yte, inf_batch, passes=1, device=device,
                         precision=precision)
                t0 = time.perf_counter()
                evaluate(model, Xte, yte, inf_batch, passes=1, device=device,
                         precision=precision)
                one_pass_s = max(time.perf_counter() - t0, 1e-6)
            passes = min(max(self.inference_passes,
                             math.ceil(self.inference_min_s / one_pass_s)), _MAX_PASSES)
            trial.set_metric("inference_passes", passes)
            with trial.phase("inference", samples=len(Xte) * passes):
                acc = evaluate(model, Xte, yte, inf_batch, passes=passes, device=device,
                               precision=precision)
        return {"accuracy": acc, "samples_per_joule": trial.samples_per_joule("inference")}
