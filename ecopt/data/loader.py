"""Input-pipeline knobs and the loader that applies them.

:class:`LoaderConfig` holds the searchable knobs (batch size, DataLoader
``num_workers``, ``prefetch_factor``, ``pin_memory``, in-memory ``cache`` of the
preprocessed data); :func:`make_loader` turns a pipeline and a config into an
:class:`EpochLoader` whose every ``iter()`` is one epoch of batches.

* Table pipelines are whole-table work: without ``cache`` every epoch re-runs
  read -> ... -> to_tensor (like an input pipeline without ``.cache()``); with
  it, the first epoch keeps the tensors and later epochs only slice batches.
  Workers slice and collate batches in the background.
* Per-sample datasets (:class:`~ecopt.data.pipeline.StagedDataset`) run their
  stages inside DataLoader workers; ``cache`` keeps every processed sample
  after the first epoch.
* With a CUDA ``device``, batches arrive on it: with ``pin_memory`` the
  DataLoader pins them (in its pinning thread) and each is copied with
  ``non_blocking=True`` (:func:`ecopt.workloads.device.to_device`); without it,
  a plain blocking copy.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, dataclass, replace
from typing import Any

from ecopt.data.pipeline import StagedDataset, TablePipeline

__all__ = ["LoaderConfig", "EpochLoader", "make_loader", "cpu_cores", "KNOB_NAMES"]

#: The trial.params keys :meth:`LoaderConfig.from_params` reads.
KNOB_NAMES = ("batch_size", "num_workers", "prefetch_factor", "pin_memory", "cache")


def cpu_cores() -> int:
    """CPU cores this process may run on (affinity-aware)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - non-Linux
        return os.cpu_count() or 1


def _as_bool(name: str, v: Any) -> bool:
    if isinstance(v, bool):
        return v
    if isinstance(v, (int, float)) and v in (0, 1):
        return bool(v)
    if isinstance(v, str) and v.lower() in ("true", "false", "yes", "no", "on", "off", "1", "0"):
        return v.lower() in ("true", "yes", "on", "1")
    raise ValueError(f"{name} must be a boolean, got {v!r}")


def _as_int(name: str, v: Any, low: int) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or int(v) != v:
        raise ValueError(f"{name} must be an integer, got {v!r}")
    if v < low:
        raise ValueError(f"{name} >= {low} must hold, got {name}={int(v)}")
    return int(v)


