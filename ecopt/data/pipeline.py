"""Pipelines the loaders and the profiler run: a whole-table pipeline and a per-sample one.

* :class:`TablePipeline` runs a backend's five stages over a file (read ->
  impute -> encode -> normalise -> to_tensor) and yields a
  :class:`~ecopt.data.schema.TensorTable`.
* :class:`StagedDataset` is a map-style dataset whose items pass through named
  per-sample stages (``decode``, ``resize``...), so DataLoader workers can run
  them in parallel and the profiler can time each.

Both can be traced: :meth:`TablePipeline.run_traced` materialises stage by
stage under a meter window each.
"""

from __future__ import annotations

import resource
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ecopt.data.backends import Backend, get_backend
from ecopt.data.schema import TableSchema, TensorTable
from ecopt.meters.base import Meter

__all__ = ["TablePipeline", "StagedDataset", "StageTrace", "StageWindow"]


def _cpu_s() -> float:
    me = resource.getrusage(resource.RUSAGE_SELF)
    return me.ru_utime + me.ru_stime


@dataclass
class StageTrace:
    """What one stage cost over one traced run.

    Attributes:
        name: Stage name.
        kind: ``"table"`` (whole table, main process), ``"sample"`` (per item,
            parallelisable by DataLoader workers), ``"batch"`` (slicing or
            collation into batches) or ``"consumer"`` (the training step).
        duration_s: Wall-clock seconds.
        cpu_s: Process CPU seconds (all threads) over the window.
        energy_j: Joules from the meter (see ``measured`` and ``source``).
        measured: Whether the meter measured (``False`` for estimates).
        source: Energy provenance, e.g. ``"estimate-cpu-time"``.
        samples: Items the stage processed in the window.
        out_bytes: Bytes of the stage's output for those items (what caching
            after this stage would keep), or NaN when not measured.
    """

    name: str
    kind: str
    duration_s: float
    cpu_s: float
    energy_j: float
    measured: bool
    source: str
    samples: int
    out_bytes: float = float("nan")

    @property
    def rate(self) -> float:
        """Items per second (inf for an instant stage)."""
        return self.samples / self.duration_s if self.duration_s > 0 else float("inf")

    @property
    def cpu_util(self) -> float:
        """CPU seconds per wall second (>1 when the stage used several threads)."""
        return self.cpu_s / self.duration_s if self.duration_s > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.kind, "duration_s": self.duration_s,
                "cpu_s": self.cpu_s, "energy_j": self.energy_j, "measured": self.measured,
                "source": self.source, "samples": self.samples, "rate": self.rate,
                "out_bytes": self.out_bytes}


@dataclass
class StageWindow:
    """Context manager that fills a :class:`StageTrace` (meter window + CPU time)."""

    name: str
    kind: str
    meter: Meter | None
    samples: int = 0
    trace: StageTrace | None = field(default=None, init=False)

    def __enter__(self) -> StageWindow:
        self._h = self.meter.start() if self.meter is not None else None
        self._c0 = _cpu_s()
        self._t0 = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        dt = time.perf_counter() - self._t0
        cpu = _cpu_s() - self._c0
        if self.meter is not None and self._h is not None:
            m = self.meter.stop(self._h)
            srcs = sorted({c.source for c in m.components.values()})
            energy, measured, source = m.energy_j, m.measured, "+".join(srcs) or "none"
        else:
            energy, measured, source = 0.0, False, "none"
        self.trace = StageTrace(self.name, self.kind, dt, cpu, energy, measured, source,
                                self.samples)


