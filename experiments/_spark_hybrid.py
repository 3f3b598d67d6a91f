"""Seed 002's film models in torch, and the hybrid MLP-embedding model trained on Spark's executors.

MLlib has no embedding layers, so ``experiments/imdb_films.py`` trains its torch
model inside Spark:

* the features are extracted with Spark DataFrames (MLlib stages fitted on the
  training rows, built by ``imdb_films``); :func:`cache_arrays` turns each
  partition's rows into numpy arrays once and caches them on its executor;
* :func:`train_spark` trains by synchronous parameter averaging (local SGD):
  in every round each partition starts from the driver's weights and Adam
  state, takes Adam steps over its next share of its own training rows, and
  the driver averages the weights and Adam moments, weighted by rows.
  ``syncs`` rounds make one epoch, so every training row is seen once per
  epoch, as in the local run; with ``P`` partitions an epoch takes about
  ``1 / P`` of the local run's sequential steps, each on a batch of the same
  size;
* :func:`predict_spark` scores the held-out rows on the executors.

The net is :func:`build_film_model`, the one the local run trains, with the
same learning rate, weight decay, batch size and epochs.

This module is imported by reference on the executors (their ``PYTHONPATH`` is
the driver's ``sys.path``), which is why it is a module of its own.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import numpy as np

__all__ = ["FILM_NETS", "LR", "WEIGHT_DECAY", "BATCH", "build_film_model", "bag",
           "cache_arrays", "train_round", "average", "train_spark", "predict_spark"]

#: The torch film models.
FILM_NETS = ("mlp_onehot", "hybrid_embedding")
LR, WEIGHT_DECAY, BATCH = 3e-3, 1e-6, 256


def build_film_model(kind: str, n_num: int, n_mpaa: int, n_decade: int, buckets: int,
                     hidden: int = 64, dim: int = 16) -> Any:
    """``mlp_onehot`` (first layer over the one-hot vector) or ``hybrid_embedding``.

    Args:
        kind: One of :data:`FILM_NETS`.
        n_num: Numeric inputs (z-scored numerics and genre flags).
        n_mpaa, n_decade: Codes of MPAA rating and decade (the unseen code included).
        buckets: Hash buckets of the title words.
        hidden: Width of the hidden layer.
        dim: Width of the title-word embeddings (hybrid).

    Returns:
        A ``torch.nn.Module``: ``net(num, mpaa, decade, flat, offsets)`` -> logits ``(n,)``.
    """
    import torch
    import torch.nn as nn

    class OneHotMLP(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            # A linear layer over the one-hot columns is a sum of one row per active column.
            self.words = nn.EmbeddingBag(buckets, hidden, mode="sum")
            self.mpaa = nn.Embedding(n_mpaa, hidden)
            self.decade = nn.Embedding(n_decade, hidden)
            self.num = nn.Linear(n_num, hidden)
            self.head = nn.Sequential(nn.ReLU(), nn.Linear(hidden, 1))

        def forward(self, num: Any, mpaa: Any, decade: Any, flat: Any, off: Any) -> Any:
            h = self.num(num) + self.mpaa(mpaa) + self.decade(decade) + self.words(flat, off)
            return self.head(h).squeeze(1)

    class Hybrid(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.words = nn.EmbeddingBag(buckets, dim, mode="mean")
            self.mpaa, self.decade = nn.Embedding(n_mpaa, 4), nn.Embedding(n_decade, 4)
            self.mlp = nn.Sequential(nn.Linear(n_num + dim + 8, hidden), nn.ReLU(),
                                     nn.Linear(hidden, 1))

        def forward(self, num: Any, mpaa: Any, decade: Any, flat: Any, off: Any) -> Any:
            z = torch.cat([num, self.words(flat, off), self.mpaa(mpaa), self.decade(decade)], 1)
            return self.mlp(z).squeeze(1)

    if kind == "mlp_onehot":
        return OneHotMLP()
    if kind == "hybrid_embedding":
        return Hybrid()
    raise ValueError(f"kind must be one of {FILM_NETS}, got {kind!r}")


def bag(words: Sequence[Sequence[int]]) -> tuple[Any, Any]:
    """``EmbeddingBag`` inputs: flat indices and offsets (an empty title gets bucket 0)."""
    import torch

    words = [w if len(w) else [0] for w in words]
    flat = torch.tensor([int(c) for w in words for c in w], dtype=torch.long)
    offsets = torch.tensor(np.r_[0, np.cumsum([len(w) for w in words])[:-1]], dtype=torch.long)
    return flat, offsets


# ---- executor side -------------------------------------------------------------------------

def _arrays(index: int, rows: Iterable[Any]) -> Iterator[dict[str, Any]]:
    """One partition's rows (``x``, ``mpaa_i``, ``decade_i``, ``title_tf``, ``good``,
    ``is_test``) as one dict of numpy arrays."""
    rows = list(rows)
    if not rows:
        return
    yield {"index": index,
           "num": np.array([r["x"].toArray() for r in rows], dtype=np.float32),
           "mpaa": np.array([int(r["mpaa_i"]) for r in rows], dtype=np.int64),
           "decade": np.array([int(r["decade_i"]) for r in rows], dtype=np.int64),
           "words": [r["title_tf"].indices.tolist() for r in rows],
           "label": np.array([r["good"] for r in rows], dtype=np.float32),
           "is_test": np.array([bool(r["is_test"]) for r in rows])}


def _net(state: dict[str, Any], dims: dict[str, int]) -> Any:
    import torch

    torch.set_num_threads(1)  # one core per executor
    net = build_film_model(dims["kind"], dims["n_num"], dims["n_mpaa"], dims["n_decade"],
                           dims["buckets"])
    net.load_state_dict(state["model"])
    return net


def train_round(state: dict[str, Any], part: dict[str, Any], dims: dict[str, int], epoch: int,
                share: int, shares: int, seed: int) -> tuple[dict[str, Any], int]:
    """Adam steps over one share of a partition's training rows; ``(new state, rows)``.

    The partition's training rows are shuffled once per epoch (seeded by ``seed``, the epoch
    and the partition's index) and cut into ``shares`` shares; round ``share`` trains on one.
    """
    import copy

    import torch

    rows = np.flatnonzero(~part["is_test"])
    order = rows[np.random.default_rng([seed, epoch, part["index"]]).permutation(len(rows))]
    chunk = np.array_split(order, shares)[share]
    if len(chunk) == 0:
        return state, 0
    net = _net(state, dims)
    opt = torch.optim.Adam(net.parameters(), lr=LR, weight_decay=WEIGHT_DECAY)
    if state["opt"] is not None:
        # Adam keeps the loaded moment tensors and updates them in place: without a copy, a
        # task would change the state that the next task of this worker reads from the same
        # broadcast (or, on the driver, the next partition's start).
        opt.load_state_dict(copy.deepcopy(state["opt"]))
    num, mpaa, dec, y = (torch.from_numpy(part[k]) for k in ("num", "mpaa", "decade", "label"))
    loss_fn = torch.nn.BCEWithLogitsLoss()
    net.train()
    for s in range(0, len(chunk), BATCH):
        b = torch.from_numpy(chunk[s:s + BATCH])
        flat, off = bag([part["words"][i] for i in b.tolist()])
        opt.zero_grad()
        loss_fn(net(num[b], mpaa[b], dec[b], flat, off), y[b]).backward()
        opt.step()
    return {"model": net.state_dict(), "opt": opt.state_dict()}, len(chunk)


def average(results: Sequence[tuple[dict[str, Any], int]]) -> dict[str, Any]:
    """The row-weighted mean of the partitions' weights and Adam moments (and step counts)."""
    import copy

    done = [(s, n) for s, n in results if n > 0]
    if not done:
        raise ValueError(f"at least one partition must train rows, got counts "
                         f"{[n for _, n in results]}")
    total = float(sum(n for _, n in done))

    def mean(get: Any) -> Any:
        return sum(get(s) * (n / total) for s, n in done)

    model = {k: mean(lambda s, k=k: s["model"][k].float()).to(done[0][0]["model"][k].dtype)
             for k in done[0][0]["model"]}
    opt = copy.deepcopy(done[0][0]["opt"])
    for pid, st in opt["state"].items():
        for key in st:
            st[key] = mean(lambda s, pid=pid, key=key: s["opt"]["state"][pid][key])
    return {"model": model, "opt": opt}


