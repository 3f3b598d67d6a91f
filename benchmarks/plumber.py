"""Plumber analogue: the profiler's LP allocation against a rule, random search and tuners.

Three deliberately misconfigured input pipelines, each feeding a real training step:

* **image folder**: JPEGs decoded and resized per sample with ``num_workers=0``
  and no cache (a small CNN trains on the batches);
* **tabular**: an Insurance-schema CSV re-parsed with pandas every epoch (no
  cache; an MLP trains on the batches);
* **remote files**: small binary files read one by one with ``num_workers=0``,
  each read followed by a fixed wait (``--latency-ms``) standing in for an
  object store's round trip (this machine has no remote storage: the wait is
  simulated with ``time.sleep``, the read and decode are real); an MLP trains
  on the batches. I/O-latency-bound: the CPU is mostly idle.

For each, ``--repeats`` times (default 5):

1. ``ecopt.data.profile`` traces the pipeline (other backends too, for the
   table) and solves the allocation LP (``Diagnosis.allocation``);
2. the settings compared: **misconfigured** (as given), **rule**
   (``num_workers`` = cores, ``prefetch_factor`` = 2, nothing else changed),
   **random search** (``--trials`` settings drawn uniformly from the same knobs:
   workers 0..cores, prefetch 1..4, cache after any stage or none, backend,
   threads per per-sample stage 1..32; each run for ``--epochs`` epochs, the
   fastest kept), **tuner** (``ecopt.data.tuner.hill_climb``: tf.data-style
   hill-climbing from the misconfigured setting on workers, threads per stage
   and prefetch within a CPU budget of the cores, no cache, untried), **tf.data
   AUTOTUNE** (tf.data's own autotuner, the study's baseline: the same per-sample
   or whole-table Python work as a ``tf.data.Dataset`` with
   ``num_parallel_calls=AUTOTUNE``, ``prefetch(AUTOTUNE)`` and a CPU budget of the
   cores, feeding the same torch step; run when TensorFlow is installed, the
   ``tfdata`` extra), **LP**
   (the LP's ``--trials`` best-predicted settings run the same way, the
   fastest kept) and **LP top-1** (its first choice, untried);
3. each chosen setting runs ``--epochs`` epochs once more, measured: wall
   seconds, CPU seconds (this process and its workers) and ESTIMATED joules
   per epoch.

Tables: speed-up and energy per epoch against the misconfigured pipeline
(trimmed means, 95 % intervals over the repeats); every pairwise comparison
of the LP with a baseline (paired per-repeat ratios, intervals, and the
verdict the interval allows); the model's predicted epoch time against the
measured one for every method; Plumber's 4x bound checked on every setting run
that the model predicts (``bound``).

    python benchmarks/plumber.py [--repeats 5] [--epochs 4] [--trials 3] [--tfdata auto] [--record]
"""

from __future__ import annotations

import argparse
import math
import os
import random
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")  # one BLAS thread per process (workers included)

_ROOT = Path(__file__).resolve().parents[1]
if str(_ROOT) not in sys.path:
    sys.path.append(str(_ROOT))

from ecopt._verdict import HOLDS, NOT_HOLD, NOT_SHOWN, verdict  # noqa: E402
from docs.recorded import (  # noqa: E402
    Table,
    command_line,
    estimated_energy,
    git_commit,
    interval,
    record_dirs,
    trimmed_interval,
    trimmed_mean_ci,
    write_run,
)

#: tf.data's own autotuner on the same pipelines (needs the ``tfdata`` extra).
TFDATA = "tf.data AUTOTUNE"
METHODS = ("misconfigured", "rule", "random search", "tuner", TFDATA, "LP", "LP top-1")
COMPARISONS = (("LP", "rule"), ("LP", "random search"), ("LP", "tuner"),
               ("LP top-1", "tuner"), ("LP top-1", "misconfigured"), ("LP", TFDATA),
               ("LP top-1", TFDATA))
THREAD_CHOICES = (1, 2, 4, 8, 16, 32)
#: Plumber's bound on its cost model: predictions within this factor of the measured time.
BOUND = 4.0


