"""Models and fitting: one GP per outcome, fitted, then queried as one model.

The second stage of a qLogNEHVI proposal. Each outcome (objective or
constraint metric) gets its own single-output GP (``SingleTaskGP``, or
``MixedSingleTaskGP`` with categorical columns; ``Standardize`` outcomes;
observed noise where every trial reported one). BoTorch fits a batched
multi-output GP with a batched L-BFGS that takes several times longer, so the
outputs are fitted one by one, each with BoTorch's ``fit_gpytorch_mll``: with
the closed-form loss of :mod:`ecopt.samplers._mll` as its ``closure`` where the
model is covered (fast path ``closed_form_fit``), else with BoTorch's own.
Continuous models are then stacked into one batched multi-output GP with the
same hyperparameters (fast path ``stacked_model``: the same model, faster to
query).

Measured gain (fast path ``stacked_model``): proposals 1.67x, 1.56x and 1.83x faster
at M = 2, n = 20, 50 and 200, and 1.79x at M = 3, n = 20. From
``docs/results/fast_paths/2026-12-05`` (``benchmarks/fast_paths.py``: one proposal's
CPU time with only this path switched off, against all paths on, median of 3 seeds,
BoTorch 0.18.1, a shared 2-core machine; rows where a path does not apply vary by up
to 1.5x from noise alone).
On a quiet machine (``2026-12-05-quiet``): 2.26x, 1.62x and 2.19x at M = 2; at the
floor BoTorch 0.15 (``2026-12-05-floor``) at most 1.4x (M = 4).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ecopt.trial import TrialRecord

__all__ = ["AUTO_PRIORS", "LENGTHSCALE_PRIORS", "MIXED_COLD_FTOL", "Fitted", "fit_outputs",
           "last_priors", "load_params", "loo_log_score", "loo_predictions", "param_state",
           "stack", "warm_state"]

#: Lengthscale priors of the continuous GPs' RBF kernels: ``"gamma"``, Gamma(3, 6) (mode
#: 1/3; BoTorch's default before 0.12), ``"dim-scaled"``, BoTorch's default since 0.12
#: (log-normal, median ~10 at d = 6; see :mod:`ecopt.samplers.qnehvi` for why not), or
#: ``"auto"``: each output fitted under both, the one that predicts its left-out
#: observations better kept (:func:`loo_log_score`).
LENGTHSCALE_PRIORS = ("gamma", "dim-scaled", "auto")
#: ``cold_ftol="auto"``: L-BFGS-B's relative tolerance for a mixed-kernel GP's fit from the
#: default start (a continuous GP's runs to scipy's own, as BoTorch fits).
MIXED_COLD_FTOL = 1e-6
#: The priors ``"auto"`` chooses between.
AUTO_PRIORS = ("gamma", "dim-scaled")


@dataclass
class Fitted:
    """The fitted outputs.

    Attributes:
        models: One fitted GP per column, in order.
        model: What the acquisition queries: the stacked model, the model list,
            or the single model.
        states: Fitted raw hyperparameters per column name (JSON-able).
        fast_path_off: Fast path -> why it was not used (a failure, not a model
            it does not cover).
        priors: Column name -> the lengthscale prior its GP was fitted under, for the
            continuous outputs fitted in this call (with ``"auto"``: the one chosen).
    """

    models: list[Any]
    model: Any
    states: dict[str, Any]
    fast_path_off: dict[str, str] = field(default_factory=dict)
    priors: dict[str, str] = field(default_factory=dict)

    def public(self) -> Any:
        """The same outputs as BoTorch's ``ModelListGP`` (or the single model)."""
        from botorch.models import ModelListGP

        return self.models[0] if len(self.models) == 1 else ModelListGP(*self.models)


def param_state(model: Any) -> dict[str, list[float]]:
    """A model's raw hyperparameters as JSON-able lists (exact through a JSON round trip)."""
    return {k: [float(v) for v in p.detach().reshape(-1).tolist()]
            for k, p in model.named_parameters()}


def load_params(model: Any, state: Any) -> bool:
    """Set ``model``'s raw hyperparameters from :func:`param_state` output.

    Returns False (and changes nothing) unless every parameter is there with its size.
    """
    import torch

    params = dict(model.named_parameters())
    if not isinstance(state, dict) or set(params) != set(state):
        return False
    vals = {}
    for k, p in params.items():
        v = state[k]
        if not isinstance(v, list) or len(v) != p.numel() \
                or not all(isinstance(x, (int, float)) and math.isfinite(x) for x in v):
            return False
        vals[k] = torch.tensor(v, dtype=p.dtype).reshape(p.shape)
    with torch.no_grad():
        for k, p in params.items():
            p.copy_(vals[k])
    return True


