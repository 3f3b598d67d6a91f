"""The polars backend: lazy frames, one plan, zero-copy hand-off to torch where it can.

Stages add expressions to a ``LazyFrame``; each constant a stage needs (means,
categories, stds) comes from one aggregate ``select`` collected on its own, and
the full plan is collected once in :meth:`to_arrays`. Single numeric columns
without nulls leave polars through Arrow buffers without a copy
(``Series.to_numpy``); the feature matrix is one copy from columns to rows,
which any row-major tensor needs.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from ecopt.data.backends.base import (
    Backend,
    categorical_fill,
    check_columns,
    check_file,
    check_known_codes,
    file_format,
    is_fitted,
    safe_std,
    sorted_categories,
)
from ecopt.data.schema import TableSchema

__all__ = ["PolarsBackend"]

# The strings pandas reads as missing by default, so both backends see the same nulls.
_NULLS = ["NA", "N/A", "NaN", "nan", "NULL", "null", "None", "#N/A", "n/a", "<NA>"]


class PolarsBackend(Backend):
    """Lazy polars. MovieLens ``::`` lines are scanned with the one-byte separator
    ``:``, which yields empty columns between the fields (polars takes only
    one-byte separators); those are dropped."""

    name = "polars"
    module = "polars"

    def read(self, path: str | Path, schema: TableSchema) -> Any:
        import polars as pl

        p = check_file(path, schema)
        fmt = file_format(p, schema)
        if fmt == "parquet":
            lf = pl.scan_parquet(p)
        elif fmt == "movielens":
            n = len(schema.columns)
            names = [schema.columns[i // 2] if i % 2 == 0 else f"_sep{i}" for i in range(2 * n - 1)]
            # Ids and times are integers; the target may hold half stars ("2.5", as the
            # real MovieLens samples do), so it is read as a float.
            lf = pl.scan_csv(p, separator=":", has_header=False, new_columns=names,
                             schema_overrides={c: pl.Float64 if c == schema.target else pl.Int64
                                               for c in schema.columns})
        else:
            lf = pl.scan_csv(p, null_values=_NULLS, infer_schema_length=10_000)
        found = lf.collect_schema().names()
        check_columns(found, schema, p)
        return lf.select(list(schema.used))

    def impute(self, frame: Any, schema: TableSchema, stats: dict[str, Any]) -> Any:
        import polars as pl

        lf = frame.filter(pl.col(schema.target).is_not_null())
        numeric = list(schema.numeric) + ([schema.target] if schema.task == "regression" else [])
        lf = lf.with_columns([pl.col(c).cast(pl.Float64) for c in numeric])
        means: dict[str, float] = {}
        if is_fitted(stats):
            means = dict(stats["impute_means"])
        elif schema.numeric:
            row = lf.select([pl.col(c).mean() for c in schema.numeric]).collect().row(0)
            means = {c: float(v) if v is not None else 0.0 for c, v in zip(schema.numeric, row)}
        stats["impute_means"] = means
        dtypes = lf.collect_schema()
        return lf.with_columns(
            [pl.col(c).fill_null(means[c]) for c in schema.numeric]
            + [pl.col(c).fill_null(pl.lit(categorical_fill(dtypes[c].is_numeric())))
               for c in schema.categorical])

    def encode(self, frame: Any, schema: TableSchema, stats: dict[str, Any]) -> Any:
        import polars as pl

        cat_cols = list(schema.categorical)
        if schema.task == "classification":
            cat_cols.append(schema.target)
        cats: dict[str, list[Any]] = {}
        if is_fitted(stats):
            cats = stats["categories"]
        elif cat_cols:
            row = frame.select([pl.col(c).unique().implode() for c in cat_cols]).collect().row(0)
            cats = {c: sorted_categories(v) for c, v in zip(cat_cols, row)}
        stats["categories"] = cats
        exprs = []
        for c in schema.onehot:
            exprs += [(pl.col(c) == v).cast(pl.Float64).alias(f"{c}={v}") for v in cats[c]]
        coded = [*schema.ordinal, *([schema.target] if schema.task == "classification" else [])]
        for c in coded:
            # -1 for a value outside the fitted categories (held-out rows): to_arrays says which.
            exprs.append(pl.col(c).replace_strict(cats[c], list(range(len(cats[c]))), default=-1,
                                                  return_dtype=pl.Int64).alias(c))
        return frame.with_columns(exprs).drop(list(schema.onehot))

    def normalise(self, frame: Any, schema: TableSchema, stats: dict[str, Any]) -> Any:
        import polars as pl

        cols = list(schema.numeric)
        if not cols:
            stats["means"], stats["stds"] = {}, {}
            return frame
        if is_fitted(stats):
            means, stds = stats["means"], stats["stds"]
            return frame.with_columns([((pl.col(c) - means[c]) / stds[c]).alias(c) for c in cols])
        row = frame.select([pl.col(c).mean().alias(f"m_{c}") for c in cols]
                           + [pl.col(c).std(ddof=0).alias(f"s_{c}") for c in cols]).collect().row(0)
        means = {c: float(row[i]) for i, c in enumerate(cols)}
        stds = {c: safe_std(row[len(cols) + i]) for i, c in enumerate(cols)}
        stats["means"], stats["stds"] = means, stds
        return frame.with_columns([((pl.col(c) - means[c]) / stds[c]).alias(c) for c in cols])

    def materialise(self, frame: Any) -> Any:
        return frame.collect().lazy()

    def to_arrays(self, frame: Any, schema: TableSchema, stats: dict[str, Any]
                  ) -> dict[str, np.ndarray]:
        import polars as pl

        feats = [*schema.numeric, *(f"{c}={v}" for c in schema.onehot
                                    for v in stats["categories"][c])]
        tdtype = pl.Float32 if schema.task == "regression" else pl.Int64
        df = frame.with_columns([pl.col(c).cast(pl.Float32) for c in feats]
                                + [pl.col(schema.target).cast(tdtype)]).collect()
        out: dict[str, np.ndarray] = {
            "features": df.select(feats).to_numpy() if feats else np.zeros((df.height, 0), np.float32),
            "codes": (df.select(list(schema.ordinal)).to_numpy() if schema.ordinal
                      else np.zeros((df.height, 0), np.int64)),
            # One column, no nulls, already torch's dtype: a zero-copy view of the
            # Arrow buffer, which build_tensor_table shares with the tensor.
            "target": df.get_column(schema.target).to_numpy(),
        }
        for c in schema.passthrough:
            out[c] = df.get_column(c).cast(pl.Float64).to_numpy()
        for j, c in enumerate(schema.ordinal):
            check_known_codes(out["codes"][:, j], c, None, stats["categories"][c])
        if schema.task == "classification":
            check_known_codes(out["target"], schema.target, None,
                              stats["categories"][schema.target])
        return out

    def labelled_rows(self, frame: Any, schema: TableSchema) -> np.ndarray:
        import polars as pl

        mask = frame.select(pl.col(schema.target).is_not_null()).collect().to_series()
        return np.flatnonzero(mask.to_numpy()).astype(np.int64)

    def take(self, frame: Any, positions: np.ndarray) -> Any:
        import polars as pl

        # One gather in the plan: on a scan, polars reads the file and keeps these rows.
        return frame.select(pl.all().gather(np.asarray(positions, dtype=np.int64).tolist()))

    def batches(self, frame: Any, batch_size: int) -> Iterator[Any]:
        df = frame.collect() if hasattr(frame, "collect") else frame  # the plan runs once
        for start in range(0, df.height, int(batch_size)):
            yield df.slice(start, int(batch_size)).lazy()  # zero-copy views of df
