"""The dense posterior path gives BoTorch's acquisition values and gradients.

Each test builds the same NEHVI acquisition twice, with ecopt's dense
posterior (``acqf.dense``) and without (BoTorch's gpytorch path, the reference),
and compares values and gradients at random candidates: real BoTorch models
with non-default hyperparameters, real samplers.
"""

from __future__ import annotations

import warnings

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("botorch")

from botorch.acquisition.multi_objective.logei import (  # noqa: E402
    qLogNoisyExpectedHypervolumeImprovement,
)
from botorch.acquisition.multi_objective.monte_carlo import (  # noqa: E402
    qNoisyExpectedHypervolumeImprovement,
)
from botorch.acquisition.multi_objective.objective import (  # noqa: E402
    IdentityMCMultiOutputObjective,
)
from botorch.models import MixedSingleTaskGP, ModelListGP, SingleTaskGP  # noqa: E402
from botorch.models.transforms.outcome import Standardize  # noqa: E402
from botorch.sampling.normal import SobolQMCNormalSampler  # noqa: E402
from gpytorch.kernels import MaternKernel, ScaleKernel  # noqa: E402

from ecopt.samplers._posterior import DenseLatent  # noqa: E402
from ecopt.samplers._botorch_compat import UNAVAILABLE, fast_acquisition_class  # noqa: E402

D = torch.double
#: Tests of the dense path itself; skipped where the compat layer switched it off.
needs_dense = pytest.mark.skipif("dense_posterior" in UNAVAILABLE,
                                 reason=f"dense_posterior off: {UNAVAILABLE.get('dense_posterior')}")


def _fast(cls: type) -> type:
    return fast_acquisition_class(cls, sweep=True, dense=True)


def _model(n: int, d: int, m: int, seed: int, fixed_noise: bool = False) -> SingleTaskGP:
    g = torch.Generator().manual_seed(seed)
    X = torch.rand(n, d, generator=g, dtype=D)
    Y = torch.stack([torch.sin(3 * X[:, 0] + j) + X[:, 1:].sum(-1) * (j + 1)
                     for j in range(m)], -1) + 0.05 * torch.randn(n, m, generator=g, dtype=D)
    Yvar = torch.full_like(Y, 0.01) * (1 + torch.rand(n, m, generator=g, dtype=D))
    model = SingleTaskGP(X, Y, train_Yvar=Yvar if fixed_noise else None,
                         outcome_transform=Standardize(m=m))
    # Fitted-looking, distinct per output; lengthscales short enough that a
    # candidate's variance given the baseline is well above rounding (where it
    # is not, BoTorch's own values are rounding noise and adds jitter per batch).
    with torch.no_grad():
        model.covar_module.lengthscale = 0.15 + 0.3 * torch.rand(m, 1, d, generator=g, dtype=D)
        model.mean_module.constant.copy_(torch.randn(m, generator=g, dtype=D) * 0.3)
        if not fixed_noise:
            model.likelihood.noise = 1e-2 + 0.05 * torch.rand(m, 1, generator=g, dtype=D)
    return model.eval()


def _pair(cls: type, model: SingleTaskGP, M: int, seed: int, **kw: object) -> tuple:
    """The same acquisition twice: dense path on, dense path off."""
    out = []
    for dense in (True, False):
        ref = [-1.0] * M
        acqf = _fast(cls)(model=model, ref_point=ref, X_baseline=model.train_inputs[0][0],
                          sampler=SobolQMCNormalSampler(torch.Size([32]), seed=seed),
                          objective=IdentityMCMultiOutputObjective(outcomes=list(range(M))),
                          prune_baseline=False, cache_root=True, **kw)
        if dense:
            acqf.__dict__["dense"] = DenseLatent.of(model)
            assert acqf.__dict__["dense"] is not None
        out.append(acqf)
    return out[0], out[1]


