"""Run the same small search with two samplers and compare their fronts.

The objective is a cheap stand-in for a model: a numpy MLP forward pass whose
width and batch size set both its "accuracy" (a smooth made-up curve) and its
real cost, so inference samples per joule differ between configurations. Energy
is estimated from CPU time here (``meter="estimate"``); pass ``--meter auto`` on
a machine with an energy counter.

    python examples/compare_samplers.py --trials 16 --samplers random,qlognehvi
    ecopt compare runs/compare/random runs/compare/qlognehvi -o overlay.png
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import numpy as np

import ecopt
from ecopt.report import build_compare

SPACE = ecopt.SearchSpace({
    "width": ecopt.Int(16, 512, log=True),
    "batch_size": ecopt.Int(1, 64, log=True),
})
OBJECTIVES = [ecopt.Objective("accuracy", "max"), ecopt.Objective("samples_per_joule", "max")]
N_SAMPLES = 512


def objective(trial: ecopt.Trial) -> dict[str, float]:
    """A forward pass of a 2-layer MLP over N_SAMPLES inputs, batch by batch."""
    width, batch = trial["width"], trial["batch_size"]
    rng = np.random.default_rng(0)
    w1 = rng.standard_normal((64, width))
    w2 = rng.standard_normal((width, 10))
    x = rng.standard_normal((N_SAMPLES, 64))

    def infer() -> None:
        for i in range(0, N_SAMPLES, batch):
            np.maximum(x[i:i + batch] @ w1, 0.0) @ w2

    # One pass takes about a millisecond, too short for a meter: repeat it in one window.
    trial.repeat_in_phase("inference", infer, samples_per_call=N_SAMPLES)
    accuracy = 0.98 - 0.25 * math.exp(-width / 60) - 0.01 * math.log2(batch) / 6
    return {"accuracy": accuracy, "samples_per_joule": trial.samples_per_joule("inference")}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--trials", type=int, default=16)
    p.add_argument("--samplers", default="random,sobol",
                   help="comma-separated sampler names (default random,sobol)")
    p.add_argument("--meter", default="estimate")
    p.add_argument("--out", default="runs/compare", help="parent directory of the studies")
    p.add_argument("--png", default=None, help="write the overlay figure here")
    args = p.parse_args(argv)

    dirs = []
    for name in args.samplers.split(","):
        path = Path(args.out) / name
        with ecopt.Study(SPACE, OBJECTIVES, storage=path, sampler=name, meter=args.meter,
                         seed=0, overwrite=True) as study:
            study.optimize(objective, n_trials=args.trials, show_progress=False)
        dirs.append(path)

    data = build_compare(dirs)
    est = " (estimated)" if data.energy_estimated else ""
    print("shared reference point:", ", ".join(f"{v:.4g}" for v in data.reference_point))
    for e in data.entries:
        print(f"{e.name:>12}: hypervolume {e.hypervolume:.4g}, front {list(e.front_numbers)}, "
              f"search energy {e.search_energy_j:.4g} J{est}")
    if args.png:
        from ecopt import plot

        plot.compare(data).savefig(args.png, dpi=plot.DPI)
        print("wrote", args.png)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
