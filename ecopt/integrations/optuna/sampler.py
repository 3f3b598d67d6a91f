"""``EcoptSampler``: ecopt's qLogNEHVI proposing inside an Optuna study.

The only change to an Optuna script is the sampler::

    study = optuna.create_study(directions=["maximize", "maximize"], sampler=EcoptSampler())

How Optuna's pieces map onto ecopt's sampler
(:meth:`ecopt.samplers.QLogNEHVISampler.propose`):

* the **search space** is Optuna's intersection search space of the complete
  trials (as ``GPSampler`` infers it), in the order the first complete trial
  suggested its parameters; the first trial is Sobol point 0 of the design,
  parameter by parameter; parameters outside the space (conditional ones) go to
  the independent sampler;
* **finished trials** become ecopt records (numbers, params, values named
  ``objective_<i>`` with Optuna's directions, phases metered by
  :func:`~ecopt.integrations.optuna.metered`); failed and pruned trials are
  placed where they were proposed; a failed trial whose reason is an
  out-of-memory error is *infeasible*, so the model learns where configurations
  do not fit;
* **running trials** are pending points: each trial's proposal is written to
  its system attributes, so other threads and processes sharing the storage
  see it;
* **constraints** (``trial.set_constraint``, or ``constraints_func=`` as in
  Optuna's samplers; feasible when every value is ``<= 0``) become outcome
  constraints ``constraint_<key> <= 0``, one GP each.

Proposals are a pure function of the seed and the history (ecopt's contract):
two studies with the same seed and the same trials propose the same points, in
this process or another. ``reseed_rng()`` (which Optuna calls for each trial of
``optimize(n_jobs > 1)``) draws a fresh seed from the operating system, so the
random parts of the next proposals change: the Sobol design, the first random
trials and the acquisition's candidate sets. The sampler pickles and deep-copies
(its lock and search-space cache are rebuilt), and a copy proposes what the
original would.

Within a process, proposals are made one at a time (Optuna's ``n_jobs`` threads
share the sampler), so each sees the previous one as pending. Across processes
the initial design is indexed by the trial number, which the storage hands out
once: two workers never draw the same Sobol point. A model proposal is a
function of the history, so two processes that propose at the same moment from
the same history would propose the same point: after writing its proposal, a
trial waits (briefly, bounded) for the other processes' trials that are still
proposing, and when two coincide the higher-numbered one proposes again with
the other's point as pending.
"""

from __future__ import annotations

import json
import math
import random
import threading
import time
import zlib
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import optuna
from optuna.samplers import BaseSampler
from optuna.search_space import IntersectionSearchSpace
from optuna.trial import TrialState as OState

from ecopt._types import Params
from ecopt.integrations.optuna._convert import (
    PROPOSAL_KEY,
    PROPOSED_BY_KEY,
    RELATIVE_PARAMS_KEY,
    CONSTRAINT_PREFIX,
    Codec,
    constraint_values,
    sampler_space,
    trial_record,
)
from ecopt.objective import Constraint, Objective
from ecopt.samplers.base import Proposal
from ecopt.samplers.qnehvi import CENTRE_U, QLogNEHVISampler
from ecopt.samplers.random import sobol_points
from ecopt.space import SearchSpace
from ecopt.trial import TrialRecord

if TYPE_CHECKING:
    from optuna.distributions import BaseDistribution
    from optuna.study import Study
    from optuna.trial import FrozenTrial

__all__ = ["EcoptSampler"]

#: Optuna's system attribute for constraint values (the list form of ``constraints_func``).
_CONSTRAINTS_KEY = "constraints"
#: Proposal notes kept in a trial's system attributes (small; the rest stays in memory).
_PROPOSAL_NOTES = ("why", "fallback", "n_observations", "n_infeasible", "ref_point", "index")


class _TrialNumberedQLogNEHVI(QLogNEHVISampler):
    """ecopt's qLogNEHVI whose Sobol points are indexed by Optuna's trial number.

    :class:`~ecopt.samplers.QLogNEHVISampler` gives the ``k``-th trial it sees
    (records plus pending) the ``k``-th Sobol point. Two Optuna workers asking at
    the same moment see the same history, so they would draw the same point;
    their trial numbers, handed out once by the storage, differ. In a sequential
    study the number and the count agree, so the points are ``ecopt.Study``'s.
    """

    #: The Optuna trial number of the proposal being made (``None``: the count).
    design_index: int | None = None

    def _sobol(self, space: SearchSpace, start: int, n: int, why: str,
               seen: set[tuple[float, ...]] | None = None,
               fallback: str | None = None) -> list[Proposal]:
        if self.design_index is not None:
            start = self.design_index
        return super()._sobol(space, start, n, why, seen, fallback)