class TablePipeline:
    """read -> impute -> encode -> normalise -> to_tensor over one file, with one backend.

    Args:
        path: CSV, Parquet or MovieLens ``ratings.dat`` file.
        schema: What the columns are and what to do with them.
        backend: ``"pandas"``, ``"polars"``, ``"dask"`` or a backend instance.
        **backend_options: Passed to the backend (``npartitions=`` for dask).

    Example:
        >>> from ecopt.data import TablePipeline, INSURANCE
        >>> table = TablePipeline("insurance.csv", INSURANCE, backend="polars").run()
        >>> table.features.shape, table.target.dtype
        (torch.Size([1000, 11]), torch.float32)
    """

    kind = "table"

    def __init__(self, path: str | Path, schema: TableSchema, backend: str | Backend = "pandas",
                 **backend_options: Any) -> None:
        self.path = Path(path)
        self.schema = schema
        self.backend = get_backend(backend, **backend_options)

    def __repr__(self) -> str:
        return f"TablePipeline({str(self.path)!r}, {self.schema.name}, backend={self.backend.name!r})"

    @property
    def stage_names(self) -> tuple[str, ...]:
        return self.backend.STAGES

    def run(self) -> TensorTable:
        """Every stage at once (lazy backends fuse them into one plan)."""
        return self.backend.run(self.path, self.schema)

    def read(self) -> Any:
        """Only the read stage, materialised (what a ``load`` phase measures)."""
        return self.backend.materialise(self.backend.read(self.path, self.schema))

    def preprocess(self, frame: Any, rows: Sequence[int] | np.ndarray | None = None) -> TensorTable:
        """The stages after read, on a frame from :meth:`read`, fitting their constants.

        Args:
            frame: What :meth:`read` returned.
            rows: File positions (sorted) of the rows to keep, e.g. a training
                split; the constants (means, stds, categories) are fitted on
                those rows alone. All rows when None.

        Returns:
            The tensors; ``table.stats`` holds the fitted constants, which
            :meth:`transform` and :meth:`held_out_batches` apply to other rows.
        """
        from ecopt.data.backends.base import feature_names
        from ecopt.data.schema import build_tensor_table

        b, s = self.backend, self.schema
        if rows is not None:
            frame = b.take(frame, _positions(rows))
        stats: dict[str, Any] = {}
        frame = b.normalise(b.encode(b.impute(frame, s, stats), s, stats), s, stats)
        arrays = b.to_arrays(frame, s, stats)
        return build_tensor_table(arrays, s, feature_names(s, stats["categories"]), stats)

    def labelled_rows(self, frame: Any) -> np.ndarray:
        """File positions of the rows whose target is present (the rows a split divides)."""
        return self.backend.labelled_rows(frame, self.schema)

    def transform(self, frame: Any, stats: dict[str, Any],
                  rows: Sequence[int] | np.ndarray | None = None) -> Any:
        """Impute, encode and normalise with constants fitted earlier: nothing is refitted.

        Args:
            frame: A frame from the backend's ``read`` (lazy ones stay lazy).
            stats: ``table.stats`` of a :meth:`preprocess` call (e.g. on the
                training rows).
            rows: File positions (sorted) of the rows to transform; all when None.

        Returns:
            The backend's frame, materialised: every row with a target, with the
            features of the fitted encoding (a category unseen at fit time is an
            all-zero one-hot block).
        """
        from ecopt.data.backends.base import FITTED

        missing = [k for k in ("impute_means", "categories", "means", "stds") if k not in stats]
        if missing:
            raise ValueError(f"transform needs the constants of a preprocess call; stats lacks "
                             f"{missing} (pass table.stats of TablePipeline.preprocess)")
        b, s = self.backend, self.schema
        if rows is not None:
            frame = b.take(frame, _positions(rows))
        st = {**stats, FITTED: True}
        return b.materialise(b.normalise(b.encode(b.impute(frame, s, st), s, st), s, st))

    def held_out_batches(self, stats: dict[str, Any], rows: Sequence[int] | np.ndarray,
                         batch_size: int) -> Iterator[TensorTable]:
        """Read ``rows`` of the file through the backend and yield them preprocessed, in batches.

        What an inference phase runs: the file is read again by the backend,
        the held-out rows are selected, the constants fitted on the training
        split are applied (:meth:`transform`, no refit), and the library slices
        the batches (``Backend.batches``); each batch becomes tensors.

        Args:
            stats: ``table.stats`` of the :meth:`preprocess` call that fitted the constants.
            rows: File positions (sorted) of the held-out rows.
            batch_size: Rows per batch (about that many for dask).

        Raises:
            ValueError: for a ``batch_size`` below 1, or ``stats`` without fitted constants.
        """
        from ecopt.data.backends.base import feature_names
        from ecopt.data.schema import build_tensor_table

        if isinstance(batch_size, bool) or int(batch_size) != batch_size or batch_size < 1:
            raise ValueError(f"batch_size must be an integer >= 1, got {batch_size!r}")
        b, s = self.backend, self.schema
        frame = self.transform(b.read(self.path, s), stats, rows)
        names = feature_names(s, stats["categories"])
        for batch in b.batches(frame, int(batch_size)):
            yield build_tensor_table(b.to_arrays(batch, s, stats), s, names, stats)

    def run_traced(self, meter: Meter | None = None) -> tuple[TensorTable, list[StageTrace]]:
        """Run stage by stage, materialising each, under one meter window per stage.

        Lazy backends lose their fusion here (each stage is computed on its own),
        so the traced total can exceed :meth:`run`'s time; the shares still show
        where the work is.
        """
        from ecopt.data.backends.base import feature_names
        from ecopt.data.schema import build_tensor_table

        b, s = self.backend, self.schema
        stats: dict[str, Any] = {}
        traces: list[StageTrace] = []
        with StageWindow("read", "table", meter) as w:
            frame = b.materialise(b.read(self.path, s))
        n = _rows(frame)
        traces.append(_with_samples(w, n, frame_bytes(frame)))
        for name, fn in (("impute", b.impute), ("encode", b.encode), ("normalise", b.normalise)):
            with StageWindow(name, "table", meter) as w:
                frame = b.materialise(fn(frame, s, stats))
            traces.append(_with_samples(w, n, frame_bytes(frame)))
        with StageWindow("to_tensor", "table", meter) as w:
            arrays = b.to_arrays(frame, s, stats)
            table = build_tensor_table(arrays, s, feature_names(s, stats["categories"]), stats)
        traces.append(_with_samples(w, len(table), float(table.nbytes)))
        return table, traces

    def run_prefix(self, stage: str) -> tuple[Any, dict[str, Any]]:
        """Run the stages up to and including ``stage``; return what a cache there keeps.

        Returns:
            ``(frame, stats)``: the materialised frame after ``stage`` and the
            constants the stages so far computed (means, categories...), which
            :meth:`run_suffix` needs. For ``"to_tensor"`` the frame is the
            :class:`~ecopt.data.schema.TensorTable`.

        Raises:
            ValueError: for a stage not in :attr:`stage_names`.
        """
        names = list(self.stage_names)
        if stage not in names:
            raise ValueError(f"stage must be one of {names}, got {stage!r}")
        if stage == "to_tensor":
            return self.run(), {}
        b, s = self.backend, self.schema
        stats: dict[str, Any] = {}
        frame = b.materialise(b.read(self.path, s))
        for name, fn in self._middle()[:names.index(stage)]:
            frame = b.materialise(fn(frame, s, stats))
        return frame, stats

    def run_suffix(self, stage: str, frame: Any, stats: dict[str, Any]) -> TensorTable:
        """The stages after ``stage`` on what :meth:`run_prefix` returned (stats are copied)."""
        from ecopt.data.backends.base import feature_names
        from ecopt.data.schema import build_tensor_table

        names = list(self.stage_names)
        if stage not in names:
            raise ValueError(f"stage must be one of {names}, got {stage!r}")
        if stage == "to_tensor":
            return frame  # type: ignore[no-any-return]
        b, s = self.backend, self.schema
        st = dict(stats)
        for name, fn in self._middle()[names.index(stage):]:
            frame = fn(frame, s, st)
        arrays = b.to_arrays(frame, s, st)
        return build_tensor_table(arrays, s, feature_names(s, st["categories"]), st)

    def _middle(self) -> list[tuple[str, Any]]:
        b = self.backend
        return [("impute", b.impute), ("encode", b.encode), ("normalise", b.normalise)]


