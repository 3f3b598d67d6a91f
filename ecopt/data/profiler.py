"""Plumber-style diagnosis of an input pipeline: where the time and the joules go.

:func:`profile` traces each stage of a pipeline once (wall time, CPU time and a
meter window each), times the consumer (a training step) on a few batches,
then uses a small analytical model of the loader to predict the epoch time of
other knob settings, as Plumber does from per-stage rates:

* table stages (whole-table dataframe work) run in the training process before
  the first batch; they are paid every epoch unless ``cache`` is on;
* per-sample stages and batch collation run in ``num_workers`` processes in
  parallel with the consumer (``num_workers=0``: in series with it). A stage's
  CPU-bound share scales with ``min(num_workers, cores)``, its waiting share
  (I/O, sleeps) with ``num_workers``;
* a cache keeps every preprocessed sample after the first epoch, so later
  epochs only slice batches from memory (if the data fit in half the free RAM).

The bottleneck is the input stage with the largest time per epoch under the
current settings; the pipeline is *input-bound* when input work per epoch
exceeds the consumer's. Recommendations change one knob at a time and are
ranked by predicted speed-up over ``epochs`` epochs; ``best_config`` combines them.
Energy comes from the meter (with ``meter="auto"`` on a machine without power
counters it is an estimate from CPU time, and every report says so).

Beyond the one-knob recommendations, the per-stage rates, CPU costs and output
sizes feed :func:`ecopt.data.allocation.allocate`, a linear program over
``num_workers``, ``prefetch_factor``, where to cache (after which stage, under a
memory limit) and the backend: ``Diagnosis.allocation`` (printed by ``ecopt
profile``); :func:`ecopt.data.allocation.apply_setting` applies it.
"""

from __future__ import annotations

import argparse
import math
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ecopt.data.allocation import (
    Allocation,
    PipelineProfile,
    PipelineSetting,
    StageCost,
    allocate,
)
from ecopt.data.loader import EpochLoader, LoaderConfig, _TensorBatches, cpu_cores
from ecopt.data.pipeline import StagedDataset, StageTrace, StageWindow, TablePipeline
from ecopt.meters import Meter, get_meter

__all__ = ["profile", "Diagnosis", "StageReport", "Recommendation", "cli_main",
           "WORKER_START_S", "measure_worker_start_s", "effective_cores"]

#: Fallback seconds one DataLoader worker costs to start each epoch, used only
#: when ``measure_worker_start=False``.
WORKER_START_S = 0.05

_WORKER_START_CACHE: dict[int, float] = {}


class _Tiny:
    def __len__(self) -> int:
        return 2

    def __getitem__(self, i: int) -> int:
        return i


def measure_worker_start_s(workers: int = 1) -> float:
    """Seconds to start ``workers`` DataLoader workers and get a first batch (per worker).

    Measured once per process (a fork, torch's worker setup, queues) and cached.
    """
    if workers not in _WORKER_START_CACHE:
        import time

        from torch.utils.data import DataLoader

        t0 = time.perf_counter()
        for _ in DataLoader(_Tiny(), batch_size=1, num_workers=workers):  # type: ignore[arg-type]
            pass
        _WORKER_START_CACHE[workers] = (time.perf_counter() - t0) / workers
    return _WORKER_START_CACHE[workers]


def effective_cores(cores: int) -> float:
    """Cores this pipeline can count on: ``cores`` minus the load other processes put on them.

    Uses the 1-minute load average (Linux); one runnable task (this one) is
    not counted as competition. Never below 1.
    """
    try:
        load = os.getloadavg()[0]
    except (AttributeError, OSError):  # pragma: no cover - no load average
        return float(cores)
    return float(max(1.0, min(cores, cores - max(0.0, load - 1.0))))


