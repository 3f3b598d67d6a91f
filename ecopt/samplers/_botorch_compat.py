"""The one module that touches private parts of BoTorch, GPyTorch and linear_operator.

ecopt's qLogNEHVI sampler runs BoTorch's pipeline with a few fast paths. Three
of them need something those libraries keep private; this module holds every
such use, checks at import that each part exists in the shape it expects
(:data:`UNAVAILABLE` says which fast paths it switched off, and why), and
re-checks at run time, raising :class:`CompatError` when a part is gone. The
sampler records a switched-off or failed fast path in the proposal's notes
(``proposal["fast_path_off"]``), warns once per study, and takes BoTorch's own
public path for that proposal: a dependency upgrade may make proposals slower,
never silently worse.

Fast paths and what each needs beyond BoTorch's public API:

``closed_form_fit``
    GP hyperparameters fitted by BoTorch's ``fit_gpytorch_mll`` with ecopt's
    closed-form loss and gradient as its ``closure``
    (:mod:`ecopt.samplers._mll`). Needs ``fit_gpytorch_mll(closure=,
    optimizer_kwargs=)`` and GPyTorch's ``Module.named_priors()`` yielding
    ``(name, module, prior, closure, setter)``.
``dense_posterior``
    qLogNEHVI's posterior samples at the candidates in closed form
    (:mod:`ecopt.samplers._posterior`), as BoTorch's TODO in
    ``_compute_posterior_samples_and_concat_pending`` suggests. Needs that
    method (BoTorch >= 0.16), ``_set_sampler(q_in, posterior)``,
    ``botorch.utils.low_rank._reshape_base_samples`` and the acquisition's
    ``_cache_root``, ``_baseline_L``, ``_X_baseline``.
``sweep_boxes``
    Three-objective box decompositions by a plane sweep
    (:mod:`ecopt.samplers._boxes`), given to NEHVI through its ``p_class``
    attribute. Needs ``_set_cell_bounds(num_new_points)`` to build them as
    ``self.p_class(ref_point=, Y=, **self.p_kwargs)``.

Two more fast paths use only public API and are not checked here:
``stacked_model`` (the outputs' GPs queried as one batched model) and
``pruning`` (BoTorch's baseline-pruning rule with a vectorised Pareto test).

Any fast path can be switched off by name with the environment variable
``ECOPT_FAST_PATHS_OFF`` (comma-separated, read at import), e.g.
``ECOPT_FAST_PATHS_OFF=dense_posterior,sweep_boxes``: the sampler then takes
BoTorch's public path for it and says so in each proposal's notes. It is how
``benchmarks/fast_paths.py`` measures what each path buys, and a way out should
one misbehave on some BoTorch release.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Callable
from typing import Any

import torch
from botorch.acquisition.cached_cholesky import CachedCholeskyMCSamplerMixin
from botorch.acquisition.multi_objective.logei import qLogNoisyExpectedHypervolumeImprovement
from botorch.fit import fit_gpytorch_mll
from botorch.utils.multi_objective.hypervolume import NoisyExpectedHypervolumeMixin

__all__ = ["FAST_PATHS", "OFF_VARIABLE", "UNAVAILABLE", "CompatError", "check",
           "fast_acquisition_class", "dense_f_X_samples", "named_priors", "sweep_in_use",
           "switched_off"]

#: Every fast path, with what it does (the names recorded in ``proposal["fast_path_off"]``).
FAST_PATHS: dict[str, str] = {
    "closed_form_fit": "GP fits with a closed-form loss and gradient",
    "stacked_model": "the outputs' GPs queried as one batched model",
    "pruning": "baseline pruning with a vectorised Pareto test",
    "sweep_boxes": "three-objective box decompositions by a plane sweep",
    "dense_posterior": "the acquisition's posterior samples in closed form",
}


class CompatError(RuntimeError):
    """A private part of BoTorch/GPyTorch/linear_operator is not what ecopt expects."""


def _params(fn: Any) -> list[str]:
    return list(inspect.signature(fn).parameters)


def _source_has(fn: Any, *needles: str) -> bool:
    """Whether ``fn``'s source holds every needle (``True`` when there is no source to read)."""
    try:
        src = inspect.getsource(fn)
    except (OSError, TypeError):
        return True
    return all(n in src for n in needles)


def _check(name: str, test: Callable[[], str | None]) -> str | None:
    try:
        return test()
    except Exception as exc:  # noqa: BLE001 - any failure to inspect means "not as expected"
        return f"{name}: {type(exc).__name__}: {exc}"


