"""Samplers: who proposes the next trials.

``get_sampler(spec)`` turns a name into a sampler (or passes an instance
through). BoTorch is imported only when a model-based sampler proposes.
"""

from __future__ import annotations

from typing import Any

from ecopt.samplers.base import FallbackWarning, Proposal, Sampler
from ecopt.samplers.grid import GridSampler
from ecopt.samplers.qnehvi import QLogNEHVISampler, QNEHVISampler
from ecopt.samplers.random import RandomSampler, SobolSampler

__all__ = [
    "FallbackWarning",
    "Proposal",
    "Sampler",
    "RandomSampler",
    "SobolSampler",
    "GridSampler",
    "QLogNEHVISampler",
    "QNEHVISampler",
    "get_sampler",
    "SAMPLER_NAMES",
]

_FACTORY: dict[str, type[Sampler]] = {
    "qlognehvi": QLogNEHVISampler,
    "qnehvi": QNEHVISampler,
    "random": RandomSampler,
    "sobol": SobolSampler,
    "grid": GridSampler,
}
#: Names ``get_sampler`` understands.
SAMPLER_NAMES = tuple(_FACTORY)


def get_sampler(spec: str | Sampler = "qlognehvi", **options: Any) -> Sampler:
    """A sampler from a name or an instance.

    Raises:
        ValueError: for an unknown name.
    """
    if isinstance(spec, Sampler):
        return spec
    if not isinstance(spec, str) or spec not in _FACTORY:
        raise ValueError(f"unknown sampler {spec!r}; expected one of {list(SAMPLER_NAMES)} "
                         "or a Sampler instance")
    return _FACTORY[spec](**options)
