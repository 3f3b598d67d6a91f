"""``EcoptSampler``: ecopt's qLogNEHVI proposing inside an Optuna study.

The only change to an Optuna script is the sampler::

    study = optuna.create_study(directions=["maximize", "maximize"], sampler=EcoptSampler())

How Optuna's pieces map onto ecopt's sampler
(:meth:`ecopt.samplers.QLogNEHVISampler.propose`):

* the **search space** is Optuna's intersection search space of the complete
  trials (as ``GPSampler`` infers it); parameters outside it (the first trial,
  conditional ones) go to the independent sampler;
* **finished trials** become ecopt records (numbers, params, values named
  ``objective_<i>`` with Optuna's directions, phases metered by
  :func:`~ecopt.integrations.optuna.metered`); a failed trial whose reason is an
  out-of-memory error is *infeasible*, so the model learns where configurations
  do not fit;
* **running trials** are pending points: each trial's proposal is written to
  its system attributes, so other threads and processes sharing the storage
  see it;
* **constraints** (``trial.set_constraint``, or ``constraints_func=`` as in
  Optuna's samplers; feasible when every value is ``<= 0``) become outcome
  constraints ``constraint_<key> <= 0``, one GP each.

Proposals are a pure function of the seed and the history (ecopt's contract):
two studies with the same seed and the same trials propose the same points, and
``reseed_rng`` changes nothing but a user-given independent sampler. Within a
process, proposals are made one at a time (Optuna's ``n_jobs`` threads share the
sampler), so each sees the previous one as pending. Two processes that propose
at the same moment from the same history would propose the same point: after
writing its proposal, a trial waits (briefly, bounded) for lower-numbered
running trials that are still proposing, and proposes again with the other's
point as pending when they coincide.
"""

from __future__ import annotations

import json
import math
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
from ecopt.samplers.qnehvi import QLogNEHVISampler
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


