"""The study: ask/tell/optimize over a search space, with a crash-safe trial log.

Example:
    >>> import ecopt
    >>> space = ecopt.SearchSpace({"x": ecopt.Float(0, 1), "y": ecopt.Float(0, 1)})
    >>> study = ecopt.Study(space, [ecopt.Objective("f1", "min"), ecopt.Objective("f2", "min")],
    ...                     storage="runs/demo", sampler="qlognehvi", seed=0)
    >>> study.optimize(lambda t: {"f1": t["x"], "f2": (1 - t["x"]) ** 2 + t["y"]}, n_trials=12)
    >>> study.pareto_front()
"""

from __future__ import annotations

import datetime as _dt
import logging
import math
import shutil
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, overload

import numpy as np

from ecopt import pareto
from ecopt._convergence import NOTES_KEY, ConvergenceTracker, StoppingRule, Termination
from ecopt._history import FrontCache, SamplerHistory
from ecopt._record import create_record, interrupted_record
from ecopt._search import (
    NOT_STARTED,
    UNBILLED_KEY,
    add_window,
    mark_overlap,
    meter_proposal,
    search_energy_j,
    split_search,
)
from ecopt._spec import CORE_KEYS, core_spec, differences
from ecopt._types import Params, is_finite_number
from ecopt._version import __version__
from ecopt.callbacks import (
    Callback,
    ProgressBar,
    StopWhenConverged,
    display_callback,
)
from ecopt.errors import EcoptError, MissingSpecError, SpecMismatchError, TrialPruned
from ecopt.executors import Executor, get_executor
from ecopt.meters import Meter, get_meter
from ecopt.objective import Constraint, Objective, validate_objectives
from ecopt.pruners import Pruner, get_pruner
from ecopt.pruners.base import PruningHook
from ecopt.samplers import Proposal, Sampler, get_sampler
from ecopt.space import SearchSpace
from ecopt.storage import RUNNING_FILE, STUDY_FILE, TRIALS_FILE, StudyStorage
from ecopt.trial import (
    ErrorInfo,
    Intermediate,
    Trial,
    TrialOutcome,
    TrialRecord,
    TrialState,
    is_out_of_memory,
)

__all__ = ["Study", "load_study"]

log = logging.getLogger("ecopt")

ObjectiveFn = Callable[[Trial], Any]


def _now_iso() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


