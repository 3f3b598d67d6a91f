"""Ray Tune: ecopt's qLogNEHVI as a Tune ``Searcher``, and metered phases in trainables.

The only change to a Tune script is the search algorithm::

    tuner = tune.Tuner(train, param_space={"lr": tune.loguniform(1e-4, 1e-1),
                                           "width": tune.randint(8, 513)},
                       tune_config=tune.TuneConfig(num_samples=30, search_alg=EcoptSearch(
                           metric=["accuracy", "inference_samples_per_joule"],
                           mode=["max", "max"])))

How Tune's pieces map onto ecopt's sampler
(:meth:`ecopt.samplers.QLogNEHVISampler.propose`):

* the **search space** is Tune's ``param_space`` (``tune.uniform``,
  ``loguniform``, ``randint``, ``lograndint``, ``choice``; other entries are
  constants passed through), or an :class:`ecopt.SearchSpace`;
* **finished trials** become ecopt records from Tune's own last result of each
  trial: ``metric`` (a list, one entry per objective) gives the values, ``mode``
  their directions (a trial a scheduler stopped early counts with its last
  values); a trial that errored, or whose last result lacks a metric, is a
  failed record, which the model ignores;
* **running trials** are pending points, so concurrent trials do not collide.

Inside a trainable, :func:`metered` measures a phase with ecopt's meters (in the
trainable's own process, on the GPU Tune gave it) and its numbers go into the
result you report (``phase.metrics``): ``<name>_energy_j``,
``<name>_duration_s``, ``<name>_samples_per_joule`` and whether the energy was
measured or estimated. The searcher keeps each reported phase with its record.

Proposals are a pure function of the seed and the history (ecopt's contract).
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import math
import pickle
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from ecopt._types import Params
from ecopt.errors import MeterError
from ecopt.executors.base import worker_meter
from ecopt.executors.ray import import_ray
from ecopt.meters.base import Meter
from ecopt.objective import Objective
from ecopt.record import make_record
from ecopt.samplers.qnehvi import QLogNEHVISampler
from ecopt.space import Categorical, Float, Int, Parameter, SearchSpace
from ecopt.trial import ErrorInfo, PhaseRecord, TrialRecord, TrialState

import_ray()  # ray, with its amdsmi guard (see ecopt.executors.ray)
from ray.tune.search import Searcher  # noqa: E402
from ray.tune.search import sample as tune_sample  # noqa: E402

__all__ = ["EcoptSearch", "metered", "TunePhase", "tune_space", "PHASE_PREFIX"]

#: Result key of a metered phase's full record (``ecopt.phase.<name>``: ecopt's phase dict).
PHASE_PREFIX = "ecopt.phase."


def tune_space(config: Mapping[str, Any]) -> tuple[SearchSpace, dict[str, Any]]:
    """An ecopt search space from a Tune ``param_space``, and its constant entries.

    Args:
        config: Tune's ``param_space``: ``tune.uniform``/``loguniform`` (ecopt
            ``Float``), ``tune.randint``/``lograndint`` (``Int``; Tune's upper
            bound is exclusive), ``tune.choice`` (``Categorical``); any other
            value is a constant, passed to every trial as it is.

    Raises:
        ValueError: for a quantized, normal or sample_from domain, or a nested
            dict holding domains (pass an :class:`ecopt.SearchSpace` instead).
    """
    params: dict[str, Parameter] = {}
    constants: dict[str, Any] = {}
    for name, dom in config.items():
        if isinstance(dom, Mapping) and any(isinstance(v, tune_sample.Domain)
                                            for v in dom.values()):
            raise ValueError(f"param_space[{name!r}] is a nested dict of Tune domains; "
                             "EcoptSearch takes a flat param_space (or an ecopt.SearchSpace)")
        if not isinstance(dom, tune_sample.Domain):
            constants[name] = dom
            continue
        sampler = dom.get_sampler()
        log = isinstance(sampler, tune_sample.LogUniform)
        if isinstance(dom, tune_sample.Categorical):
            params[name] = Categorical(list(dom.categories))
        elif isinstance(sampler, (tune_sample.Uniform, tune_sample.LogUniform)) and \
                isinstance(dom, tune_sample.Float):
            params[name] = Float(float(dom.lower), float(dom.upper), log=log)
        elif isinstance(sampler, (tune_sample.Uniform, tune_sample.LogUniform)) and \
                isinstance(dom, tune_sample.Integer):
            params[name] = Int(int(dom.lower), int(dom.upper) - 1, log=log)  # upper exclusive
        else:
            raise ValueError(f"param_space[{name!r}] = {dom!r} ({type(sampler).__name__}) has no "
                             "ecopt equivalent; use tune.uniform, loguniform, randint, "
                             "lograndint or choice, or pass an ecopt.SearchSpace")
    return SearchSpace(params), constants


def _now_iso() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="milliseconds")


def _finite(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _phases_in(result: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The phase dicts of a result, which Tune hands to searchers flattened
    (``ecopt.phase.train/components/cpu/energy_j``) or, in tests, nested."""
    out: dict[str, dict[str, Any]] = {}
    for key, value in result.items():
        if not key.startswith(PHASE_PREFIX):
            continue
        name, _, path = key[len(PHASE_PREFIX):].partition("/")
        if not path:
            if isinstance(value, Mapping):
                out.setdefault(name, {}).update(value)
            continue
        node = out.setdefault(name, {})
        *parents, leaf = path.split("/")
        for p in parents:
            node = node.setdefault(p, {})
        node[leaf] = value
    return out


