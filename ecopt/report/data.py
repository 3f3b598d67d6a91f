"""Report data: everything a report shows, computed from a study directory alone.

This module only computes (no matplotlib, no HTML); :mod:`ecopt.plot` draws
its objects and :mod:`ecopt.report.html` lays them out. A report is a pure
function of ``study.json`` + ``trials.jsonl`` (or of a live :class:`~ecopt.Study`).

What is computed:

* **Front membership**: the non-dominated complete trials that satisfy every
  constraint (the same set as :meth:`Study.best_trials`).
* **Hypervolume series**: after each trial (in trial-number order), the
  hypervolume of the trials so far against one fixed reference point (the
  study's final :meth:`Study.reference_point`), so the series never decreases
  and its last value equals :meth:`Study.hypervolume`. Each point also carries
  the energy the search had spent by then (every phase of every trial, failed
  and pruned ones included, plus their proposals).
* **Per-phase energy** of each front trial, with the source of each component.
* **Search energy and payback**: the joules of every measured phase of every
  trial plus those of every proposal the sampler made for them (model fits
  and acquisition optimisation, ``proposal["search"]`` in the log), and how
  many items (inferences, tokens...) at the most efficient front point
  recover them compared with a baseline trial::

      items_to_recover = search_energy_j / (baseline_j_per_item - best_j_per_item)

* **Provenance**: which meter and source produced each joule, and whether any
  of it was estimated (then every figure says so).

Example:
    >>> from ecopt.report import build_report
    >>> data = build_report("runs/quickstart", baseline=0)
    >>> data.front, data.hypervolume, data.energy_estimated
    ((3, 7, 11), 0.0123, True)
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import re
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ecopt import pareto
from ecopt._search import proposal_energy_j, unbilled_windows
from ecopt._search import search_energy_j as _window_j
from ecopt.objective import Constraint, Objective
from ecopt.fmt import fmt_number
from ecopt.trial import TrialRecord, TrialState, excluded_reason

if TYPE_CHECKING:
    from ecopt.study import Study

__all__ = [
    "HypervolumePoint",
    "PhaseEnergy",
    "Provenance",
    "Payback",
    "ReportData",
    "CompareEntry",
    "CompareData",
    "build_report",
    "build_compare",
    "hypervolume_series",
    "open_study",
    "is_energy_metric",
    "axis_names",
    "axis_values",
    "check_axis",
    "failure_line",
    "failure_summary",
    "DERIVED_AXES",
]

#: Per-trial numbers usable as plot axes besides objectives, metrics and numeric params.
DERIVED_AXES = ("energy_j", "duration_s")

_ENERGY_RE = re.compile(r"(joule|energy|watt|power|kwh|co2|carbon|(^|_)(j|wh|w)($|_)|per_j\b)",
                        re.IGNORECASE)


def is_energy_metric(name: str) -> bool:
    """Whether a metric name denotes an energy-derived number (samples/J, energy_j, power_w...).

    Such axes get an "(estimated)" label when the study's energy was estimated.
    """
    return name in DERIVED_AXES[:1] or bool(_ENERGY_RE.search(name))


# ---------------------------------------------------------------------------
# plain data objects
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class HypervolumePoint:
    """The search's state after one more trial.

    Attributes:
        trial: Trial number just added.
        n_trials: How many trials (any state) are counted so far.
        cumulative_energy_j: Joules spent by those trials (every phase, failed ones too)
            and by the proposals that made them.
        hypervolume: Hypervolume of the feasible complete trials so far, against
            the report's fixed reference point.
    """

    trial: int
    n_trials: int
    cumulative_energy_j: float
    hypervolume: float


@dataclass(frozen=True)
class PhaseEnergy:
    """Energy of one phase of one trial, with its provenance.

    Attributes:
        trial: Trial number.
        phase: Phase name.
        energy_j: Joules over every window of the phase.
        duration_s: Seconds over every window of the phase.
        samples: Items processed, when the objective gave ``samples=``.
        measured: ``False`` when any component was estimated.
        sources: ``component=source`` pairs, ``;``-joined.
        meter: Name of the meter.
    """

    trial: int
    phase: str
    energy_j: float
    duration_s: float
    samples: int | None
    measured: bool
    sources: str
    meter: str

    @property
    def j_per_sample(self) -> float | None:
        """Joules per item, when the item count is known and positive."""
        if not self.samples:
            return None
        return self.energy_j / self.samples


@dataclass(frozen=True)
class Provenance:
    """Where a share of the study's joules came from.

    Attributes:
        meter: Meter name (``estimate``, ``nvml``...).
        component: ``cpu``, ``gpu:0``, ``ram``...
        source: ``estimate-cpu-time``, ``nvml-energy-counter``...
        measured: Hardware reading (``True``) or estimate (``False``).
        energy_j: Joules from this (meter, component, source) over the whole study.
        note: One example note the meter attached (constants of an estimate...).
    """

    meter: str
    component: str
    source: str
    measured: bool
    energy_j: float
    note: str | None = None


@dataclass(frozen=True)
class Payback:
    """How many items at the best front point recover the energy the search spent.

    Attributes:
        phase: The per-item phase compared (``inference`` by default).
        baseline_trial: The configuration the user would have run without the search.
        best_trial: The front trial with the fewest joules per item in ``phase``.
        baseline_j_per_item: Joules per item of the baseline.
        best_j_per_item: Joules per item of the best front trial.
        search_energy_j: Joules the search spent (every phase of every trial, plus
            every proposal).
        estimated: Whether any of these joules were estimated.
    """

    phase: str
    baseline_trial: int
    best_trial: int
    baseline_j_per_item: float
    best_j_per_item: float
    search_energy_j: float
    estimated: bool

    @property
    def saving_j_per_item(self) -> float:
        """Joules saved on every item by running the best trial instead of the baseline."""
        return self.baseline_j_per_item - self.best_j_per_item

    @property
    def items_to_recover(self) -> float | None:
        """``search_energy_j / saving_j_per_item``; ``None`` when nothing is saved."""
        saving = self.saving_j_per_item
        if not saving > 0:
            return None
        return self.search_energy_j / saving

    def describe(self) -> str:
        """One sentence, e.g. "The search's 412 J (estimated) are recovered after 9.1e+05 items..."."""
        est = " (estimated)" if self.estimated else ""
        n = self.items_to_recover
        if n is None:
            return (f"Trial {self.best_trial} uses {fmt_number(self.best_j_per_item)} J{est} per "
                    f"{self.phase} item, no less than baseline trial {self.baseline_trial} "
                    f"({fmt_number(self.baseline_j_per_item)} J{est}): the search's "
                    f"{fmt_number(self.search_energy_j)} J{est} (trials + proposals) are never "
                    "recovered in this phase.")
        return (f"The search spent {fmt_number(self.search_energy_j)} J{est} (trials + "
                f"proposals). Running trial "
                f"{self.best_trial} ({fmt_number(self.best_j_per_item)} J per {self.phase} item) "
                f"instead of baseline trial {self.baseline_trial} "
                f"({fmt_number(self.baseline_j_per_item)} J per item) saves "
                f"{fmt_number(self.saving_j_per_item)} J{est} per item: the search is recovered "
                f"after {fmt_number(math.ceil(n))} {self.phase} items.")



@dataclass(frozen=True)
class ReportData:
    """Everything a report shows about one study (plain data, no drawing).

    Attributes:
        name: Study name.
        path: Study directory ("" for an in-memory study).
        spec: The parsed ``study.json`` (empty for an in-memory study).
        objectives: The study's objectives.
        constraints: The study's constraints.
        records: Every finished trial, by trial number.
        front: Trial numbers on the Pareto front, ordered by the first objective.
        reference_point: One value per objective (thresholds where given,
            else inferred), or ``None`` when nothing completed.
        reference_inferred: Per objective, whether its value was inferred.
        hypervolume: Hypervolume of the front against ``reference_point``.
        hv_series: One :class:`HypervolumePoint` per trial, by trial number.
        phase_energy: :class:`PhaseEnergy` of every phase of every front trial.
        phases: Every phase name seen, in first-seen order.
        search_energy_j: Joules of the search: every phase of every trial plus
            every proposal (``trial_energy_j + proposal_energy_j``).
        search_duration_s: Wall-clock seconds summed over trials.
        energy_estimated: Whether any joule in the study was estimated.
        energy_measured_any: Whether any joule was measured by hardware.
        provenance: Where the joules came from.
        counts: Trials by kind: ``complete`` (feasible), ``violates_constraints``,
            ``failed``, ``infeasible``.
        best: Objective name -> trial number of its best feasible value.
        knee: Trial number of the front's knee point, or ``None``.
        payback: Search energy payback against ``--baseline``, or ``None``.
        payback_note: Why there is no payback figure, when there is none.
        inferences: Items per deployment for lifecycle energy, if asked for.
        lifecycle_energy_j: Front trial -> energy of its non-inference phases +
            ``inferences`` x joules per inference item.
        unfinished: Trials started (``running.jsonl``) with no finished record yet.
        sobol_fallbacks: Trials whose model-based proposal failed and fell back
            to a Sobol point (``proposal["fallback"]`` says why).
        model_proposals: Trials proposed by a model-based sampler or its fallback
            (the "n" of "k of n proposals fell back to Sobol").
        trial_energy_j: Joules of every phase of every trial.
        proposal_energy_j: Joules of the sampler's proposals (their share per trial,
            summed) plus those of stopping-rule evaluations no proposal followed
            (``unbilled_search`` in ``study.json``); 0 when the meter read none or
            the log predates metering.
        optimize_calls: What each ``optimize()`` call recorded in ``study.json``
            (``stop_reason``, budgets, energy spent), oldest first.
        warnings: Problems with the log or the request (skipped lines, no
            complete trial, unusable baseline); each is shown in the report.
        generated_at: When the report data was computed (ISO 8601 UTC).
        excluded: Complete trials kept off the front, the knee, the best-of
            and the payback because a returned figure came from a window too
            short for its meter: trial number -> why ("excluded: window too
            short for the meter (...)").
    """

    name: str
    path: str
    spec: dict[str, Any]
    objectives: tuple[Objective, ...]
    constraints: tuple[Constraint, ...]
    records: tuple[TrialRecord, ...]
    front: tuple[int, ...]
    reference_point: tuple[float, ...] | None
    reference_inferred: tuple[bool, ...]
    hypervolume: float
    hv_series: tuple[HypervolumePoint, ...]
    phase_energy: tuple[PhaseEnergy, ...]
    phases: tuple[str, ...]
    search_energy_j: float
    search_duration_s: float
    energy_estimated: bool
    energy_measured_any: bool
    provenance: tuple[Provenance, ...]
    counts: dict[str, int]
    best: dict[str, int]
    knee: int | None
    payback: Payback | None = None
    payback_note: str | None = None
    inferences: float | None = None
    lifecycle_energy_j: dict[int, float] = field(default_factory=dict)
    unfinished: tuple[int, ...] = ()
    sobol_fallbacks: tuple[int, ...] = ()
    model_proposals: int = 0
    warnings: tuple[str, ...] = ()
    generated_at: str = ""
    trial_energy_j: float = 0.0
    proposal_energy_j: float = 0.0
    optimize_calls: tuple[dict[str, Any], ...] = ()
    excluded: dict[int, str] = field(default_factory=dict)

    @property
    def stop_reason(self) -> str | None:
        """Why the last ``optimize()`` call stopped, when the log says."""
        from ecopt.study import last_stop_reason

        return last_stop_reason(self.spec)

    @property
    def convergence(self) -> str | None:
        """The stopping rule's last recorded evaluation as one line (``None``: never ran)."""
        from ecopt._convergence import latest_line

        return latest_line(self.records, self.optimize_calls)

    # -- convenience ----------------------------------------------------------
    @property
    def objective_names(self) -> list[str]:
        return [o.name for o in self.objectives]

    @property
    def directions(self) -> list[str]:
        return [o.direction for o in self.objectives]

    @property
    def energy_known(self) -> bool:
        """Whether any trial has any energy component at all."""
        return bool(self.provenance)

    def record(self, number: int) -> TrialRecord:
        """The record of trial ``number``.

        Raises:
            KeyError: when no finished trial has that number.
        """
        for r in self.records:
            if r.number == number:
                return r
        raise KeyError(f"no finished trial {number} in study {self.name!r}")

    def front_records(self) -> list[TrialRecord]:
        """Front records, in :attr:`front` order."""
        by_num = {r.number: r for r in self.records}
        return [by_num[n] for n in self.front]

    def kind(self, record: TrialRecord) -> str:
        """``front``, ``complete``, ``violates constraints``, ``failed``, ``infeasible`` or ``pruned``."""
        if record.state is TrialState.COMPLETE:
            if not record.feasible:
                return "violates constraints"
            return "front" if record.number in self.front else "complete"
        return record.state.value

    def axis_label(self, name: str) -> str:
        """Axis label for a metric: its direction, and "(estimated)" for energy-derived
        numbers when the study's energy was estimated."""
        label = name
        for o in self.objectives:
            if o.name == name:
                label += f" [{o.direction}]"
        if name == "energy_j":
            label = "energy per trial (J)"
        if is_energy_metric(name) and self.energy_estimated:
            label += " (estimated)"
        return label


@dataclass(frozen=True)
class CompareEntry:
    """One study in a comparison.

    Attributes:
        name: Study name (directory name where names clash).
        path: Study directory.
        n_trials: Finished trials.
        n_complete: Complete feasible trials.
        front_values: ``(k, M)`` objective values of its front (rows by first objective).
        front_numbers: Trial numbers of those rows.
        hypervolume: Hypervolume against the shared reference point.
        hv_series: Hypervolume after each trial against the shared reference point.
        search_energy_j: Joules the search spent (trials + proposals).
        energy_estimated: Whether any joule was estimated.
        sampler: Sampler name from ``study.json``.
        host: CPU model / GPUs line from ``study.json``.
        warnings: Problems reading this study.
    """

    name: str
    path: str
    n_trials: int
    n_complete: int
    front_values: tuple[tuple[float, ...], ...]
    front_numbers: tuple[int, ...]
    hypervolume: float
    hv_series: tuple[HypervolumePoint, ...]
    search_energy_j: float
    energy_estimated: bool
    sampler: str
    host: str
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True)
class CompareData:
    """Several studies of the same objectives against one shared reference point."""

    objectives: tuple[Objective, ...]
    reference_point: tuple[float, ...] | None
    reference_given: bool
    entries: tuple[CompareEntry, ...]

    @property
    def energy_estimated(self) -> bool:
        return any(e.energy_estimated for e in self.entries)

    @property
    def warnings(self) -> tuple[str, ...]:
        return tuple(f"{e.name}: {w}" for e in self.entries for w in e.warnings)

    def axis_label(self, name: str) -> str:
        label = name
        for o in self.objectives:
            if o.name == name:
                label += f" [{o.direction}]"
        if is_energy_metric(name) and self.energy_estimated:
            label += " (estimated)"
        return label


