"""qLogNEHVI (and qNEHVI) over Gaussian-process surrogates: the sampler class.

A model-based proposal (:mod:`~ecopt.samplers._proposal`) runs BoTorch's pipeline
in four stages, each in its own private module (BoTorch's own layout):

1. :mod:`~ecopt.samplers._encoding`: complete trials to model inputs and
   outcomes (objectives flipped to maximisation), the reference point (the
   objectives' thresholds, else :func:`ecopt.pareto.infer_reference_point`).
2. :mod:`~ecopt.samplers._models`: one GP per outcome, fitted by BoTorch's
   ``fit_gpytorch_mll`` (closed-form loss and gradient from
   :mod:`~ecopt.samplers._mll`), stacked into one model. When some trials ran
   out of memory (``infeasible``), a GP on a +1/-1 feasibility label becomes an
   outcome constraint, so the search learns the boundary.
3. :mod:`~ecopt.samplers._acquisition`: qLogNEHVI (up to three objectives;
   qLogNParEGO from four) over the pruned
   baseline (:mod:`~ecopt.samplers._pruning`), with outcome constraints and
   running trials as ``X_pending``.
4. :mod:`~ecopt.samplers._optimize`: BoTorch's continuous or mixed optimiser,
   or every configuration of a small fully discrete space
   (:mod:`~ecopt.samplers._discrete`).

Until ``n_init`` trials exist the proposals are scrambled Sobol points (by default
``min(2 (d + 1), 5)``, fewer in a short study:
:meth:`QLogNEHVISampler.initial_design_size`). The fast paths
(:mod:`~ecopt.samplers._botorch_compat`, the only module that touches BoTorch's
private parts) fall back in order: a fast path that is
switched off or fails leaves the proposal to BoTorch's public path
(``proposal["fast_path_off"]`` says which and why, with a warning once per
study); only when BoTorch's own path fails is the proposal a Sobol point
(``proposed_by="sobol"``, ``proposal["fallback"]``, a warning), never an
exception in the study. Proposals are a pure function of seed and history (each
runs on one thread: see :func:`~ecopt.samplers._proposal.one_thread`).
"""

from __future__ import annotations

import logging
import math
import warnings
from collections.abc import Sequence
from typing import Any

from ecopt._types import Params
from ecopt.samplers import _discrete
from ecopt.samplers._encoding import encoding, grid, seen_keys
from ecopt.samplers.base import FallbackWarning, Proposal, Sampler
from ecopt.samplers.random import sobol_points
from ecopt.space import SearchSpace
from ecopt.trial import TrialRecord, TrialState

__all__ = ["QLogNEHVISampler", "QNEHVISampler"]

log = logging.getLogger("ecopt")

#: Without ``n_init``, the initial design has ``min(2 (d + 1), INIT_TRIALS)`` trials: Ax's
#: size. With the current GP fits it ended ahead of ``2 (d + 1)`` on the three 6-dimensional
#: problems of ``benchmarks/mobo.py`` and level on the other four, 10 seeds each
#: (``docs/benchmarks.md``, "Longer studies: Ax's design size").
INIT_TRIALS = 5
#: Without ``n_init``, a study whose ``optimize(n_trials=...)`` call plans few trials spends
#: at most this fraction of them on the Sobol design, and at least :data:`MIN_INIT` trials
#: (``benchmarks/short_studies.py`` compares it with ``2 (d + 1)`` and a half).
SHORT_STUDY_FRACTION = 1 / 3
#: The smallest default initial design (the model needs two complete trials).
MIN_INIT = 3


#: ``failures=``: what failed trials teach the model (see :class:`QLogNEHVISampler`).
FAILURE_RULES = ("learn", "pending", "ignore")


