"""Dataframe backends inside end-to-end DL pipelines: runtime, CPU energy and RAM per phase.

Reproduces the shape of the data study's table on this machine: for each
backend (pandas, polars, dask) x dataset/model (Insurance MLP regression,
Insurance MLP classification, MovieLens NCF), ``--repeats`` runs (default 5),
each phase (load, preprocess, train, inference) reported as a trimmed mean
(20 % cut at each end) with a 95 % interval (Tukey-McLaughlin: Winsorised
variance, t with n - 2g - 1 degrees of freedom), as a markdown table and a plot.

Every run is one trial of an ``ecopt.Study`` (one study directory per
dataset/model under ``--out``), so the raw numbers stay in ``trials.jsonl``.
Energy comes from ``--meter`` (``auto``: an ESTIMATE from CPU time on machines
without power counters; the CPU column is then CPU seconds x watts/core).

Defaults finish in a few minutes on 2 CPU cores: Insurance at its real size
(1,000 rows), MovieLens reduced (``--ml-users/--ml-movies/--ml-ratings``);
``--full`` uses MovieLens-1M's full size (1,000,209 ratings, 6,040 users,
3,706 movies).

Example:
    python experiments/dataframe_energy.py --out runs/dataframe_energy
    python experiments/dataframe_energy.py --full --repeats 3 --only ncf
"""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _common as C  # noqa: E402

PHASES = ("load", "preprocess", "train", "inference")
BACKENDS = ("pandas", "polars", "dask")


def trimmed_stats(xs: Sequence[float], cut: float = 0.2) -> tuple[float, float, float]:
    """Trimmed mean and its 95 % interval (Tukey-McLaughlin); one value gives a zero-width one."""
    from scipy import stats

    x = sorted(float(v) for v in xs)
    n = len(x)
    if n == 0:
        return math.nan, math.nan, math.nan
    g = int(math.floor(cut * n))
    kept = x[g:n - g]
    tm = sum(kept) / len(kept)
    if n - 2 * g < 2:
        return tm, tm, tm
    wins = [x[g]] * g + kept + [x[n - g - 1]] * g
    mw = sum(wins) / n
    sw = math.sqrt(sum((v - mw) ** 2 for v in wins) / (n - 1))
    se = sw / ((1 - 2 * cut) * math.sqrt(n)) if g > 0 else sw / math.sqrt(n)
    t = stats.t.ppf(0.975, n - 2 * g - 1)
    return tm, tm - t * se, tm + t * se


def workloads(args: Any) -> dict[str, tuple[Any, str, str]]:
    """name -> (objective, quality metric, direction)."""
    from ecopt.workloads.ncf import NCFObjective
    from ecopt.workloads.tabular import TabularObjective

    common = {"threads": args.threads}
    tab = {**common, "epochs": args.tab_epochs, "batch_size": 64, "cache": True}
    out = {
        "insurance-mlp-regression": (
            TabularObjective("regression", data=args.insurance, missing_frac=0.05,
                             defaults=tab), "rmse", "min"),
        "insurance-mlp-classification": (
            TabularObjective("classification", data=args.insurance, missing_frac=0.05,
                             defaults=tab), "accuracy", "max"),
        "movielens-ncf": (
            NCFObjective(data=args.ratings, n_users=args.ml_users, n_movies=args.ml_movies,
                         n_ratings=args.ml_ratings, full=args.full,
                         defaults={**common, "epochs": args.ncf_epochs, "batch_size": 1024,
                                   "cache": True}), "hit_rate", "max"),
    }
    if args.only:
        keep = [k for k in out if any(o in k for o in args.only)]
        if not keep:
            raise ValueError(f"--only {args.only} matches none of {list(out)}")
        out = {k: out[k] for k in keep}
    return out


