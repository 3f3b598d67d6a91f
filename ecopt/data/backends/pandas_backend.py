"""The pandas backend: eager frames, the way most tutorials write it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ecopt.data.backends.base import (
    Backend,
    categorical_fill,
    check_columns,
    check_file,
    file_format,
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
        means = {c: float(out[c].mean()) for c in schema.numeric}
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
        cats = {c: sorted_categories(frame[c].unique()) for c in cat_cols}
        stats["categories"] = cats
        parts = [frame[[*schema.numeric, *schema.passthrough]]]
        for c in schema.onehot:
            codes = _codes(frame[c], cats[c])
            onehot = np.zeros((len(frame), len(cats[c])), dtype=np.float64)
            onehot[np.arange(len(frame)), codes] = 1.0
            parts.append(pd.DataFrame(onehot, index=frame.index,
                                      columns=[f"{c}={v}" for v in cats[c]]))
        for c in [*schema.ordinal, *([schema.target] if schema.task == "classification" else [])]:
            parts.append(pd.Series(_codes(frame[c], cats[c]), index=frame.index,
                                   name=c).to_frame())
        if schema.task == "regression":
            parts.append(frame[[schema.target]])
        return pd.concat(parts, axis=1)

    def normalise(self, frame: Any, schema: TableSchema, stats: dict[str, Any]) -> Any:
        cols = list(schema.numeric)
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


def _codes(column: Any, categories: list[Any]) -> np.ndarray:
    """int64 positions of each value in ``categories`` (every value must be there)."""
    import pandas as pd

    codes = pd.Categorical(column, categories=categories).codes.astype(np.int64)
    if (codes < 0).any():  # pragma: no cover - categories come from the same column
        raise AssertionError(f"column {column.name!r} holds values outside {categories[:10]}")
    return codes