def _positions(rows: Sequence[int] | np.ndarray) -> np.ndarray:
    pos = np.asarray(rows, dtype=np.int64)
    if pos.ndim != 1 or (pos.size > 1 and bool((np.diff(pos) <= 0).any())) or \
            (pos.size and pos[0] < 0):
        raise ValueError(f"rows must be increasing non-negative file positions, got "
                         f"{pos[:10].tolist()}{'...' if pos.size > 10 else ''}")
    return pos


def _with_samples(w: StageWindow, n: int, out_bytes: float = float("nan")) -> StageTrace:
    assert w.trace is not None
    w.trace.samples = n
    w.trace.out_bytes = out_bytes
    return w.trace


def frame_bytes(frame: Any) -> float:
    """Bytes a frame holds in memory (pandas deep usage, polars estimate, dask summed)."""
    try:
        if hasattr(frame, "collect"):  # polars LazyFrame of an already computed frame
            return float(frame.collect().estimated_size())
        if hasattr(frame, "estimated_size"):
            return float(frame.estimated_size())
        usage = frame.memory_usage(deep=True).sum()
        if hasattr(usage, "compute"):
            usage = usage.compute()
        return float(usage)
    except Exception:  # noqa: BLE001 - sizes are advisory; an unknown frame is NaN
        return float("nan")


