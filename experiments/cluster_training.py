"""Local vs cluster training of the same models: time, peak memory, accuracy and estimated energy.

Reproduces the protocol of the local-vs-cluster ML training study on what this
machine has: the same three models are trained in one local process and on a
Dask cluster, ``--repeats`` times (default 5):

* **logistic regression** on a generated Epsilon-shaped table (2,000 dense
  features per row, rows scaled to unit norm; ``--rows`` 50,000 by default, up
  to the real 400,000): scikit-learn ``LogisticRegression(lbfgs)`` locally,
  dask-ml's ``LogisticRegression(lbfgs)`` on the cluster;
* **gradient boosting** on the same table: XGBoost ``hist`` locally
  (``xgboost.train``) and through XGBoost's Dask interface
  (``xgboost.dask.train``), same parameters;
* **a text classifier** on a generated two-class corpus (``--docs``): a
  hashed bag of words (2^14 features, sparse; scikit-learn's
  ``HashingVectorizer`` locally, dask-ml's on the cluster) classified by
  XGBoost ``hist`` (``xgboost.train`` / ``xgboost.dask.train``).

Why two libraries on the cluster: XGBoost's Dask interface ships with XGBoost
itself (3.x, released with current Dask) and is the better-kept route; it
refuses the linear booster in distributed mode, so the logistic regression
comes from dask-ml (its last release, 2025.1.0, still works with the Dask
here on dense input; its GLM solvers fail on sparse input with current SciPy,
which is why the text classifier is boosted trees on both sides).

Each partition of the data is generated where it is used (locally: in the
process; on the cluster: on the workers, from the same seeds, so both sides
train on identical rows). Measured per run: seconds to build the data
(``data s``), to train and to predict the held-out 20 %; CPU seconds of every
process involved (this one, and on the cluster every worker and the
scheduler); peak memory (this process, plus the workers' summed process
memory from Dask's ``MemorySampler``); accuracy on the held-out rows; and
energy ESTIMATED from CPU time and memory (no power counter is read).

Without ``--scheduler`` the cluster is a ``LocalCluster`` on this host
(``--workers`` processes x ``--threads-per-worker``): on one machine it
measures the framework's overhead, not a cluster's scaling. With
``--scheduler tcp://HOST:8786`` the same script trains on a real cluster
unchanged (the workers need ecopt, dask-ml and xgboost installed).

Example:
    python experiments/cluster_training.py --out runs/cluster_training
    python experiments/cluster_training.py --rows 400000 --scheduler tcp://10.0.0.5:8786
    python experiments/cluster_training.py --quick          # seconds: a smoke run
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import resource
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

_ROOT = Path(__file__).resolve().parents[1]
if str(_ROOT) not in sys.path:
    sys.path.append(str(_ROOT))

from docs.recorded import (  # noqa: E402
    Table,
    command_line,
    estimated_energy,
    git_commit,
    record_dirs,
    trimmed_interval,
    trimmed_mean_ci,
    write_run,
)

MODELS = ("logistic_regression", "gradient_boosting", "text_classifier")
ENGINES = ("local", "dask")
TEXT_FEATURES = 2**14


def _cpu_self() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _proc_stats() -> tuple[float, float]:
    """(CPU seconds, RSS bytes) of the calling process (runs on workers too)."""
    import psutil

    p = psutil.Process()
    t = p.cpu_times()
    return t.user + t.system, float(p.memory_info().rss)


class ClusterMeter:
    """CPU seconds and peak memory of this process and, with a client, every worker and the scheduler.

    Energy is then ESTIMATED with the estimate meter's constants:
    CPU seconds x W per busy core + mean resident GB x W/GB x seconds.
    """

    def __init__(self, client: Any = None) -> None:
        self.client = client

    def _cpu(self) -> float:
        cpu = _cpu_self()
        if self.client is not None:
            cpu += sum(c for c, _ in self.client.run(_proc_stats).values())
            cpu += self.client.run_on_scheduler(_proc_stats)[0]
        return cpu

    @contextlib.contextmanager
    def window(self) -> Iterator[dict[str, float]]:
        """Measure the block: ``wall_s``, ``cpu_s``, ``peak_mb`` and ``energy_j`` (ESTIMATED).

        ``peak_mb`` is this process's peak RSS when it works alone (local runs
        run in a fresh process), or, with a client, the workers' summed peak
        process memory plus what this (client) process added.
        """
        from ecopt.data.memory import PeakRSS
        from ecopt.meters.estimate import DEFAULT_CPU_W_PER_CORE, DEFAULT_RAM_W_PER_GB

        out: dict[str, float] = {}
        cpu0, t0 = self._cpu(), time.perf_counter()
        sampler = None
        ctx: Any = contextlib.nullcontext()
        if self.client is not None:
            from distributed.diagnostics import MemorySampler

            sampler = MemorySampler()
            ctx = sampler.sample("run", client=self.client, measure="process", interval=0.2)
        with PeakRSS(period_s=0.02) as mem, ctx:
            yield out
        out["wall_s"] = time.perf_counter() - t0
        out["cpu_s"] = self._cpu() - cpu0
        if sampler is None:
            peak = float(mem.peak_bytes)
            mean_gb = (mem.start_bytes + mem.peak_bytes) / 2 / 1e9
        else:
            peak = float(mem.peak_bytes - mem.start_bytes)
            mean_gb = (mem.peak_bytes - mem.start_bytes) / 2 / 1e9
            df = sampler.to_pandas()
            if len(df):
                peak += float(df.iloc[:, 0].max())
                mean_gb += float(df.iloc[:, 0].mean()) / 1e9
        out["peak_mb"] = peak / 1e6
        out["energy_j"] = (out["cpu_s"] * DEFAULT_CPU_W_PER_CORE
                           + mean_gb * DEFAULT_RAM_W_PER_GB * out["wall_s"])


# ---- data ---------------------------------------------------------------------------------

def _blocks(total: int, block_rows: int) -> list[int]:
    n = max(1, math.ceil(total / block_rows))
    sizes = [total // n + (1 if i < total % n else 0) for i in range(n)]
    return sizes


def _eps_x(i: int, rows: int, features: int, seed: int) -> np.ndarray:
    from ecopt.data.datasets import make_epsilon_block

    return make_epsilon_block(i, rows, features, seed)[0]


def _eps_y(i: int, rows: int, features: int, seed: int) -> np.ndarray:
    from ecopt.data.datasets import make_epsilon_block

    return make_epsilon_block(i, rows, features, seed)[1]


def _text_docs(i: int, docs: int, seed: int) -> list[str]:
    from ecopt.data.datasets import make_text_block

    return make_text_block(i, docs, seed)[0]


def _text_y(i: int, docs: int, seed: int) -> np.ndarray:
    from ecopt.data.datasets import make_text_block

    return make_text_block(i, docs, seed)[1]


def table_local(rows: int, features: int, seed: int, first_block: int, block_rows: int
                ) -> tuple[np.ndarray, np.ndarray]:
    sizes = _blocks(rows, block_rows)
    xs = [_eps_x(first_block + i, n, features, seed) for i, n in enumerate(sizes)]
    ys = [_eps_y(first_block + i, n, features, seed) for i, n in enumerate(sizes)]
    return np.concatenate(xs), np.concatenate(ys)


def table_dask(rows: int, features: int, seed: int, first_block: int, block_rows: int
               ) -> tuple[Any, Any]:
    import dask
    import dask.array as da

    sizes = _blocks(rows, block_rows)
    xs = [da.from_delayed(dask.delayed(_eps_x)(first_block + i, n, features, seed), (n, features),
                          np.float32) for i, n in enumerate(sizes)]
    ys = [da.from_delayed(dask.delayed(_eps_y)(first_block + i, n, features, seed), (n,),
                          np.float32) for i, n in enumerate(sizes)]
    return da.concatenate(xs), da.concatenate(ys)


def text_local(docs: int, seed: int, first_block: int, block_rows: int) -> tuple[Any, np.ndarray]:
    from sklearn.feature_extraction.text import HashingVectorizer

    hv = HashingVectorizer(n_features=TEXT_FEATURES, alternate_sign=False, norm="l2")
    sizes = _blocks(docs, block_rows)
    corpus = [d for i, n in enumerate(sizes) for d in _text_docs(first_block + i, n, seed)]
    y = np.concatenate([_text_y(first_block + i, n, seed) for i, n in enumerate(sizes)])
    return hv.transform(corpus), y


def text_dask(docs: int, seed: int, first_block: int, block_rows: int) -> tuple[Any, Any]:
    import dask
    import dask.array as da
    import dask.bag as db
    from dask_ml.feature_extraction.text import HashingVectorizer

    sizes = _blocks(docs, block_rows)
    bag = db.from_delayed([dask.delayed(_text_docs)(first_block + i, n, seed)
                           for i, n in enumerate(sizes)])
    hv = HashingVectorizer(n_features=TEXT_FEATURES, alternate_sign=False, norm="l2")
    x = hv.transform(bag)
    x._chunks = ((*sizes,), (TEXT_FEATURES,))  # the partition sizes are known: no pass needed
    y = da.concatenate([da.from_delayed(dask.delayed(_text_y)(first_block + i, n, seed), (n,),
                                        np.float32) for i, n in enumerate(sizes)])
    return x, y


# ---- models -------------------------------------------------------------------------------

def _accuracy(pred: Any, y: Any) -> float:
    return float(np.mean((np.asarray(pred).reshape(-1) > 0.5) == (np.asarray(y) > 0.5)))


def train_local(model: str, x: Any, y: np.ndarray, args: argparse.Namespace) -> Callable[[Any], Any]:
    if model in ("gradient_boosting", "text_classifier"):
        import xgboost as xgb

        booster = xgb.train(_xgb_params(args, nthread=args.local_threads),
                            xgb.DMatrix(x, label=y), num_boost_round=args.rounds)
        return lambda xt: booster.predict(xgb.DMatrix(xt))
    from sklearn.linear_model import LogisticRegression

    lr = LogisticRegression(C=args.C, max_iter=args.max_iter)
    lr.fit(x, y)
    return lambda xt: lr.predict_proba(xt)[:, 1]


def train_dask(model: str, x: Any, y: Any, args: argparse.Namespace, client: Any
               ) -> Callable[[Any], Any]:
    if model in ("gradient_boosting", "text_classifier"):
        import xgboost as xgb
        import xgboost.dask  # registers xgb.dask

        d = xgb.dask.DaskDMatrix(client, x, y)
        out = xgb.dask.train(client, _xgb_params(args, nthread=args.threads_per_worker), d,
                             num_boost_round=args.rounds)
        return lambda xt: xgb.dask.predict(client, out["booster"], xt).compute()
    from dask_ml.linear_model import LogisticRegression

    lr = LogisticRegression(C=args.C, max_iter=args.max_iter, solver="lbfgs")
    lr.fit(x, y.astype(int))
    return lambda xt: lr.predict_proba(xt)[:, 1].compute()


def _xgb_params(args: argparse.Namespace, nthread: int) -> dict[str, Any]:
    return {"objective": "binary:logistic", "tree_method": "hist", "max_depth": args.depth,
            "eta": 0.3, "nthread": nthread, "seed": args.seed}


def one_run(model: str, engine: str, args: argparse.Namespace, client: Any) -> dict[str, Any]:
    meter = ClusterMeter(client if engine == "dask" else None)
    test_rows = max(1, args.rows // 5)
    text_test = max(1, args.docs // 5)
    with meter.window() as total:
        t0 = time.perf_counter()
        if model == "text_classifier":
            if engine == "local":
                x, y = text_local(args.docs, args.seed, 0, args.block_rows)
                xt, yt = text_local(text_test, args.seed, 10_000, args.block_rows)
            else:
                x, y = text_dask(args.docs, args.seed, 0, args.block_rows)
                xt, yt = text_dask(text_test, args.seed, 10_000, args.block_rows)
                x, y = client.persist([x, y])
                from distributed import wait

                wait([x, y])
        else:
            if engine == "local":
                x, y = table_local(args.rows, args.features, args.seed, 0, args.block_rows)
                xt, yt = table_local(test_rows, args.features, args.seed, 10_000, args.block_rows)
            else:
                x, y = table_dask(args.rows, args.features, args.seed, 0, args.block_rows)
                xt, yt = table_dask(test_rows, args.features, args.seed, 10_000, args.block_rows)
                x, y = client.persist([x, y])
                from distributed import wait

                wait([x, y])
        data_s = time.perf_counter() - t0
        t1 = time.perf_counter()
        predict = (train_local(model, x, y, args) if engine == "local"
                   else train_dask(model, x, y, args, client))
        train_s = time.perf_counter() - t1
        t2 = time.perf_counter()
        pred = predict(xt)
        yt_np = yt.compute() if hasattr(yt, "compute") else yt
        predict_s = time.perf_counter() - t2
    return {"data_s": data_s, "train_s": train_s, "predict_s": predict_s,
            "accuracy": _accuracy(pred, yt_np), **total}


def _local_child(model: str, args: argparse.Namespace) -> dict[str, Any]:
    return one_run(model, "local", args, None)


def fresh_run(model: str, engine: str, args: argparse.Namespace, client: Any) -> dict[str, Any]:
    """One run on fresh processes, so no run inherits another's heap.

    Local runs go to a new (spawned) process; on a LocalCluster the workers are
    restarted first (a real cluster's workers are left alone).
    """
    if engine == "local":
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as ex:
            return ex.submit(_local_child, model, args).result()
    if not args.scheduler:
        restart_workers(client, args.workers, args.worker_wait_s)
    return one_run(model, engine, args, client)


def restart_workers(client: Any, n_workers: int, wait_s: float) -> None:
    """Restart a LocalCluster's workers and wait until ``n_workers`` are connected again.

    ``client.restart()`` alone gives the workers a fixed time to come back (4 x
    the client's connect timeout: 120 s by default) and raises after it, though
    the workers are on their way; on a loaded 2-core machine they took longer.
    Here the restart only waits for the old workers to stop, and then the
    condition itself (``n_workers`` connected) is awaited, up to ``wait_s``.

    Raises:
        TimeoutError: when fewer than ``n_workers`` are back after ``wait_s`` seconds
            (the message says how many are).
    """
    try:
        client.restart(wait_for_workers=False, timeout=wait_s)
    except TimeoutError:
        # Workers that did not stop in time were removed; their nannies start new ones,
        # which the wait below counts.
        pass
    try:
        client.wait_for_workers(n_workers, timeout=wait_s)
    except TimeoutError:
        have = len(client.scheduler_info(n_workers=-1)["workers"])
        raise TimeoutError(f"{n_workers} Dask workers must be connected after a restart, got "
                           f"{have} after {wait_s:g} s (--worker-wait-s)") from None


def start_cluster(args: argparse.Namespace) -> tuple[Any, Any]:
    from distributed import Client, LocalCluster

    if args.scheduler:
        return Client(args.scheduler), None
    cluster = LocalCluster(n_workers=args.workers, threads_per_worker=args.threads_per_worker,
                           processes=True, host="127.0.0.1", dashboard_address=None,
                           memory_limit=args.worker_memory)
    client = Client(cluster)
    client.wait_for_workers(args.workers, timeout=args.worker_wait_s)
    return client, cluster


def summarise(runs: dict[tuple[str, str], list[dict[str, Any]]], energy_word: str) -> Table:
    rows: list[list[Any]] = []
    for model in MODELS:
        acc_local = None
        for engine in ENGINES:
            rs = runs.get((model, engine))
            if not rs:
                continue
            acc = trimmed_mean_ci([r["accuracy"] for r in rs])[0]
            if engine == "local":
                acc_local = acc
            rows.append([
                model, engine, len(rs),
                trimmed_interval([r["data_s"] for r in rs]),
                trimmed_interval([r["train_s"] for r in rs]),
                trimmed_interval([r["wall_s"] for r in rs]),
                trimmed_interval([r["cpu_s"] for r in rs]),
                trimmed_interval([r["peak_mb"] for r in rs]),
                trimmed_interval([r["energy_j"] for r in rs]),
                acc,
                "-" if engine == "local" or acc_local is None
                else f"{100 * (acc - acc_local):+.2f} pp"])
    return Table(["model", "engine", "runs", "data s", "train s", "total s", "CPU s (all processes)",
                  "peak memory MB", f"energy J ({energy_word})", "accuracy",
                  "accuracy vs local"], rows)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=50_000,
                   help="training rows of the Epsilon-shaped table (the real one has 400,000)")
    p.add_argument("--features", type=int, default=2000)
    p.add_argument("--docs", type=int, default=50_000, help="training documents of the corpus")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--models", nargs="+", default=list(MODELS), choices=MODELS)
    p.add_argument("--engines", nargs="+", default=list(ENGINES), choices=ENGINES)
    p.add_argument("--scheduler", help="address of a running Dask scheduler (default: a "
                                       "LocalCluster on this host)")
    p.add_argument("--workers", type=int, default=2, help="LocalCluster worker processes")
    p.add_argument("--threads-per-worker", type=int, default=1)
    p.add_argument("--worker-memory", default="6GiB", help="LocalCluster memory limit per worker")
    p.add_argument("--worker-wait-s", type=float, default=900.0,
                   help="how long to wait for the LocalCluster's workers to connect, at the "
                        "start and after each restart (default 900; they are usually back in "
                        "seconds, but a loaded machine can take minutes)")
    p.add_argument("--local-threads", type=int, default=os.cpu_count() or 1,
                   help="threads of the local XGBoost (default: every core, as the cluster has)")
    p.add_argument("--block-rows", type=int, default=10_000, help="rows per generated partition")
    p.add_argument("--rounds", type=int, default=50, help="boosting rounds")
    p.add_argument("--depth", type=int, default=6, help="tree depth")
    p.add_argument("--max-iter", type=int, default=100, help="L-BFGS iterations")
    p.add_argument("--C", type=float, default=1.0, help="inverse L2 strength of the logistic models")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--quick", action="store_true",
                   help="a smoke run in seconds: 2,000 x 100 table, 2,000 documents, 1 repeat")
    p.add_argument("--out", default="runs/cluster_training")
    p.add_argument("--record", nargs="?", const="", default=None, metavar="TAG",
                   help="also write the summary to docs/results/cluster_training/<date>[-TAG]")
    args = p.parse_args(argv)
    if args.quick:
        args.rows, args.features, args.docs, args.repeats = 2000, 100, 2000, 1
        args.rounds, args.max_iter, args.block_rows = 5, 20, 1000
    for k in ("rows", "features", "docs", "repeats", "workers", "rounds", "max_iter"):
        if getattr(args, k) < 1:
            raise ValueError(f"--{k.replace('_', '-')} >= 1 must hold, got {getattr(args, k)}")
    if args.rows > 400_000:
        raise ValueError(f"--rows <= 400,000 (the real Epsilon's size) must hold, got {args.rows}")
    sha = git_commit(_ROOT)
    import logging
    import warnings

    logging.getLogger("distributed").setLevel(logging.ERROR)
    warnings.filterwarnings("ignore", category=FutureWarning)
    load0, t0 = os.getloadavg()[0], time.monotonic()
    client, cluster = start_cluster(args) if "dask" in args.engines else (None, None)
    runs: dict[tuple[str, str], list[dict[str, Any]]] = {}
    try:
        if client is not None:
            n_workers = len(client.scheduler_info()["workers"])
        for rep in range(args.repeats):
            for model in args.models:
                for engine in args.engines:
                    r = fresh_run(model, engine, args, client)
                    runs.setdefault((model, engine), []).append(r)
                    print(f"[{time.monotonic() - t0:6.0f}s] {model} {engine} repeat {rep}: "
                          f"train {r['train_s']:.2f}s total {r['wall_s']:.2f}s CPU {r['cpu_s']:.2f}s "
                          f"peak {r['peak_mb']:.0f} MB acc {r['accuracy']:.4f}",
                          file=sys.stderr, flush=True)
    finally:
        if client is not None:
            client.close()
        if cluster is not None:
            cluster.close()
    where = (f"a Dask scheduler at {args.scheduler} ({n_workers} workers)" if args.scheduler
             else f"a LocalCluster on this host: {args.workers} worker processes x "
                  f"{args.threads_per_worker} thread(s)")
    notes = [
        f"Cluster: {where}. " + ("" if args.scheduler else
                                 "One host: the cluster shares this machine's cores with the "
                                 "local runs' machine, so this measures Dask's overhead and "
                                 "memory per process, not a cluster's scaling."),
        f"Data: generated, not real: an Epsilon-shaped table of {args.rows:,} training rows x "
        f"{args.features:,} dense features (+{max(1, args.rows // 5):,} test rows) and a "
        f"two-class corpus of {args.docs:,} documents (+{max(1, args.docs // 5):,} test), "
        "hashed to 2^14 features; identical rows on both engines.",
        f"Models: logistic regression (L2, C={args.C}, L-BFGS, {args.max_iter} iterations: "
        f"scikit-learn locally, dask-ml on the cluster); gradient boosting (XGBoost hist, "
        f"{args.rounds} rounds, depth {args.depth}: xgboost.train locally with "
        f"{args.local_threads} threads, xgboost.dask.train on the cluster); text classifier "
        "(hashed bag of words: scikit-learn / dask-ml HashingVectorizer, then the same "
        "XGBoost model).",
        f"{args.repeats} runs per cell; trimmed mean (20% cut at each end) with a 95% interval; "
        "total s covers data + train + predict. Each local run is a fresh process, and the "
        "LocalCluster's workers are restarted before each run. Peak memory: local, the "
        "process's peak RSS (libraries included); cluster, the workers' summed peak process "
        "memory (Dask MemorySampler, 0.2 s; libraries included) plus what the client added.",
        "The machine was shared with other jobs (1-minute load average "
        f"{load0:.1f} at the start, {os.getloadavg()[0]:.1f} at the end): CPU seconds are the "
        "robust measure; wall seconds are shown too.",
    ] + (["--quick: a smoke run, not a result."] if args.quick else [])
    tables = {"training": summarise(runs, "ESTIMATED")}
    facts = {"wall_s": time.monotonic() - t0,
             "runs": {f"{m}/{e}": v for (m, e), v in runs.items()}}
    for d in record_dirs(args.out, "cluster_training", args.record):
        write_run(d, script="experiments/cluster_training.py",
                  command=command_line("experiments/cluster_training.py", argv), tables=tables,
                  energy=estimated_energy(
                      "CPU seconds of this process and, on the cluster, of every worker and the "
                      "scheduler (psutil), plus the mean memory of the run", meter="estimate"),
                  title="Local vs cluster training", notes=notes, facts=facts,
                  extra_libraries=["dask-ml", "xgboost", "psutil"], git=sha)
    print((Path(args.out) / "summary.md").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
