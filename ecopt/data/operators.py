"""Per-operator cost of a dataframe workflow: read, join, group-by, encode, to-tensor, per backend.

The dataframe energy study broke each backend's cost down by operator. This
module runs the same five operators with pandas, polars or dask, materialising
each one's result so it can be timed on its own, under a meter window and a
peak-RSS sampler:

========== =================================================== ==================================
operator   MovieLens-1M (ratings.dat, users.dat, movies.dat)    Insurance (insurance.csv)
========== =================================================== ==================================
read       parse the three ``::`` files                         parse the CSV
join       ratings x users (UserID) x movies (MovieID), inner   rows x the group-by table (left)
group_by   per-user and per-movie rating count and mean         mean charges per region x smoker
encode     dense int codes of UserID, MovieID, Gender,          one-hot sex, smoker, region
           Occupation (sorted order)                            (missing -> "missing"/mean)
to_tensor  codes (n x 4 int64) + rating (float32) tensors       features (float32) + target tensors
========== =================================================== ==================================

On Insurance the join merges the group means back onto the rows (target
encoding), so group-by runs before join there. Operator results are
materialised one by one (polars eagerly, dask with ``persist``), so a lazy
plan's fusion is not credited: compare backends operator by operator here and
whole workflows with :mod:`ecopt.workloads`.

:func:`trace_operators` runs in the calling process; ``python -m
ecopt.data.operators ...`` runs one trace in a fresh process and prints JSON,
so peak RSS is not inflated by other backends loaded earlier.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ecopt.data.memory import PeakRSS
from ecopt.data.pipeline import StageWindow
from ecopt.data.schema import MOVIELENS
from ecopt.meters import Meter, get_meter

__all__ = ["BACKENDS", "OPERATORS", "OperatorTrace", "trace_operators", "operator_plan", "main"]

#: Backends the operators run with (``polars-lazy``: polars' lazy engine, one plan).
BACKENDS = ("pandas", "polars", "polars-lazy", "dask")
#: The operators, in the order tables show them.
OPERATORS = ("read", "join", "group_by", "encode", "to_tensor")
_USERS = ("UserID", "Gender", "Age", "Occupation", "Zip")
_MOVIES = ("MovieID", "Title", "Genres")
_INS_CAT = ("sex", "smoker", "region")


@dataclass(frozen=True)
class OperatorTrace:
    """One operator's cost.

    Attributes:
        name: Operator name (one of :data:`OPERATORS`).
        duration_s: Wall seconds.
        cpu_s: Process CPU seconds (all threads).
        energy_j: Joules from the meter (``measured`` says whether measured).
        measured: Whether the meter measured (``False``: estimated).
        source: Energy provenance.
        peak_rss_mb: Peak resident memory of the process during the operator.
        rss_added_mb: That peak minus the RSS when the operator began.
        rows: Rows of the operator's result.
    """

    name: str
    duration_s: float
    cpu_s: float
    energy_j: float
    measured: bool
    source: str
    peak_rss_mb: float
    rss_added_mb: float
    rows: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _movielens_files(path: str | Path) -> tuple[Path, Path, Path]:
    p = Path(path)
    folder = p if p.is_dir() else p.parent
    files = (folder / "ratings.dat", folder / "users.dat", folder / "movies.dat")
    missing = [str(f) for f in files if not f.is_file()]
    if missing:
        raise FileNotFoundError(f"MovieLens-1M operators need ratings.dat, users.dat and "
                                f"movies.dat in {str(folder)!r}; missing: {missing} (generate "
                                "stand-ins with ecopt.data.datasets.write_movielens_side_files)")
    return files


# ---- pandas -------------------------------------------------------------------------------

def _pd_dat(path: Path, names: Sequence[str]) -> Any:
    import pandas as pd

    return pd.read_csv(path, sep="::", engine="python", header=None, names=list(names),
                       encoding="latin-1")


def _pandas_plan(dataset: str, path: Path) -> list[tuple[str, Callable[[dict[str, Any]], Any]]]:
    import numpy as np
    import pandas as pd
    import torch

    from ecopt.data.backends import get_backend

    if dataset == "movielens":
        r_path, u_path, m_path = _movielens_files(path)

        def read(s: dict[str, Any]) -> Any:
            s["r"] = get_backend("pandas").read(r_path, MOVIELENS)
            s["u"], s["m"] = _pd_dat(u_path, _USERS), _pd_dat(m_path, _MOVIES)
            return s["r"]

        def join(s: dict[str, Any]) -> Any:
            s["j"] = s["r"].merge(s["u"], on="UserID").merge(s["m"], on="MovieID")
            return s["j"]

        def group_by(s: dict[str, Any]) -> Any:
            s["gu"] = s["j"].groupby("UserID")["Rating"].agg(["count", "mean"])
            s["gm"] = s["j"].groupby("MovieID")["Rating"].agg(["count", "mean"])
            return s["gu"]

        def encode(s: dict[str, Any]) -> Any:
            j = s["j"]
            s["codes"] = np.stack([pd.Categorical(j[c]).codes.astype(np.int64)
                                   for c in ("UserID", "MovieID", "Gender", "Occupation")], 1)
            return s["codes"]

        def to_tensor(s: dict[str, Any]) -> Any:
            return (torch.from_numpy(s["codes"]),
                    torch.from_numpy(s["j"]["Rating"].to_numpy(np.float32)))

        return [("read", read), ("join", join), ("group_by", group_by), ("encode", encode),
                ("to_tensor", to_tensor)]

    def read_i(s: dict[str, Any]) -> Any:
        s["df"] = pd.read_csv(path)
        return s["df"]

    def group_i(s: dict[str, Any]) -> Any:
        df = s["df"]
        s["g"] = (df.assign(region=df["region"].fillna("missing"))
                  .groupby(["region", "smoker"], as_index=False)["charges"].mean()
                  .rename(columns={"charges": "group_mean"}))
        return s["g"]

    def join_i(s: dict[str, Any]) -> Any:
        df = s["df"]
        s["j"] = df.assign(region=df["region"].fillna("missing")).merge(
            s["g"], on=["region", "smoker"], how="left")
        return s["j"]

    def encode_i(s: dict[str, Any]) -> Any:
        j = s["j"]
        num = j[["age", "bmi", "children", "group_mean"]].astype("float64")
        num = num.fillna(num.mean())
        cat = pd.get_dummies(j[list(_INS_CAT)].fillna("missing"), dtype="float32")
        s["x"] = pd.concat([num.astype("float32"), cat[sorted(cat.columns)]], axis=1)
        return s["x"]

    def tensor_i(s: dict[str, Any]) -> Any:
        return (torch.from_numpy(s["x"].to_numpy(np.float32)),
                torch.from_numpy(s["j"]["charges"].to_numpy(np.float32)))

    return [("read", read_i), ("group_by", group_i), ("join", join_i), ("encode", encode_i),
            ("to_tensor", tensor_i)]


# ---- polars -------------------------------------------------------------------------------

def _pl_dat(path: Path, names: Sequence[str], ints: Sequence[str], lazy: bool = False) -> Any:
    """A ``::`` file as a polars frame: lines split on ``::`` (titles contain ':', so no
    one-byte separator trick here). ``lazy=True`` gives a ``LazyFrame`` (``scan_csv``: nothing
    is read until the plan is collected); otherwise a ``DataFrame``, read now."""
    import polars as pl

    reader = pl.scan_csv if lazy else pl.read_csv
    lines = reader(path, has_header=False, separator="\x1f", new_columns=["line"],
                   quote_char=None, encoding="utf8-lossy")
    parts = pl.col("line").str.split_exact("::", len(names) - 1)
    out = lines.select(parts.struct.rename_fields(list(names)).alias("s")).unnest("s")
    return out.with_columns([pl.col(c).cast(pl.Int64) for c in ints])


# Operators that read the same on a polars DataFrame (eager: run now) and a LazyFrame (lazy:
# the plan grows). The eager and lazy plans share them, so the two backends differ only where
# the engines must: reading, the one-hot categories, and when the work is collected.

def _pl_ml_join(s: dict[str, Any]) -> Any:
    """MovieLens: ratings joined to users and movies."""
    s["j"] = s["r"].join(s["u"], on="UserID").join(s["m"], on="MovieID")
    return s["j"]


def _pl_ml_group_by(s: dict[str, Any]) -> Any:
    """MovieLens: count and mean rating per user and per movie."""
    import polars as pl

    agg = [pl.len().alias("count"), pl.col("Rating").mean().alias("mean")]
    s["gu"] = s["j"].group_by("UserID").agg(agg)
    s["gm"] = s["j"].group_by("MovieID").agg(agg)
    return s["gu"]


def _pl_ml_codes() -> list[Any]:
    """MovieLens: dense 0-based int64 codes of the categorical columns, as expressions."""
    import polars as pl

    return [(pl.col(c).rank("dense") - 1).cast(pl.Int64).alias(c)
            for c in ("UserID", "MovieID", "Gender", "Occupation")]


def _pl_ins_group_by(s: dict[str, Any]) -> Any:
    """Insurance: missing regions named, then mean charges per (region, smoker)."""
    import polars as pl

    df = s["df"].with_columns(pl.col("region").fill_null("missing"))
    s["df"] = df
    s["g"] = df.group_by(["region", "smoker"]).agg(pl.col("charges").mean().alias("group_mean"))
    return s["g"]


def _pl_ins_join(s: dict[str, Any]) -> Any:
    """Insurance: every row joined to its group's mean charges."""
    s["j"] = s["df"].join(s["g"], on=["region", "smoker"], how="left")
    return s["j"]