def _rows(frame: Any) -> int:
    try:
        return int(len(frame))
    except TypeError:  # polars LazyFrame
        import polars as pl

        return int(frame.select(pl.len()).collect().item())


class StagedDataset:
    """A map-style dataset whose items pass through named per-sample stages.

    Args:
        items: The raw items (file paths, rows...).
        stages: ``(name, fn)`` pairs applied in order to each item.
        labels: One label per item (returned with the processed item), or ``None``.

    Raises:
        ValueError: for no stages, duplicate stage names, or a label count
            that differs from the item count.

    Example:
        >>> ds = StagedDataset(paths, [("decode", load_png), ("to_tensor", to_tensor)], labels)
        >>> x, y = ds[0]
    """

    kind = "sample"

    def __init__(self, items: Sequence[Any], stages: Sequence[tuple[str, Callable[[Any], Any]]],
                 labels: Sequence[int] | None = None) -> None:
        if not stages:
            raise ValueError("a StagedDataset needs at least one (name, fn) stage, got none")
        names = [n for n, _ in stages]
        if len(set(names)) != len(names):
            raise ValueError(f"stage names must be unique, got {names}")
        if labels is not None and len(labels) != len(items):
            raise ValueError(f"{len(labels)} labels for {len(items)} items; give one label per item")
        self.items = list(items)
        self.stages = list(stages)
        self.labels = list(labels) if labels is not None else None

    @property
    def stage_names(self) -> tuple[str, ...]:
        return tuple(n for n, _ in self.stages)

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, i: int) -> Any:
        x = self.items[i]
        for _, fn in self.stages:
            x = fn(x)
        if self.labels is None:
            return x
        return x, self.labels[i]

    def subset(self, indices: Sequence[int]) -> StagedDataset:
        """The same stages over the items at ``indices`` (e.g. a train split)."""
        out = StagedDataset([self.items[i] for i in indices], self.stages,
                            [self.labels[i] for i in indices] if self.labels is not None else None)
        return out

    def __repr__(self) -> str:
        return f"StagedDataset({len(self)} items, stages={list(self.stage_names)})"