@dataclass
class StageReport:
    """One stage, scaled to a full epoch.

    Attributes:
        name, kind: As in :class:`~ecopt.data.pipeline.StageTrace`.
        duration_s: Seconds per epoch when run in one process.
        cpu_s: CPU seconds per epoch.
        energy_j: Joules per epoch (``measured`` says whether measured).
        rate: Samples per second in one process.
        energy_share: Fraction of all traced joules (stages + consumer).
        time_share: Fraction of predicted epoch time under the current settings.
    """

    name: str
    kind: str
    duration_s: float
    cpu_s: float
    energy_j: float
    measured: bool
    source: str
    rate: float
    energy_share: float = 0.0
    time_share: float = 0.0
    out_bytes: float = math.nan

    @property
    def cpu_util(self) -> float:
        return self.cpu_s / self.duration_s if self.duration_s > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class Recommendation:
    """Change one knob (or the backend) and expect ``predicted_gain`` x faster epochs.

    Attributes:
        kind: ``"caching"``, ``"parallelism"``, ``"prefetching"`` or ``"backend"``.
        knob: The knob (``"cache"``, ``"num_workers"``, ``"backend"``).
        value: Its new value.
        predicted_gain: Predicted epoch-time ratio (old / new) over ``epochs``.
        predicted_rate: Predicted samples per second after the change.
        reason: One sentence on why.
    """

    kind: str
    knob: str
    value: Any
    predicted_gain: float
    predicted_rate: float
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class Diagnosis:
    """What :func:`profile` found. ``print(diagnosis)`` gives the table."""

    stages: list[StageReport]
    consumer: StageReport | None
    bottleneck: str
    input_bound: bool
    n_samples: int
    epochs: int
    config: LoaderConfig
    cores: int
    predicted_rate: float
    consumer_rate: float | None
    recommendations: list[Recommendation]
    best_config: LoaderConfig
    best_gain: float
    measured: bool
    backend: str | None = None
    notes: list[str] = field(default_factory=list)
    allocation: Allocation | None = None
    pipeline_profile: PipelineProfile | None = None

    @property
    def recommended_config(self) -> LoaderConfig:
        """The current config with the top recommendation's knob applied."""
        for r in self.recommendations:
            if r.knob in ("cache", "num_workers", "prefetch_factor", "batch_size"):
                return self.config.replace(**{r.knob: r.value})
        return self.config

    def stage(self, name: str) -> StageReport:
        for s in self.stages:
            if s.name == name:
                return s
        raise KeyError(f"no stage {name!r}; stages: {[s.name for s in self.stages]}")

    def to_dict(self) -> dict[str, Any]:
        return {
            "stages": [s.to_dict() for s in self.stages],
            "consumer": self.consumer.to_dict() if self.consumer else None,
            "bottleneck": self.bottleneck, "input_bound": self.input_bound,
            "n_samples": self.n_samples, "epochs": self.epochs, "config": self.config.to_dict(),
            "cores": self.cores, "predicted_rate": self.predicted_rate,
            "consumer_rate": self.consumer_rate,
            "recommendations": [r.to_dict() for r in self.recommendations],
            "best_config": self.best_config.to_dict(), "best_gain": self.best_gain,
            "measured": self.measured, "backend": self.backend, "notes": list(self.notes),
            "allocation": self.allocation.to_dict() if self.allocation else None,
        }

    def to_text(self) -> str:
        label = "measured" if self.measured else "ESTIMATED"
        lines = [
            f"Input pipeline diagnosis: {self.n_samples} samples/epoch, {self.epochs} epochs, "
            f"{self.cores} cores" + (f", backend {self.backend}" if self.backend else ""),
            f"settings: batch_size={self.config.batch_size} num_workers={self.config.num_workers}"
            f" prefetch_factor={self.config.prefetch_factor} pin_memory={self.config.pin_memory}"
            f" cache={self.config.cache}",
            "",
            f"{'stage':<14}{'kind':<9}{'s/epoch':>10}{'samples/s':>12}{'CPU s':>9}{'CPU%':>7}"
            f"{'energy J':>11}{'J share':>9}{'time share':>11}",
        ]
        rows = self.stages + ([self.consumer] if self.consumer else [])
        for s in rows:
            lines.append(
                f"{s.name:<14}{s.kind:<9}{s.duration_s:>10.4f}{_fmt_rate(s.rate):>12}"
                f"{s.cpu_s:>9.3f}{100 * s.cpu_util:>6.0f}%{s.energy_j:>11.3f}"
                f"{100 * s.energy_share:>8.1f}%{100 * s.time_share:>10.1f}%")
        src = sorted({s.source for s in rows})
        lines.append(f"energy: {label} ({', '.join(src)})")
        lines.append("")
        lines.append(self.verdict())
        if self.consumer_rate is not None:
            lines.append(f"consumer (training step) could take {_fmt_rate(self.consumer_rate)} "
                         "samples/s")
        lines.append(f"predicted end-to-end rate now: {_fmt_rate(self.predicted_rate)} samples/s")
        if self.recommendations:
            lines.append("recommendations (one knob at a time, predicted over "
                         f"{self.epochs} epochs):")
            for r in self.recommendations:
                lines.append(f"  - [{r.kind}] set {r.knob}={r.value!r}: {r.predicted_gain:.2f}x "
                             f"faster ({_fmt_rate(r.predicted_rate)} samples/s). {r.reason}")
            b = self.best_config
            lines.append(f"  combined: num_workers={b.num_workers} cache={b.cache} -> "
                         f"{self.best_gain:.2f}x")
        else:
            lines.append("no knob change is predicted to speed this pipeline up by 5% or more")
        if self.allocation is not None:
            lines += ["", self.allocation.to_text()]
        lines += [f"note: {n}" for n in self.notes]
        return "\n".join(lines)

    __str__ = to_text

    def verdict(self) -> str:
        """One line: what limits the pipeline's speed, in words a newcomer reads once."""
        try:
            rate = f" ({_fmt_rate(self.stage(self.bottleneck).rate)} samples/s alone)"
        except KeyError:
            rate = ""
        if self.input_bound:
            return (f"limited by: the input pipeline (input-bound): the training step waits "
                    f"for data; its slowest stage is {self.bottleneck}{rate}, so input knobs "
                    "below can speed training up")
        return (f"limited by: the training step (not input-bound): the input pipeline keeps "
                f"up (its slowest stage is {self.bottleneck}{rate}), so input knobs cannot "
                "speed training up much")


