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

from ecopt.pruners.base import Decision, NopPruner, Pruner

__all__ = ["Pruner", "Decision", "NopPruner", "HyperbandPruner", "DominancePruner",
           "get_pruner", "PRUNERS"]

#: Pruner names accepted by ``Study(pruner=...)`` -> (module, class).
PRUNERS: dict[str, tuple[str, str]] = {
    "none": ("ecopt.pruners.base", "NopPruner"),
    "hyperband": ("ecopt.pruners.hyperband", "HyperbandPruner"),
    "dominance": ("ecopt.pruners.dominance", "DominancePruner"),
}


def get_pruner(spec: str | Pruner | None) -> Pruner | None:
    """A pruner by name, an instance passed through, or ``None`` for no pruning.

    Raises:
        ValueError: for an unknown name or an object that is not a :class:`Pruner`.
    """
    if spec is None or isinstance(spec, Pruner):
        return spec
    if isinstance(spec, str) and spec in PRUNERS:
        module, cls = PRUNERS[spec]
        pruner: Pruner = getattr(importlib.import_module(module), cls)()
        return pruner
    raise ValueError(f"pruner must be None, a name in {sorted(PRUNERS)} or an "
                     f"ecopt.pruners.Pruner, got {spec!r}")


def __getattr__(name: str) -> Any:
    for key, (module, cls) in PRUNERS.items():
        if cls == name:
            return getattr(importlib.import_module(module), cls)
    raise AttributeError(f"module 'ecopt.pruners' has no attribute {name!r}")