class EcoptSampler(BaseSampler):
    """An Optuna sampler that proposes with ecopt's qLogNEHVI (multi-objective BO).

    Args:
        seed: Seed of the proposals (default 0: ecopt samplers are deterministic;
            workers sharing a storage are kept apart by their pending trials,
            not by different seeds).
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
        **options: Passed to :class:`ecopt.samplers.QLogNEHVISampler`
            (``n_init``, ``cost_aware``, ``num_restarts``, ``raw_samples``,
            ``ref_point_rule``...). With ``cost_aware=True`` the cost is the
            energy that :func:`~ecopt.integrations.optuna.metered` recorded.

    Raises:
        ValueError: for bad options (the message of ``QLogNEHVISampler``), a
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
                 warn_independent_sampling: bool = True, **options: Any) -> None:
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
        self.seed = 0 if seed is None else int(seed)
        self._inner = QLogNEHVISampler(seed=self.seed, **options)  # validates the options
        self._options = dict(options)
        self._constraints_func = constraints_func
        self._thresholds = thresholds
        self._independent = independent_sampler
        self._warn_independent = bool(warn_independent_sampling)
        self._space = IntersectionSearchSpace()
        # One proposal at a time in this process: a thread that proposes next sees the
        # previous proposal as a pending point (Optuna's n_jobs threads share the sampler).
        self._lock = threading.Lock()

    # -- what the study shows ----------------------------------------------------------
    @property
    def inner(self) -> QLogNEHVISampler:
        """The ecopt sampler that proposes (its ``last_timing``, ``describe()``...)."""
        return self._inner

    def __repr__(self) -> str:
        opts = "".join(f", {k}={v!r}" for k, v in sorted(self._options.items()))
        return f"EcoptSampler(seed={self.seed}{opts})"

    def reseed_rng(self) -> None:
        # ecopt's proposals depend on seed and history only; nothing of ours to reseed.
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
        return {name: d for name, d in self._space.calculate(study).items() if not d.single()}

    def sample_relative(self, study: Study, trial: FrozenTrial,
                        search_space: dict[str, BaseDistribution]) -> dict[str, Any]:
        storage = study._storage
        if not search_space:
            # Said at once, so a worker proposing beside this trial does not wait for it.
            storage.set_trial_system_attr(trial._trial_id, RELATIVE_PARAMS_KEY, {})
            return {}
        with self._lock:
            space, codecs = sampler_space(search_space)
            t0 = time.perf_counter()
            params, note = self._propose(study, trial, space, codecs)
            storage.set_trial_system_attr(trial._trial_id, RELATIVE_PARAMS_KEY, params)
            if self._settle(study, trial, params, time.perf_counter() - t0):
                params, note = self._propose(study, trial, space, codecs)
                storage.set_trial_system_attr(trial._trial_id, RELATIVE_PARAMS_KEY, params)
            storage.set_trial_system_attr(trial._trial_id, PROPOSED_BY_KEY, note[0])
            storage.set_trial_system_attr(trial._trial_id, PROPOSAL_KEY, note[1])
        return params

    def _settle(self, study: Study, me: FrozenTrial, params: dict[str, Any],
                took_s: float) -> bool:
        """Whether a lower-numbered trial holds this very proposal (then propose again,
        with it as pending or as an observation).

        Another process may be proposing from the same history right now. Running
        trials with a lower number that have not written their proposal yet are
        waited for (at most twice this proposal's time + 0.5 s, 30 s in all), so
        whichever of two workers finishes first, the one with the higher number
        sees the other's point and moves.
        """
        deadline = time.perf_counter() + min(30.0, 2 * took_s + 0.5)
        while True:
            # Finished ones too: the other trial may have run and ended meanwhile.
            lower = [t for t in study._get_trials(deepcopy=False, use_cache=False)
                     if t.number < me.number and t.state is not OState.WAITING]
            if any(t.system_attrs.get(RELATIVE_PARAMS_KEY) == params for t in lower):
                return True
            if all(RELATIVE_PARAMS_KEY in t.system_attrs for t in lower
                   if t.state is OState.RUNNING) or time.perf_counter() > deadline:
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
            # Seeded by (seed, trial number, name): reproducible, and workers that sample
            # their first trials at the same time still draw different points.
            key = f"{self.seed}:{trial.number}:{param_name}".encode()
            rs = optuna.samplers.RandomSampler(seed=zlib.crc32(key))
            return rs.sample_independent(study, trial, param_name, param_distribution)
        return self._independent.sample_independent(study, trial, param_name,
                                                    param_distribution)

    def before_trial(self, study: Study, trial: FrozenTrial) -> None:
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
        self._inner.bind(objectives, constraints, self.seed)
        proposal = self._inner.propose(space, records, pending, 1)[0]
        params = {n: codecs[n].to_optuna(v) for n, v in proposal.params.items()}
        note = {k: proposal.info[k] for k in _PROPOSAL_NOTES if k in proposal.info}
        return params, (proposal.proposed_by, json.loads(json.dumps(note, default=str)))

    def _history(self, trials: Sequence[FrozenTrial], me: FrozenTrial, space: SearchSpace,
                 codecs: dict[str, Codec], names: Sequence[str]
                 ) -> tuple[list[TrialRecord], list[Params], list[str]]:
        """Finished trials as records, running ones as pending params, constraint keys.

        A trial whose params do not cover the search space (a conditional
        parameter it never suggested, a value from another distribution) is
        left out: the model cannot place it.
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

        records: list[TrialRecord] = []
        pending: list[Params] = []
        keys: list[str] = []
        for t in sorted(trials, key=lambda t: t.number):
            if t.number == me.number:
                continue
            if t.state is OState.RUNNING:
                relative = t.system_attrs.get(RELATIVE_PARAMS_KEY)
                p = params_of({**(relative if isinstance(relative, dict) else {}), **t.params})
                if p is not None:
                    pending.append(p)
                continue
            rec = trial_record(t, names, lambda ft: params_of(ft.params))
            if rec is None:  # WAITING (enqueued, not started) or params outside the space
                continue
            if t.state is OState.COMPLETE:
                keys += [k for k in constraint_values(t) if k not in keys]
            records.append(rec)
        return records, pending, keys
