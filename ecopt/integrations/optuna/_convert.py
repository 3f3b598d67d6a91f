"""Optuna's distributions and trials in ecopt's terms (shared by the sampler and the import).

Two directions of one mapping:

* :func:`sampler_space`: the relative search space of an Optuna study as an
  ecopt :class:`~ecopt.SearchSpace` the qLogNEHVI sampler can search, and a
  :class:`Codec` per parameter to carry values both ways. Nothing is lost:
  a float with ``step`` becomes an integer index axis, a categorical an
  unordered axis over choice indices (so ``None`` or a tuple of choices work).
* :func:`import_space`: the union of every trial's distributions as the space
  written to an imported study's ``study.json`` (plain ecopt parameters; what
  does not fit is said in the notes).

:func:`trial_record` turns one finished :class:`optuna.trial.FrozenTrial` into
an ecopt :class:`~ecopt.trial.TrialRecord` (values, constraints, phases metered
by :func:`ecopt.integrations.optuna.metered`, learning curve, error).
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ecopt._types import ParamValue, Params
from ecopt.space import Categorical, Fixed, Float, Int, Parameter, SearchSpace
from ecopt.record import (
    ErrorInfo,
    Intermediate,
    PhaseRecord,
    TrialRecord,
    TrialState,
    make_record,
)

if TYPE_CHECKING:
    from optuna.distributions import BaseDistribution
    from optuna.trial import FrozenTrial

__all__ = ["Codec", "sampler_space", "trial_record", "objective_names",
           "PHASE_PREFIX", "PROPOSED_BY_KEY", "RELATIVE_PARAMS_KEY", "ERROR_KEY", "CONSTRAINT_PREFIX",
           "constraint_values", "phases_of", "is_out_of_memory_reason", "utc_iso",
           "import_space", "imported_params", "ImportedParam"]

#: User-attribute key prefix of a phase metered by :func:`~ecopt.integrations.optuna.metered`.
PHASE_PREFIX = "ecopt.phase."
#: System attributes the sampler writes on each trial it proposes for.
RELATIVE_PARAMS_KEY = "ecopt:relative_params"
PROPOSED_BY_KEY = "ecopt:proposed_by"
PROPOSAL_KEY = "ecopt:proposal"
#: User attribute :func:`~ecopt.integrations.optuna.metered` writes when its block raised
#: (Optuna 5 keeps no failure reason): ``{"type", "message", "phase", "out_of_memory"}``.
ERROR_KEY = "ecopt.error"
#: ecopt metric name of Optuna constraint ``key``: ``constraint_<key>`` (feasible when <= 0).
CONSTRAINT_PREFIX = "constraint_"

_OOM = re.compile(r"OutOfMemoryError|MemoryError|out of memory|can't allocate memory",
                  re.IGNORECASE)
_ERROR_TYPE = re.compile(r"following error: ([A-Za-z_][\w.]*)\(")


@dataclass(frozen=True)
class Codec:
    """How one Optuna distribution maps to an ecopt dimension and back.

    Attributes:
        name: The parameter name.
        distribution: The Optuna distribution.
        parameter: The ecopt dimension the sampler searches.
        kind: ``float``, ``int``, ``float_step`` (an index over the step grid)
            or ``categorical`` (an index over the choices).
    """

    name: str
    distribution: Any
    parameter: Parameter
    kind: str

    def to_ecopt(self, value: Any) -> ParamValue:
        """An Optuna parameter value (external form) as the ecopt value.

        Raises:
            ValueError: when ``value`` is not in the distribution.
        """
        d = self.distribution
        if self.kind == "categorical":
            return int(d.to_internal_repr(value))
        if self.kind == "float_step":
            v = float(value)
            return int(round((v - d.low) / d.step))
        if self.kind == "int":
            return int(value)
        return float(value)

    def to_optuna(self, value: ParamValue) -> Any:
        """An ecopt value back in the distribution's external form."""
        d = self.distribution
        if self.kind == "categorical":
            return d.choices[int(value)]
        if self.kind == "float_step":
            # The same rounding as Optuna's own step grid (low + k * step, never above high).
            return float(min(d.high, d.low + int(value) * d.step))
        if self.kind == "int":
            return int(value)
        return float(value)


