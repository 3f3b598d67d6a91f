"""The Spark engine of ``experiments/cluster_training.py``: seed 002's MLlib models.

Seed 002 compared local scikit-learn/TensorFlow training with a 3-worker Spark
cluster running MLlib. This module is that cluster side:

* the cluster is started by :class:`ecopt.executors.SparkExecutor`: without
  ``master`` an embedded standalone cluster on this host
  (``local-cluster[executors, 1, memory]``: a real master, workers and one JVM
  per executor, bound to 127.0.0.1); with ``master="spark://HOST:7077"`` a real
  one (its executors need ecopt installed);
* data is generated where it is used: each partition of the Epsilon-shaped
  table or the Spanish-review-like corpus (:mod:`ecopt.data.reviews`) is built on an executor from the same
  ``(block, seed)`` as the local run's, so both sides train on identical rows;
* models: MLlib ``LogisticRegression``, ``LinearSVC``,
  ``RandomForestClassifier``, ``GBTClassifier``, ``MultilayerPerceptronClassifier``,
  and ``RegexTokenizer`` / ``HashingTF`` / ``IDF`` / ``Normalizer`` + ``LogisticRegression``
  for text: the tokens are the local run's (lower-cased runs of letters, accents kept:
  ``ecopt.data.reviews.SPARK_TOKEN_PATTERN``), the TF-IDF rows are L2-normalised and the
  regression is unstandardised, as scikit-learn's ``TfidfTransformer`` +
  ``LogisticRegression`` are (the plain ``Tokenizer`` splits on white space only, so
  "excelente!" and "excelente" would be two words);
* measured (:class:`SparkMeter`): CPU seconds of this process and every process
  below it (the driver JVM, the embedded master/worker, every executor JVM and
  its Python workers), the peak resident memory of the driver JVM and of each
  executor JVM (sampled every 0.2 s), and energy ESTIMATED from them with the
  estimate meter's constants. With a remote master only this host's processes
  are seen (the driver); the summary says so.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from typing import Any

import numpy as np

__all__ = ["SPARK_MODELS", "SparkMeter", "start_spark", "jvm_processes", "table_spark",
           "text_spark", "train_spark"]

#: Models the Spark engine trains (``text_tfidf``: the seed's TF-IDF text classifier).
SPARK_MODELS = ("logistic_regression", "linear_svm", "random_forest", "gradient_boosting",
                "mlp", "text_tfidf")
TEXT_FEATURES = 2**14


def start_spark(master: str | None, executors: int, memory_mb: int) -> tuple[Any, Any]:
    """``(SparkSession, SparkExecutor holding its context)``; close the executor to stop it.

    Raises:
        ecopt.errors.SparkUnavailableError: no Java 17+, or the master cannot be reached.
    """
    from pyspark.sql import SparkSession

    from ecopt.executors import SparkExecutor

    ex = SparkExecutor(master=master, n_executors=None if master else executors,
                       memory_per_executor_mb=memory_mb, app_name="ecopt-cluster-training",
                       conf={"spark.sql.shuffle.partitions": str(max(2, executors * 2))})
    return SparkSession(ex.context), ex


def jvm_processes() -> dict[str, Any]:
    """This host's Spark JVMs below this process: ``{"driver": p, "executor <pid>": p, ...}``."""
    import psutil

    out: dict[str, Any] = {}
    for p in psutil.Process().children(recursive=True):
        try:
            cmd = " ".join(p.cmdline())
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
        if "CoarseGrainedExecutorBackend" in cmd:
            out[f"executor {p.pid}"] = p
        elif "java" in p.name() and "SparkSubmit" in cmd:
            out["driver"] = p
    return out


def _tree_cpu_s() -> float:
    """CPU seconds of this process and every live process below it."""
    import psutil

    me = psutil.Process()
    total = 0.0
    for p in [me, *me.children(recursive=True)]:
        try:
            t = p.cpu_times()
            total += t.user + t.system
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return total


class SparkMeter:
    """CPU seconds and peak memory of the Spark processes on this host; energy ESTIMATED."""

    @contextlib.contextmanager
    def window(self) -> Iterator[dict[str, Any]]:
        """Measure the block: ``wall_s``, ``cpu_s``, ``peak_mb`` (driver process + JVMs),
        ``jvm_peak_mb`` (per JVM), ``energy_j`` (ESTIMATED)."""
        import psutil

        from ecopt.meters.estimate import DEFAULT_CPU_W_PER_CORE, DEFAULT_RAM_W_PER_GB

        out: dict[str, Any] = {}
        jvms = jvm_processes()
        peaks: dict[str, float] = {k: 0.0 for k in jvms}
        py_peak = [0.0]
        samples: list[float] = []
        stop = threading.Event()
        me = psutil.Process()

        def sample() -> None:
            while True:
                total = 0.0
                for k, p in jvms.items():
                    try:
                        rss = float(p.memory_info().rss)
                    except psutil.NoSuchProcess:
                        continue
                    peaks[k] = max(peaks[k], rss)
                    total += rss
                rss = float(me.memory_info().rss)
                py_peak[0] = max(py_peak[0], rss)
                samples.append(total + rss)
                if stop.wait(0.2):
                    return

        cpu0, t0 = _tree_cpu_s(), time.perf_counter()
        th = threading.Thread(target=sample, daemon=True)
        th.start()
        try:
            yield out
        finally:
            stop.set()
            th.join()
        out["wall_s"] = time.perf_counter() - t0
        out["cpu_s"] = _tree_cpu_s() - cpu0
        out["jvm_peak_mb"] = {k: v / 1e6 for k, v in sorted(peaks.items())}
        out["peak_mb"] = (sum(peaks.values()) + py_peak[0]) / 1e6
        mean_gb = float(np.mean(samples)) / 1e9 if samples else 0.0
        out["energy_j"] = (out["cpu_s"] * DEFAULT_CPU_W_PER_CORE
                           + mean_gb * DEFAULT_RAM_W_PER_GB * out["wall_s"])