# ---------------------------------------------------------------------------
# loading
# ---------------------------------------------------------------------------


def open_study(source: Study | str | Path) -> tuple[Study, list[str]]:
    """A study and the warnings raised while reading its log.

    Args:
        source: A :class:`~ecopt.Study` (used as is) or a study directory
            (opened read-only).

    Returns:
        ``(study, warnings)``; warnings are one-line strings (torn or corrupt
        lines that were skipped).

    Raises:
        NotAStudyError: when the directory holds no ecopt study.
    """
    from ecopt.study import Study, load_study

    if isinstance(source, Study):
        return source, []
    if not isinstance(source, (str, Path)):
        raise ValueError(f"expected a Study or a study directory, got {source!r}")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        study = load_study(source)
    return study, [str(w.message) for w in caught]


def _unfinished(study: Study) -> tuple[int, ...]:
    if study.path is None or study._storage is None:
        return tuple(t.number for t in study.running)
    done = {r.number for r in study.records}
    out: set[int] = set()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for run in study._storage.read_running():
            try:
                n = int(run["number"])
            except (KeyError, TypeError, ValueError):
                continue
            if n not in done:
                out.add(n)
    return tuple(sorted(out))


# ---------------------------------------------------------------------------
# computing
# ---------------------------------------------------------------------------


