"""Closed-form GP fitting loss and gradient for BoTorch's default GP.

BoTorch fits a GP by running scipy's L-BFGS-B on gpytorch's exact marginal log
likelihood, differentiated by autograd. For the small training sets of a study
(n <= a few hundred) nearly all of that time is Python machinery around an
``n x n`` Cholesky that itself takes microseconds: gpytorch's lazy tensors and
distribution objects and the autograd graph. :func:`fit_exact_gp` runs
BoTorch's own ``fit_gpytorch_mll`` (its optimiser, start, bounds, stopping
rule, retries from prior samples and warning policy) with the *same*
objective (minus the Gaussian log density of the standardised targets minus
the log priors, over ``n``, as BoTorch's default loss closure computes it)
evaluated with its gradient in closed form, passed through
``fit_gpytorch_mll``'s public ``closure`` argument. A model it does not cover is
left to BoTorch's default closure.

Measured gain (fast path ``closed_form_fit``): proposals 1.94x faster at M = 2, n =
20, 1.80x at n = 50 and 1.78-1.79x at M = 3, n = 20 and 50; none at M = 2, n = 200,
where the acquisition dominates. From ``docs/results/fast_paths/2026-12-05``
(``benchmarks/fast_paths.py``: one proposal's CPU time with only this path switched
off, against all paths on, median of 3 seeds, BoTorch 0.18.1, a shared 2-core
machine; rows where a path does not apply vary by up to 1.5x from noise alone).
On a quiet machine (``2026-12-05-quiet``) it measured 1.26-1.53x (1.53x at M = 3,
n = 20), and at the floor BoTorch 0.15 (``2026-12-05-floor``) at most 1.2x: the
narrowest of the five gains, kept because it buys 1.5x and more at the newest BoTorch.

Covered: a one-output, unbatched ``SingleTaskGP`` with no input transform, a
constant (prior-free) or zero mean, an RBF kernel (one or ``d`` lengthscales,
BoTorch's default since 0.12), and a homoskedastic Gaussian likelihood (learned
noise) or fixed observation noise; bound-only (untransformed) constraints, as
BoTorch sets them; log-normal or gamma priors on lengthscale and noise.

Gradient: with ``K = k(X) + diag(noise)``, ``r = y - c`` and
``a = K^-1 r``, ``d log N(y | c, K) / d theta = tr(W dK/d theta)`` where
``W = (a a^T - K^-1) / 2``; for an RBF lengthscale ``l_k``,
``dK_ij / dl_k = K_ij (x_ik - x_jk)^2 / l_k^3``; for the noise,
``dK / d noise = I``; for the mean, ``d / dc = sum(a)``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["fit_exact_gp", "exact_gp_loss"]

_LOG_2PI = math.log(2.0 * math.pi)
_LS = "covar_module.raw_lengthscale"
_NOISE = "likelihood.noise_covar.raw_noise"
_MEAN = "mean_module.raw_constant"


@dataclass
class _Prior:
    """A log-normal (``loc``, ``scale``) or gamma (``concentration``, ``rate``) prior."""

    kind: str
    a: np.ndarray
    b: np.ndarray

    def logp_and_grad(self, x: np.ndarray) -> tuple[float, np.ndarray]:
        """Summed log density at ``x`` (> 0) and its gradient in ``x``."""
        lx = np.log(x)
        if self.kind == "lognormal":
            z = (lx - self.a) / self.b
            logp = -lx - np.log(self.b) - 0.5 * _LOG_2PI - 0.5 * z * z
            grad = (-1.0 - z / self.b) / x
        else:
            from scipy.special import gammaln

            logp = self.a * np.log(self.b) - gammaln(self.a) + (self.a - 1.0) * lx - self.b * x
            grad = (self.a - 1.0) / x - self.b
        return float(np.sum(logp)), np.broadcast_to(grad, x.shape).astype(float)


@dataclass
class _Problem:
    """What :func:`exact_gp_loss` needs, in numpy, and where each parameter lives."""

    X: Any  # (n, d) training inputs (torch, float64)
    y: Any  # (n,) standardised training targets (torch, float64)
    D2: Any  # (d_ls, n, n) squared coordinate differences (summed if one lengthscale)
    fixed_noise: Any  # (n,) observation noise variances, or None (learned)
    names: list[str]  # parameter names, in x order
    sizes: list[int]
    ls_prior: _Prior | None
    noise_prior: _Prior | None


def _prior(p: Any) -> _Prior | None | bool:
    """``_Prior`` for a supported gpytorch prior, ``None`` for none, ``False`` if unsupported."""
    from gpytorch.priors import GammaPrior, LogNormalPrior

    if p is None:
        return None
    if type(p) is LogNormalPrior:
        return _Prior("lognormal", p.loc.detach().cpu().numpy().astype(float),
                      p.scale.detach().cpu().numpy().astype(float))
    if type(p) is GammaPrior:
        return _Prior("gamma", p.concentration.detach().cpu().numpy().astype(float),
                      p.rate.detach().cpu().numpy().astype(float))
    return False


def _untransformed(constraint: Any) -> bool:
    """Whether a parameter's constraint leaves the raw value as the value (bounds only)."""
    return constraint is None or not constraint.enforced