class EcoptSearch(Searcher):
    """A Ray Tune ``Searcher`` that proposes with ecopt's qLogNEHVI (multi-objective BO).

    Args:
        space: An :class:`ecopt.SearchSpace` or a Tune ``param_space`` dict;
            ``None`` (default): the ``param_space`` of the ``Tuner``.
        metric: The result keys to optimise, one per objective (at least two:
            qLogNEHVI is a multi-objective acquisition).
        mode: ``"min"`` or ``"max"`` for each metric.
        seed: Seed of the proposals (ecopt samplers are deterministic).
        thresholds: Per metric, the worst value still worth having (ecopt's
            ``Objective.threshold``: together the hypervolume reference point);
            ``None`` infers one from the data.
        points_to_evaluate: Configurations to run first, as Tune's searchers take them.
        **options: Passed to :class:`ecopt.samplers.QLogNEHVISampler`
            (``n_init``, ``num_restarts``, ``raw_samples``...).

    Raises:
        ValueError: for fewer than two metrics, a mode per metric missing or
            other than ``"min"``/``"max"``, bad thresholds or sampler options.

    Example:
        >>> from ray import tune
        >>> from ecopt.integrations.ray import EcoptSearch
        >>> search = EcoptSearch(metric=["accuracy", "inference_samples_per_joule"],
        ...                      mode=["max", "max"], seed=0)
        >>> tune.Tuner(train, param_space=space,
        ...            tune_config=tune.TuneConfig(search_alg=search, num_samples=30)).fit()
    """

    def __init__(self, space: SearchSpace | Mapping[str, Any] | None = None,
                 metric: str | Sequence[str] | None = None,
                 mode: str | Sequence[str] | None = None, *, seed: int = 0,
                 thresholds: Sequence[float | None] | None = None,
                 points_to_evaluate: Sequence[Mapping[str, Any]] | None = None,
                 **options: Any) -> None:
        if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**63:
            raise ValueError(f"seed must be an integer in [0, 2**63), got {seed!r}")
        metric = [metric] if isinstance(metric, str) else list(metric) if metric else None
        mode = [mode] if isinstance(mode, str) else list(mode) if mode else None
        self._check_objectives(metric, mode, thresholds)
        super().__init__(metric=metric, mode=mode)  # type: ignore[arg-type]
        self.seed = seed
        self._thresholds = list(thresholds) if thresholds is not None else None
        self._inner = QLogNEHVISampler(seed=seed, **options)  # validates the options
        self._space: SearchSpace | None = None
        self._constants: dict[str, Any] = {}
        if space is not None:
            self._set_space(space)
        self._points = [dict(p) for p in points_to_evaluate or ()]
        self._records: list[TrialRecord] = []
        self._live: dict[str, tuple[int, Params, str, str]] = {}  # id -> number, params, by, at
        self._next_number = 0

    # -- configuration ----------------------------------------------------------------
    @staticmethod
    def _check_objectives(metric: list[str] | None, mode: list[str] | None,
                          thresholds: Sequence[float | None] | None) -> None:
        if metric is not None and len(metric) < 2:
            raise ValueError(f"EcoptSearch proposes with qLogNEHVI, a multi-objective "
                             f"acquisition: it needs at least 2 metrics, got metric={metric}. "
                             "Add one (e.g. a phase's samples per joule from "
                             "ecopt.integrations.ray.metered) or use a single-objective searcher")
        if mode is not None:
            if any(m not in ("min", "max") for m in mode):
                raise ValueError(f"every mode must be 'min' or 'max', got mode={mode}")
            if metric is not None and len(mode) != len(metric):
                raise ValueError(f"one mode per metric must be given, got metric={metric}, "
                                 f"mode={mode}")
        if thresholds is not None:
            for i, t in enumerate(thresholds):
                if t is not None and not _finite(t):
                    raise ValueError(f"thresholds[{i}] must be a finite number or None, got {t!r}")
            if metric is not None and len(thresholds) != len(metric):
                raise ValueError(f"thresholds must have one entry per metric ({len(metric)}), "
                                 f"got {list(thresholds)}")

    def _set_space(self, space: SearchSpace | Mapping[str, Any]) -> None:
        if isinstance(space, SearchSpace):
            self._space, self._constants = space, {}
        elif isinstance(space, Mapping):
            self._space, self._constants = tune_space(space)
        else:
            raise ValueError(f"space must be an ecopt.SearchSpace or a Tune param_space dict, "
                             f"got {type(space).__name__}")

    def set_search_properties(self, metric: str | None, mode: str | None, config: dict,
                              **spec: Any) -> bool:
        if self._space is not None:
            return False
        new_metric = [metric] if isinstance(metric, str) else metric
        new_mode = [mode] if isinstance(mode, str) else mode
        if new_metric:
            self._check_objectives(list(new_metric), list(new_mode) if new_mode else None,
                                   self._thresholds)
            self._metric = list(new_metric)  # type: ignore[assignment]
        if new_mode:
            self._mode = list(new_mode)  # type: ignore[assignment]
        self._set_space(config)
        return True

    @property
    def inner(self) -> QLogNEHVISampler:
        """The ecopt sampler that proposes (its ``last_timing``, ``describe()``...)."""
        return self._inner

    @property
    def records(self) -> list[TrialRecord]:
        """The finished trials as ecopt records (what the model learns from)."""
        return list(self._records)

    def _objectives(self) -> list[Objective]:
        metric, mode = self._metric, self._mode
        if not metric or not mode:
            raise ValueError("EcoptSearch needs metric= and mode= (one per objective): pass "
                             "them to EcoptSearch(...) or to tune.TuneConfig")
        self._check_objectives(list(metric), list(mode), self._thresholds)
        thresholds = self._thresholds or [None] * len(metric)
        return [Objective(n, d, t) for n, d, t in zip(metric, mode, thresholds)]

    # -- Tune's searcher API -------------------------------------------------------------
    def suggest(self, trial_id: str) -> dict[str, Any] | None:
        if self._space is None:
            raise ValueError("EcoptSearch has no search space: pass space= or a Tuner "
                             "param_space")
        objectives = self._objectives()
        number, self._next_number = self._next_number, self._next_number + 1
        pending = [p for _, p, _, _ in self._live.values()]
        if self._points:
            given = self._points.pop(0)
            params: Params = {n: self._space[n].validate(given[n], name=n) for n in self._space}
            by = "user"
        else:
            self._inner.bind(objectives, [], self.seed)
            proposal = self._inner.propose(self._space, self._records, pending, 1)[0]
            params, by = dict(proposal.params), proposal.proposed_by
        self._live[trial_id] = (number, params, by, _now_iso())
        return {**self._constants, **params}

    def on_trial_complete(self, trial_id: str, result: dict | None = None,
                          error: bool = False) -> None:
        live = self._live.pop(trial_id, None)
        if live is None:
            return  # not ours (or told twice)
        number, params, by, started_at = live
        result = dict(result or {})
        metric = list(self._metric or [])
        values = {m: result.get(m) for m in metric}
        phases = {name: PhaseRecord.from_dict(name, d) for name, d in _phases_in(result).items()}
        state, err = TrialState.COMPLETE, None
        if error or not all(_finite(v) for v in values.values()):
            state = TrialState.FAILED
            err = ErrorInfo("TuneTrialError", "the Tune trial raised an error" if error else
                            f"the trial's last result lacks finite values for {metric}: "
                            f"{values}", "")
        duration_s = float(result.get("time_total_s", 0.0) or 0.0)
        self._records.append(make_record(
            number=number, state=state, params=params,
            values={m: float(v) for m, v in values.items() if v is not None and _finite(v)}
            if state is TrialState.COMPLETE else {},
            phases=phases, started_at=started_at, duration_s=duration_s, proposed_by=by,
            error=err, user_attrs={"tune_trial_id": trial_id}))

    def add_evaluated_point(self, parameters: dict, value: float | list[float],
                            error: bool = False, pruned: bool = False,
                            intermediate_values: list[float] | None = None) -> None:
        metric = list(self._metric or [])
        vals = list(value) if isinstance(value, (list, tuple)) else [value]
        tid = f"evaluated-{self._next_number}"
        assert self._space is not None
        params = {n: self._space[n].validate(parameters[n], name=n) for n in self._space}
        self._live[tid] = (self._next_number, params, "user", _now_iso())
        self._next_number += 1
        self.on_trial_complete(tid, dict(zip(metric, vals)), error=error)

    # -- checkpoints -----------------------------------------------------------------------
    def get_state(self) -> dict:
        return {"records": [r.to_dict() for r in self._records], "live": dict(self._live),
                "next_number": self._next_number, "points": list(self._points),
                "metric": self._metric, "mode": self._mode, "space": self._space,
                "constants": self._constants}

    def set_state(self, state: dict) -> None:
        self._records = [TrialRecord.from_dict(d) for d in state["records"]]
        self._live = dict(state["live"])
        self._next_number = int(state["next_number"])
        self._points = list(state["points"])
        self._metric, self._mode = state["metric"], state["mode"]
        self._space, self._constants = state["space"], dict(state["constants"])

    def save(self, checkpoint_path: str) -> None:
        with open(checkpoint_path, "wb") as fh:
            pickle.dump(self.get_state(), fh)

    def restore(self, checkpoint_path: str) -> None:
        with open(checkpoint_path, "rb") as fh:
            self.set_state(pickle.load(fh))


