"""The backend contract: one preprocessing pipeline, written natively per dataframe library.

A backend turns a file into the arrays of :class:`~ecopt.data.schema.TensorTable`
through five stages (read, impute, encode, normalise, to_arrays), each a method,
so the profiler can time and meter them one by one. The rules every backend
follows are in :mod:`ecopt.data.schema`; the shared checks (missing file, wrong
separator, missing column) live here so every backend fails with the same message.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from ecopt.data.schema import MISSING_CATEGORY, TableSchema

__all__ = ["Backend", "check_file", "check_columns", "file_format", "clean_category",
           "categorical_fill", "feature_names", "FITTED", "is_fitted", "check_known_codes"]

#: Key of a ``stats`` dict whose constants were fitted before (on a training split): the
#: stages then apply them and compute none (no refit on held-out rows).
FITTED = "fitted"

_OTHER_SEPARATORS = (";", "\t", "|", ":")


def file_format(path: str | Path, schema: TableSchema) -> str:
    """``parquet`` for ``.parquet``/``.pq`` files, else the schema's text format."""
    if Path(path).suffix.lower() in (".parquet", ".pq"):
        return "parquet"
    return "csv" if schema.file_format == "parquet" else schema.file_format


def check_file(path: str | Path, schema: TableSchema) -> Path:
    """Check that ``path`` is a readable file in the schema's format.

    Raises:
        FileNotFoundError: naming the path when it does not exist or is a directory.
        ValueError: when the header (CSV) or first line (MovieLens) shows another
            separator than the one the format uses.
    """
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"{schema.name} data file not found: {str(p)!r}")
    if not p.is_file():
        raise FileNotFoundError(f"{schema.name} data path {str(p)!r} is not a file")
    fmt = file_format(p, schema)
    if fmt == "parquet":
        return p
    with p.open("r", encoding="utf-8", errors="replace") as f:
        first = f.readline().rstrip("\r\n")
    if not first:
        raise ValueError(f"{str(p)!r} is empty; a {schema.name} file needs at least one line")
    if fmt == "movielens":
        if first.count("::") != len(schema.columns) - 1:
            seps = [s for s in (",", ";", "\t", "|") if first.count(s) == len(schema.columns) - 1]
            hint = f" (it looks {seps[0]!r}-separated)" if seps else ""
            raise ValueError(
                f"{str(p)!r}: line 1 {first[:80]!r} does not have {len(schema.columns)} "
                f"'::'-separated fields {list(schema.columns)}{hint}; MovieLens ratings.dat "
                "lines read UserID::MovieID::Rating::Timestamp")
        return p
    header = [h.strip().strip('"') for h in first.split(",")]
    if len(header) == 1 and len(schema.columns) > 1:
        for sep in _OTHER_SEPARATORS:
            if len(first.split(sep)) >= len(schema.used):
                raise ValueError(
                    f"{str(p)!r}: the header {first[:80]!r} is {sep!r}-separated; ecopt reads "
                    f"{schema.name} CSV files with ',' separators (re-save the file with commas "
                    "or convert it to Parquet)")
    return p


def check_columns(found: list[str], schema: TableSchema, path: str | Path) -> None:
    """Raise ``ValueError`` naming the first schema column missing from ``found``."""
    missing = [c for c in schema.used if c not in found]
    if missing:
        raise ValueError(
            f"{str(path)!r}: column {missing[0]!r} required by the {schema.name} schema is "
            f"missing (missing: {missing}; found: {list(found)})")


def clean_category(v: Any) -> Any:
    """A category as a plain Python value (``3.0`` -> ``3``, numpy scalars -> Python)."""
    if hasattr(v, "item") and not isinstance(v, str):
        v = v.item()
    if isinstance(v, float) and math.isfinite(v) and v.is_integer():
        return int(v)
    return v


def categorical_fill(is_numeric: bool) -> Any:
    """What a missing categorical value becomes: ``-1`` for numbers, ``"missing"`` for strings."""
    return -1 if is_numeric else MISSING_CATEGORY


def sorted_categories(values: Any) -> list[Any]:
    """Sorted plain-Python categories (what every backend's encoder uses)."""
    return sorted({clean_category(v) for v in values})


def feature_names(schema: TableSchema, categories: dict[str, list[Any]]) -> list[str]:
    """Numeric columns, then ``column=value`` for each one-hot category."""
    return [*schema.numeric, *(f"{c}={v}" for c in schema.onehot for v in categories[c])]


def is_fitted(stats: dict[str, Any]) -> bool:
    """Whether ``stats`` holds constants fitted earlier, to be applied as they are."""
    return bool(stats.get(FITTED))