def _fetch(path: str, latency_s: float) -> bytes:
    """Read a file, then wait ``latency_s`` (a simulated remote round trip)."""
    data = Path(path).read_bytes()
    time.sleep(latency_s)
    return data


def _decode(data: bytes) -> Any:
    import numpy as np
    import torch

    x = torch.from_numpy(np.frombuffer(data, dtype=np.float32).copy())
    return (x - x.mean()) / (x.std() + 1e-6)


def _remote_files(root: Path, n: int, dim: int, latency_s: float) -> Any:
    import functools

    import numpy as np

    from ecopt.data import StagedDataset

    root.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    paths = []
    for i in range(n):
        f = root / f"{i:05d}.bin"
        f.write_bytes(rng.standard_normal(dim).astype(np.float32).tobytes())
        paths.append(str(f))
    return StagedDataset(paths, [("fetch", functools.partial(_fetch, latency_s=latency_s)),
                                 ("decode", _decode)], labels=[i % 4 for i in range(n)])


def _cnn_consumer(n_classes: int, size: int) -> Callable[[Any], None]:
    import torch

    from ecopt.workloads.cnn import build_cnn

    torch.manual_seed(0)
    model = build_cnn(3, n_classes, size, channels=8, depth=2)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = torch.nn.CrossEntropyLoss()

    def step(batch: Any) -> None:
        x, y = batch[0], batch[-1]
        opt.zero_grad()
        loss_fn(model(x), y).backward()
        opt.step()

    return step


def _mlp_consumer(in_dim: int) -> Callable[[Any], None]:
    import torch

    from ecopt.workloads.tabular import build_mlp_regressor

    torch.manual_seed(0)
    model = build_mlp_regressor(in_dim, 1, 64, 2)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)

    def step(batch: Any) -> None:
        x, y = batch[0], batch[-1]
        opt.zero_grad()
        ((model(x).squeeze(1) - y / 1e4) ** 2).mean().backward()
        opt.step()

    return step


