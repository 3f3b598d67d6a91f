"""Table schemas and the tensors every dataframe backend must produce.

One preprocessing contract, the same for pandas, polars and dask:

1. **read** the file (CSV with a header, Parquet, or MovieLens ``::`` format)
   and check that every schema column is there;
2. **impute**: rows whose target is missing are dropped; a missing numeric
   value becomes the column's mean over its non-missing values; a missing
   categorical value becomes ``"missing"`` (string columns) or ``-1`` (integer
   columns);
3. **encode** categoricals: ``onehot`` columns become one float column per
   category, ``ordinal`` columns (and a classification target) become int64
   codes, both in sorted category order;
4. **normalise** numerics: ``(x - mean) / std`` with the population standard
   deviation (``ddof=0``) of the imputed column (a constant column gets std 1);
5. **to tensors**: features ``(n, d)`` float32 = normalised numerics then one-hot
   blocks, codes ``(n, k)`` int64, target ``(n,)`` float32 (regression) or
   int64 (classification), plus pass-through columns as float64 arrays.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["TableSchema", "TensorTable", "INSURANCE", "INSURANCE_CLASSIFICATION", "MOVIELENS",
           "MISSING_CATEGORY"]

#: What a missing string category is imputed with.
MISSING_CATEGORY = "missing"


@dataclass(frozen=True)
class TableSchema:
    """Which columns a table has and what the pipeline does with each.

    Args:
        name: Dataset name used in messages (``"insurance"``).
        columns: Every column the file must hold, in file order (used as the
            header of header-less formats such as ``ratings.dat``).
        numeric: Columns imputed with their mean and z-normalised.
        onehot: Categorical columns one-hot encoded into the features.
        ordinal: Categorical columns encoded as int64 codes (embeddings).
        target: The label column.
        task: ``"regression"`` (float target) or ``"classification"``
            (int64 codes of the sorted target categories).
        passthrough: Columns handed through untouched as float64 arrays
            (e.g. timestamps for a leave-last-out split).
        file_format: ``"csv"`` (header, comma), ``"parquet"`` or
            ``"movielens"`` (no header, ``::`` separated).

    Raises:
        ValueError: when a role names a column not in ``columns`` or a column
            has two roles.
    """

    name: str
    columns: tuple[str, ...]
    numeric: tuple[str, ...] = ()
    onehot: tuple[str, ...] = ()
    ordinal: tuple[str, ...] = ()
    target: str = ""
    task: str = "regression"
    passthrough: tuple[str, ...] = ()
    file_format: str = "csv"

    def __post_init__(self) -> None:
        if self.task not in ("regression", "classification"):
            raise ValueError(f"task must be 'regression' or 'classification', got {self.task!r}")
        if self.file_format not in ("csv", "parquet", "movielens"):
            raise ValueError(
                f"file_format must be 'csv', 'parquet' or 'movielens', got {self.file_format!r}")
        roles = [*self.numeric, *self.onehot, *self.ordinal, *self.passthrough, self.target]
        unknown = [c for c in roles if c not in self.columns]
        if unknown:
            raise ValueError(f"schema {self.name!r}: columns {unknown} are not in {list(self.columns)}")
        dup = sorted({c for c in roles if roles.count(c) > 1})
        if dup:
            raise ValueError(f"schema {self.name!r}: columns {dup} have more than one role")

    @property
    def used(self) -> tuple[str, ...]:
        """Columns the pipeline reads, in schema order."""
        roles = {*self.numeric, *self.onehot, *self.ordinal, *self.passthrough, self.target}
        return tuple(c for c in self.columns if c in roles)

    @property
    def categorical(self) -> tuple[str, ...]:
        """One-hot and ordinal columns."""
        return (*self.onehot, *self.ordinal)

    def with_task(self, target: str, task: str, numeric: tuple[str, ...] | None = None,
                  onehot: tuple[str, ...] | None = None) -> TableSchema:
        """A copy with another target (e.g. classify ``smoker`` instead of regressing ``charges``)."""
        return TableSchema(self.name, self.columns,
                           self.numeric if numeric is None else numeric,
                           self.onehot if onehot is None else onehot,
                           self.ordinal, target, task, self.passthrough, self.file_format)


#: Medical-cost table (Kaggle "insurance.csv"): regress ``charges``.
INSURANCE = TableSchema(
    name="insurance",
    columns=("age", "sex", "bmi", "children", "smoker", "region", "charges"),
    numeric=("age", "bmi", "children"),
    onehot=("sex", "smoker", "region"),
    target="charges",
    task="regression",
)

#: The same table, classifying ``smoker`` from the other columns.
INSURANCE_CLASSIFICATION = INSURANCE.with_task(
    "smoker", "classification", numeric=("age", "bmi", "children", "charges"),
    onehot=("sex", "region"))

#: MovieLens-1M ``ratings.dat``: user and movie ids as embedding codes.
MOVIELENS = TableSchema(
    name="movielens",
    columns=("UserID", "MovieID", "Rating", "Timestamp"),
    ordinal=("UserID", "MovieID"),
    target="Rating",
    task="regression",
    passthrough=("Timestamp",),
    file_format="movielens",
)


@dataclass
class TensorTable:
    """The pipeline's output (shapes the BoTorch way).

    Attributes:
        features: ``n x d`` float32 tensor (normalised numerics, then one-hot blocks).
        codes: ``n x k`` int64 tensor of ordinal codes (``k`` may be 0).
        target: ``n`` tensor, float32 (regression) or int64 (classification).
        feature_names: ``d`` names (``"bmi"``, ``"region=northeast"``...).
        code_names: ``k`` ordinal column names.
        cardinalities: Number of categories of each ordinal column.
        target_classes: Sorted target categories (classification), else empty.
        passthrough: Column -> float64 numpy array of length ``n``.
        stats: Imputation and normalisation constants (means, stds, categories).
    """

    features: Any
    codes: Any
    target: Any
    feature_names: list[str]
    code_names: list[str] = field(default_factory=list)
    cardinalities: list[int] = field(default_factory=list)
    target_classes: list[Any] = field(default_factory=list)
    passthrough: dict[str, np.ndarray] = field(default_factory=dict)
    stats: dict[str, Any] = field(default_factory=dict)

    def __len__(self) -> int:
        return int(self.target.shape[0])

    @property
    def nbytes(self) -> int:
        """Bytes held by the tensors (what an in-memory cache costs)."""
        total = sum(int(t.element_size() * t.nelement())
                    for t in (self.features, self.codes, self.target))
        return total + sum(int(a.nbytes) for a in self.passthrough.values())


def build_tensor_table(arrays: Mapping[str, Any], schema: TableSchema, feature_names: list[str],
                       stats: dict[str, Any]) -> TensorTable:
    """Wrap backend numpy arrays as tensors without copying where dtypes allow.

    Read-only arrays (views of polars' Arrow buffers) are shared, not copied:
    do not modify such tensors in place (``t.target.sub_(...)``); use
    out-of-place operations or ``.clone()`` first.

    Args:
        arrays: ``features`` (n x d float), ``codes`` (n x k int), ``target``
            (n) and each pass-through column.
        schema: The schema that produced them.
        feature_names: Names of the feature columns.
        stats: Constants the backend computed.
    """
    import torch

    def as_tensor(a: Any, dtype: Any) -> Any:
        a = np.asarray(a)
        want = np.float32 if dtype is torch.float32 else np.int64
        if a.dtype != want:
            a = a.astype(want)
        if not a.flags.writeable:
            # A read-only view of an Arrow buffer (polars): share it rather than copy.
            # torch warns that it cannot mark the tensor read-only; the pipeline never
            # writes into these tensors in place.
            import warnings

            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", message=".*not writable.*")
                return torch.from_numpy(a)
        return torch.from_numpy(a)

    n = len(arrays["target"])
    feats = arrays.get("features")
    codes = arrays.get("codes")
    features = as_tensor(feats if feats is not None else np.zeros((n, 0)), torch.float32)
    codes_t = as_tensor(codes if codes is not None else np.zeros((n, 0)), torch.int64)
    target = as_tensor(arrays["target"],
                       torch.float32 if schema.task == "regression" else torch.int64)
    cats = stats.get("categories", {})
    return TensorTable(
        features=features, codes=codes_t, target=target, feature_names=list(feature_names),
        code_names=list(schema.ordinal),
        cardinalities=[len(cats[c]) for c in schema.ordinal],
        target_classes=list(cats.get(schema.target, [])) if schema.task == "classification" else [],
        passthrough={c: np.asarray(arrays[c], dtype=np.float64) for c in schema.passthrough},
        stats=stats,
    )