def _closed_form_fit() -> str | None:
    if not {"closure", "optimizer_kwargs"} <= set(_params(fit_gpytorch_mll)):
        return "botorch.fit.fit_gpytorch_mll takes no closure/optimizer_kwargs"
    from gpytorch.kernels import RBFKernel
    from gpytorch.priors import GammaPrior

    probe = RBFKernel(lengthscale_prior=GammaPrior(3.0, 6.0))
    named_priors(probe)  # raises CompatError when the tuples changed
    return None


def _dense_posterior() -> str | None:
    hook = getattr(qLogNoisyExpectedHypervolumeImprovement,
                   "_compute_posterior_samples_and_concat_pending", None)
    if hook is None:
        return ("qLogNEHVI has no _compute_posterior_samples_and_concat_pending "
                "(added in BoTorch 0.16)")
    if _params(hook) != ["self", "X"]:
        return f"_compute_posterior_samples_and_concat_pending takes {_params(hook)}"
    set_sampler = getattr(CachedCholeskyMCSamplerMixin, "_set_sampler", None)
    if set_sampler is None or _params(set_sampler) != ["self", "q_in", "posterior"]:
        return "CachedCholeskyMCSamplerMixin._set_sampler(q_in, posterior) is missing"
    from botorch.utils import low_rank

    reshape = getattr(low_rank, "_reshape_base_samples", None)
    if reshape is None or _params(reshape) != ["base_samples", "sample_shape", "posterior"]:
        return "botorch.utils.low_rank._reshape_base_samples(base_samples, sample_shape, " \
               "posterior) is missing"
    if not _source_has(NoisyExpectedHypervolumeMixin._set_cell_bounds, "_baseline_L",
                       "_cache_root"):
        return "NEHVI no longer caches _baseline_L in _set_cell_bounds"
    return None


def _sweep_boxes() -> str | None:
    cell_bounds = getattr(NoisyExpectedHypervolumeMixin, "_set_cell_bounds", None)
    if cell_bounds is None or _params(cell_bounds) != ["self", "num_new_points"]:
        return "NoisyExpectedHypervolumeMixin._set_cell_bounds(num_new_points) is missing"
    if not _source_has(cell_bounds, "self.p_class(", "self.p_kwargs"):
        return "NEHVI no longer builds its box decompositions with self.p_class"
    return None


def named_priors(module: Any) -> dict[str, Any]:
    """``{prior name: prior}`` of a GPyTorch module.

    Raises:
        CompatError: when ``named_priors()`` does not yield
            ``(name, module, prior, closure, setter)`` tuples.
    """
    from gpytorch.priors import Prior

    out: dict[str, Any] = {}
    for item in module.named_priors():
        if not (isinstance(item, tuple) and len(item) == 5 and isinstance(item[0], str)
                and isinstance(item[2], Prior)):
            raise CompatError("gpytorch's named_priors() no longer yields (name, module, prior, "
                              f"closure, setter): got {type(item).__name__} "
                              f"of length {len(item) if isinstance(item, tuple) else '-'}")
        out[item[0]] = item[2]
    return out


_FAST_CLASSES: dict[tuple[type, bool, bool], type] = {}


def fast_acquisition_class(cls: type, sweep: bool, dense: bool) -> type:
    """``cls`` (a BoTorch NEHVI acquisition) with the ``sweep_boxes`` and/or
    ``dense_posterior`` fast paths; ``cls`` itself when neither is asked for.

    - ``sweep``: box decompositions at three objectives (``alpha == 0``) by
      :class:`~ecopt.samplers._boxes.SweepPartitioning` (the same region in as
      many boxes as BoTorch's ``FastNondominatedPartitioning``, ~50x faster).
    - ``dense``: posterior samples at the candidates from
      :func:`dense_f_X_samples` when ``acqf.__dict__["dense"]`` holds a
      :class:`~ecopt.samplers._posterior.DenseLatent` (read from the instance's
      ``__dict__`` so that ``nn.Module`` attribute lookup never sees it); BoTorch's
      own method when that returns ``None``.

    Raises:
        CompatError: when a requested fast path was switched off at import.
    """
    for name, wanted in (("sweep_boxes", sweep), ("dense_posterior", dense)):
        if wanted and name in UNAVAILABLE:
            raise CompatError(UNAVAILABLE[name])
    key = (cls, sweep, dense)
    if not (sweep or dense):
        return cls
    if key not in _FAST_CLASSES:
        body: dict[str, Any] = {}
        if sweep:
            from ecopt.samplers._boxes import SweepPartitioning

            def get(self: Any) -> Any:
                exact3 = self.alpha == 0 and self.ref_point.shape[-1] == 3
                return SweepPartitioning if exact3 else self.__dict__["_botorch_p_class"]

            def set_(self: Any, value: Any) -> None:
                self.__dict__["_botorch_p_class"] = value

            body["p_class"] = property(get, set_)
        if dense:
            def samples(self: Any, X: Any) -> Any:
                latent = self.__dict__.get("dense")
                out = None if latent is None else dense_f_X_samples(self, latent, X)
                if out is None:
                    return cls._compute_posterior_samples_and_concat_pending(  # type: ignore[attr-defined]
                        self, X)
                return out

            body["_compute_posterior_samples_and_concat_pending"] = samples
        _FAST_CLASSES[key] = type(cls.__name__, (cls,), body)
    return _FAST_CLASSES[key]