def _sanitize(records: Sequence[TrialRecord], objectives: Sequence[Objective]
              ) -> tuple[list[TrialRecord], list[str]]:
    """Records by trial number; a "complete" record without finite objective values
    (a hand-edited or foreign log) is shown as failed, with a warning, never a crash."""
    from ecopt.trial import ErrorInfo, with_state

    out: list[TrialRecord] = []
    warns: list[str] = []
    for r in sorted(records, key=lambda r: r.number):
        if r.state is TrialState.COMPLETE:
            bad = [o.name for o in objectives
                   if not isinstance(r.values.get(o.name), float) or not math.isfinite(r.values[o.name])]
            if bad:
                msg = (f"trial {r.number} is marked complete but objective(s) {bad} are missing "
                       "or not finite in trials.jsonl; it is shown as failed")
                warns.append(msg)
                r = with_state(r, state=TrialState.FAILED, feasible=False,
                               error=ErrorInfo("InvalidRecord", msg, ""))
        out.append(r)
    return out, warns


def _ok(records: Sequence[TrialRecord]) -> list[TrialRecord]:
    return pareto.feasible_complete(records)


def _matrix(records: Sequence[TrialRecord], names: Sequence[str]) -> np.ndarray:
    return np.array([[r.values[n] for n in names] for r in records], dtype=float).reshape(
        len(records), len(names))