def sampler_space(search_space: Mapping[str, BaseDistribution]
                  ) -> tuple[SearchSpace, dict[str, Codec]]:
    """The ecopt space the sampler searches for an Optuna relative search space.

    Args:
        search_space: Name -> Optuna distribution, none of them ``single()``.

    Raises:
        ValueError: for a distribution type ecopt cannot search.
    """
    from optuna.distributions import (
        CategoricalDistribution,
        FloatDistribution,
        IntDistribution,
    )

    codecs: dict[str, Codec] = {}
    for name, d in search_space.items():
        if isinstance(d, FloatDistribution):
            if d.step is None:
                codecs[name] = Codec(name, d, Float(d.low, d.high, log=d.log), "float")
            else:
                k = int(round((d.high - d.low) / d.step))
                codecs[name] = Codec(name, d, Int(0, max(k, 1)), "float_step")
        elif isinstance(d, IntDistribution):
            codecs[name] = Codec(name, d, Int(d.low, d.high, log=d.log, step=d.step), "int")
        elif isinstance(d, CategoricalDistribution):
            n = len(d.choices)
            codecs[name] = Codec(name, d, Categorical(list(range(n))), "categorical")
        else:
            raise ValueError(f"parameter {name!r}: Optuna distribution {d!r} has no ecopt "
                             "counterpart (expected Float-, Int- or CategoricalDistribution)")
    return SearchSpace({n: c.parameter for n, c in codecs.items()}), codecs


def objective_names(n: int, metric_names: Sequence[str] | None = None,
                    given: Sequence[str] | None = None) -> list[str]:
    """Objective names: ``given``, else Optuna's ``metric_names``, else ``objective_<i>``.

    Raises:
        ValueError: when ``given`` has another length than the study's directions,
            or names repeat.
    """
    if given is not None:
        names = [str(g).strip() for g in given]
        if len(names) != n:
            raise ValueError(f"--objectives must name each of the study's {n} objective(s), "
                             f"got {len(names)}: {names}")
    elif metric_names:
        names = [str(m) for m in metric_names]
    else:
        names = [f"objective_{i}" for i in range(n)]
    if len(set(names)) != len(names) or any(not s for s in names):
        raise ValueError(f"objective names must be distinct and non-empty, got {names}")
    return names


def constraint_values(trial: FrozenTrial) -> dict[str, float]:
    """Optuna's constraint values of a trial (``trial.constraints``; old list format too)."""
    try:
        cons = trial.constraints
    except AttributeError:  # pragma: no cover - Optuna < 5: a list under system_attrs
        raw = trial.system_attrs.get("constraints") or ()
        cons = {str(i): c for i, c in enumerate(raw)}
    return {str(k): float(v) for k, v in dict(cons).items()}


def phases_of(user_attrs: Mapping[str, Any]) -> dict[str, PhaseRecord]:
    """The phases :func:`~ecopt.integrations.optuna.metered` recorded in user attributes.

    A malformed entry (edited by hand) is left out; the attribute itself stays a
    user attribute of the imported trial.
    """
    out: dict[str, PhaseRecord] = {}
    for key, value in user_attrs.items():
        if not key.startswith(PHASE_PREFIX) or not isinstance(value, Mapping):
            continue
        name = key[len(PHASE_PREFIX):]
        try:
            out[name] = PhaseRecord.from_dict(name, value)
        except (KeyError, TypeError, ValueError, AttributeError):
            continue
    return out


def is_out_of_memory_reason(reason: str | None) -> bool:
    """Whether Optuna's ``fail_reason`` says the configuration ran out of memory."""
    return bool(reason) and _OOM.search(str(reason)) is not None


def utc_iso(t: _dt.datetime | None) -> str:
    if t is None:
        return ""
    if t.tzinfo is None:  # Optuna stores naive local times
        t = t.astimezone()
    return t.astimezone(_dt.timezone.utc).isoformat(timespec="milliseconds")


