"""Samplers: who proposes the next trials.

``get_sampler(spec)`` turns a name into a sampler through :mod:`ecopt.registry`
(or passes an instance through). BoTorch is imported only when a
model-based sampler proposes.
"""

from __future__ import annotations

from typing import Any

from ecopt import registry
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

#: Built-in names ``get_sampler`` understands (third-party ones come through
#: :mod:`ecopt.registry`'s entry points).
SAMPLER_NAMES = tuple(registry.BUILTIN["samplers"])


def get_sampler(spec: str | Sampler = "qlognehvi", *, cost_aware: bool | None = None,
                **options: Any) -> Sampler:
    """A sampler from a name (:mod:`ecopt.registry`) or an instance.

    Args:
        spec: A name (:data:`SAMPLER_NAMES`, or one a package registered) or a
            :class:`Sampler`.
        cost_aware: ``None``: the sampler's own setting. ``True``/``False``
            (for ``Study(cost_aware=...)``, deprecated: pass
            ``QLogNEHVISampler(cost_aware=...)``): cost-aware proposals on or
            off; an instance must already be set that way, a sampler without
            the option may only be off.
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
    if cost_aware is not None and isinstance(spec, str):
        cls = registry.factory("samplers", spec)
        if isinstance(cls, type) and issubclass(cls, QLogNEHVISampler):
            options["cost_aware"] = cost_aware
        elif cost_aware:
            raise ValueError(f"cost_aware=True needs a model-based sampler ('qlognehvi' or "
                             f"'qnehvi'), got sampler={spec!r}")
    return registry.create("samplers", spec, base=Sampler, **options)