def _front_numbers(records: Sequence[TrialRecord], objectives: Sequence[Objective]) -> tuple[int, ...]:
    """Front trial numbers, ordered along the first objective (worst to best)."""
    front = pareto.front_records(records, objectives)
    name = objectives[0].name
    sign = 1.0 if objectives[0].direction == "max" else -1.0
    front.sort(key=lambda r: (sign * r.values[name], r.number))
    return tuple(r.number for r in front)


#: Fronts larger than this (with 3+ objectives) grow the series by each new
#: point's exclusive contribution instead of a full recount per trial.
_EXACT_FRONT_MAX = 64


def hypervolume_series(records: Sequence[TrialRecord], objectives: Sequence[Objective],
                       ref_point: Sequence[float] | None) -> tuple[HypervolumePoint, ...]:
    """Hypervolume after each trial (by trial number) against one fixed reference point.

    A trial weakly dominated by an earlier one adds nothing. Otherwise the
    hypervolume is recounted; once a 3+-objective front holds more than
    ``_EXACT_FRONT_MAX`` points, the new point's exclusive contribution
    (its box minus the front clipped to that box) is added instead, and the
    last value is recounted exactly.

    Args:
        records: Finished trials (any order, any state).
        objectives: The study's objectives.
        ref_point: The fixed reference point; ``None`` gives a series of zeros.

    Returns:
        One point per record, in trial-number order; never decreasing; the
        last value equals ``pareto.hypervolume`` of every feasible complete trial.
    """
    names = [o.name for o in objectives]
    m = len(names)
    signs = np.array([1.0 if o.direction == "max" else -1.0 for o in objectives])
    r = signs * np.asarray(ref_point, dtype=float) if ref_point is not None else None
    front = np.empty((0, m))  # maximisation form, only points better than r everywhere
    trials: list[TrialRecord] = sorted(records, key=lambda rec: rec.number)
    values: list[float] = []
    energies: list[float] = []
    energy = 0.0
    hv = 0.0
    incremental = False
    for rec in trials:
        energy += rec.energy_j + proposal_energy_j(rec)
        if r is not None and rec.state is TrialState.COMPLETE and rec.feasible \
                and not rec.unreliable:
            z = signs * np.array([rec.values[n] for n in names], dtype=float)
            useful = bool(np.all(z > r)) and not (
                front.shape[0] and bool(np.any(np.all(front >= z, axis=1))))
            if useful:
                if m >= 3 and front.shape[0] >= _EXACT_FRONT_MAX:
                    incremental = True
                    clipped = np.minimum(front, z)
                    gain = float(np.prod(z - r)) - pareto.hypervolume(clipped, r)
                    hv += max(gain, 0.0)
                    keep = ~np.all(z >= front, axis=1)
                    front = np.vstack([front[keep], z])
                else:
                    keep = ~np.all(z >= front, axis=1)
                    front = np.vstack([front[keep], z])
                    hv = pareto.hypervolume(front, r)
        values.append(hv)
        energies.append(energy)
    if incremental and values:
        values[-1] = pareto.hypervolume(front, r)  # type: ignore[arg-type]
        for i in range(len(values) - 2, -1, -1):  # rounding must not break monotonicity
            values[i] = min(values[i], values[i + 1])
    return tuple(HypervolumePoint(rec.number, i + 1, e, v)
                 for i, (rec, e, v) in enumerate(zip(trials, energies, values)))


