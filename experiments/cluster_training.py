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
* **a text classifier** on a generated Spanish-review-like corpus
  (``--docs``; :mod:`ecopt.data.reviews`: tourist reviews of hotels,
  restaurants and attractions, labelled positive (polarity 4-5) or not, a
  stand-in for the seed's RestMex reviews, not RestMex itself): a hashed bag
  of words (2^14 features, sparse; scikit-learn's ``HashingVectorizer``
  locally, dask-ml's on the cluster, both with the corpus's token rule:
  lower-cased runs of letters, accents kept) classified by XGBoost ``hist``
  (``xgboost.train`` / ``xgboost.dask.train``); with ``--engines spark`` also
  TF-IDF + logistic regression (``text_tfidf``) on both sides.

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
if str(Path(__file__).resolve().parent) not in sys.path:  # _spark_engine beside this script
    sys.path.insert(0, str(Path(__file__).resolve().parent))

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

MODELS = ("logistic_regression", "linear_svm", "random_forest", "gradient_boosting", "mlp",
          "text_classifier", "text_tfidf")
ENGINES = ("local", "dask", "spark")
#: What each engine trains: dask-ml and XGBoost's Dask interface have no SVM, forest or MLP,
#: MLlib has no hashed-words boosting model (its text model is TF-IDF + logistic regression).
ENGINE_MODELS: dict[str, tuple[str, ...]] = {
    "local": MODELS,
    "dask": ("logistic_regression", "gradient_boosting", "text_classifier"),
    "spark": ("logistic_regression", "linear_svm", "random_forest", "gradient_boosting", "mlp",
              "text_tfidf"),
}
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
    from ecopt.data.reviews import make_review_block

    return make_review_block(i, docs, seed).texts


def _text_y(i: int, docs: int, seed: int) -> np.ndarray:
    from ecopt.data.reviews import make_review_block

    return make_review_block(i, docs, seed).labels


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


def text_local(docs: int, seed: int, first_block: int, block_rows: int, norm: str | None = "l2"
               ) -> tuple[Any, np.ndarray]:
    from sklearn.feature_extraction.text import HashingVectorizer

    from ecopt.data.reviews import TOKEN_PATTERN

    hv = HashingVectorizer(n_features=TEXT_FEATURES, alternate_sign=False, norm=norm,
                           token_pattern=TOKEN_PATTERN)
    sizes = _blocks(docs, block_rows)
    corpus = [d for i, n in enumerate(sizes) for d in _text_docs(first_block + i, n, seed)]
    y = np.concatenate([_text_y(first_block + i, n, seed) for i, n in enumerate(sizes)])
    return hv.transform(corpus), y


def text_dask(docs: int, seed: int, first_block: int, block_rows: int) -> tuple[Any, Any]:
    import dask
    import dask.array as da
    import dask.bag as db
    from dask_ml.feature_extraction.text import HashingVectorizer

    from ecopt.data.reviews import TOKEN_PATTERN

    sizes = _blocks(docs, block_rows)
    bag = db.from_delayed([dask.delayed(_text_docs)(first_block + i, n, seed)
                           for i, n in enumerate(sizes)])
    hv = HashingVectorizer(n_features=TEXT_FEATURES, alternate_sign=False, norm="l2",
                           token_pattern=TOKEN_PATTERN)
    x = hv.transform(bag)
    x._chunks = ((*sizes,), (TEXT_FEATURES,))  # the partition sizes are known: no pass needed
    y = da.concatenate([da.from_delayed(dask.delayed(_text_y)(first_block + i, n, seed), (n,),
                                        np.float32) for i, n in enumerate(sizes)])
    return x, y


# ---- models -------------------------------------------------------------------------------

def _accuracy(pred: Any, y: Any) -> float:
    return float(np.mean((np.asarray(pred).reshape(-1) > 0.5) == (np.asarray(y) > 0.5)))


def _f1(pred: Any, y: Any) -> float:
    """F1 of the positive class (label 1)."""
    from sklearn.metrics import f1_score

    return float(f1_score(np.asarray(y) > 0.5, np.asarray(pred).reshape(-1) > 0.5))


def _torch_mlp(x: np.ndarray, y: np.ndarray, args: argparse.Namespace) -> Callable[[Any], Any]:
    """One hidden layer of ``--hidden`` (sigmoid, as MLlib's), full-batch L-BFGS for
    ``--max-iter`` iterations: MLlib's ``MultilayerPerceptronClassifier`` in torch."""
    import torch

    torch.manual_seed(args.seed)
    torch.set_num_threads(args.local_threads)
    net = torch.nn.Sequential(torch.nn.Linear(x.shape[1], args.hidden), torch.nn.Sigmoid(),
                              torch.nn.Linear(args.hidden, 2))
    xt, yt = torch.as_tensor(np.asarray(x), dtype=torch.float32), torch.as_tensor(y).long()
    opt = torch.optim.LBFGS(net.parameters(), max_iter=args.max_iter, line_search_fn="strong_wolfe")

    def closure() -> Any:
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(net(xt), yt)
        loss.backward()
        return loss

    opt.step(closure)

    def predict(xn: Any) -> Any:
        with torch.no_grad():
            return net(torch.as_tensor(np.asarray(xn), dtype=torch.float32)).argmax(1).numpy()
    return predict


def train_local(model: str, x: Any, y: np.ndarray, args: argparse.Namespace) -> Callable[[Any], Any]:
    if model == "linear_svm":
        from sklearn.svm import LinearSVC

        svm = LinearSVC(C=args.C, max_iter=args.max_iter * 10)
        svm.fit(x, y)
        return lambda xt: (svm.decision_function(xt) > 0).astype(float)
    if model == "random_forest":
        from sklearn.ensemble import RandomForestClassifier

        rf = RandomForestClassifier(n_estimators=args.trees, max_depth=args.depth,
                                    n_jobs=args.local_threads, random_state=args.seed)
        rf.fit(x, y)
        return lambda xt: rf.predict_proba(xt)[:, 1]
    if model == "mlp":
        return _torch_mlp(x, y, args)
    if model == "text_tfidf":
        from sklearn.feature_extraction.text import TfidfTransformer
        from sklearn.linear_model import LogisticRegression as LR

        tfidf = TfidfTransformer().fit(x)
        lr_t = LR(C=args.C, max_iter=args.max_iter).fit(tfidf.transform(x), y)
        return lambda xt: lr_t.predict_proba(tfidf.transform(xt))[:, 1]
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
    if engine == "spark":
        return _spark_run(model, args, client)
    meter = ClusterMeter(client if engine == "dask" else None)
    test_rows = max(1, args.rows // 5)
    text_test = max(1, args.docs // 5)
    with meter.window() as total:
        t0 = time.perf_counter()
        if model in ("text_classifier", "text_tfidf"):
            if engine == "local":
                norm = None if model == "text_tfidf" else "l2"  # TF-IDF weighs raw counts
                x, y = text_local(args.docs, args.seed, 0, args.block_rows, norm)
                xt, yt = text_local(text_test, args.seed, 10_000, args.block_rows, norm)
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
            "accuracy": _accuracy(pred, yt_np), "f1": _f1(pred, yt_np), **total}


def _spark_run(model: str, args: argparse.Namespace, spark: Any) -> dict[str, Any]:
    """One run of ``model`` on the Spark cluster (:mod:`_spark_engine`)."""
    import _spark_engine as S

    parts = args.partitions or 2 * args.executors
    with S.SparkMeter().window() as total:
        t0 = time.perf_counter()
        if model == "text_tfidf":
            n = args.docs
            df = S.text_spark(spark, _blocks(n, args.block_rows), args.seed, 0, parts)
            dft = S.text_spark(spark, _blocks(max(1, n // 5), args.block_rows), args.seed,
                               10_000, parts)
        else:
            n = args.rows
            df = S.table_spark(spark, _blocks(n, args.block_rows), args.features, args.seed, 0,
                               parts)
            dft = S.table_spark(spark, _blocks(max(1, n // 5), args.block_rows), args.features,
                                args.seed, 10_000, parts)
        data_s = time.perf_counter() - t0
        t1 = time.perf_counter()
        fitted = S.train_spark(model, df, n, args.features, args)
        train_s = time.perf_counter() - t1
        t2 = time.perf_counter()
        pred, yt = S.predict_spark(fitted, dft)
        predict_s = time.perf_counter() - t2
        df.unpersist()
        dft.unpersist()
    return {"data_s": data_s, "train_s": train_s, "predict_s": predict_s,
            "accuracy": _accuracy(pred, yt), "f1": _f1(pred, yt), "partitions": parts, **total}


def _local_child(model: str, args: argparse.Namespace) -> dict[str, Any]:
    return one_run(model, "local", args, None)


def fresh_run(model: str, engine: str, args: argparse.Namespace, client: Any) -> dict[str, Any]:
    """One run on fresh processes, so no run inherits another's heap.

    Local runs go to a new (spawned) process; on a LocalCluster the workers are
    restarted first (a real cluster's workers are left alone).
    """
    if engine == "spark":  # the executor JVMs stay up between runs (a Spark application's do)
        return one_run(model, engine, args, client)
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
    deadline = time.monotonic() + wait_s
    try:
        client.restart(wait_for_workers=False, timeout=wait_s)
    except TimeoutError:
        # Workers that did not stop in time were removed; their nannies start new ones,
        # which the wait below counts.
        pass
    cluster = getattr(client, "cluster", None)
    try:
        # An embedded cluster whose nannies did not come back within a minute (seen on
        # distributed 2026.8: the nannies were gone) gets new workers instead.
        client.wait_for_workers(n_workers, timeout=min(60.0, wait_s) if cluster is not None
                                else wait_s)
        return
    except TimeoutError:
        if cluster is None:
            raise TimeoutError(f"{n_workers} Dask workers must be connected after a restart, "
                               f"got {len(client.scheduler_info(n_workers=-1)['workers'])} after "
                               f"{wait_s:g} s (--worker-wait-s)") from None
    print(f"Dask: {n_workers} workers not back a minute after a restart; starting new ones",
          file=sys.stderr, flush=True)
    cluster.scale(0)
    while client.scheduler_info(n_workers=-1)["workers"] and time.monotonic() < deadline:
        time.sleep(0.5)
    cluster.scale(n_workers)
    try:
        client.wait_for_workers(n_workers, timeout=max(1.0, deadline - time.monotonic()))
        return
    except TimeoutError:
        pass
    try:
        client.wait_for_workers(n_workers, timeout=1.0)
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
        acc_local = f1_local = None
        for engine in ENGINES:
            rs = runs.get((model, engine))
            if not rs:
                continue
            acc = trimmed_mean_ci([r["accuracy"] for r in rs])[0]
            f1 = trimmed_mean_ci([r["f1"] for r in rs])[0]
            if engine == "local":
                acc_local, f1_local = acc, f1
            rows.append([
                model, engine, len(rs),
                trimmed_interval([r["data_s"] for r in rs]),
                trimmed_interval([r["train_s"] for r in rs]),
                trimmed_interval([r["wall_s"] for r in rs]),
                trimmed_interval([r["cpu_s"] for r in rs]),
                trimmed_interval([r["peak_mb"] for r in rs]),
                trimmed_interval([r["energy_j"] for r in rs]),
                acc, f1,
                "-" if engine == "local" or acc_local is None
                else f"{100 * (acc - acc_local):+.2f} pp",
                "-" if engine == "local" or f1_local is None
                else f"{100 * (f1 - f1_local):+.2f} pp"])
    return Table(["model", "engine", "runs", "data s", "train s", "total s", "CPU s (all processes)",
                  "peak memory MB", f"energy J ({energy_word})", "accuracy", "F1",
                  "accuracy vs local", "F1 vs local"], rows)


def jvm_table(runs: dict[tuple[str, str], list[dict[str, Any]]]) -> Table:
    """Peak resident memory of the driver JVM and of each executor JVM, per Spark model."""
    rows = []
    for model in MODELS:
        rs = runs.get((model, "spark"))
        if not rs:
            continue
        peaks = [r.get("jvm_peak_mb", {}) for r in rs]
        drv = [p["driver"] for p in peaks if "driver" in p]
        exe = [v for p in peaks for k, v in p.items() if k.startswith("executor")]
        rows.append([model, len(rs), max(drv) if drv else None,
                     len({k for p in peaks for k in p if k.startswith("executor")}),
                     min(exe) if exe else None, max(exe) if exe else None])
    return Table(["model", "runs", "driver JVM peak MB", "executor JVMs",
                  "smallest executor peak MB", "largest executor peak MB"], rows)


def scaling(args: argparse.Namespace) -> tuple[Table, list[dict[str, Any]]]:
    """Logistic regression on embedded clusters of each ``--scaling-executors`` size, over
    ``--scaling-partitions``: one run per cell (a fresh cluster per size, warmed up by one
    untimed fit first, so the first cell does not carry the JVMs' start-up)."""
    import _spark_engine as S

    rows, raw = [], []
    for n in args.scaling_executors:
        spark, ex = S.start_spark(None, n, args.executor_memory_mb)
        try:
            _spark_run("logistic_regression", argparse.Namespace(**{
                **vars(args), "executors": n, "partitions": args.scaling_partitions[0]}), spark)
            for parts in args.scaling_partitions:
                a = argparse.Namespace(**{**vars(args), "executors": n, "partitions": parts})
                r = _spark_run("logistic_regression", a, spark)
                raw.append({"executors": n, **r})
                rows.append([n, parts, round(r["data_s"], 2), round(r["train_s"], 2),
                             round(r["wall_s"], 2), round(r["cpu_s"], 2), round(r["peak_mb"]),
                             round(r["energy_j"], 1), round(r["accuracy"], 4)])
                print(f"scaling: {n} executors, {parts} partitions: train {r['train_s']:.2f}s "
                      f"CPU {r['cpu_s']:.2f}s", file=sys.stderr, flush=True)
        finally:
            ex.close()
    return Table(["executors", "partitions", "data s", "train s", "total s",
                  "CPU s (all processes)", "peak memory MB", "energy J (ESTIMATED)", "accuracy"],
                 rows), raw


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=50_000,
                   help="training rows of the Epsilon-shaped table (the real one has 400,000)")
    p.add_argument("--features", type=int, default=2000)
    p.add_argument("--docs", type=int, default=50_000, help="training documents of the corpus")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--models", nargs="+", default=list(MODELS), choices=MODELS)
    p.add_argument("--engines", nargs="+", default=["local", "dask"], choices=ENGINES,
                   help="local, dask, spark (default: local dask; spark needs Java 17+)")
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
    p.add_argument("--trees", type=int, default=20, help="trees of the random forests")
    p.add_argument("--hidden", type=int, default=64, help="hidden units of the MLPs")
    p.add_argument("--master", help="Spark master URL, e.g. spark://HOST:7077 (default: an "
                                    "embedded local-cluster on this host)")
    p.add_argument("--executors", type=int, default=3,
                   help="executor JVMs of the embedded Spark cluster (default 3, as the seed's)")
    p.add_argument("--executor-memory-mb", type=int, default=1024,
                   help="memory of each embedded executor JVM, MiB")
    p.add_argument("--partitions", type=int, default=None,
                   help="Spark partitions of each DataFrame (default: 2 per executor)")
    p.add_argument("--scaling", action="store_true",
                   help="also time logistic regression on 1/2/3-executor Spark clusters over "
                        "--scaling-partitions (table scaling)")
    p.add_argument("--scaling-executors", type=int, nargs="+", default=[1, 2, 3])
    p.add_argument("--scaling-partitions", type=int, nargs="+", default=[2, 6])
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
        args.trees, args.hidden = 5, 16
    for k in ("rows", "features", "docs", "repeats", "workers", "rounds", "max_iter", "trees",
              "hidden", "executors", "executor_memory_mb"):
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
    spark = spark_ex = None
    runs: dict[tuple[str, str], list[dict[str, Any]]] = {}
    try:
        if "spark" in args.engines:
            import _spark_engine as S

            spark, spark_ex = S.start_spark(args.master, args.executors, args.executor_memory_mb)
        if client is not None:
            n_workers = len(client.scheduler_info()["workers"])
        for rep in range(args.repeats):
            for model in args.models:
                for engine in args.engines:
                    if model not in ENGINE_MODELS[engine]:
                        continue
                    r = fresh_run(model, engine, args, spark if engine == "spark" else client)
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
        if spark_ex is not None:
            spark_ex.close()
    scale_table = scale_raw = None
    if args.scaling:
        scale_table, scale_raw = scaling(args)
        notes_scaling = ["Scaling table: logistic regression, one run per cell, each cluster "
                         "size a fresh embedded cluster that first runs one untimed fit (the "
                         "JVMs' start-up and JIT warm-up), so the cells compare warm clusters."]
    else:
        notes_scaling = []
    where = (f"a Dask scheduler at {args.scheduler} ({n_workers} workers)" if args.scheduler
             else f"a LocalCluster on this host: {args.workers} worker processes x "
                  f"{args.threads_per_worker} thread(s)")
    notes = [
        ("Dask: not run (--engines). " if "dask" not in args.engines else
         f"Cluster: {where}. ") + ("" if args.scheduler or "dask" not in args.engines else
                                 "One host: the cluster shares this machine's cores with the "
                                 "local runs' machine, so this measures Dask's overhead and "
                                 "memory per process, not a cluster's scaling."),
        f"Data: generated, not real: an Epsilon-shaped table of {args.rows:,} training rows x "
        f"{args.features:,} dense features (+{max(1, args.rows // 5):,} test rows) and a "
        f"generated Spanish-review-like corpus (ecopt.data.reviews; not RestMex) of "
        f"{args.docs:,} reviews (+{max(1, args.docs // 5):,} test), label: positive "
        "(polarity 4-5) or not, 5% of labels flipped; tokens: lower-cased runs of letters, "
        "accents kept, the same rule on every engine; hashed to 2^14 features; identical "
        "rows on both engines.",
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
    ] + notes_scaling + (["--quick: a smoke run, not a result."] if args.quick else [])
    if "spark" in args.engines:
        notes.insert(1, (f"Spark: a real master at {args.master}; only this host's processes are "
                         "measured (the driver), not the remote executors'."
                         if args.master else
                         f"Spark: an embedded standalone cluster on this host, local-cluster["
                         f"{args.executors},1,{args.executor_memory_mb}] (a master, workers and "
                         f"{args.executors} executor JVMs, 1 core each, started once; their JVMs "
                         "stay up between runs as a Spark application's do), MLlib models; "
                         f"{args.partitions or 2 * args.executors} partitions per DataFrame. CPU "
                         "s: this process and every process below it (driver JVM, executor JVMs, "
                         "their Python workers); peak memory: the summed peaks of those JVMs and "
                         "this process (psutil, 0.2 s)."))
        notes.insert(2, "Models on Spark (MLlib) against local: LogisticRegression / LinearSVC "
                        "(L2 1/(C n), --max-iter) vs scikit-learn's; RandomForestClassifier "
                        f"({args.trees} trees, depth {args.depth}) vs scikit-learn's; GBTClassifier "
                        f"({args.rounds} rounds) vs XGBoost hist; MultilayerPerceptronClassifier "
                        f"(one hidden layer of {args.hidden}, L-BFGS) vs the same network in "
                        "torch; text_tfidf: RegexTokenizer/HashingTF(2^14)/IDF/Normalizer(L2) + "
                        "LogisticRegression (unstandardised) vs scikit-learn's "
                        "HashingVectorizer/TfidfTransformer + LogisticRegression: the same "
                        "tokens, different hash functions (different collisions) and IDF "
                        "(scikit-learn adds 1 to every idf). 2 cores host everything here: the cluster's "
                        "executors compete with each other and with the driver for them.")
    tables = {"training": summarise(runs, "ESTIMATED")}
    if "spark" in args.engines:
        tables["jvm_memory"] = jvm_table(runs)
    if scale_table is not None:
        tables["scaling"] = scale_table
    facts = {"wall_s": time.monotonic() - t0,
             "runs": {f"{m}/{e}": v for (m, e), v in runs.items()},
             "scaling": scale_raw}
    for d in record_dirs(args.out, "cluster_training", args.record):
        write_run(d, script="experiments/cluster_training.py",
                  command=command_line("experiments/cluster_training.py", argv), tables=tables,
                  energy=estimated_energy(
                      "CPU seconds of this process and, on the cluster, of every worker and the "
                      "scheduler (psutil), plus the mean memory of the run", meter="estimate"),
                  title="Local vs cluster training", notes=notes, facts=facts,
                  extra_libraries=["dask-ml", "xgboost", "psutil", "pyspark"], git=sha)
    print((Path(args.out) / "summary.md").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
