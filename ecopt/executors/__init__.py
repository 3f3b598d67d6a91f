"""Where trials run: in-process (``"local"``), and more in later executors."""

from __future__ import annotations

from typing import Any

from ecopt.executors.base import Executor
from ecopt.executors.local import LocalExecutor

__all__ = ["Executor", "LocalExecutor", "get_executor", "EXECUTOR_NAMES"]

EXECUTOR_NAMES = ("local",)


def get_executor(spec: str | Executor = "local", **options: Any) -> Executor:
    """An executor from a name or an instance.

    Raises:
        ValueError: for an unknown name.
    """
    if isinstance(spec, Executor):
        return spec
    if spec == "local":
        return LocalExecutor(**options)
    raise ValueError(f"unknown executor {spec!r}; expected one of {list(EXECUTOR_NAMES)} "
                     "or an Executor instance")