class TunePhase:
    """What :func:`metered` yields: the phase's numbers once its block ended.

    Attributes:
        name: The phase name.
        samples: Items processed (``metered(name, samples=n)`` plus :meth:`add_samples`).
        record: The phase's :class:`~ecopt.trial.PhaseRecord` after the block.
    """

    def __init__(self, name: str, samples: int | None) -> None:
        self.name = name
        self.samples = samples
        self.record: PhaseRecord | None = None

    def add_samples(self, n: int) -> None:
        """Count ``n`` more items (when the count is known only inside the block)."""
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise ValueError(f"samples must be a non-negative integer, got {n!r}")
        self.samples = (self.samples or 0) + n

    def _closed(self) -> PhaseRecord:
        if self.record is None:
            raise ValueError(f"phase {self.name!r} is still open: its energy is known when "
                             "the with-block ends")
        return self.record

    @property
    def energy_j(self) -> float:
        return self._closed().energy_j

    @property
    def duration_s(self) -> float:
        return self._closed().duration_s

    @property
    def measured(self) -> bool:
        """Whether every component's joules were measured (``False``: an estimate)."""
        return self._closed().measured

    @property
    def samples_per_joule(self) -> float | None:
        """Items per joule (``None`` without a sample count or without energy)."""
        spj = self._closed().samples_per_joule
        return spj if spj is not None and math.isfinite(spj) else None

    @property
    def metrics(self) -> dict[str, Any]:
        """What to add to ``tune.report``: flat numbers, and the full phase record
        under ``ecopt.phase.<name>`` (EcoptSearch keeps it with the trial's record).
        """
        rec = self._closed()
        out: dict[str, Any] = {f"{self.name}_energy_j": rec.energy_j,
                               f"{self.name}_duration_s": rec.duration_s,
                               f"{self.name}_energy_measured": rec.measured,
                               f"{PHASE_PREFIX}{self.name}": rec.to_dict()}
        if self.samples_per_joule is not None:
            out[f"{self.name}_samples_per_joule"] = self.samples_per_joule
        return out

    def __repr__(self) -> str:
        if self.record is None:
            return f"TunePhase({self.name!r}, open)"
        return (f"TunePhase({self.name!r}, energy_j={self.record.energy_j:.4g}, "
                f"duration_s={self.record.duration_s:.4g}, samples={self.samples}, "
                f"measured={self.record.measured})")


