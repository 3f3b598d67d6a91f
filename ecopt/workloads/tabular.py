"""A ready objective: an MLP on the Insurance table, with data-side knobs searchable.

Regression (``task="regression"``: predict ``charges``, report ``rmse`` in the
table's units) or classification (``task="classification"``: predict
``smoker``, report ``accuracy``). Every trial runs the input pipeline with the
trial's ``backend`` and loader knobs, so a study can search them together with
the model's:

========================  ===============================================
knob (``trial.params``)   meaning (default in brackets)
========================  ===============================================
``backend``               ``pandas`` / ``polars`` / ``dask`` [pandas]
``batch_size``            training batch [64]
``num_workers``           DataLoader workers, at most the CPU cores [0]
``prefetch_factor``       batches each worker prepares ahead [2]
``pin_memory``            page-locked batches (CUDA only) [True]
``cache``                 keep preprocessed tensors across epochs [True]
``lr``, ``hidden``,       Adam learning rate [1e-2], hidden width [64],
``depth``, ``epochs``     hidden layers [2], epochs [20]
``threads``               ``torch.set_num_threads`` for the trial, or
                          ``None`` to leave torch's setting [None]
``precision``             ``float32`` / ``bfloat16`` / ``float16``
                          autocast [float32]
========================  ===============================================

The model, every batch and the loss live on ``device`` (``auto``: the GPU when
there is one); on CUDA the loader pins batches (``pin_memory``, on by default
there) and copies them with ``non_blocking=True``; a CUDA out-of-memory makes
the trial infeasible; ``peak_host_rss_gb`` (and on CUDA
``peak_device_memory_gb``) are recorded per trial (see
:mod:`ecopt.workloads.device`).

On a small, busy CPU, torch's intra-op threads can spin against each other,
so a step can be much slower with more threads; ``threads`` makes that
searchable.

Phases: ``load`` (read the file), ``preprocess`` (split the labelled rows,
then impute -> encode -> normalise -> tensors on the training rows, fitting
the constants there), ``train`` (with the input pipeline inside: without
``cache`` each epoch re-runs it), ``inference``: the held-out rows read from
the file again through the backend, preprocessed with the training rows'
constants (nothing refitted) and sliced into ``batch_size`` batches by the
library (:meth:`ecopt.data.TablePipeline.held_out_batches`), each batch a
tensor fed to the model; repeated in one window until the meter resolves it.
Each phase's peak RSS is recorded as ``peak_ram_mb_<phase>``. The objective returns the quality
metric and ``train_rows_per_joule``: training samples (rows x epochs) per joule
of load + preprocess + train, i.e. the end-to-end training efficiency the
data-side knobs move (called ``samples_per_joule`` before; that name, which
means inference samples per joule elsewhere in ecopt, still works in
``returns`` with a ``DeprecationWarning``). ``samples_per_joule_train`` and
``samples_per_joule_inference`` (each phase's own samples per joule) are
recorded as metrics too.

The test rows are a seeded 20 % of the rows with a target; imputation means,
categories and normalisation constants come from the other 80 % alone.

Example:
    >>> objective = TabularObjective(task="regression")
    >>> space = ecopt.SearchSpace({"backend": ecopt.Categorical(["pandas", "polars", "dask"]),
    ...                            "batch_size": ecopt.Int(16, 256, log=True),
    ...                            "lr": ecopt.Float(1e-3, 1e-1, log=True)})
    >>> study = ecopt.Study(space, [ecopt.Objective("rmse", "min"),
    ...                             ecopt.Objective("train_rows_per_joule", "max")])
    >>> study.optimize(objective, n_trials=20)
"""

from __future__ import annotations

import math
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ecopt.data.loader import LoaderConfig, make_loader
from ecopt.data.memory import measured_phase, measured_repeat
from ecopt.data.pipeline import TablePipeline
from ecopt.data.schema import INSURANCE, INSURANCE_CLASSIFICATION, TableSchema
from ecopt.trial import Trial
from ecopt.workloads.device import (
    Precision,
    place_model,
    resolve_device,
    to_device,
    trial_on_device,
)

__all__ = ["TabularObjective", "build_mlp_regressor", "profile_target", "finish_trial",
           "check_returns", "TRAIN_METRIC", "DEPRECATED_TRAIN_METRIC",
           "generated_path", "set_threads", "DeviceObjective", "SEED_PARAM", "model_seed"]

#: A trial param that, when present, seeds the model instead of the trial number.
SEED_PARAM = "seed"

_GENERATED: dict[tuple[Any, ...], Path] = {}


