"""The acquisition function of one proposal: which one, built fast or BoTorch's own way.

The third stage of a qLogNEHVI proposal. By number of objectives ``M``
(:func:`choose`):

- ``M <= 3``: exact qLogNEHVI (box decompositions of the non-dominated region
  under each posterior sample; at ``M = 3`` by ecopt's plane sweep);
- ``M >= 4``: qLogNParEGO (random Chebyshev scalarisations, no boxes). Exact
  box decompositions cost 12-27 CPU s per proposal at n = 50-100; over
  BoTorch's approximate ones (``alpha`` > 0: ``NondominatedPartitioning``
  merging boxes whose hypervolume share is below ``alpha``) qLogNEHVI costs
  under 2 s but reached a lower hypervolume than qLogNParEGO on DTLZ2 with four
  objectives (docs/benchmarks.md, "Four objectives"). ``parego_from=5`` keeps
  qLogNEHVI at ``M = 4``, over approximate boxes.
- ``M = 4`` in a fully discrete space small enough to enumerate
  (:mod:`ecopt.samplers._discrete`): exact qLogNEHVI (``parego_from`` 5 and
  ``alpha`` 0 by default). Scoring every configuration leaves the boxes as the
  only cost, and on the Zeus four-objective grid exact boxes reached the front
  sooner than qLogNParEGO did.

:func:`build` builds it with ecopt's fast paths (baseline pruning, plane-sweep
boxes, dense posterior; :mod:`ecopt.samplers._botorch_compat`) or, with
``fast=False``, exactly as BoTorch's public API would (the fallback when a
fast path fails).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ecopt.objective import Constraint

__all__ = ["Acquisition", "Choice", "build", "choose", "fast_paths", "mc_samples",
           "outcome_constraints", "wrapper_base"]

#: qLogNEHVI's box-decomposition approximation at four objectives (0: exact).
ALPHA_M4 = 1e-2
#: From this many objectives on, qLogNParEGO; in a space small enough to enumerate, from
#: :data:`PAREGO_FROM_ENUMERATED` on.
PAREGO_FROM, PAREGO_FROM_ENUMERATED = 4, 5
#: Quasi-MC samples by default: 64, and 32 from four objectives on.
MC_SAMPLES, MC_SAMPLES_M4 = 64, 32


def mc_samples(M: int, setting: int | None) -> int:
    """The acquisition's quasi-MC samples for ``M`` objectives (``setting`` if given)."""
    if setting is not None:
        return setting
    return MC_SAMPLES_M4 if M >= 4 else MC_SAMPLES


@dataclass(frozen=True)
class Choice:
    """Which acquisition: ``method`` ("qLogNEHVI", "qNEHVI", "qLogNParEGO") and,
    for the hypervolume ones, the box decompositions' ``alpha`` (0: exact)."""

    method: str
    alpha: float = 0.0

    def notes(self) -> dict[str, Any]:
        """What the proposal records."""
        if self.method == "qLogNParEGO":
            return {"acquisition": self.method}
        return {"acquisition": self.method, "partitioning_alpha": self.alpha}


def choose(M: int, log: bool = True, alpha: float | None = None,
           parego_from: int | None = None, enumerated: bool = False) -> Choice:
    """The acquisition for ``M`` objectives.

    Args:
        M: Number of objectives.
        log: qLogNEHVI (else qNEHVI) where a hypervolume acquisition is chosen.
        alpha: The box decompositions' approximation (``None``: exact, except
            :data:`ALPHA_M4` from four objectives on outside an enumerated space).
        parego_from: From this many objectives on, qLogNParEGO (``None``:
            :data:`PAREGO_FROM`, or :data:`PAREGO_FROM_ENUMERATED` when ``enumerated``).
        enumerated: Whether every configuration of the space is scored
            (:func:`ecopt.samplers._encoding.grid`).
    """
    if parego_from is None:
        parego_from = PAREGO_FROM_ENUMERATED if enumerated else PAREGO_FROM
    if M >= parego_from:
        return Choice("qLogNParEGO")
    method = "qLogNEHVI" if log else "qNEHVI"
    if alpha is None:
        alpha = ALPHA_M4 if M >= 4 and not enumerated else 0.0
    return Choice(method, float(alpha))


def fast_paths(choice: Choice, M: int, dense_posterior: bool) -> list[str]:
    """The fast paths :func:`build` tries for ``choice`` (``dense_posterior``: the
    option is on and the model is BoTorch's default GP, stacked)."""
    if choice.method == "qLogNParEGO":
        return []
    return ["pruning", *["sweep_boxes"] * (M == 3 and choice.alpha == 0),
            *["dense_posterior"] * dense_posterior]


def outcome_constraints(constraints: Sequence[Constraint], M: int,
                        feasibility: Sequence[int] | None = None) -> list[Any]:
    """BoTorch constraint callables (satisfied when ``<= 0``) over the model outputs.

    Constraint ``j`` is output ``M + j``; ``feasibility`` are the outputs of
    +1/-1 label models (the feasibility model of infeasible trials), if any:
    each is satisfied where its model predicts a positive label.
    """
    out: list[Any] = []
    for j, c in enumerate(constraints):
        if c.op == "<=":
            out.append(lambda Z, i=M + j, b=c.bound: Z[..., i] - b)
        else:
            out.append(lambda Z, i=M + j, b=c.bound: b - Z[..., i])
    for k in feasibility or ():
        out.append(lambda Z, i=k: -Z[..., i])
    return out