def _pl_ins_numeric() -> list[Any]:
    """Insurance: the numeric columns as float32 expressions, gaps filled with column means."""
    import polars as pl

    return [pl.col(c).cast(pl.Float64).fill_null(pl.col(c).cast(pl.Float64).mean())
            .cast(pl.Float32) for c in ("age", "bmi", "children", "group_mean")]


def _polars_plan(dataset: str, path: Path) -> list[tuple[str, Callable[[dict[str, Any]], Any]]]:
    import polars as pl
    import torch

    from ecopt.data.backends import get_backend

    if dataset == "movielens":
        r_path, u_path, m_path = _movielens_files(path)

        def read(s: dict[str, Any]) -> Any:
            s["r"] = get_backend("polars").read(r_path, MOVIELENS).collect()
            s["u"] = _pl_dat(u_path, _USERS, ("UserID", "Age", "Occupation"))
            s["m"] = _pl_dat(m_path, _MOVIES, ("MovieID",))
            return s["r"]

        def encode(s: dict[str, Any]) -> Any:
            s["codes"] = s["j"].select(_pl_ml_codes())
            return s["codes"]

        def to_tensor(s: dict[str, Any]) -> Any:
            return (torch.from_numpy(s["codes"].to_numpy()),
                    s["j"]["Rating"].cast(pl.Float32).to_torch())

        return [("read", read), ("join", _pl_ml_join), ("group_by", _pl_ml_group_by),
                ("encode", encode), ("to_tensor", to_tensor)]

    def read_i(s: dict[str, Any]) -> Any:
        s["df"] = pl.read_csv(path, null_values=[""])
        return s["df"]

    def encode_i(s: dict[str, Any]) -> Any:
        j = s["j"]
        num = _pl_ins_numeric()
        cat = j.select([pl.col(c).fill_null("missing") for c in _INS_CAT]).to_dummies()
        s["x"] = pl.concat([j.select(num), cat.select(sorted(cat.columns))
                            .cast(pl.Float32)], how="horizontal")
        return s["x"]

    def tensor_i(s: dict[str, Any]) -> Any:
        return (s["x"].to_torch(dtype=pl.Float32), s["j"]["charges"].cast(pl.Float32).to_torch())

    return [("read", read_i), ("group_by", _pl_ins_group_by), ("join", _pl_ins_join),
            ("encode", encode_i), ("to_tensor", tensor_i)]