def generated_path(kind: str, key: tuple[Any, ...], writer: Callable[[Path], Path]) -> Path:
    """A generated data file for ``(kind, key)``, written once per process in a temp dir."""
    k = (kind, *key)
    if k not in _GENERATED or not _GENERATED[k].exists():
        d = Path(tempfile.mkdtemp(prefix=f"ecopt-{kind}-"))
        _GENERATED[k] = writer(d)
    return _GENERATED[k]


#: The unqualified ``samples_per_joule`` means inference samples per joule everywhere in
#: ecopt (``trial.samples_per_joule("inference")``, the NAS and classifier workloads); the
#: data workloads' end-to-end training figure is therefore called ``train_rows_per_joule``.
TRAIN_METRIC = "train_rows_per_joule"
#: Its old name, still accepted in ``returns`` with a ``DeprecationWarning``.
DEPRECATED_TRAIN_METRIC = "samples_per_joule"


def check_returns(returns: Sequence[str], owner: str) -> tuple[str, ...]:
    """``returns`` as a tuple, warning once when it asks for the deprecated training metric.

    Args:
        returns: Names the workload should return.
        owner: The workload's class name, for the warning.

    Returns:
        The names, unchanged (the old name keeps working: the same number is
        returned under it).
    """
    out = tuple(returns)
    if DEPRECATED_TRAIN_METRIC in out:
        import warnings

        warnings.warn(
            f"{owner}: returns={list(out)} asks for 'samples_per_joule', which these data "
            f"workloads used for training rows (x epochs) per joule of load + preprocess + "
            f"train; that figure is now named '{TRAIN_METRIC}' (in ecopt 'samples_per_joule' "
            "means inference samples per joule). The old name still returns the training "
            f"figure for now; rename the objective to '{TRAIN_METRIC}'",
            DeprecationWarning, stacklevel=3)
    return out


def finish_trial(trial: Trial, quality_name: str, quality: float, train_samples: int,
                 returns: Sequence[str]) -> dict[str, float]:
    """Record samples/J metrics and return the names the study asked for.

    ``train_rows_per_joule`` = training samples (rows x epochs) per joule of
    load + preprocess + train (returned under ``samples_per_joule`` too when
    ``returns`` names the deprecated alias); ``samples_per_joule_train`` and
    ``samples_per_joule_inference`` are each phase's own samples per joule.
    Anything computed but not in ``returns`` goes to ``trial.set_metric``.
    """
    pipe = [p for p in ("load", "preprocess", "train") if p in trial.phases]
    e_pipe = sum(trial.phases[p].energy_j for p in pipe)
    values: dict[str, float] = {quality_name: float(quality)}
    asked = TRAIN_METRIC in returns or DEPRECATED_TRAIN_METRIC in returns
    if e_pipe > 0:
        values[TRAIN_METRIC] = train_samples / e_pipe
        if DEPRECATED_TRAIN_METRIC in returns:
            values[DEPRECATED_TRAIN_METRIC] = values[TRAIN_METRIC]
        if asked and all(trial.phases[p].short_window for p in pipe):
            for p in pipe:  # every window of the figure is noise: the trial says so
                trial.energy_j(p)
    for ph in ("train", "inference"):
        rec = trial.phases.get(ph)
        if rec is not None and rec.energy_j > 0:
            name = f"samples_per_joule_{ph}"
            # Read through the trial (which marks a short window's figure) only when returned.
            spj = trial.samples_per_joule(ph) if name in returns else rec.samples_per_joule
            if spj is not None:
                values[name] = spj
    for ph, rec in trial.phases.items():
        trial.set_metric(f"duration_s_{ph}", rec.duration_s)
        trial.set_metric(f"energy_j_{ph}", rec.energy_j)
    trial.set_user_attr("energy_measured", all(r.measured for r in trial.phases.values()))
    out: dict[str, float] = {}
    for k, v in values.items():
        if k in returns:
            out[k] = v
        else:
            trial.set_metric(k, v)
    missing = [r for r in returns if r not in out]
    if missing:
        raise ValueError(f"cannot return {missing}: the meter gave no energy (use a meter "
                         "with energy, e.g. meter='estimate')"
                         if {TRAIN_METRIC, DEPRECATED_TRAIN_METRIC} & set(missing)
                         else f"unknown return names {missing}")
    return out


class DeviceObjective:
    """``__call__`` of the data workloads: device and precision resolved, ``_run`` on the device.

    Subclasses give ``device``, ``params(trial)`` (the trial's knobs with defaults,
    ``precision`` among them) and ``_run(trial, params, device, precision)``. The
    device is checked and the precision validated before anything runs; the run
    is wrapped in :func:`ecopt.workloads.device.trial_on_device` (memory peaks,
    CUDA out-of-memory -> infeasible).
    """

    device: str

    def params(self, trial: Trial) -> dict[str, Any]:
        raise NotImplementedError

    def _run(self, trial: Trial, p: dict[str, Any], device: str, prec: Precision
             ) -> dict[str, float]:
        raise NotImplementedError

    def __call__(self, trial: Trial) -> dict[str, float]:
        p = self.params(trial)
        device = resolve_device(self.device)
        prec = Precision(str(p["precision"]), device)
        with trial_on_device(trial, device):
            return self._run(trial, p, device, prec)


