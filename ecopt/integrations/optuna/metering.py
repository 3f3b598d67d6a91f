"""``metered(trial, phase)``: ecopt's phase metering inside an Optuna objective.

Each phase is kept in the Optuna trial's user attributes under
``ecopt.phase.<name>``, one JSON object per phase (summed over every window
opened under that name in the trial)::

    {"energy_j": 41.2, "duration_s": 3.9, "samples": 18000,
     "samples_per_joule": 436.9, "measured": false,
     "source": {"cpu": "estimate-cpu-time", "ram": "estimate-ram"},
     "meter": "estimate", "count": 1,
     "components": {"cpu": {"energy_j": 40.9, "source": "estimate-cpu-time",
                            "measured": false, "note": "..."}, ...},
     "details": {...}, "extras": {}}

``energy_j``, ``duration_s``, ``measured``, ``meter``, ``components``,
``details``, ``extras``, ``count`` and ``samples`` are exactly ecopt's phase
record (``PhaseRecord.to_dict``), so ``ecopt import-optuna`` turns them back into
the phases of the imported trial; ``samples_per_joule`` and ``source``
(component -> where its number came from) are there for people reading the
Optuna dashboard. ``samples_per_joule`` is ``null`` when there is no sample
count or no energy (``meter="wallclock"``).

The semantics are :meth:`ecopt.Trial.phase`'s: phases do not nest (energy
would be counted twice), re-entering a name adds to that phase, queued CUDA
work is waited for before a window closes, and a block that raises still
records the energy it spent (with ``"raised": "<exception type>"``) before the
exception goes on to Optuna.
"""

from __future__ import annotations

import contextlib
import math
import os
import threading
import weakref
from collections.abc import Iterator
from typing import Any

from ecopt.errors import EcoptError, MeterError
from ecopt.integrations.optuna._convert import ERROR_KEY, PHASE_PREFIX
from ecopt.meters import get_meter
from ecopt.meters.base import Measurement, Meter, sync_cuda_if_used
from ecopt.trial import MIN_RELIABLE_PHASE_S, PhaseRecord, is_out_of_memory, merge_measurements

__all__ = ["metered", "MeteredPhase", "phase_key", "process_meter"]

_METERS: dict[tuple[int, str], Meter] = {}
_METERS_LOCK = threading.Lock()
#: Open phase and phase totals of each live Optuna trial (dropped with the trial object).
_STATE: weakref.WeakKeyDictionary[Any, _TrialPhases] = weakref.WeakKeyDictionary()
_STATE_LOCK = threading.Lock()


def phase_key(name: str) -> str:
    """The user-attribute key of phase ``name``: ``ecopt.phase.<name>``."""
    return f"{PHASE_PREFIX}{name}"


def process_meter(meter: str | Meter = "auto") -> Meter:
    """The meter ``meter`` names, built once per process (a ``Meter`` passes through).

    ``"auto"`` probes the machine (and warns once when it falls back to the
    estimate); later calls in the same process reuse that meter. A forked
    worker builds its own.
    """
    if isinstance(meter, Meter):
        return meter
    if not isinstance(meter, str):
        raise ValueError(f"meter must be a meter name or an ecopt Meter, got {meter!r}")
    key = (os.getpid(), meter)
    with _METERS_LOCK:
        m = _METERS.get(key)
        if m is None:
            m = get_meter(meter)
            _METERS[key] = m
        return m


class _TrialPhases:
    def __init__(self) -> None:
        self.open: str | None = None
        self.owner: int | None = None  # thread that opened it
        self.phases: dict[str, PhaseRecord] = {}


