"""A ready objective: a small CNN on an image folder, with input-pipeline knobs searchable.

Images are decoded per sample (``decode``: PIL open, RGB, resize; ``to_tensor``)
inside the DataLoader, so ``num_workers``, ``prefetch_factor`` and ``cache``
decide how the decoding overlaps training. The CNN comes from
:func:`ecopt.workloads.cnn.build_cnn` (conv -> BatchNorm -> ReLU -> pool blocks).
There is no dataframe here: a ``backend`` in the params is ignored (recorded
as a user attribute).

Knobs (``trial.params``, defaults in brackets): ``batch_size`` [32],
``num_workers`` [0], ``prefetch_factor`` [2], ``pin_memory`` [True; CUDA
only], ``cache`` [True: decoded tensors kept after the first epoch], ``lr``
[1e-2], ``channels`` [8], ``depth`` [2], ``epochs`` [8], ``image_size`` [32],
``threads`` [None], ``precision`` [float32; or ``bfloat16``/``float16``
autocast].

The CNN, batches and loss live on ``device`` (``auto``: the GPU when there is
one); decoding stays on the CPU (in the loader), and decoded batches are
copied from pinned memory; a CUDA out-of-memory makes the trial infeasible
(see :mod:`ecopt.workloads.device`).

Phases: ``load`` (list the folder), ``preprocess`` (with ``cache``: decode every
training image once; without it this phase is empty and decoding happens in
``train``), ``train``, ``inference`` (decode and classify the test images).
Returns ``accuracy`` and ``train_rows_per_joule`` (training images x epochs per
joule) as in :mod:`ecopt.workloads.tabular`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ecopt.data.datasets import ImageFolder
from ecopt.data.loader import LoaderConfig, make_loader
from ecopt.data.memory import measured_phase, measured_repeat
from ecopt.trial import Trial
from ecopt.workloads.device import Precision, place_model
from ecopt.workloads.tabular import (
    DeviceObjective,
    TRAIN_METRIC,
    check_returns,
    finish_trial,
    generated_path,
    set_threads,
)

__all__ = ["ImageFolderObjective", "profile_target"]


def _build(n_classes: int, size: int, channels: int, depth: int) -> Any:
    from ecopt.workloads.cnn import build_cnn

    return build_cnn(3, n_classes, size, channels=channels, depth=depth)


@dataclass
class ImageFolderObjective(DeviceObjective):
    """Small CNN on ``root/<class>/<image>`` folders (see module docstring).

    Args:
        data: The image folder; ``None`` generates one.
        n_classes, images_per_class, size: Generated folder shape.
        test_fraction: Seeded share of images held out.
        returns: Names returned (default ``accuracy``, ``train_rows_per_joule``).
        defaults: Knob values when the trial does not set them.
        seed: Split, generator and training seed.
        device: ``auto``, ``cpu``, ``cuda`` or ``cuda:N``.
    """

    data: str | None = None
    n_classes: int = 3
    images_per_class: int = 40
    size: int = 32
    test_fraction: float = 0.25
    returns: Sequence[str] | None = None
    defaults: dict[str, Any] = field(default_factory=dict)
    seed: int = 0
    device: str = "auto"

    DEFAULTS = {"batch_size": 32, "num_workers": 0, "prefetch_factor": 2, "pin_memory": True,
                "cache": True, "lr": 1e-2, "channels": 8, "depth": 2, "epochs": 8,
                "image_size": 32, "threads": None, "precision": "float32"}
    quality = "accuracy"

    def __post_init__(self) -> None:
        if not 0 < self.test_fraction < 1:
            raise ValueError(f"test_fraction must lie in (0, 1), got {self.test_fraction}")
        if self.returns is None:
            self.returns = ("accuracy", TRAIN_METRIC)
        self.returns = check_returns(self.returns, type(self).__name__)

    def root(self) -> Path:
        if self.data is not None:
            return Path(self.data)
        from ecopt.data.datasets import make_image_folder

        return generated_path(
            "images", (self.n_classes, self.images_per_class, self.size, self.seed),
            lambda d: make_image_folder(d / "images", self.n_classes, self.images_per_class,
                                        self.size, self.seed))

    def params(self, trial: Trial) -> dict[str, Any]:
        return {**self.DEFAULTS, **self.defaults, **trial.params}

    def split(self, n: int) -> tuple[list[int], list[int]]:
        perm = np.random.default_rng(self.seed).permutation(n)
        n_test = max(1, int(round(n * self.test_fraction)))
        return sorted(perm[n_test:].tolist()), sorted(perm[:n_test].tolist())

    def _run(self, trial: Trial, p: dict[str, Any], device: str, prec: Precision
             ) -> dict[str, float]:
        import torch

        set_threads(p.get("threads"))
        cfg = LoaderConfig.from_params(p)
        if "backend" in trial.params:
            trial.set_user_attr("backend_ignored", str(trial.params["backend"]))
        epochs, size = int(p["epochs"]), int(p["image_size"])
        with measured_phase(trial, "load"):
            ds = ImageFolder(self.root(), size=size)
            tr, te = self.split(len(ds))
            train_ds, test_ds = ds.subset(tr), ds.subset(te)
        loader = make_loader(train_ds, cfg, device=device)
        with measured_phase(trial, "preprocess", samples=len(tr)):
            if cfg.cache:
                loader.tensors()
        torch.manual_seed(self.seed + trial.number)
        model = place_model(_build(len(ds.classes), size, int(p["channels"]), int(p["depth"])),
                            device)
        opt = torch.optim.SGD(model.parameters(), lr=float(p["lr"]), momentum=0.9)
        loss_fn = torch.nn.CrossEntropyLoss()
        with measured_phase(trial, "train", samples=len(tr) * epochs):
            model.train()
            for _ in range(epochs):
                for xb, yb in loader:
                    opt.zero_grad()
                    with prec.autocast():
                        loss = loss_fn(model(xb), yb)
                    prec.step(loss, opt)
        test_loader = make_loader(test_ds, cfg.replace(cache=False, shuffle=False), device=device)
        model.eval()

        def infer() -> int:
            correct = torch.zeros((), dtype=torch.int64, device=device)
            with torch.no_grad(), prec.autocast():
                for xb, yb in test_loader:
                    correct += (model(xb).argmax(1) == yb).sum()
            return int(correct)

        # Repeated in one window until the meter resolves it (a small test set is quick).
        acc = measured_repeat(trial, "inference", infer, samples_per_call=len(te)) / len(te)
        if not math.isfinite(acc):  # pragma: no cover
            raise FloatingPointError(f"accuracy is {acc}")
        trial.set_user_attr("loader", cfg.to_dict())
        return finish_trial(trial, "accuracy", acc, len(tr) * epochs, list(self.returns or ()))


def profile_target(data: str | None = None, backend: str = "pandas", workdir: str | None = None
                   ) -> tuple[ImageFolder, Callable[[Any], None]]:
    """The image-folder dataset and one CNN training step (for ``ecopt profile``)."""
    import torch

    obj = ImageFolderObjective(data=data)
    ds = ImageFolder(obj.root(), size=32)
    model = _build(len(ds.classes), 32, 8, 2)
    opt = torch.optim.SGD(model.parameters(), lr=1e-2, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()

    def step(batch: Any) -> None:
        xb, yb = batch[0], batch[-1]
        opt.zero_grad()
        loss_fn(model(xb), yb).backward()
        opt.step()

    return ds, step