def model_seed(trial: Trial, base: int) -> int:
    """The seed of a trial's model initialisation and training order.

    ``base + trial.number`` by default, so that the trials of a search start from
    different weights; the trial's :data:`SEED_PARAM` param (``seed``) when it has one,
    so that configurations compared with each other (the same repeat of several
    dataframe backends) train from the same weights and differ only in what is compared.

    Raises:
        ValueError: when the ``seed`` param is not a non-negative integer.
    """
    if SEED_PARAM not in trial.params:
        return base + trial.number
    s = trial.params[SEED_PARAM]
    if isinstance(s, bool) or not isinstance(s, (int, float)) or int(s) != s or s < 0:
        raise ValueError(f"the {SEED_PARAM!r} param must be a non-negative integer, got {s!r}")
    return int(s)


def set_threads(threads: Any) -> None:
    """``torch.set_num_threads(threads)`` unless ``threads`` is None (validated)."""
    if threads is None:
        return
    if isinstance(threads, bool) or int(threads) != threads or int(threads) < 1:
        raise ValueError(f"threads must be a positive integer or None, got {threads!r}")
    import torch

    torch.set_num_threads(int(threads))


def build_mlp_regressor(in_dim: int, out_dim: int, hidden: int, depth: int) -> Any:
    """``depth`` hidden layers of ``hidden`` ReLU units, then a linear output of ``out_dim``."""
    import torch.nn as nn

    for what, v in (("in_dim", in_dim), ("out_dim", out_dim), ("hidden", hidden)):
        if int(v) < 1:
            raise ValueError(f"{what} >= 1 must hold, got {what}={v}")
    if int(depth) < 0:
        raise ValueError(f"depth >= 0 must hold, got depth={depth}")
    layers: list[Any] = []
    d = in_dim
    for _ in range(int(depth)):
        layers += [nn.Linear(d, int(hidden)), nn.ReLU()]
        d = int(hidden)
    layers.append(nn.Linear(d, out_dim))
    return nn.Sequential(*layers)