@functools.cache
def wrapper_base() -> type:
    """A BoTorch ``AcquisitionFunction`` that wraps another (``self.acqf``): it delegates
    what BoTorch's optimisers read (``X_pending``, ``set_X_pending``, ``X_baseline``,
    ``objective``, ``constraints``) to it. Subclasses write ``forward``."""
    from botorch.acquisition import AcquisitionFunction

    class Wrapped(AcquisitionFunction):  # type: ignore[misc]
        def __init__(self, acqf: Any) -> None:
            super().__init__(model=acqf.model)
            self.acqf = acqf

        def set_X_pending(self, X_pending: Any = None) -> None:
            self.acqf.set_X_pending(X_pending)

        @property
        def X_pending(self) -> Any:  # type: ignore[override]
            return self.acqf.X_pending

        @property
        def X_baseline(self) -> Any:
            return self.acqf.X_baseline

        @property
        def objective(self) -> Any:
            return self.acqf.objective

        @property
        def constraints(self) -> Any:
            return getattr(self.acqf, "constraints", None)

    return Wrapped


@dataclass
class Acquisition:
    """A built acquisition function and how it was built."""

    acqf: Any
    choice: Choice
    fast_path_off: dict[str, str] = field(default_factory=dict)


def _class(choice: Choice) -> type:
    if choice.method == "qLogNParEGO":
        from botorch.acquisition.multi_objective.parego import qLogNParEGO

        return qLogNParEGO
    if choice.method == "qNEHVI":
        from botorch.acquisition.multi_objective.monte_carlo import (
            qNoisyExpectedHypervolumeImprovement,
        )

        return qNoisyExpectedHypervolumeImprovement
    from botorch.acquisition.multi_objective.logei import qLogNoisyExpectedHypervolumeImprovement

    return qLogNoisyExpectedHypervolumeImprovement


def build(model: Any, X: Any, ref: Sequence[float], M: int, constraints: list[Any],
          X_pending: Any, mc_samples: int, seed: int, choice: Choice, fast: bool,
          dense_posterior: bool = True, cache_root: bool = True) -> Acquisition:
    """The acquisition function over the baseline ``X`` ``(n, d)``.

    Args:
        model: The fitted model (objectives first, then constraint outputs).
        X: Baseline (observed) inputs.
        ref: Reference point (maximisation form).
        M: Number of objectives.
        constraints: From :func:`outcome_constraints`.
        X_pending: ``(k, d)`` running trials' inputs, or ``None``.
        mc_samples: Quasi-MC samples (a ``SobolQMCNormalSampler`` seeded with ``seed``).
        choice: From :func:`choose`.
        fast: Use the fast paths (else BoTorch's public path only).
        dense_posterior: Allow the ``dense_posterior`` fast path.
        cache_root: BoTorch's ``cache_root`` (``False`` for multi-task models, which it
            does not cover).

    Returns:
        The acquisition, with the fast paths that were wanted but not used.
    """
    import torch
    from botorch.acquisition.multi_objective.objective import IdentityMCMultiOutputObjective
    from botorch.sampling.normal import SobolQMCNormalSampler

    from ecopt.samplers import _botorch_compat as compat

    sampler = SobolQMCNormalSampler(torch.Size([mc_samples]), seed=seed)
    objective = IdentityMCMultiOutputObjective(outcomes=list(range(M)))
    cls = _class(choice)
    common = {"model": model, "sampler": sampler, "objective": objective,
              "constraints": constraints or None, "X_pending": X_pending}
    if choice.method == "qLogNParEGO":
        return Acquisition(cls(X_baseline=X, prune_baseline=True, **common), choice)
    nehvi = {"ref_point": list(ref), "alpha": choice.alpha, "cache_root": cache_root}
    if not fast:
        return Acquisition(cls(X_baseline=X, prune_baseline=True, **common, **nehvi), choice)

    off: dict[str, str] = {}
    from ecopt.samplers._pruning import prune_baseline

    prune = True
    if "pruning" in compat.UNAVAILABLE:
        off["pruning"] = compat.UNAVAILABLE["pruning"]
    else:
        try:
            X = prune_baseline(model, X, X.new_tensor(list(ref)), objective, constraints or None)
            prune = False
        except Exception as exc:  # noqa: BLE001 - BoTorch's own pruning in the constructor
            off["pruning"] = f"{type(exc).__name__}: {exc}"
    sweep = M == 3 and choice.alpha == 0
    latent = None
    if dense_posterior:
        from ecopt.samplers._posterior import DenseLatent

        latent = DenseLatent.of(model)
    for name, wanted in (("sweep_boxes", sweep), ("dense_posterior", latent is not None)):
        if wanted and name in compat.UNAVAILABLE:
            off[name] = compat.UNAVAILABLE[name]
    sweep = sweep and "sweep_boxes" not in off
    dense = latent is not None and "dense_posterior" not in off
    acqf = compat.fast_acquisition_class(cls, sweep, dense)(
        X_baseline=X, prune_baseline=prune, **common, **nehvi)
    if sweep and not compat.sweep_in_use(acqf):
        off["sweep_boxes"] = "BoTorch built its own box decompositions (p_class not used)"
    if dense:
        acqf.__dict__["dense"] = latent
    return Acquisition(acqf, choice, off)