def _phase_energy(record: TrialRecord) -> list[PhaseEnergy]:
    out = []
    for name, p in record.phases.items():
        m = p.measurement
        sources = ";".join(f"{k}={c.source}" for k, c in m.components.items())
        out.append(PhaseEnergy(record.number, name, p.energy_j, p.duration_s, p.samples,
                               p.measured, sources, m.meter))
    return out


def _optimize_calls(spec: dict[str, Any]) -> tuple[dict[str, Any], ...]:
    """Every ``optimize()`` summary in ``study.json``'s sessions, oldest first."""
    out: list[dict[str, Any]] = []
    sessions = spec.get("sessions")
    for sess in sessions if isinstance(sessions, list) else []:
        calls = sess.get("optimize") if isinstance(sess, dict) else None
        out += [c for c in calls if isinstance(c, dict)] if isinstance(calls, list) else []
    return tuple(out)


def _unbilled(study: Study) -> list[dict[str, Any]]:
    """Stopping-rule windows no proposal followed: kept in ``study.json``, or still pending."""
    out = unbilled_windows(study.spec)
    pending = getattr(study, "_unbilled_search", None)
    if isinstance(pending, dict):  # a live Study whose last evaluation is not kept yet
        out.append(pending)
    return out


def _proposals_j(records: Sequence[TrialRecord], unbilled: Sequence[dict[str, Any]]) -> float:
    """The search's own joules: every proposal's share, and the unbilled stopping-rule windows."""
    return float(sum(proposal_energy_j(r) for r in records)
                 + sum(_window_j(w) for w in unbilled))


def _provenance(records: Sequence[TrialRecord],
                unbilled: Sequence[dict[str, Any]] = ()) -> tuple[Provenance, ...]:
    """Joules by (meter, component, source); proposals are the component ``proposals``.

    ``unbilled``: stopping-rule windows kept outside the trial log (metered with
    the same meter as the proposals, so counted in their row).
    """
    acc: dict[tuple[str, str, str, bool], list[Any]] = {}
    for r in records:
        for p in r.phases.values():
            m = p.measurement
            for comp, c in m.components.items():
                key = (m.meter, comp, c.source, c.measured)
                slot = acc.setdefault(key, [0.0, c.note])
                slot[0] += c.energy_j
        search = r.proposal.get("search") if isinstance(r.proposal, dict) else None
        e = proposal_energy_j(r)
        if isinstance(search, dict) and search.get("energy_j") is not None:
            key = (str(search.get("meter", "?")), "proposals", str(search.get("source", "?")),
                   bool(search.get("measured", False)))
            slot = acc.setdefault(key, [0.0, None])
            slot[0] += e
    for w in unbilled:
        if w.get("energy_j") is not None:
            key = (str(w.get("meter", "?")), "proposals", str(w.get("source", "?")),
                   bool(w.get("measured", False)))
            slot = acc.setdefault(key, [0.0, None])
            slot[0] += _window_j(w)
    return tuple(Provenance(k[0], k[1], k[2], k[3], v[0], v[1]) for k, v in acc.items())


def _pick_phase(baseline: TrialRecord, phase: str | None) -> tuple[str | None, str | None]:
    """The per-item phase for payback, or (None, why not)."""
    if phase is not None:
        p = baseline.phases.get(phase)
        if p is None:
            return None, (f"baseline trial {baseline.number} has no phase {phase!r} "
                          f"(its phases: {list(baseline.phases)})")
        if not p.samples:
            return None, (f"phase {phase!r} of baseline trial {baseline.number} has no sample "
                          "count; pass samples= to trial.phase(...)")
        return phase, None
    if "inference" in baseline.phases and baseline.phases["inference"].samples:
        return "inference", None
    for name, p in baseline.phases.items():
        if p.samples:
            return name, None
    return None, (f"baseline trial {baseline.number} has no phase with a sample count "
                  f"(phases: {list(baseline.phases)}); pass samples= to trial.phase(...) "
                  "so joules per item are known")


def _payback(records: Sequence[TrialRecord], front: Sequence[int], baseline: int,
             phase: str | None, search_energy_j: float, estimated: bool
             ) -> tuple[Payback | None, str | None, str | None]:
    """(payback, note, warning)."""
    by_num = {r.number: r for r in records}
    if baseline not in by_num:
        nums = sorted(by_num)
        have = f"trials {nums[0]}..{nums[-1]}" if nums else "no finished trials"
        return None, None, f"--baseline {baseline}: no finished trial {baseline} ({have})"
    base = by_num[baseline]
    ph, why = _pick_phase(base, phase)
    if ph is None:
        if base.state is not TrialState.COMPLETE:
            why = f"{why}; trial {baseline} {base.state.value}: pick a complete trial as baseline"
        return None, None, f"no payback figure: {why}"
    bp = base.phases[ph]
    if bp.short_window:
        return None, None, (f"no payback figure: phase {ph!r} of baseline trial {baseline} "
                            f"is excluded: window too short for the meter "
                            f"({bp.duration_s * 1000:.3g} ms); its joules per item are noise")
    if not bp.energy_j > 0:
        return None, None, (f"no payback figure: phase {ph!r} of baseline trial {baseline} "
                            f"has {bp.energy_j} J (meter {bp.measurement.meter!r} gives no energy)")
    base_jpi = bp.energy_j / float(bp.samples or 1)
    cands: list[tuple[float, int]] = []
    for n in front:
        p = by_num[n].phases.get(ph)
        if p is not None and p.samples and p.energy_j > 0 and not p.short_window:
            cands.append((p.energy_j / p.samples, n))
    if not cands:
        return None, None, (f"no payback figure: no front trial measured phase {ph!r} "
                            "with a sample count")
    best_jpi, best_n = min(cands)
    pb = Payback(ph, baseline, best_n, base_jpi, best_jpi, search_energy_j, estimated)
    return pb, None, None


