"""The pandas backend: eager frames, the way most tutorials write it."""

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

__all__ = ["PandasBackend"]


class PandasBackend(Backend):
    """Eager pandas. MovieLens ``::`` files go through the python parser, the only
    pandas parser that takes a multi-character separator (as the MovieLens
    tutorials do); that is much of why pandas is slow on that file."""

    name = "pandas"
    module = "pandas"

    def read(self, path: str | Path, schema: TableSchema) -> Any:
        import pandas as pd

        p = check_file(path, schema)
        fmt = file_format(p, schema)
        if fmt == "parquet":
            df = pd.read_parquet(p)
        elif fmt == "movielens":
            df = pd.read_csv(p, sep="::", engine="python", header=None,
                             names=list(schema.columns))
        else:
            df = pd.read_csv(p)
        check_columns(list(map(str, df.columns)), schema, p)
        return df[list(schema.used)]

    def impute(self, frame: Any, schema: TableSchema, stats: dict[str, Any]) -> Any:
        import pandas as pd

        df = frame[frame[schema.target].notna()]
        numeric = list(schema.numeric)
        if schema.task == "regression":
            numeric.append(schema.target)
        out = {c: df[c].astype("float64") for c in numeric}
        means = (dict(stats["impute_means"]) if is_fitted(stats)
                 else {c: float(out[c].mean()) for c in schema.numeric})
        for c in schema.numeric:
            out[c] = out[c].fillna(means[c])
        for c in schema.categorical:
            out[c] = df[c].fillna(categorical_fill(pd.api.types.is_numeric_dtype(df[c].dtype)))
        stats["impute_means"] = means
        return df.assign(**out)

    def encode(self, frame: Any, schema: TableSchema, stats: dict[str, Any]) -> Any:
        import pandas as pd

        cat_cols = list(schema.categorical)
        if schema.task == "classification":
            cat_cols.append(schema.target)
        cats = (stats["categories"] if is_fitted(stats)
                else {c: sorted_categories(frame[c].unique()) for c in cat_cols})
        stats["categories"] = cats
        parts = [frame[[*schema.numeric, *schema.passthrough]]]
        for c in schema.onehot:
            codes = _codes(frame[c], cats[c])
            onehot = np.zeros((len(frame), len(cats[c])), dtype=np.float64)
            known = codes >= 0  # a value unseen at fit time: all zeros, as a one-hot encoder does
            onehot[np.flatnonzero(known), codes[known]] = 1.0
            parts.append(pd.DataFrame(onehot, index=frame.index,
                                      columns=[f"{c}={v}" for v in cats[c]]))
        for c in [*schema.ordinal, *([schema.target] if schema.task == "classification" else [])]:
            codes = _codes(frame[c], cats[c])
            check_known_codes(codes, c, frame[c].to_numpy(), cats[c])
            parts.append(pd.Series(codes, index=frame.index, name=c).to_frame())
        if schema.task == "regression":
            parts.append(frame[[schema.target]])
        return pd.concat(parts, axis=1)

    def normalise(self, frame: Any, schema: TableSchema, stats: dict[str, Any]) -> Any:
        cols = list(schema.numeric)
        if is_fitted(stats):
            means, stds = stats["means"], stats["stds"]
        else:
            means = {c: float(frame[c].mean()) for c in cols}
            stds = {c: safe_std(frame[c].std(ddof=0)) for c in cols}
        stats["means"], stats["stds"] = means, stds
        return frame.assign(**{c: (frame[c] - means[c]) / stds[c] for c in cols})

    def to_arrays(self, frame: Any, schema: TableSchema, stats: dict[str, Any]
                  ) -> dict[str, np.ndarray]:
        feats = [*schema.numeric, *(f"{c}={v}" for c in schema.onehot
                                    for v in stats["categories"][c])]
        out = {
            "features": frame[feats].to_numpy(dtype=np.float32),
            "codes": frame[list(schema.ordinal)].to_numpy(dtype=np.int64),
            "target": frame[schema.target].to_numpy(),
        }
        for c in schema.passthrough:
            out[c] = frame[c].to_numpy(dtype=np.float64)
        return out

    def labelled_rows(self, frame: Any, schema: TableSchema) -> np.ndarray:
        return np.flatnonzero(frame[schema.target].notna().to_numpy()).astype(np.int64)

    def take(self, frame: Any, positions: np.ndarray) -> Any:
        return frame.iloc[np.asarray(positions, dtype=np.int64)]

    def batches(self, frame: Any, batch_size: int) -> Iterator[Any]:
        for start in range(0, len(frame), int(batch_size)):
            yield frame.iloc[start:start + int(batch_size)]


def _codes(column: Any, categories: list[Any]) -> np.ndarray:
    """int64 positions of each value in ``categories``, ``-1`` for a value not among them."""
    import pandas as pd

    known = column.isin(categories)
    if not known.all():  # held-out rows: blank the unknown values first (pandas 4 refuses them)
        column = column.where(known)
    return pd.Categorical(column, categories=categories).codes.astype(np.int64)
