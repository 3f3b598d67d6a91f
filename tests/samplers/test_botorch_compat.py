"""The compat layer: changed BoTorch internals switch fast paths off, never the model off.

Each test changes a real BoTorch internal the way an upgrade could (a changed
signature, an attribute gone at run time, BoTorch's own optimiser failing) and
checks what the sampler then proposes and records.
"""

from __future__ import annotations

import importlib.metadata as md

import numpy as np
import pytest

import ecopt
from ecopt.samplers import FallbackWarning, QLogNEHVISampler
from ecopt.samplers import _botorch_compat as compat

# The full proposal path (gradient steps through BoTorch's optimiser) is what these tests watch.
FAST = {"num_restarts": 2, "raw_samples": 32, "mc_samples": 16, "maxiter": 30,
        "proposal_share": None}
OBJS = [ecopt.Objective("f1", "min"), ecopt.Objective("f2", "min")]
SPACE = ecopt.SearchSpace({"a": ecopt.Float(0.0, 1.0), "b": ecopt.Float(0.0, 1.0),
                           "c": ecopt.Float(0.0, 1.0)})


def _records(n: int = 10) -> list:
    study = ecopt.Study(SPACE, OBJS, sampler="random", meter="wallclock", seed=0)
    for _ in range(n):
        t = study.ask()
        x = np.array([t["a"], t["b"], t["c"]])
        study.tell(t, {"f1": float(x[0] + 0.2 * x[2]), "f2": float((1 - x[0]) ** 2 + x[1])})
    records = list(study.records)
    study.close()
    return records


def _propose(**kw: object) -> ecopt.samplers.Proposal:
    sampler = QLogNEHVISampler(seed=0, n_init=2, **FAST, **kw)  # type: ignore[arg-type]
    sampler.bind(OBJS, [], 0)
    (p,) = sampler.propose(SPACE, _records(), [], 1)
    return p


def _x(p: ecopt.samplers.Proposal) -> np.ndarray:
    return np.array(SPACE.encode(p.params))


def test_the_checks_pass_where_botorch_has_every_internal():
    """At BoTorch >= 0.16 every fast path is on; below, only the dense posterior is off
    (its hook does not exist there): the checks describe the installed BoTorch."""
    from packaging.version import Version

    expected = set() if Version(md.version("botorch")) >= Version("0.16") \
        else {"dense_posterior"}
    assert set(compat.check()) == set(compat.UNAVAILABLE) == expected, compat.UNAVAILABLE


def test_a_changed_signature_switches_the_fast_path_off(monkeypatch):
    """BoTorch changes ``_set_sampler``'s signature: the dense posterior goes off at import,
    the proposal still comes from qLogNEHVI through BoTorch's own posterior (the same
    point), the notes say why and the study gets one warning."""
    from botorch.acquisition.cached_cholesky import CachedCholeskyMCSamplerMixin

    if "dense_posterior" in compat.UNAVAILABLE:
        pytest.skip(f"dense_posterior already off: {compat.UNAVAILABLE['dense_posterior']}")
    reference = _propose(dense_posterior=False)
    original = CachedCholeskyMCSamplerMixin._set_sampler

    def _set_sampler(self, *args, **kwargs):  # still works for BoTorch, looks different
        return original(self, *args, **kwargs)

    monkeypatch.setattr(CachedCholeskyMCSamplerMixin, "_set_sampler", _set_sampler)
    monkeypatch.setattr(compat, "UNAVAILABLE", compat.check())
    assert set(compat.UNAVAILABLE) == {"dense_posterior"}
    with pytest.warns(FallbackWarning, match="dense_posterior"):
        p = _propose()
    assert p.proposed_by == "qlognehvi"
    assert "_set_sampler" in p.info["fast_path_off"]["dense_posterior"]
    np.testing.assert_allclose(_x(p), _x(reference), atol=1e-6)


