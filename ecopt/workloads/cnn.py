"""A ready objective: train a small CNN, then measure accuracy and inference samples/J.

Architecture knobs (the CNN search space of ECOpt's architecture search):
``channels`` (width of the first block; block ``i`` has ``channels * 2**i``),
``depth`` (conv blocks), ``kernel_size``, ``stride`` (of every conv) and
``pooling`` (``max``, ``avg`` or ``none`` after each block), ended by global
average pooling and a linear classifier. Training reuses
:func:`ecopt.workloads.classifier.train_with_curve` (a learning curve reported per epoch) and
:func:`ecopt.workloads.classifier.evaluate` (they take any torch module).

Data: scikit-learn's digits as ``1 x 8 x 8`` images by default (real, shipped,
no download), or CIFAR-10 from the standard python batches in a local folder
(:func:`load_cifar10`).

FLOPs are counted by ``torch.utils.flop_counter.FlopCounterMode`` on one
forward pass (:func:`count_flops`): one multiply-add is 2 FLOPs, and only the
operators torch counts (convolutions, matrix products) enter.

Device and precision: ``device`` (``auto`` = the GPU when there is one) holds
the model, every batch (copied from pinned memory on CUDA) and the loss;
``precision`` (``float32``, ``bfloat16``, ``float16`` autocast) is a trial
param like the architecture's; a CUDA out-of-memory makes the trial
infeasible; ``peak_host_rss_gb`` and on CUDA ``peak_device_memory_gb`` are
recorded (see :mod:`ecopt.workloads.device`).

Example:
    >>> objective = CNNObjective(epochs=5)
    >>> space = ecopt.SearchSpace({"channels": ecopt.Int(4, 64, log=True),
    ...                            "depth": ecopt.Int(1, 3)})
    >>> study.optimize(objective, n_trials=20)
"""

from __future__ import annotations

import pickle
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ecopt.trial import Trial
from ecopt.workloads.classifier import (
    CachedDataObjective,
    count_parameters,
    evaluate,
    train_with_curve,
)
from ecopt.workloads.device import (
    Precision,
    place_model,
    resolve_device,
    trial_on_device,
)

__all__ = ["POOLINGS", "build_cnn", "conv_output_size", "count_flops", "load_digits_images",
           "load_cifar10", "CNNObjective", "count_parameters"]

#: Pooling choices after each conv block.
POOLINGS = ("max", "avg", "none")


def conv_output_size(size: int, kernel_size: int, stride: int, padding: int) -> int:
    """Spatial size after a convolution: ``floor((size + 2p - k) / s) + 1``."""
    return (size + 2 * padding - kernel_size) // stride + 1


