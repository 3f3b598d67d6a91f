"""Trials: the live handle an objective receives, and the frozen record the log keeps.

The split follows Optuna's Trial / FrozenTrial: :class:`Trial` is what user code
talks to while a trial runs (its params, ``phase()`` windows, energy so far);
:class:`TrialRecord` is the immutable fact written to ``trials.jsonl``.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import enum
import math
import os
import socket
import time
import traceback as _tb
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from ecopt._types import Params
from ecopt.errors import EcoptError, Infeasible
from ecopt.meters.base import ComponentEnergy, Measurement, Meter, sync_cuda_if_used

__all__ = [
    "TrialState",
    "PhaseRecord",
    "ErrorInfo",
    "TrialRecord",
    "Trial",
    "TrialOutcome",
    "run_objective",
    "is_out_of_memory",
]


class TrialState(str, enum.Enum):
    """Where a trial ended. ``RUNNING`` exists only for live handles."""

    RUNNING = "running"
    COMPLETE = "complete"
    FAILED = "failed"
    INFEASIBLE = "infeasible"


def _now_iso() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="milliseconds")


def merge_measurements(a: Measurement, b: Measurement) -> Measurement:
    """Sum two windows of the same phase (durations and per-component joules)."""
    comps = dict(a.components)
    for k, c in b.components.items():
        if k in comps:
            old = comps[k]
            comps[k] = ComponentEnergy(old.energy_j + c.energy_j, old.source,
                                       old.measured and c.measured,
                                       "; ".join(n for n in {old.note, c.note} if n) or None)
        else:
            comps[k] = c
    extras = dict(a.extras)
    for k, v in b.extras.items():
        extras[k] = extras.get(k, 0.0) + v
    return Measurement(a.duration_s + b.duration_s, comps, a.meter, a.details, extras)


@dataclass(frozen=True)
class PhaseRecord:
    """Duration and energy of one named phase of a trial (summed over its windows).

    Attributes:
        name: Phase name (``"train"``, ``"inference"``...).
        measurement: Summed :class:`Measurement` over every window of this phase.
        count: How many windows were opened under this name.
        samples: Items processed in the phase (samples, tokens...), if given.
    """

    name: str
    measurement: Measurement
    count: int = 1
    samples: int | None = None

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
    def samples_per_joule(self) -> float | None:
        """``samples / energy_j`` when both are known and energy is positive."""
        if self.samples is None or self.energy_j <= 0:
            return None
        return self.samples / self.energy_j

    def to_dict(self) -> dict[str, Any]:
        d = self.measurement.to_dict()
        d["count"] = self.count
        if self.samples is not None:
            d["samples"] = self.samples
        return d

    @classmethod
    def from_dict(cls, name: str, d: Mapping[str, Any]) -> PhaseRecord:
        s = d.get("samples")
        return cls(name, Measurement.from_dict(dict(d)), int(d.get("count", 1)),
                   int(s) if s is not None else None)


@dataclass(frozen=True)
class ErrorInfo:
    """Why a trial failed: exception type, message and formatted traceback."""

    type: str
    message: str
    traceback: str = ""

    @classmethod
    def from_exception(cls, exc: BaseException) -> ErrorInfo:
        return cls(type(exc).__name__, str(exc),
                   "".join(_tb.format_exception(type(exc), exc, exc.__traceback__)))

    def to_dict(self) -> dict[str, str]:
        return {"type": self.type, "message": self.message, "traceback": self.traceback}


@dataclass(frozen=True)
class TrialRecord:
    """One finished trial, exactly as stored in ``trials.jsonl``.

    Attributes:
        number: 0-based trial number, unique within the study.
        state: ``complete``, ``failed`` or ``infeasible``.
        params: The configuration.
        values: Objective name -> value (complete trials only).
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
    """

    number: int
    state: TrialState
    params: Params
    values: dict[str, float] = field(default_factory=dict)
    metrics: dict[str, float] = field(default_factory=dict)
    feasible: bool = True
    phases: dict[str, PhaseRecord] = field(default_factory=dict)
    started_at: str = ""
    duration_s: float = 0.0
    proposed_by: str = "user"
    proposal: dict[str, Any] = field(default_factory=dict)
    error: ErrorInfo | None = None
    host: str = ""
    worker: str = ""
    device: str = ""
    noise: dict[str, float] = field(default_factory=dict)
    user_attrs: dict[str, Any] = field(default_factory=dict)

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
        return {
            "number": self.number,
            "state": self.state.value,
            "params": dict(self.params),
            "values": dict(self.values),
            "metrics": dict(self.metrics),
            "feasible": self.feasible,
            "phases": {k: p.to_dict() for k, p in self.phases.items()},
            "energy_j": self.energy_j,
            "started_at": self.started_at,
            "duration_s": self.duration_s,
            "proposed_by": self.proposed_by,
            "proposal": dict(self.proposal),
            "error": self.error.to_dict() if self.error else None,
            "host": self.host,
            "worker": self.worker,
            "device": self.device,
            "noise": dict(self.noise),
            "user_attrs": dict(self.user_attrs),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> TrialRecord:
        err = d.get("error")
        return cls(
            number=int(d["number"]),
            state=TrialState(d["state"]),
            params=dict(d.get("params", {})),
            values={k: float(v) for k, v in (d.get("values") or {}).items()},
            metrics={k: float(v) for k, v in (d.get("metrics") or {}).items()},
            feasible=bool(d.get("feasible", True)),
            phases={k: PhaseRecord.from_dict(k, p) for k, p in (d.get("phases") or {}).items()},
            started_at=str(d.get("started_at", "")),
            duration_s=float(d.get("duration_s", 0.0)),
            proposed_by=str(d.get("proposed_by", "user")),
            proposal=dict(d.get("proposal") or {}),
            error=ErrorInfo(str(err.get("type", "")), str(err.get("message", "")),
                            str(err.get("traceback", ""))) if err else None,
            host=str(d.get("host", "")),
            worker=str(d.get("worker", "")),
            device=str(d.get("device", "")),
            noise={k: float(v) for k, v in (d.get("noise") or {}).items()},
            user_attrs=dict(d.get("user_attrs") or {}),
        )


class Trial:
    """The live handle an objective function receives.

    Args:
        number: Trial number in the study.
        params: The configuration to evaluate.
        meter: Meter measuring each ``phase()``.
        proposed_by: Who proposed the params.
        proposal: Sampler notes kept in the record.

    Example:
        >>> def objective(trial: ecopt.Trial) -> dict[str, float]:
        ...     with trial.phase("train"):
        ...         model = fit(trial.params["lr"])
        ...     with trial.phase("inference", samples=len(X_test)):
        ...         acc = evaluate(model)
        ...     return {"accuracy": acc,
        ...             "samples_per_joule": trial.samples_per_joule("inference")}
    """

    def __init__(self, number: int, params: Params, meter: Meter, proposed_by: str = "user",
                 proposal: Mapping[str, Any] | None = None) -> None:
        self.number = number
        self.params: Params = dict(params)
        self.proposed_by = proposed_by
        self.proposal: dict[str, Any] = dict(proposal or {})
        self.meter = meter
        self.phases: dict[str, PhaseRecord] = {}
        self.metrics: dict[str, float] = {}
        self.noise: dict[str, float] = {}
        self.user_attrs: dict[str, Any] = {}
        self.started_at = _now_iso()
        self._t0 = time.perf_counter()
        self._open_phase: str | None = None

    def __repr__(self) -> str:
        return f"Trial(number={self.number}, params={self.params!r})"

    def __getitem__(self, name: str) -> Any:
        return self.params[name]

    @contextlib.contextmanager
    def phase(self, name: str, samples: int | None = None) -> Iterator[Trial]:
        """Measure a named phase (``load``, ``preprocess``, ``train``, ``inference``...).

        Entering the same name again adds to that phase. Phases do not nest:
        their energies would be counted twice.

        Args:
            name: Phase name.
            samples: Items the phase processes (samples, tokens), for
                :meth:`samples_per_joule`; summed over repeated windows.

        Raises:
            EcoptError: when a phase is opened inside another.
            ValueError: for an empty name or negative ``samples``.
        """
        if not isinstance(name, str) or not name:
            raise ValueError(f"phase name must be a non-empty string, got {name!r}")
        if samples is not None and (isinstance(samples, bool) or int(samples) != samples or samples < 0):
            raise ValueError(f"samples must be a non-negative integer, got {samples!r}")
        if self._open_phase is not None:
            raise EcoptError(
                f"phase {name!r} opened inside phase {self._open_phase!r}; phases do not nest "
                "(their energy would be counted twice): close the outer phase first"
            )
        handle = self.meter.start()  # if this raises, no phase is left open
        self._open_phase = name
        try:
            yield self
        finally:
            self._open_phase = None
            sync_cuda_if_used()
            m = self.meter.stop(handle)
            old = self.phases.get(name)
            if old is None:
                self.phases[name] = PhaseRecord(name, m, 1, samples)
            else:
                total = None if old.samples is None and samples is None else \
                    (old.samples or 0) + (samples or 0)
                self.phases[name] = PhaseRecord(name, merge_measurements(old.measurement, m),
                                                old.count + 1, total)

    def _phase(self, phase: str) -> PhaseRecord:
        if phase not in self.phases:
            raise ValueError(f"no phase {phase!r} was measured in this trial; "
                             f"measured phases: {list(self.phases)}")
        return self.phases[phase]

    def energy_j(self, phase: str | None = None) -> float:
        """Joules of one phase, or of every phase so far when ``phase`` is None."""
        if phase is None:
            return float(sum(p.energy_j for p in self.phases.values()))
        return self._phase(phase).energy_j

    def duration_s(self, phase: str | None = None) -> float:
        """Seconds of one phase, or since the trial started when ``phase`` is None."""
        if phase is None:
            return time.perf_counter() - self._t0
        return self._phase(phase).duration_s

    def measurement(self, phase: str) -> Measurement:
        """The summed :class:`Measurement` of a phase (components and provenance)."""
        return self._phase(phase).measurement

    def samples_per_joule(self, phase: str, samples: int | None = None) -> float:
        """Items per joule of a phase (``samples`` overrides what ``phase()`` was given).

        Raises:
            ValueError: when no sample count is known or the phase used no energy.
        """
        p = self._phase(phase)
        n = samples if samples is not None else p.samples
        if n is None:
            raise ValueError(f"phase {phase!r} has no sample count; pass samples= to phase() or here")
        if p.energy_j <= 0:
            raise ValueError(
                f"phase {phase!r} has energy_j={p.energy_j}; samples/J is undefined "
                f"(meter {p.measurement.meter!r} gives no energy?)"
            )
        return n / p.energy_j

    def set_metric(self, name: str, value: float) -> None:
        """Record an extra number (kept in the log; usable as a constraint)."""
        self.metrics[name] = float(value)

    def set_noise(self, metric: str, sd: float) -> None:
        """Record the standard deviation of a reported value (fed to model-based samplers)."""
        if not (sd >= 0 and math.isfinite(sd)):
            raise ValueError(f"noise sd must be finite and >= 0, got {sd!r} for {metric!r}")
        self.noise[metric] = float(sd)

    def set_user_attr(self, key: str, value: Any) -> None:
        """Attach a JSON-able annotation to the trial."""
        self.user_attrs[key] = value


def is_out_of_memory(exc: BaseException) -> bool:
    """Whether an exception means the configuration did not fit in memory."""
    if isinstance(exc, (MemoryError, Infeasible)):
        return True
    if type(exc).__name__ == "OutOfMemoryError":  # torch.cuda.OutOfMemoryError
        return True
    msg = str(exc).lower()
    return isinstance(exc, RuntimeError) and (
        "out of memory" in msg or "can't allocate memory" in msg
    )


@dataclass(frozen=True)
class TrialOutcome:
    """What running an objective produced, before the study validates it.

    Picklable, so executors can send it back from another process.
    """

    number: int
    returned: Any
    phases: dict[str, PhaseRecord]
    metrics: dict[str, float]
    noise: dict[str, float]
    user_attrs: dict[str, Any]
    started_at: str
    duration_s: float
    error: ErrorInfo | None = None
    infeasible: bool = False
    host: str = ""
    worker: str = ""
    device: str = ""


def run_objective(objective: Callable[[Trial], Any], trial: Trial) -> TrialOutcome:
    """Run ``objective(trial)`` and capture everything, including its exception.

    ``KeyboardInterrupt`` and ``SystemExit`` propagate; every ``Exception`` is
    captured (the study records it and goes on).
    """
    t0 = time.perf_counter()
    error: ErrorInfo | None = None
    infeasible = False
    returned: Any = None
    try:
        returned = objective(trial)
    except Exception as exc:  # noqa: BLE001 - a failing trial never kills a study
        error = ErrorInfo.from_exception(exc)
        infeasible = is_out_of_memory(exc)
    return TrialOutcome(
        number=trial.number,
        returned=returned,
        phases=dict(trial.phases),
        metrics=dict(trial.metrics),
        noise=dict(trial.noise),
        user_attrs=dict(trial.user_attrs),
        started_at=trial.started_at,
        duration_s=time.perf_counter() - t0,
        error=error,
        infeasible=infeasible,
        host=socket.gethostname(),
        worker=f"pid:{os.getpid()}",
        device=os.environ.get("CUDA_VISIBLE_DEVICES", ""),
    )


def with_state(record: TrialRecord, **changes: Any) -> TrialRecord:
    """A copy of a record with fields changed (records are frozen)."""
    return replace(record, **changes)
