"""The trial record: what the log keeps of a finished trial, and the one place a record is made.

Everything a study directory's ``trials.jsonl`` holds is a dataclass of this module:
:class:`TrialRecord` (one finished trial) with its :class:`PhaseRecord` windows
(each a :class:`Measurement` of :class:`ComponentEnergy` per component), its
learning curve (:class:`Intermediate`) and, when it failed, an
:class:`ErrorInfo`; :class:`TrialOutcome` is what running an objective produced
before a study turns it into a record.

Every record is made by :func:`make_record`, which checks each field against
the record's schema: a trial told to its study (:func:`ecopt._record.create_record`),
a log line read back (:meth:`TrialRecord.from_dict`), a transferred observation
(:mod:`ecopt.transfer`) and an imported Optuna trial. ``to_dict`` and
``from_dict`` follow the dataclass fields (each field's ``metadata`` says how it
is checked, written and read), so a new field is one line here. The JSON they
write is the format ``docs/trial-log.md`` describes, byte for byte what earlier
releases wrote.

This module is on the ground floor of the core: it imports nothing of ecopt
but :mod:`ecopt._types`, so the live trial, the storage, the samplers, the
meters and the reports all stand on it.
"""

from __future__ import annotations

import copy
import enum
import functools
import numbers
import traceback as _tb
from collections.abc import Callable, Mapping, Sequence
from dataclasses import MISSING, Field, dataclass, field, fields, replace
from typing import Any, Protocol

from ecopt._types import Params

__all__ = [
    "TrialState",
    "ComponentEnergy",
    "Measurement",
    "PhaseRecord",
    "Intermediate",
    "ErrorInfo",
    "TrialRecord",
    "TrialOutcome",
    "make_record",
    "merge_measurements",
    "with_state",
    "short_window",
    "excluded_reason",
    "EXCLUDED_SHORT_WINDOW",
    "DEFAULT_MIN_WINDOW_S",
    "FLAG_SHORT_WINDOW",
    "FLAG_AVERAGE_POWER",
    "FLAG_LOWER_BOUND",
]

#: The shortest window a meter resolves unless it says otherwise (:meth:`Meter.min_window_s`):
#: a CPU-time estimate or a counter read at both ends is good to a few milliseconds, so a
#: window of 10 ms or less gives a figure that is mostly noise.
DEFAULT_MIN_WINDOW_S = 0.01
#: The window was too short for the meter to resolve (see ``ecopt.meters.base.MIN_WINDOW_PERIODS``).
FLAG_SHORT_WINDOW = "short-window"
#: The energy was priced at a power reading averaged over longer than the window.
FLAG_AVERAGE_POWER = "average-power"
#: The energy is a lower bound (the counter restarted during the window).
FLAG_LOWER_BOUND = "lower-bound"

#: What reports say of a trial kept off the front because a figure came from a short window.
EXCLUDED_SHORT_WINDOW = "excluded: window too short for the meter"


# -- how a field is checked, written and read ---------------------------------------------
_KEY = "ecopt.record"


def _same(v: Any, what: str) -> Any:
    return v


def _copy(v: Any) -> Any:
    """A plain field's JSON: containers copied (tuples as lists), a state as its value."""
    kind = type(v)
    if kind is dict:
        return dict(v)
    if kind is list or kind is tuple:
        return list(v)
    if kind in (str, float, int, bool) or v is None:
        return v
    if isinstance(v, enum.Enum):
        return v.value
    if isinstance(v, Mapping):
        return dict(v)
    return list(v) if isinstance(v, (list, tuple)) else v


