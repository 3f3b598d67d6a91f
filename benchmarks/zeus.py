"""The Zeus trace problem: real GPU energy-to-accuracy and time-to-accuracy.

Zeus (You et al., NSDI'23, Apache-2.0) published two traces per workload:

* ``summary_train.csv``: for each (dataset, network, batch size, optimizer,
  learning rate) several training runs (``run``) and the epoch at which each
  reached each validation target (``target_epoch``, NaN when never reached).
* ``summary_power_<gpu>.csv``: for each (batch size, optimizer, power limit)
  the measured time per epoch (s) and average GPU power (W). Not stochastic.

The problem: choose batch size and GPU power limit (plus optimizer and
learning rate where the trace varies them independently of batch size) to
minimise ``energy_j = epochs * time_per_epoch * average_power`` and
``time_s = epochs * time_per_epoch``. The four-objective variant
(:data:`OBJECTIVES_4`, problem ``zeus4``) also minimises the average GPU power
``power_w`` (what a power-capped rack cares about) and the batch size
``batch_size`` (a proxy for GPU memory), as energy studies often weigh
quality, energy, latency and memory together. An evaluation samples one of the
configuration's runs that reached the target (so results are noisy, as a
real training run is). Runs that never reached the target are left out: the
trace does not record what they cost; configurations with no such run are
not in the search space (or fail, when a product space holds a hole).

The *true* value of a configuration is its expected cost (mean epochs over
the reaching runs times time per epoch, times power): exact, so the true
Pareto front and maximal hypervolume are computed from the table, with no
approximation. Hypervolume is scored with each objective divided by the
reference point (1.1 x the true front's nadir), so it lies in ``[0, 1)``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

import ecopt
from ecopt import pareto

__all__ = ["ZeusTrace", "DEFAULT_TARGETS", "OBJECTIVES", "OBJECTIVES_4", "power_files"]

#: Default validation targets per (dataset, network), as in the Zeus paper's simulator.
DEFAULT_TARGETS: dict[tuple[str, str], float] = {
    ("cifar100", "shufflenetv2"): 0.6,
    ("imagenet", "resnet50"): 0.65,
    ("librispeech", "deepspeech2"): 40.0,
    ("movielens-1m", "ncf"): 0.41,
    ("sentiment140", "bert_base_uncased"): 0.84,
    ("squad", "bert_base_uncased"): 84.0,
}

_TRAIN_COLS = ("dataset", "network", "batch_size", "optimizer", "learning_rate", "run",
               "target_metric", "target_epoch")
_POWER_COLS = ("dataset", "network", "batch_size", "optimizer", "power_limit",
               "time_per_epoch", "average_power")
#: Reference point = this factor times the true front's nadir.
REF_FACTOR = 1.1
#: Every objective a trace problem can minimise (two by default, four for ``zeus4``).
OBJECTIVES_4 = ("energy_j", "time_s", "power_w", "batch_size")
OBJECTIVES = OBJECTIVES_4[:2]


def power_files(trace_dir: str | Path) -> list[Path]:
    """Every ``summary_power_*.csv`` in ``trace_dir`` (sorted)."""
    return sorted(Path(trace_dir).glob("summary_power_*.csv"))


def _read_csv(path: Path, cols: tuple[str, ...]) -> Any:
    import pandas as pd

    if not path.is_file():
        raise FileNotFoundError(f"Zeus trace file {str(path)!r} does not exist; pass the trace "
                                "directory with --zeus-dir")
    df = pd.read_csv(path)
    missing = [c for c in cols if c not in df.columns]
    if missing:
        raise ValueError(f"{str(path)!r} lacks column(s) {missing}; a Zeus trace has {list(cols)}")
    df = df.copy()
    df["optimizer"] = df["optimizer"].astype(str).str.lower()
    return df


@dataclass
class ZeusTrace:
    """One workload of the Zeus traces on one GPU, joined into a configuration table.

    Attributes:
        dataset: Dataset name (``cifar100``...).
        network: Network name (``shufflenetv2``...).
        gpu: GPU label from the power file's name (``v100``...).
        target_metric: The validation target whose epoch counts.
        configs: One row per configuration: ``batch_size``, ``optimizer``,
            ``learning_rate``, ``power_limit``, ``time_per_epoch_s``,
            ``average_power_w``, ``epochs`` (tuple of target epochs of the runs
            that reached the target), ``n_runs`` (all runs).
        dims: The searched columns, in order.
    """

    dataset: str
    network: str
    gpu: str
    target_metric: float
    configs: Any
    dims: list[str]
    source: dict[str, str] = field(default_factory=dict)

    # -- loading ---------------------------------------------------------------
    @classmethod
    def load(cls, trace_dir: str | Path, dataset: str = "cifar100",
             network: str = "shufflenetv2", gpu: str | None = None,
             target_metric: float | None = None, power_file: str | Path | None = None
             ) -> ZeusTrace:
        """Join ``summary_train.csv`` with a ``summary_power_*.csv``.

        Args:
            trace_dir: Directory holding the traces.
            dataset: Workload dataset.
            network: Workload network.
            gpu: Which ``summary_power_<gpu>.csv`` (default: the only one, or ``v100``).
            target_metric: Validation target (default :data:`DEFAULT_TARGETS`).
            power_file: An explicit power file (overrides ``gpu``).

        Raises:
            FileNotFoundError: when a trace file is missing.
            ValueError: for a malformed file, an unknown workload or a target no run reached.
        """
        trace_dir = Path(trace_dir)
        if power_file is None and not trace_dir.is_dir():
            raise FileNotFoundError(f"Zeus trace directory {str(trace_dir)!r} does not exist; "
                                    "pass the directory with the traces (--zeus-dir)")
        if power_file is None:
            files = power_files(trace_dir)
            if gpu is not None:
                power_file = trace_dir / f"summary_power_{gpu}.csv"
            elif len(files) == 1:
                power_file = files[0]
            elif (trace_dir / "summary_power_v100.csv").is_file():
                power_file = trace_dir / "summary_power_v100.csv"
            else:
                raise FileNotFoundError(
                    f"no single summary_power_*.csv in {str(trace_dir)!r} (found "
                    f"{[f.name for f in files]}); pass gpu= or power_file=")
        power_file = Path(power_file)
        gpu_label = power_file.stem.removeprefix("summary_power_")
        train = _read_csv(trace_dir / "summary_train.csv", _TRAIN_COLS)
        power = _read_csv(power_file, _POWER_COLS)
        train = train[(train["dataset"] == dataset) & (train["network"] == network)]
        power = power[(power["dataset"] == dataset) & (power["network"] == network)]
        if train.empty or power.empty:
            raise ValueError(f"workload ({dataset!r}, {network!r}) is not in both trace files "
                             f"(train rows: {len(train)}, power rows: {len(power)})")
        if target_metric is None:
            target_metric = DEFAULT_TARGETS.get((dataset, network))
            if target_metric is None:
                raise ValueError(f"no default target for ({dataset!r}, {network!r}); "
                                 "pass target_metric=")
        t = train[np.isclose(train["target_metric"].astype(float), float(target_metric))]
        if t.empty:
            raise ValueError(f"target_metric={target_metric} is not a target in the train trace "
                             f"for ({dataset!r}, {network!r}); targets are "
                             f"{sorted(train['target_metric'].unique().tolist())}")
        configs = cls._join(t, power)
        if configs.empty:
            raise ValueError(f"no configuration of ({dataset!r}, {network!r}) reached "
                             f"target_metric={target_metric} in a run with a power profile")
        dims = ["batch_size", "power_limit"]
        if configs["optimizer"].nunique() > 1:
            dims.append("optimizer")
        # The learning rate is searched only where it varies for a fixed batch size and optimizer.
        if (configs.groupby(["batch_size", "optimizer"])["learning_rate"].nunique() > 1).any():
            dims.append("learning_rate")
        return cls(dataset, network, gpu_label, float(target_metric),
                   configs.reset_index(drop=True), dims,
                   {"train": str(trace_dir / "summary_train.csv"), "power": str(power_file)})

    @staticmethod
    def _join(train: Any, power: Any) -> Any:
        import pandas as pd

        rows = []
        keys = ["batch_size", "optimizer", "learning_rate"]
        for (bs, opt, lr), g in train.groupby(keys):
            ep = g["target_epoch"].astype(float).to_numpy()
            reached = tuple(float(e) for e in ep[~np.isnan(ep)])
            if not reached:
                continue
            pw = power[(power["batch_size"] == bs) & (power["optimizer"] == opt)]
            for _, p in pw.iterrows():
                rows.append({"batch_size": int(bs), "optimizer": str(opt),
                             "learning_rate": float(lr), "power_limit": int(p["power_limit"]),
                             "time_per_epoch_s": float(p["time_per_epoch"]),
                             "average_power_w": float(p["average_power"]),
                             "epochs": reached, "n_runs": int(len(ep))})
        return pd.DataFrame(rows, columns=["batch_size", "optimizer", "learning_rate",
                                           "power_limit", "time_per_epoch_s", "average_power_w",
                                           "epochs", "n_runs"])

    # -- values ------------------------------------------------------------------
    def expected(self, objectives: tuple[str, ...] = OBJECTIVES) -> np.ndarray:
        """``(n_configs, len(objectives))`` expected values of every configuration.

        Raises:
            ValueError: for an objective not in :data:`OBJECTIVES_4`.
        """
        bad = [o for o in objectives if o not in OBJECTIVES_4]
        if bad:
            raise ValueError(f"unknown objective(s) {bad}; expected some of {list(OBJECTIVES_4)}")
        c = self.configs
        mean_ep = np.array([np.mean(e) for e in c["epochs"]])
        time_s = mean_ep * c["time_per_epoch_s"].to_numpy()
        power_w = c["average_power_w"].to_numpy()
        cols = {"energy_j": time_s * power_w, "time_s": time_s, "power_w": power_w,
                "batch_size": c["batch_size"].to_numpy(dtype=float)}
        return np.column_stack([cols[o] for o in objectives])

    def true_front(self, objectives: tuple[str, ...] = OBJECTIVES) -> Any:
        """The configurations on the true (expected-value) Pareto front, sorted by the first
        objective."""
        Y = self.expected(objectives)
        mask = pareto.non_dominated(Y, ["min"] * len(objectives))
        front = self.configs[mask].copy()
        for j, o in enumerate(objectives):
            front[o] = Y[mask, j]
        return front.sort_values(objectives[0]).reset_index(drop=True)

    def ref_point(self, objectives: tuple[str, ...] = OBJECTIVES) -> np.ndarray:
        """``REF_FACTOR`` times the true front's nadir."""
        Y = self.expected(objectives)
        F = Y[pareto.non_dominated(Y, ["min"] * len(objectives))]
        return REF_FACTOR * F.max(axis=0)

    def max_hv(self, objectives: tuple[str, ...] = OBJECTIVES) -> float:
        """Hypervolume of the true front, each objective divided by the reference point."""
        r = self.ref_point(objectives)
        M = len(objectives)
        return pareto.hypervolume(self.expected(objectives) / r, [1.0] * M, ["min"] * M)

    def space(self) -> ecopt.SearchSpace:
        """The search space: a product over the searched columns' values."""
        c = self.configs
        params: dict[str, ecopt.space.Parameter] = {}
        for d in self.dims:
            vals = sorted(c[d].unique().tolist())
            if d == "power_limit":
                steps = np.diff(vals)
                if len(vals) > 1 and np.all(steps == steps[0]):
                    params[d] = ecopt.Int(int(vals[0]), int(vals[-1]), step=int(steps[0]))
                else:
                    params[d] = ecopt.Categorical([int(v) for v in vals], ordered=True)
            elif d == "optimizer":
                params[d] = ecopt.Categorical([str(v) for v in vals])
            elif d == "batch_size":
                params[d] = ecopt.Categorical([int(v) for v in vals], ordered=True)
            else:
                params[d] = ecopt.Categorical([float(v) for v in vals], ordered=True)
        return ecopt.SearchSpace(params)

    def _row(self, params: Mapping[str, Any]) -> int:
        c = self.configs
        m = np.ones(len(c), dtype=bool)
        for d in self.dims:
            v = params[d]
            m &= np.isclose(c[d].to_numpy(dtype=float), float(v)) if d != "optimizer" \
                else (c[d].to_numpy() == v)
        idx = np.flatnonzero(m)
        if idx.size == 0:
            raise ValueError(f"configuration {dict(params)} is not in the Zeus trace "
                             f"({self.dataset}/{self.network}, target {self.target_metric})")
        return int(idx[0])

    def true_values(self, params: Mapping[str, Any],
                    objectives: tuple[str, ...] = OBJECTIVES) -> np.ndarray:
        """Expected values of a configuration (default ``[energy_j, time_s]``)."""
        return self.expected(objectives)[self._row(params)]

    def sample(self, params: Mapping[str, Any], rng: np.random.Generator,
               objectives: tuple[str, ...] = OBJECTIVES) -> np.ndarray:
        """The values of one sampled training run of a configuration (default
        ``[energy_j, time_s]``; power and batch size are the configuration's)."""
        row = self.configs.iloc[self._row(params)]
        epochs = row["epochs"][int(rng.integers(len(row["epochs"])))]
        time_s = epochs * row["time_per_epoch_s"]
        cols = {"energy_j": time_s * row["average_power_w"], "time_s": time_s,
                "power_w": row["average_power_w"], "batch_size": float(row["batch_size"])}
        return np.array([cols[o] for o in objectives], dtype=float)

    def problem(self, objectives: tuple[str, ...] = OBJECTIVES) -> Any:
        """This trace as a :class:`benchmarks.problems.Problem` (``zeus``, or ``zeus4``
        with the four objectives)."""
        from benchmarks.problems import Problem

        objectives = tuple(objectives)
        ref = self.ref_point(objectives)
        Y = self.expected(objectives)
        M = len(objectives)
        return Problem(
            name="zeus" if M == 2 else f"zeus{M}", space=self.space(),
            objective_names=list(objectives), ref_point=ref, max_hv=self.max_hv(objectives),
            true_fn=lambda p: self.true_values(p, objectives),
            observe_fn=lambda p, rng: self.sample(p, rng, objectives),
            noise_sd=np.full(M, np.nan), score_scale=ref, budget=50 if M == 2 else 30,
            notes=(f"Zeus trace {self.dataset}/{self.network} on {self.gpu.upper()}, target "
                   f"{self.target_metric}; {len(self.configs)} configurations over "
                   f"{self.dims}; objectives {list(objectives)}, epochs sampled from "
                   "reaching runs"),
            info={"n_configs": int(len(self.configs)),
                  "front_size": int(len(self.true_front(objectives))),
                  "dims": list(self.dims), "expected_range": [Y.min(axis=0).tolist(),
                                                              Y.max(axis=0).tolist()],
                  "thresholds_known": False, **self.source},
        )