@dataclass(frozen=True)
class LoaderConfig:
    """The input-pipeline knobs of one trial.

    Args:
        batch_size: Samples per batch (``>= 1``).
        num_workers: DataLoader worker processes (``0`` = load in the training
            process); at most the CPU cores this process may use.
        prefetch_factor: Batches each worker prepares ahead (``>= 1``; used only
            with workers).
        pin_memory: Page-locked batches for faster host-to-GPU copies (only
            takes effect when CUDA is available; see :attr:`effective_pin_memory`).
        cache: Keep the preprocessed data in memory after the first epoch.
        shuffle: Shuffle samples every epoch.
        seed: Seed of the shuffling.

    Raises:
        ValueError: naming the knob and value for out-of-range settings,
            including ``num_workers`` beyond this machine's cores.

    Example:
        >>> cfg = LoaderConfig.from_params(trial.params)   # missing knobs keep defaults
    """

    batch_size: int = 64
    num_workers: int = 0
    prefetch_factor: int = 2
    pin_memory: bool = False
    cache: bool = True
    shuffle: bool = True
    seed: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "batch_size", _as_int("batch_size", self.batch_size, 1))
        object.__setattr__(self, "num_workers", _as_int("num_workers", self.num_workers, 0))
        object.__setattr__(self, "prefetch_factor",
                           _as_int("prefetch_factor", self.prefetch_factor, 1))
        object.__setattr__(self, "pin_memory", _as_bool("pin_memory", self.pin_memory))
        object.__setattr__(self, "cache", _as_bool("cache", self.cache))
        cores = cpu_cores()
        if self.num_workers > cores:
            raise ValueError(
                f"num_workers={self.num_workers} exceeds the {cores} CPU core(s) this process "
                f"may use; choose num_workers in [0, {cores}] (search space: Int(0, {cores}))")

    @classmethod
    def from_params(cls, params: Mapping[str, Any], **defaults: Any) -> LoaderConfig:
        """Read the knobs in :data:`KNOB_NAMES` from trial params (others ignored)."""
        kw = dict(defaults)
        kw.update({k: params[k] for k in KNOB_NAMES if k in params})
        return cls(**kw)

    @property
    def effective_pin_memory(self) -> bool:
        """Whether pinning happens (it needs CUDA; on CPU-only machines it is a no-op)."""
        if not self.pin_memory:
            return False
        import torch

        return bool(torch.cuda.is_available())

    def replace(self, **changes: Any) -> LoaderConfig:
        """A copy with knobs changed (validated again)."""
        return replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class _TensorBatches:
    """Dataset whose item ``i`` is batch ``i`` (a slice of index positions) of cached tensors."""

    def __init__(self, tensors: tuple[Any, ...], batches: list[Any]) -> None:
        self.tensors = tensors
        self.batches = batches

    def __len__(self) -> int:
        return len(self.batches)

    def __getitem__(self, i: int) -> tuple[Any, ...]:
        idx = self.batches[i]
        return tuple(t[idx] for t in self.tensors)