def _problem(model: Any) -> _Problem | None:
    """The numpy problem for ``model``, or ``None`` when it is not covered."""
    import torch
    from botorch.models import SingleTaskGP
    from gpytorch.kernels import RBFKernel
    from gpytorch.likelihoods import FixedNoiseGaussianLikelihood, GaussianLikelihood
    from gpytorch.likelihoods.noise_models import HomoskedasticNoise
    from gpytorch.means import ConstantMean, ZeroMean

    from ecopt.samplers._botorch_compat import named_priors

    cls: type = type(model)  # (not narrowing ``model``: torch stubs type its attributes)
    if cls is not SingleTaskGP or getattr(model, "input_transform", None) is not None:
        return None
    if len(model.train_inputs) != 1 or any(True for _ in model.added_loss_terms()):
        return None
    X_t, y_t = model.train_inputs[0], model.train_targets
    if X_t.dim() != 2 or y_t.dim() != 1 or X_t.shape[0] != y_t.shape[0] or X_t.shape[0] < 1:
        return None
    mean, covar, lik = model.mean_module, model.covar_module, model.likelihood
    if type(covar) is not RBFKernel or covar.active_dims is not None \
            or covar.batch_shape != torch.Size([]):
        return None
    if type(mean) not in (ConstantMean, ZeroMean):
        return None
    fixed: Any = None
    if type(lik) is GaussianLikelihood:
        if type(lik.noise_covar) is not HomoskedasticNoise or lik.noise_covar.raw_noise.numel() != 1:
            return None
    elif type(lik) is FixedNoiseGaussianLikelihood and lik.second_noise_covar is None:
        fixed = lik.noise_covar.noise.detach().cpu().to(torch.double).reshape(-1)
        if fixed.shape != y_t.shape:
            return None
    else:
        return None

    params = {k: p for k, p in model.named_parameters() if p.requires_grad}
    expected = {_LS, *([_MEAN] if type(mean) is ConstantMean else []),
                *([_NOISE] if fixed is None else [])}
    if set(params) != expected:
        return None
    priors = named_priors(model)
    if not set(priors) <= {"covar_module.lengthscale_prior",
                           "likelihood.noise_covar.noise_prior"}:
        return None
    ls_prior = _prior(priors.get("covar_module.lengthscale_prior"))
    noise_prior = _prior(priors.get("likelihood.noise_covar.noise_prior"))
    if ls_prior is False or noise_prior is False:
        return None

    X = X_t.detach().cpu().to(torch.double)
    n, d = X.shape
    n_ls = params[_LS].numel()
    if params[_LS].shape not in (torch.Size([1, d]), torch.Size([1, 1])):
        return None
    diff2 = (X[:, None, :] - X[None, :, :]) ** 2  # (n, n, d)
    D2 = diff2.permute(2, 0, 1) if n_ls == d else diff2.sum(-1)[None]
    names, sizes = [], []
    for name, constraint in ((_LS, covar.raw_lengthscale_constraint),
                             (_MEAN, None),
                             (_NOISE, None if fixed is not None
                              else lik.noise_covar.raw_noise_constraint)):
        if name not in params:
            continue
        if not _untransformed(constraint):
            return None
        names.append(name)
        sizes.append(params[name].numel())
    assert isinstance(ls_prior, (_Prior, type(None))) and isinstance(noise_prior,
                                                                   (_Prior, type(None)))
    return _Problem(X=X, y=y_t.detach().cpu().to(torch.double), D2=D2.contiguous(),
                    fixed_noise=fixed, names=names, sizes=sizes,
                    ls_prior=ls_prior, noise_prior=noise_prior)