#: How many times a trial proposes again when another worker holds its point (then it
#: keeps the last proposal: the others are still pending points of its model).
MAX_SETTLE_ROUNDS = 4


class EcoptSampler(BaseSampler):
    """An Optuna sampler that proposes with ecopt's qLogNEHVI (multi-objective BO).

    Args:
        seed: Seed of the proposals (default 0: ecopt samplers are deterministic;
            workers sharing a storage are kept apart by their trial numbers and
            pending trials, not by different seeds). ``reseed_rng()`` replaces
            it with a fresh one from the operating system.
        constraints_func: As in Optuna's samplers (deprecated there in favour of
            ``trial.set_constraint``, which works too): ``FrozenTrial ->
            sequence of floats``, evaluated after each complete or pruned trial;
            a trial is feasible when every value is ``<= 0``.
        thresholds: Per objective, the worst value still worth having (ecopt's
            ``Objective.threshold``: together the hypervolume reference point);
            ``None`` (default) infers one from the data.
        independent_sampler: Samples parameters outside the relative search
            space (default: uniform random, seeded by the seed, the trial number and
            the parameter name, so it is reproducible and parallel workers differ).
        warn_independent_sampling: Log a warning when a parameter is sampled
            independently once the model is in charge.
        planned_trials: How many trials the study will have (what
            ``study.optimize(n_trials=...)`` says; Optuna does not tell its
            sampler). As in ``ecopt.Study``, a short study then spends at most a
            third of them (at least 3) on the Sobol design instead of
            ``min(2 (d + 1), 5)``. ``None`` (default): ``min(2 (d + 1), 5)``, or
            ``n_init``.
        **options: Passed to :class:`ecopt.samplers.QLogNEHVISampler`
            (``n_init``, ``cost_aware``, ``num_restarts``, ``raw_samples``,
            ``ref_point_rule``...). With ``cost_aware=True`` the cost is the
            energy that :func:`~ecopt.integrations.optuna.metered` recorded.
            ``proposal_share`` must be ``None`` (the default here): Optuna does
            not meter its sampler's proposals, so every proposal is a full one.

    Raises:
        ValueError: for bad options (the message of ``QLogNEHVISampler``; a
            ``proposal_share`` other than ``None``), a
            ``thresholds`` entry that is not a finite number, or (when a trial
            first asks) a study with fewer than two objectives: qLogNEHVI is a
            multi-objective acquisition; use ``optuna.samplers.GPSampler`` for
            one objective.

    Example:
        >>> import optuna
        >>> from ecopt.integrations.optuna import EcoptSampler, metered
        >>> def objective(trial):
        ...     lr = trial.suggest_float("lr", 1e-4, 1e-1, log=True)
        ...     model = train(lr)
        ...     with metered(trial, "inference", samples=len(X_test)) as phase:
        ...         acc = evaluate(model)
        ...     return acc, phase.samples_per_joule
        >>> study = optuna.create_study(directions=["maximize", "maximize"],
        ...                             sampler=EcoptSampler(seed=0))
        >>> study.optimize(objective, n_trials=30)
    """

    def __init__(self, seed: int | None = 0, *,
                 constraints_func: Callable[[FrozenTrial], Sequence[float]] | None = None,
                 thresholds: Sequence[float | None] | None = None,
                 independent_sampler: BaseSampler | None = None,
                 warn_independent_sampling: bool = True, planned_trials: int | None = None,
                 **options: Any) -> None:
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)
                                 or not 0 <= seed < 2**63):
            raise ValueError(f"seed must be an integer in [0, 2**63) or None, got {seed!r}")
        if "seed" in options:
            raise ValueError("pass seed once, as EcoptSampler(seed=...)")
        if constraints_func is not None and not callable(constraints_func):
            raise ValueError(f"constraints_func must be callable as constraints_func(trial) "
                             f"-> sequence of floats, got {constraints_func!r}")
        if thresholds is not None:
            thresholds = list(thresholds)
            for i, t in enumerate(thresholds):
                if t is not None and (isinstance(t, bool) or not isinstance(t, (int, float))
                                      or not math.isfinite(t)):
                    raise ValueError(f"thresholds[{i}] must be a finite number or None, got {t!r}")
        if planned_trials is not None and (isinstance(planned_trials, bool) or not isinstance(
                planned_trials, int) or planned_trials < 1):
            raise ValueError(f"planned_trials must be None or an integer >= 1, got "
                             f"{planned_trials!r}")
        self.seed = 0 if seed is None else int(seed)
        #: The seed proposals use now: ``seed`` until ``reseed_rng()`` draws another.
        self._seed_now = self.seed
        # Optuna does not meter a sampler's proposals, so there is no proposal cost for
        # the economy rule to weigh: full proposals always.
        if options.get("proposal_share") is not None:
            raise ValueError(
                "EcoptSampler makes full proposals: the economy rule weighs each proposal's "
                "metered cost, and Optuna does not meter its sampler (every proposal would "
                "stay a first, unmeasured economy one); leave proposal_share out or None, "
                f"got proposal_share={options['proposal_share']!r}")
        self._inner = _TrialNumberedQLogNEHVI(seed=self.seed, **{  # validates options
            "proposal_share": None, **options})
        self._inner.planned_trials = planned_trials
        self._options = dict(options)
        self._constraints_func = constraints_func
        self._thresholds = thresholds
        self._independent = independent_sampler
        self._warn_independent = bool(warn_independent_sampling)
        self._space = IntersectionSearchSpace()
        # One proposal at a time in this process: a thread that proposes next sees the
        # previous proposal as a pending point (Optuna's n_jobs threads share the sampler).
        self._lock = threading.Lock()
        #: Numbers of the trials this process started (``before_trial``).
        self._mine: set[int] = set()

    # -- pickling (joblib.dump(study), copy.deepcopy, processes) ----------------------------
    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        # A lock cannot be pickled, and the search-space cache is rebuilt from the study.
        del state["_lock"], state["_space"], state["_mine"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._space = IntersectionSearchSpace()
        self._lock = threading.Lock()
        self._mine = set()

    # -- what the study shows ----------------------------------------------------------
    @property
    def inner(self) -> QLogNEHVISampler:
        """The ecopt sampler that proposes (its ``last_timing``, ``describe()``...)."""
        return self._inner

    def __repr__(self) -> str:
        opts = "".join(f", {k}={v!r}" for k, v in sorted(self._options.items()))
        return f"EcoptSampler(seed={self.seed}{opts})"

    def reseed_rng(self) -> None:
        """Draw a fresh seed from the operating system for the next proposals.

        Optuna calls it for every trial of ``optimize(n_jobs > 1)``, so that
        parallel workers differ (their proposals are then not reproducible, as
        with Optuna's own samplers). The Sobol design, the random first trials and
        the acquisition's candidate sets change; ``seed`` still says what was
        given.
        """
        self._seed_now = random.SystemRandom().randrange(2**32)
        self._inner.seed = self._seed_now
        if self._independent is not None:
            self._independent.reseed_rng()

    # -- Optuna's sampler API ------------------------------------------------------------
    def infer_relative_search_space(self, study: Study, trial: FrozenTrial
                                    ) -> dict[str, BaseDistribution]:
        n_obj = len(study.directions)
        if n_obj < 2:
            raise ValueError(
                f"EcoptSampler proposes with qLogNEHVI, a multi-objective acquisition: it needs "
                f"a study with at least 2 directions, got directions="
                f"{[d.name.lower() for d in study.directions]}. Use "
                "optuna.samplers.GPSampler for a single objective, or add one (e.g. samples "
                "per joule from ecopt.integrations.optuna.metered)")
        if self._thresholds is not None and len(self._thresholds) != n_obj:
            raise ValueError(f"thresholds must have one entry per objective ({n_obj}), got "
                             f"{len(self._thresholds)}: {self._thresholds}")
        space = {name: d for name, d in self._space.calculate(study).items() if not d.single()}
        # Optuna sorts the names; ecopt's dimensions follow the order in which the first
        # complete trial suggested them (an ecopt.Study's space is usually written in that
        # order), so the first trial's Sobol coordinates (sample_independent) line up.
        first = study._get_trials(deepcopy=False, states=(OState.COMPLETE,), use_cache=True)
        order = list(min(first, key=lambda t: t.number).distributions) if first else []
        return {**{n: space[n] for n in order if n in space}, **space}

    def sample_relative(self, study: Study, trial: FrozenTrial,
                        search_space: dict[str, BaseDistribution]) -> dict[str, Any]:
        storage = study._storage
        if not search_space:
            # Said at once, so a worker proposing beside this trial does not wait for it.
            storage.set_trial_system_attr(trial._trial_id, RELATIVE_PARAMS_KEY, {})
            if trial.number == 0 and self._independent is None \
                    and "fixed_params" not in trial.system_attrs:
                storage.set_trial_system_attr(trial._trial_id, PROPOSED_BY_KEY, "sobol")
                centre = self._inner.init_center
                where = "the centre of the space" if centre else "Sobol point 0"
                first: dict[str, Any] = {"why": f"initial design: the first trial ({where}, "
                                                "each parameter as the trial suggests it)",
                                         "index": 0}
                if centre:
                    first["centre"] = True
                storage.set_trial_system_attr(trial._trial_id, PROPOSAL_KEY, first)
            return {}
        with self._lock:
            space, codecs = sampler_space(search_space)
            for _ in range(MAX_SETTLE_ROUNDS):
                # A proposal made again may meet a third worker's: settle each one.
                t0 = time.perf_counter()
                params, note = self._propose(study, trial, space, codecs)
                storage.set_trial_system_attr(trial._trial_id, RELATIVE_PARAMS_KEY, params)
                if not self._settle(study, trial, params, time.perf_counter() - t0):
                    break
            storage.set_trial_system_attr(trial._trial_id, PROPOSED_BY_KEY, note[0])
            storage.set_trial_system_attr(trial._trial_id, PROPOSAL_KEY, note[1])
        return params

    def _settle(self, study: Study, me: FrozenTrial, params: dict[str, Any],
                took_s: float) -> bool:
        """Whether another trial holds this very proposal (then propose again, with it
        as pending or as an observation).

        Another process may be proposing from the same history right now. Of two
        trials that hold one point, the higher-numbered one moves:

        * a **lower-numbered** trial holding the point: this one moves. Running
          lower-numbered trials of other processes that have not written their
          proposal yet are waited for (at most four times this proposal's time +
          2 s, 30 s in all: on a loaded machine the other may be slower);
        * a **higher-numbered** trial holding the point: it moves if it sees this
          one, but it may have stopped waiting (this proposal took longer than its
          wait). So this trial waits until the other has said its final proposal
          (``ecopt:proposed_by``, written after its last params), and moves when
          that is still this point.

        This process's own lower-numbered trials are not waited for: they propose
        under the same lock, and later ones see this point as pending.
        """
        deadline = time.perf_counter() + min(30.0, 4 * took_s + 2.0)
        while True:
            # Finished ones too: the other trial may have run and ended meanwhile.
            others = [t for t in study._get_trials(deepcopy=False, use_cache=False)
                      if t.number != me.number and t.state is not OState.WAITING]
            same = [t for t in others if t.system_attrs.get(RELATIVE_PARAMS_KEY) == params]
            if any(t.number < me.number or PROPOSED_BY_KEY in t.system_attrs for t in same):
                return True
            proposing = [t for t in others if t.number < me.number
                         and t.state is OState.RUNNING and t.number not in self._mine
                         and RELATIVE_PARAMS_KEY not in t.system_attrs]
            if (not proposing and not same) or time.perf_counter() > deadline:
                return False
            time.sleep(0.05)

    def sample_independent(self, study: Study, trial: FrozenTrial, param_name: str,
                           param_distribution: BaseDistribution) -> Any:
        if self._warn_independent:
            complete = study._get_trials(deepcopy=False, states=(OState.COMPLETE,),
                                         use_cache=True)
            n_init = self._inner.n_init
            if complete and len(complete) >= (n_init if n_init is not None else 1):
                optuna.logging.get_logger("ecopt").warning(
                    "Trial %d: parameter %r is sampled by %s, not EcoptSampler: it is not in "
                    "every complete trial with the same distribution (a conditional or "
                    "changed parameter)", trial.number, param_name,
                    type(self._independent).__name__ if self._independent else "random sampling")
        if self._independent is None:
            if trial.number == 0 and not param_distribution.single():
                return self._first_point(trial, param_name, param_distribution)
            # Seeded by (seed, trial number, name): reproducible, and workers that sample
            # their first trials at the same time still draw different points.
            key = f"{self._seed_now}:{trial.number}:{param_name}".encode()
            rs = optuna.samplers.RandomSampler(seed=zlib.crc32(key))
            return rs.sample_independent(study, trial, param_name, param_distribution)
        return self._independent.sample_independent(study, trial, param_name,
                                                    param_distribution)

    def _first_point(self, trial: FrozenTrial, param_name: str,
                     distribution: BaseDistribution) -> Any:
        """The first trial's value of a parameter: the centre of its range
        (``init_center``, the default, as an ``ecopt.Study`` starts), else Sobol
        point 0 of the design.

        Before any trial completes there is no search space, so Optuna asks for
        each parameter alone. Coordinate ``j`` of the scrambled Sobol point 0
        depends on the seed and ``j`` only (not on the dimension), so the ``j``-th
        parameter the trial suggests gets it: the first trial is the point an
        ``ecopt.Study`` starts with (its space written in suggestion order), and
        the design's later points (Sobol indices 1, 2...) stay spread around it.
        """
        j = sum(not d.single() for d in trial.distributions.values())  # as the space has them
        u = CENTRE_U if self._inner.init_center \
            else float(sobol_points(j + 1, self._seed_now, 0, 1)[0][j])
        space, codecs = sampler_space({param_name: distribution})
        return codecs[param_name].to_optuna(space.decode([u])[param_name])

    def before_trial(self, study: Study, trial: FrozenTrial) -> None:
        self._mine.add(trial.number)  # a trial of this process (Optuna calls it for each)
        if self._independent is not None:
            self._independent.before_trial(study, trial)

    def after_trial(self, study: Study, trial: FrozenTrial, state: OState,
                    values: Sequence[float] | None) -> None:
        if self._constraints_func is not None and state in (OState.COMPLETE, OState.PRUNED):
            con = self._constraints_func(trial)
            try:
                cons = tuple(float(c) for c in con)
            except TypeError:
                raise ValueError(f"constraints_func must return a sequence of floats, got "
                                 f"{con!r}") from None
            if any(math.isnan(c) for c in cons):
                raise ValueError(f"constraints_func returned NaN for trial {trial.number}: "
                                 f"{cons}; constraint values must be numbers (<= 0 feasible)")
            study._storage.set_trial_system_attr(trial._trial_id, _CONSTRAINTS_KEY, cons)
        if self._independent is not None:
            self._independent.after_trial(study, trial, state, values)

    # -- the proposal ------------------------------------------------------------------
    def _propose(self, study: Study, trial: FrozenTrial, space: SearchSpace,
                 codecs: dict[str, Codec]) -> tuple[dict[str, Any], tuple[str, dict[str, Any]]]:
        trials = study._get_trials(deepcopy=False, use_cache=False)
        names = [f"objective_{i}" for i in range(len(study.directions))]
        records, pending, constraint_keys = self._history(trials, trial, space, codecs, names)
        thresholds = self._thresholds or [None] * len(names)
        objectives = [Objective(n, "min" if d == optuna.study.StudyDirection.MINIMIZE
                                else "max", t)
                      for n, d, t in zip(names, study.directions, thresholds)]
        constraints = [Constraint(f"{CONSTRAINT_PREFIX}{k}", "<=", 0.0) for k in constraint_keys]
        self._inner.bind(objectives, constraints, self._seed_now)
        self._inner.design_index = trial.number
        proposal = self._inner.propose(space, records, pending, 1)[0]
        params = {n: codecs[n].to_optuna(v) for n, v in proposal.params.items()}
        note = {k: proposal.info[k] for k in _PROPOSAL_NOTES if k in proposal.info}
        return params, (proposal.proposed_by, json.loads(json.dumps(note, default=str)))

    def _history(self, trials: Sequence[FrozenTrial], me: FrozenTrial, space: SearchSpace,
                 codecs: dict[str, Codec], names: Sequence[str]
                 ) -> tuple[list[TrialRecord], list[Params], list[str]]:
        """Finished trials as records, running ones as pending params, constraint keys.

        A running, failed or pruned trial is placed where it was proposed (its
        ``ecopt:relative_params``, with what it suggested over them), so a trial
        that raised before it suggested every parameter is still a failure at
        that configuration (never proposed again). A complete trial whose params do
        not cover the search space (a conditional parameter it never suggested, a
        value from another distribution) is left out: the model cannot place it.
        """
        def params_of(values: dict[str, Any]) -> Params | None:
            out: Params = {}
            for n, c in codecs.items():
                if n not in values:
                    return None
                try:
                    out[n] = space[n].validate(c.to_ecopt(values[n]), name=n)
                except (ValueError, TypeError):
                    return None
            return out

        def relative_of(t: FrozenTrial) -> dict[str, Any]:
            relative = t.system_attrs.get(RELATIVE_PARAMS_KEY)
            return relative if isinstance(relative, dict) else {}

        records: list[TrialRecord] = []
        pending: list[Params] = []
        keys: list[str] = []
        for t in sorted(trials, key=lambda t: t.number):
            if t.number == me.number:
                continue
            if t.state is OState.RUNNING:
                p = params_of({**relative_of(t), **t.params})
                if p is not None:
                    pending.append(p)
                continue
            rec = trial_record(t, names, lambda ft: params_of(
                ft.params if ft.state is OState.COMPLETE else {**relative_of(ft), **ft.params}))
            if rec is None:  # WAITING (enqueued, not started) or params outside the space
                continue
            if t.state is OState.COMPLETE:
                keys += [k for k in constraint_values(t) if k not in keys]
            records.append(rec)
        return records, pending, keys