class MeteredPhase:
    """What :func:`metered` yields: the phase's totals, filled in when the block ends.

    Attributes:
        name: The phase name.
        samples: Items processed (``metered(..., samples=n)``, plus any
            :meth:`add_samples`), summed over the phase's windows in this trial.
        record: The phase's :class:`~ecopt.trial.PhaseRecord` once a window closed.
    """

    def __init__(self, name: str, samples: int | None) -> None:
        self.name = name
        self._window_samples = samples
        self.record: PhaseRecord | None = None

    def add_samples(self, n: int) -> None:
        """Count ``n`` more items in this window (when the count is known only inside)."""
        _check_samples(n)
        self._window_samples = (self._window_samples or 0) + int(n)

    @property
    def samples(self) -> int | None:
        return self.record.samples if self.record is not None else self._window_samples

    @property
    def energy_j(self) -> float:
        """Joules of the phase in this trial so far (every window)."""
        return self._closed().energy_j

    @property
    def duration_s(self) -> float:
        return self._closed().duration_s

    @property
    def measured(self) -> bool:
        """Whether every component's joules were measured (``False``: an estimate)."""
        return self._closed().measured

    @property
    def source(self) -> dict[str, str]:
        """Component -> where its joules came from (``estimate-cpu-time``, ``nvml``...)."""
        return _sources(self._closed())

    @property
    def samples_per_joule(self) -> float:
        """Items per joule of the phase, to return as an Optuna objective.

        Raises:
            ValueError: when no sample count is known or the meter gave no energy.
        """
        rec = self._closed()
        if rec.samples is None:
            raise ValueError(f"phase {self.name!r} has no sample count; pass "
                             "metered(trial, name, samples=n) or call add_samples(n)")
        if rec.energy_j <= 0:
            raise ValueError(f"phase {self.name!r} has energy_j={rec.energy_j}; samples/J is "
                             f"undefined (meter {rec.measurement.meter!r} gives no energy?)")
        if rec.duration_s < MIN_RELIABLE_PHASE_S:
            import warnings

            warnings.warn(f"phase {self.name!r} lasted {rec.duration_s * 1000:.3g} ms, under "
                          f"{MIN_RELIABLE_PHASE_S * 1000:g} ms: its samples/J is mostly meter "
                          "noise; measure more samples", RuntimeWarning, stacklevel=2)
        return rec.samples / rec.energy_j

    def _closed(self) -> PhaseRecord:
        if self.record is None:
            raise ValueError(f"phase {self.name!r} is still open: its energy is known when "
                             "the with-block ends")
        return self.record

    def __repr__(self) -> str:
        if self.record is None:
            return f"MeteredPhase({self.name!r}, open)"
        return (f"MeteredPhase({self.name!r}, energy_j={self.record.energy_j:.4g}, "
                f"duration_s={self.record.duration_s:.4g}, samples={self.record.samples}, "
                f"measured={self.record.measured})")


def _check_samples(samples: Any) -> None:
    if isinstance(samples, bool) or not isinstance(samples, int) and not (
            isinstance(samples, float) and samples.is_integer()) or samples < 0:
        raise ValueError(f"samples must be a non-negative integer, got {samples!r}")


def _sources(rec: PhaseRecord) -> dict[str, str]:
    return {k: c.source for k, c in rec.measurement.components.items()}


def attr_value(rec: PhaseRecord, raised: str | None = None) -> dict[str, Any]:
    """The user-attribute value of one phase (see the module docstring)."""
    d = rec.to_dict()
    spj = rec.samples_per_joule
    d["samples"] = rec.samples
    d["samples_per_joule"] = spj if spj is not None and math.isfinite(spj) else None
    d["source"] = _sources(rec)
    if raised:
        d["raised"] = raised
    return d