def _split(prob: _Problem, x: np.ndarray) -> dict[str, np.ndarray]:
    out, i = {}, 0
    for name, size in zip(prob.names, prob.sizes):
        out[name] = x[i:i + size]
        i += size
    return out


def _loss_and_grad(prob: _Problem, x: np.ndarray) -> tuple[float, np.ndarray]:
    """BoTorch's fitting loss at raw parameters ``x`` and its gradient.

    Linear algebra in torch (float64, no autograd), so it runs on torch's intra-op
    threads, which callers set (numpy's BLAS may spin extra threads on a busy machine).
    """
    import torch

    p = _split(prob, x)
    ls = p[_LS]
    n = prob.y.shape[0]
    inv_l2 = torch.from_numpy(1.0 / (ls * ls))
    S = torch.tensordot(inv_l2, prob.D2, dims=([0], [0]))  # (n, n) scaled squared distances
    Kf = torch.exp(-0.5 * S)
    noise = (prob.fixed_noise if prob.fixed_noise is not None
             else torch.full((n,), float(p[_NOISE][0]), dtype=torch.double))
    K = Kf + torch.diag(noise)
    c = float(p[_MEAN][0]) if _MEAN in p else 0.0
    r = (prob.y - c).unsqueeze(-1)
    # As gpytorch's psd_safe_cholesky: retry with jitter 1e-8, 1e-7, 1e-6 on failure.
    L, info = torch.linalg.cholesky_ex(K)
    jitter = 1e-8
    while int(info) != 0:
        if jitter > 1e-6:
            raise torch.linalg.LinAlgError("covariance not positive definite, even with jitter")
        L, info = torch.linalg.cholesky_ex(K + jitter * torch.eye(n, dtype=K.dtype))
        jitter *= 10.0
    a = torch.cholesky_solve(r, L)
    Kinv = torch.cholesky_inverse(L)
    ll = (-0.5 * float((r * a).sum()) - float(torch.log(torch.diagonal(L)).sum())
          - 0.5 * n * _LOG_2PI)
    WK = 0.5 * (a @ a.T - Kinv)
    g_noise = float(torch.diagonal(WK).sum())
    WK *= Kf
    grads: dict[str, np.ndarray] = {
        _LS: torch.tensordot(prob.D2, WK, dims=([1, 2], [0, 1])).numpy() * (1.0 / (ls * ls * ls))}
    if prob.ls_prior is not None:
        lp, g = prob.ls_prior.logp_and_grad(ls)
        ll += lp
        grads[_LS] = grads[_LS] + g
    if _MEAN in p:
        grads[_MEAN] = np.array([float(a.sum())])
    if _NOISE in p:
        if prob.noise_prior is not None:
            lp, g = prob.noise_prior.logp_and_grad(p[_NOISE])
            ll += lp
            g_noise += float(g.sum())
        grads[_NOISE] = np.array([g_noise])
    grad = np.concatenate([grads[name] for name in prob.names])
    return -ll / n, -grad / n