# ---- polars, lazy ----------------------------------------------------------------------------

def _polars_lazy_plan(dataset: str, path: Path
                      ) -> list[tuple[str, Callable[[dict[str, Any]], Any]]]:
    """polars' lazy engine, as the study ran it: every operator only extends one plan, and
    ``to_tensor`` collects the whole plan at once (``collect_all`` for the outputs that share
    sub-plans), so the optimiser can push projections down and fuse the operators. The first
    four operators' rows are then the cost of building the plan; the work lands in
    ``to_tensor``: compare this backend's five-operator total with the others' totals."""
    import polars as pl
    import torch

    from ecopt.data.backends import get_backend

    if dataset == "movielens":
        r_path, u_path, m_path = _movielens_files(path)

        def read(s: dict[str, Any]) -> Any:
            s["r"] = get_backend("polars").read(r_path, MOVIELENS)
            s["u"] = _pl_dat(u_path, _USERS, ("UserID", "Age", "Occupation"), lazy=True)
            s["m"] = _pl_dat(m_path, _MOVIES, ("MovieID",), lazy=True)
            return s["r"]

        def encode(s: dict[str, Any]) -> Any:
            s["codes"] = s["j"].select(_pl_ml_codes() + [pl.col("Rating").cast(pl.Float32)])
            return s["codes"]

        def to_tensor(s: dict[str, Any]) -> Any:
            codes, s["gu"], s["gm"] = pl.collect_all([s["codes"], s["gu"], s["gm"]])
            return (torch.from_numpy(codes.drop("Rating").to_numpy()),
                    codes["Rating"].to_torch())

        return [("read", read), ("join", _pl_ml_join), ("group_by", _pl_ml_group_by),
                ("encode", encode), ("to_tensor", to_tensor)]

    def read_i(s: dict[str, Any]) -> Any:
        s["df"] = pl.scan_csv(path, null_values=[""])
        return s["df"]

    def encode_i(s: dict[str, Any]) -> Any:
        j = s["j"]
        num = _pl_ins_numeric()
        # One-hot needs the categories: the one small aggregate a lazy plan must collect first.
        cats = j.select([pl.col(c).fill_null("missing").unique().sort().implode()
                         for c in _INS_CAT]).collect().row(0)
        dummies = sorted(((f"{c}_{v}", (pl.col(c).fill_null("missing") == v)
                          .cast(pl.Float32).alias(f"{c}_{v}"))
                          for c, vals in zip(_INS_CAT, cats) for v in vals),
                         key=lambda kv: kv[0])  # eager's column order: names sorted
        dummies = [e for _, e in dummies]
        s["x"] = j.select(num + dummies + [pl.col("charges").cast(pl.Float32)])
        return s["x"]

    def tensor_i(s: dict[str, Any]) -> Any:
        x = s["x"].collect()
        return x.drop("charges").to_torch(dtype=pl.Float32), x["charges"].to_torch()

    return [("read", read_i), ("group_by", _pl_ins_group_by), ("join", _pl_ins_join),
            ("encode", encode_i), ("to_tensor", tensor_i)]