def sweep_in_use(acqf: Any) -> bool:
    """Whether ``acqf``'s box decompositions are :class:`SweepPartitioning` ones."""
    from ecopt.samplers._boxes import SweepPartitioning

    boxes = getattr(getattr(acqf, "partitioning", None), "box_decompositions", None)
    return boxes is not None and len(boxes) > 0 and isinstance(boxes[0], SweepPartitioning)


def _attr(obj: Any, name: str) -> Any:
    try:
        return getattr(obj, name)
    except AttributeError:
        raise CompatError(f"{type(obj).__name__} has no {name} (BoTorch changed)") from None


def dense_f_X_samples(acqf: Any, dense: Any, X: Any) -> tuple[Any, Any] | None:
    """BoTorch's ``_compute_posterior_samples_and_concat_pending(X)`` for NEHVI, densely.

    The same samples as BoTorch's gpytorch path (the same base samples, the same
    cached baseline factor, the same low-rank update), from the closed-form
    rows of :meth:`DenseLatent.new_rows`.

    Args:
        acqf: A NEHVI acquisition built by :func:`fast_acquisition_class`.
        dense: Its model's :class:`~ecopt.samplers._posterior.DenseLatent`.
        X: ``(*batch, q, d)`` candidates.

    Returns:
        ``(samples (S, *batch, q, m), X)``; ``None`` (the caller then runs
        BoTorch's own method, which also handles a failure as BoTorch does) when
        the acquisition is not in the state this covers: no cached baseline
        factor, pending points outside the cached baseline, a baseline that is
        not ``(nb, d)``, candidates not float64, a posterior that is not
        multi-output; or when the low-rank update fails (a non-PSD block after
        jitter, non-finite samples).

    Raises:
        CompatError: when an attribute this reads is gone.
    """
    from botorch.utils.low_rank import _reshape_base_samples
    from botorch.utils.transforms import match_batch_shape
    from linear_operator.utils.cholesky import psd_safe_cholesky
    from linear_operator.utils.errors import NanError, NotPSDError

    if not _attr(acqf, "_cache_root"):
        return None
    baseline_L = getattr(acqf, "_baseline_L", None)  # absent until a baseline is cached
    if baseline_L is None:
        return None
    X_pending = _attr(acqf, "X_pending")
    X_baseline = _attr(acqf, "X_baseline")
    if X_pending is not None and (
            not bool(_attr(acqf, "cache_pending"))
            or X_pending.shape[-2] + _attr(acqf, "_X_baseline").shape[-2]
            != X_baseline.shape[-2]):
        return None  # pending points outside the cached baseline: BoTorch appends them
    if X_baseline.dim() != 2 or X.dtype != torch.double:
        return None
    q = X.shape[-2]
    bc = dense.baseline(X_baseline, baseline_L)
    nb = X.dim() - 2
    key = (nb, q)
    base = bc.base.get(key)
    sampler = _attr(acqf, "sampler")
    if base is None or _attr(acqf, "q_in") != q or base[0] is not sampler.base_samples:
        # First evaluation of q points: BoTorch's posterior at one candidate batch,
        # once, to set the sampler for q new points and lay the base samples out as
        # BoTorch does (the layout is the same for every batch element: expanded).
        with torch.no_grad():
            X1 = X.detach()[(slice(0, 1),) * nb]
            X_full = torch.cat([match_batch_shape(X_baseline, X1), X1], dim=-2)
            posterior = acqf.model.posterior(X_full)
            if not _attr(posterior, "_is_mt"):
                return None
            _attr(acqf, "_set_sampler")(q_in=q, posterior=posterior)
            shaped = _reshape_base_samples(base_samples=acqf.sampler.base_samples,
                                           sample_shape=acqf.sampler.sample_shape,
                                           posterior=posterior)
        base = bc.base[key] = (acqf.sampler.base_samples, shaped)
    mean, bl, br = dense.new_rows(X, X_baseline, bc.B)
    bl_chol = torch.linalg.solve_triangular(baseline_L, bl.transpose(-2, -1),
                                            upper=False).transpose(-2, -1)
    try:
        br_chol = psd_safe_cholesky(br - bl_chol @ bl_chol.transpose(-2, -1), max_tries=6)
    except (NanError, NotPSDError):
        return None
    new_Lq = torch.cat([bl_chol, br_chol], dim=-1)  # (*batch, m, q, nb + q)
    res = new_Lq.matmul(base[1]).add(mean.transpose(-1, -2).unsqueeze(-1))  # (*batch,m,q,S)
    samples = res.permute(-1, *range(nb), -2, -3)
    if not bool(torch.isfinite(samples).all()):
        return None
    return samples, X