def build_report(source: Study | str | Path, *, baseline: int | None = None,
                 phase: str | None = None, inferences: float | None = None,
                 ref_point: Sequence[float] | None = None) -> ReportData:
    """Compute a study's report data.

    Args:
        source: A :class:`~ecopt.Study` or a study directory.
        baseline: Trial number of the configuration the search is compared with
            for the payback figure (``ecopt report --baseline``).
        phase: The per-item phase for payback and lifecycle energy (default
            ``inference``, else the baseline's first phase with a sample count).
        inferences: Items per deployment: lifecycle energy of each front trial
            is its other phases + ``inferences`` x joules per item.
        ref_point: Reference point for the hypervolume (default: the study's
            thresholds, inferred where missing).

    Returns:
        A :class:`ReportData`. Problems that still leave something to show
        (skipped log lines, no complete trial, an unusable baseline) are in
        its ``warnings``.

    Raises:
        NotAStudyError: when ``source`` is a directory without an ecopt study.
        ValueError: for a reference point of the wrong length or a negative
            ``inferences``.
    """
    study, warns = open_study(source)
    objectives = tuple(study.objectives)
    names = [o.name for o in objectives]
    dirs = [o.direction for o in objectives]
    clean, bad = _sanitize(study.records, objectives)
    warns += bad
    records = tuple(clean)
    if inferences is not None and not (inferences >= 0 and math.isfinite(inferences)):
        raise ValueError(f"inferences must be a finite number >= 0, got {inferences}")

    if ref_point is not None:
        given = tuple(float(v) for v in ref_point)
        if len(given) != len(objectives):
            raise ValueError(f"ref_point needs one value per objective {names}, got {list(given)}")
        ref: tuple[float, ...] | None = given
        inferred = tuple(False for _ in objectives)
    else:
        ref = pareto.study_reference_point(records, objectives)
        inferred = tuple(o.threshold is None for o in objectives)

    front = _front_numbers(records, objectives)
    ok = _ok(records)
    on_front = set(front)
    hv = (pareto.hypervolume(_matrix([r for r in ok if r.number in on_front], names), list(ref), dirs)
          if ref is not None and front else 0.0)
    series = hypervolume_series(records, objectives, ref)

    by_num = {r.number: r for r in records}
    phase_names: list[str] = []
    for r in records:
        for ph in r.phases:
            if ph not in phase_names:
                phase_names.append(ph)
    phase_energy = tuple(pe for n in front for pe in _phase_energy(by_num[n]))
    unbilled = _unbilled(study)
    prov = _provenance(records, unbilled)
    estimated = any(not p.measured for p in prov)
    measured_any = any(p.measured for p in prov)
    trial_j = float(sum(r.energy_j for r in records))
    proposal_j = _proposals_j(records, unbilled)
    search_j = trial_j + proposal_j

    counts = {"complete": 0, "violates_constraints": 0, "failed": 0, "infeasible": 0,
              "pruned": 0}
    for r in records:
        if r.state is TrialState.COMPLETE:
            counts["complete" if r.feasible else "violates_constraints"] += 1
        else:
            counts[r.state.value] = counts.get(r.state.value, 0) + 1
    excluded: dict[int, str] = {}
    for r in records:
        why = excluded_reason(r) if r.state is TrialState.COMPLETE and r.feasible else None
        if why is not None:
            excluded[r.number] = why

    best: dict[str, int] = {}
    for o in objectives:
        if ok:
            sign = 1.0 if o.direction == "max" else -1.0
            top = ok[0]
            for r in ok[1:]:
                if sign * r.values[o.name] > sign * top.values[o.name]:
                    top = r
            best[o.name] = top.number
    knee = None
    if front:
        fr = [by_num[n] for n in front]
        knee = fr[pareto.knee_point(_matrix(fr, names), dirs)].number

    warn_list = list(warns)
    if not records:
        started = _unfinished(study)
        warn_list.append(
            "the study has no finished trials yet"
            + (f" ({len(started)} started and not finished: trial(s) "
               f"{', '.join(map(str, started[:8]))}{' ...' if len(started) > 8 else ''})"
               if started else "")
            + ": no front, figures or tables until one finishes (opening the study with "
            "ecopt.Study(..., storage=DIR) and calling optimize() goes on from its log)")
    elif not ok:
        warn_list.append(
            f"no trial completed within the constraints ({counts['failed']} failed, "
            f"{counts['infeasible']} infeasible, {counts['violates_constraints']} broke a "
            "constraint): there is no Pareto front; see the trial table for the errors")
    if records and not prov:
        warn_list.append("no trial has an energy reading (meter gives durations only?): "
                         "energy figures are empty")

    payback = None
    note = None
    if baseline is not None:
        payback, note, w = _payback(records, front, baseline, phase, search_j, estimated)
        if w:
            warn_list.append(w)
    else:
        note = "pass --baseline TRIAL (build_report(baseline=...)) for the payback figure"

    lifecycle: dict[int, float] = {}
    if inferences is not None:
        for n in front:
            r = by_num[n]
            lph = phase or ("inference" if "inference" in r.phases else
                            next((k for k, p in r.phases.items() if p.samples), None))
            if lph is None or lph not in r.phases or not r.phases[lph].samples:
                continue
            p = r.phases[lph]
            if p.short_window:  # joules per item from a noise window: no figure
                continue
            rest = sum(q.energy_j for k, q in r.phases.items() if k != lph)
            lifecycle[n] = rest + inferences * p.energy_j / float(p.samples or 1)

    spec = dict(study.spec)
    return ReportData(
        name=str(study.name or (study.path.name if study.path else "study")),
        path=str(study.path) if study.path else "",
        spec=spec,
        objectives=objectives,
        constraints=tuple(study.constraints),
        records=records,
        front=front,
        reference_point=ref,
        reference_inferred=inferred,
        hypervolume=float(hv),
        hv_series=series,
        phase_energy=phase_energy,
        phases=tuple(phase_names),
        search_energy_j=search_j,
        search_duration_s=float(sum(r.duration_s for r in records)),
        energy_estimated=estimated,
        energy_measured_any=measured_any,
        provenance=prov,
        counts=counts,
        best=best,
        knee=knee,
        payback=payback,
        payback_note=note,
        inferences=inferences,
        lifecycle_energy_j=lifecycle,
        excluded=excluded,
        unfinished=_unfinished(study),
        sobol_fallbacks=tuple(r.number for r in records if "fallback" in r.proposal),
        model_proposals=sum(1 for r in records if "fallback" in r.proposal
                            or r.proposed_by not in ("sobol", "random", "grid", "user")),
        warnings=tuple(warn_list),
        generated_at=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        trial_energy_j=trial_j,
        proposal_energy_j=proposal_j,
        optimize_calls=_optimize_calls(spec),
    )


