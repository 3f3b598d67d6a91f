"""Learning-curve problems for pruning benchmarks: a synthetic one and the Zeus traces per epoch.

Both problems have two objectives, a model quality reached after ``max_step``
epochs and the energy of those epochs (``energy_j``, minimised), and a trial
reports both at every epoch (the quality so far and the joules so far), so a
pruner can stop it early. Hypervolume is scored on the *true* final values of
the complete trials (noiseless, or the expectation over the trace's runs);
pruned trials never count. Search energy is the energy of the epochs every
trial actually ran (pruned ones included).

``synthetic`` (d=4, 30 epochs):
    energy per epoch ``20 + 180 x0`` J (model size); final accuracy
    ``0.55 + 0.4 sqrt(x0) q(x1, x2)`` with ``q`` a bump around the good
    learning-rate / regularisation corner; the curve rises as a power law
    ``a(e) = a_end - (a_end - 0.1) (1 + e / tau) ** -1.5`` with
    ``tau = 1 + 6 x3`` (slow starters that end where fast ones do), plus
    evaluation noise of sd 0.005 per report. Dominated configurations (bad
    ``q``, too much energy for their accuracy) show early; slow starters are
    there to punish a pruner that trusts the first epochs too much. Its joules
    are simulated units, not a measurement.

``zeus-<dataset>`` (the six workloads of the Zeus V100 traces):
    a configuration is (batch size, GPU power limit) (plus learning rate or
    optimiser where the trace varies them independently); one evaluation
    samples one training run of the configuration from ``summary_train.csv``
    and replays it epoch by epoch: the validation metric at epoch ``e`` is the
    best target level the run had reached by then (the trace records the epoch
    each level was first reached; a run holds its last level afterwards), and
    the energy per epoch is the V100 measurement of ``summary_power_v100.csv``
    (time per epoch x average power; Zeus measured them on the GPU). A trial
    trains ``max_step`` epochs: the median epoch at which the workload's runs
    recorded their last level. The true value of a configuration is the mean
    over its runs.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

import ecopt
from ecopt import pareto

__all__ = ["CurveProblem", "ObjectiveNames", "synthetic", "zeus_curves", "ZEUS_WORKLOADS", "make_curve_problem",
           "CURVE_PROBLEMS"]

#: The Zeus workloads: dataset -> (network, metric name, direction).
ZEUS_WORKLOADS: dict[str, tuple[str, str, str]] = {
    "cifar100": ("shufflenetv2", "accuracy", "max"),
    "imagenet": ("resnet50", "accuracy", "max"),
    "librispeech": ("deepspeech2", "wer", "min"),
    "movielens-1m": ("ncf", "hit_rate", "max"),
    "sentiment140": ("bert_base_uncased", "accuracy", "max"),
    "squad": ("bert_base_uncased", "f1", "max"),
}
CURVE_PROBLEMS = ("synthetic", *(f"zeus-{d}" for d in ZEUS_WORKLOADS))


class ObjectiveNames:
    """``directions`` and ``names`` of a problem's ``objectives``."""

    objectives: list[ecopt.Objective]

    @property
    def directions(self) -> list[str]:
        return [o.direction for o in self.objectives]

    @property
    def names(self) -> list[str]:
        return [o.name for o in self.objectives]


@dataclass
class CurveProblem(ObjectiveNames):
    """A two-objective problem whose trials train for ``max_step`` epochs.

    Attributes:
        name: Problem name.
        space: The search space.
        objectives: ``[quality, energy_j]`` (quality ``max``, or ``min`` for an error rate).
        max_step: Epochs of a full trial.
        run: ``(params, rng) -> (quality per epoch (max_step,), joules per epoch)``:
            one sampled training run (raises ``ValueError`` outside the table).
        true_final: ``params -> [quality, energy_j]`` expected at the end.
        ref_point: Reference point in the objectives' units and directions.
        max_hv: Hypervolume of the true front against ``ref_point``.
        budget: Trials per study.
        energy: Provenance of the trials' joules (meter, measured, note).
        info: Facts for the record.
    """

    name: str
    space: ecopt.SearchSpace
    objectives: list[ecopt.Objective]
    max_step: int
    run: Callable[[dict[str, Any], np.random.Generator], tuple[np.ndarray, float]]
    true_final: Callable[[dict[str, Any]], np.ndarray]
    ref_point: np.ndarray
    max_hv: float
    budget: int
    energy: dict[str, Any]
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def n_init(self) -> int:
        """The shared initial design size, ``2 (d + 1)``."""
        return 2 * (self.space.dim + 1)

    def hypervolume(self, Y: np.ndarray) -> float:
        """Hypervolume of true final values ``(n, 2)`` against the reference point."""
        Y = np.asarray(Y, dtype=float).reshape(-1, 2)
        return pareto.hypervolume(Y, self.ref_point, self.directions) if len(Y) else 0.0


