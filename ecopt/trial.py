"""The live trial: the handle an objective receives while it runs.

The split follows Optuna's Trial / FrozenTrial: :class:`Trial` is what user code
talks to while a trial runs (its params, ``phase()`` windows, energy so far);
the frozen :class:`~ecopt.record.TrialRecord` it becomes is the immutable fact
written to ``trials.jsonl``, and lives with the other record types in
:mod:`ecopt.record` (re-exported here, where they were first defined).

A trial measures through the meter it is given (anything with ``start``,
``stop`` and ``min_window_s``: :class:`WindowMeter`), so this module stands
below :mod:`ecopt.meters`.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import math
import operator
import os
import socket
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import replace
from typing import Any, Protocol

from ecopt._cuda import sync_cuda_if_used
from ecopt._nesting import MAX_VALUE_DEPTH, nesting_depth
from ecopt._types import Params, is_finite_number
from ecopt.errors import EcoptError, Infeasible, MeterError, TrialPruned
from ecopt.record import (
    DEFAULT_MIN_WINDOW_S,
    EXCLUDED_SHORT_WINDOW,
    FLAG_SHORT_WINDOW,
    ComponentEnergy,
    ErrorInfo,
    Intermediate,
    Measurement,
    PhaseRecord,
    TrialOutcome,
    TrialRecord,
    TrialState,
    excluded_reason,
    merge_measurements,
    short_window,
    with_state,
)

__all__ = [
    "TrialState",
    "PhaseRecord",
    "Intermediate",
    "ErrorInfo",
    "TrialRecord",
    "Trial",
    "TrialOutcome",
    "Verdict",
    "WindowMeter",
    "run_objective",
    "is_out_of_memory",
    "with_state",
    "short_window",
    "excluded_reason",
    "EXCLUDED_SHORT_WINDOW",
]

#: Phase name under which a trial that opened no phase is metered as a whole.
WHOLE_CALL_PHASE = "trial"

#: Phases shorter than this give samples/J figures that are mostly meter noise (the
#: default :meth:`~ecopt.Meter.min_window_s`; a meter may resolve only longer windows).
MIN_RELIABLE_PHASE_S = DEFAULT_MIN_WINDOW_S


class WindowMeter(Protocol):
    """What a trial needs of its meter (every :class:`ecopt.Meter` is one).

    ``start()`` opens a window and returns its handle, ``stop(handle)`` closes
    it and returns its :class:`~ecopt.record.Measurement`, ``min_window_s()``
    is the shortest window whose energy the meter resolves, in seconds.
    """

    name: str

    def start(self) -> Any: ...

    def stop(self, handle: Any) -> Measurement: ...

    def min_window_s(self) -> float: ...


def _now_iso() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="milliseconds")


class Verdict(Protocol):
    """What a trial's pruning hook answers (:class:`ecopt.pruners.Decision` is one)."""

    @property
    def prune(self) -> bool: ...

    @property
    def reason(self) -> str: ...

    @property
    def info(self) -> Mapping[str, Any]: ...


