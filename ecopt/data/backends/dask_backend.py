"""The dask backend: partitioned ``dask.dataframe``, constants gathered in one ``compute`` per stage.

Dask pays task-graph and scheduling overhead on every ``compute``; on a 1,000-row
table that overhead is most of the time, which is what the data study saw.
``npartitions`` splits the table (default: what ``read_csv``'s block size gives).
"""

from __future__ import annotations

import math
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

__all__ = ["DaskBackend"]


class DaskBackend(Backend):
    """Partitioned dask dataframes.

    Args:
        npartitions: Repartition the table into this many partitions after
            reading (``None`` keeps the reader's partitioning).
        scheduler: Dask scheduler for every ``compute`` (default ``"threads"``).
    """

    name = "dask"
    module = "dask.dataframe"

    def __init__(self, npartitions: int | None = None, scheduler: str = "threads") -> None:
        if npartitions is not None and (isinstance(npartitions, bool) or int(npartitions) < 1):
            raise ValueError(f"npartitions must be a positive integer or None, got {npartitions!r}")
        self.npartitions = npartitions
        self.scheduler = scheduler

    def describe(self) -> dict[str, Any]:
        return {"backend": self.name, "npartitions": self.npartitions, "scheduler": self.scheduler}

    def _compute(self, *things: Any) -> tuple[Any, ...]:
        import dask

        return dask.compute(*things, scheduler=self.scheduler)

    def read(self, path: str | Path, schema: TableSchema) -> Any:
        import dask.dataframe as dd

        p = check_file(path, schema)
        fmt = file_format(p, schema)
        if fmt == "parquet":
            ddf = dd.read_parquet(str(p))
        elif fmt == "movielens":
            ddf = dd.read_csv(str(p), sep="::", engine="python", header=None,
                              names=list(schema.columns), assume_missing=True)
        else:
            # assume_missing: an int column with a gap in a later block would
            # otherwise break dask's dtype guess from the first block.
            ddf = dd.read_csv(str(p), assume_missing=True)
        check_columns(list(map(str, ddf.columns)), schema, p)
        ddf = ddf[list(schema.used)]
        if self.npartitions is not None:
            ddf = ddf.repartition(npartitions=self.npartitions)
        return ddf

    def impute(self, frame: Any, schema: TableSchema, stats: dict[str, Any]) -> Any:
        import pandas as pd

        ddf = frame[frame[schema.target].notnull()]
        numeric = list(schema.numeric) + ([schema.target] if schema.task == "regression" else [])
        ddf = ddf.assign(**{c: ddf[c].astype("float64") for c in numeric})
        if is_fitted(stats):
            means = dict(stats["impute_means"])
        else:
            vals = self._compute(*[ddf[c].mean() for c in schema.numeric])
            means = {c: float(v) for c, v in zip(schema.numeric, vals)}
        stats["impute_means"] = means
        fills = {c: ddf[c].fillna(means[c]) for c in schema.numeric}
        for c in schema.categorical:
            fills[c] = ddf[c].fillna(
                categorical_fill(pd.api.types.is_numeric_dtype(ddf[c].dtype)))
        return ddf.assign(**fills)

    def encode(self, frame: Any, schema: TableSchema, stats: dict[str, Any]) -> Any:
        cat_cols = list(schema.categorical)
        if schema.task == "classification":
            cat_cols.append(schema.target)
        if is_fitted(stats):
            cats = stats["categories"]
        else:
            uniques = self._compute(*[frame[c].unique() for c in cat_cols])
            cats = {c: sorted_categories(u) for c, u in zip(cat_cols, uniques)}
        stats["categories"] = cats
        new = {f"{c}={v}": (frame[c] == v).astype("float64")
               for c in schema.onehot for v in cats[c]}
        coded = [*schema.ordinal, *([schema.target] if schema.task == "classification" else [])]
        for c in coded:
            new[c] = frame[c].map_partitions(_codes, cats[c], meta=(c, "int64"))
        return frame.assign(**new).drop(columns=list(schema.onehot))

    def normalise(self, frame: Any, schema: TableSchema, stats: dict[str, Any]) -> Any:
        cols = list(schema.numeric)
        if is_fitted(stats):
            means, stds = stats["means"], stats["stds"]
        else:
            vals = self._compute(*[frame[c].mean() for c in cols],
                                 *[frame[c].std(ddof=0) for c in cols])
            means = {c: float(vals[i]) for i, c in enumerate(cols)}
            stds = {c: safe_std(vals[len(cols) + i]) for i, c in enumerate(cols)}
        stats["means"], stats["stds"] = means, stds
        return frame.assign(**{c: (frame[c] - means[c]) / stds[c] for c in cols})

    def materialise(self, frame: Any) -> Any:
        return frame.persist(scheduler=self.scheduler)

    def to_arrays(self, frame: Any, schema: TableSchema, stats: dict[str, Any]
                  ) -> dict[str, np.ndarray]:
        feats = [*schema.numeric, *(f"{c}={v}" for c in schema.onehot
                                    for v in stats["categories"][c])]
        (df,) = self._compute(frame)
        out = {
            "features": df[feats].to_numpy(dtype=np.float32),
            "codes": df[list(schema.ordinal)].to_numpy(dtype=np.int64),
            "target": df[schema.target].to_numpy(),
        }
        for c in schema.passthrough:
            out[c] = df[c].to_numpy(dtype=np.float64)
        return out

    def labelled_rows(self, frame: Any, schema: TableSchema) -> np.ndarray:
        (mask,) = self._compute(frame[schema.target].notnull())
        return np.flatnonzero(mask.to_numpy()).astype(np.int64)

    def take(self, frame: Any, positions: np.ndarray) -> Any:
        """The rows at ``positions``, partition by partition (dask has no positional index).

        The frame is persisted first (its partitions' lengths place each
        position in its partition); partitions holding none of the rows are
        left out of the result.
        """
        import dask
        import dask.dataframe as dd

        frame = self.materialise(frame)
        (lengths,) = self._compute(frame.map_partitions(len))
        starts = np.concatenate([[0], np.cumsum(np.asarray(lengths, dtype=np.int64))])
        pos = np.asarray(positions, dtype=np.int64)
        parts = []
        for k, part in enumerate(frame.to_delayed()):
            local = pos[(pos >= starts[k]) & (pos < starts[k + 1])] - starts[k]
            if local.size:
                parts.append(dask.delayed(_iloc)(part, local))
        if not parts:
            return frame.partitions[0].map_partitions(lambda d: d.iloc[:0])
        return dd.from_delayed(parts, meta=frame._meta, verify_meta=False)

    def batches(self, frame: Any, batch_size: int) -> Iterator[Any]:
        """Partitions of about ``batch_size`` rows (dask repartitions the persisted frame)."""
        frame = self.materialise(frame)
        (n,) = self._compute(frame.map_partitions(len).sum())
        frame = frame.repartition(npartitions=max(1, math.ceil(int(n) / int(batch_size))))
        for k in range(frame.npartitions):
            yield frame.partitions[k]


def _iloc(part: Any, local: np.ndarray) -> Any:
    return part.iloc[local]


def _codes(part: Any, categories: list[Any]) -> Any:
    import pandas as pd

    known = part.isin(categories)
    codes = pd.Categorical(part.where(known) if not known.all() else part,
                           categories=categories).codes.astype(np.int64)
    check_known_codes(codes, str(part.name), part.to_numpy(), categories)
    return pd.Series(codes, index=part.index, name=part.name)
