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


def get_sampler(spec: str | Sampler = "qlognehvi", *, cost_aware: bool | None = None,
                **options: Any) -> Sampler:
    """A sampler from a name or an instance.

    Args:
        spec: A name of :data:`SAMPLER_NAMES` or a :class:`Sampler`.
        cost_aware: ``None``: the sampler's default. ``True``/``False``: cost-aware
            proposals on or off (:class:`QLogNEHVISampler`); an instance must
            already be set that way, a sampler without the option may only be off.
        options: Passed to a named sampler's constructor.

    Raises:
        ValueError: for an unknown name, or ``cost_aware`` a sampler cannot honour.
    """
    if cost_aware is not None and not isinstance(cost_aware, bool):
        raise ValueError(f"cost_aware must be True, False or None, got cost_aware={cost_aware!r}")
    if isinstance(spec, Sampler):
        have = getattr(spec, "cost_aware", False)
        if cost_aware is not None and have != cost_aware:
            raise ValueError(f"cost_aware={cost_aware} must match the sampler instance's, got "
                             f"{type(spec).__name__} with cost_aware={have}; set it on the "
                             "instance (QLogNEHVISampler(cost_aware=...))")
        return spec
    if not isinstance(spec, str) or spec not in _FACTORY:
        raise ValueError(f"unknown sampler {spec!r}; expected one of {list(SAMPLER_NAMES)} "
                         "or a Sampler instance")
    if cost_aware is not None:
        if issubclass(_FACTORY[spec], QLogNEHVISampler):
            options["cost_aware"] = cost_aware
        elif cost_aware:
            raise ValueError(f"cost_aware=True needs a model-based sampler ('qlognehvi' or "
                             f"'qnehvi'), got sampler={spec!r}")
    return _FACTORY[spec](**options)