@contextlib.contextmanager
def metered(name: str, samples: int | None = None,
            meter: str | Meter = "auto") -> Iterator[TunePhase]:
    """Meter a phase of a Tune trainable with ecopt's meters, in the trainable's process.

    Args:
        name: Phase name (``"train"``, ``"inference"``...).
        samples: Items the phase processes, for samples per joule.
        meter: A meter name (``"auto"``, ``"nvml"``, ``"rapl"``, ``"estimate"``...),
            built once per process, or an ecopt :class:`~ecopt.meters.Meter`.

    Yields:
        A :class:`TunePhase`; after the block its ``metrics`` go into ``tune.report``.

    Example:
        >>> def train(config):
        ...     model = fit(config)
        ...     with metered("inference", samples=len(X_test)) as phase:
        ...         acc = evaluate(model)
        ...     tune.report({"accuracy": acc, **phase.metrics})
    """
    if not isinstance(name, str) or not name or name != name.strip():
        raise ValueError(f"phase name must be a non-empty string without surrounding spaces, "
                         f"got {name!r}")
    phase = TunePhase(name, None)
    if samples is not None:
        phase.add_samples(samples)
    m = meter if isinstance(meter, Meter) else worker_meter(meter)
    handle = m.start()
    try:
        yield phase
    finally:
        window = m.stop(handle)
        if not (math.isfinite(window.duration_s) and window.duration_s >= 0 and all(
                math.isfinite(c.energy_j) and c.energy_j >= 0
                for c in window.components.values())):
            raise MeterError(f"meter {window.meter!r} returned a window with a non-finite or "
                             f"negative reading for phase {name!r}; nothing is recorded")
        phase.record = PhaseRecord(name, window, 1, phase.samples)
