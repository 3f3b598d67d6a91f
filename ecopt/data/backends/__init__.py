"""Dataframe backends: pandas, polars, dask (one file each, one probe, one factory line).

Example:
    >>> from ecopt.data.backends import get_backend
    >>> backend = get_backend("polars")
"""

from __future__ import annotations

from typing import Any

from ecopt.data.backends.base import Backend
from ecopt.errors import BackendUnavailableError

__all__ = ["Backend", "BackendUnavailableError", "BACKEND_NAMES", "get_backend",
           "available_backends"]

#: Backend names a search space can hold.
BACKEND_NAMES = ("pandas", "polars", "dask")

_CLASSES = {
    "pandas": ("ecopt.data.backends.pandas_backend", "PandasBackend", "pandas"),
    "polars": ("ecopt.data.backends.polars_backend", "PolarsBackend", "polars"),
    "dask": ("ecopt.data.backends.dask_backend", "DaskBackend", "dask[dataframe]"),
}


def get_backend(spec: str | Backend, **options: Any) -> Backend:
    """A backend by name (``"pandas"``, ``"polars"``, ``"dask"``) or pass one through.

    Args:
        spec: Backend name or instance.
        **options: Constructor options (``npartitions=`` for dask).

    Raises:
        ValueError: for an unknown name.
        BackendUnavailableError: when its library does not import; the message
            says what to install.
    """
    if isinstance(spec, Backend):
        return spec
    if spec not in _CLASSES:
        raise ValueError(f"unknown dataframe backend {spec!r}; expected one of {list(BACKEND_NAMES)}")
    import importlib

    modname, clsname, pip_name = _CLASSES[spec]
    cls = getattr(importlib.import_module(modname), clsname)
    if not cls.is_available():
        try:
            importlib.import_module(cls.module)
            why = ""
        except Exception as exc:  # noqa: BLE001
            why = f" ({type(exc).__name__}: {exc})"
        raise BackendUnavailableError(
            f"dataframe backend {spec!r} is not installed: import {cls.module} failed{why}; "
            f"install it with `pip install {pip_name}` (or `pip install 'ecopt[dataframes]'`), "
            "or choose backend='pandas'")
    return cls(**options)  # type: ignore[no-any-return]


def available_backends() -> list[str]:
    """Names of the backends whose library imports on this machine."""
    out = []
    for name in BACKEND_NAMES:
        try:
            get_backend(name)
        except BackendUnavailableError:
            continue
        out.append(name)
    return out
