"""Where trials run: in-process (``"local"``), a local process pool (``"processes"``),
or a Dask cluster (:class:`~ecopt.executors.dask.DaskExecutor`, ``"dask"``).

Dask is imported only when the Dask executor is used.
"""

from __future__ import annotations

from typing import Any

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
    "get_executor",
    "overlapping_trials",
    "EXECUTOR_NAMES",
    "WORKER_LOST",
    "TRIAL_TIMEOUT",
]

#: Names :func:`get_executor` understands.
EXECUTOR_NAMES = ("local", "processes", "dask")


def get_executor(spec: str | Executor = "local", **options: Any) -> Executor:
    """An executor from a name or an instance.

    Args:
        spec: ``"local"`` (in-process, sequential), ``"processes"`` (a pool of
            local worker processes, one per core), ``"dask"`` (an embedded Dask
            ``LocalCluster`` on 127.0.0.1) or an :class:`Executor`.
        **options: Passed to the executor's constructor (e.g. ``n_workers``,
            ``trial_timeout_s``).

    Raises:
        ValueError: for an unknown name.
    """
    if isinstance(spec, Executor):
        return spec
    if spec == "local":
        return LocalExecutor(**options)
    if spec == "processes":
        return ProcessExecutor(**options)
    if spec == "dask":
        from ecopt.executors.dask import DaskExecutor

        return DaskExecutor(**options)
    raise ValueError(f"unknown executor {spec!r}; expected one of {list(EXECUTOR_NAMES)} "
                     "or an Executor instance")


def __getattr__(name: str) -> Any:
    if name == "DaskExecutor":  # imports dask: only on first use
        from ecopt.executors.dask import DaskExecutor

        return DaskExecutor
    raise AttributeError(f"module 'ecopt.executors' has no attribute {name!r}")