def check() -> dict[str, str]:
    """Run the import-time checks: fast path -> why it is off (empty when all pass)."""
    return {name: why for name, test in (("closed_form_fit", _closed_form_fit),
                                         ("dense_posterior", _dense_posterior),
                                         ("sweep_boxes", _sweep_boxes))
            if (why := _check(name, test)) is not None}


#: Environment variable naming fast paths to switch off (comma-separated).
OFF_VARIABLE = "ECOPT_FAST_PATHS_OFF"


def switched_off(value: str | None) -> dict[str, str]:
    """Fast paths named in ``value`` (the variable's text) -> why they are off.

    Raises:
        ValueError: for a name that is not a fast path.
    """
    names = [n.strip() for n in (value or "").split(",") if n.strip()]
    unknown = [n for n in names if n not in FAST_PATHS]
    if unknown:
        raise ValueError(f"{OFF_VARIABLE} names unknown fast path(s) {unknown}; "
                         f"known: {sorted(FAST_PATHS)}")
    return {n: f"switched off by {OFF_VARIABLE}" for n in names}


#: Fast paths switched off at import -> why (empty when every check passed and the
#: environment switched none off).
UNAVAILABLE: dict[str, str] = {**check(), **switched_off(os.environ.get(OFF_VARIABLE))}


#: Environment variable: ``compile`` lets BoTorch JIT-compile its fused C++ qLogNEHVI kernel
#: on first use (:func:`fused_kernel_policy`).
FUSED_VARIABLE = "ECOPT_FUSED_KERNEL"


def fused_kernel_policy(value: str | None) -> str:
    """Keep BoTorch (>= 0.18) from compiling its fused qLogNEHVI kernel on first use.

    BoTorch's ``_try_load_fused_kernel`` (``botorch/acquisition/multi_objective/logei.py``)
    JIT-compiles ``csrc/logei_fused.cpp`` with ``torch.utils.cpp_extension.load`` on
    the first qLogNEHVI, silently. Measured on this project's shared 2-core machine:
    the compile took 42 s of CPU (215 s wall under load) and saved about 0.25 s of
    CPU per proposal at 20 observations, two objectives: it pays back after some
    170 proposals, more than a typical study, and every venv sharing the cache
    rebuilds it. So ecopt marks the load as attempted before BoTorch tries: a
    prebuilt ``logei_fused_ext`` module, when importable, is still used (no
    compile); otherwise the acquisition takes BoTorch's pure-PyTorch path (the
    same values). ``ECOPT_FUSED_KERNEL=compile`` restores BoTorch's behaviour.

    Args:
        value: The variable's text (``None``: unset).

    Returns:
        ``"botorch"`` (left to BoTorch), ``"prebuilt"``, ``"loaded"`` (before
        this call), ``"off"`` or
        ``"absent"`` (this BoTorch has no fused kernel).

    Raises:
        ValueError: for a value other than unset, empty or ``compile``.
    """
    if value not in (None, "", "compile"):
        raise ValueError(f"{FUSED_VARIABLE} must be unset or 'compile', got {value!r}")
    from botorch.acquisition.multi_objective import logei

    if not hasattr(logei, "_try_load_fused_kernel") or not hasattr(logei, "_load_attempted"):
        return "absent"
    if value == "compile":
        return "botorch"
    if logei._load_attempted:  # BoTorch loaded (or failed to load) it before ecopt's import
        return "loaded" if logei._C is not None else "off"
    logei._load_attempted = True
    try:
        import logei_fused_ext  # type: ignore[import-not-found]  # a prebuilt kernel
    except ImportError:
        return "off"
    logei._C = logei_fused_ext
    return "prebuilt"


#: What :func:`fused_kernel_policy` did at import.
FUSED_KERNEL = fused_kernel_policy(os.environ.get(FUSED_VARIABLE))