def _ref_and_max_hv(Y: np.ndarray, directions: list[str]) -> tuple[np.ndarray, float]:
    ref = pareto.infer_reference_point(Y, directions=directions)
    return ref, pareto.hypervolume(Y, ref, directions)


# ---------------------------------------------------------------------------
# synthetic
# ---------------------------------------------------------------------------

_SYN_E = 30


def _syn_parts(p: dict[str, Any]) -> tuple[float, float, float]:
    x = [float(p[f"x{i}"]) for i in range(4)]
    q = math.exp(-((x[1] - 0.35) ** 2 + (x[2] - 0.6) ** 2) / 0.08)
    a_end = 0.55 + 0.4 * math.sqrt(x[0]) * q
    return a_end, 1.0 + 6.0 * x[3], 20.0 + 180.0 * x[0]


def _syn_curve(a_end: float, tau: float, steps: np.ndarray) -> np.ndarray:
    return a_end - (a_end - 0.1) * (1.0 + steps / tau) ** -1.5


def synthetic(budget: int = 60) -> CurveProblem:
    """The synthetic learning-curve problem (see the module docstring)."""
    space = ecopt.SearchSpace({f"x{i}": ecopt.Float(0.0, 1.0) for i in range(4)})
    steps = np.arange(1, _SYN_E + 1, dtype=float)

    def run(p: dict[str, Any], rng: np.random.Generator) -> tuple[np.ndarray, float]:
        a_end, tau, epj = _syn_parts(p)
        return _syn_curve(a_end, tau, steps) + 0.005 * rng.standard_normal(_SYN_E), epj

    def true_final(p: dict[str, Any]) -> np.ndarray:
        a_end, tau, epj = _syn_parts(p)
        return np.array([float(_syn_curve(a_end, tau, np.array([float(_SYN_E)]))[0]),
                         epj * _SYN_E])

    # The true front: the best q (x1 = 0.35, x2 = 0.6), fastest start (x3 = 0), any size.
    sizes = np.linspace(0.0, 1.0, 2001)
    Y = np.array([true_final({"x0": s, "x1": 0.35, "x2": 0.6, "x3": 0.0}) for s in sizes])
    dirs = ["max", "min"]
    ref, max_hv = _ref_and_max_hv(Y, dirs)
    return CurveProblem(
        "synthetic", space, [ecopt.Objective("accuracy", "max"), ecopt.Objective("energy_j", "min")],
        _SYN_E, run, true_final, ref, max_hv, budget,
        {"meter": "simulated", "measured": False,
         "note": "synthetic joules (20 + 180 x0 per epoch): units of a model, not a measurement"},
        {"d": 4, "noise_sd": 0.005})


# ---------------------------------------------------------------------------
# Zeus traces, per epoch
# ---------------------------------------------------------------------------


def _level_curve(levels: np.ndarray, epochs: np.ndarray, direction: str, E: int) -> np.ndarray:
    """The metric at epochs ``1..E`` of one run: the best level reached by then."""
    order = np.argsort(levels)
    levels, epochs = levels[order], epochs[order]
    step = float(np.min(np.diff(levels))) if levels.size > 1 else 1.0
    floor = levels[0] - step if direction == "max" else levels[-1] + step
    out = np.full(E, floor)
    for lv, ep in zip(levels, epochs):
        if math.isnan(ep):
            continue
        at = np.arange(1, E + 1) >= ep
        out[at] = np.maximum(out[at], lv) if direction == "max" else np.minimum(out[at], lv)
    return out