def _finite(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def trial_record(trial: FrozenTrial, names: Sequence[str],
                 params: Callable[[FrozenTrial], Params | None],
                 ) -> TrialRecord | None:
    """One finished Optuna trial as an ecopt record (``None``: not finished, or params
    that ``params`` cannot express).

    Args:
        trial: A COMPLETE, FAIL or PRUNED trial.
        names: The objectives' names, in the study's direction order.
        params: Turns the trial into ecopt params (``None`` to leave it out).

    States: COMPLETE -> complete (``feasible`` from Optuna's constraints, each
    kept as metric ``constraint_<key>``); FAIL -> failed, or infeasible when
    Optuna's ``fail_reason`` says the trial ran out of memory; PRUNED -> pruned
    (with its values when Optuna kept some). A complete trial whose values are
    missing or not finite is recorded failed (no sampler can model it).
    """
    from optuna.trial import TrialState as OState

    if trial.state not in (OState.COMPLETE, OState.FAIL, OState.PRUNED):
        return None
    p = params(trial)
    if p is None:
        return None
    cons = constraint_values(trial)
    metrics = {f"{CONSTRAINT_PREFIX}{k}": v for k, v in cons.items()}
    feasible = all(v <= 0 for v in cons.values())
    values: dict[str, float] = {}
    raw = list(trial.values) if trial.values is not None else []
    if len(raw) == len(names):
        values = {n: float(v) for n, v in zip(names, raw)}
    error: ErrorInfo | None = None
    reason = trial.system_attrs.get("fail_reason")
    if trial.state is OState.COMPLETE:
        state = TrialState.COMPLETE
        if not values or not all(_finite(v) for v in values.values()):
            state = TrialState.FAILED
            error = ErrorInfo("NonFiniteValues", f"Optuna recorded values {raw!r}; a model "
                              "cannot use a missing or infinite objective value")
    elif trial.state is OState.PRUNED:
        state = TrialState.PRUNED
        error = ErrorInfo("TrialPruned", "pruned in Optuna")
    else:
        seen = trial.user_attrs.get(ERROR_KEY)
        seen = seen if isinstance(seen, Mapping) else {}
        oom = is_out_of_memory_reason(reason) or bool(seen.get("out_of_memory"))
        state = TrialState.INFEASIBLE if oom else TrialState.FAILED
        m = _ERROR_TYPE.search(str(reason or ""))
        if reason:
            error = ErrorInfo(m.group(1) if m else str(seen.get("type", "Failed")), str(reason))
        elif seen:
            error = ErrorInfo(str(seen.get("type", "Failed")),
                              f"raised in phase {seen.get('phase')!r}: {seen.get('message', '')}")
        else:
            error = ErrorInfo("Failed", "failed in Optuna (Optuna keeps no reason; an "
                              "exception inside metered() would have been noted)")
    curve: list[Intermediate] = []
    if len(names) == 1:
        for step, v in sorted(trial.intermediate_values.items()):
            if _finite(v) and step >= 0:
                curve.append(Intermediate(int(step), {names[0]: float(v)}, 0.0, 0.0, False))
    start, end = trial.datetime_start, trial.datetime_complete
    duration = (end - start).total_seconds() if start is not None and end is not None else 0.0
    proposed_by = trial.system_attrs.get(PROPOSED_BY_KEY)
    if not isinstance(proposed_by, str):
        proposed_by = "user" if "fixed_params" in trial.system_attrs else "optuna"
    proposal = trial.system_attrs.get(PROPOSAL_KEY)
    user_attrs = {k: v for k, v in trial.user_attrs.items() if not k.startswith(PHASE_PREFIX)}
    return make_record(
        number=int(trial.number), state=state, params=p, values=values, metrics=metrics,
        feasible=feasible, phases=phases_of(trial.user_attrs), started_at=utc_iso(start),
        duration_s=max(0.0, duration), proposed_by=proposed_by,
        proposal=dict(proposal) if isinstance(proposal, Mapping) else {}, error=error,
        user_attrs=_jsonable(user_attrs), intermediate=tuple(curve))


def _jsonable(d: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        try:
            json.dumps(v)
            out[str(k)] = v
        except (TypeError, ValueError):
            out[str(k)] = repr(v)
    return out


# -- the space of an imported study --------------------------------------------------------
@dataclass
class ImportedParam:
    """One parameter of an imported study: its ecopt dimension and how values map."""

    parameter: Parameter
    mapping: dict[Any, ParamValue]  # Optuna categorical choice -> stored value (if renamed)


def _choice_key(c: Any) -> Any:
    return (type(c).__name__, repr(c))


def import_space(trials: Sequence[FrozenTrial]) -> tuple[SearchSpace | None,
                                                         dict[str, ImportedParam], list[str]]:
    """The space of an imported study: every parameter any trial has, and notes.

    Where trials used different distributions for one name, the ranges are
    joined (bounds widened, choices united). Returns ``(space or None when no
    trial has a parameter, name -> ImportedParam, notes)``.
    """
    from optuna.distributions import (
        CategoricalDistribution,
        FloatDistribution,
        IntDistribution,
    )

    seen: dict[str, list[Any]] = {}
    for t in trials:
        for name, d in t.distributions.items():
            lst = seen.setdefault(name, [])
            if d not in lst:
                lst.append(d)
    notes: list[str] = []
    out: dict[str, ImportedParam] = {}
    for name, dists in seen.items():
        kinds = {type(d) for d in dists}
        if len(dists) > 1:
            notes.append(f"parameter {name!r} had {len(dists)} different distributions across "
                         "trials; imported as one dimension spanning all of them")
        if kinds == {FloatDistribution} or kinds == {FloatDistribution, IntDistribution}:
            low = min(d.low for d in dists)
            high = max(d.high for d in dists)
            log = all(d.log for d in dists)
            steps = {d.step for d in dists}
            if kinds == {FloatDistribution} and steps != {None}:
                notes.append(f"parameter {name!r}: Optuna's step "
                             f"{sorted(s for s in steps if s is not None)} is not kept (ecopt "
                             "Float has no step); imported as a continuous Float")
            out[name] = ImportedParam(Float(low, high, log=log) if low < high else Fixed(low),
                                      {})
        elif kinds == {IntDistribution}:
            low = min(d.low for d in dists)
            high = max(d.high for d in dists)
            log = all(d.log for d in dists)
            steps = {d.step for d in dists}
            step = steps.pop() if len(steps) == 1 else 1
            if low == high:
                out[name] = ImportedParam(Fixed(int(low)), {})
            else:
                if (high - low) % step:
                    step = 1
                out[name] = ImportedParam(Int(int(low), int(high), log=log and step == 1,
                                              step=int(step)), {})
        elif kinds == {CategoricalDistribution}:
            choices: list[Any] = []
            keys: list[Any] = []
            for d in dists:
                for c in d.choices:
                    if _choice_key(c) not in keys:
                        keys.append(_choice_key(c))
                        choices.append(c)
            mapping: dict[Any, ParamValue] = {}
            stored: list[ParamValue] = []
            for c in choices:
                ok = isinstance(c, (str, int, float, bool)) and c != "" and not (
                    isinstance(c, float) and not math.isfinite(c))
                v: ParamValue = c if ok else repr(c)
                if not ok:
                    mapping[_choice_key(c)] = v
                stored.append(v)
            if mapping:
                notes.append(f"parameter {name!r}: choice(s) "
                             f"{[c for c in choices if _choice_key(c) in mapping]!r} are not "
                             "JSON strings or numbers; stored as their repr()")
            if len({repr(s) for s in stored}) != len(stored):
                stored = [repr(c) for c in choices]
                mapping = {_choice_key(c): repr(c) for c in choices}
                notes.append(f"parameter {name!r}: choices collide once stored; all stored "
                             "as repr()")
            out[name] = ImportedParam(Categorical(stored) if len(stored) > 1
                                      else Fixed(stored[0]), mapping)
        else:
            notes.append(f"parameter {name!r}: distributions {sorted(k.__name__ for k in kinds)}"
                         " cannot be joined into one ecopt dimension; left out of the space "
                         "(the values stay in each trial's user_attrs['optuna_params'])")
    if not out:
        return None, out, notes
    return SearchSpace({n: p.parameter for n, p in out.items()}), out, notes


def imported_params(values: Mapping[str, Any], params: Mapping[str, ImportedParam]) -> Params:
    """Optuna param values in the imported space's terms (only the names it has)."""
    out: Params = {}
    for name, value in values.items():
        ip = params.get(name)
        if ip is None:
            continue
        if ip.mapping and _choice_key(value) in ip.mapping:
            out[name] = ip.mapping[_choice_key(value)]
        elif isinstance(ip.parameter, Int):
            out[name] = int(value)
        elif isinstance(ip.parameter, Float):
            out[name] = float(value)
        else:
            out[name] = value
    return out