@contextlib.contextmanager
def metered(trial: Any, name: str, samples: int | None = None,
            meter: str | Meter = "auto") -> Iterator[MeteredPhase]:
    """Meter a phase of an Optuna objective; record it in the trial's user attributes.

    Args:
        trial: The ``optuna.Trial`` the objective received (any Optuna
            ``BaseTrial`` with ``set_user_attr``: ``FixedTrial`` works too).
        name: Phase name (``"train"``, ``"inference"``...): the user attribute
            is ``ecopt.phase.<name>``.
        samples: Items the phase processes (samples, tokens...), for samples/J;
            summed when the same phase is entered again.
        meter: A meter name (``"auto"``, ``"estimate"``, ``"nvml"``, ``"rapl"``,
            ``"codecarbon"``, ``"wallclock"``), built once per process, or an
            ecopt :class:`~ecopt.meters.Meter`.

    Yields:
        A :class:`MeteredPhase`; after the block, ``phase.samples_per_joule``,
        ``phase.energy_j`` and its provenance.

    Raises:
        EcoptError: when a phase is opened inside another phase of the same trial.
        ValueError: for a bad trial, name or sample count.

    Example:
        >>> def objective(trial):
        ...     model = build(trial.suggest_int("width", 8, 512, log=True))
        ...     with metered(trial, "train"):
        ...         fit(model)
        ...     with metered(trial, "inference", samples=len(X_test)) as phase:
        ...         acc = evaluate(model)
        ...     return acc, phase.samples_per_joule
    """
    if not callable(getattr(trial, "set_user_attr", None)) or not hasattr(trial, "user_attrs"):
        raise ValueError(f"trial must be the optuna Trial the objective received, got {trial!r}")
    if not isinstance(name, str) or not name or name != name.strip():
        raise ValueError(f"phase name must be a non-empty string without surrounding spaces, "
                         f"got {name!r}")
    if samples is not None:
        _check_samples(samples)
        samples = int(samples)
    m = process_meter(meter)
    with _STATE_LOCK:
        state = _STATE.get(trial)
        if state is None:
            state = _STATE[trial] = _TrialPhases()
        if state.open is not None:
            raise EcoptError(f"phase {name!r} opened inside phase {state.open!r} of trial "
                             f"{getattr(trial, 'number', '?')}; phases do not nest (their "
                             "energy would be counted twice): close the outer phase first")
        state.open, state.owner = name, threading.get_ident()
    phase = MeteredPhase(name, samples)
    try:
        handle = m.start()
    except BaseException:
        state.open = None
        raise
    raised: str | None = None
    try:
        yield phase
    except BaseException as exc:
        raised = type(exc).__name__
        if isinstance(exc, Exception) and raised != "TrialPruned":
            # Optuna 5 keeps no failure reason: note it, so an out-of-memory error makes
            # the trial infeasible for EcoptSampler and for ecopt import-optuna.
            trial.set_user_attr(ERROR_KEY, {"type": raised, "message": str(exc)[:2000],
                                            "phase": name,
                                            "out_of_memory": is_out_of_memory(exc)})
        raise
    finally:
        try:
            sync_cuda_if_used()
            window = m.stop(handle)
        finally:
            state.open = None
        _add(trial, state, phase, window, raised)


def _add(trial: Any, state: _TrialPhases, phase: MeteredPhase, window: Measurement,
         raised: str | None) -> None:
    bad = {k: c.energy_j for k, c in window.components.items()
           if not (isinstance(c.energy_j, (int, float)) and math.isfinite(c.energy_j)
                   and c.energy_j >= 0)}
    if bad or not (math.isfinite(window.duration_s) and window.duration_s >= 0):
        raise MeterError(f"meter {window.meter!r} returned energy_j={bad} / duration_s="
                         f"{window.duration_s!r} for phase {phase.name!r}; energy and duration "
                         "must be finite numbers >= 0 (a broken counter or a meter bug): "
                         "nothing is recorded rather than a wrong number")
    old = state.phases.get(phase.name)
    n = phase._window_samples
    if old is None:
        total = PhaseRecord(phase.name, window, 1, n)
    else:
        both = None if old.samples is None and n is None else (old.samples or 0) + (n or 0)
        total = PhaseRecord(phase.name, merge_measurements(old.measurement, window),
                            old.count + 1, both)
    state.phases[phase.name] = total
    phase.record = total
    trial.set_user_attr(phase_key(phase.name), attr_value(total, raised))