def zeus_curves(dataset: str, trace_dir: str | Path | None = None, gpu: str = "v100",
                budget: int | None = None) -> CurveProblem:
    """One Zeus workload as a learning-curve problem (see the module docstring).

    Raises:
        ValueError: for an unknown dataset.
        FileNotFoundError: when the traces are missing.
    """
    import pandas as pd

    from benchmarks.problems import DEFAULT_ZEUS_DIR
    from benchmarks.zeus import ZeusTrace, _read_csv

    if dataset not in ZEUS_WORKLOADS:
        raise ValueError(f"dataset must be one of {list(ZEUS_WORKLOADS)}, got {dataset!r}")
    network, metric, direction = ZEUS_WORKLOADS[dataset]
    tdir = Path(trace_dir or DEFAULT_ZEUS_DIR)
    train = _read_csv(tdir / "summary_train.csv", ("dataset", "network", "batch_size",
                                                   "optimizer", "learning_rate", "run",
                                                   "target_metric", "target_epoch"))
    power = _read_csv(tdir / f"summary_power_{gpu}.csv", ("dataset", "network", "batch_size",
                                                          "optimizer", "power_limit",
                                                          "time_per_epoch", "average_power"))
    train = train[(train["dataset"] == dataset) & (train["network"] == network)]
    power = power[(power["dataset"] == dataset) & (power["network"] == network)]
    # A trial trains for the median epoch at which the runs recorded their last level.
    last = train.dropna(subset=["target_epoch"]).groupby(
        ["batch_size", "optimizer", "learning_rate", "run"])["target_epoch"].max()
    E = int(math.ceil(float(np.median(last.to_numpy()))))
    curves: dict[tuple[int, str, float], np.ndarray] = {}
    for (bs, opt, lr), g in train.groupby(["batch_size", "optimizer", "learning_rate"]):
        runs = [_level_curve(r["target_metric"].to_numpy(float), r["target_epoch"].to_numpy(float),
                             direction, E) for _, r in g.groupby("run")]
        curves[(int(bs), str(opt), float(lr))] = np.array(runs)
    rows = []
    for (bs, opt, lr), runs in curves.items():
        for _, pw in power[(power["batch_size"] == bs) & (power["optimizer"] == opt)].iterrows():
            rows.append({"batch_size": bs, "optimizer": opt, "learning_rate": lr,
                         "power_limit": int(pw["power_limit"]),
                         "time_per_epoch_s": float(pw["time_per_epoch"]),
                         "average_power_w": float(pw["average_power"]),
                         "epoch_j": float(pw["time_per_epoch"]) * float(pw["average_power"]),
                         "quality_end": float(runs[:, -1].mean()), "n_runs": len(runs),
                         "epochs": ()})
    configs = pd.DataFrame(rows)
    dims = ["batch_size", "power_limit"]
    if configs["optimizer"].nunique() > 1:
        dims.append("optimizer")
    if (configs.groupby(["batch_size", "optimizer"])["learning_rate"].nunique() > 1).any():
        dims.append("learning_rate")
    trace = ZeusTrace(dataset, network, gpu, float("nan"), configs, dims)
    space = trace.space()

    def row(p: dict[str, Any]) -> Any:
        return configs.iloc[trace._row(p)]

    def run(p: dict[str, Any], rng: np.random.Generator) -> tuple[np.ndarray, float]:
        r = row(p)
        runs = curves[(int(r["batch_size"]), str(r["optimizer"]), float(r["learning_rate"]))]
        return runs[int(rng.integers(len(runs)))].copy(), float(r["epoch_j"])

    def true_final(p: dict[str, Any]) -> np.ndarray:
        r = row(p)
        return np.array([float(r["quality_end"]), float(r["epoch_j"]) * E])

    Y = np.column_stack([configs["quality_end"].to_numpy(), configs["epoch_j"].to_numpy() * E])
    dirs = [direction, "min"]
    ref, max_hv = _ref_and_max_hv(Y, dirs)
    n = len(configs)
    return CurveProblem(
        f"zeus-{dataset}", space, [ecopt.Objective(metric, direction),
                                   ecopt.Objective("energy_j", "min")],
        E, run, true_final, ref, max_hv,
        budget or min(50, int(math.ceil(0.6 * n))),
        {"meter": f"Zeus trace summary_power_{gpu}.csv", "measured": True,
         "note": f"GPU energy per epoch measured by Zeus on an NVIDIA {gpu.upper()} "
                 "(time per epoch x average power), replayed"},
        {"network": network, "n_configs": n, "dims": dims, "epochs": E,
         "front_size": int(pareto.non_dominated(Y, dirs).sum()),
         "runs_per_config": sorted({int(v) for v in configs["n_runs"]})})


def make_curve_problem(name: str, trace_dir: str | Path | None = None) -> CurveProblem:
    """A problem of :data:`CURVE_PROBLEMS` by name.

    Raises:
        ValueError: for an unknown name.
    """
    if name == "synthetic":
        return synthetic()
    if name.startswith("zeus-"):
        return zeus_curves(name.removeprefix("zeus-"), trace_dir)
    raise ValueError(f"unknown problem {name!r}; expected one of {list(CURVE_PROBLEMS)}")