def exact_gp_loss(model: Any) -> tuple[float, dict[str, np.ndarray]] | None:
    """BoTorch's fitting loss of ``model`` at its current parameters, and the gradient.

    Args:
        model: a BoTorch ``SingleTaskGP`` (train mode or not; its training data are used).

    Returns:
        ``(loss, {raw parameter name: gradient})``, or ``None`` when the model is
        outside what :func:`fit_exact_gp` covers.
    """
    prob = _problem(model)
    if prob is None:
        return None
    params = dict(model.named_parameters())
    x = np.concatenate([params[k].detach().cpu().numpy().astype(float).reshape(-1)
                        for k in prob.names])
    loss, grad = _loss_and_grad(prob, x)
    return loss, {k: v for k, v in _split(prob, grad).items()}


def fit_exact_gp(model: Any, ftol: float | None = None, maxiter: int | None = None
                 ) -> float | None:
    """Fit ``model``'s hyperparameters in place with BoTorch's ``fit_gpytorch_mll``,
    the loss and gradient in closed form.

    BoTorch's optimiser (L-BFGS-B), start, bounds and stopping rule, and its
    retry policy: an attempt that fails (an optimiser warning, a non-PSD
    covariance) is retried from a sample of the priors, and the model is
    rolled back when every attempt fails.

    Args:
        model: a BoTorch ``SingleTaskGP`` (see the module docstring for the
            covered configurations).
        ftol: L-BFGS-B's relative function tolerance (``None``: scipy's default).
        maxiter: L-BFGS-B's iteration cap (``None``: BoTorch's default).

    Returns:
        The fitted marginal log likelihood plus log priors, over ``n`` (minus the
        final loss), or ``None`` (nothing done) when the model is not covered.
        The model is left in eval mode.

    Raises:
        botorch.exceptions.errors.ModelFittingError: when every attempt failed.
        CompatError: when a GPyTorch internal read here changed.
    """
    import torch
    from botorch.fit import fit_gpytorch_mll
    from gpytorch.mlls import ExactMarginalLogLikelihood
    from linear_operator.utils.errors import NotPSDError

    prob = _problem(model)
    if prob is None:
        return None
    mll = ExactMarginalLogLikelihood(model.likelihood, model)
    mll_names = {id(p): n for n, p in mll.named_parameters()}
    params = dict(model.named_parameters())
    # BoTorch's names (they key its bounds), in the closure's gradient order.
    parameters = {mll_names[id(params[k])]: params[k] for k in prob.names}

    def state() -> np.ndarray:
        return np.concatenate([params[k].detach().cpu().numpy().astype(float).reshape(-1)
                               for k in prob.names])

    def closure() -> tuple[Any, list[Any]]:
        try:
            with np.errstate(over="ignore", under="ignore"):  # exp underflow is harmless
                loss, grad = _loss_and_grad(prob, state())
        except torch.linalg.LinAlgError as exc:  # as gpytorch raises it: BoTorch retries
            raise NotPSDError(str(exc)) from exc
        parts = _split(prob, grad)
        return (torch.tensor(loss, dtype=torch.double),
                [torch.as_tensor(parts[k], dtype=params[k].dtype).reshape(params[k].shape)
                 for k in prob.names])

    options: dict[str, Any] = {"parameters": parameters}
    scipy_opts = {k: v for k, v in (("ftol", ftol), ("maxiter", maxiter)) if v is not None}
    if scipy_opts:
        options["options"] = scipy_opts
    fit_gpytorch_mll(mll, closure=closure, optimizer_kwargs=options)
    model.eval()
    with np.errstate(over="ignore", under="ignore"):
        loss, _ = _loss_and_grad(prob, state())
    return -float(loss)