class EpochLoader:
    """Iterate it once per epoch; each pass yields batches.

    Table batches are ``(features, codes, target)`` tensors; per-sample datasets
    give whatever their default collation makes of ``(x, label)`` items.

    Attributes:
        epochs_run: Epochs started so far.
        n_samples: Samples per epoch (known after the first table epoch).
    """

    def __init__(self, source: TablePipeline | StagedDataset | Callable[[], tuple[Any, ...]] | Any,
                 config: LoaderConfig, device: str | None = None) -> None:
        if not isinstance(config, LoaderConfig):
            raise ValueError(f"config must be a LoaderConfig, got {config!r}")
        if not (isinstance(source, TablePipeline) or hasattr(source, "__getitem__")
                or callable(source)):
            raise ValueError("source must be a TablePipeline, a map-style dataset or a callable "
                             f"returning a tuple of tensors, got {type(source).__name__}")
        self.source = source
        self.config = config
        self.device = device
        self.epochs_run = 0
        self._cached: tuple[Any, ...] | None = None
        self._primed: tuple[Any, ...] | None = None
        self.n_samples: int | None = len(source) if self.kind == "sample" else None  # type: ignore[arg-type]

    def __repr__(self) -> str:
        return f"EpochLoader({self.source!r}, {self.config!r})"

    @property
    def pin_memory(self) -> bool:
        """Whether batches are pinned: the knob, and a CUDA target (or any GPU without ``device``)."""
        if self.device is None:
            return self.config.effective_pin_memory
        from ecopt.workloads.device import is_cuda

        return self.config.pin_memory and is_cuda(self.device)

    @property
    def kind(self) -> str:
        """``"table"`` (whole-table producer) or ``"sample"`` (per-sample dataset)."""
        if isinstance(self.source, TablePipeline):
            return "table"
        return "sample" if hasattr(self.source, "__getitem__") else "table"

    def prime(self, tensors: tuple[Any, ...]) -> None:
        """Hand over tensors already produced (e.g. in a ``preprocess`` phase).

        With ``cache`` they are kept for every epoch; without it they serve the
        next epoch only, and later epochs produce afresh.
        """
        if self.config.cache:
            self._cached = tuple(tensors)
        else:
            self._primed = tuple(tensors)

    def _dataloader(self, dataset: Any, batch_size: int | None, shuffle: bool) -> Any:
        import torch
        from torch.utils.data import DataLoader

        c = self.config
        g = torch.Generator()
        g.manual_seed(c.seed + self.epochs_run)
        kw: dict[str, Any] = {}
        if c.num_workers > 0:
            kw["prefetch_factor"] = c.prefetch_factor
        return DataLoader(dataset, batch_size=batch_size, shuffle=shuffle, generator=g,
                          num_workers=c.num_workers, pin_memory=self.pin_memory, **kw)

    def _batch_index(self, n: int) -> list[Any]:
        import torch

        c = self.config
        if c.shuffle:
            g = torch.Generator()
            g.manual_seed(c.seed + self.epochs_run)
            order = torch.randperm(n, generator=g)
        else:
            order = torch.arange(n)
        return list(order.split(c.batch_size))

    def tensors(self) -> tuple[Any, ...]:
        """All preprocessed samples as tensors (runs the pipeline unless cached)."""
        if self._cached is not None:
            return self._cached
        out: tuple[Any, ...]
        if self._primed is not None:
            out, self._primed = self._primed, None
            return out
        src: Any = self.source
        if isinstance(src, TablePipeline):
            t = src.run()
            out = (t.features, t.codes, t.target)
        elif self.kind == "table":
            out = tuple(src())
        else:
            import torch

            xs, ys = [], []
            for xb, yb in self._dataloader(self.source, self.config.batch_size, shuffle=False):
                xs.append(xb)
                ys.append(yb)
            out = (torch.cat(xs), torch.cat(ys))
        if self.config.cache:
            self._cached = out
        return out

    def __iter__(self) -> Iterator[Any]:
        c = self.config
        if self.kind == "table" or self._cached is not None or c.cache:
            tensors = self.tensors()
            self.n_samples = int(tensors[0].shape[0])
            ds = _TensorBatches(tensors, self._batch_index(self.n_samples))
            loader = self._dataloader(ds, None, shuffle=False)
        else:
            loader = self._dataloader(self.source, c.batch_size, shuffle=c.shuffle)
        self.epochs_run += 1
        if self.device is None:
            yield from loader
            return
        from ecopt.workloads.device import to_device

        for batch in loader:
            yield to_device(batch, self.device, pin=self.pin_memory)

    def clear_cache(self) -> None:
        """Drop cached tensors (the next epoch preprocesses again)."""
        self._cached = None


def make_loader(source: TablePipeline | StagedDataset | Callable[[], tuple[Any, ...]] | Any,
                config: LoaderConfig | Mapping[str, Any] | None = None, *,
                device: str | None = None, **knobs: Any) -> EpochLoader:
    """An :class:`EpochLoader` over a pipeline with the given knobs.

    Args:
        source: A :class:`TablePipeline`, a :class:`StagedDataset` (or any
            map-style dataset of ``(x, y)`` items), or a callable producing a
            tuple of equally long tensors (called every epoch unless ``cache``).
        config: A :class:`LoaderConfig`, or trial params to read the knobs from.
        device: Put every batch on this device (``cpu``, ``cuda[:N]``); ``None``
            leaves batches where the DataLoader made them.
        **knobs: Knob overrides (``batch_size=128``...).

    Raises:
        ValueError: for bad knob values (naming knob and value).

    Example:
        >>> loader = make_loader(TablePipeline("insurance.csv", INSURANCE, "polars"),
        ...                      trial.params)
        >>> for epoch in range(3):
        ...     for features, codes, target in loader: ...
    """
    if config is None:
        cfg = LoaderConfig(**knobs)
    elif isinstance(config, LoaderConfig):
        cfg = config.replace(**knobs) if knobs else config
    elif isinstance(config, Mapping):
        cfg = LoaderConfig.from_params(config, **knobs)
    else:
        raise ValueError(f"config must be a LoaderConfig or a params dict, got {config!r}")
    return EpochLoader(source, cfg, device)