@dataclass
class TabularObjective(DeviceObjective):
    """MLP on Insurance with searchable backend and loader knobs (see module docstring).

    Args:
        task: ``"regression"`` (charges, RMSE) or ``"classification"`` (smoker, accuracy).
        data: An Insurance CSV/Parquet file; ``None`` generates one of ``n_rows``.
        n_rows: Rows of the generated table.
        missing_frac: Missing cells in the generated table.
        returns: Names the objective returns (the study's objectives);
            everything else is recorded with ``trial.set_metric``.
        defaults: Knob values used when the trial does not set them.
        seed: Split, generator and training seed.
        device: ``auto``, ``cpu``, ``cuda`` or ``cuda:N``.
    """

    task: str = "regression"
    data: str | None = None
    n_rows: int = 1000
    missing_frac: float = 0.05
    returns: Sequence[str] | None = None
    defaults: dict[str, Any] = field(default_factory=dict)
    test_fraction: float = 0.2
    seed: int = 0
    device: str = "auto"

    DEFAULTS = {"backend": "pandas", "batch_size": 64, "num_workers": 0, "prefetch_factor": 2,
                "pin_memory": True, "cache": True, "lr": 1e-2, "hidden": 64, "depth": 2,
                "epochs": 20, "threads": None, "precision": "float32"}

    def __post_init__(self) -> None:
        if self.task not in ("regression", "classification"):
            raise ValueError(f"task must be 'regression' or 'classification', got {self.task!r}")
        if not 0 < self.test_fraction < 1:
            raise ValueError(f"test_fraction must lie in (0, 1), got {self.test_fraction}")
        self.quality = "rmse" if self.task == "regression" else "accuracy"
        if self.returns is None:
            self.returns = (self.quality, TRAIN_METRIC)
        self.returns = check_returns(self.returns, type(self).__name__)

    @property
    def schema(self) -> TableSchema:
        return INSURANCE if self.task == "regression" else INSURANCE_CLASSIFICATION

    def path(self) -> Path:
        """The data file (generated on first use when ``data`` is None)."""
        if self.data is not None:
            return Path(self.data)
        from ecopt.data.datasets import write_insurance

        return generated_path("insurance", (self.n_rows, self.missing_frac, self.seed),
                              lambda d: write_insurance(d / "insurance.csv", self.n_rows,
                                                        self.seed, self.missing_frac))

    def params(self, trial: Trial) -> dict[str, Any]:
        return {**self.DEFAULTS, **self.defaults, **trial.params}

    def split(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        """Seeded ``(train, test)`` positions among ``n`` rows, each sorted."""
        rng = np.random.default_rng(self.seed)
        perm = rng.permutation(n)
        n_test = max(1, int(round(n * self.test_fraction)))
        return np.sort(perm[n_test:]), np.sort(perm[:n_test])

    def file_split(self, labelled: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`split` over the labelled rows, as file positions (what the backends select)."""
        tr, te = self.split(len(labelled))
        return labelled[tr], labelled[te]

    def _run(self, trial: Trial, p: dict[str, Any], device: str, prec: Precision
             ) -> dict[str, float]:
        import torch

        set_threads(p.get("threads"))
        cfg = LoaderConfig.from_params(p)
        pipe = TablePipeline(self.path(), self.schema, str(p["backend"]))
        epochs = int(p["epochs"])
        with measured_phase(trial, "load"):
            frame = pipe.read()
        with measured_phase(trial, "preprocess"):
            tr, te = self.file_split(pipe.labelled_rows(frame))
            # Constants (means, stds, categories) fitted on the training rows only.
            table = pipe.preprocess(frame, rows=tr)
        n_train = len(table)

        def produce() -> tuple[Any, ...]:
            t = pipe.preprocess(pipe.read(), rows=tr)
            return t.features, t.target

        loader = make_loader(produce, cfg, device=device)
        loader.prime((table.features, table.target))
        torch.manual_seed(model_seed(trial, self.seed))
        reg = self.task == "regression"
        y_tr = table.target
        y_mu = float(y_tr.float().mean()) if reg else 0.0
        y_sd = float(y_tr.float().std()) if reg and len(y_tr) > 1 else 1.0
        out_dim = 1 if reg else len(table.target_classes)
        model = place_model(build_mlp_regressor(table.features.shape[1], out_dim,
                                                int(p["hidden"]), int(p["depth"])), device)
        opt = torch.optim.Adam(model.parameters(), lr=float(p["lr"]))
        loss_fn = torch.nn.MSELoss() if reg else torch.nn.CrossEntropyLoss()
        with measured_phase(trial, "train", samples=n_train * epochs):
            model.train()
            for _ in range(epochs):
                for xb, yb in loader:
                    opt.zero_grad()
                    with prec.autocast():
                        out = model(xb)
                        loss = (loss_fn(out.squeeze(1).float(), (yb - y_mu) / y_sd) if reg
                                else loss_fn(out, yb))
                    prec.step(loss, opt)
        model.eval()
        stats, bs = table.stats, int(p["batch_size"])

        def infer() -> float:
            # The held-out rows read from the file, preprocessed with the training split's
            # constants and batched by the backend, batch by batch into the model.
            total, n = 0.0, 0
            for batch in pipe.held_out_batches(stats, te, bs):
                x_b, y_b = to_device((batch.features, batch.target), device,
                                     pin=loader.pin_memory)
                with torch.no_grad(), prec.autocast():
                    pred = model(x_b).float()
                if reg:
                    total += float(((pred.squeeze(1) * y_sd + y_mu - y_b) ** 2).sum())
                else:
                    total += float((pred.argmax(1) == y_b).sum())
                n += len(batch)
            return math.sqrt(total / n) if reg else total / n

        # Repeated in one window until the meter resolves it (one pass can take < 1 ms).
        q = measured_repeat(trial, "inference", infer, samples_per_call=len(te))
        if not math.isfinite(q):
            raise FloatingPointError(f"{self.quality} is {q} (training diverged at lr={p['lr']})")
        trial.set_user_attr("loader", cfg.to_dict())
        trial.set_user_attr("backend", str(p["backend"]))
        return finish_trial(trial, self.quality, q, n_train * epochs, list(self.returns or ()))


def profile_target(data: str | None = None, backend: str = "pandas", workdir: str | None = None,
                   task: str = "regression") -> tuple[TablePipeline, Callable[[Any], None]]:
    """The Insurance pipeline and one training step of the default MLP (for ``ecopt profile``)."""
    import torch

    obj = TabularObjective(task=task, data=data)
    pipe = TablePipeline(obj.path(), obj.schema, backend)
    n_feat = len(pipe.run().feature_names)
    model = build_mlp_regressor(n_feat, 1, 64, 2)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)

    def step(batch: Any) -> None:
        xb, yb = batch[0], batch[-1]
        opt.zero_grad()
        loss = ((model(xb).squeeze(1) - yb.float() / 1e4) ** 2).mean()
        loss.backward()
        opt.step()

    return pipe, step