def test_a_fast_path_failing_at_run_time_falls_back_to_botorchs_public_path(monkeypatch):
    """An attribute the dense posterior reads is gone mid-optimisation (any exception
    type): this proposal is rebuilt on BoTorch's public path, still qLogNEHVI."""
    from ecopt.samplers._posterior import DenseLatent

    if "dense_posterior" in compat.UNAVAILABLE:
        pytest.skip(f"dense_posterior off: {compat.UNAVAILABLE['dense_posterior']}")
    reference = _propose(dense_posterior=False)

    def gone(self, *args):
        raise AttributeError("'qLogNoisyExpectedHypervolumeImprovement' object has no "
                             "attribute '_baseline_L'")

    monkeypatch.setattr(DenseLatent, "new_rows", gone)
    with pytest.warns(FallbackWarning, match="fast path"):
        p = _propose()
    assert p.proposed_by == "qlognehvi" and "fallback" not in p.info
    off = p.info["fast_path_off"]
    assert off["dense_posterior"].startswith("failed in this proposal: AttributeError")
    assert set(off) == {"dense_posterior", "pruning", "stacked_model"}
    # BoTorch's own pruning draws the same samples as ecopt's (the RNG is re-seeded): the
    # public path proposes the same point.
    np.testing.assert_allclose(_x(p), _x(reference), atol=1e-6)


def test_sobol_only_when_botorchs_own_path_fails_too(monkeypatch):
    import botorch.optim

    def broken(*args, **kwargs):
        raise TypeError("optimize_acqf() got an unexpected keyword argument 'options'")

    monkeypatch.setattr(botorch.optim, "optimize_acqf", broken)
    with pytest.warns(FallbackWarning, match="not even on BoTorch's own path"):
        p = _propose()
    assert p.proposed_by == "sobol"
    assert p.info["fallback"] == "TypeError: optimize_acqf() got an unexpected keyword " \
                                 "argument 'options'"
    assert "model fallback" in p.info["why"]


def test_named_priors_must_be_what_the_closed_form_fit_reads():
    from gpytorch.kernels import RBFKernel
    from gpytorch.priors import GammaPrior

    prior = GammaPrior(3.0, 6.0)
    assert compat.named_priors(RBFKernel(lengthscale_prior=prior)) == {"lengthscale_prior": prior}

    class OldStyle:
        def named_priors(self):
            yield "lengthscale_prior", prior, None, None  # four-tuples, as GPyTorch once had

    with pytest.raises(compat.CompatError, match="named_priors"):
        compat.named_priors(OldStyle())


def test_the_environment_switch_names_fast_paths_and_refuses_unknown_ones():
    assert compat.switched_off(None) == {}
    assert compat.switched_off(" pruning, sweep_boxes ,") == {
        "pruning": "switched off by ECOPT_FAST_PATHS_OFF",
        "sweep_boxes": "switched off by ECOPT_FAST_PATHS_OFF"}
    with pytest.raises(ValueError, match=r"unknown fast path\(s\) \['prunning'\]; known: "):
        compat.switched_off("prunning")


@pytest.mark.parametrize("path", ["closed_form_fit", "stacked_model", "pruning"])
def test_a_fast_path_switched_off_takes_botorchs_public_path_and_says_so(monkeypatch, path):
    """The switch ``benchmarks/fast_paths.py`` measures with: the proposal is still
    qLogNEHVI's, the notes name the path and the reason, and it lands near the
    fast path's proposal (both optimise the same acquisition)."""
    fast = _propose()
    monkeypatch.setitem(compat.UNAVAILABLE, path, "switched off by ECOPT_FAST_PATHS_OFF")
    with pytest.warns(UserWarning, match=f"fast path '{path}' is off"):
        slow = _propose()
    assert slow.proposed_by == "qlognehvi"
    assert slow.info["fast_path_off"][path] == "switched off by ECOPT_FAST_PATHS_OFF"
    assert path not in fast.info.get("fast_path_off", {})
    assert np.abs(_x(slow) - _x(fast)).max() < 0.25