def _latest_state(records: Sequence[TrialRecord], kind: str
                  ) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """The latest proposal notes in ``records`` with a fitted model of ``kind``, and its
    ``gp_state``."""
    for r in reversed(records):
        p = r.proposal if isinstance(r.proposal, dict) else {}
        st = p.get("gp_state")
        if isinstance(st, dict) and st.get("kind") == kind and isinstance(st.get("params"), dict):
            return p, st
    return None


def warm_state(records: Sequence[TrialRecord], kind: str) -> dict[str, Any] | None:
    """Fitted hyperparameters of the latest proposal in ``records`` with the same model kind."""
    got = _latest_state(records, kind)
    return None if got is None else got[1]["params"]


def last_fit(records: Sequence[TrialRecord], kind: str) -> int | None:
    """Observations the hyperparameters of the latest proposal of model ``kind`` were
    optimised on (``gp_state["fitted_at"]``; older records: their ``n_observations``)."""
    got = _latest_state(records, kind)
    if got is None:
        return None
    n = got[1].get("fitted_at", got[0].get("n_observations"))
    return int(n) if isinstance(n, int) and not isinstance(n, bool) else None


def last_priors(records: Sequence[TrialRecord], kind: str) -> tuple[dict[str, str], int] | None:
    """The lengthscale priors in force at the latest proposal of model ``kind`` (output
    name -> prior, ``gp_state["priors"]``) and the observations they were last chosen on
    by ``"auto"``'s comparison (``gp_state["priors_chosen_at"]``); ``None`` when that
    proposal recorded none (another prior setting, a mixed model, older records)."""
    got = _latest_state(records, kind)
    if got is None:
        return None
    priors, at = got[1].get("priors"), got[1].get("priors_chosen_at")
    if not isinstance(priors, dict) or not isinstance(at, int) or isinstance(at, bool) \
            or not all(isinstance(v, str) and v in AUTO_PRIORS for v in priors.values()):
        return None
    return {str(k): str(v) for k, v in priors.items()}, at


def stack(models: Sequence[Any], X: Any, Y: Any, Yvar: Any) -> Any | None:
    """One batched multi-output SingleTaskGP with each output's fitted hyperparameters.

    The same model as ``ModelListGP(*models)`` (independent outputs, per-column
    standardisation), queried in one batched pass. ``None`` when the
    parameters do not line up (then the caller keeps the model list).
    """
    import torch
    from botorch.models import SingleTaskGP
    from botorch.models.transforms.outcome import Standardize

    m = len(models)
    batched = SingleTaskGP(X, Y, train_Yvar=Yvar, outcome_transform=Standardize(m=m))
    singles = [dict(mj.named_parameters()) for mj in models]
    params = dict(batched.named_parameters())
    if any(set(sp) != set(params) for sp in singles):
        return None
    with torch.no_grad():
        for k, p in params.items():
            parts = [sp[k].detach() for sp in singles]
            if p.shape[0] != m or any(t.numel() * m != p.numel() for t in parts):
                return None
            p.copy_(torch.stack([t.reshape(p.shape[1:]) for t in parts]))
    batched.eval()
    return batched


def loo_predictions(model: Any) -> tuple[Any, Any, Any] | None:
    """Leave-one-out predictions of a fitted exact GP's training targets.

    Each observation is predicted from the others with the fitted hyperparameters
    (Rasmussen & Williams, 2006, eq. 5.10-5.12, in closed form from one Cholesky
    factor), in the model's own (standardised) units.

    Returns:
        ``(targets, leave-one-out means, leave-one-out variances)``, 1-D tensors, or
        ``None`` when the covariance is not positive definite.
    """
    import torch

    model.train()
    try:
        with torch.no_grad():
            out = model.likelihood(model(*model.train_inputs), *model.train_inputs)
            K, m = out.covariance_matrix, out.mean.reshape(-1)
            y = model.train_targets.reshape(-1)
            L, info = torch.linalg.cholesky_ex(K)
            if int(info) != 0:
                return None
            Kinv = torch.cholesky_inverse(L)
            var = 1.0 / torch.diagonal(Kinv)
            resid = (Kinv @ (y - m)) * var  # y_i - mu_{-i}
            return y, y - resid, var
    finally:
        model.eval()


