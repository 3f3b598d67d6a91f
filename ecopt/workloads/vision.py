"""A vision workload whose images are decoded by a dataframe library: does the backend matter
once a heavy model runs?

The data study found that heavy GPU models mask the dataframe backend: with a
large network on the GPU, the library that reads and decodes the data is a
small share of the whole. This workload makes that checkable. A COCO-shaped
image set (JPEGs of COCO's typical 640 x 480, listed in an ``annotations.csv``
manifest of ``file_name, width, height, category``; :func:`write_coco_like`) is
read and decoded by each backend's own pipeline, then classified by a
torchvision model built from its configuration (``resnet18`` by default;
``weights=None``: nothing is downloaded):

* ``pandas``: ``read_csv``, ``dropna``, category codes with ``map``, decoding
  with ``Series.map``.
* ``polars``: eager ``read_csv``, ``filter``, ``replace_strict`` codes,
  decoding with ``map_elements`` into a binary column.
* ``polars-lazy``: the same expressions on a ``scan_csv`` ``LazyFrame``,
  one ``collect`` per decode.
* ``dask``: ``read_csv``, codes per partition, decoding with
  ``map_partitions`` on dask's threaded scheduler (one partition per core).

Every backend yields the same ``N x S x S x 3`` uint8 array (bit for bit; a
test checks it). The to-tensor step lands on the device: the uint8 batch is
copied (from pinned host memory on CUDA, ``non_blocking=True``; 4x fewer bytes
than float32) and converted to normalised float32 there. On CUDA the decoded
training set is pinned once, since every epoch copies it again.

Knobs (``trial.params``, defaults in brackets): ``backend`` [pandas],
``model`` [resnet18; any ``torchvision.models`` name], ``image_size`` [224],
``batch_size`` [32], ``lr`` [1e-2], ``epochs`` [1], ``pin_memory`` [True; CUDA
only], ``threads`` [None], ``precision`` [float32].

Phases: ``load`` (the manifest, through the backend), ``preprocess`` (decode
and resize the training images through the backend), ``train``, and
``inference``: the held-out images decoded through the backend *and*
classified, so the library's share of inference is measured apart from
training. Returns ``accuracy`` and the training-efficiency metric of
:func:`ecopt.workloads.tabular.finish_trial`. Recorded as metrics:
``data_share_train`` (load + preprocess energy over load + preprocess + train
energy) and ``data_cpu_share_inference`` (CPU seconds of the backend's decoding
over CPU seconds of the inference phase): how much of each side the dataframe
library is, i.e. how far the model masks it.

Example:
    >>> objective = VisionObjective(n_images=64, defaults={"image_size": 64})
    >>> space = ecopt.SearchSpace({"backend": ecopt.Categorical(["pandas", "polars", "dask"])})
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ecopt.data.memory import measured_phase
from ecopt.trial import Trial
from ecopt.workloads.device import Precision, is_cuda, place_model, to_device
from ecopt.workloads.tabular import (
    DeviceObjective,
    TRAIN_METRIC,
    check_returns,
    finish_trial,
    generated_path,
    model_seed,
    set_threads,
)

__all__ = ["VisionObjective", "write_coco_like", "read_manifest", "decode_images",
           "VISION_BACKENDS", "build_vision_model", "COCO_WIDTH", "COCO_HEIGHT"]

#: COCO 2017's most common image size, pixels.
COCO_WIDTH, COCO_HEIGHT = 640, 480
#: Backends whose pipelines decode images here.
VISION_BACKENDS = ("pandas", "polars", "polars-lazy", "dask")
_MANIFEST_COLUMNS = ("file_name", "width", "height", "category")


def write_coco_like(root: str | Path, n_images: int = 200, n_classes: int = 4, seed: int = 0,
                    width: int = COCO_WIDTH, height: int = COCO_HEIGHT) -> Path:
    """Write ``n_images`` quality-90 JPEGs of ``width x height`` and an ``annotations.csv``.

    Each image is noise with a class tint and a bright block at a class-specific
    place (a model can learn them). Categories are strings (``cat_0`` ...).

    Returns:
        The manifest path (``root/annotations.csv``).

    Raises:
        ValueError: for fewer than 2 classes, fewer images than classes, or a
            side under 32 pixels.
    """
    if n_classes < 2:
        raise ValueError(f"n_classes >= 2 must hold, got {n_classes}")
    if n_images < n_classes:
        raise ValueError(f"n_images >= n_classes must hold, got n_images={n_images}, "
                         f"n_classes={n_classes}")
    if min(width, height) < 32:
        raise ValueError(f"width and height >= 32 must hold, got {width}x{height}")
    import pandas as pd
    from PIL import Image

    root = Path(root)
    (root / "images").mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    tints = rng.uniform(40, 200, (n_classes, 3))
    rows = []
    bh, bw = height // 4, width // 4
    for i in range(n_images):
        k = i % n_classes
        img = rng.normal(0, 30, (height, width, 3)).astype(np.float32) + tints[k]
        a = 2 * np.pi * k / n_classes
        cy = int(height / 2 + np.sin(a) * height / 4)
        cx = int(width / 2 + np.cos(a) * width / 4)
        img[max(0, cy - bh // 2):cy + bh // 2, max(0, cx - bw // 2):cx + bw // 2] = 250
        name = f"images/{i:06d}.jpg"
        Image.fromarray(img.clip(0, 255).astype(np.uint8)).save(root / name, quality=90)
        rows.append((name, width, height, f"cat_{k}"))
    path = root / "annotations.csv"
    pd.DataFrame(rows, columns=list(_MANIFEST_COLUMNS)).to_csv(path, index=False)
    return path


class _Decoder:
    """JPEG -> RGB -> ``size x size`` uint8 bytes (picklable; the same code for every backend)."""

    def __init__(self, root: Path, size: int) -> None:
        self.root, self.size = root, size

    def array(self, name: str) -> np.ndarray:
        from PIL import Image, UnidentifiedImageError

        path = self.root / name
        try:
            with Image.open(path) as f:
                f.draft("RGB", (self.size, self.size))  # JPEG DCT scaling: decode less
                im = f.convert("RGB").resize((self.size, self.size), Image.Resampling.BILINEAR)
                return np.asarray(im, dtype=np.uint8)
        except (UnidentifiedImageError, OSError) as exc:
            raise ValueError(f"cannot decode image {str(path)!r}: {exc}") from exc

    def __call__(self, name: str) -> bytes:
        return self.array(name).tobytes()


def _check_backend(backend: str) -> str:
    if backend not in VISION_BACKENDS:
        raise ValueError(f"backend must be one of {list(VISION_BACKENDS)}, got {backend!r}")
    return backend


def read_manifest(path: str | Path, backend: str) -> Any:
    """The manifest as the backend's frame, rows without a file or category dropped.

    Raises:
        FileNotFoundError: when the manifest does not exist.
        ValueError: for an unknown backend or a manifest missing a column.
    """
    _check_backend(backend)
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"image manifest not found: {str(p)!r}")
    if backend == "pandas":
        import pandas as pd

        frame: Any = pd.read_csv(p)
        cols = list(frame.columns)
    elif backend == "polars":
        import polars as pl

        frame = pl.read_csv(p)
        cols = list(frame.columns)
    elif backend == "polars-lazy":
        import polars as pl

        frame = pl.scan_csv(p)
        cols = frame.collect_schema().names()
    else:
        import dask.dataframe as dd

        frame = dd.read_csv(p)
        cols = list(frame.columns)
    missing = [c for c in ("file_name", "category") if c not in cols]
    if missing:
        raise ValueError(f"{str(p)!r}: column {missing[0]!r} is missing (found {cols}); an image "
                         "manifest needs file_name and category")
    if backend.startswith("polars"):
        import polars as pl

        return frame.filter(pl.col("file_name").is_not_null() & pl.col("category").is_not_null())
    return frame.dropna(subset=["file_name", "category"])


def _rows(frame: Any, backend: str) -> int:
    """Rows of a manifest frame (computed for the lazy backends)."""
    if backend == "dask":
        return int(frame.shape[0].compute())
    if backend == "polars-lazy":
        import polars as pl

        return int(frame.select(pl.len()).collect().item())
    return len(frame)


def _collect(frame: Any) -> Any:
    """A polars ``LazyFrame`` collected; an eager ``DataFrame`` as it is."""
    return frame.collect() if hasattr(frame, "collect") else frame


def decode_images(frame: Any, backend: str, root: str | Path, size: int,
                  rows: Sequence[int] | None = None,
                  classes: Sequence[Any] | None = None) -> tuple[np.ndarray, np.ndarray, list[Any]]:
    """Decode (a subset of) a manifest's images through the backend.

    Args:
        frame: What :func:`read_manifest` returned for ``backend``.
        backend: One of :data:`VISION_BACKENDS`.
        root: The folder ``file_name`` is relative to.
        size: Side of the square images, pixels.
        rows: Positions of the manifest rows to decode (all when None); decoded
            in manifest order.
        classes: The category order (sorted categories of the whole manifest when None).

    Returns:
        ``(images, labels, classes)``: ``images`` ``N x size x size x 3`` uint8,
        ``labels`` ``N`` int64 codes into ``classes``.
    """
    _check_backend(backend)
    if size < 8:
        raise ValueError(f"image_size >= 8 must hold, got {size}")
    dec = _Decoder(Path(root), int(size))
    pos = None if rows is None else np.unique(np.asarray(rows, dtype=np.int64))
    if backend == "pandas":
        sub = frame if pos is None else frame.iloc[pos]
        cls = list(classes) if classes is not None else sorted(frame["category"].unique())
        codes = sub["category"].map({c: i for i, c in enumerate(cls)}).to_numpy(np.int64)
        blobs = sub["file_name"].map(dec).tolist()
    elif backend.startswith("polars"):
        import polars as pl

        lf = frame.with_row_index("_row")
        if pos is not None:
            lf = lf.filter(pl.col("_row").is_in(pos.tolist()))
        cls = (list(classes) if classes is not None
               else sorted(_collect(frame.select(pl.col("category").unique())).to_series()))
        out = _collect(lf.select(
            pl.col("category").replace_strict(cls, list(range(len(cls))), return_dtype=pl.Int64)
            .alias("code"),
            pl.col("file_name").map_elements(dec, return_dtype=pl.Binary).alias("pixels"),
        ))
        codes = out["code"].to_numpy()
        blobs = out["pixels"].to_list()
    else:
        import dask

        cls = (list(classes) if classes is not None
               else sorted(frame["category"].unique().compute()))
        idx = {c: i for i, c in enumerate(cls)}
        df = frame
        if pos is not None:  # select before decoding: only the asked-for rows are decoded
            names = frame["file_name"].compute().iloc[pos]
            df = df[df["file_name"].isin(set(names))]
        df = df.repartition(npartitions=max(1, min(os.cpu_count() or 1, 8)))
        coded = df.assign(code=df["category"].map(idx, meta=("category", "int64")))
        pix = coded["file_name"].map_partitions(lambda s: s.map(dec), meta=("file_name", object))
        both = coded[["code"]].assign(pixels=pix)
        with dask.config.set(scheduler="threads"):
            pdf = both.compute()
        codes = pdf["code"].to_numpy(np.int64)
        blobs = pdf["pixels"].tolist()
    n = len(blobs)
    images = np.frombuffer(bytearray(b"".join(blobs)), dtype=np.uint8).reshape(n, size, size, 3)
    return images, np.asarray(codes, dtype=np.int64), cls


def build_vision_model(name: str, n_classes: int) -> Any:
    """A torchvision model built from its configuration (random weights; no download).

    Raises:
        ValueError: naming the model when torchvision has no such model.
    """
    import torchvision

    if name not in torchvision.models.list_models():
        raise ValueError(f"model {name!r} is not a torchvision model (e.g. resnet18, resnet50, "
                         "mobilenet_v3_small)")
    return torchvision.models.get_model(name, weights=None, num_classes=int(n_classes))


def _on_device(u8: Any, device: str, pin: bool) -> Any:
    """The to-tensor step on the device: uint8 NHWC copied there, then float NCHW in [-1, 1]."""
    x = to_device(u8, device, pin=pin)
    return x.permute(0, 3, 1, 2).float().div_(127.5).sub_(1.0)


@dataclass
class VisionObjective(DeviceObjective):
    """A torchvision model on COCO-sized images decoded by a dataframe backend (module docstring).

    Args:
        manifest: An ``annotations.csv`` (``file_name`` relative to its folder,
            ``category``); ``None`` generates one with :func:`write_coco_like`.
        n_images: Images generated when ``manifest`` is None.
        n_classes: Classes generated.
        width, height: Generated image size, pixels (COCO's 640 x 480).
        test_fraction: Seeded share of images held out for inference.
        returns: Names returned (default ``accuracy`` and the training metric).
        defaults: Knob values when the trial does not set them.
        seed: Split, generator and training seed.
        device: ``auto``, ``cpu``, ``cuda`` or ``cuda:N``.
    """

    manifest: str | None = None
    n_images: int = 200
    n_classes: int = 4
    width: int = COCO_WIDTH
    height: int = COCO_HEIGHT
    test_fraction: float = 0.25
    returns: Sequence[str] | None = None
    defaults: dict[str, Any] = field(default_factory=dict)
    seed: int = 0
    device: str = "auto"

    DEFAULTS = {"backend": "pandas", "model": "resnet18", "image_size": 224, "batch_size": 32,
                "lr": 1e-2, "epochs": 1, "pin_memory": True, "threads": None,
                "precision": "float32"}
    quality = "accuracy"

    def __post_init__(self) -> None:
        if not 0 < self.test_fraction < 1:
            raise ValueError(f"test_fraction must lie in (0, 1), got {self.test_fraction}")
        if self.returns is None:
            self.returns = ("accuracy", TRAIN_METRIC)
        self.returns = check_returns(self.returns, type(self).__name__)

    def path(self) -> Path:
        """The manifest (generated on first use when ``manifest`` is None)."""
        if self.manifest is not None:
            return Path(self.manifest)
        return generated_path(
            "coco", (self.n_images, self.n_classes, self.width, self.height, self.seed),
            lambda d: write_coco_like(d, self.n_images, self.n_classes, self.seed, self.width,
                                      self.height))

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
        backend, size = _check_backend(str(p["backend"])), int(p["image_size"])
        bs, epochs = int(p["batch_size"]), int(p["epochs"])
        if bs < 1 or epochs < 1:
            raise ValueError(f"batch_size >= 1 and epochs >= 1 must hold, got batch_size={bs}, "
                             f"epochs={epochs}")
        pin = bool(p["pin_memory"]) and is_cuda(device)
        path = self.path()
        with measured_phase(trial, "load"):
            frame = read_manifest(path, backend)
            n = _rows(frame, backend)
        tr, te = self.split(n)
        with measured_phase(trial, "preprocess", samples=len(tr)):
            x_u8, y, classes = decode_images(frame, backend, path.parent, size, tr)
            x_tr = torch.from_numpy(x_u8)
            if pin:  # every epoch copies the set again: pin it once
                x_tr = x_tr.pin_memory()
            y_tr = torch.from_numpy(y)
        torch.manual_seed(model_seed(trial, self.seed))
        model = place_model(build_vision_model(str(p["model"]), len(classes)), device)
        opt = torch.optim.SGD(model.parameters(), lr=float(p["lr"]), momentum=0.9)
        loss_fn = torch.nn.CrossEntropyLoss()
        gen = torch.Generator().manual_seed(self.seed)
        with measured_phase(trial, "train", samples=len(tr) * epochs):
            model.train()
            for _ in range(epochs):
                order = torch.randperm(len(tr), generator=gen)
                for i in range(0, len(tr), bs):
                    idx = order[i:i + bs]
                    if len(idx) < 2:  # BatchNorm cannot train on one sample
                        continue
                    xb = _on_device(x_tr[idx], device, pin)
                    yb = to_device(y_tr[idx], device, pin=pin)
                    opt.zero_grad()
                    with prec.autocast():
                        loss = loss_fn(model(xb), yb)
                    prec.step(loss, opt)
        model.eval()
        with measured_phase(trial, "inference", samples=len(te)):
            c0 = time.process_time()
            # The held-out images go through the backend here, inside inference.
            x_te, y_te, _ = decode_images(frame, backend, path.parent, size, te, classes)
            c1 = time.process_time()
            correct = 0
            with torch.no_grad(), prec.autocast():
                for i in range(0, len(te), bs):
                    xb = _on_device(torch.from_numpy(x_te[i:i + bs]), device, pin)
                    pred = model(xb).argmax(1).cpu().numpy()
                    correct += int((pred == y_te[i:i + bs]).sum())
            c2 = time.process_time()
        acc = correct / len(te)
        if c2 > c0:
            trial.set_metric("data_cpu_share_inference", (c1 - c0) / (c2 - c0))
        e_data = sum(trial.phases[ph].energy_j for ph in ("load", "preprocess"))
        e_all = e_data + trial.phases["train"].energy_j
        if e_all > 0:
            trial.set_metric("data_share_train", e_data / e_all)
        if not math.isfinite(acc):  # pragma: no cover
            raise FloatingPointError(f"accuracy is {acc}")
        trial.set_user_attr("backend", backend)
        trial.set_user_attr("vision", {"model": str(p["model"]), "image_size": size,
                                       "images": n, "source": str(path), "pinned": pin})
        return finish_trial(trial, "accuracy", acc, len(tr) * epochs, list(self.returns or ()))