def run(args: Any) -> dict[str, Any]:
    import ecopt
    from ecopt.trial import run_objective

    results: dict[str, Any] = {}
    for name, (obj, quality, direction) in workloads(args).items():
        space = ecopt.SearchSpace({"backend": ecopt.Categorical(list(args.backends)),
                                   "repeat": ecopt.Int(0, max(1, args.repeats - 1))})
        where = Path(args.out) / name
        if args.overwrite and where.exists():
            # Same spec would resume (and skip every finished run): start afresh instead.
            import datetime as _dt
            import shutil

            stamp = _dt.datetime.now().strftime("%Y%m%dT%H%M%S")
            shutil.move(str(where), str(where.with_name(f"{name}.replaced-{stamp}")))
            C.say(f"{name}: earlier runs moved to {name}.replaced-{stamp}")
        study = ecopt.Study(space, [ecopt.Objective(quality, direction),
                                    ecopt.Objective("samples_per_joule", "max")],
                            storage=where, sampler="random", meter=args.meter,
                            seed=args.seed, overwrite=args.overwrite)
        # Warm-up run per backend (imports, file generation), not recorded.
        for b in args.backends:
            from ecopt.meters import get_meter
            from ecopt.trial import Trial

            run_objective(obj, Trial(-1, {"backend": b, "repeat": 0}, get_meter("wallclock")))
        done = {(r.params["backend"], r.params["repeat"]) for r in study.records
                if r.state.value == "complete"}
        for rep in range(args.repeats):  # repeat-major: machine noise spreads over backends
            for b in args.backends:
                if (b, rep) in done:
                    continue
                trial = study.ask(params={"backend": b, "repeat": rep})
                rec = study.tell(trial, outcome=run_objective(obj, trial))
                tot = sum(p.duration_s for p in rec.phases.values())
                msg = (f"{quality}={C.fmt(rec.values.get(quality))} total={tot:.2f}s"
                       if rec.state.value == "complete" else f"FAILED {rec.error.message[:80]}")
                C.say(f"{name} {b} repeat {rep}: {msg}")
        results[name] = {"study": study, "quality": quality}
    return results


def summarise(results: dict[str, Any], backends: Sequence[str]) -> tuple[str, dict[str, Any], list[Any]]:
    rows = []
    facts: dict[str, Any] = {}
    for name, res in results.items():
        study, quality = res["study"], res["quality"]
        facts[name] = {}
        for b in backends:
            recs = [r for r in study.records if r.params["backend"] == b and r.state.value == "complete"]
            if not recs:
                continue
            f: dict[str, Any] = {"n": len(recs)}
            for ph in PHASES:
                dur = trimmed_stats([r.phases[ph].duration_s for r in recs])
                cpu = trimmed_stats([r.phases[ph].measurement.components["cpu"].energy_j
                                     if "cpu" in r.phases[ph].measurement.components else
                                     r.phases[ph].energy_j for r in recs])
                ram = trimmed_stats([r.metrics.get(f"ram_delta_mb_{ph}", math.nan) for r in recs])
                peak = trimmed_stats([r.metrics.get(f"peak_ram_mb_{ph}", math.nan) for r in recs])
                f[ph] = {"duration_s": dur, "cpu_j": cpu, "ram_delta_mb": ram, "peak_ram_mb": peak}
                rows.append([name, b, ph, _ci(dur, 3), _ci(cpu, 3), f"{ram[0]:.1f}",
                             f"{peak[0]:.0f}"])
                if ph == "preprocess" and all("split_and_negatives_s" in r.metrics for r in recs):
                    sn = trimmed_stats([r.metrics["split_and_negatives_s"] for r in recs])
                    f["split_and_negatives_s"] = sn
                    rows.append([name, b, "  of which split + negatives (numpy, any backend)",
                                 _ci(sn, 3), "", "", ""])
            tot = trimmed_stats([sum(r.phases[p].duration_s for p in PHASES) for r in recs])
            tot_j = trimmed_stats([sum(r.phases[p].energy_j for p in PHASES) for r in recs])
            q = trimmed_stats([r.values[quality] for r in recs])
            f["total"] = {"duration_s": tot, "energy_j": tot_j, quality: q}
            rows.append([name, b, "**total**", f"**{_ci(tot, 3)}**", _ci(tot_j, 3) + " (all)",
                         "", f"{quality} {q[0]:.3f}"])
            facts[name][b] = f
    table = C.md_table(["dataset / model", "backend", "phase", "runtime s (95% CI)",
                        "CPU energy J, ESTIMATED (95% CI)", "RAM added MB", "peak RSS MB"], rows)
    return table, facts, rows


