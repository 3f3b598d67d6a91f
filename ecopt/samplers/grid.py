"""Grid search: every combination, in order (what a batch-size sweep uses)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from ecopt._types import Params, ParamValue
from ecopt._failures import tells_nothing
from ecopt.samplers.base import Proposal, Sampler
from ecopt.space import SearchSpace
from ecopt.trial import TrialRecord

__all__ = ["GridSampler"]


def _key(params: Mapping[str, Any]) -> str:
    return json.dumps({k: params[k] for k in sorted(params)}, sort_keys=True)


class GridSampler(Sampler):
    """Propose each grid point once, in order.

    Args:
        values: Parameter name -> values to try (others use ``n_points``
            evenly spaced values; Int, Categorical and Fixed give all of theirs
            up to ``n_points``).
        n_points: Points per continuous axis when ``values`` does not say.
        seed: Unused (a grid is deterministic); kept for a uniform signature.

    Points whose trial finished (complete, failed or infeasible) are not
    proposed again; points whose trial was interrupted or never started are.

    Example:
        >>> sampler = ecopt.samplers.GridSampler({"batch_size": [1, 8, 64, 512]})
    """

    name = "grid"

    def __init__(self, values: Mapping[str, Sequence[ParamValue]] | None = None,
                 n_points: int = 5, seed: int | None = None) -> None:
        super().__init__(seed)
        if n_points < 1:
            raise ValueError(f"n_points >= 1 must hold, got {n_points}")
        self.values = {k: list(v) for k, v in (values or {}).items()}
        self.n_points = n_points

    def grid(self, space: SearchSpace) -> list[Params]:
        """The full grid for ``space``."""
        return space.grid(self.n_points, self.values)

    def propose(self, space: SearchSpace, records: Sequence[TrialRecord],
                pending: Sequence[Params], n: int) -> list[Proposal]:
        done = {_key(r.params) for r in records if not tells_nothing(r)}
        done |= {_key(p) for p in pending}
        out: list[Proposal] = []
        points = self.grid(space)
        for i, p in enumerate(points):
            if len(out) >= n:
                break
            k = _key(p)
            if k not in done:
                out.append(Proposal(p, self.name, {"index": i, "grid_size": len(points)}))
                done.add(k)
        return out

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "values": self.values, "n_points": self.n_points}
