"""ECOpt's NAS comparison over several seeds: qLogNEHVI against random search, with p-values.

``experiments/nas_cnn.py`` compares the methods at one seed; one seed cannot
say whether a difference is the method or the draw. This script runs
``nas_cnn.py`` (same space, objectives, budget and data) once per seed into
``<out>/seed<k>`` and compares the methods across seeds:

* per seed and method: hypervolume of (accuracy, inference samples/J) against
  ONE reference point shared by every seed and method (accuracy threshold,
  lowest samples/J observed anywhere), best accuracy, Pareto-front size and
  the search's energy;
* per statistic: the median of each method over seeds, how many seeds
  qLogNEHVI won, and the one-sided Mann-Whitney U p-value of "qLogNEHVI
  higher than random" (``scipy.stats.mannwhitneyu``, exact for small
  samples). With 5 seeds per arm the smallest possible one-sided p-value is
  1/252 = 0.004; a verdict "holds" needs p < 0.05.

A re-run with the same ``--out`` resumes every seed's studies.

Example:
    python experiments/nas_seeds.py --seeds 0 1 2 3 4 --out runs/nas_seeds --record
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _common as C  # noqa: E402

from ecopt._verdict import HOLDS, NOT_HOLD, NOT_SHOWN, verdict_of_tests  # noqa: E402

from docs.recorded import (  # noqa: E402
    Table,
    command_line,
    estimated_energy,
    git_commit,
    record_dirs,
    write_run,
)

__all__ = ["seed_statistics", "compare_over_seeds", "higher_verdict", "judge_tests", "main"]

METHODS = ("qlognehvi", "random")
#: Statistics compared over seeds (all "higher is better").
STATISTICS = ("hypervolume", "best_accuracy", "n_pareto")


def seed_statistics(points: dict[int, dict[str, list[tuple[float, float]]]],
                    accuracy_ref: float) -> tuple[dict[int, dict[str, dict[str, float]]],
                                                  list[float]]:
    """Per seed and method: hypervolume against one shared reference, best accuracy, front size.

    Args:
        points: seed -> method -> ``(accuracy, samples_per_joule)`` of complete trials.
        accuracy_ref: Accuracy coordinate of the shared reference point.

    Returns:
        ``(stats, reference_point)``; ``stats[seed][method]`` holds
        ``hypervolume``, ``best_accuracy`` and ``n_pareto``.

    Raises:
        ValueError: when no seed has a complete trial.
    """
    import numpy as np

    from ecopt import pareto

    all_spj = [s for by_m in points.values() for p in by_m.values() for _, s in p]
    if not all_spj:
        raise ValueError("seed_statistics needs at least one complete trial, got none")
    ref = [accuracy_ref, min(all_spj)]
    out: dict[int, dict[str, dict[str, float]]] = {}
    for seed, by_m in points.items():
        out[seed] = {}
        for m, p in by_m.items():
            if not p:
                out[seed][m] = {"hypervolume": 0.0, "best_accuracy": float("nan"),
                                "n_pareto": 0.0}
                continue
            Y = np.array(p, dtype=float)
            out[seed][m] = {
                "hypervolume": float(pareto.hypervolume(Y, ref, ["max", "max"])),
                "best_accuracy": float(Y[:, 0].max()),
                "n_pareto": float(pareto.non_dominated(Y, ["max", "max"]).sum()),
            }
    return out, ref


def higher_verdict(a: str, p_greater: float, p_less: float) -> str:
    """The verdict on "``a`` is higher", by the one rule's test form
    (:func:`ecopt._verdict.verdict_of_tests`, at p < 0.05)."""
    if math.isnan(p_greater) or math.isnan(p_less):
        return "cannot tell (no seeds)"
    v = verdict_of_tests(p_greater, p_less)
    if v == HOLDS:
        return f"{HOLDS}: {a} higher (p={p_greater:.3g} < 0.05)"
    if v == NOT_HOLD:
        return f"{NOT_HOLD}: {a} lower (p={p_less:.3g} < 0.05)"
    return f"{NOT_SHOWN} (p={p_greater:.3g} >= 0.05)"


def judge_tests(table: Table, a: str = "qlognehvi") -> Table:
    """The ``tests`` table with its verdict column judged again from its p-values."""
    cols = list(table.columns)
    i_gt = next(i for i, c in enumerate(cols) if c.startswith("Mann-Whitney p"))
    i_lt, i_v = cols.index(f"p ({a} < random)"), cols.index("verdict")
    rows = []
    for r in table.rows:
        r = list(r)
        r[i_v] = higher_verdict(a, float(r[i_gt]), float(r[i_lt]))
        rows.append(r)
    return Table(cols, rows)


def compare_over_seeds(stats: dict[int, dict[str, dict[str, float]]], a: str = "qlognehvi",
                       b: str = "random") -> dict[str, dict[str, Any]]:
    """Median per method, seeds won by ``a``, one-sided Mann-Whitney p of ``a`` > ``b``.

    Returns:
        statistic -> ``{"median_a", "median_b", "wins", "n", "p_greater", "p_less",
        "verdict"}``.
    """
    import numpy as np
    from scipy.stats import mannwhitneyu

    out: dict[str, dict[str, Any]] = {}
    seeds = [s for s in stats if a in stats[s] and b in stats[s]]
    for name in STATISTICS:
        xa = [stats[s][a][name] for s in seeds]
        xb = [stats[s][b][name] for s in seeds]
        p_gt = float(mannwhitneyu(xa, xb, alternative="greater").pvalue) if seeds else float("nan")
        p_lt = float(mannwhitneyu(xa, xb, alternative="less").pvalue) if seeds else float("nan")
        wins = sum(x > y for x, y in zip(xa, xb))
        verdict = higher_verdict(a, p_gt, p_lt)
        out[name] = {"median_a": float(np.median(xa)) if xa else float("nan"),
                     "median_b": float(np.median(xb)) if xb else float("nan"),
                     "wins": int(wins), "n": len(seeds), "p_greater": p_gt, "p_less": p_lt,
                     "verdict": verdict}
    return out


def _points(path: Path) -> list[tuple[float, float]]:
    import ecopt

    st = ecopt.load_study(path)
    # Trials whose samples/J came from a window too short for the meter are left out, as
    # the study's own front leaves them out.
    return [(r.values["accuracy"], r.values["samples_per_joule"]) for r in st.records
            if r.state.value == "complete" and not r.unreliable]


def _energy(path: Path) -> float:
    import ecopt

    return float(sum(r.energy_j for r in ecopt.load_study(path).records))


def main(argv: Sequence[str] | None = None) -> int:
    """Run the experiment; returns the exit status."""
    p = C.base_parser(__doc__.splitlines()[0], "runs/nas_seeds")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    p.add_argument("--trials", type=int, default=16, help="budget per method and seed")
    p.add_argument("--n-init", type=int, default=6, help="qlognehvi: Sobol trials first")
    p.add_argument("--epochs", type=int, default=4)
    p.add_argument("--inference-passes", type=int, default=20)
    p.add_argument("--cifar10", default=None, metavar="DIR")
    p.add_argument("--device", default="auto")
    p.add_argument("--record", nargs="?", const="", default=None, metavar="TAG",
                   help="also write the summary to docs/results/nas_seeds/<date>[-TAG]")
    args = p.parse_args(argv)
    if len(set(args.seeds)) < 2:
        raise SystemExit(f"--seeds needs at least 2 distinct seeds for a test, got {args.seeds}")
    sha = git_commit(Path(__file__).resolve().parents[1])
    nas = C.load_script("nas_cnn")
    out = Path(args.out)
    t0 = time.monotonic()
    load0 = Path("/proc/loadavg").read_text().strip() if Path("/proc/loadavg").exists() else "?"
    for seed in args.seeds:
        sub = ["--out", str(out / f"seed{seed}"), "--seed", str(seed), "--methods",
               ",".join(METHODS), "--trials", str(args.trials), "--n-init", str(args.n_init),
               "--epochs", str(args.epochs), "--inference-passes", str(args.inference_passes),
               "--meter", args.meter, "--threads", str(args.threads), "--device", args.device,
               "--no-hand", "--quiet"]
        if args.cifar10:
            sub += ["--cifar10", args.cifar10]
        if args.overwrite:
            sub.append("--overwrite")
        C.say(f"nas_seeds: seed {seed}")
        nas.main(sub)
    points = {s: {m: _points(out / f"seed{s}" / m) for m in METHODS} for s in args.seeds}
    acc_ref = 0.1 if args.cifar10 else 0.5
    stats, ref = seed_statistics(points, acc_ref)
    cmp = compare_over_seeds(stats)
    energy = {s: {m: _energy(out / f"seed{s}" / m) for m in METHODS} for s in args.seeds}
    per_seed = Table(["seed", "method", "trials", "hypervolume (shared ref)", "best accuracy",
                      "Pareto-optimal", "search energy J (ESTIMATED)"],
                     [[s, m, len(points[s][m]), stats[s][m]["hypervolume"],
                       stats[s][m]["best_accuracy"], int(stats[s][m]["n_pareto"]), energy[s][m]]
                      for s in args.seeds for m in METHODS])
    tests = Table(["statistic", "qlognehvi median", "random median", "seeds qlognehvi higher",
                   "Mann-Whitney p (qlognehvi > random)", "p (qlognehvi < random)", "verdict"],
                  [[k, v["median_a"], v["median_b"], f"{v['wins']} of {v['n']}", v["p_greater"],
                    v["p_less"], v["verdict"]] for k, v in cmp.items()])
    load1 = Path("/proc/loadavg").read_text().strip() if Path("/proc/loadavg").exists() else "?"
    data = "CIFAR-10" if args.cifar10 else "scikit-learn digits as 1x8x8 images (NOT CIFAR-10)"
    notes = [f"Data: {data}; {args.epochs} epochs per model; {args.trials} trials per method "
             f"and seed (qlognehvi: {args.n_init} Sobol first); seeds {args.seeds}.",
             f"Hypervolume of (accuracy, inference samples/J) against one reference point for "
             f"every seed and method: accuracy {ref[0]}, samples/J {ref[1]:.6g} (the lowest "
             "observed anywhere).",
             "Mann-Whitney U, one-sided, exact; with n seeds per arm the smallest possible "
             "p-value is 1/C(2n, n). Samples/J is ESTIMATED from CPU time (no power counter).",
             f"/proc/loadavg at start: {load0}; at end: {load1} (shared machine)."]
    facts = {"wall_s": time.monotonic() - t0, "reference_point": ref, "tests": cmp,
             "per_seed": {str(s): stats[s] for s in stats}}
    for d in record_dirs(out, "nas_seeds", args.record):
        write_run(d, script="experiments/nas_seeds.py",
                  command=command_line("experiments/nas_seeds.py", argv),
                  tables={"per_seed": per_seed, "tests": tests},
                  energy=estimated_energy(meter=args.meter),
                  notes=notes, facts=facts, git=sha,
                  title="NAS (nas_cnn.py): qLogNEHVI against random search over seeds")
    if not args.quiet:
        print((out / "summary.md").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