def _predict(state: dict[str, Any], part: dict[str, Any], dims: dict[str, int]
             ) -> tuple[np.ndarray, np.ndarray]:
    import torch

    test = np.flatnonzero(part["is_test"])
    if len(test) == 0:
        return np.zeros(0), np.zeros(0)
    net = _net(state, dims)
    net.eval()
    t = torch.from_numpy(test)
    with torch.no_grad():
        flat, off = bag([part["words"][i] for i in test.tolist()])
        logits = net(torch.from_numpy(part["num"])[t], torch.from_numpy(part["mpaa"])[t],
                     torch.from_numpy(part["decade"])[t], flat, off)
    return torch.sigmoid(logits).numpy().astype(np.float64), part["label"][test].astype(np.float64)


# ---- driver side ---------------------------------------------------------------------------

def cache_arrays(features: Any, partitions: int) -> Any:
    """The feature DataFrame's partitions as cached dicts of numpy arrays (one per partition).

    Args:
        features: Spark DataFrame with ``x`` (vector: numerics and genre flags), ``mpaa_i``,
            ``decade_i`` (codes), ``title_tf`` (sparse vector of title-word buckets), ``good``
            (0/1) and ``is_test``.
        partitions: Partitions (each trains its own share of the rows).
    """
    parts = (features.select("x", "mpaa_i", "decade_i", "title_tf", "good", "is_test")
             .repartition(partitions).rdd.mapPartitionsWithIndex(_arrays).cache())
    parts.count()
    return parts