class Study:
    """A multi-objective search, its trials and its log.

    Args:
        space: The :class:`~ecopt.SearchSpace` to search.
        objectives: :class:`~ecopt.Objective` list (names unique).
        constraints: :class:`~ecopt.Constraint` list on reported metrics.
        storage: A directory for ``study.json`` + ``trials.jsonl``; re-opening
            it resumes the study. ``None`` keeps trials in memory only.
        sampler: ``"qlognehvi"`` (default), ``"qnehvi"``, ``"random"``,
            ``"sobol"``, ``"grid"`` or a :class:`~ecopt.samplers.Sampler`.
        meter: ``"auto"`` (default), another meter name, or a
            :class:`~ecopt.meters.Meter`.
        seed: Seed for reproducible proposals.
        name: A label for reports (default: the storage directory's name).
        overwrite: Start afresh in a directory that holds another study; the
            old files are moved to ``replaced-<time>/`` inside it, never deleted.
        pruner: Early stopping of trials that report a learning curve
            (:meth:`Trial.report`): ``None`` (default, no pruning), a name
            (``"hyperband"``, ``"dominance"``) or an
            :class:`~ecopt.pruners.Pruner`. See docs/energy-aware-search.md.
        idle_s: Deprecated (the option belongs to the meter): use
            ``meter=ecopt.meters.IdleSubtracted(meter, idle_s=...)``.
        subtract_idle: Deprecated (the option belongs to the meter): use
            ``meter=ecopt.meters.IdleSubtracted(meter, idle_s=..., subtract=...)``.
        cost_aware: Deprecated (the option belongs to the sampler): use
            ``sampler=ecopt.samplers.QLogNEHVISampler(cost_aware=True)``.
        transfer_from: Earlier studies (directories or :class:`Study` objects)
            whose trials inform this study's model and initial design, read
            read-only; they never enter this study's log, front, counts,
            ``n_trials`` or budget. ``study.json`` records each (path, study id,
            records used and their hash); reopening the directory without
            ``transfer_from`` reloads them from there, and a source that is gone
            or changed is a :class:`~ecopt.errors.TransferSourceError`. Matching
            rules: :mod:`ecopt.transfer`; the model: :mod:`ecopt.samplers._transfer`.
        transfer_map: How a numeric parameter of the sources is carried over:
            ``{"power_limit": "relative"}`` maps a source value by its share of
            the source's range onto the same share of this study's (a GPU power
            limit on another GPU); ``"value"`` (the default for every
            parameter) keeps the value, clipped. Recorded in ``study.json``;
            reopening without it uses the recorded map, and another map than
            the recorded one is a :class:`~ecopt.errors.TransferSourceError`.

    Names (sampler, meter, pruner) resolve through :mod:`ecopt.registry`, where
    installed packages add their own by entry point; an instance is accepted
    wherever a name is.

    Raises:
        ValueError: for bad arguments (unknown sampler or meter name, bad
            direction, duplicate objective names, too few objectives for the
            sampler...).
        SpecMismatchError: when ``storage`` holds a study with another space,
            objectives or constraints (and ``overwrite`` is false); the message
            names each parameter, objective or constraint that differs, with
            its stored and its given value.
        StudyLockedError: when another process is writing to ``storage``.
    """

    def __init__(
        self,
        space: SearchSpace,
        objectives: Sequence[Objective],
        constraints: Sequence[Constraint] = (),
        storage: str | Path | None = None,
        sampler: str | Sampler = "qlognehvi",
        meter: str | Meter = "auto",
        seed: int | None = 0,
        name: str | None = None,
        overwrite: bool = False,
        *,
        pruner: str | Pruner | None = None,
        idle_s: float | None = None,
        subtract_idle: bool | None = None,
        cost_aware: bool | None = None,
        transfer_from: Sequence[Any] | str | Path | None = None,
        transfer_map: Mapping[str, str] | None = None,
        _readonly: bool = False,
        _spec: Mapping[str, Any] | None = None,
    ) -> None:
        if not isinstance(space, SearchSpace):
            if isinstance(space, Mapping):
                space = SearchSpace(space)
            else:
                raise ValueError(f"space must be an ecopt.SearchSpace, got {space!r}")
        objectives = list(objectives) if not isinstance(objectives, Objective) else objectives
        constraints = list(constraints)
        validate_objectives(objectives, constraints)  # type: ignore[arg-type]
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, (int, np.integer))
                                 or not 0 <= seed < 2**63):
            raise ValueError(f"seed must be an integer in [0, 2**63) or None, got {seed!r}")
        self.space = space
        self.objectives: list[Objective] = list(objectives)  # type: ignore[arg-type]
        self.constraints: list[Constraint] = constraints
        self.seed = None if seed is None else int(seed)
        self.readonly = _readonly
        self._records: list[TrialRecord] = []
        self._front = FrontCache(self.objectives)
        self._running: dict[int, Trial] = {}
        self._next_number = 0
        self._storage: StudyStorage | None = None
        self.spec: dict[str, Any] = dict(_spec or {})
        self._stop_requested = False
        self._optimizing = False
        #: Set by optimize() while it records the trials a stop cut off (why it stops).
        self._stopping: str | None = None
        #: Why the last :meth:`optimize` call stopped proposing, also one recorded by an
        #: earlier process in ``study.json`` (``None`` before any ran).
        self.stop_reason: str | None = None
        # Joules of every proposal this object made, and each proposed trial's share.
        self._proposal_energy_j = 0.0
        self._proposal_shares: list[float] = []
        #: The stopping rule :meth:`should_terminate` evaluates (``optimize(...,
        #: stop_when_converged=rule)`` sets it).
        self.stopping_rule = StoppingRule()
        self._convergence: ConvergenceTracker | None = None
        # The metered window of stopping-rule evaluations not yet billed to a proposal
        # (kept in study.json by optimize() and close() when no proposal follows).
        self._unbilled_search: dict[str, Any] | None = None

        if _readonly:
            self.sampler: Sampler | None = None
            self.meter: Meter | None = None
            self.pruner: Pruner | None = None
            self.name = name or self.spec.get("name") or ""
            self.idle: dict[str, Any] | None = self.spec.get("idle")
            return

        if cost_aware is not None:
            warnings.warn("Study(cost_aware=...) is deprecated and goes in the next release: the "
                          "option belongs to the sampler; pass sampler=ecopt.samplers."
                          f"QLogNEHVISampler(cost_aware={cost_aware!r})", DeprecationWarning,
                          stacklevel=2)
        if idle_s is not None or subtract_idle is not None:
            warnings.warn("Study(idle_s=..., subtract_idle=...) is deprecated and goes in the next "
                          "release: idle power belongs to the meter; pass meter=ecopt.meters."
                          "IdleSubtracted(meter, idle_s=..., subtract=...)", DeprecationWarning,
                          stacklevel=2)
        self.sampler = get_sampler(sampler, cost_aware=cost_aware)
        self.sampler.bind(self.objectives, self.constraints, self.seed)
        self.pruner = get_pruner(pruner)
        if self.pruner is not None:
            self.pruner.bind(self.objectives, self.constraints)
        self.meter = get_meter(meter)
        if idle_s is not None or subtract_idle is not None:
            self.meter = _legacy_idle_meter(self.meter, idle_s, subtract_idle)
        self.name = name or (Path(storage).name if storage is not None else "study")

        if storage is not None:
            self._storage = StudyStorage(storage, writable=True, on_handover=self._hand_over)
            try:
                self._refuse_if_orphans()
                self._open_storage(overwrite)
            except BaseException:
                self._storage.close()
                raise
        try:
            self._open_transfer(transfer_from, transfer_map)
        except BaseException:
            self.close()
            raise
        self._history = SamplerHistory(self.objectives, self.constraints,
                                       getattr(self.pruner, "energy_objective", "auto"))
        try:
            self._prepare_meter()
        except BaseException:
            self.close()
            raise
        if self._records:
            self._restore_convergence()

    def _open_transfer(self, transfer_from: Sequence[Any] | str | Path | None,
                       transfer_map: Mapping[str, str] | None = None) -> None:
        """Load the transfer sources (given, or recorded in study.json) and hand them to the sampler."""
        from ecopt.errors import TransferSourceError
        from ecopt.transfer import check_map, load_sources

        if isinstance(transfer_from, (str, Path, Study)):
            transfer_from = [transfer_from]
        mapping = check_map(self.space, transfer_map)
        recorded = self.spec.get("transfer") or None
        self.transfer_sources: list[Any] = []
        if recorded is None and not transfer_from:
            if mapping:
                raise ValueError(f"transfer_map={dict(transfer_map or {})!r} needs transfer "
                                 "sources (transfer_from=...)")
            return
        use = getattr(self.sampler, "use_transfer", None)
        if use is None:  # before anything is recorded: a study that fails to open keeps none
            raise ValueError(f"transfer_from needs a model-based sampler with transfer "
                             f"(qlognehvi, qnehvi), got sampler={self.sampler.name!r}")  # type: ignore[union-attr]
        if recorded is not None:
            given = list(transfer_from or [])
            if given and len(given) != len(recorded):
                raise TransferSourceError(
                    f"{str(self.path)!r} was created with {len(recorded)} transfer source(s) "
                    f"({[r.get('label') for r in recorded]}), {len(given)} given now; open it "
                    "without transfer_from (the recorded ones are used) or start a new study")
            was = dict(self.spec.get("transfer_map") or {})
            if transfer_map is not None and mapping != was:
                raise TransferSourceError(
                    f"{str(self.path)!r} was created with transfer_map={was!r}, "
                    f"transfer_map={mapping!r} given now; proposals would differ. Open it "
                    "without transfer_map (the recorded one is used) or start a new study")
            sources = given or [r.get("path") or r.get("label") for r in recorded]
            self.transfer_sources = load_sources(sources, self.space, self.objectives, recorded,
                                                 transfer_map=was)
        else:
            if self._storage is not None and self._records and not self.spec.get("transfer"):
                raise TransferSourceError(
                    f"{str(self.path)!r} already holds {len(self._records)} trials made without "
                    "transfer sources; adding sources now would change what it proposes. "
                    "Start a new study directory for the transfer")
            self.transfer_sources = load_sources(list(transfer_from or []), self.space,
                                                 self.objectives, transfer_map=mapping)
            use(self.transfer_sources, self.space)  # recorded only once the sampler took them
            self.spec["transfer"] = [s.describe() for s in self.transfer_sources]
            if mapping:
                self.spec["transfer_map"] = mapping
            if self._storage is not None:
                self._storage.write_spec(self.spec)
            return
        use(self.transfer_sources, self.space)

    def _prepare_meter(self) -> None:
        """Let the meter measure what it measures once per study (idle power); keep its facts."""
        assert self.meter is not None
        facts = dict(self.meter.prepare(self.spec))
        old = self.spec.get("idle")
        if "idle" not in facts and isinstance(old, dict) and old.get("meter") == self.meter.name:
            facts["idle"] = {**old, "subtracted": False}  # recorded earlier; not subtracted now
        self.idle = facts.get("idle")  # the idle-power record in use (study.json's "idle")
        if facts:
            self.spec.update(facts, meter=self.meter.describe())
            if self._storage is not None:
                self._storage.write_spec(self.spec)

    # -- storage -------------------------------------------------------------
    def _spec_core(self) -> dict[str, Any]:
        return core_spec(self.space, self.objectives, self.constraints)

    def _session_facts(self) -> dict[str, Any]:
        assert self.sampler is not None and self.meter is not None
        return {
            "opened_at": _now_iso(),
            "sampler": self.sampler.describe(),
            "meter": self.meter.describe(),
            "pruner": self.pruner.describe() if self.pruner is not None else None,
            "seed": self.seed,
            "ecopt_version": __version__,
        }

    def _refuse_if_orphans(self) -> None:
        from ecopt.errors import StudyLockedError
        from ecopt.executors.orphans import wait_for_orphans

        assert self._storage is not None
        alive = wait_for_orphans(self._storage.path)
        if alive:
            raise StudyLockedError(
                f"worker processes {alive} started for {str(self._storage.path)!r} by an earlier "
                "run are still running trials (their driver was killed); opening the study now "
                "would run new trials beside them (two trials on one GPU). Wait for them, or "
                f"stop them (kill {' '.join(map(str, alive))}), then open it again")

    def _open_storage(self, overwrite: bool) -> None:
        from ecopt.host import host_facts

        st = self._storage
        assert st is not None
        if not st.exists() and st.has_trials():
            if not overwrite:
                raise MissingSpecError(
                    f"{str(st.path)!r} holds trials ({TRIALS_FILE} / {RUNNING_FILE}) but its "
                    f"{STUDY_FILE} is missing, so ecopt cannot tell which study they belong to. "
                    f"Restore {STUDY_FILE} from a backup, or run `ecopt repair {st.path}` to "
                    "rebuild it from the copy kept in running.jsonl, or pass overwrite=True to "
                    "start afresh (the old files are moved to a replaced-<time>/ folder, never "
                    "deleted)")
            self._move_aside(st.path)
        if st.exists():
            old = st.read_spec()
            old_core = {k: old.get(k) for k in CORE_KEYS}
            given = self._spec_core()
            if old_core != given:
                if not overwrite:
                    what = [k for k in CORE_KEYS if old_core[k] != given[k]]
                    raise SpecMismatchError(
                        f"{str(st.path)!r} holds a study with a different {', '.join(what)}: "
                        f"{'; '.join(differences(old_core, given))}. Use another storage "
                        "directory, or pass overwrite=True to start afresh (the old files are "
                        "kept in a replaced-<time>/ folder)"
                    )
                self._move_aside(st.path)
        if st.exists():
            spec = st.read_spec()
            spec.setdefault("sessions", []).append(self._session_facts())
            spec["sampler"] = self.sampler.describe()  # type: ignore[union-attr]
            spec["meter"] = self.meter.describe()  # type: ignore[union-attr]
            spec["pruner"] = self.pruner.describe() if self.pruner is not None else None
            st.write_spec(spec)
            self.name = spec.get("name", self.name)
            self.spec = spec
            self.stop_reason = last_stop_reason(spec)
            self._resume()
        else:
            spec = {
                "name": self.name,
                "created_at": _now_iso(),
                **self._spec_core(),
                "sampler": self.sampler.describe(),  # type: ignore[union-attr]
                "meter": self.meter.describe(),  # type: ignore[union-attr]
                "pruner": self.pruner.describe() if self.pruner is not None else None,
                "seed": self.seed,
                "ecopt_version": __version__,
                "host": host_facts(),
                "sessions": [self._session_facts()],
            }
            st.write_spec(spec)
            self.spec = spec

    @staticmethod
    def _move_aside(path: Path) -> None:
        stamp = _dt.datetime.now().strftime("%Y%m%dT%H%M%S")
        dest = path / f"replaced-{stamp}"
        k = 1
        while True:  # a unique folder: two overwrites in one second keep both studies
            try:
                dest.mkdir()
                break
            except FileExistsError:
                k += 1
                dest = path / f"replaced-{stamp}-{k}"
        for f in ("study.json", "trials.jsonl", "running.jsonl"):
            if (path / f).exists():
                shutil.move(str(path / f), str(dest / f))
        warnings.warn(f"overwrite=True: the previous study was moved to {dest}", stacklevel=3)

    def _resume(self) -> None:
        st = self._storage
        assert st is not None
        self._records = st.read_records()
        finished = {r.number for r in self._records}
        numbers = set(finished)
        started: dict[int, dict[str, Any]] = {}
        reports: dict[int, list[dict[str, Any]]] = {}
        for run in st.read_running():
            try:
                num = int(run["number"])
            except (KeyError, TypeError, ValueError):
                continue
            numbers.add(num)
            if "report" in run:
                reports.setdefault(num, []).append(run)
            else:
                started.setdefault(num, run)
        for num in sorted(set(started) | set(reports)):
            if num in finished:
                continue
            rec = interrupted_record(num, started.get(num, {}), reports.get(num, []),
                                     self.objectives, self.constraints)
            st.append_record(rec)
            self._records.append(rec)
            finished.add(num)
            log.warning("trial %d was interrupted by a crash; recorded as failed", num)
        self._next_number = max(numbers) + 1 if numbers else 0

    @classmethod
    def load(cls, path: str | Path) -> Study:
        """Open a study directory read-only (see :func:`load_study`)."""
        st = StudyStorage(path, writable=False)
        spec = st.read_spec()
        try:
            space = SearchSpace.from_dict(spec["space"])
            objectives = [Objective.from_dict(o) for o in spec["objectives"]]
            constraints = [Constraint.from_dict(c) for c in spec.get("constraints", [])]
        except (KeyError, TypeError, ValueError) as exc:
            from ecopt.errors import NotAStudyError

            raise NotAStudyError(f"{str(path)!r}: study.json is malformed ({exc})") from None
        study = cls(space, objectives, constraints, seed=spec.get("seed"),
                    name=spec.get("name"), _readonly=True, _spec=spec)
        study._storage = st
        study._records = st.read_records()
        study.stop_reason = last_stop_reason(spec)
        return study

    def close(self) -> None:
        """Release the storage lock and the meter (the log is already on disk).

        The energy of a stopping-rule evaluation that no proposal followed is
        kept in ``study.json`` first (the session's ``unbilled_search``).
        """
        if self._storage is not None and not self.readonly:
            if not self._storage.handed_over:
                self._keep_unbilled_search()
            self._storage.close()
        if self.meter is not None:
            self.meter.close()

    def __enter__(self) -> Study:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:  # pragma: no cover - best effort
        try:
            if self._storage is not None and not self.readonly:
                self._storage.close()
        except Exception:
            pass

    def _keep_unbilled_search(self) -> None:
        """Add the pending stopping-rule window to this session in ``study.json``."""
        pending = self._unbilled_search
        sessions = self.spec.get("sessions")
        if pending is None or self._storage is None or not isinstance(sessions, list) \
                or not sessions or not isinstance(sessions[-1], dict):
            return
        sess = sessions[-1]
        before = sess.get(UNBILLED_KEY)
        sess[UNBILLED_KEY] = add_window(before if isinstance(before, dict) else None, pending)
        try:
            self._storage.write_spec(self.spec)
        except Exception as exc:  # noqa: BLE001 - the trials are saved; this is a note
            if isinstance(before, dict):
                sess[UNBILLED_KEY] = before
            else:
                sess.pop(UNBILLED_KEY, None)
            log.warning("could not keep the stopping rule's last evaluation energy in "
                        "study.json: %s", exc)
            return
        self._unbilled_search = None

    @property
    def path(self) -> Path | None:
        """The study directory, or ``None`` for an in-memory study."""
        return self._storage.path if self._storage is not None else None

    # -- trials --------------------------------------------------------------
    @property
    def records(self) -> list[TrialRecord]:
        """Every finished trial, in the order they finished."""
        return list(self._records)

    @property
    def running(self) -> list[Trial]:
        """Trials asked for and not yet told."""
        return list(self._running.values())

    def _require_writable(self) -> None:
        if self.readonly:
            raise EcoptError("this study was opened read-only with load_study(); open it with "
                             "ecopt.Study(..., storage=dir) to add trials")
        if self._storage is not None and self._storage.handed_over:
            raise EcoptError(
                f"this Study object was replaced: a newer ecopt.Study(...) in this process "
                f"opened {str(self.path)!r} again and writes to it now; use that one (this "
                "one can still be read)")

    def _hand_over(self) -> bool:
        """A newer Study in this process opens our directory: agree unless trials are running."""
        if self._optimizing:
            return False
        self._running.clear()  # they are in running.jsonl: the new owner records them
        return True

    @overload
    def ask(self, n: None = None, params: Mapping[str, Any] | None = None) -> Trial: ...

    @overload
    def ask(self, n: int, params: Mapping[str, Any] | None = None) -> list[Trial]: ...

    def ask(self, n: int | None = None, params: Mapping[str, Any] | None = None
            ) -> Trial | list[Trial]:
        """Start new trials.

        The sampler's proposal (model fits, acquisition optimisation) is
        metered with the study's meter; each trial keeps its share in
        ``trial.proposal["search"]`` (see docs/trial-log.md). The sampler sees
        pruned trials at the final values their pruning judged
        (:meth:`_records_for_sampler`).

        Args:
            n: How many (q proposals that know of each other). ``None`` returns
               one :class:`Trial`; an integer returns a list.
            params: Evaluate this configuration instead of asking the sampler
               (recorded as ``proposed_by="user"``).

        Raises:
            ValueError: for ``n < 1`` or ``params`` not in the space.
        """
        self._require_writable()
        assert self.sampler is not None and self.meter is not None
        if params is not None:
            if n not in (None, 1):
                raise ValueError(f"params= gives one trial; got n={n}")
            proposals = [Proposal(self.space.validate(params), "user", {})]
        else:
            k = 1 if n is None else n
            if isinstance(k, bool) or not isinstance(k, int) or k < 1:
                raise ValueError(f"n >= 1 must hold, got n={n!r}")
            pending = [t.params for t in self._running.values()]
            in_flight = len(pending)
            seen, more = self._records_for_sampler()
            pending += more
            sampler = self.sampler
            got, search, energy = meter_proposal(
                self.meter, lambda: list(sampler.propose(self.space, seen, pending, k)))
            self._proposal_energy_j += energy
            search = self._bill_convergence_check(search)
            # A machine-wide meter also read the running trials' energy in this window.
            mark_overlap(search, in_flight)
            latest = self._convergence.latest if self._convergence is not None else None
            check = latest.to_dict() if latest is not None and latest.n_records == len(seen) \
                else None
            if len(got) > k:
                warnings.warn(f"sampler {self.sampler.name!r} returned {len(got)} proposals "
                              f"for n={k}; the extra ones are dropped", RuntimeWarning,
                              stacklevel=2)
                got = got[:k]
            proposals = [p if isinstance(p, Proposal) else Proposal(dict(p), self.sampler.name, {})
                         for p in got]
            share = split_search(search, len(proposals)) if proposals else search
            proposals = [Proposal(p.params, p.proposed_by,
                                  {**p.info, "search": dict(share),
                                   **({NOTES_KEY: dict(check)} if check is not None else {})})
                         for p in proposals]
            self._proposal_shares.extend(search_energy_j(share) for _ in proposals)
        trials: list[Trial] = []
        hook = PruningHook(self.pruner, self._records) if self.pruner is not None else None
        sink = self._save_report if self._storage is not None else None
        for p in proposals:
            params_ok = self.space.validate(p.params)
            trial = Trial(self._next_number, params_ok, self.meter, p.proposed_by, p.info,
                          pruning=hook, on_report=sink)
            self._next_number += 1
            if self._storage is not None:
                self._storage.mark_running(trial.number, trial.params, trial.proposed_by,
                                           trial.proposal, trial.started_at)
            self._running[trial.number] = trial
            trials.append(trial)
        if n is None:
            if not trials:
                raise EcoptError("the sampler has nothing left to propose (grid exhausted?)")
            return trials[0]
        return trials

    def _bill_convergence_check(self, search: dict[str, Any]) -> dict[str, Any]:
        """Add the window of a stopping-rule evaluation made since the last proposal."""
        extra, self._unbilled_search = self._unbilled_search, None
        if extra is None:
            return search
        out = add_window(search, extra)
        out["convergence_check_s"] = extra["duration_s"]
        if extra.get("energy_j") is not None:
            out["convergence_check_j"] = search_energy_j(extra)
        return out

    def _restore_convergence(self) -> None:
        """The last recorded evaluation and its rule: a re-opened study goes on with both."""
        calls: list[Any] = []
        for sess in self.spec.get("sessions") or []:
            got = sess.get("optimize") if isinstance(sess, dict) else None
            calls += got if isinstance(got, list) else []
        self._convergence = ConvergenceTracker(ConvergenceTracker.recorded(self._records, calls))
        kept = self._convergence.rule()
        if kept is not None:
            self.stopping_rule = kept

    def termination(self, rule: StoppingRule | None = None) -> Termination:
        """Evaluate the stopping rule on the finished trials (see :meth:`should_terminate`).

        The GPs are fitted once per new set of finished trials; asking again
        without new trials returns the same evaluation. The evaluation is
        metered like a proposal (its joules count in the search energy and
        against ``energy_budget_j``, and are added to the next proposal's
        ``proposal["search"]``; when no proposal follows, ``optimize()`` or
        :meth:`close` keeps them in ``study.json`` as ``unbilled_search``), and
        is kept in the next proposed trial's notes (``proposal["convergence"]``).

        Args:
            rule: The settings (default :attr:`stopping_rule`).

        Returns:
            The :class:`~ecopt.Termination`: ``converged``, ``upper_bound``,
            ``noise``, ``below`` (evaluations in a row at or below the noise),
            ``patience``, ``reason``, ``details``.

        Raises:
            EcoptError: when the study's sampler has no model (``"random"``,
                ``"sobol"``, ``"grid"``): it cannot bound what is left to gain.
        """
        self._require_writable()
        assert self.sampler is not None and self.meter is not None
        if self._convergence is None:
            self._restore_convergence()
        rule = self.stopping_rule if rule is None else rule
        if not isinstance(rule, StoppingRule):
            raise ValueError(f"rule must be an ecopt.StoppingRule, got {rule!r}")
        seen, _ = self._records_for_sampler()
        sampler, space = self.sampler, self.space
        fn = getattr(sampler, "improvement_bound", None)
        bound = None if not callable(fn) else (
            lambda: fn(space, seen, beta=rule.beta, delta=rule.delta,
                       n_candidates=rule.n_candidates))
        tracker = self._convergence
        assert tracker is not None
        if bound is not None and (done := tracker.cached(rule, len(seen))) is not None:
            return done  # nothing new to evaluate: no meter window either
        before = tracker.latest
        n_complete = sum(r.state is TrialState.COMPLETE for r in self._records)
        t, search, energy = meter_proposal(
            self.meter, lambda: tracker.evaluate(rule, seen, bound, n_complete=n_complete))
        if t is not before:  # a new evaluation: bill its window to the next proposal
            self._proposal_energy_j += energy
            mark_overlap(search, len(self._running))
            self._unbilled_search = add_window(self._unbilled_search, search)
        return t

    def should_terminate(self, rule: StoppingRule | None = None) -> bool:
        """Has the search converged: would more trials move the front by more than noise?

        True when, for the last ``rule.patience`` evaluations in a row (one per
        new set of finished trials), an upper bound on the hypervolume
        improvement still possible (the largest improvement of an optimistic
        point, posterior mean + ``sqrt(beta)`` sd of the sampler's GPs, over
        1,024 Sobol candidates) was at or below the improvement that one noise
        standard deviation gives (both relative to the front's hypervolume).
        False before ``rule.min_trials`` complete trials. The numbers are in
        :meth:`termination`; docs/energy-aware-search.md states the rule.

        Args:
            rule: The settings (default :attr:`stopping_rule`, ``StoppingRule()``).

        Raises:
            EcoptError: when the study's sampler has no model.
        """
        return self.termination(rule).converged

    def _records_for_sampler(self) -> tuple[Sequence[TrialRecord], list[Params]]:
        """What the sampler learns from: the records, pruned trials at their judged values.

        Kept up to date as trials finish (:class:`ecopt._history.SamplerHistory`
        states the rule), so a proposal does not rebuild it from the whole log.

        Returns:
            ``(records, extra pending params)``; read-only.
        """
        return self._history.update(self._records)

    def _save_report(self, trial: Trial, point: Intermediate) -> None:
        """Keep an intermediate report on disk as it is made (an interrupted trial keeps its curve)."""
        if self._storage is not None and trial.number in self._running:
            self._storage.mark_report(trial.number, point,
                                      {k: v.to_dict() for k, v in trial.phases.items()})

    def tell(self, trial: Trial | int, values: Any = None, *,
             outcome: TrialOutcome | None = None, state: TrialState | str | None = None
             ) -> TrialRecord:
        """Finish a trial and append it to the log.

        Args:
            trial: The :class:`Trial` from :meth:`ask` (or its number).
            values: The objective's return value (dict of metric -> number),
                or the exception it raised.
            outcome: A full :class:`~ecopt.trial.TrialOutcome` from an executor
                (instead of ``values``).
            state: Force ``"failed"``, ``"infeasible"`` or ``"pruned"`` (a
                :class:`TrialState` or its value; with ``values`` an exception
                or ``None``). ``"pruned"`` keeps the trial's last reported values.

        Returns:
            The stored :class:`TrialRecord`. Invalid values (missing or extra
            names, NaN, non-numbers) make a ``failed`` record, never an error.

        Raises:
            ValueError: when the trial is not running in this study, or for a
                ``state`` other than those above.
        """
        self._require_writable()
        if state is not None:
            try:
                state = TrialState(state)
            except ValueError:
                raise ValueError(f"state must be one of 'failed', 'infeasible', 'pruned' or None, "
                                 f"got {state!r}") from None
            if state in (TrialState.RUNNING, TrialState.COMPLETE):
                raise ValueError(f"state must be one of 'failed', 'infeasible', 'pruned' or None "
                                 f"(a trial is complete when its values are valid), got "
                                 f"{state.value!r}")
        number = trial if isinstance(trial, int) else trial.number
        live = self._running.get(number)
        if live is None:
            raise ValueError(f"trial {number} is not running in this study (told twice?)")
        if outcome is None:
            if isinstance(values, BaseException):
                outcome = TrialOutcome.of(live, error=ErrorInfo.from_exception(values),
                                          infeasible=is_out_of_memory(values),
                                          pruned=isinstance(values, TrialPruned))
            else:
                outcome = TrialOutcome.of(live, returned=values)
        elif not outcome.intermediate and live.intermediate:
            # reported in this process, the outcome made elsewhere (a fault): keep the curve
            outcome = replace(outcome, intermediate=tuple(live.intermediate))
        record = create_record(number=live.number, params=live.params,
                               proposed_by=live.proposed_by, proposal=live.proposal,
                               outcome=outcome, objectives=self.objectives,
                               constraints=self.constraints, state=state)
        if self._storage is not None:
            # On disk first: if this raises (disk full), the trial stays running
            # here and tell() can be called again once there is room.
            self._storage.append_record(record)
        del self._running[number]
        live.mark_finished(record.state)
        self._records.append(record)
        if record.state is not TrialState.COMPLETE:
            assert record.error is not None
            if record.error.type == NOT_STARTED:  # optimize() logs why (the energy budget)
                return record
            if self._stopping is not None:
                # optimize() is stopping (Ctrl-C, a lost executor): no trial follows.
                log.warning("trial %d %s: %s: %s (recorded; optimize() stops here, and "
                            "opening the study again goes on from its log)", record.number,
                            record.state.value, record.error.type, record.error.message)
            else:
                log.warning("trial %d %s: %s: %s (the study goes on)", record.number,
                            record.state.value, record.error.type, record.error.message)
        return record

    def _interrupt_running(self, why: str) -> None:
        for t in list(self._running.values()):
            self.tell(t, outcome=TrialOutcome.of(t, error=ErrorInfo("Interrupted", why, "")))

    def optimize(self, objective: ObjectiveFn, n_trials: int | None = None, batch_size: int = 1,
                 executor: str | Executor = "local", timeout_s: float | None = None,
                 show_progress: bool | None = None, *, asynchronous: bool = True,
                 callbacks: Sequence[Callback] = (), live: bool = False,
                 energy_budget_j: float | None = None,
                 stop_when_converged: bool | StoppingRule = False,
                 fail_fast: int | None = 3) -> list[TrialRecord]:
        """Run ``n_trials`` more trials (or until a time or energy budget is spent).

        With an executor that runs several trials at once (``"processes"``,
        :class:`~ecopt.DaskExecutor`), up to ``executor.slots`` trials are in
        flight. Asynchronous (the default): as soon as one finishes, a new one
        is proposed with the others passed to the sampler as pending, so no
        worker idles. Synchronous (``asynchronous=False``): ``batch_size``
        proposals are made together and all of them finish before the next
        batch. The driver alone writes the trial log.

        Args:
            objective: ``objective(trial) -> dict`` of objective (and constraint)
                metrics. Exceptions, NaN or wrong names fail that trial only.
                Executors with worker processes need it picklable (a
                module-level function or class instance).
            n_trials: How many trials to run in this call (``>= 1``); ``None``
                runs until ``timeout_s`` or ``energy_budget_j`` stops it (one of
                the three is needed).
            batch_size: ``q``, proposals made together per round (at most the
                executor's free slots).
            executor: ``"local"``, ``"processes"``, ``"dask"``, ``"spark"``, ``"ray"`` or an
                :class:`~ecopt.executors.Executor` (e.g. ``ecopt.DaskExecutor(...)``).
                An executor passed by name is closed at the end; an instance is not.
            timeout_s: Stop proposing new trials after this many seconds (trials
                in flight finish). Per-trial limits are the executor's
                ``trial_timeout_s``.
            show_progress: A progress bar (default: when stderr is a terminal);
                it is the callback :class:`ecopt.callbacks.ProgressBar`, run
                before the others.
            asynchronous: Propose a new trial whenever a slot frees (default),
                or wait for each full batch.
            callbacks: Functions called as ``callback(study, record)`` after each
                trial is saved, in order (Optuna's shape; e.g.
                ``ecopt.integrations.mlflow.MLflowLogger``), or
                :class:`ecopt.callbacks.OptimizeCallback` objects, which may
                also hook the start and end of the call and stop it before a
                proposal. A callback that raises is logged and skipped: it never
                loses a trial. Call :meth:`stop` from one to end the call early.
            live: In a Jupyter notebook, redraw the Pareto front in place (one
                output) as each trial finishes (:class:`ecopt.report.live.LiveFront`,
                a callback run after the others). Outside a notebook it does
                nothing but warn.
            energy_budget_j: Joules this call may spend: the energy of its trials
                plus that of the proposals made for them (metered with the
                study's meter). A proposed trial predicted to overrun the
                budget (from the complete trials nearest its configuration) is
                not started: it is saved as failed (``NotStarted``) with its
                proposal's energy, and the call ends; no proposal is made when
                not even the cheapest trial so far would fit. Trials in flight
                finish; a batch's trials still queued (the local executor) are
                judged again, with what the ones before them cost, before each
                starts. Until one trial has finished, trials start one at a
                time. A trial whose energy reading is missing, zero or NaN is
                charged its duration x the highest power read so far (kept in
                its ``user_attrs["budget_charge"]``); with nothing read yet, the
                call raises :class:`~ecopt.errors.MeterError`. A trial that costs
                more than predicted can still take the total over: by one trial
                with the local executor, by the trials in flight with workers.
                See docs/energy-aware-search.md.
            stop_when_converged: Start no new trial once :meth:`should_terminate`
                says the search has converged (``True``: :attr:`stopping_rule`, the
                rule a re-opened study restored, else ``StoppingRule()``; or an
                :class:`~ecopt.StoppingRule`, which becomes :attr:`stopping_rule`).
                The rule is evaluated before each proposal; trials in flight
                finish. Needs a model-based sampler. It is the callback
                :class:`ecopt.callbacks.StopWhenConverged`.
            fail_fast: Stop and raise :class:`~ecopt.SystematicFailureError`
                (naming the trials, their configurations and the rule) when
                failures look like a bug in the objective rather than a bad
                region of the space (a misspelled metric name fails every trial
                alike, and should not burn the whole budget): the first
                ``fail_fast`` trials of the call all failed, in a study where no
                trial has completed; or ``fail_fast``
                failures in a row with the same error (exception type and the
                line that raised it) span a box that holds a trial that
                completed; or more than half of the call's trials failed, from
                10 trials on. Failures inside one region (a NaN loss at high
                learning rates, one architecture that raises) do not stop a call
                of qLogNEHVI, which learns to avoid them; a fixed plan (a grid) can
                trip the rules, which are heuristics. Infeasible trials (out
                of memory, :class:`~ecopt.Infeasible`), trials not started and
                interrupted ones are neutral. Every trial is recorded before it
                is raised. ``None`` (or ``0``): never stop on failures.

        Returns:
            The records of the trials this call ran. Why the call stopped
            proposing is in :attr:`stop_reason` (logged, and kept in
            ``study.json`` for ``ecopt show``).

        Raises:
            ValueError: for ``n_trials < 1``, ``batch_size < 1``, a
                non-positive ``timeout_s`` or ``energy_budget_j``, no limit at
                all, an energy budget with a meter that reads no energy, a bad
                ``stop_when_converged`` or one with a model-free sampler, or an
                objective the executor cannot send to its workers
                (unpicklable), before any trial starts.
            MeterError: under ``energy_budget_j``, a trial read no energy and
                no trial of the study ever did (the budget cannot be kept).
            SystematicFailureError: a ``fail_fast`` rule judged the failures the
                objective's fault (after every trial was recorded).
            ExecutorLostError: the executor went away (the Dask scheduler
                stopped); trials that had finished were recorded with their
                results and those in flight as failed (``Interrupted``), so the
                log is complete and the study can be resumed.
            KeyboardInterrupt: re-raised after finished trials are recorded with
                their results and running ones as failed (``Interrupted``).
        """
        from ecopt._optimize import OptimizeLoop

        self._require_writable()
        if not callable(objective):
            raise ValueError(f"objective must be callable, got {objective!r}")
        for what, v in (("n_trials", n_trials), ("batch_size", batch_size)):
            if what == "n_trials" and v is None:
                continue
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{what} >= 1 must hold, got {what}={v!r}")
        if timeout_s is not None and not timeout_s > 0:
            raise ValueError(f"timeout_s > 0 must hold, got {timeout_s}")
        if fail_fast is not None and (isinstance(fail_fast, bool) or not isinstance(
                fail_fast, (int, np.integer)) or fail_fast < 0):
            raise ValueError(f"fail_fast must be None or an integer >= 0 (0 and None: never "
                             f"stop on failures), got fail_fast={fail_fast!r}")
        if energy_budget_j is not None:
            if isinstance(energy_budget_j, bool) or not isinstance(
                    energy_budget_j, (int, float, np.integer, np.floating)) \
                    or not (is_finite_number(energy_budget_j) and energy_budget_j > 0):
                raise ValueError(f"energy_budget_j > 0 must hold (a finite number of joules), "
                                 f"got energy_budget_j={energy_budget_j!r}")
            self._check_meter_reads_energy()
        if n_trials is None and timeout_s is None and energy_budget_j is None:
            raise ValueError("optimize() needs a limit: n_trials, timeout_s or energy_budget_j "
                             "(got none of them)")
        rule = StoppingRule.of(stop_when_converged, current=self.stopping_rule)
        for cb in callbacks:
            if not callable(cb):
                raise ValueError(f"each callback must be callable as callback(study, record), "
                                 f"got {cb!r}")
        # The conveniences are callbacks: the stopping rule (asked first before a proposal),
        # the progress bar (told first after a trial), the user's, then the live front.
        hooks: list[Callback] = [StopWhenConverged(rule)] if rule is not None else []
        hooks += [ProgressBar(enabled=show_progress), *callbacks]
        if live:
            front = display_callback("live")
            if front is not None:
                hooks.append(front)
        started: list[Callback] = []
        self._stop_requested = False
        loop: OptimizeLoop | None = None
        started_at = _now_iso()
        try:
            for cb in hooks:
                on_start = getattr(cb, "on_start", None)
                if on_start is not None:
                    on_start(self, n_trials)  # may refuse the call (ValueError): nothing ran
                started.append(cb)
            ex = get_executor(executor)
            owns_executor = not isinstance(executor, Executor)
            try:
                ex.check_objective(objective)  # an unpicklable objective fails before any trial
                ex.attach(self.path)
            except BaseException:
                if owns_executor:
                    ex.close()
                raise
            loop = OptimizeLoop(self, objective, n_trials, batch_size, ex, timeout_s,
                                asynchronous, hooks, energy_budget_j=energy_budget_j,
                                fail_fast=int(fail_fast) if fail_fast else None)
            self._optimizing = True
            planned_before = getattr(self.sampler, "planned_trials", None)
            if self.sampler is not None:
                self.sampler.planned_trials = (self._next_number + n_trials
                                               if n_trials is not None else None)
            try:
                done = loop.run()
            finally:
                self._optimizing = False
                if self.sampler is not None:
                    self.sampler.planned_trials = planned_before
                self.stop_reason = loop.stop_reason
                self._stop_requested = False
                if owns_executor:
                    ex.close()
                self._record_optimize_call(loop, hooks, started_at, n_trials, timeout_s,
                                           energy_budget_j)
        finally:
            for cb in started:
                on_end = getattr(cb, "on_end", None)
                if on_end is None:
                    continue
                try:
                    on_end(self, loop.stop_reason if loop is not None else None)
                except Exception as exc:  # noqa: BLE001 - the trials are saved; this is a display
                    log.warning("callback %r failed at the end of optimize(): %s: %s", cb,
                                type(exc).__name__, exc)
        log.info("optimize stopped: %s (%d trials run; %s J spent by trials + proposals)",
                 loop.stop_reason, len(done), f"{loop.spent_j:.6g}")
        from ecopt.executors.overlap import shared_host_energy_note

        note = shared_host_energy_note(done)
        if note:
            log.warning(note)
        return done

    def _check_meter_reads_energy(self) -> None:
        """An energy budget needs joules: probe the meter with one empty window."""
        assert self.meter is not None
        try:
            m = self.meter.stop(self.meter.start())
        except Exception as exc:  # noqa: BLE001 - said as a ValueError below
            raise ValueError(f"energy_budget_j needs a working meter; meter "
                             f"{self.meter.name!r} failed: {type(exc).__name__}: {exc}") from exc
        if not m.components:
            raise ValueError(f"energy_budget_j needs a meter that reads energy; meter "
                             f"{self.meter.name!r} records durations only (use meter='auto', "
                             "'nvml', 'rapl', 'codecarbon' or 'estimate')")

    def _record_optimize_call(self, loop: Any, hooks: Sequence[Callback], started_at: str,
                              n_trials: int | None, timeout_s: float | None,
                              energy_budget_j: float | None) -> None:
        """Keep why an optimize() call stopped, and what it spent, in ``study.json``."""
        if self._storage is None or not isinstance(self.spec.get("sessions"), list) \
                or not self.spec["sessions"]:
            return
        entry = {"started_at": started_at, "ended_at": _now_iso(), "n_trials": n_trials,
                 "trials_run": len(loop.done), "timeout_s": timeout_s,
                 "energy_budget_j": energy_budget_j, "stop_reason": loop.stop_reason,
                 "trial_energy_j": loop.trials_j, "proposal_energy_j": loop.proposals_j}
        if any(isinstance(cb, StopWhenConverged) for cb in hooks):
            latest = self._convergence.latest if self._convergence is not None else None
            entry["stop_when_converged"] = True
            entry[NOTES_KEY] = latest.to_dict() if latest is not None else None
        pending = self._unbilled_search
        if pending is not None:  # the last evaluation: no proposal followed it
            entry[UNBILLED_KEY] = dict(pending)
        calls = self.spec["sessions"][-1].setdefault("optimize", [])
        try:
            calls.append(entry)
            self._storage.write_spec(self.spec)
        except Exception as exc:  # noqa: BLE001 - the trials are saved; this is a note
            if calls and calls[-1] is entry:
                calls.pop()  # not on disk: the pending window stays for close() or a proposal
            log.warning("could not record the optimize() summary in study.json: %s", exc)
            return
        if pending is not None:
            self._unbilled_search = None

    def stop(self) -> None:
        """Ask a running :meth:`optimize` to start no new trial (those in flight finish).

        Safe to call from a callback or from another thread.
        """
        self._stop_requested = True

    # -- results -------------------------------------------------------------
    @property
    def directions(self) -> list[str]:
        return [o.direction for o in self.objectives]

    def _front_records(self) -> list[TrialRecord]:
        """The front (:func:`ecopt.pareto.front_records`'s rule), updated as trials finish."""
        return list(self._front.update(self._records))

    def best_trials(self) -> list[TrialRecord]:
        """The non-dominated, complete, constraint-satisfying trials."""
        return self._front_records()

    def reference_point(self) -> list[float] | None:
        """Objective thresholds, with inferred values where none was given.

        Returns ``None`` when a threshold is missing and no trial completed yet.
        """
        # The rule infers from the front only, so the front (kept up to date) is enough.
        ref = pareto.study_reference_point(self._front.update(self._records), self.objectives)
        return None if ref is None else list(ref)

    def hypervolume(self, ref_point: Sequence[float] | None = None) -> float:
        """Hypervolume of the observed front against ``ref_point`` (default :meth:`reference_point`)."""
        front = self._front_records()
        ref = list(ref_point) if ref_point is not None else self.reference_point()
        if not front or ref is None:
            return 0.0
        return pareto.hypervolume(pareto.objective_matrix(front, self.objectives), ref,
                                  self.directions)

    def trials_dataframe(self) -> Any:
        """Every finished trial as a pandas DataFrame (columns in docs/api.md)."""
        from ecopt.frames import trials_dataframe

        return trials_dataframe(self._records, self.space, self.objectives, self.constraints)

    def pareto_front(self) -> Any:
        """The non-dominated complete feasible trials as a DataFrame (same columns)."""
        from ecopt.frames import trials_dataframe

        return trials_dataframe(self._front_records(), self.space, self.objectives,
                                self.constraints)

    def __repr__(self) -> str:
        where = str(self.path) if self.path else "memory"
        return (f"Study(name={self.name!r}, trials={len(self._records)}, storage={where!r}, "
                f"objectives={[o.name for o in self.objectives]})")