#: An economy proposal (``proposal_share``): the acquisition scored on ``raw_samples``
#: candidates (no gradient steps; a user's lower ``raw_samples`` stays) with at most
#: ``mc_samples`` quasi-MC samples (scoring fixed points needs no smooth gradient; a
#: third less acquisition time than 64 on a 1-D search), hyperparameters kept from the
#: last proposal and optimised again (warm-started, at most ``fit_maxiter`` L-BFGS-B
#: iterations, no cold check) once ``refit_every`` new observations have come in; a fit
#: from BoTorch's default start (the first economy proposal's: nothing to warm-start; a
#: prior compared again) stops at a relative gain of ``cold_ftol`` (the default
#: ``cold_ftol="auto"``; a user's number or ``None`` stays), the tolerance every recorded
#: economy run used (scipy's tolerance costs a cheap study 2-6x per fit).
ECONOMY = {"raw_samples": 512, "fit_maxiter": 50, "mc_samples": 32, "cold_ftol": 1e-6}
#: ``proposal_share``'s default: economy proposals while a full one costs more than a quarter
#: of a trial (CPU-second trials); GPU-sized trials keep full proposals.
DEFAULT_PROPOSAL_SHARE = 0.25
#: ``refit_every`` is the full proposal's cost over the trial's, over ``proposal_share``,
#: rounded up and held within these bounds.
ECONOMY_REFIT_EVERY = (2, 4)
#: An economy proposal also re-optimises the hyperparameters once this fraction of the last
#: fit's observations (rounded down, at least 1) have come in after it, when that comes
#: before ``refit_every``: hyperparameters fitted to a handful of points move the most.
ECONOMY_REFIT_GROWTH = 0.25
#: With ``lengthscale_prior="auto"``, an economy re-fit fits each output under the prior
#: chosen last (one fit, not two) until the observations are this many times those it
#: was chosen on; then it compares both again.
ECONOMY_PRIOR_GROWTH = 2.0
#: How many of the latest full (non-economy) model proposals and complete trials the
#: cost ratio is the median of.
ECONOMY_WINDOW = 3
#: Before any full model proposal, a full one's cost is predicted as this many times the
#: median cost of the economy proposals that optimised their hyperparameters: on the NAS
#: workload a full proposal cost a median 65 J, an economy re-fit one 13 J
#: (``docs/results/pruning/2026-12-06-economy-512``, 10 seeds).
FULL_OVER_ECONOMY = 5.0
#: The encoded (unit-cube) coordinate of the centre of every axis (``init_center``).
CENTRE_U = 0.5


def _cost_of(x: Any, key: str) -> float | None:
    """A finite, positive ``energy_j`` or ``duration_s`` of a record or search notes."""
    v = x.get(key) if isinstance(x, dict) else getattr(x, key, None)
    if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v > 0:
        return float(v)
    return None


#: The part of a proposal's window that a stopping-rule evaluation billed there (the
#: economy rule weighs what a proposal itself costs; economy cannot make that part cheaper).
_CHECK_PART = {"energy_j": "convergence_check_j", "duration_s": "convergence_check_s"}


def _proposal_cost(search: dict[str, Any], key: str) -> float | None:
    """A proposal's own ``energy_j`` or ``duration_s``: its window less a stopping-rule
    evaluation billed to it (``None`` when not read, or nothing is left)."""
    v = _cost_of(search, key)
    part = search.get(_CHECK_PART[key])
    if v is not None and isinstance(part, (int, float)) and not isinstance(part, bool):
        v = v - float(part) if v - float(part) > 0 else None
    return v