def train_spark(parts: Any, dims: dict[str, int], epochs: int, syncs: int, seed: int
                ) -> dict[str, Any]:
    """Train ``dims["kind"]`` by parameter averaging over the cached partitions.

    Args:
        parts: :func:`cache_arrays`' RDD.
        dims: ``kind``, ``n_num``, ``n_mpaa``, ``n_decade``, ``buckets``.
        epochs: Passes over the training rows.
        syncs: Averaging rounds per epoch (>= 1).
        seed: Seeds the initial weights (on the driver) and the shuffles.

    Returns:
        ``{"model": state_dict, "opt": Adam state_dict}`` after the last round.
    """
    import torch

    if syncs < 1 or epochs < 1:
        raise ValueError(f"syncs >= 1 and epochs >= 1 must hold, got syncs={syncs}, "
                         f"epochs={epochs}")
    torch.manual_seed(seed)
    net = build_film_model(dims["kind"], dims["n_num"], dims["n_mpaa"], dims["n_decade"],
                           dims["buckets"])
    state: dict[str, Any] = {"model": net.state_dict(), "opt": None}
    sc = parts.context
    for epoch in range(epochs):
        for share in range(syncs):
            bc = sc.broadcast(state)
            results = parts.map(lambda p, e=epoch, s=share: train_round(
                bc.value, p, dims, e, s, syncs, seed)).collect()
            bc.unpersist()
            state = average(results)
    return state


def predict_spark(parts: Any, state: dict[str, Any], dims: dict[str, int]
                  ) -> tuple[np.ndarray, np.ndarray]:
    """``(probabilities, labels)`` of the held-out rows, scored on the executors."""
    bc = parts.context.broadcast(state)
    out = parts.map(lambda p: _predict(bc.value, p, dims)).collect()
    bc.unpersist()
    return np.concatenate([p for p, _ in out]), np.concatenate([y for _, y in out])