def _fmt_rate(r: float) -> str:
    if math.isinf(r):
        return "inf"
    return f"{r:,.0f}" if r >= 100 else f"{r:.3g}"


def _available_ram_bytes() -> float:
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024.0
    except OSError:  # pragma: no cover
        pass
    return float("inf")


def _nbytes(x: Any) -> int:
    if hasattr(x, "element_size") and hasattr(x, "nelement"):
        return int(x.element_size() * x.nelement())
    if hasattr(x, "nbytes"):
        return int(x.nbytes)
    if isinstance(x, (tuple, list)):
        return sum(_nbytes(v) for v in x)
    return 8


class _Model:
    """Predicts seconds for ``epochs`` epochs under a config (see module docstring)."""

    def __init__(self, table_s: float, sample_s: float, sample_cpu_frac: float, collate_s: float,
                 slice_s: float, consumer_s: float, cores: float, epochs: int,
                 worker_start_s: float = WORKER_START_S) -> None:
        self.table_s, self.sample_s, self.frac = table_s, sample_s, sample_cpu_frac
        self.collate_s, self.slice_s, self.consumer_s = collate_s, slice_s, consumer_s
        self.cores, self.epochs = cores, epochs
        self.worker_start_s = worker_start_s

    def _parallel(self, work_s: float, cpu_frac: float, workers: int) -> float:
        if workers <= 0:
            return work_s
        cpu = work_s * cpu_frac / min(workers, self.cores)
        wait = work_s * (1 - cpu_frac) / workers
        return cpu + wait

    def epoch_s(self, cfg: LoaderConfig, epoch: int) -> float:
        w = cfg.num_workers
        cached = cfg.cache and epoch > 0
        start = self.worker_start_s * w
        serial = 0.0 if cached else self.table_s
        stream, frac = self.slice_s, 1.0
        if self.sample_s > 0 and cfg.cache and epoch == 0:
            # The cache is built by one ordered pass through the workers, then served.
            serial += self._parallel(self.sample_s + self.collate_s, self.frac, w) + start
        elif self.sample_s > 0 and not cached:
            stream, frac = self.sample_s + self.collate_s, self.frac
        if w == 0:
            loop = stream + self.consumer_s
        else:
            loop = max(self._parallel(stream, frac, w), self.consumer_s) + start
        return serial + loop

    def total_s(self, cfg: LoaderConfig) -> float:
        return sum(self.epoch_s(cfg, e) for e in range(self.epochs))

    def input_s(self, cfg: LoaderConfig) -> float:
        """Input work per epoch (average over epochs) as the consumer sees it."""
        tot = 0.0
        for e in range(self.epochs):
            tot += self.epoch_s(cfg, e) - (self.consumer_s if cfg.num_workers == 0 else 0.0)
        return tot / self.epochs