class Trial:
    """The live handle an objective function receives.

    Args:
        number: Trial number in the study.
        params: The configuration to evaluate.
        meter: Meter measuring each ``phase()``.
        proposed_by: Who proposed the params.
        proposal: Sampler notes kept in the record.
        pruning: ``pruning(trial) -> verdict``, what :meth:`should_stop` asks
            (the study binds its pruner to its finished trials,
            :class:`ecopt.pruners.base.PruningHook`); ``None``: no pruning.
            It travels with the trial to a worker process, so it must pickle.
        on_report: Called as ``on_report(trial, point)`` with each new report
            in the driver's process (the study saves it); never pickled.

    Example:
        >>> def objective(trial: ecopt.Trial) -> dict[str, float]:
        ...     with trial.phase("train"):
        ...         model = fit(trial.params["lr"])
        ...     with trial.phase("inference", samples=len(X_test)):
        ...         acc = evaluate(model)
        ...     return {"accuracy": acc,
        ...             "samples_per_joule": trial.samples_per_joule("inference")}
    """

    def __init__(self, number: int, params: Params, meter: WindowMeter, proposed_by: str = "user",
                 proposal: Mapping[str, Any] | None = None, *,
                 pruning: Callable[[Trial], Verdict] | None = None,
                 on_report: Callable[[Trial, Intermediate], None] | None = None) -> None:
        self.number = number
        self.params: Params = dict(params)
        self.proposed_by = proposed_by
        self.proposal: dict[str, Any] = dict(proposal or {})
        self.meter = meter
        self.phases: dict[str, PhaseRecord] = {}
        self.metrics: dict[str, float] = {}
        self.noise: dict[str, float] = {}
        self.user_attrs: dict[str, Any] = {}
        self.intermediate: list[Intermediate] = []
        self.started_at = _now_iso()
        self._t0 = time.perf_counter()
        self._open_phase: str | None = None
        self._open_handle: Any = None
        self._pruning = pruning
        self._decision: Verdict | None = None
        self._on_report = on_report
        #: Phases whose figures the objective read (samples/J, joules, measurement).
        self._read: set[str] = set()
        #: The state the study recorded for this trial (``None`` while it runs).
        self.finished_state: TrialState | None = None

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_on_report"] = None  # the driver's; a worker's reports come back in the outcome
        return state

    def _restart_clock(self, meter: WindowMeter | None) -> None:
        """The trial starts now, where it landed (a worker), measured there with ``meter``."""
        if meter is not None:
            self.meter = meter
        self.started_at = _now_iso()
        self._t0 = time.perf_counter()  # the driver's clock means nothing here

    def __repr__(self) -> str:
        return f"Trial(number={self.number}, params={self.params!r})"

    def __getitem__(self, name: str) -> Any:
        return self.params[name]

    def mark_finished(self, state: TrialState) -> None:
        """Called by the study once the trial's record is saved: later reports are refused.

        Args:
            state: The state of the saved record.
        """
        self.finished_state = state

    def _refuse_if_finished(self, what: str) -> None:
        if self.finished_state is not None:
            raise EcoptError(
                f"{what} on trial {self.number} after it was told ({self.finished_state.value}): "
                "its record is saved and nothing reported now would be kept; report inside "
                "the objective, before it returns (or before study.tell())")

    @contextlib.contextmanager
    def phase(self, name: str, samples: int | None = None, *,
              min_duration_s: float | None = None) -> Iterator[Trial]:
        """Measure a named phase (``load``, ``preprocess``, ``train``, ``inference``...).

        Entering the same name again adds to that phase. Phases do not nest:
        their energies would be counted twice.

        A window shorter than the meter resolves (:meth:`Meter.min_window_s`,
        10 ms for most meters; 10 counter periods for NVML) or than
        ``min_duration_s`` is flagged ``short-window``: its joules are mostly
        meter noise, and a trial whose returned figures are drawn from it
        (:meth:`samples_per_joule`...) is kept off the front, the knee, the
        best-of and the payback. To measure a short piece of work, repeat it
        inside one window: :meth:`repeat_in_phase` does so until the window is
        long enough.

        Args:
            name: Phase name.
            samples: Items the phase processes (samples, tokens), for
                :meth:`samples_per_joule`; summed over repeated windows.
            min_duration_s: The least seconds this window must last for its
                figures to count (``None``: what the meter resolves; a larger
                value is stricter, a smaller one never loosens the meter's).

        Raises:
            EcoptError: when a phase is opened inside another.
            ValueError: for an empty name, negative ``samples`` or a
                ``min_duration_s`` that is not a finite number ``>= 0``.
        """
        if not isinstance(name, str) or not name:
            raise ValueError(f"phase name must be a non-empty string, got {name!r}")
        self._refuse_if_finished(f"phase({name!r})")
        if samples is not None and (isinstance(samples, bool) or int(samples) != samples or samples < 0):
            raise ValueError(f"samples must be a non-negative integer, got {samples!r}")
        if min_duration_s is not None and (isinstance(min_duration_s, bool) or not isinstance(
                min_duration_s, (int, float)) or not math.isfinite(min_duration_s)
                or min_duration_s < 0):
            raise ValueError(f"min_duration_s must be None or a finite number >= 0, got "
                             f"{min_duration_s!r}")
        if self._open_phase is not None:
            raise EcoptError(
                f"phase {name!r} opened inside phase {self._open_phase!r}; phases do not nest "
                "(their energy would be counted twice): close the outer phase first"
            )
        self._open_handle = self.meter.start()  # if this raises, no phase is left open
        self._open_phase = name
        opened = time.perf_counter()
        try:
            yield self
        finally:
            handle, self._open_handle = self._open_handle, None
            self._open_phase = None
            if handle is not None:  # None: a checkpoint could not restart the window
                sync_cuda_if_used()
                self._add_window(name, self.meter.stop(handle), samples)
            elif samples is not None:
                old = self.phases[name]
                self.phases[name] = replace(old, samples=(old.samples or 0) + samples)
            if name in self.phases:
                # The whole block (checkpoints split it into windows whose readings chain
                # end to end, so their errors do not add up) against what the meter resolves.
                self._flag_if_short(name, time.perf_counter() - opened, min_duration_s)

    def _flag_if_short(self, name: str, block_s: float, min_duration_s: float | None) -> None:
        """Flag phase ``name`` ``short-window`` when its last block lasted under the least."""
        try:
            least = float(self.meter.min_window_s())
        except Exception:  # noqa: BLE001 - a meter that cannot say keeps the default
            least = DEFAULT_MIN_WINDOW_S
        asked = min_duration_s is not None and float(min_duration_s) > least
        if asked:
            least = float(min_duration_s)  # type: ignore[arg-type]
        p = self.phases[name]
        if block_s >= least or not p.measurement.components:
            return
        note = (f"window of {block_s * 1000:.3g} ms, under the {least * 1000:.3g} ms "
                + ("asked for (min_duration_s)" if asked else "the meter resolves")
                + ": its joules are mostly meter noise")
        comps = {k: ComponentEnergy(c.energy_j, c.source, c.measured,
                                    "; ".join(n for n in dict.fromkeys((c.note, note)) if n),
                                    tuple(sorted(set(c.flags) | {FLAG_SHORT_WINDOW})))
                 for k, c in p.measurement.components.items()}
        m = p.measurement
        details = {**m.details, "min_window_s": least}
        self.phases[name] = replace(p, measurement=Measurement(m.duration_s, comps, m.meter,
                                                               details, m.extras))

    def repeat_in_phase(self, name: str, fn: Callable[[], Any], *,
                     samples_per_call: int | None = None, min_duration_s: float | None = None,
                     max_calls: int = 1_000_000) -> Any:
        """Call ``fn()`` again and again inside one phase window until it lasts long enough.

        What steady-state benchmarks do: a piece of work shorter than a meter
        resolves (one inference pass over a small test set takes a few ms) is
        measured over many repeats, so its joules per item are a reading and
        not noise. The window lasts at least ``min_duration_s`` (default:
        twice what the meter resolves, :meth:`Meter.min_window_s`); ``fn`` is
        called at least once. The calls made are recorded as the metric
        ``<name>_calls``.

        Args:
            name: Phase name.
            fn: The work, called with no argument.
            samples_per_call: Items one call processes: the phase's ``samples``
                is this times the calls made (for :meth:`samples_per_joule`).
            min_duration_s: The least seconds the window lasts.
            max_calls: Stop after this many calls even if the window is
                still short (it is then flagged ``short-window``).

        Returns:
            What the last call of ``fn`` returned.

        Raises:
            ValueError: for a ``max_calls`` below 1, a negative
                ``samples_per_call`` or ``min_duration_s``.

        Example:
            >>> acc = trial.repeat_in_phase("inference", lambda: evaluate(model, X_test),
            ...                          samples_per_call=len(X_test))
            >>> trial.samples_per_joule("inference")
        """
        if isinstance(max_calls, bool) or not isinstance(max_calls, int) or max_calls < 1:
            raise ValueError(f"max_calls must be an integer >= 1, got {max_calls!r}")
        if samples_per_call is not None and (isinstance(samples_per_call, bool) or int(
                samples_per_call) != samples_per_call or samples_per_call < 0):
            raise ValueError(f"samples_per_call must be a non-negative integer, got "
                             f"{samples_per_call!r}")
        if min_duration_s is None:
            try:
                target = 2.0 * float(self.meter.min_window_s())
            except Exception:  # noqa: BLE001 - a meter that cannot say keeps the default
                target = 2.0 * DEFAULT_MIN_WINDOW_S
        elif isinstance(min_duration_s, bool) or not isinstance(min_duration_s, (int, float)) \
                or not math.isfinite(min_duration_s) or min_duration_s < 0:
            raise ValueError(f"min_duration_s must be a finite number >= 0, got "
                             f"{min_duration_s!r}")
        else:
            target = float(min_duration_s)
        calls = 0
        result: Any = None
        with self.phase(name, min_duration_s=min_duration_s):
            t0 = time.perf_counter()
            while True:
                result = fn()
                calls += 1
                if calls >= max_calls or time.perf_counter() - t0 >= target:
                    break
        if samples_per_call is not None:
            p = self.phases[name]
            self.phases[name] = replace(p, samples=(p.samples or 0) + samples_per_call * calls)
        self.set_metric(f"{name}_calls", calls)
        return result

    @contextlib.contextmanager
    def _whole_call(self) -> Iterator[None]:
        """Meter the objective call as one phase named ``trial`` when it opens no phase itself.

        A trial that measured nothing would otherwise record ``energy_j = 0``,
        which reads like a measurement. Windows may overlap, so this window runs
        beside the objective's own phases and is dropped when there are any.
        """
        try:
            handle = self.meter.start()
        except Exception:  # noqa: BLE001 - the objective's own phases will say what is wrong
            handle = None
        try:
            yield
        finally:
            if handle is not None:
                try:
                    if not self.phases and self._open_phase is None:
                        sync_cuda_if_used()
                        m = self.meter.stop(handle)
                        self._add_window(WHOLE_CALL_PHASE, m, None)
                        self._flag_if_short(WHOLE_CALL_PHASE, m.duration_s, None)
                    else:
                        self.meter.stop(handle)
                except Exception:  # noqa: BLE001 - never mask the objective's outcome
                    pass

    def _add_window(self, name: str, m: Measurement, samples: int | None) -> None:
        for comp, c in m.components.items():
            if not (isinstance(c.energy_j, (int, float)) and math.isfinite(c.energy_j)
                    and c.energy_j >= 0):
                raise MeterError(
                    f"meter {m.meter!r} returned energy_j={c.energy_j!r} for component "
                    f"{comp!r} of phase {name!r}; energy must be a finite number >= 0 "
                    "(a broken counter or a meter bug): the trial is failed rather than "
                    "record it")
        if not (math.isfinite(m.duration_s) and m.duration_s >= 0):
            raise MeterError(f"meter {m.meter!r} returned duration_s={m.duration_s!r} for "
                             f"phase {name!r}; it must be a finite number >= 0")
        old = self.phases.get(name)
        if old is None:
            self.phases[name] = PhaseRecord(name, m, 1, samples)
        else:
            total = None if old.samples is None and samples is None else \
                (old.samples or 0) + (samples or 0)
            self.phases[name] = PhaseRecord(name, merge_measurements(old.measurement, m),
                                            old.count + 1, total)

    def _checkpoint(self) -> None:
        """Close the open phase's window and open a new one, so its energy so far is known.

        The phase goes on under the same name (one more window in its ``count``).
        """
        if self._open_phase is None or self._open_handle is None:
            return
        sync_cuda_if_used()
        m = self.meter.stop(self._open_handle)
        self._open_handle = None
        self._add_window(self._open_phase, m, None)
        self._open_handle = self.meter.start()

    def report(self, step: int, values: Mapping[str, float]) -> None:
        """Record an intermediate result: one point of the trial's learning curve.

        The energy spent so far (every phase, the open one up to now) is recorded
        with it, so a pruner can weigh what a trial costs against where it is
        heading. Reports are kept in the trial log (a pruned or interrupted
        trial keeps its curve); in the driver's process each one is saved as
        it is made.

        Args:
            step: The step (epoch, evaluation round...): an integer ``>= 0``,
                larger than every earlier step of this trial.
            values: Metric name -> finite number (objectives the trial can
                observe mid-run, e.g. validation accuracy; other metrics too).

        Raises:
            ValueError: for a step that is not larger than the last one, or a
                value that is not a finite number.
            EcoptError: after the trial was told (its record is saved; the
                report would be lost).

        Example:
            >>> for epoch in range(epochs):
            ...     with trial.phase("train"):
            ...         train_one_epoch(model)
            ...     trial.report(epoch, {"accuracy": evaluate(model)})
            ...     if trial.should_stop():
            ...         raise ecopt.TrialPruned()
        """
        self._refuse_if_finished("report()")
        try:
            if isinstance(step, bool):
                raise TypeError
            step = operator.index(step)
        except TypeError:
            raise ValueError(f"step must be an integer >= 0, got {step!r}") from None
        if step < 0:
            raise ValueError(f"step must be an integer >= 0, got {step}")
        if self.intermediate and step <= self.intermediate[-1].step:
            raise ValueError(f"steps must increase within a trial: step={step} was reported "
                             f"after step={self.intermediate[-1].step}")
        if not isinstance(values, Mapping) or not values:
            raise ValueError(f"values must be a non-empty dict of metric name -> number, "
                             f"got {values!r}")
        clean: dict[str, float] = {}
        for k, v in values.items():
            if not isinstance(k, str) or not k:
                raise ValueError(f"metric names must be non-empty strings, got {k!r}")
            if hasattr(v, "item") and not isinstance(v, (int, float)):
                v = v.item()  # numpy / 0-d torch
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not is_finite_number(v):
                raise ValueError(f"reported metric {k!r} must be a finite number, got {v!r}")
            clean[k] = float(v)
        self._checkpoint()
        energy = float(sum(p.energy_j for p in self.phases.values()))  # not a returned figure
        measured = bool(self.phases) and all(p.measured for p in self.phases.values())
        point = Intermediate(step, clean, energy, self.duration_s(), measured)
        self.intermediate.append(point)
        if self._on_report is not None:
            self._on_report(self, point)

    def should_stop(self) -> bool:
        """Whether the study's pruner says this trial should stop now.

        ``False`` when the study has no pruner or the trial reported nothing
        yet. When ``True``, the objective should raise :class:`ecopt.TrialPruned`
        (the trial is then recorded ``pruned`` with its last reported values).
        A pruner that fails says ``False`` (with a warning): it never stops a
        trial by accident.
        """
        if self._pruning is None or not self.intermediate:
            return False
        try:
            decision = self._pruning(self)
        except Exception as exc:  # noqa: BLE001 - a pruner bug must not kill a trial
            import warnings

            who = getattr(self._pruning, "label", type(self._pruning).__name__)
            warnings.warn(f"pruner {who} failed on trial {self.number} "
                          f"({type(exc).__name__}: {exc}); the trial goes on", RuntimeWarning,
                          stacklevel=2)
            return False
        self._decision = decision
        return bool(decision.prune)

    def _phase(self, phase: str) -> PhaseRecord:
        if phase not in self.phases:
            raise ValueError(f"no phase {phase!r} was measured in this trial; "
                             f"measured phases: {list(self.phases)}")
        return self.phases[phase]

    def energy_j(self, phase: str | None = None) -> float:
        """Joules of one phase, or of every phase so far when ``phase`` is None.

        A figure read here from a phase flagged ``short-window`` (for the
        total: when every phase with energy is) marks the trial
        :attr:`~TrialRecord.unreliable`.
        """
        if phase is None:
            used = [k for k, p in self.phases.items() if p.energy_j > 0]
            if used and all(self.phases[k].short_window for k in used):
                self._read.update(used)
            return float(sum(p.energy_j for p in self.phases.values()))
        p = self._phase(phase)
        self._read.add(phase)
        return p.energy_j

    def unreliable_phases(self) -> list[str]:
        """Phases flagged ``short-window`` whose figures this trial read (see :meth:`phase`)."""
        return [k for k in self.phases if k in self._read and self.phases[k].short_window]

    def duration_s(self, phase: str | None = None) -> float:
        """Seconds of one phase, or since the trial started when ``phase`` is None."""
        if phase is None:
            return time.perf_counter() - self._t0
        return self._phase(phase).duration_s

    def measurement(self, phase: str) -> Measurement:
        """The summed :class:`Measurement` of a phase (components and provenance)."""
        p = self._phase(phase)
        self._read.add(phase)
        return p.measurement

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
        self._read.add(phase)
        if p.short_window:
            import warnings

            least = p.measurement.details.get("min_window_s", MIN_RELIABLE_PHASE_S)
            warnings.warn(
                f"phase {phase!r} of trial {self.number} lasted {p.duration_s * 1000:.3g} ms, "
                f"under the {float(least) * 1000:.3g} ms its meter resolves: its samples/J "
                f"({n / p.energy_j:.4g}) is mostly meter noise, so the trial is kept off the "
                "front (excluded: window too short for the meter); measure more samples "
                "(repeat the work inside the phase: trial.repeat_in_phase)", RuntimeWarning,
                stacklevel=2)
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
        """Attach a JSON-able annotation to the trial (kept in its record).

        Args:
            key: The attribute's name.
            value: A JSON-able value: numbers, strings, lists and dicts nested
                at most :data:`~ecopt._nesting.MAX_VALUE_DEPTH` (32) levels.

        Raises:
            ValueError: for a key that is not a string or a value nested deeper
                than 32 levels (refused before anything is written: such a line
                would be skipped by every reader of the study).
            EcoptError: after the trial was told (its record is saved).
        """
        self._refuse_if_finished(f"set_user_attr({key!r})")
        if not isinstance(key, str):
            raise ValueError(f"a user attribute's key must be a string, got {key!r}")
        if nesting_depth(value, MAX_VALUE_DEPTH) > MAX_VALUE_DEPTH:
            raise ValueError(f"user attribute {key!r} is nested deeper than {MAX_VALUE_DEPTH} "
                             "levels (at most 32 levels of lists/dicts are kept in the log)")
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


