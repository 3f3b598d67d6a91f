"""Model-free samplers: uniform random and scrambled Sobol."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from ecopt._types import Params
from ecopt.samplers.base import Proposal, Sampler
from ecopt.space import SearchSpace
from ecopt.trial import TrialRecord

__all__ = ["RandomSampler", "SobolSampler", "sobol_points"]


def sobol_points(dim: int, seed: int, start: int, n: int) -> np.ndarray:
    """Points ``start .. start+n-1`` of a scrambled Sobol sequence.

    Returns:
        An ``(n, dim)`` array in ``[0, 1]``. Deterministic in ``(seed, start, n)``.
    """
    if dim == 0:
        return np.zeros((n, 0))
    from scipy.stats import qmc

    engine = qmc.Sobol(d=dim, scramble=True, seed=seed)
    if start:
        engine.fast_forward(start)
    import warnings

    with warnings.catch_warnings():
        # Sobol balance warnings for non-powers of two are irrelevant for an initial design.
        warnings.simplefilter("ignore", UserWarning)
        return engine.random(n)


def _failed_keys(space: SearchSpace, records: Sequence[TrialRecord]) -> set[tuple[float, ...]]:
    """Keys of the configurations whose trial failed."""
    from ecopt._failures import counts_as_failure
    from ecopt.samplers._encoding import seen_keys

    return seen_keys(space, [r for r in records if counts_as_failure(r)], [])


def _key(space: SearchSpace, x: np.ndarray) -> tuple[float, ...]:
    from ecopt.samplers._discrete import config_key

    return config_key(space.encode(space.decode(x)))


#: How far past its index a model-free sampler looks for a configuration not tried yet.
MAX_SKIP = 1024


class SobolSampler(Sampler):
    """Scrambled Sobol points: even coverage of the space, reproducible by seed.

    The k-th trial of a study gets the k-th Sobol point, so resuming continues
    the same sequence. Where points map to configurations that already have a
    trial (integer and categorical columns), later points are taken instead:
    a failed configuration is never proposed again, and one tried before only
    when the next :data:`MAX_SKIP` points hold nothing new.

    Example:
        >>> study = ecopt.Study(space, objectives, sampler=ecopt.samplers.SobolSampler(seed=1))
    """

    name = "sobol"

    def propose(self, space: SearchSpace, records: Sequence[TrialRecord],
                pending: Sequence[Params], n: int) -> list[Proposal]:
        start = len(records) + len(pending)
        seed = int(self.seed or 0)
        X = sobol_points(space.dim, seed, start, n + MAX_SKIP)
        from ecopt.samplers._encoding import seen_keys

        seen, failed = seen_keys(space, records, pending), _failed_keys(space, records)
        out: list[Proposal] = []
        for avoid in (seen, failed):
            for i, x in enumerate(X):
                if len(out) == n:
                    return out
                key = _key(space, x)
                if key not in avoid:
                    avoid.add(key)
                    seen.add(key)
                    failed.add(key)
                    out.append(Proposal(space.decode(x), self.name, {"index": start + i}))
        return out


class RandomSampler(Sampler):
    """Uniform random search; the first ``n_sobol`` trials come from Sobol.

    A draw that lands on a configuration that failed before (integer and
    categorical columns) is drawn again (up to :data:`MAX_SKIP` times).

    Args:
        seed: Seed (default: the study's).
        n_sobol: How many initial trials use scrambled Sobol points (0 for none).
    """

    name = "random"

    def __init__(self, seed: int | None = None, n_sobol: int = 0) -> None:
        super().__init__(seed)
        if n_sobol < 0:
            raise ValueError(f"n_sobol >= 0 must hold, got {n_sobol}")
        self.n_sobol = n_sobol

    def propose(self, space: SearchSpace, records: Sequence[TrialRecord],
                pending: Sequence[Params], n: int) -> list[Proposal]:
        start = len(records) + len(pending)
        out: list[Proposal] = []
        rng = np.random.default_rng([int(self.seed or 0), start])
        failed = _failed_keys(space, records)
        for i in range(n):
            k = start + i
            if k < self.n_sobol:
                # the k-th Sobol point, or the next one that did not fail before
                X = sobol_points(space.dim, int(self.seed or 0), k, MAX_SKIP if failed else 1)
                j = next((j for j, x in enumerate(X) if not failed
                          or _key(space, x) not in failed), 0)
                out.append(Proposal(space.decode(X[j]), "sobol", {"index": k + j}))
                continue
            x = rng.random(space.dim)
            for _ in range(MAX_SKIP):
                if not failed or _key(space, x) not in failed:
                    break
                x = rng.random(space.dim)
            out.append(Proposal(space.decode(x), self.name, {}))
        return out

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "n_sobol": self.n_sobol}
