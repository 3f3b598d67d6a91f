"""Where trials run: in-process (``"local"``), a local process pool (``"processes"``),
a Dask cluster (:class:`~ecopt.executors.dask.DaskExecutor`, ``"dask"``), Spark
(:class:`~ecopt.executors.spark.SparkExecutor`, ``"spark"``) or Ray
(:class:`~ecopt.executors.ray.RayExecutor`, ``"ray"``).

Dask, pyspark and ray are imported only when their executor is used.
"""

from __future__ import annotations

from typing import Any

from ecopt import registry
from ecopt.executors.base import TRIAL_TIMEOUT, WORKER_LOST, Executor, ExecutorLostError
from ecopt.executors.local import LocalExecutor
from ecopt.executors.overlap import overlapping_trials
from ecopt.executors.processes import ProcessExecutor

__all__ = [
    "Executor",
    "ExecutorLostError",
    "LocalExecutor",
    "ProcessExecutor",
    "DaskExecutor",
    "SparkExecutor",
    "RayExecutor",
    "get_executor",
    "overlapping_trials",
    "EXECUTOR_NAMES",
    "WORKER_LOST",
    "TRIAL_TIMEOUT",
]

#: Built-in names :func:`get_executor` understands (third-party ones come through
#: :mod:`ecopt.registry`'s entry points).
EXECUTOR_NAMES = tuple(registry.BUILTIN["executors"])


def get_executor(spec: str | Executor = "local", **options: Any) -> Executor:
    """An executor from a name (:mod:`ecopt.registry`) or an instance.

    Args:
        spec: ``"local"`` (in-process, sequential), ``"processes"`` (a pool of
            local worker processes, one per core), ``"dask"`` (an embedded Dask
            ``LocalCluster`` on 127.0.0.1), ``"spark"`` (an embedded Spark
            ``local-cluster`` on 127.0.0.1), ``"ray"`` (tasks on the Ray initialised
            in this process, else a local Ray), a name a package registered, or an
            :class:`Executor`.
        **options: Passed to the executor's constructor (e.g. ``n_workers``,
            ``trial_timeout_s``).

    Raises:
        ValueError: for an unknown name.
    """
    return registry.create("executors", spec, base=Executor, **options)


def __getattr__(name: str) -> Any:
    if name == "DaskExecutor":  # imports dask: only on first use
        from ecopt.executors.dask import DaskExecutor

        return DaskExecutor
    if name == "SparkExecutor":  # imports pyspark: only on first use
        from ecopt.executors.spark import SparkExecutor

        return SparkExecutor
    if name == "RayExecutor":  # imports ray: only on first use
        from ecopt.executors.ray import RayExecutor

        return RayExecutor
    raise AttributeError(f"module 'ecopt.executors' has no attribute {name!r}")
