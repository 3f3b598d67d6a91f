"""The MultiTaskGP alternative of the transfer benchmark's model comparison (issue 25).

Issue 25 asks which multi-objective transfer model ecopt should use: a
``MultiTaskGP`` per objective with the source study as a second task, or the
RGPE-style ranking-weighted pooled model that :mod:`ecopt.samplers._transfer`
implements. This module is the first, built from BoTorch's public API only
(``MultiTaskGP``, ``ModelListGP``, ``qLogNoisyExpectedHypervolumeImprovement``),
so that :mod:`benchmarks.transfer` can run both on the same studies:

* the initial design is the same as ecopt's: the source's Pareto set mapped
  into the target's space (``n_init`` points, sorted by the first objective);
* then each proposal fits one ``MultiTaskGP`` per objective on the source's
  and the target's complete trials (task column 0 = source, 1 = target; values
  as ``-log`` of the minimised energy and time, standardised by BoTorch) and
  takes the unobserved configuration of the trace with the highest qLogNEHVI
  for the target task (reference point: the target's worst observed values,
  10% of their range further).

The joules of a proposal are ESTIMATED from its CPU time with the estimate
meter's constant (as the other arms' proposals are).
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

import ecopt
from ecopt.transfer import load_sources

__all__ = ["MTGPProposer"]


class MTGPProposer:
    """Proposes the next configuration of a target study with per-objective MultiTaskGPs.

    Args:
        space: The target's search space.
        objectives: The target's objectives (all ``min``, positive values).
        source_dir: The source study directory.
        candidates: Every configuration of the target's trace (the discrete domain).
        n_init: Initial design points taken from the source's Pareto set.
        log_values: Model ``-log`` of the values (``False``: ``-value``, standardised as
            well; the ``mtgp-raw`` arm, which tells what the log transform is worth).
    """

    def __init__(self, space: ecopt.SearchSpace, objectives: Sequence[ecopt.Objective],
                 source_dir: Any, candidates: Sequence[Mapping[str, Any]], n_init: int = 6,
                 log_values: bool = True) -> None:
        (src,) = load_sources([source_dir], space, list(objectives))
        self.space = space
        self.names = [o.name for o in objectives]
        self.source = [r for r in src.records if all(r.values.get(k, 0) > 0 for k in self.names)]
        order = sorted(self.source, key=lambda r: r.values[self.names[0]])
        front_mask = ecopt.pareto.non_dominated(
            np.array([[r.values[k] for k in self.names] for r in order]), ["min"] * len(self.names))
        self.design = [dict(r.params) for r, m in zip(order, front_mask) if m][:n_init]
        self.candidates = [space.validate(c) for c in candidates]
        self.cpu_s = 0.0
        self.log_values = log_values

    def _xy(self, recs: Sequence[ecopt.TrialRecord], task: int) -> tuple[np.ndarray, np.ndarray]:
        X = np.array([[*self.space.encode(r.params), task] for r in recs], dtype=float)
        Y = np.array([[r.values[k] for k in self.names] for r in recs], dtype=float)
        Y = -np.log(Y) if self.log_values else -Y
        return X, Y

    def propose(self, target: Sequence[ecopt.TrialRecord], seen: Sequence[Mapping[str, Any]]
                ) -> dict[str, Any] | None:
        """The next configuration (``None`` when every candidate was tried)."""
        t0 = time.process_time()
        try:
            return self._propose(target, seen)
        finally:
            self.cpu_s += time.process_time() - t0

    def _propose(self, target: Sequence[ecopt.TrialRecord], seen: Sequence[Mapping[str, Any]]
                 ) -> dict[str, Any] | None:
        import torch
        from botorch.acquisition.multi_objective.logei import (
            qLogNoisyExpectedHypervolumeImprovement,
        )
        from botorch.fit import fit_gpytorch_mll
        from botorch.models import ModelListGP, MultiTaskGP
        from botorch.models.transforms.outcome import Standardize
        from gpytorch.mlls import ExactMarginalLogLikelihood

        key = [tuple(sorted(p.items())) for p in seen]
        for p in self.design:
            if tuple(sorted(p.items())) not in key:
                return p
        left = [c for c in self.candidates if tuple(sorted(c.items())) not in key]
        if not left:
            return None
        done = [r for r in target if r.state.value == "complete"
                and all(r.values.get(k, 0) > 0 for k in self.names)]
        if not done:
            return left[0]
        xs, ys = self._xy(self.source, 0)
        xt, yt = self._xy(done, 1)
        X = torch.tensor(np.vstack([xs, xt]), dtype=torch.double)
        Y = torch.tensor(np.vstack([ys, yt]), dtype=torch.double)
        torch.manual_seed(len(done))
        models = []
        for j in range(Y.shape[1]):
            m = MultiTaskGP(X, Y[:, j:j + 1], task_feature=-1, output_tasks=[1],
                            outcome_transform=Standardize(m=1))
            fit_gpytorch_mll(ExactMarginalLogLikelihood(m.likelihood, m))
            models.append(m)
        model = ModelListGP(*models)
        lo, hi = yt.min(axis=0), yt.max(axis=0)
        ref = (lo - 0.1 * np.maximum(hi - lo, 1e-6)).tolist()
        acq = qLogNoisyExpectedHypervolumeImprovement(
            model=model, ref_point=ref,
            X_baseline=torch.tensor(xt[:, :-1], dtype=torch.double), prune_baseline=True)
        C = torch.tensor(np.array([self.space.encode(c) for c in left]), dtype=torch.double)
        with torch.no_grad():
            vals = torch.cat([acq(C[i:i + 64].unsqueeze(1)) for i in range(0, len(C), 64)])
        best = int(torch.argmax(vals))
        if not math.isfinite(float(vals[best])):
            return left[0]
        return left[best]
