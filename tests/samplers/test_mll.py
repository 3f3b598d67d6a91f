"""Closed-form GP fits: BoTorch's objective and gradient, BoTorch's optimum, BoTorch's fallback."""

from __future__ import annotations

import copy
import math

import pytest
import torch
from botorch.fit import fit_gpytorch_mll
from botorch.models import MixedSingleTaskGP, SingleTaskGP
from botorch.models.transforms.input import Normalize
from botorch.models.transforms.outcome import Standardize
from botorch.optim.closures import get_loss_closure
from gpytorch.constraints import GreaterThan
from gpytorch.kernels import MaternKernel, RBFKernel, ScaleKernel
from gpytorch.likelihoods import GaussianLikelihood
from gpytorch.mlls import ExactMarginalLogLikelihood
from gpytorch.priors import GammaPrior

import ecopt
from ecopt.samplers._mll import exact_gp_loss, fit_exact_gp
from ecopt.samplers import QLogNEHVISampler


def _data(n: int, d: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    X = torch.rand(n, d, generator=g, dtype=torch.double)
    y = torch.sin(3 * X.sum(-1, keepdim=True)) + 0.1 * torch.randn(n, 1, generator=g,
                                                                   dtype=torch.double)
    return X, y


def _gamma_model(X: torch.Tensor, y: torch.Tensor, ard: bool) -> SingleTaskGP:
    """Gamma priors, bound-only constraints, optionally one shared lengthscale."""
    covar = RBFKernel(ard_num_dims=X.shape[-1] if ard else None,
                      lengthscale_prior=GammaPrior(3.0, 6.0),
                      lengthscale_constraint=GreaterThan(1e-3, transform=None,
                                                         initial_value=0.5))
    lik = GaussianLikelihood(noise_prior=GammaPrior(1.1, 0.05),
                             noise_constraint=GreaterThan(1e-5, transform=None,
                                                          initial_value=0.1))
    return SingleTaskGP(X, y, covar_module=covar, likelihood=lik,
                        outcome_transform=Standardize(m=1))


def _models() -> dict[str, SingleTaskGP]:
    X, y = _data(30, 4, 0)
    return {
        "default": SingleTaskGP(X, y, outcome_transform=Standardize(m=1)),
        "fixed-noise": SingleTaskGP(X, y, train_Yvar=torch.full_like(y, 0.02),
                                    outcome_transform=Standardize(m=1)),
        "gamma-ard": _gamma_model(X, y, ard=True),
        "gamma-shared": _gamma_model(X, y, ard=False),
    }


def _botorch_loss_and_grads(model: SingleTaskGP) -> tuple[float, dict[str, torch.Tensor]]:
    mll = ExactMarginalLogLikelihood(model.likelihood, model)
    mll.train()
    params = {k: p for k, p in model.named_parameters() if p.requires_grad}
    loss = get_loss_closure(mll)()
    grads = torch.autograd.grad(loss, list(params.values()))
    return float(loss), dict(zip(params, grads))


@pytest.mark.parametrize("kind", ["default", "fixed-noise", "gamma-ard", "gamma-shared"])
def test_loss_and_gradient_equal_botorchs(kind):
    model = _models()[kind]
    g = torch.Generator().manual_seed(1)
    for _ in range(3):  # several points of the hyperparameter space, not just the start
        with torch.no_grad():
            for name, p in model.named_parameters():
                if name.endswith("raw_lengthscale"):
                    p.copy_(0.1 + torch.rand(p.shape, generator=g, dtype=p.dtype))
                elif name.endswith("raw_noise"):
                    p.copy_(1e-3 + 0.3 * torch.rand(p.shape, generator=g, dtype=p.dtype))
                elif name.endswith("raw_constant"):
                    p.copy_(torch.randn(p.shape, generator=g, dtype=p.dtype))
        expected, expected_grads = _botorch_loss_and_grads(model)
        got = exact_gp_loss(model)
        assert got is not None
        loss, grads = got
        assert loss == pytest.approx(expected, rel=1e-8, abs=1e-9)
        assert set(grads) == set(expected_grads)
        for name, gexp in expected_grads.items():
            assert torch.allclose(torch.as_tensor(grads[name]).reshape(gexp.shape), gexp,
                                  rtol=1e-6, atol=1e-8), name


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("kind", ["default", "fixed-noise"])
def test_fit_reaches_botorchs_optimum(seed, kind):
    X, y = _data(40, 5, seed)
    kw = {"train_Yvar": torch.full_like(y, 0.01)} if kind == "fixed-noise" else {}
    ours = SingleTaskGP(X, y, outcome_transform=Standardize(m=1), **kw)
    theirs = copy.deepcopy(ours)
    value = fit_exact_gp(ours, ftol=1e-9)
    fit_gpytorch_mll(ExactMarginalLogLikelihood(theirs.likelihood, theirs),
                     optimizer_kwargs={"options": {"ftol": 1e-9}})
    assert value is not None and not ours.training
    loss_ours, _ = _botorch_loss_and_grads(ours)
    loss_theirs, _ = _botorch_loss_and_grads(theirs)
    assert value == pytest.approx(-loss_ours, abs=1e-7)
    assert loss_ours <= loss_theirs + 1e-6
    assert torch.allclose(ours.covar_module.lengthscale, theirs.covar_module.lengthscale,
                          rtol=1e-2, atol=1e-3)


def test_fit_respects_the_constraint_bounds():
    # Pure noise: the lengthscales run to their bounds and the noise absorbs the data.
    g = torch.Generator().manual_seed(3)
    X = torch.rand(30, 2, generator=g, dtype=torch.double)
    y = torch.randn(30, 1, generator=g, dtype=torch.double)
    model = SingleTaskGP(X, y, outcome_transform=Standardize(m=1))
    assert fit_exact_gp(model) is not None
    lo = float(model.covar_module.raw_lengthscale_constraint.lower_bound)
    assert (model.covar_module.lengthscale >= lo).all()
    assert float(model.likelihood.noise) >= float(
        model.likelihood.noise_covar.raw_noise_constraint.lower_bound)


def test_uncovered_models_are_left_to_botorch():
    X, y = _data(20, 3, 0)
    Xc = torch.cat([X, torch.randint(0, 3, (20, 1)).double()], dim=-1)
    uncovered = [
        MixedSingleTaskGP(Xc, y, cat_dims=[3]),
        SingleTaskGP(X, y, covar_module=ScaleKernel(MaternKernel(ard_num_dims=3))),
        SingleTaskGP(X, y, covar_module=RBFKernel(ard_num_dims=3)),  # softplus constraint
        SingleTaskGP(X, y, input_transform=Normalize(d=3)),
        SingleTaskGP(X, torch.cat([y, -y], dim=-1)),  # two outputs, one batched model
    ]
    for model in uncovered:
        before = {k: v.clone() for k, v in model.state_dict().items()}
        assert exact_gp_loss(model) is None
        assert fit_exact_gp(model) is None
        after = model.state_dict()
        assert all(torch.equal(before[k], after[k]) for k in before)


def test_a_failed_fit_raises_botorchs_error_and_leaves_the_model_untouched():
    from botorch.exceptions.errors import ModelFittingError

    X, y = _data(20, 2, 0)
    model = SingleTaskGP(X, y, outcome_transform=Standardize(m=1))
    with torch.no_grad():
        model.train_targets[3] = math.nan  # the loss is NaN everywhere: L-BFGS-B fails
    before = {k: v.clone() for k, v in model.named_parameters()}
    with pytest.raises(ModelFittingError):  # after BoTorch's retries from prior samples
        fit_exact_gp(model)
    assert all(torch.equal(before[k], p) for k, p in model.named_parameters())


def _study_records(space: ecopt.SearchSpace, n: int) -> list:
    objectives = [ecopt.Objective("f1", "min"), ecopt.Objective("f2", "min")]
    study = ecopt.Study(space, objectives, sampler="random", meter="wallclock", seed=0)
    for _ in range(n):
        t = study.ask()
        x = [float(v) if isinstance(v, (int, float)) else 0.5 for v in t.params.values()]
        study.tell(t, {"f1": sum(x), "f2": sum((1 - v) ** 2 for v in x)})
    records = list(study.records)
    study.close()
    return records


def test_sampler_fits_through_botorch_with_the_closed_form_closure(monkeypatch):
    """Continuous models: BoTorch's fit_gpytorch_mll with ecopt's closure (on one BLAS
    thread); mixed models: BoTorch's fit_gpytorch_mll with its own closure."""
    import botorch.fit

    calls = {"closure": 0, "default": 0, "blas_threads": set()}
    real = botorch.fit.fit_gpytorch_mll

    def spy(*args, **kwargs):
        from threadpoolctl import threadpool_info

        calls["blas_threads"] |= {i["num_threads"] for i in threadpool_info()
                                  if i["user_api"] == "blas"}
        calls["closure" if kwargs.get("closure") is not None else "default"] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(botorch.fit, "fit_gpytorch_mll", spy)
    objectives = [ecopt.Objective("f1", "min"), ecopt.Objective("f2", "min")]

    space = ecopt.SearchSpace({"a": ecopt.Float(0.0, 1.0), "b": ecopt.Float(0.0, 1.0)})
    sampler = QLogNEHVISampler(seed=0, n_init=2, num_restarts=2, raw_samples=16, mc_samples=8,
                               lengthscale_prior="gamma")  # one fit per outcome
    sampler.bind(objectives, [], 0)
    props = sampler.propose(space, _study_records(space, 8), [], 1)
    assert props[0].proposed_by == sampler.name
    assert "closed_form_fit" not in props[0].info.get("fast_path_off", {})
    assert calls["closure"] == 2 and calls["default"] == 0  # one GP per objective
    assert calls["blas_threads"] == {1}

    mixed = ecopt.SearchSpace({"a": ecopt.Float(0.0, 1.0),
                               "c": ecopt.Categorical(["x", "y", "z"])})
    props = sampler.propose(mixed, _study_records(mixed, 8), [], 1)
    assert props[0].proposed_by == sampler.name
    assert calls["closure"] == 2 and calls["default"] == 2