def _first_batches(loader_tensors: tuple[Any, ...], batch_size: int, n: int) -> list[Any]:
    out = []
    total = int(loader_tensors[0].shape[0])
    for i in range(min(n, math.ceil(total / batch_size))):
        out.append(tuple(t[i * batch_size:(i + 1) * batch_size] for t in loader_tensors))
    return out


def profile(source: TablePipeline | StagedDataset | EpochLoader | Callable[[], tuple[Any, ...]],
            consumer: Callable[[Any], Any] | None = None, *, config: LoaderConfig | None = None,
            epochs: int = 3, trace_samples: int = 256, consumer_batches: int = 5,
            meter: str | Meter = "auto", try_backends: Sequence[str] = (),
            cores: int | None = None, warmup: bool = True,
            measure_worker_start: bool = True,
            memory_limit_bytes: float | None = None) -> Diagnosis:
    """Trace a pipeline's stages, time its consumer and recommend knob changes.

    Args:
        source: A :class:`TablePipeline`, a :class:`StagedDataset` (any
            per-sample dataset with named ``stages``), a callable producing a
            tuple of tensors (traced as one ``produce`` stage) or an
            :class:`EpochLoader` (whose source and config are used).
        consumer: The training step, called with one batch; ``None`` treats the
            consumer as infinitely fast (the pipeline alone is judged).
        config: Current knobs (default: the loader's, else ``LoaderConfig()``).
        epochs: Epochs the predictions cover (caching pays off from the second).
        trace_samples: Items traced through per-sample stages (scaled to the epoch).
        consumer_batches: Batches the consumer is timed on (after one warm-up).
        meter: Meter for each stage's energy (``"auto"``: an estimate here).
        try_backends: For table pipelines, other backends to trace too; each
            becomes a ``backend`` recommendation with its measured gain.
        cores: CPU cores the model may use (default: this process's cores,
            less the load other processes put on them; see :func:`effective_cores`).
        warmup: Run a table pipeline once untraced first, so library imports
            and first-call costs stay out of the stage times.
        measure_worker_start: Time how long a DataLoader worker takes to start
            (once per process) instead of assuming :data:`WORKER_START_S`.
        memory_limit_bytes: Most bytes the allocation's cache and prefetch
            buffers may keep (default: half the free RAM).

    Returns:
        A :class:`Diagnosis`.

    Raises:
        ValueError: for ``epochs < 1`` or ``trace_samples < 1``, or a source of
            another kind.

    Example:
        >>> diag = ecopt.data.profile(ImageFolder("imgs"), consumer=train_step)
        >>> print(diag)               # per-stage table, bottleneck, recommendations
        >>> loader = make_loader(ds, diag.best_config)
    """
    if isinstance(epochs, bool) or int(epochs) != epochs or epochs < 1:
        raise ValueError(f"epochs >= 1 must hold, got {epochs!r}")
    if trace_samples < 1:
        raise ValueError(f"trace_samples >= 1 must hold, got {trace_samples!r}")
    if isinstance(source, EpochLoader):
        config = config or source.config
        source = source.source
    config = config or LoaderConfig()
    m = get_meter(meter)
    notes: list[str] = []
    ncores = int(cores or cpu_cores())
    par_cores = float(cores) if cores else effective_cores(ncores)
    if par_cores < ncores:
        notes.append(f"other processes keep this machine busy (load average "
                     f"{os.getloadavg()[0]:.1f}): parallel stages are modelled "
                     f"on {par_cores:.2g} of {ncores} cores")
    start_s = measure_worker_start_s() if measure_worker_start else WORKER_START_S
    notes.append(f"a DataLoader worker takes {start_s:.3f} s to start each epoch"
                 + (" (measured)" if measure_worker_start else " (assumed)"))
    bs = config.batch_size

    traces: list[StageTrace] = []
    alt_tables: dict[str, list[StageTrace]] = {}
    tensors: tuple[Any, ...]
    scale = 1.0
    burst = 1.0
    if isinstance(source, TablePipeline):
        kind = "table"
        if warmup:
            source.run()
        table, traces = source.run_traced(m)
        n = len(table)
        tensors = (table.features, table.codes, table.target)
        cache_bytes = table.nbytes
        notes.append("table stages were materialised one by one to time them; a lazy backend "
                     "fuses them in normal runs, so its real total can be lower")
    elif hasattr(source, "stages") and hasattr(source, "__getitem__"):
        import torch
        from torch.utils.data import default_collate

        kind = "sample"
        ds: Any = source
        n = len(ds)
        if n == 0:
            raise ValueError("the dataset is empty; nothing to profile")
        k = min(n, int(trace_samples))
        idx = [int(i * n / k) for i in range(k)]
        values = [ds.items[i] for i in idx]
        item_s = [0.0] * k
        for name, fn in ds.stages:
            out_vals = []
            with StageWindow(name, "sample", m, samples=k) as w:
                for j, v in enumerate(values):
                    t_item = time.perf_counter()
                    out_vals.append(fn(v))
                    item_s[j] += time.perf_counter() - t_item
            values = out_vals
            assert w.trace is not None
            w.trace.out_bytes = float(_nbytes(values))
            traces.append(w.trace)
        groups = [sum(item_s[i:i + bs]) for i in range(0, k, bs)]
        burst = max(groups) / (sum(groups) / len(groups)) if sum(groups) > 0 else 1.0
        labels = [ds.labels[i] for i in idx] if ds.labels is not None else None
        items = list(zip(values, labels)) if labels is not None else values
        with StageWindow("collate", "batch", m, samples=k) as w:
            batches = [default_collate(items[i:i + bs]) for i in range(0, k, bs)]
        assert w.trace is not None
        traces.append(w.trace)
        tensors = tuple(torch.cat([b[j] for b in batches])
                        for j in range(len(batches[0]))) \
            if isinstance(batches[0], (tuple, list)) else (torch.cat(batches),)
        scale = n / k
        cache_bytes = int(_nbytes(tensors) * scale)
    elif callable(source):
        # A producer of tensors (what make_loader accepts): one opaque table stage.
        kind = "table"
        with StageWindow("produce", "table", m) as w:
            tensors = tuple(source())
        assert w.trace is not None
        n = int(tensors[0].shape[0])
        w.trace.samples = n
        traces = [w.trace]
        cache_bytes = _nbytes(tensors)
    else:
        raise ValueError(f"profile() takes a TablePipeline, a StagedDataset, a tensor producer "
                         f"or an EpochLoader, got {type(source).__name__}")

    # Slicing batches out of in-memory tensors: what every cached epoch pays.
    sliced = _TensorBatches(tensors, [slice(i, i + bs) for i in range(0, int(tensors[0].shape[0]), bs)])
    with StageWindow("batch" if kind == "table" else "slice", "batch", m,
                     samples=int(tensors[0].shape[0])) as w:
        for i in range(len(sliced)):
            sliced[i]
    assert w.trace is not None
    slice_trace = w.trace
    if kind == "table":
        traces.append(slice_trace)

    cons_trace: StageTrace | None = None
    if consumer is not None:
        batches = _first_batches(tensors, bs, consumer_batches + 1)
        consumer(batches[0])  # warm-up (allocations, lazy init)
        timed = batches[1:] or batches
        with StageWindow("train_step", "consumer", m,
                         samples=sum(int(b[0].shape[0]) for b in timed)) as w:
            for b in timed:
                consumer(b)
        cons_trace = w.trace

    def per_epoch(t: StageTrace, factor: float) -> tuple[float, float, float]:
        return t.duration_s * factor, t.cpu_s * factor, t.energy_j * factor

    reports: list[StageReport] = []
    for t in traces:
        f = (n / t.samples if t.samples else 1.0) if t.kind != "table" else 1.0
        d, c, e = per_epoch(t, f)
        reports.append(StageReport(t.name, t.kind, d, c, e, t.measured, t.source,
                                   n / d if d > 0 else math.inf, out_bytes=t.out_bytes))
    cons_report = None
    consumer_rate = None
    if cons_trace is not None:
        f = n / cons_trace.samples
        d, c, e = per_epoch(cons_trace, f)
        cons_report = StageReport("train_step", "consumer", d, c, e, cons_trace.measured,
                                  cons_trace.source, n / d if d > 0 else math.inf)
        consumer_rate = cons_report.rate

    table_s = sum(r.duration_s for r in reports if r.kind == "table")
    sample_reports = [r for r in reports if r.kind == "sample"]
    sample_s = sum(r.duration_s for r in sample_reports)
    sample_cpu = sum(r.cpu_s for r in sample_reports)
    frac = min(1.0, sample_cpu / sample_s) if sample_s > 0 else 1.0
    collate_s = sum(r.duration_s for r in reports if r.kind == "batch" and r.name == "collate")
    slice_s = slice_trace.duration_s * (n / slice_trace.samples if slice_trace.samples else 1.0)
    model = _Model(table_s, sample_s, frac, collate_s, slice_s,
                   cons_report.duration_s if cons_report else 0.0, par_cores, int(epochs),
                   start_s)

    cur_total = model.total_s(config)
    predicted_rate = n * epochs / cur_total if cur_total > 0 else math.inf

    # Time shares under the current settings: parallel stages shrink with workers.
    eff = {}
    for r in reports:
        if r.kind == "table":
            eff[r.name] = r.duration_s * (1 if not config.cache else 1 / epochs)
        elif r.kind == "sample" or r.name == "collate":
            work = r.duration_s * (1 if not config.cache else 1 / epochs)
            eff[r.name] = model._parallel(work, min(1.0, r.cpu_util), config.num_workers)
        else:
            eff[r.name] = model._parallel(r.duration_s, 1.0, config.num_workers)
    total_eff = sum(eff.values()) + (cons_report.duration_s if cons_report else 0.0)
    all_j = sum(r.energy_j for r in reports) + (cons_report.energy_j if cons_report else 0.0)
    for r in reports:
        r.time_share = eff[r.name] / total_eff if total_eff > 0 else 0.0
        r.energy_share = r.energy_j / all_j if all_j > 0 else 0.0
    if cons_report is not None:
        cons_report.time_share = cons_report.duration_s / total_eff if total_eff > 0 else 0.0
        cons_report.energy_share = cons_report.energy_j / all_j if all_j > 0 else 0.0
    bottleneck = max(reports, key=lambda r: eff[r.name]).name
    input_s = model.input_s(config)
    input_bound = cons_report is None or input_s > cons_report.duration_s

    fits = cache_bytes < 0.5 * _available_ram_bytes()
    recs: list[Recommendation] = []

    def consider(kind_: str, knob: str, value: Any, reason: str) -> None:
        cfg = config.replace(**{knob: value})
        tot = model.total_s(cfg)
        gain = cur_total / tot if tot > 0 else math.inf
        if gain >= 1.05:
            recs.append(Recommendation(kind_, knob, value, gain, n * epochs / tot, reason))

    if not config.cache and epochs > 1:
        if fits:
            consider("caching", "cache", True,
                     f"keeps the {cache_bytes / 1e6:.1f} MB of preprocessed data in memory so "
                     f"epochs 2..{epochs} skip {', '.join(r.name for r in reports if r.kind != 'batch')}")
        else:
            notes.append(f"caching would need {cache_bytes / 1e9:.2f} GB, more than half the "
                         "free RAM; not recommended")
    for wk in range(1, ncores + 1):
        if wk == config.num_workers:
            continue
        if config.num_workers == 0 and wk == 1:
            consider("prefetching", "num_workers", 1,
                     "one worker prepares the next batches while the training step runs "
                     f"(prefetch_factor={config.prefetch_factor} batches ahead), overlapping "
                     "input and compute")
        else:
            consider("parallelism", "num_workers", wk,
                     f"{wk} workers run the per-sample stages in parallel"
                     + (f" ({bottleneck} uses {100 * min(1.0, frac):.0f}% CPU, so it scales "
                        "past the core count only while it waits)" if sample_s > 0 else ""))
    # Keep the best value per knob, best first.
    best_per: dict[str, Recommendation] = {}
    for rec in recs:
        if rec.knob not in best_per or rec.predicted_gain > best_per[rec.knob].predicted_gain:
            best_per[rec.knob] = rec
    recs = sorted(best_per.values(), key=lambda x: -x.predicted_gain)

    backend_name = source.backend.name if isinstance(source, TablePipeline) else None
    if isinstance(source, TablePipeline):
        for other in try_backends:
            if other == backend_name:
                continue
            try:
                alt = TablePipeline(source.path, source.schema, other)
                if warmup:
                    alt.run()
                _, alt_traces = alt.run_traced(m)
            except Exception as exc:  # noqa: BLE001 - a missing backend is a note, not a failure
                notes.append(f"backend {other!r} could not be traced: {exc}")
                continue
            alt_tables[other] = [t for t in alt_traces if t.kind == "table"]
            alt_table = sum(t.duration_s for t in alt_traces if t.kind == "table")
            alt_model = _Model(alt_table, 0.0, 1.0, 0.0, slice_s, model.consumer_s, par_cores,
                               int(epochs), start_s)
            tot = alt_model.total_s(config)
            gain = cur_total / tot if tot > 0 else math.inf
            if gain >= 1.05:
                recs.append(Recommendation(
                    "backend", "backend", other, gain, n * epochs / tot,
                    f"{other} ran the table stages in {alt_table:.3f} s vs {table_s:.3f} s "
                    f"({backend_name}), measured"))
        recs.sort(key=lambda r: -r.predicted_gain)

    best_cfg, best_tot = config, cur_total
    for cache in ({config.cache, True} if fits else {config.cache}):
        for wk in range(0, ncores + 1):
            cfg = config.replace(cache=cache, num_workers=wk)
            tot = model.total_s(cfg)
            if tot < best_tot * 0.99:
                best_cfg, best_tot = cfg, tot
    allocation, pprof = None, None
    if kind in ("table", "sample"):
        pprof = _pipeline_profile(reports, alt_tables, backend_name, n, bs, collate_s, slice_s,
                                  cons_report, tensors, burst, start_s, scale)
        cache_stage = pprof.stage_names(backend_name)[-1] if config.cache else None
        limit = memory_limit_bytes if memory_limit_bytes is not None \
            else 0.5 * _available_ram_bytes()
        try:
            allocation = allocate(pprof, par_cores, int(epochs), limit, max_workers=ncores,
                                  current=PipelineSetting(backend_name, cache_stage,
                                                          config.num_workers,
                                                          config.prefetch_factor))
        except ValueError as exc:  # nothing fits the memory limit: say so, keep the diagnosis
            notes.append(f"no allocation: {exc}")
    if config.pin_memory and not config.effective_pin_memory:
        notes.append("pin_memory=True has no effect without CUDA")
    if not m.describe().get("measured", True) or (reports and not reports[0].measured):
        notes.append("energy is ESTIMATED from CPU time and RAM (no power counters); energy "
                     "shares then track CPU-time shares")
    return Diagnosis(
        stages=reports, consumer=cons_report, bottleneck=bottleneck, input_bound=input_bound,
        n_samples=n, epochs=int(epochs), config=config, cores=ncores,
        predicted_rate=predicted_rate, consumer_rate=consumer_rate, recommendations=recs,
        best_config=best_cfg, best_gain=cur_total / best_tot if best_tot > 0 else 1.0,
        measured=bool(reports) and all(r.measured for r in reports), backend=backend_name,
        notes=notes, allocation=allocation, pipeline_profile=pprof)