def build_cnn(in_channels: int, n_classes: int, image_size: int, channels: int = 16,
              depth: int = 2, kernel_size: int = 3, stride: int = 1, pooling: str = "max") -> Any:
    """A CNN: ``depth`` blocks of conv -> BatchNorm -> ReLU (-> 2x2 pool), global pool, linear.

    Convolutions use ``padding = kernel_size // 2``. A 2x2 pool is skipped once
    the feature map is smaller than 2x2 (so deep or strided nets on 8x8 digits
    stay valid); the built model records the feature-map sizes in
    ``model.feature_sizes``.

    Args:
        in_channels: Image channels (1 for digits, 3 for CIFAR-10).
        n_classes: Output classes.
        image_size: Input height = width.
        channels: Width of the first block; block ``i`` has ``channels * 2**i``.
        depth: Number of conv blocks.
        kernel_size: Odd kernel size.
        stride: Stride of every convolution.
        pooling: ``max``, ``avg`` or ``none``.

    Raises:
        ValueError: for non-positive sizes, an even kernel or an unknown pooling.
    """
    import torch.nn as nn

    for what, v in (("in_channels", in_channels), ("n_classes", n_classes),
                    ("image_size", image_size), ("channels", channels), ("depth", depth),
                    ("kernel_size", kernel_size), ("stride", stride)):
        if isinstance(v, bool) or int(v) != v or int(v) < 1:
            raise ValueError(f"{what} must be an integer >= 1, got {what}={v!r}")
    if kernel_size % 2 == 0:
        raise ValueError(f"kernel_size must be odd (padding keeps the size), got {kernel_size}")
    if pooling not in POOLINGS:
        raise ValueError(f"pooling must be one of {list(POOLINGS)}, got {pooling!r}")
    layers: list[nn.Module] = []
    c_in, size = int(in_channels), int(image_size)
    sizes = [size]
    for i in range(int(depth)):
        c_out = int(channels) * 2 ** i
        layers += [nn.Conv2d(c_in, c_out, int(kernel_size), stride=int(stride),
                             padding=int(kernel_size) // 2, bias=False),
                   nn.BatchNorm2d(c_out), nn.ReLU()]
        size = conv_output_size(size, int(kernel_size), int(stride), int(kernel_size) // 2)
        if pooling != "none" and size >= 2:
            layers.append(nn.MaxPool2d(2) if pooling == "max" else nn.AvgPool2d(2))
            size //= 2
        sizes.append(size)
        c_in = c_out
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(c_in, int(n_classes))]
    model = nn.Sequential(*layers)
    model.feature_sizes = sizes  # type: ignore[assignment]
    return model


def count_flops(model: Any, input_shape: tuple[int, ...]) -> int:
    """FLOPs of one forward pass on a zero tensor of ``input_shape`` (batch included).

    Counted by ``torch.utils.flop_counter.FlopCounterMode`` (2 FLOPs per
    multiply-add; elementwise ops, norms and pooling are not counted by torch).
    """
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    was_training = model.training
    model.eval()
    counter = FlopCounterMode(display=False)
    param = next(model.parameters(), None)
    device = param.device if param is not None else "cpu"
    with torch.no_grad(), counter:
        model(torch.zeros(*input_shape, device=device))
    model.train(was_training)
    return int(counter.get_total_flops())


def load_digits_images(test_fraction: float = 0.2, seed: int = 0
                       ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """scikit-learn's digits as ``(n, 1, 8, 8)`` float32 images (standardised), stratified split."""
    from ecopt.workloads.classifier import load_digits_split

    Xtr, ytr, Xte, yte = load_digits_split(test_fraction, seed)
    return Xtr.reshape(-1, 1, 8, 8), ytr, Xte.reshape(-1, 1, 8, 8), yte


def _read_batch(path: Path) -> tuple[np.ndarray, np.ndarray]:
    with open(path, "rb") as f:
        d = pickle.load(f, encoding="bytes")
    try:
        data, labels = d[b"data"], d[b"labels"]
    except (KeyError, TypeError):
        raise ValueError(f"{str(path)!r} is not a CIFAR-10 python batch (a pickled dict with "
                         f"b'data' and b'labels'); keys: {list(d)[:5] if isinstance(d, dict) else type(d)}"
                         ) from None
    data = np.asarray(data, dtype=np.uint8)
    if data.ndim != 2 or data.shape[1] != 3072:
        raise ValueError(f"{str(path)!r}: b'data' must be (n, 3072) uint8, got {data.shape}")
    labels_arr = np.asarray(labels, dtype=np.int64)
    if len(labels_arr) != len(data):
        raise ValueError(f"{str(path)!r}: {len(data)} images but {len(labels_arr)} labels")
    return data.reshape(-1, 3, 32, 32), labels_arr


def load_cifar10(directory: str | Path, n_train: int | None = None, n_test: int | None = None
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """CIFAR-10 from the standard python batches (torchvision's ``cifar-10-batches-py`` format).

    Reads ``data_batch_1`` .. ``data_batch_5`` (those present, at least one) and
    ``test_batch`` from ``directory`` (or its ``cifar-10-batches-py``
    subfolder): pickled dicts with ``b"data"`` (uint8 ``(n, 3072)``, channel-major
    32x32) and ``b"labels"``. Images are scaled to [0, 1] and normalised per
    channel with training statistics.

    Args:
        directory: Folder holding the batches.
        n_train, n_test: Keep only the first ``n`` images (quick runs).

    Returns:
        ``(X_train, y_train, X_test, y_test)``; X float32 ``(n, 3, 32, 32)``, y int64.

    Raises:
        FileNotFoundError: when no training batch or no ``test_batch`` is there.
        ValueError: for a file that is not a CIFAR-10 batch.
    """
    root = Path(directory)
    if (root / "cifar-10-batches-py").is_dir():
        root = root / "cifar-10-batches-py"
    train_files = [root / f"data_batch_{i}" for i in range(1, 6) if (root / f"data_batch_{i}").exists()]
    if not train_files or not (root / "test_batch").exists():
        raise FileNotFoundError(
            f"no CIFAR-10 python batches in {str(root)!r}: expected data_batch_1..5 and test_batch "
            "(download and extract cifar-10-python.tar.gz from the CIFAR-10 page there)")
    parts = [_read_batch(f) for f in train_files]
    Xtr = np.concatenate([p[0] for p in parts])
    ytr = np.concatenate([p[1] for p in parts])
    Xte, yte = _read_batch(root / "test_batch")
    if n_train is not None:
        Xtr, ytr = Xtr[:n_train], ytr[:n_train]
    if n_test is not None:
        Xte, yte = Xte[:n_test], yte[:n_test]
    Xtr_f = Xtr.astype(np.float32) / 255.0
    Xte_f = Xte.astype(np.float32) / 255.0
    mu = Xtr_f.mean(axis=(0, 2, 3), keepdims=True)
    sd = Xtr_f.std(axis=(0, 2, 3), keepdims=True) + 1e-6
    return ((Xtr_f - mu) / sd).astype(np.float32), ytr, ((Xte_f - mu) / sd).astype(np.float32), yte


@dataclass
class CNNObjective(CachedDataObjective):
    """Train + evaluate a CNN; returns ``accuracy`` and inference ``samples_per_joule``.

    Reads ``channels``, ``depth``, ``kernel_size``, ``stride``, ``pooling``,
    ``batch_size``, ``lr``, ``epochs`` and ``precision`` from the trial
    (defaults below when the space does not search them). Records ``n_params``
    and ``flops`` (per image) as metrics, and the data set as the user
    attribute ``data``. Picklable; the data is loaded once per process.

    Args:
        cifar10_dir: Read CIFAR-10 from here instead of digits.
        n_train, n_test: Subsample CIFAR-10 (quick CPU runs).
        inference_passes: Passes over the test set inside the ``inference`` phase.
        inference_batch_size: Inference batch.
        seed: Split and training seed.
        device: ``auto``, ``cpu``, ``cuda`` or ``cuda:N``.
        precision: Default ``precision`` (``float32``, ``bfloat16``, ``float16``).
        report_curve: After each epoch, measure the test accuracy (phase
            ``validate``) and ``trial.report`` it with the training loss, so a
            study's pruner can stop the trial
            (:func:`~ecopt.workloads.classifier.train_with_curve`). ``False``:
            one ``train`` window and no curve. The curve costs one evaluation
            pass per epoch; its joules are the ``validate`` phase's, counted
            in the trial's energy (turn it off when no pruner is used and
            every joule of the trial should be training and inference).
    """

    cifar10_dir: str | None = None
    n_train: int | None = None
    n_test: int | None = None
    channels: int = 16
    depth: int = 2
    kernel_size: int = 3
    stride: int = 1
    pooling: str = "max"
    batch_size: int = 64
    lr: float = 1e-2
    epochs: int = 5
    inference_batch_size: int = 256
    inference_passes: int = 20
    seed: int = 0
    device: str = "auto"
    precision: str = "float32"
    report_curve: bool = True

    @property
    def data_name(self) -> str:
        """What the objective trains on, as recorded with every trial."""
        if self.cifar10_dir is not None:
            return f"CIFAR-10 python batches from {self.cifar10_dir}"
        return "scikit-learn digits as 1x8x8 images (the default; NOT CIFAR-10)"

    def data(self) -> tuple[np.ndarray, ...]:
        """``(X_train, y_train, X_test, y_test)``, loaded on first use."""
        if self._data is None:
            if self.cifar10_dir is not None:
                self._data = load_cifar10(self.cifar10_dir, self.n_train, self.n_test)
            else:
                self._data = load_digits_images(seed=self.seed)
        return self._data

    def _p(self, trial: Trial, name: str) -> Any:
        return trial.params.get(name, getattr(self, name))

    def build(self, params: dict[str, Any]) -> Any:
        """The CNN for ``params`` (defaults fill the gaps), sized for the data."""
        Xtr, ytr, _, _ = self.data()
        get = lambda k: params.get(k, getattr(self, k))  # noqa: E731
        return build_cnn(Xtr.shape[1], int(ytr.max()) + 1, Xtr.shape[2], int(get("channels")),
                         int(get("depth")), int(get("kernel_size")), int(get("stride")),
                         str(get("pooling")))

    def __call__(self, trial: Trial) -> dict[str, float]:
        import torch

        device = resolve_device(self.device)
        precision = str(self._p(trial, "precision"))
        Precision(precision, device)  # validate before anything runs
        trial.set_user_attr("data", self.data_name)
        with trial_on_device(trial, device):
            with trial.phase("load"):
                Xtr, ytr, Xte, yte = self.data()
            # FLOPs from a shape-only (meta) copy: no compute, nothing on any device.
            with torch.device("meta"):
                shapes = self.build(trial.params)
            trial.set_metric("flops", count_flops(shapes, (1, *Xtr.shape[1:])))
            torch.manual_seed(self.seed + trial.number)
            model = place_model(self.build(trial.params), device)
            trial.set_metric("n_params", count_parameters(model))
            train_with_curve(trial, model, Xtr, ytr, Xte, yte, float(self._p(trial, "lr")),
                             int(self._p(trial, "batch_size")), int(self._p(trial, "epochs")),
                             self.seed + trial.number, device, precision,
                             self.inference_batch_size, self.report_curve)
            # At least inference_passes, repeated in one window until the meter resolves it.
            acc = trial.repeat_in_phase(
                "inference", lambda: evaluate(model, Xte, yte, self.inference_batch_size,
                                              passes=self.inference_passes, device=device,
                                              precision=precision),
                samples_per_call=len(Xte) * self.inference_passes)
        return {"accuracy": acc, "samples_per_joule": trial.samples_per_joule("inference")}
