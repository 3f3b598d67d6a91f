"""One model-based proposal: the four stages in order, fast paths first.

:func:`model_based` runs encoding, models and fitting, acquisition and
optimisation (see :mod:`ecopt.samplers.qnehvi`) for a
:class:`~ecopt.samplers.QLogNEHVISampler`. A fast path that fails in the
acquisition or optimisation stage, for any reason, is dropped for this
proposal: the acquisition is rebuilt on BoTorch's public path (BoTorch's own
pruning and box decompositions, the model list instead of the stacked model)
from the same random state. An exception from BoTorch's own path propagates:
the sampler then proposes Sobol points.

With ``cost_aware``, a weighted acquisition (:mod:`ecopt.samplers._cost`)
that fails on the fast paths is tried once on BoTorch's public path; working
there, the fast paths are dropped as above. Failing there too, the failure is
the weighting's: the proposal is made as without ``cost_aware`` (fast paths
first, kept on unless they fail without cost) and ``proposal["cost"]`` says
why. A cost-model fit that could not use a fast path is recorded with the
objectives' (``fast_path_off``, its reason prefixed ``cost model:``).
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import numpy as np

from ecopt import _failures, pareto
from ecopt._types import Params
from ecopt.samplers._encoding import encoding, grid, to_model, training_data
from ecopt.space import SearchSpace
from ecopt.trial import TrialRecord, TrialState

if TYPE_CHECKING:
    from ecopt.samplers.qnehvi import QLogNEHVISampler

__all__ = ["model_based"]

#: Name under which the feasibility model's hyperparameters are recorded.
FEASIBLE = "__feasible__"
#: The same for the failure model (complete trials against regional failures).
FAILURE = "__failure__"


@contextmanager
def one_thread(seed: int) -> Iterator[None]:
    """One torch/BLAS/OpenMP thread and a forked, seeded torch RNG inside the block.

    Proposals must be a pure function of seed and history; the same computation
    rounded with another thread count drifts apart within a few dozen trials.
    """
    import torch
    from threadpoolctl import threadpool_limits

    threads = torch.get_num_threads()
    with torch.random.fork_rng(), threadpool_limits(limits=1):
        torch.set_num_threads(1)
        torch.manual_seed(seed)
        try:
            yield
        finally:
            torch.set_num_threads(threads)


def _why(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def failure_notes(space: SearchSpace, fails: _failures.Split, model: Any, X: Any,
                  U: np.ndarray) -> dict[str, Any]:
    """What the failures did to a proposal (``proposal["failures"]``).

    Args:
        fails: The history's failures.
        model: The failure model (a GP on +1 complete / -1 regional failure), or ``None``.
        X: ``(q, d)`` the proposed points, model encoding.
        U: ``(q, d)`` the same in the unit cube.

    Returns:
        ``failed`` (how many trials failed), ``pending`` (the distinct failed
        configurations passed to the acquisition as pending points), ``regional``
        and ``isolated`` (:func:`ecopt._failures.split`), ``modelled`` (whether a
        failure model weighted the acquisition), ``p_failure`` (per proposed point:
        the model's probability that it fails, the factor ``1 - p`` the acquisition
        was weighted by; ``None`` without a model) and ``nearest_failure`` (per
        point: root-mean-square unit-cube distance to the nearest failed
        configuration, a different category counting 1).
    """
    import torch

    F = np.array([space.encode(p) for p in fails.params], dtype=float).reshape(-1, space.dim)
    cat = space.categorical_columns
    nearest = [round(float(min(_failures.distance(u, f, cat) for f in F)), 4) for u in U]
    p_fail: list[float] | None = None
    if model is not None:
        with torch.no_grad():
            post = model.posterior(X)
            mean = post.mean.reshape(-1)
            sd = post.variance.clamp_min(1e-12).sqrt().reshape(-1)
            ok = torch.distributions.Normal(0.0, 1.0).cdf(mean / sd)
        p_fail = [round(float(1.0 - v), 4) for v in ok]
    return {"failed": len(fails.failures), "pending": len(F), "regional": len(fails.regional),
            "isolated": len(fails.isolated), "modelled": model is not None,
            "p_failure": p_fail, "nearest_failure": nearest}


def refit_due(fitted_at: int, refit_every: int) -> int:
    """New observations after which an economy proposal re-optimises the hyperparameters
    last fitted to ``fitted_at`` observations: ``refit_every``, or sooner, once
    :data:`~ecopt.samplers.qnehvi.ECONOMY_REFIT_GROWTH` times ``fitted_at`` (rounded down,
    at least 1) have come in: every new observation up to 8, every 2 up to 12..."""
    from ecopt.samplers.qnehvi import ECONOMY_REFIT_GROWTH

    return max(1, min(refit_every, math.floor(fitted_at * ECONOMY_REFIT_GROWTH)))


def prior_due(chosen_at: int) -> int:
    """Observations from which an economy re-fit chooses the lengthscale priors again
    (``"auto"``), last chosen on ``chosen_at``:
    :data:`~ecopt.samplers.qnehvi.ECONOMY_PRIOR_GROWTH` times as many, rounded up."""
    from ecopt.samplers.qnehvi import ECONOMY_PRIOR_GROWTH

    return math.ceil(chosen_at * ECONOMY_PRIOR_GROWTH)


def _task_data(space: SearchSpace, enc: Any, records: Sequence[TrialRecord],
               objectives: Sequence[Any]) -> tuple[Any, np.ndarray]:
    """A transfer source's trials as model inputs (a tensor) and objective values
    (maximisation form; NaN where the source did not observe an objective)."""
    import torch

    U = np.array([space.encode(r.params) for r in records]).reshape(len(records), space.dim)
    Y = np.array([[o.sign * float(r.values.get(o.name, math.nan)) for o in objectives]
                  for r in records], dtype=float).reshape(len(records), len(objectives))
    return torch.tensor(to_model(U, enc), dtype=torch.double), Y


def model_based(sampler: QLogNEHVISampler, space: SearchSpace, records: Sequence[TrialRecord],
                complete: Sequence[TrialRecord], pending: Sequence[Params], n: int,
                economy: dict[str, Any] | None = None,
                tasks: Sequence[Sequence[TrialRecord]] = ()
                ) -> tuple[np.ndarray, dict[str, Any], dict[str, str], dict[str, float]]:
    """``n`` proposals of ``sampler`` (for its settings) from the complete trials.

    Args:
        economy: An economy proposal's settings (``QLogNEHVISampler.economy``'s
            ``settings``): ``refit`` (optimise the hyperparameters, warm-started,
            at most ``fit_maxiter`` L-BFGS-B iterations, or keep the last ones),
            ``raw_samples`` candidates scored instead of optimised, with at most
            ``mc_samples`` quasi-MC samples.
        tasks: Transfer sources in use, each its trials (params mapped into
            ``space``): the objectives are modelled by multi-task GPs, the
            study's trials one task and each source another
            (:mod:`ecopt.samplers._multitask`), on BoTorch's public path; their
            noise is inferred (observed noise variances are not used).

    Returns:
        ``(U (n, d) unit-cube points, notes, fast paths off -> why, timing)``.
    """
    import torch

    from ecopt.samplers import _acquisition, _cost, _failure_model, _models, _multitask
    from ecopt.samplers._botorch_compat import UNAVAILABLE
    from ecopt.samplers._optimize import Settings, optimize

    enc = encoding(space)
    data = training_data(space, complete, sampler.objectives, sampler.constraints,
                         sampler.ref_point_rule, min_trials=1 if tasks else 2)
    M = len(sampler.objectives)
    infeasible = [r for r in records if r.state is TrialState.INFEASIBLE]
    fails = _failures.split(space, records)
    if sampler.failures == "ignore":
        fails = _failures.Split([], [], [])
    elif sampler.failures == "pending":
        fails = _failures.Split(fails.failures, [], fails.failures)
    kind = _multitask.KIND if tasks else "mixed" if enc.cat else "single"
    warm = _models.warm_state(records, kind) if sampler.warm_start or economy else None
    cold_check = sampler.cold_refit_every > 0 and data.U.shape[0] % sampler.cold_refit_every == 0 \
        and not economy
    seed = int(sampler.seed or 0)
    dtype = torch.double
    choice = _acquisition.choose(M, sampler.log_hvi, sampler.alpha, sampler.parego_from,
                                 enumerated=grid(space, enc) is not None)
    fit_kw: dict[str, Any] = {"cat_dims": sorted(enc.cat), "warm": warm,
                              "cold_check": cold_check, "warm_ftol": sampler.warm_ftol,
                              "cold_ftol": sampler.cold_ftol,
                              "closed_form": "closed_form_fit" not in UNAVAILABLE,
                              "stacked": "stacked_model" not in UNAVAILABLE,
                              "lengthscale_prior": sampler.lengthscale_prior}
    refit, fitted_at = True, None
    if economy:
        fitted_at = _models.last_fit(records, kind)
        refit = fitted_at is None or data.U.shape[0] - fitted_at >= refit_due(
            fitted_at, int(economy["refit_every"]))
        fit_kw.update(refit=refit, fit_maxiter=int(economy["fit_maxiter"]),
                      cold_ftol=economy["cold_ftol"])
    # "auto" chooses each output's lengthscale prior by comparing fits under both; an
    # economy re-fit fits under the prior chosen last until the observations have grown
    # by ECONOMY_PRIOR_GROWTH since that choice (half the fits).
    last = _models.last_priors(records, kind) if sampler.lengthscale_prior == "auto" else None
    keep_priors = bool(economy) and refit and last is not None \
        and data.U.shape[0] < prior_due(last[1])
    if keep_priors and last is not None:
        fit_kw["kept_priors"] = last[0]
    off = {k: v for k, v in UNAVAILABLE.items() if k in ("closed_form_fit", "stacked_model")}
    settings = Settings(sampler.num_restarts, sampler.raw_samples, sampler.maxiter,
                        sampler.sample_around_best, sampler.allow_repeats,
                        avoid_failed=sampler.failures != "ignore")
    rng_seed = seed * 1_000_003 + len(records) + len(pending)
    # The observed Pareto set (maximisation form): an economy proposal's candidates and
    # those that replace a repeated configuration are perturbations of it.
    around = data.U[pareto.non_dominated(data.Y[:, :M])]
    if economy:
        settings = dataclasses.replace(settings, raw_samples=int(economy["raw_samples"]),
                                       score_only=True)
    with one_thread(rng_seed):
        t0, c0 = time.perf_counter(), time.process_time()
        X = torch.tensor(to_model(data.U, enc), dtype=dtype)
        Yvar = None if data.Yvar is None else torch.tensor(data.Yvar, dtype=dtype)
        ref = list(data.ref)
        if tasks:
            src = [_task_data(space, enc, recs, sampler.objectives) for recs in tasks]
            logged = _multitask.log_columns(
                np.vstack([data.Y[:, :M], np.array(ref, dtype=float).reshape(1, M)]),
                [S for _, S in src], M)
            ref = _multitask.neg_log(np.array(ref, dtype=float), logged).tolist()
            fitted = _multitask.fit_multitask(
                X, torch.tensor(_multitask.neg_log(data.Y, logged + [False] * (
                    data.Y.shape[1] - M)), dtype=dtype),
                [(Xs, torch.tensor(_multitask.neg_log(S, logged), dtype=dtype))
                 for Xs, S in src], data.names, M, cat_dims=sorted(enc.cat))
        else:
            fitted = _models.fit_outputs(X, torch.tensor(data.Y, dtype=dtype), Yvar,
                                         names=data.names, **fit_kw)
        off.update(fitted.fast_path_off)
        gp_state = fitted.states
        priors = dict(fitted.priors)
        model, public = fitted.model, fitted.public()
        stacked = model is not public
        constraints = _acquisition.outcome_constraints(
            sampler.constraints, M, [data.Y.shape[1]] if infeasible else None)
        # +1/-1 label GPs: infeasible trials become an outcome constraint; regional
        # failures weight the acquisition (:mod:`ecopt.samplers._failure_model`).
        label_models: dict[str, Any] = {}
        ok = [r for r in records if r.state is TrialState.COMPLETE]
        for name, bad in ((FEASIBLE, infeasible), (FAILURE, fails.regional)):
            if not bad:
                continue
            Uf = np.array([space.encode(r.params) for r in ok + bad])
            yf = np.array([1.0] * len(ok) + [-1.0] * len(bad)).reshape(-1, 1)
            fit = _models.fit_outputs(torch.tensor(to_model(Uf, enc), dtype=dtype),
                                      torch.tensor(yf, dtype=dtype), None,
                                      names=[name], **fit_kw)
            off.update(fit.fast_path_off)
            gp_state.update(fit.states)
            priors.update(fit.priors)
            label_models[name] = fit.model
        if FEASIBLE in label_models:
            from botorch.models import ModelListGP

            model = ModelListGP(model, label_models[FEASIBLE])
            public = ModelListGP(*fitted.models, label_models[FEASIBLE])
        cost = _cost.fit_or_why(space, enc, records, sampler, fit_kw) \
            if sampler.cost_aware else None
        if isinstance(cost, _cost.CostModel):
            gp_state.update(cost.state)
            priors.update(cost.priors)
            for k, v in cost.fast_path_off.items():
                off.setdefault(k, f"cost model: {v}")
        t_fit, c_fit = time.perf_counter() - t0, time.process_time() - c0

        t1, c1 = time.perf_counter(), time.process_time()
        X_pending = None
        if pending or fails.failures:
            # Failed configurations stay pending for ever (Ax's rule): the acquisition of
            # the same point and its neighbourhood drops, so it is not proposed again.
            Up = np.array([space.encode(p) for p in [*pending, *fails.params]])
            X_pending = torch.tensor(to_model(Up, enc), dtype=dtype)
        mc = _acquisition.mc_samples(M, sampler.mc_samples)
        if economy:  # at most; a user's lower setting stays
            mc = min(mc, int(economy["mc_samples"]))
        args = (X, ref, M, constraints, X_pending, mc, seed + len(records), choice)
        weighted = False  # whether the last try optimised the cost-weighted acquisition

        def acquisition(fast: bool, weigh: bool, first: bool = False) -> Any:
            """The acquisition on the fast or BoTorch's public path, per joule while ``weigh``."""
            nonlocal cost, weighted
            weighted = False
            if not first:
                torch.manual_seed(rng_seed)
            if fast:
                acq = _acquisition.build(model, *args, fast=True,
                                         dense_posterior=sampler.dense_posterior)
                off.update(acq.fast_path_off)
            else:
                acq = _acquisition.build(public, *args, fast=False, cache_root=not tasks)
            base = _failure_model.weighted(acq.acqf, label_models.get(FAILURE),
                                           choice.method != "qNEHVI")
            if not weigh:
                return base
            acqf, cost = _cost.weighted(base, cost, choice.method != "qNEHVI", X)
            weighted = isinstance(cost, _cost.CostModel)
            return acqf

        def propose(fast: bool, weigh: bool, first: bool = False
                    ) -> tuple[np.ndarray, dict[str, Any]]:
            return optimize(acquisition(fast, weigh, first), space, enc, records, pending, n,
                            settings, around, rng_seed % 2**32)

        def paths_off(exc: Exception) -> None:
            why = f"failed in this proposal: {_why(exc)}"
            used = _acquisition.fast_paths(choice, M, sampler.dense_posterior and stacked)
            off.update({k: why for k in used + ["stacked_model"] * stacked if k not in off})

        def cost_off(exc: Exception) -> None:
            nonlocal cost
            cost = f"cost weighting failed in optimisation, proposed without cost: {_why(exc)}"

        def public_path(exc: Exception) -> tuple[np.ndarray, dict[str, Any]]:
            """The fast paths failed without cost: BoTorch's public path."""
            paths_off(exc)
            try:
                return propose(fast=False, weigh=True)
            except Exception as exc2:  # noqa: BLE001 - the weighting's failure: without cost
                if not weighted:
                    raise  # BoTorch's own path failed: the sampler proposes Sobol
                cost_off(exc2)
                return propose(fast=False, weigh=False)

        def weighted_failed(exc: Exception) -> tuple[np.ndarray, dict[str, Any]]:
            """The weighted acquisition failed on the fast paths: the cost's or theirs?"""
            try:
                acqf = acquisition(fast=False, weigh=True)
                if weighted:
                    out = optimize(acqf, space, enc, records, pending, n, settings, around,
                                   rng_seed % 2**32)
                    paths_off(exc)  # the cost works on BoTorch's public path
                    return out
            except Exception as exc2:  # noqa: BLE001 - the weighting's failure: without cost
                if not weighted:
                    raise  # BoTorch's own path failed before the weighting
                cost_off(exc2)
            try:  # the weighting failed on BoTorch's public path too: as without cost_aware
                return propose(fast=True, weigh=False)
            except Exception as exc3:  # noqa: BLE001 - any failure: BoTorch's public path
                paths_off(exc3)
                return propose(fast=False, weigh=False)

        try:
            U, how = propose(fast=not tasks, weigh=True, first=True)
        except Exception as exc:  # noqa: BLE001 - see the module notes
            if tasks:  # already BoTorch's public path: only the cost weighting can go
                if not weighted:
                    raise
                cost_off(exc)
                U, how = propose(fast=False, weigh=False)
            else:
                U, how = weighted_failed(exc) if weighted else public_path(exc)
        t_opt, c_opt = time.perf_counter() - t1, time.process_time() - c1
    timing = {"fit_s": t_fit, "acqf_s": t_opt, "fit_cpu_s": c_fit, "acqf_cpu_s": c_opt}
    info = {"ref_point": [o.sign * r for o, r in zip(sampler.objectives, data.ref)],
            "ref_point_inferred": data.ref_inferred,
            "n_observations": int(X.shape[0]), "n_infeasible": len(infeasible),
            "fit_s": round(t_fit, 4), "acqf_s": round(t_opt, 4),
            "observed_noise": data.noisy, **choice.notes(), "mc_samples": mc, **how,
            "gp_state": {"kind": kind, "dim": int(space.dim), "params": gp_state,
                         "fitted_at": int(X.shape[0]) if refit else fitted_at}}
    # The priors in force (chosen now, or kept with the hyperparameters or by the rule above).
    in_force = {**(last[0] if last else {}), **priors} \
        if sampler.lengthscale_prior == "auto" else {}
    # chosen now for the outputs of the objectives and constraints (a label or cost GP
    # fitted for the first time beside kept hyperparameters chooses only its own)
    chosen = any(k in data.names for k in priors) and not keep_priors
    if in_force:
        info["gp_state"].update(priors=in_force, priors_chosen_at=(
            int(X.shape[0]) if chosen or last is None else last[1]))
    if economy:
        info["hyperparameters"] = "optimised" if refit else "kept"
        if in_force:
            info["priors"] = "chosen" if chosen else "kept"
    if sampler.lengthscale_prior == "auto" and priors:
        info["lengthscale_priors"] = priors
    if cost is not None:
        info["cost"] = _cost.notes(cost, torch.tensor(to_model(U, enc), dtype=dtype))
    if fails.failures:
        info["failures"] = failure_notes(space, fails, label_models.get(FAILURE),
                                         torch.tensor(to_model(U, enc), dtype=dtype), U)
    return U, info, off, timing