def _pipeline_profile(reports: list[StageReport], alt_tables: dict[str, list[StageTrace]],
                      backend: str | None, n: int, batch_size: int, collate_s: float,
                      slice_s: float, consumer: StageReport | None, tensors: tuple[Any, ...],
                      burst: float, start_s: float, scale: float) -> PipelineProfile:
    """The allocation's view of a traced pipeline (per-epoch costs, output sizes)."""
    def cost(r: StageReport, out_bytes: float) -> StageCost:
        return StageCost(r.name, "table" if r.kind == "table" else "sample", r.duration_s,
                         r.cpu_s, out_bytes)

    table: dict[str | None, list[StageCost]] = {
        backend: [cost(r, r.out_bytes) for r in reports if r.kind == "table"]}
    for other, traces in alt_tables.items():
        table[other] = [StageCost(t.name, "table", t.duration_s, t.cpu_s, t.out_bytes)
                        for t in traces]
    sample = [cost(r, r.out_bytes * scale) for r in reports if r.kind == "sample"]
    first = tuple(t[:batch_size] for t in tensors)
    return PipelineProfile(
        n_samples=n, batch_size=batch_size, table=table, sample=sample, collate_s=collate_s,
        slice_s=slice_s, consumer_s=consumer.duration_s if consumer else 0.0,
        consumer_cpu_s=consumer.cpu_s if consumer else 0.0,
        batch_bytes=float(_nbytes(first)), burst=max(1.0, burst), worker_start_s=start_s,
        backend=backend)