def _each(v: Any) -> Any:
    """The JSON of a field holding records: a dict or a sequence of them, or one (or None)."""
    if v is None:
        return None
    if isinstance(v, dict):
        return {k: x.to_dict() for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [x.to_dict() for x in v]
    return v.to_dict()


def _empty(v: Any) -> bool:
    return not v


def _none(v: Any) -> bool:
    return v is None


#: A :class:`_Spec` without a ``missing`` value (``dataclasses.MISSING`` would mean no default).
_UNSET: Any = object()


@dataclass(frozen=True)
class _Spec:
    """How one field of a record dataclass is checked, written and read (its ``metadata``).

    Attributes:
        read: JSON value -> field value (raises ``ValueError`` naming the field).
        check: A value given to :func:`make_record` -> the stored value
            (records only; raises ``ValueError`` naming the field).
        write: Field value -> JSON value.
        omit: Leave the key out of the JSON when this holds of the value.
        missing: The value when the key is absent or ``null`` (default: the
            field's default; a field without one is required).
        after: Derived figures (properties) written after this field, for
            readers of the file; ignored when read back. A field named here
            is written here instead of at its own place.
        flatten: The field's JSON object is merged into its parent's.
        written: ``False``: not in the JSON at all (given to ``from_dict``).
    """

    read: Callable[[Any, str], Any] = _same
    check: Callable[[Any, str], Any] = _same
    write: Callable[[Any], Any] = _copy
    omit: Callable[[Any], bool] | None = None
    missing: Any = _UNSET
    after: tuple[str, ...] = ()
    flatten: bool = False
    written: bool = True


def _io(**how: Any) -> dict[str, _Spec]:
    """A field's ``metadata``: how it is checked, written and read (see :class:`_Spec`)."""
    return {_KEY: _Spec(**how)}


_PLAIN = _Spec()


def _spec(f: Field[Any]) -> _Spec:
    return f.metadata.get(_KEY, _PLAIN)


_LAYOUTS: dict[type, tuple[tuple[str, _Spec | None], ...]] = {}


def _layout(cls: type) -> tuple[tuple[str, _Spec | None], ...]:
    """The keys of ``cls``'s JSON in the order they are written: ``(name, spec)`` per field
    (``spec`` ``None`` for a derived figure written after a field). Worked out once a class."""
    if cls not in _LAYOUTS:
        specs = {f.name: _spec(f) for f in fields(cls)}
        out: list[tuple[str, _Spec | None]] = []
        for name, spec in specs.items():
            for key in (name, *spec.after):
                if all(key != k for k, _ in out):
                    out.append((key, specs.get(key)))
        _LAYOUTS[cls] = tuple(out)
    return _LAYOUTS[cls]


@functools.cache
def _reading(cls: type) -> tuple[tuple[str, _Spec, bool], ...]:
    """``(name, spec, required)`` of each field of ``cls`` its JSON holds."""
    return tuple((f.name, _spec(f), f.default is MISSING and f.default_factory is MISSING)
                 for f in fields(cls) if _spec(f).written)


def _to_json(obj: Any) -> dict[str, Any]:
    """The JSON object of a record dataclass: its fields in order, each as its spec says."""
    out: dict[str, Any] = {}
    for name, spec in _layout(type(obj)):
        v = getattr(obj, name)
        if spec is None:  # a derived figure
            out[name] = v
        elif not spec.written or (spec.omit is not None and spec.omit(v)):
            continue
        elif spec.flatten:
            out.update(spec.write(v))
        else:
            out[name] = spec.write(v)
    return out


def _from_json(cls: type, d: Any, **given: Any) -> dict[str, Any]:
    """The keyword arguments of ``cls`` read from its JSON object ``d`` (``given`` as they are)."""
    if not isinstance(d, (dict, Mapping)):  # dict first: an ABC check costs more
        raise ValueError(f"a {cls.__name__} is a JSON object, got {type(d).__name__}")
    kw = dict(given)
    for name, spec, required in _reading(cls):
        if name in kw:
            continue
        raw = d if spec.flatten else d.get(name)
        if raw is None:
            if spec.missing is not _UNSET:
                kw[name] = copy.copy(spec.missing)
            elif required:
                raise ValueError(f"{name!r} is missing")
            continue
        kw[name] = spec.read(raw, name)
    return kw


# -- readers and checks of single values --------------------------------------------------
def _typed(kind: type) -> Callable[[Any, str], Any]:
    """A check that a value has type ``kind`` (a bool is not an int nor a float)."""

    def check(v: Any, what: str) -> Any:
        if not isinstance(v, kind) or (kind is not bool and isinstance(v, bool)):
            raise ValueError(f"{what!r} must be a {kind.__name__}, got {v!r}")
        return dict(v) if isinstance(v, dict) else v

    return check


def _number(v: Any, what: str) -> float:
    kind = type(v)
    if kind is float or kind is int:  # the usual case, before the ABC check
        return float(v)
    # Non-finite floats are stored as strings ("nan", "inf") to keep strict JSON.
    if isinstance(v, bool) or not isinstance(v, (numbers.Real, str)):
        raise ValueError(f"{what} must be a number, got {v!r}")
    try:
        return float(v)
    except ValueError:
        raise ValueError(f"{what} must be a number, got {v!r}") from None


def _numbers(v: Any, what: str) -> dict[str, float]:
    if not isinstance(v, (dict, Mapping)):
        raise ValueError(f"{what!r} must be a dict, got {v!r}")
    return {str(k): _number(x, f"{what}[{k!r}]") for k, x in v.items()}


def _float(v: Any, what: str) -> float:
    return float(v)


def _floats(v: Any, what: str) -> dict[str, float]:
    return {str(k): float(x) for k, x in dict(v).items()}


def _str(v: Any, what: str) -> str:
    return str(v)


def _bool(v: Any, what: str) -> bool:
    return bool(v)


def _int(v: Any, what: str) -> int:
    return int(v)


def _mapping(v: Any, what: str) -> dict[str, Any]:
    return dict(v)


def _integer(v: Any, what: str) -> int:
    if type(v) is int:
        return v
    if isinstance(v, bool) or not isinstance(v, numbers.Integral):
        raise ValueError(f"{what!r} must be an integer, got {v!r}")
    return int(v)


def _log_number(v: Any, what: str) -> int:
    """A stored record's number: ``>= 0`` (transferred observations, never stored, go below)."""
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise ValueError(f"{what!r} must be an integer >= 0, got {v!r}")
    return v


def _params(v: Any, what: str) -> Params:
    if not isinstance(v, (dict, Mapping)):
        raise ValueError(f"{what!r} must be a dict, got {v!r}")
    out: Params = {}
    for k, x in v.items():
        if type(x) in (str, float, int, bool):
            out[str(k)] = x
            continue
        if not isinstance(x, (str, int, float, bool)) and isinstance(x, numbers.Number) \
                and hasattr(x, "item"):
            x = x.item()  # a numpy scalar
        if not isinstance(x, (str, int, float, bool)):
            raise ValueError(f"param {k!r} must be a number, string or bool, got {x!r}")
        out[str(k)] = x
    return out


def _sequence_of(kind: type, what_items: str) -> Callable[[Any, str], tuple[Any, ...]]:
    def check(v: Any, what: str) -> tuple[Any, ...]:
        if isinstance(v, (str, bytes, Mapping)) or not isinstance(v, Sequence) or not all(
                isinstance(x, kind) for x in v):
            raise ValueError(f"{what!r} must be a list of {what_items}, got {v!r}")
        return tuple(v)

    return check


def _mapping_of(kind: type) -> Callable[[Any, str], dict[str, Any]]:
    def check(v: Any, what: str) -> dict[str, Any]:
        if not isinstance(v, Mapping) or not all(isinstance(x, kind) for x in v.values()):
            raise ValueError(f"{what!r} must be a dict of {kind.__name__}, got {v!r}")
        return dict(v)

    return check


# -- the energy of a window ---------------------------------------------------------------
@dataclass(frozen=True)
class ComponentEnergy:
    """Energy of one component over one window.

    Attributes:
        energy_j: Joules over the window (``>= 0``).
        source: Where the number came from, e.g. ``"nvml-energy-counter"``,
            ``"nvml-power-sampling"``, ``"rapl"``, ``"codecarbon-rapl"``,
            ``"estimate-cpu-time"``.
        measured: ``True`` only for hardware readings; estimates are ``False``.
        note: Anything a reader needs to trust the number (e.g. "window shorter
            than the counter's update period").
        flags: Machine-readable reasons to distrust the number (``FLAG_*``
            constants of this module, e.g. ``"short-window"``); empty when
            nothing is known against it. Reports keep flagged figures apart.
    """

    energy_j: float = field(metadata=_io(read=_float))
    source: str = field(metadata=_io(read=_str))
    measured: bool = field(metadata=_io(read=_bool))
    note: str | None = field(default=None, metadata=_io(omit=_empty))
    flags: tuple[str, ...] = field(default=(), metadata=_io(
        omit=_empty, read=lambda v, what: tuple(str(f) for f in v)))

    def to_dict(self) -> dict[str, Any]:
        return _to_json(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ComponentEnergy:
        return cls(**_from_json(cls, d))

    def merged(self, other: ComponentEnergy) -> ComponentEnergy:
        """This component summed with another window's (notes and flags kept from both)."""
        return ComponentEnergy(self.energy_j + other.energy_j, self.source,
                               self.measured and other.measured,
                               "; ".join(n for n in dict.fromkeys((self.note, other.note)) if n)
                               or None,
                               tuple(sorted(set(self.flags) | set(other.flags))))


@dataclass(frozen=True)
class Measurement:
    """What a meter says about one window.

    Attributes:
        duration_s: Wall-clock length of the window, seconds.
        components: Component name -> :class:`ComponentEnergy`.
        meter: Name of the meter that produced it.
        details: Settings that shaped the numbers (sampling period, constants
            of an estimate...), JSON-able.
        extras: Other readings over the window (e.g. ``co2_kg``), JSON-able.
    """

    # The file shows the totals and the meter right after the duration.
    duration_s: float = field(metadata=_io(read=_float, after=("energy_j", "measured", "meter")))
    components: dict[str, ComponentEnergy] = field(metadata=_io(
        missing={}, write=_each,
        read=lambda v, what: {k: ComponentEnergy.from_dict(c) for k, c in v.items()}))
    meter: str = field(metadata=_io(read=_str, missing="unknown"))
    details: dict[str, Any] = field(default_factory=dict, metadata=_io(read=_mapping))
    extras: dict[str, float] = field(default_factory=dict, metadata=_io(read=_floats))

    @property
    def energy_j(self) -> float:
        """Total joules over all components."""
        return float(sum(c.energy_j for c in self.components.values()))

    @property
    def measured(self) -> bool:
        """``True`` only when every component was measured (no estimate inside)."""
        return bool(self.components) and all(c.measured for c in self.components.values())

    @property
    def power_w(self) -> float:
        """Average power over the window, watts (0 for an empty window)."""
        return self.energy_j / self.duration_s if self.duration_s > 0 else 0.0

    @property
    def flags(self) -> tuple[str, ...]:
        """Every component's flags (sorted, once each): why a figure may not be trusted."""
        return tuple(sorted({f for c in self.components.values() for f in c.flags}))

    def to_dict(self) -> dict[str, Any]:
        return _to_json(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Measurement:
        return cls(**_from_json(cls, d))


def merge_measurements(a: Measurement, b: Measurement) -> Measurement:
    """Sum two windows of the same phase (durations and per-component joules)."""
    comps = dict(a.components)
    for k, c in b.components.items():
        if k in comps:
            comps[k] = comps[k].merged(c)
        else:
            comps[k] = c
    extras = dict(a.extras)
    for k, v in b.extras.items():
        extras[k] = extras.get(k, 0.0) + v
    return Measurement(a.duration_s + b.duration_s, comps, a.meter, a.details, extras)


# -- the parts of a record ----------------------------------------------------------------
class TrialState(str, enum.Enum):
    """Where a trial ended. ``RUNNING`` exists only for live handles.

    ``PRUNED``: stopped early on purpose (the objective raised
    :class:`~ecopt.TrialPruned`, usually because :meth:`Trial.should_stop` said
    so); its last reported values and its energy are kept, and it never enters
    the front.
    """

    RUNNING = "running"
    COMPLETE = "complete"
    FAILED = "failed"
    INFEASIBLE = "infeasible"
    PRUNED = "pruned"


@dataclass(frozen=True)
class PhaseRecord:
    """Duration and energy of one named phase of a trial (summed over its windows).

    In the log a phase is its measurement's JSON object with ``count`` and
    ``samples`` added, under its name in the record's ``phases``.

    Attributes:
        name: Phase name (``"train"``, ``"inference"``...).
        measurement: Summed :class:`Measurement` over every window of this phase.
        count: How many windows were opened under this name.
        samples: Items processed in the phase (samples, tokens...), if given.
    """

    name: str = field(metadata=_io(written=False))
    measurement: Measurement = field(metadata=_io(
        flatten=True, write=_each, read=lambda v, what: Measurement.from_dict(v)))
    count: int = field(default=1, metadata=_io(read=_int))
    samples: int | None = field(default=None, metadata=_io(omit=_none, read=_int))

    @property
    def duration_s(self) -> float:
        return self.measurement.duration_s

    @property
    def energy_j(self) -> float:
        return self.measurement.energy_j

    @property
    def measured(self) -> bool:
        return self.measurement.measured

    @property
    def short_window(self) -> bool:
        """Whether a window of this phase was too short for its meter (flag ``short-window``).

        Its joules, and figures drawn from them (samples/J), are then mostly
        meter noise.
        """
        return FLAG_SHORT_WINDOW in self.measurement.flags

    @property
    def samples_per_joule(self) -> float | None:
        """``samples / energy_j`` when both are known and energy is positive."""
        if self.samples is None or self.energy_j <= 0:
            return None
        return self.samples / self.energy_j

    def to_dict(self) -> dict[str, Any]:
        return _to_json(self)

    @classmethod
    def from_dict(cls, name: str, d: Mapping[str, Any]) -> PhaseRecord:
        return cls(**_from_json(cls, d, name=name))


@dataclass(frozen=True)
class Intermediate:
    """One intermediate report of a running trial (a point of its learning curve).

    Attributes:
        step: The step it was reported at (epoch, evaluation...), strictly
            increasing within a trial.
        values: Metric name -> value observed at that step (objectives the
            trial can observe mid-run, and any other metric).
        energy_j: Joules of every phase of the trial up to this report.
        duration_s: Seconds since the trial started.
        measured: Whether all of that energy was measured (no estimate in it);
            ``False`` also when no energy was known yet.
    """

    step: int = field(metadata=_io(read=_int))
    values: dict[str, float] = field(metadata=_io(read=_floats))
    energy_j: float = field(metadata=_io(read=_float, missing=0.0))
    duration_s: float = field(metadata=_io(read=_float, missing=0.0))
    measured: bool = field(default=False, metadata=_io(read=_bool))

    def to_dict(self) -> dict[str, Any]:
        return _to_json(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Intermediate:
        return cls(**_from_json(cls, d))


@dataclass(frozen=True)
class ErrorInfo:
    """Why a trial failed: exception type, message and formatted traceback."""

    type: str = field(metadata=_io(read=_str))
    message: str = field(metadata=_io(read=_str))
    traceback: str = field(default="", metadata=_io(read=_str))

    @classmethod
    def from_exception(cls, exc: BaseException) -> ErrorInfo:
        return cls(type(exc).__name__, str(exc),
                   "".join(_tb.format_exception(type(exc), exc, exc.__traceback__)))

    def to_dict(self) -> dict[str, Any]:
        return _to_json(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ErrorInfo:
        return cls(**_from_json(cls, d))


# -- the record ---------------------------------------------------------------------------
_FINISHED = [st.value for st in TrialState if st is not TrialState.RUNNING]


def _state(v: Any, what: str) -> TrialState:
    if isinstance(v, str) and v in _FINISHED:
        return TrialState(v)
    raise ValueError(f"{what!r} must be one of {_FINISHED}, got {v!r}")


def _read_error(v: Any, what: str) -> ErrorInfo | None:
    if not (isinstance(v, Mapping) and all(
            isinstance(v.get(k, ""), str) for k in ("type", "message", "traceback"))):
        raise ValueError(f"{what!r} must be null or {{type, message, traceback}} strings, "
                         f"got {v!r}")
    if not v:
        return None
    return ErrorInfo(str(v.get("type", "")), str(v.get("message", "")),
                     str(v.get("traceback", "")))


def _check_error(v: Any, what: str) -> ErrorInfo | None:
    if v is not None and not isinstance(v, ErrorInfo):
        raise ValueError(f"{what!r} must be None or an ErrorInfo, got {v!r}")
    return v


def _read_phases(v: Any, what: str) -> dict[str, PhaseRecord]:
    if not isinstance(v, dict):
        raise ValueError(f"{what!r} must be a dict, got {v!r}")
    try:
        return {str(k): PhaseRecord.from_dict(str(k), p) for k, p in v.items()}
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ValueError(f"{what!r} is malformed: {exc}") from None


def _read_curve(v: Any, what: str) -> tuple[Intermediate, ...]:
    if not isinstance(v, list):
        raise ValueError(f"{what!r} must be a list, got {v!r}")
    try:
        return tuple(Intermediate.from_dict(i) for i in v)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ValueError(f"{what!r} is malformed: {exc}") from None


def _read_names(v: Any, what: str) -> tuple[str, ...]:
    if not isinstance(v, list) or not all(isinstance(u, str) for u in v):
        raise ValueError(f"{what!r} must be a list of phase names, got {v!r}")
    return tuple(v)


_STR = _typed(str)
_DICT = _typed(dict)


@dataclass(frozen=True, kw_only=True)
class TrialRecord:
    """One finished trial, exactly as stored in ``trials.jsonl``.

    Made by :func:`make_record` (which checks every field) and read back with
    :meth:`from_dict`; fields are given by keyword.

    Attributes:
        number: 0-based trial number, unique within the study (transferred
            observations of other studies, never stored, are numbered below 0).
        state: ``complete``, ``failed``, ``infeasible`` or ``pruned``.
        params: The configuration.
        values: Objective name -> value (complete trials; a pruned trial keeps
            the objectives of its last report).
        metrics: Other numbers the objective returned (constraint metrics too).
        feasible: ``False`` when a complete trial broke a constraint.
        phases: Phase name -> :class:`PhaseRecord`.
        started_at: ISO 8601 UTC start time.
        duration_s: Wall-clock seconds from start to end.
        proposed_by: ``sobol``, ``random``, ``grid``, ``qlognehvi``, ``user``...
        proposal: What the sampler recorded about the proposal (reference
            point, number of observations...).
        error: Why it failed or was infeasible, else ``None``.
        host, worker, device: Where it ran.
        noise: Metric -> standard deviation of the reported value, if known.
        user_attrs: Free JSON-able annotations.
        intermediate: The learning curve the trial reported
            (:meth:`Trial.report`), in step order.
        unreliable: Phases flagged ``short-window`` (shorter than their
            meter resolves) that the trial's returned figures were drawn from
            (:meth:`Trial.samples_per_joule`, :meth:`Trial.energy_j`... of
            that phase). Such a trial is kept off the front, the knee, the
            best-of and the payback (:func:`excluded_reason` says why).
    """

    number: int = field(metadata=_io(read=_log_number, check=_integer))
    state: TrialState = field(metadata=_io(check=_state))
    params: Params = field(metadata=_io(read=_DICT, check=_params))
    values: dict[str, float] = field(default_factory=dict, metadata=_io(check=_numbers))
    metrics: dict[str, float] = field(default_factory=dict, metadata=_io(check=_numbers))
    feasible: bool = field(default=True, metadata=_io(check=_typed(bool)))
    # The file shows the trial's total joules right after its phases.
    phases: dict[str, PhaseRecord] = field(default_factory=dict, metadata=_io(
        read=_read_phases, check=_mapping_of(PhaseRecord), write=_each, after=("energy_j",)))
    started_at: str = field(default="", metadata=_io(check=_STR))
    duration_s: float = field(default=0.0, metadata=_io(check=_number))
    proposed_by: str = field(default="user", metadata=_io(check=_STR))
    proposal: dict[str, Any] = field(default_factory=dict, metadata=_io(check=_DICT))
    error: ErrorInfo | None = field(default=None, metadata=_io(
        read=_read_error, check=_check_error, write=_each))
    host: str = field(default="", metadata=_io(check=_STR))
    worker: str = field(default="", metadata=_io(check=_STR))
    device: str = field(default="", metadata=_io(check=_STR))
    noise: dict[str, float] = field(default_factory=dict, metadata=_io(check=_numbers))
    user_attrs: dict[str, Any] = field(default_factory=dict, metadata=_io(check=_DICT))
    intermediate: tuple[Intermediate, ...] = field(default=(), metadata=_io(
        omit=_empty, write=_each, read=_read_curve,
        check=_sequence_of(Intermediate, "Intermediate")))
    unreliable: tuple[str, ...] = field(default=(), metadata=_io(
        omit=_empty, read=_read_names, check=_sequence_of(str, "phase names")))

    @property
    def energy_j(self) -> float:
        """Total joules over every phase."""
        return float(sum(p.energy_j for p in self.phases.values()))

    @property
    def measured(self) -> bool:
        """Whether every phase's energy was measured (no estimate in it)."""
        return bool(self.phases) and all(p.measured for p in self.phases.values())

    @property
    def interrupted(self) -> bool:
        """Whether the trial failed because its process stopped (kill, Ctrl-C, lost worker)."""
        return self.state is TrialState.FAILED and self.error is not None and \
            self.error.type in ("Interrupted", "KeyboardInterrupt", "WorkerLost")

    def value(self, name: str) -> float:
        """An objective value or other metric by name."""
        if name in self.values:
            return self.values[name]
        return self.metrics[name]

    def to_dict(self) -> dict[str, Any]:
        """The record's JSON object, as one line of ``trials.jsonl`` holds it."""
        return _to_json(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> TrialRecord:
        """A record from its JSON object, checked field by field.

        Raises:
            ValueError: naming the first field that does not fit the record
                schema (wrong type, a state that is not a finished one...).
        """
        if not isinstance(d, Mapping):
            raise ValueError(f"a record is a JSON object, got {type(d).__name__}")
        return make_record(**_from_json(cls, d))


def make_record(**values: Any) -> TrialRecord:
    """A :class:`TrialRecord`, every field checked against the record's schema: the one constructor.

    Args:
        **values: Fields of :class:`TrialRecord` by name (``number`` and
            ``state`` required; the others default). Containers are copied
            (a record shares nothing with its caller), sequences become
            tuples, a state may be given by its value (``"complete"``), and
            numpy scalars in ``params`` become Python numbers.

    Returns:
        The record.

    Raises:
        TypeError: for a name that is not a field, or a missing ``number`` or
            ``state``.
        ValueError: naming the field whose value does not fit.

    Example:
        >>> make_record(number=0, state="complete", params={"x": 0.5}, values={"f": 1.0})
        TrialRecord(number=0, state=<TrialState.COMPLETE: 'complete'>, ...)
    """
    checks = _checks()
    if not values.keys() <= checks.keys():
        raise TypeError(f"make_record() got unknown field(s) {sorted(values.keys() - checks)}; "
                        f"a TrialRecord has {list(checks)}")
    for name, (check, required) in checks.items():
        if name in values:
            values[name] = check(values[name], name)
        elif required:
            raise TypeError(f"make_record() needs {name!r}")
    return TrialRecord(**values)


@functools.cache
def _checks() -> dict[str, tuple[Callable[[Any, str], Any], bool]]:
    """Each field of :class:`TrialRecord`: its check, and whether it is required."""
    return {f.name: (_spec(f).check, f.default is MISSING and f.default_factory is MISSING)
            for f in fields(TrialRecord)}


def with_state(record: TrialRecord, **changes: Any) -> TrialRecord:
    """A copy of a record with fields changed (records are frozen)."""
    return replace(record, **changes)


def short_window(record: TrialRecord) -> list[str]:
    """The phases of a record flagged ``short-window`` (too short for their meter)."""
    return [k for k, p in record.phases.items() if p.short_window]


def excluded_reason(record: TrialRecord) -> str | None:
    """Why a record is kept off the front (its figures are meter noise), or ``None``.

    Example: ``"excluded: window too short for the meter (phase 'inference': 3.54 ms,
    the meter resolves 10 ms)"``.
    """
    if not record.unreliable:
        return None
    parts = []
    for name in record.unreliable:
        p = record.phases.get(name)
        if p is None:
            parts.append(f"phase {name!r}")
            continue
        least = p.measurement.details.get("min_window_s")
        res = f", the meter resolves {float(least) * 1000:.3g} ms" if isinstance(
            least, (int, float)) and not isinstance(least, bool) else ""
        parts.append(f"phase {name!r}: {p.duration_s * 1000:.3g} ms"
                     + (f" over {p.count} windows" if p.count > 1 else "") + res)
    return f"{EXCLUDED_SHORT_WINDOW} ({'; '.join(parts)})"


# -- what running an objective produced ---------------------------------------------------
class LiveTrial(Protocol):
    """What :meth:`TrialOutcome.of` reads of a running trial (:class:`ecopt.Trial` is one)."""

    number: int
    phases: dict[str, PhaseRecord]
    metrics: dict[str, float]
    noise: dict[str, float]
    user_attrs: dict[str, Any]
    started_at: str

    @property
    def intermediate(self) -> Sequence[Intermediate]: ...

    def duration_s(self, phase: str | None = None) -> float: ...

    def unreliable_phases(self) -> list[str]: ...


@dataclass(frozen=True, kw_only=True)
class TrialOutcome:
    """What running an objective produced, before the study validates it into a record.

    Picklable, so executors can send it back from another process. Built from
    the live trial with :meth:`of` (what it measured, and how it ended); only
    an outcome with no trial to take it from (a worker that could not even
    unpickle one) is built field by field, by keyword.

    Attributes:
        number: The trial number.
        returned: What the objective returned (validated by the study).
        phases, metrics, noise, user_attrs, intermediate: What the trial
            recorded (see :class:`TrialRecord`).
        started_at: ISO 8601 UTC start time.
        duration_s: Seconds the trial ran.
        error: Why it failed, else ``None``.
        infeasible: It ran out of memory or raised :class:`~ecopt.Infeasible`.
        pruned: It raised :class:`~ecopt.TrialPruned`.
        host, worker, device: Where it ran.
        unreliable: Flagged phases whose figures the objective read
            (:meth:`Trial.unreliable_phases`).
    """

    number: int
    returned: Any = None
    phases: dict[str, PhaseRecord] = field(default_factory=dict)
    metrics: dict[str, float] = field(default_factory=dict)
    noise: dict[str, float] = field(default_factory=dict)
    user_attrs: dict[str, Any] = field(default_factory=dict)
    started_at: str = ""
    duration_s: float = 0.0
    error: ErrorInfo | None = None
    infeasible: bool = False
    host: str = ""
    worker: str = ""
    device: str = ""
    intermediate: tuple[Intermediate, ...] = ()
    pruned: bool = False
    unreliable: tuple[str, ...] = ()

    @classmethod
    def of(cls, trial: LiveTrial, *, returned: Any = None, error: ErrorInfo | None = None,
           infeasible: bool = False, pruned: bool = False, started_at: str | None = None,
           duration_s: float | None = None, host: str = "", worker: str = "",
           device: str = "") -> TrialOutcome:
        """The outcome of ``trial`` as it stands: everything it measured, and how it ended.

        Args:
            trial: The live trial (its phases, metrics, noise, user attributes
                and reports are copied).
            returned: What the objective returned.
            error: Why it failed (``None``: it returned).
            infeasible: It ran out of memory / was infeasible.
            pruned: It was stopped by its pruner.
            started_at: Default: the trial's start time.
            duration_s: Default: seconds since the trial started.
            host, worker, device: Where it ran, when known.
        """
        return cls(number=trial.number, returned=returned, phases=dict(trial.phases),
                   metrics=dict(trial.metrics), noise=dict(trial.noise),
                   user_attrs=dict(trial.user_attrs),
                   started_at=trial.started_at if started_at is None else started_at,
                   duration_s=trial.duration_s() if duration_s is None else float(duration_s),
                   error=error, infeasible=infeasible, pruned=pruned, host=host, worker=worker,
                   device=device, intermediate=tuple(trial.intermediate),
                   unreliable=tuple(trial.unreliable_phases()))
