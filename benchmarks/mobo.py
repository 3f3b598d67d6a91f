"""Sample efficiency: hypervolume against evaluations, ecopt vs Optuna, same seeds, one process.

Usage (from the repository root)::

    python -m benchmarks.mobo --quick                 # 3 seeds, 30 evaluations (CI smoke)
    python -m benchmarks.mobo                         # >= 10 seeds, 100 (M=2) / 60 (M=3) evals
    python -m benchmarks.mobo --problems zeus --methods ecopt-qlognehvi,optuna-gp --seeds 5
    python -m benchmarks.mobo --problems branincurrin --methods ecopt-qlognehvi,ax --seeds 2
    python -m benchmarks.mobo --report-only --out benchmarks/results/mobo
    # a part of a directory's runs, recorded for the docs (docs/results/mobo/<date>-40evals):
    python -m benchmarks.mobo --report-only --out runs/mobo --problems dtlz2 --budget 40 \
        --seeds 10 --methods ecopt-qlognehvi,ecopt-before --record 40evals

Every finished (problem, method, seed) run is appended to
``<out>/runs-<tag>.jsonl`` as it ends, with the commit of the ``ecopt`` that
ran it, so an interrupted run resumes where it stopped and several processes
(``--tag``) can share the work; the report (``<out>/report.md``, plots
``<out>/<problem>.png``) is built from the ``runs-*.jsonl`` in ``<out>``
(those of ``--problems``, ``--methods``, ``--seeds`` and ``--budget`` when given).

ecopt is driven through its public API (``ecopt.Study`` in memory, meter
``"wallclock"``); Optuna through ``study.ask``/``study.tell``; Ax (the
``ax``/``ax-shared-init`` methods, ``pip install 'ecopt[ax]'``) through its
Client API (``get_next_trials``/``complete_trial``) with its default generation
strategy. Methods that allow it share the initial design: ``2 (d + 1)``
scrambled Sobol points of the same seed (enqueued into Optuna's TPE and GP
samplers, attached to Ax's experiment by ``ax-shared-init``; NSGA-II and
``ax`` draw their own). ecopt's rows start from its own default design (the
centre of the space, then Sobol points of the seed: ``min(2 (d + 1), 5)``
trials, as Ax's 5), or from ``2 (d + 1)`` trials with the ``-design2d`` suffix.
Noise is drawn from ``default_rng((seed, evaluation))``, so every method sees the
same noise sequence. Hypervolume is always scored on
the true (noiseless / expected) values of the evaluated points.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import platform
import re
import shlex
import sys
import time
import warnings
from collections.abc import Callable, Sequence
from operator import itemgetter
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # ``python benchmarks/mobo.py``
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np

from benchmarks.problems import DEFAULT_ZEUS_DIR, Problem, default_problems, make_problem
from ecopt._verdict import verdict_of_tests

__all__ = ["METHODS", "AX_METHODS", "ax_installed", "run_one", "summarise", "main"]

REFERENCE_METHOD = "ecopt-qlognehvi"
#: A run "collapsed" when its final hypervolume is below this fraction of the maximum
#: (0.35 x DTLZ2's 0.4246 = 0.149: the issue's "below 0.15 where most seeds reach 0.25-0.33").
COLLAPSE_FRACTION = 0.35
#: Method name -> short description (the order of the report's rows).
METHODS: dict[str, str] = {
    "ecopt-qlognehvi": "ecopt qLogNEHVI, q=1 (default settings: 10 restarts, 256 raw, 64 MC, "
                       "lengthscale_prior='auto', init_center=True, cold_ftol='auto', its own "
                       "initial design of min(2 (d + 1), 5) trials), "
                       "full proposals (proposal_share=None; every ecopt-qlognehvi* row too)",
    "ecopt-qlognehvi-design2d": "ecopt qLogNEHVI, q=1, default settings but a 2 (d + 1)-trial "
                                "initial design from the centre (the shared design's size; the "
                                "default before min(2 (d + 1), 5)); any ecopt-qlognehvi* method "
                                "+ '-design2d' starts from this design",
    "ecopt-qlognehvi-economy": "ecopt qLogNEHVI with the default economy rule "
                               "(proposal_share=0.25): on a test function every proposal "
                               "after the first is an economy one",
    "ecopt-qlognehvi-q4": "ecopt qLogNEHVI, batches of q=4",
    "ecopt-qlognehvi-lite": "ecopt qLogNEHVI, q=1, 5 restarts, 256 raw samples, 64 MC samples",
    "ecopt-qlognehvi-cold": "ecopt qLogNEHVI, q=1, every GP fit from BoTorch's default start",
    "ecopt-qlognehvi-nosab": "ecopt qLogNEHVI, q=1, random raw samples only (no sample_around_best)",
    "ecopt-qlognehvi-scipyftol": "ecopt qLogNEHVI, q=1, GP fits to scipy's L-BFGS-B tolerance "
                                 "(cold_ftol=None, 2.2e-9; BoTorch's): the default for "
                                 "continuous GPs since 2026-12-07 (1e-6 before)",
    "ecopt-qlognehvi-ftol1e-6": "ecopt qLogNEHVI, q=1, GP fits stopped at a relative gain of "
                                "1e-6 (cold_ftol=1e-6: the default before 2026-12-07, and "
                                "still for mixed-kernel GPs)",
    "ecopt-qlognehvi-exact": "ecopt qLogNEHVI, q=1, exact box decompositions at every M (alpha=0)",
    "ecopt-qlognparego": "ecopt with qLogNParEGO at every M (parego_from=2)",
    "ecopt-qlognehvi-m4exact": "ecopt qLogNEHVI over exact boxes at M = 4 (parego_from=5, "
                               "alpha=0)",
    "ecopt-qlognparego-m4": "ecopt with qLogNParEGO from M = 4 on in every space (parego_from=4)",
    "ecopt-qlognehvi-m4alpha": "ecopt qLogNEHVI over approximate boxes at M = 4 (parego_from=5)",
    "ecopt-qlognehvi-gamma": "ecopt qLogNEHVI, q=1, the Gamma(3, 6) lengthscale prior and a "
                             "plain Sobol design (the defaults before lengthscale_prior='auto' "
                             "and init_center=True)",
    "ecopt-qlognehvi-dimscaled": "ecopt qLogNEHVI, q=1, BoTorch's dim-scaled lengthscale prior, "
                                 "no centre point",
    "ecopt-qlognehvi-autoprior": "ecopt qLogNEHVI, q=1, each GP fitted under the Gamma and the "
                                 "dim-scaled prior, the better leave-one-out predictor kept "
                                 "(lengthscale_prior='auto'), no centre point",
    "ecopt-qlognehvi-center": "ecopt qLogNEHVI, q=1, the Gamma prior, the initial design "
                              "starting at the centre of the space (init_center=True)",
    "ecopt-qlognehvi-autoprior-center": "ecopt qLogNEHVI, q=1, lengthscale_prior='auto' and "
                                        "init_center=True",
    "ecopt-qlognehvi-dimscaled-center": "ecopt qLogNEHVI, q=1, BoTorch's dim-scaled "
                                        "lengthscale prior (Ax's model) and the centre point",
    "ecopt-qlognehvi-axdesign": "ecopt qLogNEHVI, q=1, Ax's design and model: 5 initial "
                                "trials from the centre, the dim-scaled prior; ecopt's "
                                "acquisition settings",
    "ecopt-qlognehvi-axlike": "ecopt qLogNEHVI, q=1, with the settings of Ax's default "
                              "strategy: a 5-trial design starting at the centre, BoTorch's "
                              "dim-scaled lengthscale prior, 20 restarts, 1024 raw samples, "
                              "128 MC samples",
    "ecopt-qlognehvi-axdesign-raw1024": "ecopt qLogNEHVI, q=1, Ax's design and model (as "
                                        "ecopt-qlognehvi-axdesign) with 1024 raw samples; "
                                        "ecopt's restarts and MC samples",
    "ecopt-qlognehvi-inferref": "ecopt qLogNEHVI, q=1, not told the reference point (it infers "
                                "one from the observed front, the default rule)",
    "ecopt-qlognehvi-obsref": "ecopt qLogNEHVI, q=1, not told the reference point, inferred "
                              "from every observation (ref_point_rule='observed', as Optuna)",
    "ecopt-qnehvi": "ecopt qNEHVI (the non-log acquisition the ECOpt paper used), q=1, default "
                    "settings otherwise",
    "ecopt-sobol": "ecopt scrambled Sobol",
    "ecopt-random": "ecopt uniform random",
    "botorch-plain": "plain BoTorch qLogNEHVI loop (cold fits, 10 restarts, 512 raw, 128 MC)",
    "ax": "Ax's Client (ax-platform >= 1.3) with its default generation strategy: its own "
          "initial design (the centre of the space, then Sobol up to 5 trials, seeded by the "
          "run's seed), then its Bayesian optimisation (MBM); told the reference point as "
          "objective thresholds where it is known",
    "ax-shared-init": "Ax's Client with its default generation strategy, started from the shared "
                      "Sobol initial design (attached as completed trials; Ax skips its centre "
                      "point but still draws one Sobol point before its model)",
    "optuna-nsga2": "Optuna NSGAIISampler (population 50, default)",
    "optuna-nsga2-small": "Optuna NSGAIISampler (population 10)",
    "optuna-tpe": "Optuna TPESampler(multivariate=True)",
    "optuna-gp": "Optuna GPSampler",
}


#: ``ecopt-qlognehvi-r<restarts>-raw<raw samples>-mc<MC samples>``: the sampler with
#: those acquisition settings (to compare settings on the same seeds).
_SETTINGS = re.compile(r"ecopt-qlognehvi-r(\d+)-raw(\d+)-mc(\d+)")
#: ``ecopt-qlognehvi-alpha<a>``: the sampler with box-decomposition approximation ``a``.
_ALPHA = re.compile(r"ecopt-qlognehvi-alpha([0-9.e-]+)")
#: ``ecopt-qlognehvi-init<n>``: the sampler from an ``n``-point Sobol design instead of the
#: problem's (Ax's default strategy starts its model after 5 trials).
_INIT = re.compile(r"ecopt-qlognehvi-init(\d+)")
#: Methods that are not told the reference point (thresholds) even where it is known.
_INFER_REF = ("ecopt-qlognehvi-inferref", "ecopt-qlognehvi-obsref")
#: The methods that run Ax (``pip install 'ecopt[ax]'``).
AX_METHODS = ("ax", "ax-shared-init")
#: Named settings: method -> the settings method it runs.
_ALIASES = {"ecopt-qlognehvi-lite": "ecopt-qlognehvi-r5-raw256-mc64"}


def _suffixes(method: str) -> tuple[str, bool, bool]:
    """``(row, economy, design2d)``: an ecopt method name without its ``-economy`` (the
    default economy rule) and, before it, ``-design2d`` (the ``2 (d + 1)``-trial design)."""
    economy = method.endswith("-economy")
    method = method.removesuffix("-economy")
    design2d = method.endswith("-design2d")
    return method.removesuffix("-design2d"), economy, design2d


def known_method(name: str) -> bool:
    """A method in :data:`METHODS`, an ``ecopt-qlognehvi-r<R>-raw<N>-mc<S>`` setting, an
    ``ecopt-qlognehvi-alpha<a>`` or an ``ecopt-qlognehvi-init<n>`` one; any ``ecopt-qlognehvi*``
    one with ``-design2d`` (the ``2 (d + 1)``-trial design) before an ``-economy``, but those
    that set their own design (``-init<n>``, Ax's parts)."""
    row, _, design2d = _suffixes(name)
    if design2d:
        if (not row.startswith("ecopt-qlognehvi") or row in _AX_PARTS
                or _INIT.fullmatch(row) is not None):
            return False
        name = row
    return name in METHODS or any(p.fullmatch(name) is not None
                                  for p in (_SETTINGS, _ALPHA, _INIT))


def ax_installed() -> bool:
    """Whether Ax (``pip install 'ecopt[ax]'``) can be imported, for the :data:`AX_METHODS`."""
    import importlib.util

    return importlib.util.find_spec("ax") is not None


def _method_order(names: Sequence[str]) -> list[str]:
    return [m for m in METHODS if m in names] + sorted(m for m in names if m not in METHODS)


# -- runners ---------------------------------------------------------------------
def _observe(problem: Problem, params: dict[str, Any], seed: int, k: int) -> np.ndarray:
    rng = np.random.default_rng((seed, k, 7919))
    return np.asarray(problem.observe_fn(params, rng), dtype=float)


def initial_design(problem: Problem, seed: int) -> list[dict[str, Any]]:
    """The ``n_init`` Sobol configurations ecopt's qLogNEHVI starts from (for ``seed``), as a
    plain Sobol design (``init_center=False``, the protocol's shared design).

    Given to every method that takes an initial design, so all start alike (ecopt's
    default replaces the first by the centre of the space). In a fully
    discrete space (Zeus) ecopt's design skips configurations it already has.
    """
    from ecopt.samplers import QLogNEHVISampler

    n = problem.n_init
    return [p.params for p in QLogNEHVISampler(seed=seed, n_init=n, init_center=False).propose(
        problem.space, [], [], n)]


#: Ablation rows: method -> (lengthscale_prior, init_center), each set explicitly.
_PRIOR_CENTRE: dict[str, tuple[str, bool]] = {
    "ecopt-qlognehvi-gamma": ("gamma", False),
    "ecopt-qlognehvi-dimscaled": ("dim-scaled", False),
    "ecopt-qlognehvi-autoprior": ("auto", False),
    "ecopt-qlognehvi-center": ("gamma", True),
    "ecopt-qlognehvi-autoprior-center": ("auto", True),
    "ecopt-qlognehvi-dimscaled-center": ("dim-scaled", True),
}
#: Ablation rows with parts of Ax's default strategy: method -> the sampler's settings.
_AX_DESIGN = {"n_init": 5, "lengthscale_prior": "dim-scaled", "init_center": True}
_AX_PARTS: dict[str, dict[str, Any]] = {
    "ecopt-qlognehvi-axdesign": _AX_DESIGN,
    "ecopt-qlognehvi-axdesign-raw1024": {**_AX_DESIGN, "raw_samples": 1024},
    "ecopt-qlognehvi-axlike": {**_AX_DESIGN, "num_restarts": 20, "raw_samples": 1024,
                               "mc_samples": 128},
}

#: Ablation rows of the GP fits' tolerance: method -> ``cold_ftol`` for every fit.
_FIT_TOLERANCE: dict[str, float | None] = {"ecopt-qlognehvi-scipyftol": None,
                                           "ecopt-qlognehvi-ftol1e-6": 1e-6}


def _run_ecopt(problem: Problem, method: str, seed: int, budget: int
               ) -> tuple[list[dict[str, Any]], list[float]]:
    import ecopt
    from ecopt.samplers import QLogNEHVISampler, RandomSampler, SobolSampler
    from ecopt.samplers._acquisition import ALPHA_M4

    # A test function costs nothing, so the default economy rule would make every proposal
    # after the first an economy one: these rows measure full proposals, and the
    # ``-economy`` method the default rule (proposal_share=0.25).
    method, economy, design2d = _suffixes(method)
    share: dict[str, Any] = {"proposal_share": 0.25 if economy else None}
    # Every ecopt row starts from the sampler's own initial design (the centre, then Sobol:
    # min(2 (d + 1), 5) trials), but ``-design2d``: the shared 2 (d + 1)-point size.
    n_init = problem.n_init if design2d else None
    q = 4 if method.endswith("-q4") else 1
    sampler: ecopt.samplers.Sampler
    if (setting := _SETTINGS.fullmatch(_ALIASES.get(method, method))) is not None:
        r, raw, mc = (int(v) for v in setting.groups())
        sampler = QLogNEHVISampler(seed=seed, n_init=n_init, **share, num_restarts=r,
                                   raw_samples=raw, mc_samples=mc)
    elif method == "ecopt-qlognehvi-cold":
        sampler = QLogNEHVISampler(seed=seed, n_init=n_init, **share, warm_start=False)
    elif method in _FIT_TOLERANCE:
        sampler = QLogNEHVISampler(seed=seed, n_init=n_init, **share,
                                   cold_ftol=_FIT_TOLERANCE[method])
    elif method == "ecopt-qlognehvi-nosab":
        sampler = QLogNEHVISampler(seed=seed, n_init=n_init, **share,
                                   sample_around_best=False)
    elif method == "ecopt-qlognehvi-exact":
        sampler = QLogNEHVISampler(seed=seed, n_init=n_init, **share, alpha=0.0)
    elif (init := _INIT.fullmatch(method)) is not None:
        sampler = QLogNEHVISampler(seed=seed, n_init=int(init.group(1)), **share)
    elif (alpha := _ALPHA.fullmatch(method)) is not None:
        sampler = QLogNEHVISampler(seed=seed, n_init=n_init, **share,
                                   alpha=float(alpha.group(1)))
    elif method in _PRIOR_CENTRE:
        prior, centre = _PRIOR_CENTRE[method]
        sampler = QLogNEHVISampler(seed=seed, n_init=n_init, **share,
                                   lengthscale_prior=prior, init_center=centre)
    elif method in _AX_PARTS:
        sampler = QLogNEHVISampler(seed=seed, **share, **_AX_PARTS[method])
    elif method == "ecopt-qlognehvi-obsref":
        sampler = QLogNEHVISampler(seed=seed, n_init=n_init, **share,
                                   ref_point_rule="observed")
    elif method == "ecopt-qlognehvi-m4alpha":
        sampler = QLogNEHVISampler(seed=seed, n_init=n_init, **share, parego_from=5,
                                   alpha=ALPHA_M4)
    elif method == "ecopt-qlognehvi-m4exact":
        sampler = QLogNEHVISampler(seed=seed, n_init=n_init, **share, parego_from=5,
                                   alpha=0.0)
    elif method == "ecopt-qlognparego":
        sampler = QLogNEHVISampler(seed=seed, n_init=n_init, **share, parego_from=2)
    elif method == "ecopt-qlognparego-m4":  # the default before enumerated spaces' exact boxes
        sampler = QLogNEHVISampler(seed=seed, n_init=n_init, **share, parego_from=4)
    elif method.startswith("ecopt-qlognehvi"):
        sampler = QLogNEHVISampler(seed=seed, n_init=n_init, **share)
    elif method == "ecopt-qnehvi":
        from ecopt.samplers import QNEHVISampler

        sampler = QNEHVISampler(seed=seed, n_init=n_init, **share)
    elif method == "ecopt-sobol":
        sampler = SobolSampler(seed=seed)
    else:
        sampler = RandomSampler(seed=seed)
    told = problem.info.get("thresholds_known", True) and method not in _INFER_REF
    study = ecopt.Study(problem.space, problem.objectives(told),
                        sampler=sampler, meter="wallclock", seed=seed, storage=None)
    params_seq: list[dict[str, Any]] = []
    ask_s: list[float] = []
    while len(params_seq) < budget:
        n = min(q, budget - len(params_seq))
        t0 = time.perf_counter()
        trials = study.ask(n=n)
        dt = time.perf_counter() - t0
        if any(t.proposed_by in (QLogNEHVISampler.name, "qnehvi") for t in trials):
            ask_s.append(dt)
        for t in trials:
            k = len(params_seq)
            params_seq.append(dict(t.params))
            try:
                y = _observe(problem, dict(t.params), seed, k)
                study.tell(t, dict(zip(problem.objective_names, map(float, y))))
            except ValueError as exc:  # a configuration outside the trace
                study.tell(t, exc)
    study.close()
    return params_seq, ask_s


def _run_botorch_plain(problem: Problem, method: str, seed: int, budget: int
                       ) -> tuple[list[dict[str, Any]], list[float]]:
    """The BoTorch MOBO tutorial loop on the unit cube (the issue's reference).

    Same Sobol initial design as ecopt; then a ModelListGP of SingleTaskGPs
    fitted from BoTorch's default start every step, qLogNEHVI (prune_baseline,
    128 quasi-MC samples) with the problem's reference point, optimize_acqf
    with 10 restarts and 512 raw samples. Discrete and categorical axes are
    searched as their continuous relaxation and rounded by the space's decoder.
    """
    import torch
    from botorch.acquisition.multi_objective.logei import (
        qLogNoisyExpectedHypervolumeImprovement,
    )
    from botorch.fit import fit_gpytorch_mll
    from botorch.models import ModelListGP, SingleTaskGP
    from botorch.models.transforms.outcome import Standardize
    from botorch.optim import optimize_acqf
    from botorch.sampling.normal import SobolQMCNormalSampler
    from gpytorch.mlls import SumMarginalLogLikelihood

    d, M = problem.dim, problem.n_obj
    params_seq = initial_design(problem, seed)
    Ys = [-_observe(problem, p, seed, k) for k, p in enumerate(params_seq)]
    ask_s: list[float] = []
    ref = torch.tensor(-problem.ref_point if problem.info.get("thresholds_known", True)
                       else np.min(Ys, axis=0) - 0.1 * np.ptp(Ys, axis=0), dtype=torch.double)
    bounds = torch.stack([torch.zeros(d), torch.ones(d)]).double()
    torch.manual_seed(seed)
    while len(params_seq) < budget:
        t0 = time.perf_counter()
        X = torch.tensor(np.array([problem.space.encode(p) for p in params_seq]),
                         dtype=torch.double)
        Y = torch.tensor(np.array(Ys), dtype=torch.double)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = ModelListGP(*[SingleTaskGP(X, Y[:, j:j + 1], outcome_transform=Standardize(m=1))
                                  for j in range(M)])
            fit_gpytorch_mll(SumMarginalLogLikelihood(model.likelihood, model))
            acqf = qLogNoisyExpectedHypervolumeImprovement(
                model=model, ref_point=ref.tolist(), X_baseline=X, prune_baseline=True,
                sampler=SobolQMCNormalSampler(torch.Size([128])))
            cand, _ = optimize_acqf(acqf, bounds=bounds, q=1, num_restarts=10, raw_samples=512,
                                    options={"batch_limit": 5, "maxiter": 200}, sequential=True)
        ask_s.append(time.perf_counter() - t0)
        p = problem.space.decode(cand[0].tolist())
        k = len(params_seq)
        params_seq.append(p)
        try:
            Ys.append(-_observe(problem, p, seed, k))
        except ValueError:
            params_seq.pop()
            raise
    return params_seq, ask_s


def _optuna_distributions(problem: Problem) -> dict[str, Any]:
    from optuna.distributions import (
        CategoricalDistribution,
        FloatDistribution,
        IntDistribution,
    )

    import ecopt

    out: dict[str, Any] = {}
    for name in problem.space.searched_names:
        p = problem.space[name]
        if isinstance(p, ecopt.Float):
            out[name] = FloatDistribution(p.low, p.high, log=p.log)
        elif isinstance(p, ecopt.Int):
            out[name] = IntDistribution(p.low, p.high, log=p.log, step=p.step)
        else:
            assert isinstance(p, ecopt.Categorical)
            out[name] = CategoricalDistribution(list(p.choices))
    return out


def _run_optuna(problem: Problem, method: str, seed: int, budget: int
                ) -> tuple[list[dict[str, Any]], list[float]]:
    import optuna
    from optuna.samplers import GPSampler, NSGAIISampler, TPESampler

    optuna.logging.set_verbosity(optuna.logging.ERROR)
    n_init = problem.n_init
    enqueue = False
    if method == "optuna-nsga2":
        sampler: Any = NSGAIISampler(seed=seed)
    elif method == "optuna-nsga2-small":
        sampler = NSGAIISampler(seed=seed, population_size=10)
    elif method == "optuna-tpe":
        sampler, enqueue = TPESampler(seed=seed, multivariate=True, n_startup_trials=n_init), True
    elif method == "optuna-gp":
        sampler, enqueue = GPSampler(seed=seed, n_startup_trials=n_init), True
    else:
        raise ValueError(f"unknown method {method!r}")
    study = optuna.create_study(directions=["minimize"] * problem.n_obj, sampler=sampler)
    dists = _optuna_distributions(problem)
    if enqueue:
        for params in initial_design(problem, seed):
            study.enqueue_trial(params)
    params_seq: list[dict[str, Any]] = []
    ask_s: list[float] = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        while len(params_seq) < budget:
            k = len(params_seq)
            t0 = time.perf_counter()
            trial = study.ask(fixed_distributions=dists)
            dt = time.perf_counter() - t0
            if k >= n_init:
                ask_s.append(dt)
            params = {n: trial.params[n] for n in problem.space.searched_names}
            params_seq.append(params)
            try:
                y = _observe(problem, params, seed, k)
                study.tell(trial, [float(v) for v in y])
            except ValueError:
                study.tell(trial, state=optuna.trial.TrialState.FAIL)
    return params_seq, ask_s


def _constant(value: Any) -> Callable[[Any], Any]:
    def f(_ax_value: Any) -> Any:
        return value
    return f


def _by_index(choices: Sequence[Any]) -> Callable[[Any], Any]:
    def f(ax_value: Any) -> Any:
        return choices[int(ax_value)]
    return f


def _the_choice(choices: Sequence[Any]) -> Callable[[Any], Any]:
    def f(ax_value: Any) -> Any:
        return next(c for c in choices if c == ax_value)
    return f


def _ax_parameters(problem: Problem) -> tuple[list[Any], dict[str, Callable[[Any], Any]]]:
    """Ax parameter configs of the problem's searched axes, and per axis the map from
    Ax's value back to the space's (categorical choices of mixed types travel as
    their index, one-choice axes are left out of Ax and put back by the map)."""
    import ecopt
    from ax.api.configs import ChoiceParameterConfig, RangeParameterConfig

    configs: list[Any] = []
    back: dict[str, Callable[[Any], Any]] = {}
    for name in problem.space.searched_names:
        p = problem.space[name]
        if isinstance(p, ecopt.Float):
            configs.append(RangeParameterConfig(name, (float(p.low), float(p.high)), "float",
                                                scaling="log" if p.log else None))
            back[name] = float
        elif isinstance(p, ecopt.Int):
            configs.append(RangeParameterConfig(
                name, (int(p.low), int(p.high)), "int",
                step_size=int(p.step) if p.step != 1 else None,
                scaling="log" if p.log else None))
            back[name] = int
        else:
            assert isinstance(p, ecopt.Categorical)
            choices = list(p.choices)
            if len(choices) == 1:
                back[name] = _constant(choices[0])
                continue
            kinds = {type(c) for c in choices}
            kind = {bool: "bool", int: "int", float: "float", str: "str"}.get(
                next(iter(kinds))) if len(kinds) == 1 else None
            if kind is None:  # mixed types: Ax's choices are of one type
                configs.append(ChoiceParameterConfig(name, [str(i) for i in range(len(choices))],
                                                     "str", is_ordered=p.ordered))
                back[name] = _by_index(choices)
            else:
                configs.append(ChoiceParameterConfig(name, choices, kind,  # type: ignore[arg-type]
                                                     is_ordered=p.ordered))
                back[name] = _the_choice(choices)
    return configs, back


def _choice_index(choices: Sequence[Any], value: Any) -> str:
    """The index (as Ax's str choice) of ``value`` among mixed-type ``choices``."""
    return str(next(i for i, c in enumerate(choices) if type(c) is type(value) and c == value))


def _run_ax(problem: Problem, method: str, seed: int, budget: int
            ) -> tuple[list[dict[str, Any]], list[float]]:
    """Ax's Client API (``ax.api.Client``) with its default generation strategy.

    Objectives are minimised (``-y0, -y1, ...``); where the problem's reference point is
    known it is given as the objective thresholds (``y<j> <= ref_j``), as ecopt is told
    it. ``ax`` lets the default strategy pick its own initial design (centre point,
    then Sobol up to 5 trials; seeded by ``Client(random_seed=seed)``); ``ax-shared-init``
    first attaches and completes the shared :func:`initial_design`, which the default
    strategy counts as its initialisation (it skips its centre point; Ax 1.3.1 still
    draws one Sobol point before its model). A configuration the problem cannot evaluate (outside a Zeus
    trace) is marked failed. ``ask_s`` holds the seconds of each model-based suggestion
    (Ax's ``MBM`` step).
    """
    import ecopt

    try:
        from ax.utils.common.logger import set_stderr_log_level
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError("the 'ax' methods need Ax: pip install 'ecopt[ax]'") from exc

    set_stderr_log_level(logging.WARNING)  # not a line per trial
    from ax.api import Client
    configs, back = _ax_parameters(problem)
    mixed = {n: list(p.choices) for n, p in problem.space.items()
             if n in back and isinstance(p, ecopt.Categorical) and len(p.choices) > 1
             and len({type(c) for c in p.choices}) > 1}  # travel as their index
    metrics = [f"y{j}" for j in range(problem.n_obj)]  # problem names may not parse
    told = problem.info.get("thresholds_known", True)
    client = Client(random_seed=seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Ax 1.3.1's own deprecations
        client.configure_experiment(parameters=configs, name=f"{problem.name}-{seed}")
        client.configure_optimization(
            objective=", ".join(f"-{m}" for m in metrics),
            outcome_constraints=([f"{m} <= {float(r)!r}"
                                  for m, r in zip(metrics, problem.ref_point)]
                                 if told else None))
    params_seq: list[dict[str, Any]] = []
    ask_s: list[float] = []

    def evaluate(index: int, params: dict[str, Any]) -> None:
        k = len(params_seq)
        params_seq.append(params)
        try:
            y = _observe(problem, params, seed, k)
        except ValueError as exc:  # a configuration outside the trace
            client.mark_trial_failed(index, failed_reason=str(exc))
            return
        client.complete_trial(index, raw_data={m: float(v) for m, v in zip(metrics, y)})

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if method == "ax-shared-init":
            for params in initial_design(problem, seed)[:budget]:
                index = client.attach_trial(parameters={
                    c.name: (_choice_index(mixed[c.name], params[c.name]) if c.name in mixed
                             else params[c.name]) for c in configs})
                evaluate(index, dict(params))
        while len(params_seq) < budget:
            t0 = time.perf_counter()
            trials = client.get_next_trials(max_trials=1)
            dt = time.perf_counter() - t0
            for index, raw in trials.items():
                gr = client._experiment.trials[index].generator_runs[0]
                if getattr(gr, "_generation_node_name", None) == "MBM":
                    ask_s.append(dt)
                params = {n: f(raw.get(n)) for n, f in back.items()}
                evaluate(index, params)
    return params_seq, ask_s


def _hv_curve(problem: Problem, params_seq: Sequence[dict[str, Any]]) -> list[float]:
    """Hypervolume of the true values of the first k evaluations, k = 1..n."""
    from ecopt import pareto

    curve: list[float] = []
    front = np.zeros((0, problem.n_obj))
    hv = 0.0
    for p in params_seq:
        try:
            y = np.asarray(problem.true_fn(p), dtype=float).reshape(1, -1)
        except ValueError:
            curve.append(hv)
            continue
        front = np.vstack([front, y])
        front = front[pareto.non_dominated(front, ["min"] * problem.n_obj)]
        hv = problem.hypervolume(front)
        curve.append(hv)
    return curve


def run_one(problem: Problem, method: str, seed: int, budget: int) -> dict[str, Any]:
    """One (problem, method, seed) run: the evaluated points, HV curve and suggestion times."""
    if not known_method(method):
        raise ValueError(f"unknown method {method!r}; expected one of {list(METHODS)}")
    t0 = time.perf_counter()
    runner = (_run_ecopt if method.startswith("ecopt") else
              _run_botorch_plain if method == "botorch-plain" else
              _run_ax if method in AX_METHODS else _run_optuna)
    params_seq, ask_s = runner(problem, method, seed, budget)
    curve = _hv_curve(problem, params_seq)
    return {
        "problem": problem.name, "method": method, "seed": seed, "budget": budget,
        "n_init": problem.n_init, "max_hv": problem.max_hv, "hv": curve,
        "log_gap": [problem.log_gap(h) for h in curve], "ask_s": ask_s,
        "wall_s": time.perf_counter() - t0, "params": params_seq,
        "git_commit": _code_commit(),
    }


def _code_commit() -> str:
    """The commit of the ``ecopt`` that runs (``-dirty`` with uncommitted changes)."""
    import ecopt
    from docs.recorded import git_commit

    sha, dirty = git_commit(Path(ecopt.__file__))
    return sha + ("-dirty" if dirty else "")


# -- report ----------------------------------------------------------------------
#: The runs a recorded run was built from, kept beside its summary (gzip, one JSON per line):
#: copied into an ``--out`` directory, they join its runs, so a later report can set new
#: rows beside them without running them again.
RECORDED_RUNS = "runs.jsonl.gz"


def _load_runs(out: Path) -> list[dict[str, Any]]:
    """The runs in ``out``: its ``runs-<tag>.jsonl`` files and any recorded runs' copied
    :data:`RECORDED_RUNS` (named ``runs*.jsonl.gz``); a run found twice counts once."""
    import gzip

    runs: dict[tuple[str, str, int, int], dict[str, Any]] = {}
    texts = [gzip.decompress(f.read_bytes()).decode() for f in sorted(out.glob("runs*.jsonl.gz"))]
    texts += [f.read_text() for f in sorted(out.glob("runs-*.jsonl"))]
    for text in texts:
        for line in text.splitlines():
            if line.strip():
                try:
                    r = json.loads(line)
                except json.JSONDecodeError:
                    continue  # a line cut short by a kill
                runs[(r["problem"], r["method"], r["seed"], r["budget"])] = r
    return list(runs.values())


def select_runs(runs: Sequence[dict[str, Any]], problems: Sequence[str] | None = None,
                methods: Sequence[str] | None = None, seeds: Sequence[int] | None = None,
                budget: int | None = None) -> list[dict[str, Any]]:
    """The runs of the given problems, methods (names as recorded), seeds and budget
    (``None``: any), so a report of one directory can show a part of what it holds."""
    def keep(r: dict[str, Any]) -> bool:
        return ((not problems or r["problem"] in {p.strip() for p in problems})
                and (not methods or r["method"] in methods)
                and (seeds is None or r["seed"] in seeds)
                and (budget is None or r["budget"] == budget))

    return [r for r in runs if keep(r)]


def _budgets(budget: int, n_init: int) -> list[int]:
    marks = sorted({n_init, *range(10, budget, 10 if budget <= 40 else 20), budget})
    return [b for b in marks if n_init <= b <= budget]


def _mean_2se(x: Sequence[float]) -> Any:
    """Mean and mean +- 2 standard errors as a table cell (the mean alone for one value)."""
    from docs.recorded import interval

    a = np.asarray(x, dtype=float)
    if a.size == 0:
        return None
    if a.size == 1:
        return float(a[0])
    se = float(a.std(ddof=1)) / math.sqrt(a.size)
    return interval(float(a.mean()), float(a.mean()) - 2 * se, float(a.mean()) + 2 * se)


def summarise(runs: Sequence[dict[str, Any]], reference: str = REFERENCE_METHOD
              ) -> dict[str, Any]:
    """Per problem: mean log gap at budgets, final HV (mean, spread, worst seed, collapses)
    and one-sided Mann-Whitney p values against the ``reference`` method.

    Runs of a problem are compared at the smallest budget all of them reached.
    """
    from scipy.stats import mannwhitneyu

    out: dict[str, Any] = {}
    for prob in sorted({r["problem"] for r in runs}):
        pr = [r for r in runs if r["problem"] == prob]
        budget = min(r["budget"] for r in pr)
        n_init = pr[0]["n_init"]
        marks = _budgets(budget, n_init)
        max_hv = pr[0]["max_hv"]
        by_m: dict[str, list[dict[str, Any]]] = {}
        for r in pr:
            by_m.setdefault(r["method"], []).append(r)
        ref_final = [r["hv"][budget - 1] for r in by_m.get(reference, [])]
        rows = {}
        for m in _method_order(list(by_m)):
            rs = sorted(by_m[m], key=lambda r: r["seed"])
            final = [r["hv"][budget - 1] for r in rs]
            p = p_worse = None
            if m != reference and len(ref_final) >= 2 and len(final) >= 2:
                p = float(mannwhitneyu(ref_final, final, alternative="greater").pvalue)
                p_worse = float(mannwhitneyu(ref_final, final, alternative="less").pvalue)
            asks = [s for r in rs for s in r["ask_s"]]
            worst = int(np.argmin(final))
            rows[m] = {
                "n_seeds": len(rs),
                "seeds": [r["seed"] for r in rs],
                "log_gap": {b: [r["log_gap"][b - 1] for r in rs] for b in marks},
                "final_hv": final,
                "final_hv_sd": float(np.std(final, ddof=1)) if len(final) > 1 else 0.0,
                "worst_hv": final[worst], "worst_seed": rs[worst]["seed"],
                "collapses": int(sum(h < COLLAPSE_FRACTION * max_hv for h in final)),
                "p_ecopt_better": p,
                "p_ecopt_worse": p_worse,
                "median_ask_s": float(np.median(asks)) if asks else None,
            }
        out[prob] = {"budget": budget, "marks": marks, "max_hv": max_hv, "rows": rows,
                     "reference": reference}
    return out


def problem_table(s: dict[str, Any]) -> tuple[list[str], list[list[Any]]]:
    """One problem's summary as table columns and rows (what reports and records show).

    ``n=<b>`` cells are the mean log10 gap with its mean +- 2 SE interval; ``final HV``
    is the mean final hypervolume with its mean +- 2 SE interval, ``sd`` its standard
    deviation over seeds.
    """
    marks = s["marks"]
    cols = ["method", "seeds", *[f"n={b}" for b in marks], "final HV", "sd", "worst HV",
            "worst seed", "collapses", "p better", "p worse", "ask s"]
    rows: list[list[Any]] = []
    for m, r in s["rows"].items():
        rows.append([m, r["n_seeds"], *[_mean_2se(r["log_gap"][b]) for b in marks],
                     _mean_2se(r["final_hv"]), r["final_hv_sd"], r["worst_hv"],
                     r["worst_seed"], f"{r['collapses']}/{r['n_seeds']}",
                     r["p_ecopt_better"], r["p_ecopt_worse"], r["median_ask_s"]])
    return cols, rows


def markdown_table(cols: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A Markdown table, cells formatted as every recorded run formats them."""
    from docs.recorded import Table, render_table

    return render_table(Table(cols, rows))


def _targets(summary: dict[str, Any]) -> list[str]:
    """One line per method compared with qLogNEHVI: the verdict on "qLogNEHVI's final
    hypervolume is higher", by the one rule's test form (:func:`ecopt._verdict.verdict_of_tests`:
    one-sided Mann-Whitney U either way at p < 0.05; a large p-value is *not shown*, never a
    pass or a failure)."""
    lines = []
    for prob, s in summary.items():
        rows = s["rows"]
        if s.get("reference", REFERENCE_METHOD) != REFERENCE_METHOD or REFERENCE_METHOD not in rows:
            continue
        for m in ("ecopt-random", "ecopt-sobol", "optuna-nsga2", "optuna-nsga2-small",
                  "optuna-tpe", "optuna-gp", "botorch-plain", "ax", "ax-shared-init",
                  "ecopt-before"):
            if m not in rows:
                continue
            pb, pw = rows[m]["p_ecopt_better"], rows[m]["p_ecopt_worse"]
            if pb is None or pw is None:
                continue
            lines.append(f"- {prob}: qLogNEHVI's final hypervolume above {m}'s: "
                         f"{verdict_of_tests(pb, pw)} (p better = {pb:.3g}, "
                         f"p worse = {pw:.3g})")
    return lines


def targets_of_tables(tables: dict[str, Any]) -> list[str]:
    """:func:`_targets` from a recorded run's per-problem tables (columns ``method``,
    ``p better``, ``p worse``), to re-derive a recorded run's verdict lines."""
    summary: dict[str, Any] = {}
    for prob, t in tables.items():
        cols = list(t.columns)
        if not {"method", "p better", "p worse"} <= set(cols):
            continue
        i_m, i_b, i_w = cols.index("method"), cols.index("p better"), cols.index("p worse")
        summary[prob] = {"rows": {r[i_m]: {"p_ecopt_better": r[i_b], "p_ecopt_worse": r[i_w]}
                                  for r in t.rows}}
    return _targets(summary)


def versions() -> dict[str, str]:
    """Versions of every library compared, and the machine."""
    import importlib.metadata as md

    out = {"python": platform.python_version()}
    for pkg in ("ecopt", "botorch", "gpytorch", "torch", "optuna", "ax-platform", "numpy",
                "scipy"):
        try:
            out[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            out[pkg] = "not installed"
    from ecopt.host import cpu_model

    out["cpu"] = cpu_model()
    out["cores"] = str(os.cpu_count())
    try:
        import torch

        out["torch_threads"] = str(torch.get_num_threads())
    except ImportError:  # pragma: no cover
        pass
    return out


def table_legend(reference: str) -> str:
    """What the columns of :func:`problem_table` mean."""
    return (f"n=<b>: log10(max HV - HV) after b evaluations, mean [mean - 2 SE, mean + 2 SE] "
            f"over seeds (lower is better); final HV: mean [mean - 2 SE, mean + 2 SE] over "
            f"seeds, sd: its standard deviation, worst HV / worst seed: the lowest final HV "
            f"and its seed; collapses: seeds whose final HV is below "
            f"{COLLAPSE_FRACTION:.0%} of the maximum; p better / p worse: one-sided "
            f"Mann-Whitney U p that {reference} has a higher / lower final HV than the row; "
            f"ask s: median wall-clock seconds per model-based suggestion.")


def report_markdown(summary: dict[str, Any], command: str, meta: dict[str, str]) -> str:
    """The markdown report of a summary."""
    lines = [f"Command: `{command}`", "",
             f"Date (UTC): {time.strftime('%Y-%m-%d %H:%M', time.gmtime())}", "",
             "Versions: " + ", ".join(f"{k} {v}" for k, v in meta.items()), ""]
    for prob, s in summary.items():
        lines += [f"### {prob}", "", f"max HV {s['max_hv']:.6g}; "
                  + table_legend(s.get("reference", REFERENCE_METHOD)), "",
                  markdown_table(*problem_table(s)), ""]
    t = _targets(summary)
    if t:
        lines += ["### Targets", "", *t, ""]
    return "\n".join(lines)


def run_commits(runs: Sequence[dict[str, Any]]) -> dict[str, list[str]]:
    """Method -> the git commits of the code its runs ran (``unknown`` where not recorded)."""
    out: dict[str, set[str]] = {}
    for r in runs:
        out.setdefault(r["method"], set()).add(r.get("git_commit", "unknown"))
    return {m: sorted(c) for m, c in sorted(out.items())}


def record(directory: Path, command: str, summary: dict[str, Any],
           runs: Sequence[dict[str, Any]], notes: Sequence[str] = ()) -> Path:
    """Write the recorded run (``summary.json``, ``summary.md``) of a summary into ``directory``.

    Through :mod:`docs.recorded`, one table per problem (ids: problem names),
    so ``python -m docs.tables`` can copy them into doc pages. The commits each
    method's runs ran at are kept in the facts (``code``): a report rebuilt from runs
    of several checkouts (``--label``) records every one of them. The runs themselves
    are kept beside them (:data:`RECORDED_RUNS`), so a later report can rebuild these
    rows and set new ones beside them.
    """
    from docs import recorded

    tables = {prob: recorded.Table(*problem_table(s)) for prob, s in summary.items()}
    ref = next(iter(summary.values())).get("reference", REFERENCE_METHOD) if summary else ""
    facts = {"collapse_fraction": COLLAPSE_FRACTION, "reference": ref,
             "max_hv": {p: s["max_hv"] for p, s in summary.items()},
             "budget": {p: s["budget"] for p, s in summary.items()},
             "seeds": {p: {m: r["seeds"] for m, r in s["rows"].items()}
                       for p, s in summary.items()},
             "code": run_commits(runs), "targets": _targets(summary)}
    recorded.write_run(directory, script="benchmarks/mobo.py", command=command, tables=tables,
                       energy=None, title="Sample efficiency: hypervolume against evaluations",
                       notes=[table_legend(ref), *notes], facts=facts,
                       extra_libraries=("optuna", "ax-platform"))
    write_runs(directory / RECORDED_RUNS, runs)
    return directory


def write_runs(path: Path, runs: Sequence[dict[str, Any]]) -> Path:
    """Write ``runs`` to ``path`` as gzip'd JSON lines, sorted by problem, method, seed and
    budget, byte-for-byte the same for the same runs (no time stamp in the gzip header)."""
    import gzip

    key = itemgetter("problem", "method", "seed", "budget")
    text = "".join(json.dumps(r, sort_keys=True) + "\n" for r in sorted(runs, key=key))
    path.write_bytes(gzip.compress(text.encode(), compresslevel=9, mtime=0))
    return path


def plot(summary_runs: Sequence[dict[str, Any]], out: Path) -> list[Path]:
    """One PNG per problem: mean ± 2 SE of log10 HV gap against evaluations."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paths = []
    for prob in sorted({r["problem"] for r in summary_runs}):
        pr = [r for r in summary_runs if r["problem"] == prob]
        budget = min(r["budget"] for r in pr)
        fig, ax = plt.subplots(figsize=(6, 4))
        for m in _method_order(sorted({r["method"] for r in pr})):
            G = np.array([r["log_gap"][:budget] for r in pr if r["method"] == m])
            mu = G.mean(axis=0)
            se = G.std(axis=0, ddof=1) / math.sqrt(len(G)) if len(G) > 1 else 0 * mu
            x = np.arange(1, budget + 1)
            ax.plot(x, mu, label=m)
            ax.fill_between(x, mu - 2 * se, mu + 2 * se, alpha=0.15)
        ax.set_xlabel("evaluations")
        ax.set_ylabel("log10(max HV - HV)")
        ax.set_title(prob)
        ax.legend(fontsize=7)
        fig.tight_layout()
        p = out / f"{prob}.png"
        fig.savefig(p, dpi=90)
        plt.close(fig)
        paths.append(p)
    return paths


# -- CLI -------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="3 seeds, 30 evaluations (CI smoke)")
    ap.add_argument("--seeds", type=int, default=None, help="number of seeds (default 10; 3 quick)")
    ap.add_argument("--seed-offset", type=int, default=0, help="first seed")
    ap.add_argument("--budget", type=int, default=None,
                    help="evaluations per run (default: the problem's, 100 for M=2, 60 for "
                         "M=3, 50 for Zeus; 30 quick)")
    ap.add_argument("--problems", default=None,
                    help="comma-separated problems (default: every problem, noiseless and noisy)")
    ap.add_argument("--methods", default=None,
                    help="comma-separated methods (default: all; also ecopt-qlognehvi-r<R>-raw<N>-"
                         "mc<S>: R restarts, N raw samples, S MC samples; "
                         "ecopt-qlognehvi-alpha<a>: box decompositions approximated by a); with "
                         "--report-only, the rows to report (names given by --label too)")
    ap.add_argument("--zeus-dir", default=str(DEFAULT_ZEUS_DIR),
                    help="directory with summary_train.csv and summary_power_*.csv")
    ap.add_argument("--zeus-gpu", default=None, help="which summary_power_<gpu>.csv")
    ap.add_argument("--out", default="benchmarks/results/mobo", help="output directory")
    ap.add_argument("--tag", default="main", help="this process's runs file: runs-<tag>.jsonl")
    ap.add_argument("--label", default=None,
                    help="record the runs of the one method given under this name (e.g. the "
                         "same method run with another ecopt checkout on PYTHONPATH: "
                         "--methods ecopt-qlognehvi --label ecopt-before)")
    ap.add_argument("--report-only", action="store_true", help="only rebuild the report")
    ap.add_argument("--reference", default=REFERENCE_METHOD,
                    help="the method every row's p values compare against")
    ap.add_argument("--record", nargs="?", const="", default=None, metavar="TAG",
                    help="also write the recorded run (summary.json, summary.md) to "
                         "docs/results/mobo/<date>[-TAG]")
    ap.add_argument("--note", action="append", default=[],
                    help="a caveat the recorded run keeps (repeatable), e.g. the commands "
                         "that made runs this report is rebuilt from")
    ap.add_argument("--no-plot", action="store_true")
    ap.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    return ap


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.getLogger("ecopt").setLevel(logging.ERROR)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    seeds = args.seeds if args.seeds is not None else (3 if args.quick else 10)
    methods = [m.strip() for m in (args.methods or ",".join(METHODS)).split(",") if m.strip()]
    bad = [m for m in methods if not known_method(m)]
    if bad and not args.report_only:
        raise SystemExit(f"unknown method(s) {bad}; expected some of {list(METHODS)}")
    if not args.methods and not args.report_only and not ax_installed():
        print(f"skipping {AX_METHODS}: Ax is not installed (pip install 'ecopt[ax]')",
              flush=True)
        methods = [m for m in methods if m not in AX_METHODS]
    if args.label is not None and len(methods) != 1:
        raise SystemExit(f"--label names the runs of one method, got {len(methods)} methods")
    problems = (args.problems.split(",") if args.problems else default_problems(args.quick))
    import torch

    # Also with --report-only, so a rebuilt report states the torch threads the runs used
    # (given the same --threads).
    torch.set_num_threads(args.threads)
    if not args.report_only:
        done = {(r["problem"], r["method"], r["seed"], r["budget"]) for r in _load_runs(out)}
        runs_file = out / f"runs-{args.tag}.jsonl"
        for name in problems:
            try:
                problem = make_problem(name.strip(), zeus_dir=args.zeus_dir,
                                       zeus_options={"gpu": args.zeus_gpu} if args.zeus_gpu
                                       else None)
            except FileNotFoundError as exc:
                if args.problems:  # asked for by name: an error
                    raise SystemExit(str(exc)) from None
                print(f"skipping {name}: {exc}", flush=True)
                continue
            budget = args.budget or (30 if args.quick else problem.budget)
            for seed in range(args.seed_offset, args.seed_offset + seeds):
                for m in methods:
                    name = args.label or m
                    if (problem.name, name, seed, budget) in done:
                        continue
                    # Another process (--tag) may have finished it meanwhile.
                    if any((r["problem"], r["method"], r["seed"], r["budget"])
                           == (problem.name, name, seed, budget) for r in _load_runs(out)):
                        continue
                    r = run_one(problem, m, seed, budget)
                    if args.label:
                        r["method"], r["runs_as"] = name, m
                    with runs_file.open("a") as fh:
                        fh.write(json.dumps(r) + "\n")
                    print(f"{problem.name:22s} {name:20s} seed {seed:2d}: final log gap "
                          f"{r['log_gap'][-1]:+.3f}  ({r['wall_s']:.1f} s)", flush=True)
    shown = [args.label] if args.label else methods if args.methods else None
    runs = select_runs(_load_runs(out), problems=problems if args.problems else None,
                       methods=shown,
                       seeds=(range(args.seed_offset, args.seed_offset + seeds)
                              if args.seeds is not None else None), budget=args.budget)
    if not runs:
        print("no runs to report")
        return 1
    summary = summarise(runs, args.reference)
    cmd = "python -m benchmarks.mobo " + " ".join(
        shlex.quote(a) for a in (sys.argv[1:] if argv is None else argv))
    md = report_markdown(summary, cmd, versions())
    if args.record is not None:
        from docs.recorded import results_dir

        where = record(results_dir("mobo", tag=args.record or None), cmd, summary, runs,
                       args.note)
        print(f"recorded in {where}")
    (out / "report.md").write_text(md)
    (out / "summary.json").write_text(json.dumps(summary, indent=1, default=str))
    if not args.no_plot:
        plot(runs, out)
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