# ---------------------------------------------------------------------------
# axes
# ---------------------------------------------------------------------------


def failure_summary(records: Sequence[TrialRecord]) -> dict[str, Any] | None:
    """What the study's failures were and what the sampler made of them (``ecopt show``).

    Returns:
        ``None`` when no trial failed (:func:`ecopt._failures.counts_as_failure`);
        else ``failed`` (count), ``errors`` (``"Type at file:LINE"`` -> count, most
        frequent first), ``regional``/``isolated`` (from the latest proposal's
        ``proposal["failures"]``), ``weighted`` (model proposals a failure model
        weighted), ``max_p_failure`` (the highest failure probability of a proposed
        point, or ``None``), ``repeated`` (trials whose configuration had failed
        before).
    """
    from ecopt._failures import counts_as_failure, error_key

    failed = [r for r in records if counts_as_failure(r)]
    if not failed:
        return None
    errors: dict[str, int] = {}
    for r in failed:
        kind, where = error_key(r)
        name = f"{kind} at {where}" if where else kind
        errors[name] = errors.get(name, 0) + 1
    notes = [r.proposal["failures"] for r in sorted(records, key=lambda r: r.number)
             if isinstance(r.proposal, dict) and isinstance(r.proposal.get("failures"), dict)]
    probs = [n["p_failure"] for n in notes if isinstance(n.get("p_failure"), (int, float))]
    seen: set[str] = set()
    repeated = 0
    for r in sorted(records, key=lambda r: r.number):
        key = json.dumps(r.params, sort_keys=True, default=str)
        repeated += key in seen
        if counts_as_failure(r):
            seen.add(key)
    last = notes[-1] if notes else {}
    return {"failed": len(failed),
            "errors": dict(sorted(errors.items(), key=lambda kv: -kv[1])),
            "regional": last.get("regional"), "isolated": last.get("isolated"),
            "weighted": sum(1 for n in notes if n.get("modelled")),
            "max_p_failure": max(probs) if probs else None, "repeated": repeated}


def failure_line(summary: dict[str, Any]) -> str:
    """One line for :func:`failure_summary`'s result."""
    errs = ", ".join(f"{k} x{v}" for k, v in list(summary["errors"].items())[:3])
    line = f"failures: {summary['failed']} trial(s) failed ({errs})"
    if summary["regional"] is not None:
        line += (f"; at the last proposal {summary['regional']} formed regions, "
                 f"{summary['isolated']} isolated")
    if summary["weighted"]:
        p = summary["max_p_failure"]
        line += (f"; a failure model weighted {summary['weighted']} proposal(s)"
                 + (f" (highest failure probability of a proposed point {p:.2g})"
                    if p is not None else ""))
    line += ("; no failed configuration was proposed again" if not summary["repeated"]
             else f"; {summary['repeated']} trial(s) repeated a failed configuration")
    return line


def fallback_line(data: ReportData) -> str | None:
    """``"k of n proposals fell back to Sobol ..."``, or ``None`` when none did."""
    k = len(data.sobol_fallbacks)
    if not k:
        return None
    nums = ", ".join(map(str, data.sobol_fallbacks[:10])) + (" ..." if k > 10 else "")
    return (f"{k} of {data.model_proposals} proposals fell back to Sobol (the model-based "
            f"sampler failed; trials {nums}; the reason is in each trial's proposal notes)")