def _value_and_grad(acqf: object, X: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    X = X.clone().requires_grad_(True)
    v = acqf(X)  # type: ignore[operator]
    (g,) = torch.autograd.grad(v.sum(), X)
    return v.detach(), g


def _assert_same(dense: object, ref: object, shapes: list[tuple[int, ...]], seed: int) -> None:
    g = torch.Generator().manual_seed(1000 + seed)  # not the training points' stream
    for shape in shapes:
        X = torch.rand(*shape, generator=g, dtype=D)
        v1, g1 = _value_and_grad(dense, X)
        v0, g0 = _value_and_grad(ref, X)
        assert torch.isfinite(v0).all()
        torch.testing.assert_close(v1, v0, rtol=1e-9, atol=1e-12)
        torch.testing.assert_close(g1, g0, rtol=1e-7, atol=1e-10)


@needs_dense
@pytest.mark.parametrize("cls", [qLogNoisyExpectedHypervolumeImprovement,
                                 qNoisyExpectedHypervolumeImprovement])
@pytest.mark.parametrize("m,fixed", [(2, False), (3, False), (2, True)])
def test_values_and_gradients_equal_botorch(cls: type, m: int, fixed: bool) -> None:
    model = _model(n=18, d=4, m=m, seed=m + 10 * fixed, fixed_noise=fixed)
    dense, ref = _pair(cls, model, m, seed=3)
    # restarts, raw samples, q = 2 joint batches, two batch dimensions, q back to 1
    _assert_same(dense, ref, [(10, 1, 4), (64, 1, 4), (5, 2, 4), (2, 3, 1, 4), (3, 2, 2, 4),
                              (7, 1, 4)], seed=m)


@needs_dense
def test_pending_points_and_sequential_batches_equal_botorch() -> None:
    model = _model(n=15, d=3, m=2, seed=5)
    pend = torch.rand(2, 3, generator=torch.Generator().manual_seed(1), dtype=D)
    dense, ref = _pair(qLogNoisyExpectedHypervolumeImprovement, model, 2, seed=4,
                       X_pending=pend)
    _assert_same(dense, ref, [(6, 1, 3)], seed=1)
    # As sequential greedy does: a new pending point changes the baseline.
    more = torch.rand(1, 3, generator=torch.Generator().manual_seed(2), dtype=D)
    for acqf in (dense, ref):
        acqf.set_X_pending(torch.cat([pend, more]))
    _assert_same(dense, ref, [(6, 1, 3), (4, 2, 3)], seed=2)


@needs_dense
def test_constraint_outputs_equal_botorch() -> None:
    model = _model(n=16, d=3, m=3, seed=8)
    out = []
    for dense in (True, False):
        acqf = _fast(qLogNoisyExpectedHypervolumeImprovement)(
            model=model, ref_point=[-1.0, -1.0], X_baseline=model.train_inputs[0][0],
            sampler=SobolQMCNormalSampler(torch.Size([32]), seed=0),
            objective=IdentityMCMultiOutputObjective(outcomes=[0, 1]),
            constraints=[lambda Z: Z[..., 2] - 0.5], prune_baseline=False, cache_root=True)
        if dense:
            acqf.__dict__["dense"] = DenseLatent.of(model)
        out.append(acqf)
    _assert_same(out[0], out[1], [(8, 1, 3), (3, 2, 3)], seed=3)


@needs_dense
def test_dense_path_is_used() -> None:
    """The comparison above means nothing unless the dense path actually ran."""
    import ecopt.samplers._posterior as post

    model = _model(n=12, d=3, m=2, seed=2)
    dense, _ = _pair(qLogNoisyExpectedHypervolumeImprovement, model, 2, seed=0)
    calls = []
    orig = post.DenseLatent.new_rows

    def spy(self, *a):  # type: ignore[no-untyped-def]
        calls.append(1)
        return orig(self, *a)

    post.DenseLatent.new_rows = spy  # type: ignore[method-assign]
    try:
        dense(torch.rand(4, 1, 3, dtype=D))
    finally:
        post.DenseLatent.new_rows = orig  # type: ignore[method-assign]
    assert calls


@needs_dense
def test_shared_parameters_zero_mean_and_one_lengthscale_equal_botorch() -> None:
    """Other forms of BoTorch's default GP: one lengthscale for all inputs, a zero mean,
    and a mean constant / noise level shared by every output (broadcast)."""
    from gpytorch.kernels import RBFKernel
    from gpytorch.likelihoods import GaussianLikelihood
    from gpytorch.means import ConstantMean, ZeroMean

    g = torch.Generator().manual_seed(9)
    X = torch.rand(14, 3, generator=g, dtype=D)
    Y = torch.stack([torch.sin(4 * X[:, 0]) + X[:, 1], torch.cos(3 * X[:, 2])], -1)
    for mean in (ZeroMean(batch_shape=torch.Size([2])), ConstantMean()):
        model = SingleTaskGP(X, Y, covar_module=RBFKernel(batch_shape=torch.Size([2])),
                             mean_module=mean, likelihood=GaussianLikelihood(),
                             outcome_transform=Standardize(m=2))
        with torch.no_grad():
            model.covar_module.lengthscale = torch.tensor([[[0.3]], [[0.5]]], dtype=D)
            model.likelihood.noise = torch.tensor([0.02], dtype=D)
            if isinstance(mean, ConstantMean):
                mean.constant.fill_(0.4)
        model.eval()
        assert model.covar_module.lengthscale.shape == (2, 1, 1)
        dense, ref = _pair(qLogNoisyExpectedHypervolumeImprovement, model, 2, seed=1)
        _assert_same(dense, ref, [(6, 1, 3), (2, 2, 1, 3), (3, 2, 3)], seed=9)


def test_float32_models_keep_botorch_path() -> None:
    model = _model(n=12, d=3, m=2, seed=3)
    assert DenseLatent.of(model.to(torch.float32)) is None


def test_models_not_covered_keep_botorch_path() -> None:
    X = torch.rand(10, 3, dtype=D)
    Y = torch.rand(10, 2, dtype=D)
    single = [SingleTaskGP(X, Y[:, j:j + 1], outcome_transform=Standardize(m=1)).eval()
              for j in range(2)]
    assert DenseLatent.of(ModelListGP(*single)) is None
    assert DenseLatent.of(single[0]) is None  # one output: not an NEHVI model
    Xc = torch.cat([X[:, :2], torch.randint(0, 3, (10, 1)).to(D)], -1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        mixed = MixedSingleTaskGP(Xc, Y, cat_dims=[2], outcome_transform=Standardize(m=2))
    assert DenseLatent.of(mixed.eval()) is None
    other = SingleTaskGP(X, Y, covar_module=ScaleKernel(MaternKernel(batch_shape=(2,))),
                         outcome_transform=Standardize(m=2)).eval()
    assert DenseLatent.of(other) is None
    training = SingleTaskGP(X, Y, outcome_transform=Standardize(m=2))  # not in eval mode
    assert DenseLatent.of(training) is None


def test_sampler_proposals_equal_with_and_without_dense_path() -> None:
    """End to end: a study's next batch (q = 2, sequential greedy, observed noise) is the
    same with the dense path as with BoTorch's."""
    import dataclasses

    import numpy as np
    from botorch.test_functions.multi_objective import DTLZ2

    import ecopt
    from ecopt.samplers import QLogNEHVISampler

    fn = DTLZ2(dim=4, num_objectives=2)
    space = ecopt.SearchSpace({f"x{i}": ecopt.Float(0.0, 1.0) for i in range(4)})
    objs = [ecopt.Objective(nm, "min", float(r)) for nm, r in zip(("f0", "f1"), fn.ref_point)]
    study = ecopt.Study(space, objs, sampler="random", meter="wallclock", seed=1)
    rng = np.random.default_rng(0)
    for _ in range(14):
        x = rng.random(4)
        y = fn.evaluate_true(torch.tensor([x]))[0].tolist()
        study.tell(study.ask(params=space.decode(x)), {"f0": y[0], "f1": y[1]})
    records = [dataclasses.replace(r, noise={"f0": 0.01, "f1": 0.02}) for r in study.records]
    study.close()
    out = []
    for dense in (True, False):
        s = QLogNEHVISampler(seed=0, n_init=1, dense_posterior=dense)
        s.bind(objs, [], 0)
        props = s.propose(space, records, [], 2)
        assert all(p.proposed_by == "qlognehvi" for p in props)
        out.append(np.array([space.encode(p.params) for p in props]))
    np.testing.assert_allclose(out[0], out[1], atol=1e-6)
