"""Plumber-style allocation: a linear program over workers, prefetch, cache position and backend.

The profiler (:func:`ecopt.data.profile`) measures each stage's wall time, CPU
time and output size. From those rates this module chooses, for an input
pipeline and a consumer (the training step):

* ``num_workers``: a linear program (``scipy.optimize.linprog``, Plumber's
  formulation) maximises steady-state throughput ``X`` (samples/s) over the
  cores given to the training process (``theta_main``) and to the DataLoader
  workers (``theta_workers``) and the number of workers ``W``::

      max X  s.t.  X * consumer_s          <= 1               (one training thread)
                   X * consumer_cpu_s      <= theta_main
                   X * chain_cpu_s         <= theta_workers   (per-sample stages' CPU)
                   X * chain_s             <= W               (a worker handles one item at a time)
                   theta_workers           <= W               (a worker uses at most one core)
                   theta_main + theta_workers <= cores,   0 <= W <= max_workers

  (``*_s`` are seconds per sample). It is solved for the epochs that repeat
  (after the first, with a cache) and for the first epoch's whole chain; each
  ``W`` is rounded down and up, and ``0`` (no workers: no start-up cost) is
  always a candidate;
* **parallelism per stage**: :func:`solve_stage_lp` solves the same LP with
  one rate per per-sample stage (Plumber's per-operator formulation): each
  stage gets cores and items in flight. Worker processes (at most the cores)
  carry CPU work; a stage that waits gets threads in each process
  (``PipelineSetting.stage_threads``, run by
  :class:`~ecopt.data.stage_pool.StagePoolDataset`), and their count is not
  capped by the cores (``max_threads``): waiting needs none;
* **where to cache**: after any stage (a table stage's frame, or a per-sample
  stage's outputs), if its measured size plus the prefetch buffers fits the
  memory limit; stages before the cache are paid in the first epoch only;
* **the backend** of a table pipeline, from the stage costs traced with each
  backend;
* ``prefetch_factor``: enough batches per worker to ride out the slowest batch
  the trace saw (``ceil(max / mean batch input time)``), no more (each batch
  in flight costs memory).

Every candidate (backend x cache position x worker count) is then costed over
``epochs`` epochs with the loader model below, and the cheapest is the
allocation. For epoch ``e``: serial table work (not cached) + the per-sample
chain run in ``W`` workers in parallel with the consumer (``max(chain / par(W),
consumer) + W * worker_start``) or, with ``W = 0``, in series with it; a
cache built in epoch 0 removes the stages up to it from later epochs. Each stage's
CPU-bound share is divided by ``min(W, cores)`` and its waiting share by
``max(W, 1) x threads``.

:func:`apply_setting` turns an allocation (or any :class:`PipelineSetting`) into
a source and :class:`~ecopt.data.loader.LoaderConfig` for ``make_loader``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from ecopt.data.loader import LoaderConfig
from ecopt.data.pipeline import StagedDataset, TablePipeline

__all__ = ["StageCost", "PipelineProfile", "PipelineSetting", "LPResult", "Allocation",
           "StageAllocation", "StageLPResult", "solve_lp", "solve_stage_lp", "predict_epochs", "allocate", "apply_setting", "PrefixCachedDataset",
           "TablePrefixCache"]


@dataclass(frozen=True)
class StageCost:
    """One stage's cost over a whole epoch, in one process.

    Attributes:
        name: Stage name.
        kind: ``"table"`` (whole table, main process) or ``"sample"`` (per item, in workers).
        wall_s: Wall seconds per epoch.
        cpu_s: CPU seconds per epoch.
        out_bytes: Bytes of the stage's output for the whole epoch (NaN: unknown,
            so no cache is placed after it).
    """

    name: str
    kind: str
    wall_s: float
    cpu_s: float
    out_bytes: float = float("nan")

    @property
    def cpu_frac(self) -> float:
        return min(1.0, self.cpu_s / self.wall_s) if self.wall_s > 0 else 1.0


@dataclass(frozen=True)
class PipelineProfile:
    """What the allocation needs to know about a pipeline (built by the profiler).

    Attributes:
        n_samples: Samples per epoch.
        batch_size: Samples per batch.
        table: ``backend -> table stages`` in order (``{None: []}`` for per-sample pipelines).
        sample: Per-sample stages in order (empty for table pipelines).
        collate_s: Seconds per epoch to collate per-sample items into batches.
        slice_s: Seconds per epoch to slice batches from in-memory tensors
            (table pipelines, and every fully cached epoch).
        consumer_s: Seconds per epoch of the training step (0: infinitely fast).
        consumer_cpu_s: CPU seconds per epoch of the training step.
        batch_bytes: Bytes of one batch (for prefetch buffers).
        burst: Slowest / mean batch input time seen in the trace (>= 1).
        worker_start_s: Seconds one DataLoader worker takes to start, each epoch.
        backend: The backend the pipeline runs now (``None`` for per-sample pipelines).
    """

    n_samples: int
    batch_size: int
    table: dict[str | None, list[StageCost]]
    sample: list[StageCost]
    collate_s: float
    slice_s: float
    consumer_s: float
    consumer_cpu_s: float
    batch_bytes: float
    burst: float = 1.0
    worker_start_s: float = 0.05
    backend: str | None = None

    def stage_names(self, backend: str | None) -> list[str]:
        return [s.name for s in self.table.get(backend, [])] + [s.name for s in self.sample]


@dataclass(frozen=True)
class PipelineSetting:
    """The knobs an allocation sets.

    Attributes:
        backend: Dataframe backend (``None`` for per-sample pipelines).
        cache_after: Stage whose output is kept in memory after the first
            epoch (``None``: no cache).
        num_workers: DataLoader workers.
        prefetch_factor: Batches each worker prepares ahead.
        stage_threads: ``(stage, threads)`` pairs: per-sample stages run on a
            thread pool of that size in each process (for stages that wait;
            may exceed the core count). Stages not named run on one thread.
    """

    backend: str | None
    cache_after: str | None
    num_workers: int
    prefetch_factor: int = 2
    stage_threads: tuple[tuple[str, int], ...] = ()

    def threads(self, stage: str) -> int:
        """Threads stage ``stage`` runs on in each process (1 unless ``stage_threads`` says)."""
        return dict(self.stage_threads).get(stage, 1)

    def label(self) -> str:
        parts = ([f"backend={self.backend}"] if self.backend else []) + [
            f"cache={'after ' + self.cache_after if self.cache_after else 'off'}",
            f"workers={self.num_workers}", f"prefetch={self.prefetch_factor}"]
        parts += [f"{k} threads={v}" for k, v in self.stage_threads]
        return ", ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["stage_threads"] = dict(self.stage_threads)
        return d


@dataclass(frozen=True)
class LPResult:
    """The linear program's optimum (see the module docstring).

    Attributes:
        throughput: Steady-state samples/s ``X``.
        theta_main, theta_workers: Cores given to the training process and to the workers.
        workers: Fractional worker count ``W``.
        binding: Names of the constraints that bind at the optimum (the bottleneck).
        status: The solver's message.
    """

    throughput: float
    theta_main: float
    theta_workers: float
    workers: float
    binding: tuple[str, ...]
    status: str


@dataclass
class Allocation:
    """The chosen setting, its predictions and the candidates it beat.

    Attributes:
        setting: The chosen knobs.
        lp: The linear program's optimum for the chosen backend and cache.
        predicted_epoch_s: Predicted seconds of each epoch.
        memory_bytes: Cache + prefetch buffers the setting keeps in memory.
        memory_limit_bytes: The limit it had to respect.
        candidates: ``(setting, predicted total seconds)``, best first.
        baseline_total_s: Predicted total seconds of the current setting.
        stage_lp: The per-stage LP's optimum for the chosen backend and cache
            (first epoch's chain), or ``None``.
    """

    setting: PipelineSetting
    lp: LPResult
    predicted_epoch_s: list[float]
    memory_bytes: float
    memory_limit_bytes: float
    candidates: list[tuple[PipelineSetting, float]] = field(default_factory=list)
    baseline_total_s: float = math.nan
    stage_lp: StageLPResult | None = None

    @property
    def predicted_total_s(self) -> float:
        return sum(self.predicted_epoch_s)

    @property
    def predicted_gain(self) -> float:
        t = self.predicted_total_s
        return self.baseline_total_s / t if t > 0 else math.inf

    def to_dict(self) -> dict[str, Any]:
        return {"setting": self.setting.to_dict(), "lp": asdict(self.lp),
                "predicted_epoch_s": list(self.predicted_epoch_s),
                "predicted_total_s": self.predicted_total_s,
                "predicted_gain": self.predicted_gain, "memory_bytes": self.memory_bytes,
                "memory_limit_bytes": self.memory_limit_bytes,
                "candidates": [[s.to_dict(), t] for s, t in self.candidates[:10]],
                "stage_lp": asdict(self.stage_lp) if self.stage_lp is not None else None}

    def to_text(self) -> str:
        lp = self.lp
        lines = [f"LP allocation: {self.setting.label()}",
                 f"  predicted {self.predicted_total_s:.3g} s for {len(self.predicted_epoch_s)} "
                 f"epochs ({self.predicted_gain:.2f}x vs the current setting); "
                 f"steady state {lp.throughput:,.0f} samples/s",
                 f"  cores: {lp.theta_main:.2f} training process + {lp.theta_workers:.2f} "
                 f"workers (W = {lp.workers:.2f}); binding: {', '.join(lp.binding) or 'none'}",
                 f"  memory kept: {self.memory_bytes / 1e6:.1f} MB of "
                 f"{self.memory_limit_bytes / 1e6:,.0f} MB allowed"]
        slp = self.stage_lp
        if slp is not None and slp.stages:
            per = "; ".join(f"{st.name} {st.cores:.2f} cores, {st.slots:.1f} in flight"
                            for st in slp.stages)
            lines.append(f"  per-stage LP: {slp.throughput:,.0f} samples/s with {per}; "
                         f"binding: {', '.join(slp.binding) or 'none'}")
        return "\n".join(lines)


def solve_lp(n_samples: int, chain_s: float, chain_cpu_s: float, consumer_s: float,
             consumer_cpu_s: float, cores: float, max_workers: int) -> LPResult:
    """Plumber's throughput LP for one epoch's per-sample chain and consumer.

    Args:
        n_samples: Samples per epoch (the ``*_s`` arguments are per epoch).
        chain_s, chain_cpu_s: Wall and CPU seconds of the per-sample chain (stages
            run by workers, plus batching).
        consumer_s, consumer_cpu_s: Wall and CPU seconds of the training step.
        cores: Cores available.
        max_workers: Most workers allowed.

    Returns:
        The optimum; ``throughput`` is inf when nothing costs time.

    Raises:
        ValueError: for a non-positive ``n_samples`` or ``cores``.
    """
    from scipy.optimize import linprog

    if n_samples < 1 or cores <= 0:
        raise ValueError(f"n_samples >= 1 and cores > 0 must hold, got n_samples={n_samples}, "
                         f"cores={cores}")
    n = float(n_samples)
    a_c, u_c = consumer_s / n, consumer_cpu_s / n
    a_w, u_w = chain_s / n, min(chain_cpu_s, chain_s) / n
    if a_c <= 0 and a_w <= 0:
        return LPResult(math.inf, 0.0, 0.0, 0.0, (), "nothing costs time")
    # x = [X, theta_main, theta_workers, W]; linprog minimises, so the objective is -X.
    names = ["consumer thread", "consumer CPU", "worker CPU", "worker slots",
             "one core per worker", "cores"]
    a_ub = [[a_c, 0, 0, 0], [u_c, -1, 0, 0], [u_w, 0, -1, 0], [a_w, 0, 0, -1],
            [0, 0, 1, -1], [0, 1, 1, 0]]
    b_ub = [1.0, 0, 0, 0, 0, float(cores)]
    bounds = [(0, None), (0, None), (0, None), (0, float(max_workers))]
    if a_c <= 0:  # a free consumer: only the chain limits
        a_ub[0] = [0, 0, 0, 0]
    res = linprog([-1.0, 0, 0, 0], A_ub=a_ub, b_ub=b_ub, bounds=bounds, method="highs")
    if res.status == 3:  # unbounded: the chain is free and the consumer too
        return LPResult(math.inf, 0.0, 0.0, 0.0, (), str(res.message))
    marg = getattr(res, "ineqlin", None)
    # The optimal X is unique, the allocation behind it need not be: among the allocations
    # reaching X*, take the one using the fewest workers and cores (a second LP).
    x_star = float(res.x[0])
    lean = linprog([0, 1.0, 1.0, 1.0], A_ub=[*a_ub, [-1.0, 0, 0, 0]],
                   b_ub=[*b_ub, -x_star * (1 - 1e-9)], bounds=bounds, method="highs")
    x = lean.x if lean.status == 0 else res.x
    duals = list(marg.marginals) if marg is not None else [0.0] * len(names)
    binding = tuple(nm for nm, d in zip(names, duals) if abs(d) > 1e-12)
    return LPResult(float(x[0]), float(x[1]), float(x[2]), float(x[3]), binding,
                    str(res.message))


@dataclass(frozen=True)
class StageAllocation:
    """One stage's share of the per-stage LP's optimum.

    Attributes:
        name: Stage name.
        cores: Cores the stage's CPU work gets.
        slots: Items the stage has in flight (processes x threads), fractional.
        wait_frac: Share of the stage's wall time spent waiting (not on a CPU).
    """

    name: str
    cores: float
    slots: float
    wait_frac: float


@dataclass(frozen=True)
class StageLPResult:
    """The per-stage LP's optimum (see :func:`solve_stage_lp`).

    Attributes:
        throughput: Steady-state samples/s ``X``.
        theta_main: Cores given to the training process.
        workers: Fractional worker-process count ``W``.
        stages: Each stage's cores and slots.
        binding: Names of the constraints that bind at the optimum (the bottleneck).
        status: The solver's message.
    """

    throughput: float
    theta_main: float
    workers: float
    stages: tuple[StageAllocation, ...]
    binding: tuple[str, ...]
    status: str

    def threads(self, workers: int, max_threads: int, min_wait_frac: float = 0.2
                ) -> tuple[tuple[str, int], ...]:
        """Threads per process for each waiting stage, given ``workers`` processes.

        A stage gets ``ceil(slots / max(workers, 1))`` threads (at most
        ``max_threads``) when at least ``min_wait_frac`` of its time is waiting
        and that is more than one; CPU-bound stages get none (threads share the
        interpreter lock).
        """
        procs = max(int(workers), 1)
        out = []
        for st in self.stages:
            if st.wait_frac < min_wait_frac or not math.isfinite(st.slots):
                continue
            t = min(int(max_threads), max(1, math.ceil(st.slots / procs - 1e-9)))
            if t > 1:
                out.append((st.name, t))
        return tuple(out)


def solve_stage_lp(n_samples: int, stages: Sequence[StageCost], consumer_s: float,
                   consumer_cpu_s: float, cores: float, max_workers: int,
                   max_threads: int = 32) -> StageLPResult:
    """Plumber's LP with one rate per stage: cores and in-flight slots for every stage.

    With ``a_i``, ``u_i`` the wall and CPU seconds per sample of stage ``i``
    (from ``stages``' per-epoch costs), it maximises throughput ``X``::

        max X  s.t.  X * a_c          <= 1               (one training thread)
                     X * u_c          <= theta_main
                     X * u_i          <= theta_i         (stage i's CPU work)
                     X * a_i          <= s_i             (stage i's items in flight)
                     theta_i          <= W               (CPU parallelism needs processes)
                     s_i              <= max_threads * max(max_workers, 1)
                     theta_main + sum_i theta_i <= cores,   0 <= W <= max_workers

    A stage that waits (``a_i`` well above ``u_i``) is limited by its slots,
    not by cores, so it can be given more items in flight than there are
    cores: threads in each process (:class:`~ecopt.data.stage_pool.StagePoolDataset`);
    a stage that computes is limited by cores, which only worker processes
    add. The LP treats the stages as running side by side (each at rate
    ``X``), as in Plumber; a DataLoader worker runs them one after another, so
    :func:`allocate` costs every rounded candidate with :func:`predict_epochs`,
    which adds the stages up. A second LP picks, among the allocations
    reaching the best ``X``, the one with the fewest processes, slots and cores.

    Args:
        n_samples: Samples per epoch (the costs are per epoch).
        stages: The per-sample stages (batching included) in order.
        consumer_s, consumer_cpu_s: Wall and CPU seconds per epoch of the training step.
        cores: Cores available.
        max_workers: Most worker processes.
        max_threads: Most threads per process for one stage.

    Returns:
        The optimum; ``throughput`` is inf when nothing costs time.

    Raises:
        ValueError: for non-positive ``n_samples``, ``cores`` or ``max_threads``.
    """
    from scipy.optimize import linprog

    if n_samples < 1 or cores <= 0 or max_threads < 1:
        raise ValueError(f"n_samples >= 1, cores > 0 and max_threads >= 1 must hold, got "
                         f"n_samples={n_samples}, cores={cores}, max_threads={max_threads}")
    n, k = float(n_samples), len(stages)
    a_c, u_c = consumer_s / n, consumer_cpu_s / n
    a = [s.wall_s / n for s in stages]
    u = [min(s.cpu_s, s.wall_s) / n for s in stages]
    wait = [1.0 - s.cpu_frac for s in stages]
    if a_c <= 0 and all(x <= 0 for x in a):
        return StageLPResult(math.inf, 0.0, 0.0, tuple(
            StageAllocation(s.name, 0.0, 0.0, w) for s, w in zip(stages, wait)), (),
            "nothing costs time")
    # x = [X, theta_main, W, theta_1..k, s_1..k]
    nv = 3 + 2 * k

    def row(**kw: float) -> list[float]:
        r = [0.0] * nv
        for key, v in kw.items():
            r[int(key[1:])] = v
        return r

    a_ub: list[list[float]] = [row(v0=a_c), row(v0=u_c, v1=-1.0)]
    b_ub: list[float] = [1.0, 0.0]
    names = ["consumer thread", "consumer CPU"]
    for i, s in enumerate(stages):
        ti, si = 3 + i, 3 + k + i
        a_ub += [row(v0=u[i], **{f"v{ti}": -1.0}), row(v0=a[i], **{f"v{si}": -1.0}),
                 row(v2=-1.0, **{f"v{ti}": 1.0})]
        b_ub += [0.0, 0.0, 0.0]
        names += [f"{s.name} CPU", f"{s.name} slots", f"{s.name} processes"]
    a_ub.append([0.0, 1.0, 0.0] + [1.0] * k + [0.0] * k)
    b_ub.append(float(cores))
    names.append("cores")
    slot_max = float(max_threads) * max(int(max_workers), 1)
    bounds = [(0, None), (0, None), (0, float(max_workers))] + [(0, None)] * k \
        + [(0, slot_max)] * k
    res = linprog([-1.0] + [0.0] * (nv - 1), A_ub=a_ub, b_ub=b_ub, bounds=bounds,
                  method="highs")
    if res.status == 3:
        return StageLPResult(math.inf, 0.0, 0.0, (), (), str(res.message))
    x_star = float(res.x[0])
    lean = linprog([0.0] + [1.0] * (nv - 1), A_ub=[*a_ub, [-1.0] + [0.0] * (nv - 1)],
                   b_ub=[*b_ub, -x_star * (1 - 1e-9)], bounds=bounds, method="highs")
    x = lean.x if lean.status == 0 else res.x
    marg = getattr(res, "ineqlin", None)
    duals = list(marg.marginals) if marg is not None else [0.0] * len(names)
    binding = [nm for nm, d in zip(names, duals) if abs(d) > 1e-12]
    # Bounds that bind (slot or worker caps) show in the variable bounds' marginals.
    ub = getattr(res, "upper", None)
    if ub is not None:
        um = list(ub.marginals)
        if abs(um[2]) > 1e-12:
            binding.append("max workers")
        binding += [f"{s.name} max threads" for i, s in enumerate(stages)
                    if abs(um[3 + k + i]) > 1e-12]
    st = tuple(StageAllocation(s.name, float(x[3 + i]), float(x[3 + k + i]), wait[i])
               for i, s in enumerate(stages))
    return StageLPResult(float(x[0]), float(x[1]), float(x[2]), st, tuple(binding),
                         str(res.message))


def _chain(stages: Sequence[StageCost]) -> tuple[float, float]:
    wall = sum(s.wall_s for s in stages)
    cpu = sum(min(s.cpu_s, s.wall_s) for s in stages)
    return wall, cpu


def _stage_s(s: StageCost, workers: int, threads: int, cores: float) -> float:
    """Seconds stage ``s`` adds to an epoch run by ``workers`` processes of ``threads`` threads.

    Its CPU share spreads over ``min(workers, cores)`` processes (threads share
    one interpreter lock); its waiting share over every thread of every process.
    """
    frac = s.cpu_frac
    procs = max(int(workers), 1)
    cpu = s.wall_s * frac / (min(procs, cores) if workers > 0 else 1)
    return cpu + s.wall_s * (1 - frac) / (procs * max(int(threads), 1))


def _chain_s(stages: Sequence[StageCost], setting: PipelineSetting, cores: float) -> float:
    return sum(_stage_s(s, setting.num_workers, setting.threads(s.name), cores) for s in stages)


def _epoch_parts(profile: PipelineProfile, setting: PipelineSetting, epoch: int,
                 cores: float) -> tuple[float, list[StageCost]]:
    """``(serial_s, chain)`` of one epoch: main-process work before the loop, and the
    per-sample stages the workers (or, with none, the main process) run."""
    table = profile.table[setting.backend]
    names = profile.stage_names(setting.backend)
    k = names.index(setting.cache_after) if setting.cache_after is not None else -1
    n_table, n_all = len(table), len(names)
    cached = k >= 0 and epoch > 0
    serial = sum(s.wall_s for i, s in enumerate(table) if not (cached and i <= k))
    slice_ = StageCost("slice", "sample", profile.slice_s, profile.slice_s)
    collate = StageCost("collate", "sample", profile.collate_s, profile.collate_s)
    if not profile.sample:
        chain = [slice_]
    elif k < n_table:  # no cache, or a table-stage cache (none for per-sample pipelines)
        chain = [*profile.sample, collate]
    else:
        j = k - n_table  # index of the cached per-sample stage
        rest = [*profile.sample[j + 1:], collate] if k < n_all - 1 else [slice_]
        if epoch == 0:
            # The prefix is computed in one ordered pass through the workers, then kept.
            pre = [*profile.sample[:j + 1]] + ([collate] if k == n_all - 1 else [])
            w = int(setting.num_workers)
            serial += _chain_s(pre, setting, cores) + profile.worker_start_s * w
        chain = rest
    return serial, chain


def predict_epochs(profile: PipelineProfile, setting: PipelineSetting, epochs: int,
                   cores: float) -> list[float]:
    """Predicted seconds of each of ``epochs`` epochs under ``setting`` (model in the module docstring).

    Raises:
        ValueError: for an untraced backend or an unknown cache stage.
    """
    if setting.backend not in profile.table:
        raise ValueError(f"backend {setting.backend!r} was not traced; traced: "
                         f"{sorted(map(str, profile.table))}")
    names = profile.stage_names(setting.backend)
    if setting.cache_after is not None and setting.cache_after not in names:
        raise ValueError(f"cache_after must be one of {names} or None, got "
                         f"{setting.cache_after!r}")
    w = int(setting.num_workers)
    out: list[float] = []
    for e in range(int(epochs)):
        serial, chain = _epoch_parts(profile, setting, e, cores)
        cw = _chain_s(chain, setting, cores)
        if w == 0:
            loop = cw + profile.consumer_s
        else:
            loop = max(cw, profile.consumer_s) + profile.worker_start_s * w
        out.append(serial + loop)
    return out


def _cache_bytes(profile: PipelineProfile, backend: str | None, stage: str | None) -> float:
    if stage is None:
        return 0.0
    for s in [*profile.table.get(backend, []), *profile.sample]:
        if s.name == stage:
            return s.out_bytes
    return math.nan


def allocate(profile: PipelineProfile, cores: float, epochs: int,
             memory_limit_bytes: float, max_workers: int | None = None, max_prefetch: int = 8,
             current: PipelineSetting | None = None, max_threads: int = 32) -> Allocation:
    """The cheapest setting over ``epochs`` epochs within ``memory_limit_bytes``.

    Args:
        profile: The traced pipeline.
        cores: Cores the pipeline may use (fractional: a busy machine's share).
        epochs: Epochs to optimise for (a cache pays off from the second).
        memory_limit_bytes: Most bytes the cache and the prefetch buffers may keep.
        max_workers: Most DataLoader workers (default: ``ceil(cores)``).
        max_prefetch: Largest ``prefetch_factor`` considered.
        current: The setting in use, costed for ``baseline_total_s``.
        max_threads: Most threads per process for one waiting stage (thread
            counts are not capped by ``cores``: waiting needs no core).

    Returns:
        The :class:`Allocation`.

    Raises:
        ValueError: for ``epochs < 1`` or non-positive cores.
    """
    if epochs < 1:
        raise ValueError(f"epochs >= 1 must hold, got {epochs}")
    if cores <= 0:
        raise ValueError(f"cores > 0 must hold, got {cores}")
    wmax = int(max_workers if max_workers is not None else math.ceil(cores))
    ranked: list[tuple[float, PipelineSetting, LPResult, float, StageLPResult]] = []
    for backend in profile.table:
        names = profile.stage_names(backend)
        for cache in [None, *names]:
            cache_b = _cache_bytes(profile, backend, cache)
            if cache is not None and not cache_b <= memory_limit_bytes:
                continue  # unknown size (NaN) or too big
            # One LP sizes the pool for the epochs that repeat (after the first, with a
            # cache), one for the first epoch's full chain; both roundings are candidates.
            lps, slps = [], []
            for e in sorted({0, 1 if epochs > 1 else 0}, reverse=True):
                _, chain = _epoch_parts(
                    profile, PipelineSetting(backend, None if e == 0 else cache, 0), e, cores)
                chain_s, chain_cpu = _chain(chain)
                lps.append(solve_lp(profile.n_samples, chain_s, chain_cpu, profile.consumer_s,
                                    profile.consumer_cpu_s, cores, wmax))
                slps.append(solve_stage_lp(profile.n_samples, chain, profile.consumer_s,
                                           profile.consumer_cpu_s, cores, wmax, max_threads))
            lp = lps[0]
            w_fracs = [x.workers for x in lps] + [x.workers for x in slps]
            w_opts = {0} | {min(wmax, f(x)) for x in w_fracs
                            for f in (math.floor, math.ceil) if math.isfinite(x)}
            # Threads for waiting stages, where the pipeline can run them (not inside a
            # per-sample prefix cache's one-off pass).
            threads_ok = profile.sample and (cache is None or cache == names[-1]
                                             or names.index(cache) < len(profile.table[backend]))
            for w in sorted(w_opts):
                p = min(max_prefetch, max(1, math.ceil(profile.burst))) if w > 0 else 2
                while w > 0 and p > 1 and cache_b + p * w * profile.batch_bytes > memory_limit_bytes:
                    p -= 1
                mem = cache_b + (p * w * profile.batch_bytes if w > 0 else 0.0)
                if mem > memory_limit_bytes:
                    continue
                thread_opts = {()} | ({x.threads(w, max_threads) for x in slps}
                                      if threads_ok else set())
                for th in sorted(thread_opts):
                    s = PipelineSetting(backend, cache, w, p, th)
                    ranked.append((sum(predict_epochs(profile, s, epochs, cores)), s, lp, mem,
                                   slps[0]))
    if not ranked:
        raise ValueError(f"no setting fits memory_limit_bytes={memory_limit_bytes:.3g}")
    ranked.sort(key=lambda r: (r[0] * (1 - 1e-9), r[1].num_workers,
                               sum(t for _, t in r[1].stage_threads),
                               r[1].cache_after is not None))
    _, best, best_lp, best_mem, best_slp = ranked[0]
    base = math.nan
    if current is not None:
        base = sum(predict_epochs(profile, current, epochs, cores))
    return Allocation(best, best_lp, predict_epochs(profile, best, epochs, cores), best_mem,
                      float(memory_limit_bytes), [(s, t) for t, s, _, _, _ in ranked], base,
                      best_slp)


class PrefixCachedDataset(StagedDataset):
    """A :class:`StagedDataset` whose stages up to ``stage`` run once and are kept.

    The first :meth:`prepare` (called by the loader wrapper before an epoch)
    runs the prefix over every item through ``workers`` DataLoader workers in
    one ordered pass and keeps the outputs; items then pass only through the
    remaining stages.
    """

    def __init__(self, dataset: StagedDataset, stage: str, workers: int = 0) -> None:
        names = list(dataset.stage_names)
        if stage not in names:
            raise ValueError(f"stage must be one of {names}, got {stage!r}")
        k = names.index(stage)
        self.base, self.stage, self.workers = dataset, stage, int(workers)
        self.prefix = dataset.stages[:k + 1]
        super().__init__(dataset.items, dataset.stages[k + 1:] or [("identity", _identity)],
                         dataset.labels)
        self.prepared = False

    def prepare(self) -> None:
        """Run the prefix stages once over every item (no-op after the first call)."""
        if self.prepared:
            return
        from torch.utils.data import DataLoader

        prefix = StagedDataset(self.base.items, self.prefix)
        loader: Any = DataLoader(prefix, batch_size=None, num_workers=self.workers,  # type: ignore[arg-type]
                            collate_fn=_identity)
        self.items = list(loader)
        self.prepared = True


def _identity(x: Any) -> Any:
    return x


class TablePrefixCache:
    """A tensor producer for ``make_loader`` that keeps a table pipeline's frame after ``stage``.

    The first call runs the stages up to ``stage`` and keeps the frame; every
    call runs the stages after it (a cache after ``read`` saves re-parsing the
    file each epoch but still preprocesses).
    """

    def __init__(self, pipeline: TablePipeline, stage: str) -> None:
        if stage not in pipeline.stage_names:
            raise ValueError(f"stage must be one of {list(pipeline.stage_names)}, got {stage!r}")
        self.pipeline, self.stage = pipeline, stage
        self._kept: tuple[Any, dict[str, Any]] | None = None

    def __call__(self) -> tuple[Any, ...]:
        if self._kept is None:
            self._kept = self.pipeline.run_prefix(self.stage)
        t = self.pipeline.run_suffix(self.stage, *self._kept)
        return t.features, t.codes, t.target


def apply_setting(source: TablePipeline | StagedDataset, setting: PipelineSetting,
                  base: LoaderConfig) -> tuple[Any, LoaderConfig, Callable[[], None]]:
    """A source, a loader config and a per-epoch hook that realise ``setting``.

    Args:
        source: The pipeline the setting was computed for.
        setting: The knobs.
        base: The config whose other knobs (batch size, shuffle, seed) are kept.

    Returns:
        ``(source, config, before_epoch)``: pass the first two to ``make_loader``
        and call ``before_epoch()`` before iterating each epoch (it builds a
        per-sample prefix cache on the first call; a no-op otherwise).

    Raises:
        ValueError: for a cache stage the source does not have.
    """
    cfg = base.replace(num_workers=setting.num_workers, prefetch_factor=setting.prefetch_factor,
                       cache=False)
    if setting.stage_threads:
        if isinstance(source, TablePipeline):
            raise ValueError("stage_threads apply to per-sample stages; a TablePipeline has "
                             f"none, got stage_threads={setting.stage_threads}")
        names = list(source.stage_names)
        if setting.cache_after not in (None, names[-1]):
            raise ValueError("stage_threads need no cache or a cache after the last stage "
                             f"({names[-1]!r}), got cache_after={setting.cache_after!r}")
        from ecopt.data.stage_pool import StagePoolDataset

        source = StagePoolDataset(source, dict(setting.stage_threads))
    if isinstance(source, TablePipeline):
        pipe = source
        if setting.backend is not None and setting.backend != source.backend.name:
            pipe = TablePipeline(source.path, source.schema, setting.backend)
        if setting.cache_after is None:
            return pipe, cfg, _noop
        if setting.cache_after == pipe.stage_names[-1]:
            return pipe, cfg.replace(cache=True), _noop
        return TablePrefixCache(pipe, setting.cache_after), cfg, _noop
    if setting.cache_after is None:
        return source, cfg, _noop
    if setting.cache_after == source.stage_names[-1]:
        return source, cfg.replace(cache=True), _noop
    ds = PrefixCachedDataset(source, setting.cache_after, setting.num_workers)
    return ds, cfg, ds.prepare


def _noop() -> None:
    return None


def with_backend(setting: PipelineSetting, backend: str | None) -> PipelineSetting:
    """``setting`` with another backend (a small helper for baselines)."""
    return replace(setting, backend=backend)