def axis_names(data: ReportData) -> list[str]:
    """Names usable as ``--x``/``--y``: objectives, metrics, numeric params, energy_j, duration_s."""
    out = list(data.objective_names)
    for c in data.constraints:
        if c.name not in out:
            out.append(c.name)
    for r in data.records:
        for m in r.metrics:
            if m not in out:
                out.append(m)
    for r in data.records:
        for k, v in r.params.items():
            if isinstance(v, (int, float)) and not isinstance(v, bool) and k not in out:
                out.append(k)
    out += [d for d in DERIVED_AXES if d not in out]
    return out


def axis_values(data: ReportData, name: str, record: TrialRecord) -> float:
    """The value of axis ``name`` for one record (NaN when it has none).

    Raises:
        ValueError: when ``name`` is not an axis of this study.
    """
    if name in record.values:
        return float(record.values[name])
    if name in record.metrics:
        return float(record.metrics[name])
    if name == "energy_j":
        return float(record.energy_j) if record.phases else math.nan
    if name == "duration_s":
        return float(record.duration_s)
    v = record.params.get(name)
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return float(v)
    return math.nan


def check_axis(data: ReportData, name: str) -> None:
    """Raise ``ValueError`` naming the valid choices when ``name`` is not an axis."""
    names = axis_names(data)
    if name not in names:
        raise ValueError(f"unknown metric {name!r} for study {data.name!r}; choose one of "
                         f"{names}")


# ---------------------------------------------------------------------------
# comparing
# ---------------------------------------------------------------------------


def build_compare(sources: Sequence[Study | str | Path],
                  ref_point: Sequence[float] | None = None) -> CompareData:
    """Fronts and hypervolumes of several studies against one shared reference point.

    The shared point is ``ref_point`` when given, else the objectives'
    thresholds where every study sets the same one, else inferred from the
    worst front point of any study, less 10% of the fronts' range.

    Raises:
        ValueError: for fewer than two studies, different objectives, or a
            reference point of the wrong length.
        NotAStudyError: when a directory holds no study.
    """
    if len(sources) < 2:
        raise ValueError(f"compare needs two or more studies, got {len(sources)}")
    loaded = [open_study(s) for s in sources]
    cleaned = [_sanitize(st.records, st.objectives) for st, _ in loaded]
    first = loaded[0][0]
    names = [o.name for o in first.objectives]
    dirs = [o.direction for o in first.objectives]
    for st, _ in loaded[1:]:
        if [o.name for o in st.objectives] != names or [o.direction for o in st.objectives] != dirs:
            raise ValueError(
                f"studies must share objectives to be compared: {first.name!r} has "
                f"{list(zip(names, dirs))}, {st.name!r} has "
                f"{[(o.name, o.direction) for o in st.objectives]}")
    given = ref_point is not None
    ref: tuple[float, ...] | None
    if ref_point is not None:
        ref = tuple(float(v) for v in ref_point)
        if len(ref) != len(names):
            raise ValueError(f"ref_point needs one value per objective {names}, got {list(ref)}")
    else:
        # Every study's own front counts (not only the union's): the point sits
        # just below the worst front point of any study, so no front is cut off.
        fronts = [r for (st, _), (recs, _) in zip(loaded, cleaned)
                  for r in pareto.front_records(recs, st.objectives)]
        thr: list[float | None] = []
        for i in range(len(names)):
            ts = {st.objectives[i].threshold for st, _ in loaded}
            thr.append(ts.pop() if len(ts) == 1 else None)
        if fronts:
            inferred = pareto.infer_reference_point(_matrix(fronts, names), directions=dirs,
                                                    front_only=False)
            ref = tuple(float(t) if t is not None else float(v) for t, v in zip(thr, inferred))
        elif all(t is not None for t in thr):
            ref = tuple(float(t) for t in thr)  # type: ignore[arg-type]
        else:
            ref = None
    entries: list[CompareEntry] = []
    seen: dict[str, int] = {}
    for (st, warns), (recs, bad) in zip(loaded, cleaned):
        front = _front_numbers(recs, st.objectives)
        by_num = {r.number: r for r in recs}
        fvals = tuple(tuple(by_num[n].values[k] for k in names) for n in front)
        hv = (pareto.hypervolume(np.array(fvals), list(ref), dirs) if ref is not None and fvals
              else 0.0)
        unbilled = _unbilled(st)
        prov = _provenance(recs, unbilled)
        name = str(st.name or "study")
        if name in seen:
            name = f"{name} ({st.path})"
        seen[name] = 1
        host = st.spec.get("host", {}) if isinstance(st.spec.get("host"), dict) else {}
        gpus = host.get("gpus") or []
        host_line = str(host.get("cpu_model", "")) + (f" + {', '.join(map(str, gpus))}" if gpus else "")
        sampler = st.spec.get("sampler", {})
        w = list(warns) + bad
        if not _ok(recs):
            w.append("no complete feasible trial: empty front")
        entries.append(CompareEntry(
            name=name, path=str(st.path or ""), n_trials=len(recs), n_complete=len(_ok(recs)),
            front_values=fvals, front_numbers=front, hypervolume=float(hv),
            hv_series=hypervolume_series(recs, st.objectives, ref),
            search_energy_j=float(sum(r.energy_j for r in recs)) + _proposals_j(recs, unbilled),
            energy_estimated=any(not p.measured for p in prov),
            sampler=str(sampler.get("name", "")) if isinstance(sampler, dict) else str(sampler),
            host=host_line, warnings=tuple(w)))
    return CompareData(tuple(first.objectives), ref, given, tuple(entries))