def check_known_codes(codes: np.ndarray, column: str, values: Any, categories: list[Any]) -> None:
    """Raise ``ValueError`` when a category code is ``-1`` (a value the encoder was not fitted on).

    Args:
        codes: Positions of ``values`` in ``categories``, ``-1`` where absent.
        column: Column name, for the message.
        values: The encoded values (anything ``numpy.asarray`` takes), or None
            where the backend no longer holds them (the message then counts them).
        categories: The fitted categories.
    """
    bad = np.asarray(codes) < 0
    if bad.any():
        if values is not None:
            unknown = {clean_category(v) for v in np.asarray(values, dtype=object)[bad]}
            what = f"values {sorted(unknown, key=str)[:10]}"
        else:
            what = f"{int(bad.sum())} values"
        raise ValueError(
            f"column {column!r}: {what} were not among the categories the encoder was fitted "
            f"on ({categories[:10]}{'...' if len(categories) > 10 else ''}); an ordinal code or "
            "class must be known at fit time (fit on rows that hold it)")


def safe_std(std: float) -> float:
    """Population std of a column, 1.0 when it is constant (no division by zero)."""
    return float(std) if std is not None and np.isfinite(std) and std > 0 else 1.0


class Backend(ABC):
    """One dataframe library's implementation of the preprocessing pipeline.

    Stages pass a backend-native frame along (a pandas ``DataFrame``, a polars
    ``LazyFrame``, a dask ``DataFrame``) and a ``stats`` dict that collects the
    constants each stage computed.

    Example:
        >>> from ecopt.data.backends import get_backend
        >>> from ecopt.data.schema import INSURANCE
        >>> table = get_backend("polars").run("insurance.csv", INSURANCE)
        >>> table.features.shape
        torch.Size([1000, 11])
    """

    #: Name used in search spaces (``"pandas"``, ``"polars"``, ``"dask"``).
    name: str = "backend"
    #: Import name of the library this backend needs.
    module: str = ""
    #: Stage names in order.
    STAGES: tuple[str, ...] = ("read", "impute", "encode", "normalise", "to_tensor")

    @classmethod
    def is_available(cls) -> bool:
        """Whether the library imports (never raises)."""
        import importlib

        try:
            importlib.import_module(cls.module)
        except Exception:  # noqa: BLE001 - a broken install counts as missing
            return False
        return True

    @abstractmethod
    def read(self, path: str | Path, schema: TableSchema) -> Any:
        """Read the file (lazily where the library can) and check its columns."""

    @abstractmethod
    def impute(self, frame: Any, schema: TableSchema, stats: dict[str, Any]) -> Any:
        """Drop rows without a target, fill numeric means and categorical sentinels."""

    @abstractmethod
    def encode(self, frame: Any, schema: TableSchema, stats: dict[str, Any]) -> Any:
        """One-hot and ordinal-encode categoricals in sorted category order."""

    @abstractmethod
    def normalise(self, frame: Any, schema: TableSchema, stats: dict[str, Any]) -> Any:
        """z-normalise numerics with the population std."""

    @abstractmethod
    def to_arrays(self, frame: Any, schema: TableSchema, stats: dict[str, Any]
                  ) -> dict[str, np.ndarray]:
        """Materialise ``features``, ``codes``, ``target`` and pass-through columns."""

    def materialise(self, frame: Any) -> Any:
        """Compute a lazy frame now (used when tracing stage by stage)."""
        return frame

    @abstractmethod
    def labelled_rows(self, frame: Any, schema: TableSchema) -> np.ndarray:
        """Positions (file order, int64) of the rows with a target (those impute keeps)."""

    @abstractmethod
    def take(self, frame: Any, positions: np.ndarray) -> Any:
        """The rows at ``positions`` (sorted, file order) of a frame from :meth:`read`."""

    @abstractmethod
    def batches(self, frame: Any, batch_size: int) -> Iterator[Any]:
        """Slice a preprocessed frame into consecutive batches, in row order.

        Each batch is a frame :meth:`to_arrays` takes, built by the library:
        pandas ``iloc`` and polars ``slice`` give ``batch_size`` rows (the last
        fewer); dask repartitions into ``ceil(n / batch_size)`` partitions of
        about that many rows.
        """

    def describe(self) -> dict[str, Any]:
        """Settings recorded with results."""
        return {"backend": self.name}

    def run(self, path: str | Path, schema: TableSchema) -> Any:
        """All stages at once (lazy backends fuse them); returns a ``TensorTable``."""
        from ecopt.data.schema import build_tensor_table

        stats: dict[str, Any] = {}
        frame = self.read(path, schema)
        frame = self.impute(frame, schema, stats)
        frame = self.encode(frame, schema, stats)
        frame = self.normalise(frame, schema, stats)
        arrays = self.to_arrays(frame, schema, stats)
        return build_tensor_table(arrays, schema, feature_names(schema, stats["categories"]), stats)

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"