def loo_log_score(model: Any) -> float:
    """Mean leave-one-out log predictive density of a fitted exact GP's training targets
    (:func:`loo_predictions`), in the model's own (standardised) units, so two GPs on the
    same outcome compare by it whatever their priors. Unlike the marginal likelihood plus
    the log prior, no prior density enters. ``-inf`` when the covariance is not positive
    definite.
    """
    import torch

    out = loo_predictions(model)
    if out is None:
        return -math.inf
    y, mu, var = out
    score = float((-0.5 * torch.log(2 * math.pi * var) - 0.5 * (y - mu) ** 2 / var).mean())
    return score if math.isfinite(score) else -math.inf


def _why(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


class _Fitter:
    """Fits single-output GPs: the closed-form closure first, BoTorch's own on failure."""

    def __init__(self, X: Any, cat_dims: list[int], warm_ftol: float | None,
                 cold_ftol: float | str | None, closed_form: bool, lengthscale_prior: str,
                 maxiter: int | None = None) -> None:
        self.X, self.cat_dims, self.lengthscale_prior = X, cat_dims, lengthscale_prior
        self.warm_ftol, self.maxiter = warm_ftol, maxiter
        self.cold_ftol: float | None = ((MIXED_COLD_FTOL if cat_dims else None)
                                        if isinstance(cold_ftol, str) else cold_ftol)
        self.closed_form = closed_form
        self.off: dict[str, str] = {}

    def priors(self) -> tuple[str, ...]:
        """The lengthscale priors to fit each output under (one unless ``"auto"``)."""
        if self.cat_dims:
            return ("mixed",)
        return AUTO_PRIORS if self.lengthscale_prior == "auto" else (self.lengthscale_prior,)

    def build(self, y: Any, yvar: Any, prior: str) -> Any:
        """An unfitted GP of one output under ``prior`` (one of :meth:`priors`)."""
        from botorch.models import MixedSingleTaskGP, SingleTaskGP
        from botorch.models.transforms.outcome import Standardize

        if self.cat_dims:
            return MixedSingleTaskGP(self.X, y, cat_dims=self.cat_dims, train_Yvar=yvar,
                                     outcome_transform=Standardize(m=1))
        covar = None
        if prior == "gamma":
            from gpytorch.constraints import GreaterThan
            from gpytorch.kernels import RBFKernel
            from gpytorch.priors import GammaPrior

            # BoTorch's lower bound and start-at-the-prior's-mode, with the Gamma prior.
            covar = RBFKernel(ard_num_dims=self.X.shape[-1],
                              lengthscale_prior=GammaPrior(3.0, 6.0),
                              lengthscale_constraint=GreaterThan(2.5e-2, transform=None,
                                                                 initial_value=1.0 / 3.0))
        return SingleTaskGP(self.X, y, train_Yvar=yvar, covar_module=covar,
                            outcome_transform=Standardize(m=1))

    def fit(self, model: Any, warm_started: bool = False) -> float:
        """Fit in place; the fitted marginal log likelihood (+ log priors, over n)."""
        import torch
        from botorch.fit import fit_gpytorch_mll
        from gpytorch.mlls import ExactMarginalLogLikelihood

        from ecopt.samplers._mll import fit_exact_gp

        # Stop once a step gains < warm_ftol / cold_ftol (relative); None: scipy's default.
        ftol = self.warm_ftol if warm_started else self.cold_ftol
        # The iteration cap shortens a re-fit that starts at earlier hyperparameters; a fit
        # from the default start (the first model proposal, a new output) runs to its
        # tolerance, as a capped one could stop far from any optimum.
        maxiter = self.maxiter if warm_started else None
        if self.closed_form:
            try:
                value = fit_exact_gp(model, ftol, maxiter)
            except Exception as exc:  # noqa: BLE001 - any failure: BoTorch's own fit
                self.off.setdefault("closed_form_fit", _why(exc))
                value = None
            if value is not None:
                return value if math.isfinite(value) else -math.inf
        mll = ExactMarginalLogLikelihood(model.likelihood, model)
        opts = {k: v for k, v in (("ftol", ftol), ("maxiter", maxiter)) if v is not None}
        fit_gpytorch_mll(mll, optimizer_kwargs={"options": opts} if opts else None)
        mll.train()
        with torch.no_grad():
            value = float(mll(model(*model.train_inputs), model.train_targets).sum())
        model.eval()
        return value if math.isfinite(value) else -math.inf


def fit_outputs(X: Any, Y: Any, Yvar: Any, cat_dims: list[int], names: Sequence[str],
                warm: dict[str, Any] | None, cold_check: bool, warm_ftol: float | None,
                cold_ftol: float | str | None, closed_form: bool = True, stacked: bool = True,
                lengthscale_prior: str = "gamma", refit: bool = True,
                fit_maxiter: int | None = None,
                kept_priors: Mapping[str, str] | None = None) -> Fitted:
    """Fit one GP per column of ``Y`` ``(n, m)``.

    Warm start: an output whose fitted hyperparameters from an earlier
    proposal are in ``warm`` starts L-BFGS there. With ``cold_check`` it is
    also fitted from BoTorch's default start and the fit with the higher
    marginal likelihood is kept, so a poor local optimum cannot persist.

    Args:
        X: ``(n, d)`` model inputs; Y: ``(n, m)`` outcomes; Yvar: ``(n, m)``
            observed noise variances (NaN columns: inferred) or ``None``.
        cat_dims: Categorical columns (a mixed model).
        names: Column names (keys of the recorded hyperparameters).
        warm: Hyperparameters to start from, by name, or ``None``.
        cold_check: Also fit warm-started outputs from the default start.
        warm_ftol, cold_ftol: L-BFGS-B's relative tolerances (``None``: scipy's;
            ``cold_ftol="auto"``: scipy's, :data:`MIXED_COLD_FTOL` for a mixed model).
        closed_form: Use the ``closed_form_fit`` fast path.
        stacked: Use the ``stacked_model`` fast path.
        lengthscale_prior: One of :data:`LENGTHSCALE_PRIORS` (continuous models).
            ``"auto"`` fits each output under each of :data:`AUTO_PRIORS` (warm start
            and ``cold_check`` as for one) and keeps the fit with the higher
            :func:`loo_log_score` (ties: the first, Gamma).
        refit: Optimise the hyperparameters. ``False``: an output with ``warm``
            hyperparameters keeps them as they are (the GP is only conditioned on
            the new data: an economy proposal); the others are fitted.
        fit_maxiter: L-BFGS-B's iteration cap for the warm-started fits (``None``:
            BoTorch's); fits from the default start run to their tolerance.
        kept_priors: Output name -> one of :data:`AUTO_PRIORS`: with ``"auto"``, that
            output is fitted under this prior only, no comparison (an economy re-fit
            keeping the prior chosen earlier); the outputs not named are compared.
    """
    import torch

    fitter = _Fitter(X, cat_dims, warm_ftol, cold_ftol, closed_form, lengthscale_prior,
                     fit_maxiter)
    models: list[Any] = []
    states: dict[str, Any] = {}
    priors: dict[str, str] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for j in range(Y.shape[-1]):
            y = Y[:, j:j + 1]
            yv = None if Yvar is None or bool(torch.isnan(Yvar[:, j]).any()) \
                else Yvar[:, j:j + 1]
            start = (warm or {}).get(names[j])
            candidates: list[tuple[str, Any]] = []
            kept = False  # hyperparameters kept as they were (no fit, no prior chosen)
            under = fitter.priors()
            kept_prior = (kept_priors or {}).get(names[j], "")
            if kept_prior in under:
                under = (kept_prior,)
            for prior in under:
                model = fitter.build(y, yv, prior)
                if start is not None and load_params(model, start):
                    if not refit:  # the prior does not enter a prediction
                        model.eval()
                        candidates, kept = [(prior, model)], True
                        break
                    value = fitter.fit(model, warm_started=True)
                    if cold_check:
                        cold = fitter.build(y, yv, prior)
                        if fitter.fit(cold) > value:
                            model = cold
                else:
                    fitter.fit(model)
                candidates.append((prior, model))
            prior, model = candidates[0] if len(candidates) == 1 \
                else max(candidates, key=lambda c: loo_log_score(c[1]))
            if prior != "mixed" and not kept:
                priors[names[j]] = prior
            models.append(model)
            states[names[j]] = param_state(model)
    out = Fitted(models, None, states, fitter.off, priors)
    out.model = out.public()
    if stacked and len(models) > 1 and not cat_dims \
            and (Yvar is None or not bool(torch.isnan(Yvar).any())):
        try:
            out.model = stack(models, X, Y, Yvar) or out.model
        except Exception as exc:  # noqa: BLE001 - the model list is the same model
            out.fast_path_off["stacked_model"] = _why(exc)
    return out