_WORKLOADS = {
    "insurance": ("ecopt.workloads.tabular", "profile_target"),
    "movielens": ("ecopt.workloads.ncf", "profile_target"),
    "images": ("ecopt.workloads.images", "profile_target"),
}


def cli_main(args: argparse.Namespace) -> int:
    """``ecopt profile WORKLOAD``: print the diagnosis of a workload's input pipeline."""
    import importlib
    import json
    import tempfile

    if args.workload not in _WORKLOADS:
        raise ValueError(f"unknown workload {args.workload!r}; expected one of {list(_WORKLOADS)}")
    config = LoaderConfig(batch_size=args.batch_size, num_workers=args.num_workers,
                          prefetch_factor=getattr(args, "prefetch_factor", 2),
                          cache=bool(getattr(args, "cache", False)))
    module, func = _WORKLOADS[args.workload]
    target = getattr(importlib.import_module(module), func)
    with tempfile.TemporaryDirectory(prefix="ecopt-profile-") as tmp:
        source, consumer = target(data=args.data, backend=args.backend, workdir=tmp)
        others = [b for b in ("pandas", "polars", "dask") if b != args.backend] \
            if isinstance(source, TablePipeline) and getattr(args, "compare_backends", False) else []
        diag = profile(source, consumer, config=config, epochs=getattr(args, "epochs", 3),
                       meter=getattr(args, "meter", "auto"), try_backends=others)
    if getattr(args, "json", False):
        print(json.dumps(diag.to_dict(), indent=2, default=str))
    else:
        print(diag.to_text())
    return 0