def _table_rows(block: int, rows: int, features: int, seed: int) -> list[Any]:
    from pyspark.ml.linalg import Vectors

    from ecopt.data.datasets import make_epsilon_block

    x, y = make_epsilon_block(block, rows, features, seed)
    return [(Vectors.dense(r.astype(float)), float(v)) for r, v in zip(x, y)]


def _text_rows(block: int, docs: int, seed: int) -> list[Any]:
    from ecopt.data.reviews import make_review_block

    d, y = make_review_block(block, docs, seed)[:2]
    return [(t, float(v)) for t, v in zip(d, y)]


def table_spark(spark: Any, sizes: list[int], features: int, seed: int, first_block: int,
                partitions: int) -> Any:
    """The Epsilon-shaped table as a cached DataFrame ``(features, label)``, built on executors
    (block ``first_block + i`` holds ``sizes[i]`` rows, as the local run's)."""
    rdd = spark.sparkContext.parallelize(list(enumerate(sizes)), len(sizes)).flatMap(
        lambda b: _table_rows(first_block + b[0], b[1], features, seed))
    df = spark.createDataFrame(rdd, ["features", "label"]).repartition(partitions).cache()
    df.count()
    return df


def text_spark(spark: Any, sizes: list[int], seed: int, first_block: int,
               partitions: int) -> Any:
    """The generated Spanish-review-like corpus (:mod:`ecopt.data.reviews`) as a cached
    DataFrame ``(text, label)``, built on executors."""
    rdd = spark.sparkContext.parallelize(list(enumerate(sizes)), len(sizes)).flatMap(
        lambda b: _text_rows(first_block + b[0], b[1], seed))
    df = spark.createDataFrame(rdd, ["text", "label"]).repartition(partitions).cache()
    df.count()
    return df


def train_spark(model: str, df: Any, n_rows: int, features: int, args: Any) -> Any:
    """A fitted MLlib model (or pipeline) of ``model`` on ``df``.

    The settings mirror the local counterparts': L2 strength ``1 / (C n)`` (scikit-learn's
    ``C`` per sample), ``--max-iter`` iterations, ``--rounds`` boosting rounds and
    ``--trees`` trees of depth ``--depth``, an MLP with one hidden layer of ``--hidden``.
    """
    from pyspark.ml import Pipeline
    from pyspark.ml.classification import (
        GBTClassifier,
        LinearSVC,
        LogisticRegression,
        MultilayerPerceptronClassifier,
        RandomForestClassifier,
    )
    from pyspark.ml.feature import IDF, HashingTF, Normalizer, RegexTokenizer

    from ecopt.data.reviews import SPARK_TOKEN_PATTERN

    reg = 1.0 / (args.C * max(n_rows, 1))
    if model == "logistic_regression":
        est: Any = LogisticRegression(maxIter=args.max_iter, regParam=reg, elasticNetParam=0.0)
    elif model == "linear_svm":
        est = LinearSVC(maxIter=args.max_iter, regParam=reg)
    elif model == "random_forest":
        est = RandomForestClassifier(numTrees=args.trees, maxDepth=args.depth, seed=args.seed)
    elif model == "gradient_boosting":
        est = GBTClassifier(maxIter=args.rounds, maxDepth=args.depth, stepSize=0.3,
                            seed=args.seed)
    elif model == "mlp":
        est = MultilayerPerceptronClassifier(layers=[features, args.hidden, 2],
                                             maxIter=args.max_iter, seed=args.seed)
    elif model == "text_tfidf":
        est = Pipeline(stages=[RegexTokenizer(inputCol="text", outputCol="words",
                                              pattern=SPARK_TOKEN_PATTERN, gaps=False,
                                              toLowercase=True),
                               HashingTF(inputCol="words", outputCol="tf",
                                         numFeatures=TEXT_FEATURES),
                               IDF(inputCol="tf", outputCol="tfidf"),
                               Normalizer(inputCol="tfidf", outputCol="features", p=2.0),
                               LogisticRegression(maxIter=args.max_iter, regParam=reg,
                                                  standardization=False)])
    else:
        raise ValueError(f"model must be one of {SPARK_MODELS} on Spark, got {model!r}")
    return est.fit(df)


def predict_spark(fitted: Any, df: Any) -> tuple[np.ndarray, np.ndarray]:
    """``(predicted labels, true labels)`` of ``df``, collected on the driver."""
    rows = fitted.transform(df).select("prediction", "label").collect()
    return (np.array([r[0] for r in rows], dtype=float),
            np.array([r[1] for r in rows], dtype=float))
