"""Multi-objective early stopping: pruners that stop trials heading off the front.

Off by default; choose one with ``ecopt.Study(..., pruner=...)``:
``"hyperband"`` (:class:`HyperbandPruner`, asynchronous successive halving
ranked by Pareto fronts and hypervolume contribution) or ``"dominance"``
(:class:`DominancePruner`, learning-curve extrapolation: stop when the
predicted final point is dominated with high probability). An objective
reports its learning curve with :meth:`ecopt.Trial.report`, asks
:meth:`ecopt.Trial.should_stop`, and raises :class:`ecopt.TrialPruned`.
"""

from __future__ import annotations

import importlib
from typing import Any

from ecopt import registry
from ecopt.pruners.base import Decision, NopPruner, Pruner

__all__ = ["Pruner", "Decision", "NopPruner", "HyperbandPruner", "DominancePruner",
           "get_pruner", "PRUNERS"]

#: Built-in pruner names accepted by ``Study(pruner=...)`` -> (module, class); third-party
#: ones come through :mod:`ecopt.registry`'s entry points.
PRUNERS: dict[str, tuple[str, str]] = {
    name: tuple(path.split(":"))  # type: ignore[misc]
    for name, path in registry.BUILTIN["pruners"].items()
}


def get_pruner(spec: str | Pruner | None) -> Pruner | None:
    """A pruner by name (:mod:`ecopt.registry`), an instance passed through, or ``None``.

    Raises:
        ValueError: for an unknown name or an object that is not a :class:`Pruner`.
    """
    if spec is None:
        return None
    return registry.create("pruners", spec, base=Pruner)


def __getattr__(name: str) -> Any:
    for key, (module, cls) in PRUNERS.items():
        if cls == name:
            return getattr(importlib.import_module(module), cls)
    raise AttributeError(f"module 'ecopt.pruners' has no attribute {name!r}")