# ---- dask ---------------------------------------------------------------------------------

def _dask_plan(dataset: str, path: Path, npartitions: int = 2
               ) -> list[tuple[str, Callable[[dict[str, Any]], Any]]]:
    import dask.dataframe as dd
    import numpy as np
    import torch

    from ecopt.data.backends import get_backend

    if dataset == "movielens":
        r_path, u_path, m_path = _movielens_files(path)

        def read(s: dict[str, Any]) -> Any:
            r = get_backend("dask", npartitions=npartitions).read(r_path, MOVIELENS)
            s["r"] = r.astype({"UserID": "int64", "MovieID": "int64"}).persist()
            s["u"] = dd.read_csv(str(u_path), sep="::", engine="python", header=None,
                                 names=list(_USERS), encoding="latin-1").persist()
            s["m"] = dd.read_csv(str(m_path), sep="::", engine="python", header=None,
                                 names=list(_MOVIES), encoding="latin-1").persist()
            return s["r"]

        def join(s: dict[str, Any]) -> Any:
            s["j"] = s["r"].merge(s["u"], on="UserID").merge(s["m"], on="MovieID").persist()
            return s["j"]

        def group_by(s: dict[str, Any]) -> Any:
            import dask

            s["gu"], s["gm"] = dask.compute(
                s["j"].groupby("UserID")["Rating"].agg(["count", "mean"]),
                s["j"].groupby("MovieID")["Rating"].agg(["count", "mean"]))
            return s["gu"]

        def encode(s: dict[str, Any]) -> Any:
            cols = ["UserID", "MovieID", "Gender", "Occupation"]
            j = s["j"][cols].categorize(columns=cols)
            s["codes"] = j.map_partitions(
                lambda df: df.apply(lambda c: c.cat.codes.astype("int64")),
                meta={c: "int64" for c in cols}).persist()
            return s["codes"]

        def to_tensor(s: dict[str, Any]) -> Any:
            import dask

            codes, rating = dask.compute(s["codes"], s["j"]["Rating"])
            return (torch.from_numpy(codes.to_numpy(np.int64, copy=True)),
                    torch.from_numpy(rating.to_numpy(np.float32, copy=True)))

        return [("read", read), ("join", join), ("group_by", group_by), ("encode", encode),
                ("to_tensor", to_tensor)]

    def read_i(s: dict[str, Any]) -> Any:
        s["df"] = dd.read_csv(str(path), assume_missing=True).repartition(
            npartitions=npartitions).persist()
        return s["df"]

    def group_i(s: dict[str, Any]) -> Any:
        df = s["df"].assign(region=s["df"]["region"].fillna("missing"))
        s["df"] = df
        s["g"] = (df.groupby(["region", "smoker"])["charges"].mean()
                  .rename("group_mean").reset_index().persist())
        return s["g"]

    def join_i(s: dict[str, Any]) -> Any:
        s["j"] = s["df"].merge(s["g"], on=["region", "smoker"], how="left").persist()
        return s["j"]

    def encode_i(s: dict[str, Any]) -> Any:
        j = s["j"]
        num = j[["age", "bmi", "children", "group_mean"]].astype("float64")
        num = num.fillna(num.mean())
        cat = j[list(_INS_CAT)].fillna("missing").categorize()
        dummies = dd.get_dummies(cat, dtype="float32")
        s["x"] = dd.concat([num.astype("float32"), dummies[sorted(dummies.columns)]],
                           axis=1).persist()
        return s["x"]

    def tensor_i(s: dict[str, Any]) -> Any:
        import dask

        x, y = dask.compute(s["x"], s["j"]["charges"])
        return (torch.from_numpy(x.to_numpy(np.float32, copy=True)),
                torch.from_numpy(y.to_numpy(np.float32, copy=True)))

    return [("read", read_i), ("group_by", group_i), ("join", join_i), ("encode", encode_i),
            ("to_tensor", tensor_i)]