def last_stop_reason(spec: dict[str, Any]) -> str | None:
    """Why the last recorded ``optimize()`` call stopped, from ``study.json``'s sessions.

    Args:
        spec: The parsed ``study.json``.

    Returns:
        The newest recorded ``stop_reason`` (``None`` when no call recorded one).
    """
    sessions = spec.get("sessions")
    for session in reversed(sessions if isinstance(sessions, list) else []):
        calls = session.get("optimize") if isinstance(session, dict) else None
        for call in reversed(calls if isinstance(calls, list) else []):
            if isinstance(call, dict) and call.get("stop_reason"):
                return str(call["stop_reason"])
    return None


def load_study(path: str | Path) -> Study:
    """Open a study directory read-only, for plotting and reports.

    Reads only ``study.json`` and ``trials.jsonl`` (plain JSON; nothing is
    unpickled or run). A torn last line is skipped with a warning.

    Raises:
        NotAStudyError: when ``path`` holds no ecopt study.
    """
    return Study.load(path)


def _legacy_idle_meter(meter: Meter, idle_s: float | None, subtract_idle: bool | None) -> Meter:
    """What the deprecated ``Study(idle_s=..., subtract_idle=...)`` meant, as a meter.

    Raises:
        ValueError: as those keywords did (a bad ``idle_s``; ``subtract_idle``
            with nothing to subtract is refused when the study opens).
    """
    from ecopt.meters.idle import IdleSubtracted

    idle = 0.0 if idle_s is None else idle_s
    if isinstance(idle, bool) or not isinstance(idle, (int, float)) or not is_finite_number(idle) \
            or idle < 0:
        raise ValueError(f"idle_s must be a finite number >= 0, got {idle_s!r}")
    if not idle and not subtract_idle:
        return meter  # idle_s=0 without subtraction: nothing to measure, as before
    return IdleSubtracted(meter, idle_s=float(idle), subtract=bool(subtract_idle))
