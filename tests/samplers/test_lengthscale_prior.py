"""lengthscale_prior='auto': each GP under both priors, the better leave-one-out predictor kept."""

from __future__ import annotations

import math

import pytest
import torch

import ecopt
from ecopt.samplers import QLogNEHVISampler
from ecopt.samplers._models import AUTO_PRIORS, fit_outputs, loo_log_score


def _fit(X: torch.Tensor, Y: torch.Tensor, prior: str, Yvar: torch.Tensor | None = None):
    return fit_outputs(X, Y, Yvar, [], ["a"] if Y.shape[1] == 1 else ["a", "b"], warm=None,
                       cold_check=False, warm_ftol=None, cold_ftol=None,
                       lengthscale_prior=prior)


def _brute_force_loo(model) -> float:
    """Each point predicted from the n - 1 others, one explicit solve each."""
    model.train()
    with torch.no_grad():
        X = model.train_inputs[0]
        out = model.likelihood(model(X), X)
        K, m = out.covariance_matrix.detach(), out.mean.detach().reshape(-1)
        y = model.train_targets.reshape(-1)
    model.eval()
    total = 0.0
    n = len(y)
    for i in range(n):
        keep = [j for j in range(n) if j != i]
        Koo = K[keep][:, keep]
        k = K[i, keep]
        w = torch.linalg.solve(Koo, k)
        mu = m[i] + w @ (y[keep] - m[keep])
        var = K[i, i] - w @ k
        total += float(-0.5 * torch.log(2 * math.pi * var) - 0.5 * (y[i] - mu) ** 2 / var)
    return total / n


@pytest.mark.parametrize("noise", ["inferred", "observed"])
def test_loo_score_is_the_mean_leave_one_out_log_density(noise):
    g = torch.Generator().manual_seed(0)
    X = torch.rand(15, 3, generator=g, dtype=torch.double)
    Y = torch.sin(4 * X[:, :1]) + X[:, 1:2] ** 2
    Yvar = torch.full_like(Y, 1e-3) if noise == "observed" else None
    model = _fit(X, Y, "gamma", Yvar).models[0]
    assert loo_log_score(model) == pytest.approx(_brute_force_loo(model), rel=1e-6, abs=1e-8)
    assert not model.training  # the score leaves the model as it found it: in eval mode


@pytest.mark.parametrize("n, d, expected", [(8, 2, "gamma"), (20, 4, "dim-scaled")])
def test_auto_keeps_the_prior_whose_fit_predicts_left_out_points_better(n, d, expected):
    g = torch.Generator().manual_seed(1)
    X = torch.rand(n, d, generator=g, dtype=torch.double)
    # column a wiggles along one input; column b is near-linear in every input
    Y = torch.cat([torch.sin(12 * X[:, :1]), X.sum(-1, keepdim=True)], dim=1)
    auto = _fit(X, Y, "auto")
    assert set(auto.priors) == {"a", "b"} and set(auto.priors.values()) <= set(AUTO_PRIORS)
    for j, name in enumerate(["a", "b"]):
        scores = {p: loo_log_score(_fit(X, Y[:, j:j + 1], p).models[0]) for p in AUTO_PRIORS}
        best = max(scores, key=lambda p: scores[p])
        assert auto.priors[name] == best, scores
        assert loo_log_score(auto.models[j]) == pytest.approx(scores[best], rel=1e-6)
    # the rule is not a constant: 8 points in 2-d are predicted better under the Gamma
    # prior's short lengthscales, 20 points in 4-d under the dim-scaled prior
    assert auto.priors["a"] == expected


def test_auto_is_recorded_in_each_model_proposal():
    space = ecopt.SearchSpace({"x": ecopt.Float(0.0, 1.0), "y": ecopt.Float(0.0, 1.0)})
    objs = [ecopt.Objective("f1", "min"), ecopt.Objective("f2", "min")]
    sampler = QLogNEHVISampler(n_init=4, num_restarts=2, raw_samples=32, maxiter=30,
                               proposal_share=None, lengthscale_prior="auto")
    study = ecopt.Study(space, objs, sampler=sampler, seed=0, meter="wallclock")
    study.optimize(lambda t: {"f1": t["x"], "f2": (1 - t["x"]) ** 2 + t["y"]}, n_trials=6,
                   show_progress=False)
    model = [r.proposal for r in study.records if r.proposed_by == "qlognehvi"]
    assert len(model) == 2
    for p in model:
        assert set(p["lengthscale_priors"]) == {"f1", "f2"}
        assert set(p["lengthscale_priors"].values()) <= set(AUTO_PRIORS)
    # the fixed priors record nothing extra
    fixed = QLogNEHVISampler(n_init=4, num_restarts=2, raw_samples=32, maxiter=30,
                             proposal_share=None, lengthscale_prior="gamma")
    study = ecopt.Study(space, objs, sampler=fixed, seed=0, meter="wallclock")
    study.optimize(lambda t: {"f1": t["x"], "f2": t["y"]}, n_trials=5, show_progress=False)
    assert all("lengthscale_priors" not in r.proposal for r in study.records
               if r.proposed_by == "qlognehvi")


def test_auto_is_the_default():
    assert QLogNEHVISampler().lengthscale_prior == "auto"


def test_a_bad_prior_names_the_choices():
    with pytest.raises(ValueError, match="lengthscale_prior must be one of.*'auto'.*got 'wide'"):
        QLogNEHVISampler(lengthscale_prior="wide")


MIXED = ecopt.SearchSpace({"lr": ecopt.Float(1e-4, 1e-1, log=True), "w": ecopt.Int(1, 9),
                           "act": ecopt.Categorical(["relu", "tanh", "gelu"]),
                           "k": ecopt.Fixed(3)})


def test_init_center_starts_the_design_at_the_centre():
    assert QLogNEHVISampler().init_center is True  # the default
    sampler = QLogNEHVISampler(seed=0, n_init=4)
    plain = QLogNEHVISampler(seed=0, n_init=4, init_center=False)
    got, ref = sampler.propose(MIXED, [], [], 4), plain.propose(MIXED, [], [], 4)
    assert got[0].params["lr"] == pytest.approx(10 ** -2.5)  # the geometric middle
    assert got[0].params["w"] == 5 and got[0].params["k"] == 3
    assert got[0].proposed_by == "sobol" and got[0].info["centre"] is True
    # the rest of the design is the plain one's
    assert [p.params for p in got[1:]] == [p.params for p in ref[1:]]
    assert not any(p.info.get("centre") for p in got[1:] + ref)
    # only the study's first trial: a later design point is never the centre
    later = sampler.propose(MIXED, [], [got[0].params], 2)
    assert not any(p.info.get("centre") for p in later)
    assert sampler.describe()["init_center"] is True


@pytest.mark.parametrize("bad", [1, "yes", None])
def test_init_center_must_be_a_bool(bad):
    with pytest.raises(ValueError, match="init_center must be True or False"):
        QLogNEHVISampler(init_center=bad)