def run_objective(objective: Callable[[Trial], Any], trial: Trial, *,
                  restart_clock: bool = False, meter: WindowMeter | None = None) -> TrialOutcome:
    """Run ``objective(trial)`` and capture everything, including its exception.

    ``KeyboardInterrupt`` and ``SystemExit`` propagate; every ``Exception`` is
    captured (the study records it and goes on). :class:`~ecopt.TrialPruned`
    marks the outcome ``pruned``.

    Args:
        objective: The objective.
        trial: The trial to run.
        restart_clock: The trial starts now (an executor running it where it
            landed, after it waited in a queue): its ``started_at`` and
            duration count from here.
        meter: Measure with this meter instead of the trial's (a worker's own).
    """
    if restart_clock or meter is not None:
        trial._restart_clock(meter)
    t0 = time.perf_counter()
    error: ErrorInfo | None = None
    infeasible = pruned = False
    returned: Any = None
    try:
        with trial._whole_call():
            returned = objective(trial)
    except TrialPruned as exc:
        pruned = True
        why = str(exc) or (trial._decision.reason if trial._decision is not None else "")
        error = ErrorInfo("TrialPruned", why or "the objective raised TrialPruned", "")
        if trial._decision is not None and trial._decision.prune:  # the numbers behind it
            trial.user_attrs.setdefault("pruning", dict(trial._decision.info))
    except Exception as exc:  # noqa: BLE001 - a failing trial never kills a study
        error = ErrorInfo.from_exception(exc)
        infeasible = is_out_of_memory(exc)
    return TrialOutcome.of(trial, returned=returned, error=error, infeasible=infeasible,
                           pruned=pruned, duration_s=time.perf_counter() - t0,
                           host=socket.gethostname(), worker=f"pid:{os.getpid()}",
                           device=os.environ.get("CUDA_VISIBLE_DEVICES", ""))