def _median(xs: Sequence[float]) -> float:
    ys = sorted(xs)
    n = len(ys)
    return ys[n // 2] if n % 2 else (ys[n // 2 - 1] + ys[n // 2]) / 2


def _why(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


#: Notes recorded per proposed point: note -> its keys that hold one entry per point.
_PER_POINT = {"cost": ("predicted_energy_j",), "failures": ("p_failure", "nearest_failure")}


def _per_point(info: dict[str, Any], i: int) -> dict[str, Any]:
    """The notes of the ``i``-th point of a batch proposal (per-point lists cut to its entry)."""
    out = dict(info)
    for note, keys in _PER_POINT.items():
        sub = out.get(note)
        if isinstance(sub, dict):
            out[note] = {k: (v[i] if k in keys and isinstance(v, list) else v)
                         for k, v in sub.items()}
    return out


class QLogNEHVISampler(Sampler):
    """Multi-objective Bayesian optimisation with qLogNEHVI.

    Args:
        seed: Seed (default: the study's).
        n_init: Sobol trials before the model takes over. ``None`` (default):
            ``min(2 * (d + 1), 5)``, or fewer in a short study: at most a third of the
            trials the running ``optimize(n_trials=...)`` call plans, at least 3
            (:meth:`initial_design_size`; each Sobol trial's ``proposal["why"]``
            names the rule).
        num_restarts: Restarts of the acquisition optimiser (5 lost hypervolume
            on BraninCurrin against 10).
        raw_samples: Raw samples for its initial conditions (512 gave the same
            hypervolume at ~0.1 s more per proposal).
        mc_samples: Quasi-MC samples of the acquisition function. ``None``: 64
            (128 gave the same hypervolume at twice the cost of each
            evaluation), 32 from four objectives on (where the box
            decompositions, one per sample, cost most).
        maxiter: L-BFGS-B iterations per restart.
        warm_start: Start each GP fit from the hyperparameters fitted for the
            latest proposal in the history (recorded in its trial's
            ``proposal["gp_state"]``, so a resumed study warm-starts exactly as an
            uninterrupted one). Off by default: 2-5x cheaper fits, but on DTLZ2
            it lost hypervolume (the warm fit stays in an early,
            short-lengthscale optimum).
        cold_refit_every: When the number of observations is a multiple of
            this, a warm-started fit is checked against a fit from the default
            start and the better marginal likelihood wins (0: never).
        warm_ftol: L-BFGS-B's relative tolerance for warm-started fits.
        cold_ftol: The same for fits from BoTorch's default start. ``None``:
            scipy's, 2.2e-9, as BoTorch fits. ``"auto"`` (default): scipy's for
            continuous GPs, :data:`~ecopt.samplers._models.MIXED_COLD_FTOL` (1e-6)
            for mixed-kernel GPs (categorical parameters). On continuous spaces
            1e-6 stops fits short of the optimum and ended lower after 40
            evaluations on ZDT1 and VehicleSafety (every one of 10 paired seeds);
            on the mixed BraninCurrin scipy's tolerance made proposals 3.4x slower
            and ended lower on 3 of 4 paired seeds
            (``docs/results/mobo/2026-12-07-fit-tolerance``).
        allow_repeats: In a fully discrete space small enough to enumerate
            (at most 2,048 configurations), may a configuration that already
            has a trial be proposed again before every configuration has one?
            ``False`` (default, as Ax): no. ``True``: the acquisition decides.
            In any space, no proposal repeats a running configuration, one
            earlier in its batch or (unless ``failures="ignore"``) a failed
            one; without ``allow_repeats``, nor any other trial's (a pick of
            the gradient optimiser that would is replaced by the best new
            scored candidate, ``proposal["replaced_repeats"]``).
        dense_posterior: Evaluate the acquisition's posterior samples in closed
            form (:mod:`ecopt.samplers._posterior`, BoTorch's samples to
            rounding) where the model is BoTorch's default GP.
        sample_around_best: Start the acquisition optimiser also from BoTorch's
            ``sample_around_best`` perturbations of the modelled Pareto set
            (continuous spaces; the mixed optimiser has no such option).
        alpha: Box-decomposition approximation of qLogNEHVI (0: exact; BoTorch's
            ``alpha``). ``None``: by number of objectives, exact up to three,
            :data:`~ecopt.samplers._acquisition.ALPHA_M4` at four (with
            ``parego_from=5``), exact at four in a space small enough to
            enumerate.
        parego_from: From this many objectives on, qLogNParEGO replaces
            qLogNEHVI (its cost does not grow with the front; at four
            objectives it reached a higher hypervolume on DTLZ2 in
            docs/benchmarks.md). ``None`` (default): 4, or 5 in a fully
            discrete space small enough to enumerate (at most 2,048
            configurations), where four objectives use qLogNEHVI over exact
            box decompositions. With ``parego_from=5``, four objectives use
            qLogNEHVI over approximate box decompositions (``alpha``) in any
            other space.
        lengthscale_prior: ``"auto"`` (default): each continuous GP is fitted
            under both priors below and the fit whose leave-one-out predictions
            of its own observations are more probable is kept
            (:func:`ecopt.samplers._models.loo_log_score`; recorded per outcome in
            ``proposal["lengthscale_priors"]``); it costs a second fit per
            outcome. ``"gamma"``: Gamma(3, 6) on the RBF lengthscales, BoTorch's
            prior before 0.12, which keeps models local (short lengthscales) and
            loses hypervolume on smooth objectives (ZDT1, VehicleSafety).
            ``"dim-scaled"``: BoTorch's default since, whose long lengthscales
            made near-linear models that sent DTLZ2 proposals to the cube's
            corners for good on 2 of 20 seeds without a centre point
            (docs/benchmarks.md, "Collapses"). Mixed models (categorical
            parameters) keep BoTorch's own kernel.
        ref_point_rule: How the reference point is inferred for an objective
            without a threshold. ``"front"`` (default): the observed Pareto
            front's nadir minus 10% of the front's range (BoTorch's
            ``infer_reference_point``). It gives no improvement to a point
            beyond the current front's extent (more quality for more joules
            than the most accurate trial so far) and moves inwards whenever
            that trial is dominated: on the synthetic learning-curve problem of
            ``benchmarks/pruning.py`` it kept the search among cheap
            configurations. ``"observed"``: the worst value any feasible trial
            observed, minus 10% of the observed range (Optuna's ``GPSampler``
            rule, up to the margin): the whole observed range stays open,
            and costly extremes get explored earlier (on the Zeus traces more
            search energy before the front is found). Thresholds, where given,
            are used as they are and are the surest choice.
        cost_aware: Propose by expected hypervolume improvement per predicted
            joule: a GP on ``log(energy_j)`` of the trials so far predicts each
            point's energy, and the acquisition is divided by it (log space:
            minus its log); see :mod:`ecopt.samplers._cost`. Each model-based
            proposal records ``proposal["cost"]`` (predicted joules, the model,
            whether it was active and, if not, why). The Sobol initial design is
            unchanged.
        cost_exponent: Power of the predicted cost in ``[0, 1]`` (1: per joule;
            0: cost ignored, the model still fitted and recorded).
        proposal_share: Keep a proposal's own cost near at most this share of a
            trial's. When a full model proposal's joules (``proposal["search"]``;
            seconds when the meter reads no energy) are more than
            ``proposal_share`` times the median of the latest complete trials',
            the next proposals are economy ones (:data:`ECONOMY`). The first model
            proposal is an economy one; from it a full one's cost is predicted
            (:data:`FULL_OVER_ECONOMY` times its cost), and once a full one has
            run, the median of the latest full ones is used
            (:meth:`economy`). An economy proposal: the
            acquisition is scored (32 quasi-MC samples at most) on 512 candidates (Sobol points and
            perturbations of the observed Pareto set) instead of optimised, and
            the GP hyperparameters are kept from the last proposal, optimised
            again (warm-started, at most 50 L-BFGS-B iterations; the first one
            fitted from the default start, stopped at a relative gain of
            ``ECONOMY["cold_ftol"]`` unless ``cold_ftol`` is set) only every
            ``refit_every`` observations (the cost ratio over the share, within
            :data:`ECONOMY_REFIT_EVERY`), or sooner while the data is small
            (:data:`ECONOMY_REFIT_GROWTH`: every new observation up to 8); with
            ``lengthscale_prior="auto"`` such a re-fit keeps each output's prior
            chosen last (one fit instead of two) until the observations have
            doubled since that choice (:data:`ECONOMY_PRIOR_GROWTH`). Each model proposal records the
            decision in ``proposal["economy"]`` (its ``basis``: ``"first"``,
            ``"predicted"`` or ``"measured"``, the ratio, the share, whether it
            was active and its settings). Default
            :data:`DEFAULT_PROPOSAL_SHARE` (0.25): on CPU-second trials economy
            proposals switch on by themselves, and trials that cost much more
            than a proposal (GPU-sized) get full proposals from the second model
            proposal on. ``None``: full
            proposals always (what a benchmark of the model's sample efficiency
            wants; economy proposals also probe a constraint's boundary less
            closely). On the NAS workload
            (``docs/results/pruning/2026-12-06-economy-first``, 10 paired seeds)
            the default cut the proposals' estimated joules 12.8x, to 0.16 of the
            trials', and kept 1.08 of the final hypervolume (p = 0.91 that it
            is lower).
        failures: What failed trials teach the model (:mod:`ecopt._failures`).
            ``"learn"`` (default): every failed configuration (and every trial
            pruned before it reported) is a pending point of every later
            proposal, so neither it nor its neighbourhood is proposed again;
            failures with the same error (type and raising line) whose box holds
            no complete trial form a region, and a GP on complete (+1) against
            those failures (-1) weights the acquisition by the probability of
            not failing, as the feasibility model does for infeasible trials.
            Each model proposal records ``proposal["failures"]`` (counts, the
            failure probability it was weighted by, the distance to the nearest
            failure). ``"pending"``: failed configurations as pending points
            only (Ax's rule). ``"ignore"``: failed trials are not used.
        init_center: ``True`` (default): the initial design's first trial is the
            centre of the space
            (each parameter's middle in its encoded scale: the geometric middle of
            a log range, the middle of an ordered range), as Ax's default
            strategy starts; the other initial trials stay Sobol points. Its
            proposal notes say ``"centre": True``. ``False``: Sobol points only.

    Example:
        >>> sampler = ecopt.samplers.QLogNEHVISampler(n_init=8, num_restarts=5)
        >>> study = ecopt.Study(space, objectives, sampler=sampler)
    """

    name = "qlognehvi"
    min_objectives = 2
    #: qLogNEHVI (True) or qNEHVI (False).
    log_hvi = True

    def __init__(self, seed: int | None = None, n_init: int | None = None, num_restarts: int = 10,
                 raw_samples: int = 256, mc_samples: int | None = None, maxiter: int = 200,
                 warm_start: bool = False, cold_refit_every: int = 10,
                 warm_ftol: float = 1e-6, cold_ftol: float | str | None = "auto",
                 allow_repeats: bool = False, dense_posterior: bool = True,
                 sample_around_best: bool = True, alpha: float | None = None,
                 parego_from: int | None = None, lengthscale_prior: str = "auto",
                 ref_point_rule: str = "front", cost_aware: bool = False,
                 cost_exponent: float = 1.0,
                 proposal_share: float | None = DEFAULT_PROPOSAL_SHARE,
                 failures: str = "learn", init_center: bool = True) -> None:
        super().__init__(seed)
        if not isinstance(init_center, bool):
            raise ValueError(f"init_center must be True or False, got init_center={init_center!r}")
        self.init_center = init_center
        if failures not in FAILURE_RULES:
            raise ValueError(f"failures must be one of {list(FAILURE_RULES)}, "
                             f"got failures={failures!r}")
        self.failures = failures
        if proposal_share is not None and (isinstance(proposal_share, bool) or not isinstance(
                proposal_share, (int, float)) or not 0 < proposal_share < math.inf):
            raise ValueError(f"proposal_share must be None or a number > 0, "
                             f"got proposal_share={proposal_share!r}")
        self.proposal_share = None if proposal_share is None else float(proposal_share)
        for what, v in (("num_restarts", num_restarts), ("raw_samples", raw_samples),
                        ("mc_samples", 1 if mc_samples is None else mc_samples),
                        ("maxiter", maxiter),
                        ("parego_from", 1 if parego_from is None else parego_from)):
            if v < 1:
                raise ValueError(f"{what} >= 1 must hold, got {what}={v}")
        if isinstance(cold_ftol, str) and cold_ftol != "auto":
            raise ValueError(f"cold_ftol must be 'auto', None or a number in (0, 1), "
                             f"got cold_ftol={cold_ftol!r}")
        for what, tol in (("warm_ftol", warm_ftol),
                          ("cold_ftol", None if isinstance(cold_ftol, str) else cold_ftol)):
            if tol is not None and not 0 < tol < 1:
                raise ValueError(f"0 < {what} < 1 must hold, got {what}={tol}")
        if cold_refit_every < 0:
            raise ValueError(f"cold_refit_every >= 0 must hold, got {cold_refit_every}")
        if n_init is not None and n_init < 1:
            raise ValueError(f"n_init >= 1 must hold, got n_init={n_init}")
        if alpha is not None and not 0 <= alpha < 1:
            raise ValueError(f"0 <= alpha < 1 must hold, got alpha={alpha}")
        if not isinstance(cost_aware, bool):
            raise ValueError(f"cost_aware must be True or False, got cost_aware={cost_aware!r}")
        from ecopt.samplers._cost import check_exponent
        from ecopt.samplers._encoding import REF_POINT_RULES
        from ecopt.samplers._models import LENGTHSCALE_PRIORS

        if lengthscale_prior not in LENGTHSCALE_PRIORS:
            raise ValueError(f"lengthscale_prior must be one of {list(LENGTHSCALE_PRIORS)}, "
                             f"got {lengthscale_prior!r}")
        self.n_init, self.num_restarts, self.raw_samples = n_init, num_restarts, raw_samples
        self.mc_samples, self.maxiter, self.warm_start = mc_samples, maxiter, warm_start
        self.cold_refit_every, self.warm_ftol, self.cold_ftol = cold_refit_every, warm_ftol, \
            cold_ftol
        self.allow_repeats, self.dense_posterior = allow_repeats, dense_posterior
        self.sample_around_best, self.alpha, self.parego_from = sample_around_best, alpha, \
            parego_from
        if ref_point_rule not in REF_POINT_RULES:
            raise ValueError(f"ref_point_rule must be one of {list(REF_POINT_RULES)}, "
                             f"got {ref_point_rule!r}")
        self.lengthscale_prior, self.ref_point_rule = lengthscale_prior, ref_point_rule
        self.cost_aware, self.cost_exponent = cost_aware, check_exponent(cost_exponent)
        #: Seconds spent in the last model fit and acquisition optimisation (wall clock:
        #: ``fit_s``, ``acqf_s``; this process's CPU time: ``fit_cpu_s``, ``acqf_cpu_s``).
        self.last_timing: dict[str, float] = {}
        self._warned: set[str] = set()
        #: The study's transfer sources (:meth:`use_transfer`), else ``None``.
        self.transfer: Any = None

    def use_transfer(self, sources: Sequence[Any], space: SearchSpace) -> None:
        """Learn from earlier studies too (``Study(..., transfer_from=...)``).

        Args:
            sources: :class:`~ecopt.transfer.SourceStudy` list, mapped into ``space``.
            space: The study's space.

        See :mod:`ecopt.samplers._transfer` for the model and the trust rule.
        """
        from ecopt.samplers._transfer import TransferModel

        self.transfer = TransferModel(sources, space, self.objectives) if sources else None

    def describe(self) -> dict[str, Any]:
        keys = ("n_init", "num_restarts", "raw_samples", "mc_samples", "maxiter", "warm_start",
                "cold_refit_every", "warm_ftol", "cold_ftol", "allow_repeats",
                "dense_posterior", "sample_around_best", "alpha", "parego_from",
                "lengthscale_prior", "ref_point_rule", "cost_aware", "cost_exponent",
                "proposal_share", "failures", "init_center")
        return {**super().describe(), **{k: getattr(self, k) for k in keys}}

    def initial_design_size(self, dim: int) -> tuple[int, str]:
        """How many Sobol trials come before the model, and the rule that said so.

        ``n_init`` when given. Otherwise ``min(2 (d + 1), 5)``
        (:data:`INIT_TRIALS`, the size of Ax's design), capped at
        :data:`SHORT_STUDY_FRACTION` of :attr:`planned_trials` (at least
        :data:`MIN_INIT`) when the running ``optimize()`` call says how many
        trials the study will have: without the cap a 9-trial study would
        spend 5 of its trials on Sobol points.

        Args:
            dim: Number of search-space dimensions.

        Returns:
            ``(n_init, rule)``; ``rule`` is recorded in each Sobol trial's
            ``proposal["why"]``.
        """
        if self.n_init is not None:
            return self.n_init, f"n_init={self.n_init}"
        full = min(2 * (dim + 1), INIT_TRIALS)
        size = f"min(2(d+1), {INIT_TRIALS})={full}"
        planned = getattr(self, "planned_trials", None)
        if planned is None:
            return full, f"n_init={size}"
        cap = max(MIN_INIT, int(planned * SHORT_STUDY_FRACTION))
        if cap >= full:
            return full, f"n_init={size}"
        share = "a third" if SHORT_STUDY_FRACTION == 1 / 3 else f"{SHORT_STUDY_FRACTION:g}"
        return cap, f"n_init={cap}: {size} capped at {share} of the {planned} planned trials"

    def _sobol(self, space: SearchSpace, start: int, n: int, why: str,
               seen: set[tuple[float, ...]] | None = None,
               fallback: str | None = None) -> list[Proposal]:
        """Sobol points from index ``start``; with ``seen`` (a fully discrete space
        without repeats), those whose configuration has no trial yet."""
        seed = int(self.seed or 0)
        if seen is None:
            pts = list(enumerate(sobol_points(space.dim, seed, start, n), start))
        else:
            cols = grid(space, encoding(space)) or []
            pts = _discrete.unseen_sobol(space, seed, start, n, seen,
                                         math.prod(len(c) for c in cols))
        info: dict[str, Any] = {"why": why}
        if fallback is not None:
            info["fallback"] = fallback
        out = [Proposal(space.decode(x), "sobol", {"index": i, **info}) for i, x in pts]
        if self.init_center and start == 0 and out and fallback is None:
            # Ax's default design starts at the centre: it replaces Sobol point 0 (unless a
            # later point of a discrete space's design is the same configuration)
            centre = space.decode([CENTRE_U] * space.dim)
            if all(p.params != centre for p in out[1:]):
                out[0] = Proposal(centre, "sobol", {"index": 0, **info, "centre": True})
        return out

    def _avoid(self, space: SearchSpace, records: Sequence[TrialRecord],
               pending: Sequence[Params]) -> set[tuple[float, ...]] | None:
        """Configurations not to repeat (``None``: not enumerable): every one with a trial
        or running; with ``allow_repeats``, the failed and running ones only."""
        if grid(space, encoding(space)) is None:
            return None
        if self.allow_repeats:
            from ecopt.samplers._optimize import avoided

            return avoided(space, records, pending, True, self.failures != "ignore")
        return seen_keys(space, records, pending)

    def propose(self, space: SearchSpace, records: Sequence[TrialRecord],
                pending: Sequence[Params], n: int) -> list[Proposal]:
        n_init, _ = self.initial_design_size(space.dim)
        complete = [r for r in records if r.state is TrialState.COMPLETE]
        if space.dim == 0:
            return [Proposal(space.decode([]), "fixed", {}) for _ in range(n)]
        if self.transfer is not None:
            return self._propose_transfer(space, records, complete, pending, n, n_init)
        return self._propose_cold(space, records, complete, pending, n)

    def _propose_cold(self, space: SearchSpace, records: Sequence[TrialRecord],
                      complete: Sequence[TrialRecord], pending: Sequence[Params], n: int
                      ) -> list[Proposal]:
        """What a study without transfer sources proposes: the initial design, then the model
        (economy proposals by ``proposal_share``), Sobol points where the model cannot."""
        started = len(records) + len(pending)
        n_init, rule = self.initial_design_size(space.dim)
        if started < n_init:
            k = min(n, n_init - started)
            out = self._sobol(space, started, k, f"initial design ({rule})",
                              self._avoid(space, records, pending))
            if k < n:
                out += self._propose_cold(space, records, complete,
                                          [*pending, *[p.params for p in out]], n - k)
            return out
        return self._model_or_sobol(space, records, complete, pending, n)

    def _model_or_sobol(self, space: SearchSpace, records: Sequence[TrialRecord],
                        complete: Sequence[TrialRecord], pending: Sequence[Params], n: int
                        ) -> list[Proposal]:
        """The single-task model's proposals; Sobol points before 2 complete trials, or
        when the model fails (with a warning)."""
        started = len(records) + len(pending)
        if len(complete) < 2:
            return self._sobol(space, started, n, "fewer than 2 complete trials to model",
                               self._avoid(space, records, pending))
        try:
            return self._propose_bo(space, records, complete, pending, n)
        except Exception as exc:  # noqa: BLE001 - never kill a study over a model fit
            warnings.warn(f"{self.name} could not propose, not even on BoTorch's own path "
                          f"({_why(exc)}): {n} Sobol point(s) instead", FallbackWarning,
                          stacklevel=4)
            log.warning("qLogNEHVI proposal failed (%s); using Sobol points instead", _why(exc))
            return self._sobol(space, started, n, f"model fallback: {_why(exc)}",
                               self._avoid(space, records, pending), fallback=_why(exc))

    def _propose_transfer(self, space: SearchSpace, records: Sequence[TrialRecord],
                          complete: Sequence[TrialRecord], pending: Sequence[Params], n: int,
                          n_init: int) -> list[Proposal]:
        """Proposals of a study with transfer sources (:mod:`ecopt.samplers._transfer`):
        the trusted sources' Pareto sets first (the initial design), then the multi-task
        model while a source is in it; with none in it, what a study without sources
        proposes (:meth:`_propose_cold`), the sources' notes added."""
        from ecopt.samplers._transfer import TRUST_MIN, public

        tm = self.transfer
        started = len(records) + len(pending)
        trust = tm.trust(complete)
        note = {"sources": public(trust)}

        def key(params: Params) -> tuple[float, ...]:
            # a proposal's params are decode(encode(.)) of what was asked; compare the
            # same way, so that a source point counts as taken after a round trip
            return tuple(space.encode(space.decode(space.encode(params))))

        taken = {key(r.params) for r in records} | {key(p) for p in pending}
        out: list[Proposal] = []
        if started < n_init or len(complete) < 2:
            for k, params in tm.design_points(trust):
                if len(out) == n:
                    break
                kp = key(params)
                if kp in taken:
                    continue
                taken.add(kp)
                out.append(Proposal(space.decode(space.encode(params)), "transfer",
                                    {"why": "initial design: a source's Pareto set",
                                     "source": tm.sources[k].label,
                                     "transfer": note}))
        if len(out) == n:
            return out
        more = [*pending, *[p.params for p in out]]
        left = n - len(out)
        now = started + len(out)
        used = tm.in_model(trust)
        trusted = [e for e in trust if e["trust"] is None or e["trust"] >= TRUST_MIN]
        if not used:
            # No source in the model. None trusted: what a study without sources proposes
            # from here. One trusted (its Pareto set stood in for the Sobol design): the
            # model of the new trials alone from 2 complete trials on.
            rest = self._model_or_sobol(space, records, complete, more, left) if trusted \
                else self._propose_cold(space, records, complete, more, left)
            return out + [Proposal(p.params, p.proposed_by, {**p.info, "transfer": note})
                          for p in rest]
        if not complete or (not trusted and now < n_init):
            why = "initial design (sources not trusted)" if complete else \
                "no complete trial to model"
            sob = self._sobol(space, now, left, why, self._avoid(space, records, more))
            return out + [Proposal(p.params, p.proposed_by, {**p.info, "transfer": note})
                          for p in sob]
        note = {**note, "pooled": [tm.sources[k].label for k in used]}
        try:
            from ecopt.samplers._proposal import model_based

            U, info, off, self.last_timing = model_based(
                self, space, records, complete, more, left,
                tasks=[tm.sources[k].records for k in used])
        except Exception as exc:  # noqa: BLE001 - never kill a study over a model fit
            warnings.warn(f"{self.name} could not propose with transfer sources "
                          f"({_why(exc)}): {left} Sobol point(s) instead", FallbackWarning,
                          stacklevel=3)
            sob = self._sobol(space, now, left, f"model fallback: {_why(exc)}",
                              self._avoid(space, records, more), fallback=_why(exc))
            return out + [Proposal(p.params, p.proposed_by, {**p.info, "transfer": note})
                          for p in sob]
        self._note_off(off)
        if off:
            info["fast_path_off"] = dict(sorted(off.items()))
        for i, u in enumerate(U):
            info_i = _per_point(info, i)
            info_i["transfer"] = note
            out.append(Proposal(space.decode(u), self.name, info_i))
        return out

    def _note_off(self, off: dict[str, str]) -> None:
        """Warn once per study (sampler) for each fast path that is off."""
        for name, why in off.items():
            if name not in self._warned:
                self._warned.add(name)
                warnings.warn(f"{self.name}: fast path {name!r} is off ({why}); proposals "
                              "take BoTorch's public path there (slower, same model)",
                              FallbackWarning, stacklevel=4)

    def _propose_bo(self, space: SearchSpace, records: Sequence[TrialRecord],
                    complete: Sequence[TrialRecord], pending: Sequence[Params], n: int
                    ) -> list[Proposal]:
        from ecopt.samplers._proposal import model_based

        economy = self.economy(records)
        settings = economy["settings"] if economy is not None and economy["active"] else None
        U, info, off, self.last_timing = model_based(self, space, records, complete, pending, n,
                                                     settings)
        if economy is not None:
            info["economy"] = economy
            for key in ("hyperparameters", "priors"):
                if key in info:
                    info["economy"] = {**info["economy"], key: info.pop(key)}
        from ecopt.samplers._botorch_compat import FUSED_KERNEL

        info["fused_kernel"] = FUSED_KERNEL
        self._note_off(off)
        if off:
            info["fast_path_off"] = dict(sorted(off.items()))
        out = []
        for i, u in enumerate(U):
            note = _per_point(info, i)
            out.append(Proposal(space.decode(u), self.name, note))
        return out

    def economy(self, records: Sequence[TrialRecord]) -> dict[str, Any] | None:
        """Whether the next model proposal is an economy one (``proposal_share``).

        A pure function of the history. The cost of a full proposal is the
        median cost of the latest :data:`ECONOMY_WINDOW` full model proposals
        of this sampler (``basis: "measured"``; economy ones are left out, so
        the decision does not flip back once they are cheap). Before any full
        one it is predicted: :data:`FULL_OVER_ECONOMY` times the median cost of
        the latest economy proposals that optimised their hyperparameters
        (``basis: "predicted"``); the very first model proposal is an economy
        one (``basis: "first"``), so cheap trials never pay for a full one.
        A proposal's cost is its search window less a stopping-rule evaluation
        billed to it (``convergence_check_j``/``_s``). That cost is compared with
        the median cost of the latest complete (or pruned, at their partial cost)
        trials, in joules when every one of them read energy, else in seconds.

        Returns:
            The notes kept in ``proposal["economy"]``, or ``None`` without
            ``proposal_share``, before a complete trial, or when the costs to
            compare were not read.
        """
        if self.proposal_share is None:
            return None
        ordered = sorted(records, key=lambda r: r.number)
        done = [r for r in ordered if r.state is TrialState.COMPLETE][-ECONOMY_WINDOW:]
        if not done:
            return None
        # this sampler's model proposals (their "economy" notes), those with a metered cost
        model = [(r, r.proposal.get("economy") or {}) for r in ordered
                 if r.proposed_by == self.name and isinstance(r.proposal, dict)]
        metered = [(r, e) for r, e in model if isinstance(r.proposal.get("search"), dict)]
        full = [r for r, e in metered if not e.get("active")]
        refits = [r for r, e in metered
                  if e.get("active") and e.get("hyperparameters") == "optimised"]
        if not full and not refits:
            if any("economy" in r.proposal for r, _ in model):
                return None  # model proposals whose costs were not read: no basis
            return {"active": True, "basis": "first", "proposal_share": self.proposal_share,
                    "settings": self._economy_settings(ECONOMY_REFIT_EVERY[0])}
        basis, scale = ("measured", 1.0) if full else ("predicted", FULL_OVER_ECONOMY)
        sample = (full or refits)[-ECONOMY_WINDOW:]
        for unit, key in (("J", "energy_j"), ("s", "duration_s")):
            prop = [_proposal_cost(r.proposal["search"], key) for r in sample]
            trial = [_cost_of(r, key) for r in done]
            if all(v is not None for v in prop + trial):
                break
        else:
            return None
        p = scale * _median([v for v in prop if v is not None])
        t = _median([v for v in trial if v is not None])
        ratio = p / t
        active = ratio > self.proposal_share
        out: dict[str, Any] = {"active": active, "basis": basis, "ratio": round(ratio, 4),
                               "proposal_share": self.proposal_share, "unit": unit,
                               "full_proposal": round(p, 6), "trial": round(t, 6)}
        if active:
            lo, hi = ECONOMY_REFIT_EVERY
            q = ratio / self.proposal_share  # inf for a share near 0: the longest interval
            out["settings"] = self._economy_settings(
                hi if not math.isfinite(q) or q >= hi else max(lo, math.ceil(q)))
        return out

    def _economy_settings(self, refit_every: int) -> dict[str, Any]:
        """An economy proposal's settings (:data:`ECONOMY`; a user's lower raw_samples and
        explicit ``cold_ftol`` stay)."""
        return {"raw_samples": min(ECONOMY["raw_samples"], self.raw_samples),
                "fit_maxiter": ECONOMY["fit_maxiter"], "mc_samples": ECONOMY["mc_samples"],
                "cold_ftol": ECONOMY["cold_ftol"] if self.cold_ftol == "auto" else self.cold_ftol,
                "refit_every": refit_every}

    def improvement_bound(self, space: SearchSpace, records: Sequence[TrialRecord],
                          beta: float | None = None, delta: float = 0.1,
                          n_candidates: int = 1024) -> Any:
        """Upper bound on the hypervolume still to gain, and the noise level, by this
        sampler's GPs (the stopping rule's numbers: :mod:`ecopt.samplers._regret`).

        Returns:
            A :class:`~ecopt.samplers._regret.Bound`.

        Raises:
            ValueError: with fewer than 2 complete trials with every objective.
        """
        from ecopt.samplers._regret import improvement_bound

        return improvement_bound(self, space, records, beta, delta, n_candidates)


class QNEHVISampler(QLogNEHVISampler):
    """The non-log qNEHVI (as named in the ECOpt paper); same pipeline otherwise."""

    name = "qnehvi"
    log_hvi = False
