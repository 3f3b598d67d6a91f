"""The failure model's weight on the acquisition (``QLogNEHVISampler(failures="learn")``).

Failures that form a region (:func:`ecopt._failures.split`) train a GP on +1 (complete)
against -1 (failed); its posterior gives each point a probability of not failing,
``P(ok) = Phi(mean / sd)``. The acquisition is weighted by ``P(ok) ** FAILURE_POWER``
(log acquisitions: plus ``FAILURE_POWER * log P(ok)``), summed over a q-batch's points.

Why a power above 1, unlike the feasibility model of infeasible trials (an outcome
constraint, weight ``P(ok)``): a failed trial costs a whole trial and teaches the
objective models nothing, and a label GP learned from a few failures among many
successes reverts towards success between them. On the notebook of issue 36 (the
region ``kind == "c" and x > 0.8`` at the end of the front) the plain weight let the
search propose a point it gave a 41% chance of failing; with the cube that point's
weight is 0.21 instead of 0.59, while a point the model is sure of (``P(ok) > 0.97``)
keeps more than 90% of its acquisition.
"""

from __future__ import annotations

import functools
from typing import Any

__all__ = ["FAILURE_POWER", "weighted"]

#: The failure model's weight is ``P(ok) ** FAILURE_POWER``.
FAILURE_POWER = 3.0


@functools.cache
def _weighted_class() -> type:
    from ecopt.samplers._acquisition import wrapper_base

    class FailureWeighted(wrapper_base()):  # type: ignore[misc]
        """``acqf(X)`` weighted by the failure model's ``P(ok) ** power`` over the q points."""

        def __init__(self, acqf: Any, model: Any, log: bool, power: float) -> None:
            super().__init__(acqf)
            self.failure_model, self.log, self.power = model, log, power

        def forward(self, X: Any) -> Any:
            from torch.special import log_ndtr

            post = self.failure_model.posterior(X)
            z = post.mean[..., 0] / post.variance[..., 0].clamp_min(1e-12).sqrt()
            log_ok = self.power * log_ndtr(z).sum(dim=-1)
            value = self.acqf(X)
            return value + log_ok if self.log else value * log_ok.exp()

    return FailureWeighted


def weighted(acqf: Any, model: Any | None, log: bool, power: float = FAILURE_POWER) -> Any:
    """``acqf`` weighted by the failure model (``acqf`` itself without one).

    Args:
        acqf: A BoTorch acquisition function.
        model: The failure GP (+1 complete, -1 failed), or ``None``.
        log: Whether ``acqf`` is a log acquisition (qLogNEHVI, qLogNParEGO).
        power: The weight's exponent (:data:`FAILURE_POWER`).
    """
    if model is None:
        return acqf
    return _weighted_class()(acqf, model, log, power)