def pipelines(args: argparse.Namespace, tmp: Path) -> dict[str, dict[str, Any]]:
    from ecopt.data import INSURANCE, ImageFolder, LoaderConfig, TablePipeline
    from ecopt.data.datasets import make_image_folder, write_insurance

    root = make_image_folder(tmp / "images", n_classes=4, images_per_class=args.images // 4,
                             size=args.image_px, seed=0, image_format="jpeg")
    images = ImageFolder(root, size=args.image_px // 2)
    csv = write_insurance(tmp / "insurance.csv", args.rows, 0, 0.05)
    table = TablePipeline(csv, INSURANCE, "pandas")
    n_feat = len(table.run().feature_names)
    return {
        "image folder (JPEG decode, num_workers=0)": {
            "source": images, "consumer": _cnn_consumer(4, args.image_px // 2),
            "base": LoaderConfig(batch_size=32, num_workers=0, prefetch_factor=2, cache=False),
            "backends": (), "label": f"{args.images} JPEGs {args.image_px}px -> "
                                    f"{args.image_px // 2}px, small CNN, batch 32"},
        "tabular (CSV re-parsed each epoch)": {
            "source": table, "consumer": _mlp_consumer(n_feat),
            "base": LoaderConfig(batch_size=256, num_workers=0, prefetch_factor=2, cache=False),
            "backends": ("polars", "dask"), "label": f"Insurance schema, {args.rows:,} rows, "
                                                     "pandas, MLP, batch 256"},
        "remote files (I/O latency, num_workers=0)": {
            "source": _remote_files(tmp / "remote", args.files, 256, args.latency_ms / 1e3),
            "consumer": _mlp_consumer(256),
            "base": LoaderConfig(batch_size=32, num_workers=0, prefetch_factor=2, cache=False),
            "backends": (), "label": f"{args.files} files of 1 KiB, each read followed by a "
                                     f"simulated {args.latency_ms:g} ms remote round trip, "
                                     "MLP, batch 32"},
    }


def run_setting(spec: dict[str, Any], setting: Any, epochs: int) -> dict[str, float]:
    """Run ``epochs`` epochs under ``setting``; wall, CPU and estimated energy of the whole run."""
    from ecopt.data import make_loader
    from ecopt.data.allocation import apply_setting
    from ecopt.meters.estimate import EstimateMeter

    meter = EstimateMeter()
    src, cfg, before = apply_setting(spec["source"], setting, spec["base"])
    loader = make_loader(src, cfg)
    consumer = spec["consumer"]
    t0, c0 = time.perf_counter(), _cpu_s()
    h = meter.start()
    for _ in range(epochs):
        before()
        for batch in loader:
            consumer(batch)
    m = meter.stop(h)
    return {"wall_s": time.perf_counter() - t0, "cpu_s": _cpu_s() - c0, "energy_j": m.energy_j}


def has_tensorflow() -> bool:
    """Whether ``tensorflow`` imports (the ``tfdata`` extra: ``pip install ecopt[tfdata]``)."""
    import importlib.util

    return importlib.util.find_spec("tensorflow") is not None


def _import_tf() -> Any:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    # torch's compiler stack (imported lazily, e.g. by the first optimizer) segfaults when
    # it is first imported after TensorFlow (torch 2.14, tensorflow-cpu 2.21): import it first.
    import torch._dynamo  # noqa: F401

    try:
        import tensorflow as tf
    except ImportError as e:  # pragma: no cover - exercised only without the extra
        raise ImportError("the tf.data AUTOTUNE baseline needs TensorFlow: "
                          "pip install 'ecopt[tfdata]' (tensorflow-cpu)") from e
    return tf


def tfdata_dataset(source: Any, base: Any, epochs: int, cores: int) -> Any:
    """The pipeline as a ``tf.data.Dataset`` tuned by tf.data's own autotuner.

    The per-sample and whole-table work is the same Python code the DataLoader runs
    (called through ``tf.numpy_function``); tf.data decides the parallelism of the
    ``map`` (``num_parallel_calls=AUTOTUNE``) and the prefetch depth
    (``prefetch(AUTOTUNE)``) within ``cores`` (``options.autotune.cpu_budget``). No
    cache: tf.data's autotuner does not place one. The epochs run on one iterator
    (``repeat(epochs)``), so what the autotuner learns in an epoch carries over.

    Args:
        source: A :class:`~ecopt.data.TablePipeline` (re-parsed every epoch, then
            sliced into batches) or a :class:`~ecopt.data.StagedDataset` (every
            stage per sample).
        base: The misconfigured :class:`~ecopt.data.LoaderConfig` (batch size,
            shuffle and seed are kept).
        epochs: Passes over the data, >= 1.
        cores: The CPU budget given to the autotuner, >= 1.

    Returns:
        A dataset of ``(features, target)`` numpy-convertible batches, ``epochs``
        passes long.
    """
    import numpy as np

    from ecopt.data import TablePipeline

    tf = _import_tf()
    auto = tf.data.AUTOTUNE
    bs = int(base.batch_size)
    if isinstance(source, TablePipeline):
        table = source

        def parse(_: Any) -> tuple[Any, Any]:
            t = table.run()
            return (t.features.numpy().astype(np.float32),
                    t.target.numpy().astype(np.float32))

        def batches(x: Any, y: Any) -> Any:
            n = tf.shape(x, out_type=tf.int64)[0]
            return tf.data.Dataset.range(0, n, bs).map(lambda i: (x[i:i + bs], y[i:i + bs]))

        ds = tf.data.Dataset.from_tensors(np.int64(0)).map(
            lambda z: tf.numpy_function(parse, [z], (tf.float32, tf.float32), stateful=False),
            num_parallel_calls=auto).flat_map(batches)
    else:
        staged = source
        x0, y0 = staged[0]
        shape = tuple(np.asarray(x0).shape)

        def item(i: Any) -> tuple[Any, Any]:
            x, y = staged[int(i)]
            return np.asarray(x, dtype=np.float32), np.int64(y)

        def call(i: Any) -> Any:
            x, y = tf.numpy_function(item, [i], (tf.float32, tf.int64), stateful=False)
            return tf.ensure_shape(x, shape), tf.ensure_shape(y, ())

        idx = tf.data.Dataset.range(len(staged))
        if base.shuffle:
            idx = idx.shuffle(len(staged), seed=base.seed, reshuffle_each_iteration=True)
        ds = idx.map(call, num_parallel_calls=auto).batch(bs)
    ds = ds.repeat(epochs).prefetch(auto)
    opts = tf.data.Options()
    opts.autotune.enabled = True
    opts.autotune.cpu_budget = int(cores)
    return ds.with_options(opts)


def run_tfdata(spec: dict[str, Any], epochs: int, cores: int) -> dict[str, float]:
    """:func:`run_setting` for :func:`tfdata_dataset`: the same training step, measured alike.

    Each batch is handed to the consumer as torch tensors (``features``, ``target``).
    """
    import numpy as np
    import torch

    from ecopt.meters.estimate import EstimateMeter

    ds = tfdata_dataset(spec["source"], spec["base"], epochs, cores)
    consumer = spec["consumer"]
    meter = EstimateMeter()
    t0, c0 = time.perf_counter(), _cpu_s()
    h = meter.start()
    for x, y in ds.as_numpy_iterator():
        consumer((torch.from_numpy(np.array(x)), torch.from_numpy(np.array(y))))
    m = meter.stop(h)
    return {"wall_s": time.perf_counter() - t0, "cpu_s": _cpu_s() - c0, "energy_j": m.energy_j}


def _tf_version() -> str:
    return str(_import_tf().__version__) if has_tensorflow() else "not installed"


def _cpu_s() -> float:
    import resource

    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def random_setting(rng: random.Random, pprof: Any, cores: int, backends: Sequence[str]) -> Any:
    from ecopt.data.allocation import PipelineSetting

    backend = rng.choice([pprof.backend, *backends]) if pprof.backend else None
    names = pprof.stage_names(backend)
    cache = rng.choice([None, *names])
    threads: tuple[tuple[str, int], ...] = ()
    if pprof.sample and cache in (None, names[-1]):
        threads = tuple((s.name, t) for s in pprof.sample
                        if (t := rng.choice(THREAD_CHOICES)) > 1)
    return PipelineSetting(backend, cache, rng.randint(0, cores), rng.randint(1, 4), threads)


def one_repeat(name: str, spec: dict[str, Any], rep: int, args: argparse.Namespace,
               cores: int) -> dict[str, Any]:
    from ecopt.data import profile
    from ecopt.data.allocation import PipelineSetting, predict_epochs
    from ecopt.data.tuner import hill_climb

    t0 = time.perf_counter()
    diag = profile(spec["source"], spec["consumer"], config=spec["base"], epochs=args.epochs,
                   meter="estimate", try_backends=spec["backends"])
    profile_s = time.perf_counter() - t0
    alloc, pprof = diag.allocation, diag.pipeline_profile
    assert alloc is not None and pprof is not None
    base = spec["base"]
    cur_cache = None
    misconf = PipelineSetting(pprof.backend, cur_cache, base.num_workers, base.prefetch_factor)
    rule = PipelineSetting(pprof.backend, cur_cache, cores, 2)
    rng = random.Random(1000 * rep + 17)
    search: dict[str, tuple[Any, float, int]] = {}
    predictions: list[dict[str, Any]] = []
    for method, settings in (
            ("random search", [random_setting(rng, pprof, cores, spec["backends"])
                               for _ in range(args.trials)]),
            ("LP", [s for s, _ in alloc.candidates[:args.trials]])):
        t1 = time.perf_counter()
        timed = [(run_setting(spec, s, args.epochs)["wall_s"], i, s) for i, s in enumerate(settings)]
        best = min(timed)[2]
        for wall, i, s in timed:
            predictions.append({"run": f"{method} trial {i + 1}", "setting": s.label(),
                                "predicted_s": sum(predict_epochs(pprof, s, args.epochs, cores)),
                                "measured_s": wall})
        search[method] = (best, time.perf_counter() - t1 + (profile_s if method == "LP" else 0.0),
                          len(settings))
    t1 = time.perf_counter()
    tuned = hill_climb(pprof, misconf, cores, args.epochs,
                       memory_limit_bytes=alloc.memory_limit_bytes)
    search["tuner"] = (tuned.setting, time.perf_counter() - t1 + profile_s, 0)
    chosen = {"misconfigured": misconf, "rule": rule, "random search": search["random search"][0],
              "tuner": tuned.setting, "LP": search["LP"][0], "LP top-1": alloc.setting}
    out: dict[str, Any] = {"profile_s": profile_s, "lp": alloc.to_dict(),
                           "tuner": tuned.to_dict(), "methods": {},
                           "predictions": predictions}
    for method in METHODS:
        if method == TFDATA:
            if not args.tfdata:
                continue
            meas = run_tfdata(spec, args.epochs, cores)
            out["methods"][method] = {"setting": tfdata_label(cores), "predicted_s": math.nan,
                                      **meas, "search_s": 0.0, "trials": 0}
            print(f"[{name} repeat {rep}] {method:14s} {tfdata_label(cores):72s} "
                  f"measured {meas['wall_s']:.2f} s (CPU {meas['cpu_s']:.2f})",
                  file=sys.stderr, flush=True)
            continue
        s = chosen[method]
        meas = run_setting(spec, s, args.epochs)
        pred = sum(predict_epochs(pprof, s, args.epochs, cores))
        extra = search.get(method, (None, profile_s if method == "LP top-1" else 0.0, 0))
        out["methods"][method] = {"setting": s.label(), "predicted_s": pred, **meas,
                                  "search_s": extra[1], "trials": extra[2]}
        predictions.append({"run": f"{method} (final)", "setting": s.label(),
                            "predicted_s": pred, "measured_s": meas["wall_s"]})
        print(f"[{name} repeat {rep}] {method:14s} {s.label():72s} "
              f"measured {meas['wall_s']:.2f} s (CPU {meas['cpu_s']:.2f}) predicted {pred:.2f} s",
              file=sys.stderr, flush=True)
    return out


def tfdata_label(cores: int) -> str:
    """How the tf.data AUTOTUNE baseline is set (one label for every repeat)."""
    return (f"tf.data: map num_parallel_calls=AUTOTUNE, prefetch=AUTOTUNE, autotune cpu_budget="
            f"{cores}, no cache")


def tables(results: dict[str, list[dict[str, Any]]], epochs: int) -> dict[str, Table]:
    speed_rows: list[list[Any]] = []
    pred_rows: list[list[Any]] = []
    for name, reps in results.items():
        base = [r["methods"]["misconfigured"] for r in reps]
        for method in methods_in(reps):
            ms = [r["methods"][method] for r in reps]
            settings = Counter(m["setting"] for m in ms)
            setting, count = settings.most_common(1)[0]
            speed = [b["wall_s"] / m["wall_s"] for b, m in zip(base, ms)]
            cpu_gain = [b["cpu_s"] / m["cpu_s"] for b, m in zip(base, ms) if m["cpu_s"] > 0]
            speed_rows.append([
                name, method, f"{setting} ({count}/{len(ms)})",
                trimmed_interval([m["wall_s"] / epochs for m in ms]),
                trimmed_interval([m["cpu_s"] / epochs for m in ms]),
                trimmed_interval([m["energy_j"] / epochs for m in ms]),
                trimmed_interval(speed), trimmed_interval(cpu_gain),
                f"{trimmed_mean_ci([m['search_s'] for m in ms])[0]:.3g} s, "
                f"{ms[0]['trials']} trials"])
            if method == TFDATA:  # tf.data tunes itself: the LP's model predicts nothing here
                continue
            pred = [m["predicted_s"] / epochs for m in ms]
            meas = [m["wall_s"] / epochs for m in ms]
            pm, mm = trimmed_mean_ci(pred)[0], trimmed_mean_ci(meas)[0]
            pred_rows.append([name, method, pm, trimmed_interval(meas),
                              interval(mm / pm, min(a / b for a, b in zip(meas, pred)),
                                       max(a / b for a, b in zip(meas, pred)))
                              if pm > 0 else math.nan])
    cmp_rows: list[list[Any]] = []
    for name, reps in results.items():
        present = methods_in(reps)
        for a, b in COMPARISONS:
            if a not in present or b not in present:
                continue
            wall = [r["methods"][b]["wall_s"] / r["methods"][a]["wall_s"] for r in reps]
            cpu = [r["methods"][b]["cpu_s"] / r["methods"][a]["cpu_s"] for r in reps
                   if r["methods"][a]["cpu_s"] > 0]
            w, c = trimmed_interval(wall), trimmed_interval(cpu)
            cmp_rows.append([name, f"{a} vs {b}", w, c, faster_verdict(a, b, w),
                             faster_verdict(a, b, c), half_better_verdict(w), len(wall)])
    return {
        "comparisons": Table(["pipeline", "comparison", "wall ratio (baseline / method)",
                              "CPU-time ratio (baseline / method)", "verdict (wall)",
                              "verdict (CPU time)", "study's '>50% better' (ratio > 1.5)",
                              "repeats (paired ratios)"],
                             cmp_rows),
        "speedup": Table(["pipeline", "method", "setting chosen (how often)", "epoch s",
                          "CPU s per epoch", "J per epoch (ESTIMATED)",
                          "speed-up vs misconfigured (wall)", "CPU-time gain",
                          "search cost"], speed_rows),
        "prediction": Table(["pipeline", "method", "predicted epoch s", "measured epoch s",
                             "measured / predicted (min-max)"], pred_rows),
        "bound": bound_table(results),
    }


def methods_in(reps: Sequence[dict[str, Any]]) -> list[str]:
    """The methods every repeat ran, in :data:`METHODS` order."""
    return [m for m in METHODS if all(m in r["methods"] for r in reps)]


def bound_table(results: dict[str, list[dict[str, Any]]]) -> Table:
    """Plumber's 4x bound on the cost model, over every setting run with a prediction.

    Two scopes per pipeline: the settings the LP ranked and that ran (its trials and
    its final choices, every repeat), and every setting run (the random search's
    trials and every method's final run too). The verdict is :func:`bound_verdict`
    on the smallest and largest measured / predicted ratio.
    """
    rows: list[list[Any]] = []
    for name, reps in results.items():
        preds = [p for r in reps for p in r.get("predictions", [])
                 if p["predicted_s"] > 0 and p["measured_s"] > 0]
        for scope, keep in (("settings the LP ranked (its trials and choices)",
                             lambda p: p["run"].startswith("LP")),
                            ("every setting run", lambda p: True)):
            ps = [p for p in preds if keep(p)]
            if not ps:
                continue
            ratios = sorted(p["measured_s"] / p["predicted_s"] for p in ps)
            inside = sum(1 / BOUND <= x <= BOUND for x in ratios)
            med = ratios[len(ratios) // 2] if len(ratios) % 2 else \
                (ratios[len(ratios) // 2 - 1] + ratios[len(ratios) // 2]) / 2
            rows.append([name, scope, len(ratios),
                         f"{inside}/{len(ratios)} ({100 * inside / len(ratios):.0f}%)",
                         interval(med, ratios[0], ratios[-1]),
                         max(ratios[-1], 1 / ratios[0]),
                         bound_verdict(ratios[0], ratios[-1])])
    return Table(["pipeline", "settings", "predictions", f"within {BOUND:g}x",
                  "measured / predicted (median [min, max])", "worst factor off",
                  f"verdict (within {BOUND:g}x)"], rows)


def bound_verdict(low: float, high: float, factor: float = BOUND) -> str:
    """The verdict on "every prediction is within ``factor`` of the measured time".

    ``low`` and ``high`` are the smallest and largest measured / predicted ratio. By the
    one rule (:func:`ecopt._verdict.verdict`) on both sides of the band
    ``[1 / factor, factor]``: **holds** when every ratio lies inside it; **does not
    hold** when every ratio lies outside it on one side; **not shown** when some lie
    inside and some outside (the ``within`` column says how many).
    """
    sides = (verdict(low, high, 1 / factor), verdict(1 / high, 1 / low, 1 / factor))
    if all(v == HOLDS for v in sides):
        return HOLDS
    if NOT_HOLD in sides:
        return NOT_HOLD
    return f"{NOT_SHOWN} (some predictions outside {factor:g}x)"


def faster_verdict(a: str, b: str, cell: dict[str, float]) -> str:
    """The verdict on "``a`` is faster than ``b``" from the ratio ``b / a``'s 95 % interval.

    The one rule (:func:`ecopt._verdict.verdict`): a winner is named only when the
    interval excludes 1.
    """
    lo, hi = cell["low"], cell["high"]
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return "cannot tell (too few repeats)"
    v = verdict(lo, hi)
    if v == HOLDS:
        return f"{HOLDS}: {a} faster"
    if v == NOT_HOLD:
        return f"{NOT_HOLD}: {b} faster"
    return f"{NOT_SHOWN} (interval spans 1)"


def half_better_verdict(cell: dict[str, float]) -> str:
    """The verdict on the study's ">50 % better" (the ratio above 1.5), by the one rule."""
    lo, hi = cell["low"], cell["high"]
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return "cannot tell"
    v = verdict(lo, hi, threshold=1.5)
    return f"{NOT_SHOWN} (interval spans 1.5)" if v == NOT_SHOWN else v


def judge_comparisons(table: Table) -> Table:
    """The ``comparisons`` table with its three verdict columns judged from its own cells."""
    rows = []
    for r in table.rows:
        r = list(r)
        a, b = r[1].split(" vs ")
        r[4], r[5], r[6] = faster_verdict(a, b, r[2]), faster_verdict(a, b, r[3]), \
            half_better_verdict(r[2])
        rows.append(r)
    return Table(list(table.columns), rows)


def judge_bound(table: Table) -> Table:
    """The ``bound`` table with its verdict column judged from its own min-max cells."""
    rows = []
    for r in table.rows:
        r = list(r)
        r[6] = bound_verdict(r[4]["low"], r[4]["high"])
        rows.append(r)
    return Table(list(table.columns), rows)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--epochs", type=int, default=4)
    p.add_argument("--trials", type=int, default=3,
                   help="settings the random search and the LP each get to run")
    p.add_argument("--images", type=int, default=800)
    p.add_argument("--image-px", type=int, default=128)
    p.add_argument("--rows", type=int, default=100_000, help="rows of the tabular CSV")
    p.add_argument("--files", type=int, default=400, help="files of the remote-files pipeline")
    p.add_argument("--latency-ms", type=float, default=5.0,
                   help="simulated round trip after each remote-file read")
    p.add_argument("--only", choices=("image", "tabular", "remote"), action="append",
                   help="run only these pipelines (repeatable)")
    p.add_argument("--tfdata", choices=("auto", "on", "off"), default="auto",
                   help=f"run the '{TFDATA}' baseline: auto = when TensorFlow is installed "
                        "(pip install 'ecopt[tfdata]'), on = require it, off = skip it")
    p.add_argument("--out", default="runs/plumber")
    p.add_argument("--record", nargs="?", const="", default=None, metavar="TAG",
                   help="also write the summary to docs/results/plumber/<date>[-TAG]")
    args = p.parse_args(argv)
    for k in ("repeats", "epochs", "trials"):
        if getattr(args, k) < 1:
            raise ValueError(f"--{k} >= 1 must hold, got {getattr(args, k)}")
    if args.tfdata == "on":
        _import_tf()
    args.tfdata = args.tfdata == "on" or (args.tfdata == "auto" and has_tensorflow())
    import torch

    from ecopt.data import cpu_cores

    torch.set_num_threads(1)
    sha = git_commit(_ROOT)
    cores = cpu_cores()
    load0, t0 = os.getloadavg()[0], time.monotonic()
    results: dict[str, list[dict[str, Any]]] = {}
    labels: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="ecopt-plumber-") as tmp:
        specs = pipelines(args, Path(tmp))
        if args.only:
            specs = {k: v for k, v in specs.items() if k.startswith(tuple(args.only))}
        for rep in range(args.repeats):  # repeat-major: machine noise spreads over pipelines
            for name, spec in specs.items():
                results.setdefault(name, []).append(one_repeat(name, spec, rep, args, cores))
                labels[name] = spec["label"]
    tabs = tables(results, args.epochs)
    notes = [f"{k}: {v}." for k, v in labels.items()] + [
        f"{args.repeats} repeats of the whole procedure (profile, LP, searches, final runs); "
        f"each run is {args.epochs} epochs; trimmed means (20% cut each end) with 95% "
        "intervals, lower bounds clipped at 0.",
        f"Random search and the LP each ran {args.trials} settings for {args.epochs} epochs and "
        "kept the fastest; 'LP top-1' is the LP's first choice with no trial; the rule is "
        f"num_workers = {cores} cores, prefetch_factor = 2; the tuner hill-climbs workers, "
        f"threads per stage and prefetch within {cores} cores from the misconfigured "
        "setting on the same model, with no trial and no cache.",
        "Comparisons: per-repeat ratios baseline / method (above 1: the method is faster), "
        "paired within each repeat, over every repeat (the last column counts them); trimmed "
        "mean and 95% interval; a verdict names a winner only when the interval excludes 1.",
        (f"'{TFDATA}': tf.data's own autotuner (TensorFlow "
         f"{_tf_version()}) on the same files and the same Python per-sample "
         "(or whole-table) work, called through tf.numpy_function: map with "
         "num_parallel_calls=AUTOTUNE, prefetch(AUTOTUNE), options.autotune.enabled, "
         f"cpu_budget = {cores} cores, the epochs on one iterator (repeat) so the autotuner "
         "keeps what it learned; no cache (tf.data's autotuner does not place one); each "
         "batch goes to the same torch training step as numpy -> torch tensors."
         if args.tfdata else f"'{TFDATA}' not run (TensorFlow not installed or --tfdata off)."),
        f"bound: Plumber's {BOUND:g}x bound on the model, over every setting run that the "
        "model predicts (the LP's and the random search's trials and every method's final "
        "run, every repeat; not tf.data, which tunes itself): 'holds' when every measured / "
        f"predicted ratio is inside [1/{BOUND:g}, {BOUND:g}], 'does not hold' when every one "
        "is outside on one side, 'not shown' when some are inside and some outside.",
        "The machine was shared with other jobs (1-minute load average "
        f"{load0:.1f} at the start, {os.getloadavg()[0]:.1f} at the end): CPU seconds per "
        "epoch (this process plus its DataLoader workers) are the robust measure; wall "
        "seconds are shown too. torch and BLAS at one thread per process.",
    ]
    facts = {"wall_s": time.monotonic() - t0, "cores": cores,
             "lp": {k: v[0]["lp"] for k, v in results.items()},
             "tuner": {k: [r["tuner"] for r in v] for k, v in results.items()},
             "runs": {k: [r["methods"] for r in v] for k, v in results.items()},
             "predictions": {k: [r["predictions"] for r in v] for k, v in results.items()}}
    for d in record_dirs(args.out, "plumber", args.record):
        write_run(d, script="benchmarks/plumber.py", command=command_line("benchmarks/plumber.py",
                                                                          argv),
                  tables=tabs, energy=estimated_energy(
                      "EstimateMeter over each whole run, process scope (includes the reaped "
                      "DataLoader workers)"), title="Plumber analogue: LP allocation vs rule, "
                  "random search, a hill-climbing tuner and tf.data AUTOTUNE", notes=notes,
                  facts=facts, git=sha)
    print((Path(args.out) / "summary.md").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