def operator_plan(dataset: str, backend: str, path: str | Path
                  ) -> list[tuple[str, Callable[[dict[str, Any]], Any]]]:
    """The ``(operator, fn(state))`` steps of ``dataset`` with ``backend``, in run order.

    Args:
        dataset: ``"movielens"`` (``path``: ``ratings.dat`` or its folder, with
            ``users.dat`` and ``movies.dat`` beside it) or ``"insurance"`` (a CSV).
        backend: ``"pandas"``, ``"polars"`` (eager: each operator's result
            materialised), ``"polars-lazy"`` (one lazy plan, collected by
            ``to_tensor``) or ``"dask"``.
        path: The data.

    Raises:
        ValueError: for an unknown dataset or backend.
        FileNotFoundError: for missing files.
    """
    if dataset not in ("movielens", "insurance"):
        raise ValueError(f"dataset must be 'movielens' or 'insurance', got {dataset!r}")
    plans = {"pandas": _pandas_plan, "polars": _polars_plan, "polars-lazy": _polars_lazy_plan,
             "dask": _dask_plan}
    if backend not in plans:
        raise ValueError(f"backend must be one of {sorted(plans)}, got {backend!r}")
    p = Path(path)
    if dataset == "insurance" and not p.is_file():
        raise FileNotFoundError(f"insurance data file not found: {str(p)!r}")
    return plans[backend](dataset, p)


def _rows(x: Any) -> int:
    if isinstance(x, tuple):
        x = x[0]
    if type(x).__name__ == "LazyFrame":  # a plan, not rows: nothing was computed yet
        return 0
    shape = getattr(x, "shape", None)
    if shape is not None and isinstance(shape[0], int):
        return int(shape[0])
    return int(len(x))


def trace_operators(dataset: str, backend: str, path: str | Path,
                    meter: str | Meter = "auto") -> list[OperatorTrace]:
    """Run the five operators once, each under its own meter window and peak-RSS sampler.

    Returns:
        One :class:`OperatorTrace` per operator, in :data:`OPERATORS` order.
    """
    m = get_meter(meter) if isinstance(meter, str) else meter
    state: dict[str, Any] = {}
    out: dict[str, OperatorTrace] = {}
    for name, fn in operator_plan(dataset, backend, path):
        with PeakRSS() as mem, StageWindow(name, "table", m) as w:
            result = fn(state)
        t = w.trace
        assert t is not None
        out[name] = OperatorTrace(name, t.duration_s, t.cpu_s, t.energy_j, t.measured, t.source,
                                  mem.peak_bytes / 1e6,
                                  (mem.peak_bytes - mem.start_bytes) / 1e6, _rows(result))
    return [out[n] for n in OPERATORS]


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m ecopt.data.operators DATASET BACKEND PATH [--meter M] [--warmup]``: JSON out."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("dataset", choices=("movielens", "insurance"))
    p.add_argument("backend", choices=BACKENDS)
    p.add_argument("path")
    p.add_argument("--meter", default="auto")
    p.add_argument("--warmup", action="store_true",
                   help="run the operators once untraced first (imports, first-call costs)")
    args = p.parse_args(argv)
    if args.warmup:
        warm: dict[str, Any] = {}
        for _, fn in operator_plan(args.dataset, args.backend, args.path):
            fn(warm)
        del warm
    traces = trace_operators(args.dataset, args.backend, args.path, args.meter)
    json.dump([t.to_dict() for t in traces], sys.stdout)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