def _ci(s: tuple[float, float, float], d: int) -> str:
    tm, lo, hi = s
    # Runtimes and joules are positive: a lower bound below 0 is shown as 0.
    return f"{tm:.{d}g} [{max(lo, 0.0):.{d}g}, {hi:.{d}g}]"


def plot(facts: dict[str, Any], backends: Sequence[str], path: Path) -> Path | None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:  # pragma: no cover
        return None
    names = list(facts)
    fig, axes = plt.subplots(1, len(names), figsize=(4.2 * len(names), 3.8), squeeze=False)
    colors = {"load": "#4c72b0", "preprocess": "#dd8452", "train": "#55a868", "inference": "#c44e52"}
    for ax, name in zip(axes[0], names):
        bs = [b for b in backends if b in facts[name]]
        bottom = [0.0] * len(bs)
        for ph in PHASES:
            vals = [facts[name][b][ph]["duration_s"][0] for b in bs]
            ax.bar(bs, vals, bottom=bottom, color=colors[ph], label=ph)
            bottom = [x + v for x, v in zip(bottom, vals)]
        tot = [facts[name][b]["total"]["duration_s"] for b in bs]
        ax.errorbar(bs, [t[0] for t in tot], yerr=[[t[0] - t[1] for t in tot],
                                                   [t[2] - t[0] for t in tot]],
                    fmt="none", ecolor="black", capsize=4)
        ax.set_title(name, fontsize=9)
        ax.set_ylabel("seconds (trimmed mean, 95% CI of total)")
    axes[0][0].legend(fontsize=8)
    fig.suptitle("Runtime per phase by dataframe backend (energy: ESTIMATED from CPU time)",
                 fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def main(argv: Sequence[str] | None = None) -> int:
    p = C.base_parser(__doc__.splitlines()[0], "runs/dataframe_energy")
    p.add_argument("--repeats", type=int, default=5, help="runs per backend x workload")
    p.add_argument("--backends", nargs="+", default=list(BACKENDS), choices=BACKENDS)
    p.add_argument("--only", nargs="+", help="workloads whose name contains one of these")
    p.add_argument("--insurance", help="a real insurance.csv (default: generated, 1,000 rows)")
    p.add_argument("--ratings", help="a real MovieLens ratings.dat (default: generated)")
    p.add_argument("--full", action="store_true",
                   help="generated MovieLens at ML-1M's full size (1,000,209 ratings)")
    p.add_argument("--ml-users", type=int, default=600)
    p.add_argument("--ml-movies", type=int, default=800)
    p.add_argument("--ml-ratings", type=int, default=50_000)
    p.add_argument("--tab-epochs", type=int, default=10, help="MLP epochs")
    p.add_argument("--ncf-epochs", type=int, default=1, help="NCF epochs")
    args = p.parse_args(argv)
    if args.repeats < 1:
        raise ValueError(f"--repeats >= 1 must hold, got {args.repeats}")
    C.setup(args)
    results = run(args)
    table, facts, _ = summarise(results, args.backends)
    png = plot(facts, args.backends, Path(args.out) / "dataframe_energy.png")
    first = next(iter(results.values()))["study"]
    _, _, prov = C.provenance(first)
    body = "\n".join([
        f"{args.repeats} runs per cell; trimmed mean (20% cut each end) and 95% interval "
        "(lower bounds clipped at 0).",
        "MovieLens: " + ("full ML-1M size" if args.full else
                         f"{args.ml_ratings:,} ratings, {args.ml_users} users, "
                         f"{args.ml_movies} movies") + ("" if args.ratings is None else
                                                        f" (real file {args.ratings})"),
        "'RAM added' = peak RSS during the phase minus RSS at its start (one process runs "
        "every backend, so absolute peaks include libraries loaded by earlier runs).",
        "", table, "",
        f"plot: {png}" if png else "plot: matplotlib missing",
    ])
    C.write_summary(args.out, "Dataframe backends x datasets x models", C.command_line(
        argv, "dataframe_energy.py"), prov, body,
        facts={k: {b: {ph: v for ph, v in d.items()} for b, d in f.items()}
               for k, f in facts.items()})
    return 0


if __name__ == "__main__":
    sys.exit(main())
