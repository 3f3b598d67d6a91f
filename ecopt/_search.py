"""The search's own energy: metering proposals, and the energy budget of ``optimize()``.

A proposal (fitting the sampler's models and optimising its acquisition) is
metered like a phase, with the study's meter, and recorded in each proposed
trial's notes as ``proposal["search"]``::

    {"energy_j": 3.1, "duration_s": 0.42, "measured": false,
     "source": "cpu=estimate-cpu-time", "meter": "estimate", "batch": 4}

A batch of ``q`` proposals made together is one window; its energy and
duration are split evenly over the ``q`` trials (``batch`` says how many), so
summing over trials gives the total. ``energy_j`` is ``null`` when the meter
reads no energy (``wallclock``).

A stopping-rule evaluation is metered the same way and added to the next
proposal's window. One that no proposal follows (the evaluation that stops
``optimize(stop_when_converged=...)``, a last ``should_terminate()``) is kept
in ``study.json`` instead, as ``unbilled_search`` (the same fields) in the
optimize call's entry, or in the session when the study is closed outside
``optimize()``: :func:`unbilled_windows` reads them back.

While trials of the study are in flight (asked and not yet told), the notes
say so: ``"overlap": true, "in_flight": n``. A meter that reads the whole
machine (or GPU) then also counts those trials' energy in the proposal's
window (see docs/energy-aware-search.md).

The budget (:class:`EnergyBudget`) counts what one ``optimize()`` call spent:
the energy of the trials it ran plus that of every proposal it asked for.
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

if TYPE_CHECKING:
    from ecopt.meters import Meter
    from ecopt.space import SearchSpace
    from ecopt.trial import TrialOutcome, TrialRecord

__all__ = ["meter_proposal", "split_search", "search_energy_j", "proposal_energy_j", "EnergyBudget",
           "PREDICT_QUANTILE", "NEAREST", "NOT_STARTED", "BUDGET_CHARGE_KEY", "BudgetCharge",
           "charge_for", "budget_cost_j", "add_window", "mark_overlap", "unbilled_windows",
           "UNBILLED_KEY"]

#: ``error.type`` of a trial proposed but not started: predicted to overrun the energy budget.
NOT_STARTED = "NotStarted"
#: Key of a stopping-rule window no proposal followed, in ``study.json``.
UNBILLED_KEY = "unbilled_search"

T = TypeVar("T")

#: Quantile of the finished trials' energies taken as the next trial's energy.
PREDICT_QUANTILE = 0.95
#: Complete trials nearest a configuration that bound the reach of its energy prediction.
NEAREST = 3
#: Proposals whose per-trial energy predicts the next proposal's (the largest of them).
RECENT_PROPOSALS = 5


def meter_proposal(meter: Meter, propose: Callable[[], T]) -> tuple[T, dict[str, Any], float]:
    """Run ``propose()`` inside a meter window.

    Returns:
        ``(result, search, energy_j)``: what ``propose`` returned, the
        ``proposal["search"]`` notes for the whole window (``batch`` and the
        per-trial split are filled in by :func:`split_search`), and the
        window's joules (0 when the meter reads none or failed).

    A meter that fails to open or close the window never stops the proposal:
    the notes then hold its duration and the error.
    """
    error = None
    try:
        handle = meter.start()
    except Exception as exc:  # noqa: BLE001 - a meter bug must not stop the search
        handle, error = None, f"{type(exc).__name__}: {exc}"
    t0 = time.perf_counter()
    try:
        result = propose()
    finally:
        duration = time.perf_counter() - t0
        m = None
        if handle is not None:
            try:
                m = meter.stop(handle)
            except Exception as exc:  # noqa: BLE001
                error = f"{type(exc).__name__}: {exc}"
    notes: dict[str, Any] = {"energy_j": None, "duration_s": duration, "measured": False,
                             "source": "none", "meter": getattr(meter, "name", "?")}
    energy = 0.0
    if m is not None:
        notes["duration_s"] = m.duration_s
        if m.components:
            ok = all(isinstance(c.energy_j, (int, float)) and math.isfinite(c.energy_j)
                     and c.energy_j >= 0 for c in m.components.values())
            if ok:
                energy = m.energy_j
                notes.update(energy_j=energy, measured=m.measured,
                             source=";".join(f"{k}={c.source}" for k, c in m.components.items()))
            else:
                error = f"meter {m.meter!r} returned invalid energy for the proposal"
    if error is not None:
        notes["error"] = error
        warnings.warn(f"the proposal's energy could not be metered ({error}); its duration "
                      "is recorded", RuntimeWarning, stacklevel=3)
    return result, notes, energy


def split_search(notes: dict[str, Any], n: int) -> dict[str, Any]:
    """One trial's share of a batch of ``n`` proposals made in one metered window."""
    share = dict(notes)
    share["batch"] = n
    if n > 1:
        share["duration_s"] = notes["duration_s"] / n
        if notes["energy_j"] is not None:
            share["energy_j"] = notes["energy_j"] / n
        for key in ("convergence_check_s", "convergence_check_j"):
            if isinstance(notes.get(key), (int, float)):
                share[key] = notes[key] / n
    return share


def add_window(total: dict[str, Any] | None, window: dict[str, Any]) -> dict[str, Any]:
    """Two metered windows of the same meter as one: durations and joules summed.

    ``energy_j`` stays ``None`` only when neither window read energy; the
    provenance (``meter``, ``source``, ``measured``) is the first window's that
    read energy.
    """
    if total is None:
        out = {k: window.get(k) for k in ("energy_j", "duration_s", "measured", "source", "meter")}
        out["duration_s"] = float(window.get("duration_s") or 0.0)
        if out["energy_j"] is not None:
            out["energy_j"] = search_energy_j(window)
        return _with_overlap(out, window)
    out = dict(total)
    out["duration_s"] = float(total.get("duration_s") or 0.0) \
        + float(window.get("duration_s") or 0.0)
    if window.get("energy_j") is not None:
        if total.get("energy_j") is None:
            out.update(measured=window.get("measured"), source=window.get("source"),
                       meter=window.get("meter"))
        out["energy_j"] = search_energy_j(total) + search_energy_j(window)
    return _with_overlap(out, window)


def mark_overlap(notes: dict[str, Any], in_flight: int) -> dict[str, Any]:
    """Flag a window made while ``in_flight`` trials ran (``overlap``; the larger count kept)."""
    if in_flight > 0:
        notes["overlap"] = True
        notes["in_flight"] = max(int(notes.get("in_flight") or 0), in_flight)
    return notes


def _with_overlap(out: dict[str, Any], window: dict[str, Any]) -> dict[str, Any]:
    """Carry ``window``'s ``overlap``/``in_flight`` flags into ``out``."""
    return mark_overlap(out, int(window.get("in_flight") or 0)) if window.get("overlap") else out


def unbilled_windows(spec: Any) -> list[dict[str, Any]]:
    """Every stopping-rule window kept in ``study.json`` (optimize calls and sessions)."""
    out: list[dict[str, Any]] = []
    sessions = spec.get("sessions") if isinstance(spec, dict) else None
    for sess in sessions if isinstance(sessions, list) else []:
        if not isinstance(sess, dict):
            continue
        calls = sess.get("optimize")
        for c in calls if isinstance(calls, list) else []:
            w = c.get(UNBILLED_KEY) if isinstance(c, dict) else None
            if isinstance(w, dict):
                out.append(w)
        w = sess.get(UNBILLED_KEY)
        if isinstance(w, dict):
            out.append(w)
    return out


def search_energy_j(search: Any) -> float:
    """The joules in ``proposal["search"]`` notes (0 when absent, ``null`` or invalid)."""
    e = search.get("energy_j") if isinstance(search, dict) else None
    if isinstance(e, (int, float)) and not isinstance(e, bool) and math.isfinite(e) and e >= 0:
        return float(e)
    return 0.0


def proposal_energy_j(record: TrialRecord) -> float:
    """The joules of the proposal that made this trial (its share of the batch; 0 if none)."""
    return search_energy_j(record.proposal.get("search")
                           if isinstance(record.proposal, dict) else None)


#: User attribute of a trial charged an estimate by an energy budget (its meter read no energy).
BUDGET_CHARGE_KEY = "budget_charge"


@dataclass(frozen=True)
class BudgetCharge:
    """What an energy budget counts for one finished trial.

    Attributes:
        charged_j: Joules counted against the budget.
        estimated: ``True`` when the trial's reading was missing, NaN (the
            meter failed) or zero and ``charged_j`` is the estimate below.
        power_w: The power the estimate used (``None``: nothing to estimate
            from; the budget cannot be kept).
        why: What was wrong with the reading ("" when nothing).
        how: How the estimate was made.
    """

    charged_j: float
    estimated: bool = False
    power_w: float | None = None
    why: str = ""
    how: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"charged_j": self.charged_j, "power_w": self.power_w, "why": self.why,
                "how": self.how}


def charge_for(outcome: TrialOutcome, records: Sequence[TrialRecord]) -> BudgetCharge:
    """The joules an energy budget counts for a finished trial.

    A trial's recorded energy when it is a positive reading. A trial whose
    meter read nothing (no phase), zero joules or failed (NaN or a broken
    counter fails the trial with a ``MeterError``) is charged its wall-clock
    duration times the highest average power (joules / duration) of the
    study's trials that read energy: an estimate that errs high, so a
    meter's failure never lets a budget run on unspent. A trial that never
    ran (``NotStarted``, no duration) costs nothing.

    Args:
        outcome: How the trial ended and what it measured.
        records: The study's finished trials so far (every session).

    Returns:
        The charge; ``power_w is None`` (with ``charged_j`` the reading) when an
        estimate was needed and no trial ever read energy.
    """
    energy = float(sum(p.energy_j for p in outcome.phases.values()))
    meter_failed = outcome.error is not None and outcome.error.type == "MeterError"
    ran = outcome.duration_s > 0 and not (outcome.error is not None
                                          and outcome.error.type == NOT_STARTED)
    if not ran or (energy > 0 and math.isfinite(energy) and not meter_failed):
        return BudgetCharge(energy if math.isfinite(energy) else 0.0)
    why = ("failed to read energy (" + outcome.error.message[:200] + ")" if meter_failed
           and outcome.error is not None else
           "read no energy (no phase measured)" if not outcome.phases else
           f"read {energy:g} J over {outcome.duration_s:.3g} s")
    powers = [r.energy_j / r.duration_s for r in records
              if r.duration_s > 0 and r.energy_j > 0 and math.isfinite(r.energy_j)
              and not r.user_attrs.get(BUDGET_CHARGE_KEY)]
    if not powers:
        return BudgetCharge(max(energy, 0.0), True, None, why, "no trial read energy")
    power = max(powers)
    charged = max(energy if math.isfinite(energy) else 0.0, power * outcome.duration_s)
    return BudgetCharge(charged, True, power, why,
                        f"its {outcome.duration_s:.3g} s x {power:.4g} W, the highest average "
                        f"power of the {len(powers)} trials that read energy")


def budget_cost_j(record: TrialRecord) -> float:
    """A finished trial's joules as a budget counts them: the estimate it was charged, if any."""
    c = record.user_attrs.get(BUDGET_CHARGE_KEY)
    if isinstance(c, dict):
        v = c.get("charged_j")
        if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
            return float(v)
    return record.energy_j


class EnergyBudget:
    """Whether more trials fit in an ``optimize()`` call's energy budget.

    Two questions, asked at two moments:

    * Before a proposal (:meth:`affordable`): could any trial still fit? A
      trial is taken to cost at least the cheapest complete trial so far, plus
      its proposal (the largest per-trial proposal energy among the last
      :data:`RECENT_PROPOSALS`). When not even that fits, no proposal is made.
    * Before a proposed trial starts (:meth:`admits`): does *this*
      configuration fit? Its energy is predicted from the complete trials
      nearest to it (:meth:`predict_config_j`: the largest energy among those
      no farther, in the space's unit cube, than twice its
      :data:`NEAREST`-th nearest), or, before :data:`NEAREST` trials
      completed and for a configuration far from all of them, as the
      :data:`PREDICT_QUANTILE` quantile (method
      ``"higher"``: with 20 trials or fewer, the largest) of the energies of
      the complete trials (every finished trial with energy when none
      completed). A trial predicted to overrun is not started.

    Trials in flight count at the energy predicted when they started. Before
    any trial of the study has finished there is nothing to predict from:
    trials then start one at a time.

    Args:
        budget_j: The budget, joules.
    """

    def __init__(self, budget_j: float) -> None:
        self.budget_j = float(budget_j)
        self.trials_j = 0.0
        self.proposals_j = 0.0

    @property
    def spent_j(self) -> float:
        """Joules this call spent so far: trials finished plus proposals made."""
        return self.trials_j + self.proposals_j

    @staticmethod
    def _finished(records: Sequence[TrialRecord]) -> tuple[list[TrialRecord], str]:
        from ecopt.trial import TrialState

        done = [r for r in records if r.state is TrialState.COMPLETE
                and (r.phases or BUDGET_CHARGE_KEY in r.user_attrs)]
        if done:
            return done, "complete"
        return [r for r in records if budget_cost_j(r) > 0], "finished"

    @classmethod
    def predict_trial_j(cls, records: Sequence[TrialRecord]) -> tuple[float, str] | None:
        """A trial's predicted joules whatever its configuration, and how; ``None``: no data."""
        pool, what = cls._finished(records)
        if not pool:
            return None
        q = float(np.quantile(np.asarray([budget_cost_j(r) for r in pool]), PREDICT_QUANTILE,
                              method="higher"))
        return q, f"{PREDICT_QUANTILE:.0%} quantile of {len(pool)} {what} trials"

    @classmethod
    def predict_config_j(cls, records: Sequence[TrialRecord], space: SearchSpace,
                         params: Mapping[str, Any]) -> tuple[float, str] | None:
        """This configuration's predicted joules, from its nearest complete trials, and how.

        ``None`` (then :meth:`predict_trial_j` applies) before :data:`NEAREST`
        complete trials have a configuration of ``space``, and for a configuration
        farther from every complete trial than their typical spacing (the median,
        over the distinct configurations, of the distance to the nearest other).
        """
        pool, what = cls._finished(records)
        rows, energy = [], []
        for r in pool if what == "complete" else ():
            try:
                rows.append(space.encode(r.params))
            except (KeyError, ValueError, TypeError):  # a record of another space
                continue
            energy.append(budget_cost_j(r))
        if len(rows) < NEAREST:
            return None
        X = np.asarray(rows)
        d = np.linalg.norm(X - space.encode(params), axis=1)
        # Near the data only: farther from every trial than their typical spacing (the
        # median distance from a configuration to its nearest other one), the neighbours
        # say little, and the trial-blind prediction applies.
        U = np.unique(X, axis=0)
        if len(U) >= 2:
            D = np.linalg.norm(U[:, None, :] - U[None, :, :], axis=2)
            np.fill_diagonal(D, np.inf)
            if float(d.min()) > float(np.median(D.min(axis=1))) + 1e-12:
                return None
        radius = 2.0 * float(np.sort(d)[NEAREST - 1])
        near = d <= radius + 1e-12
        e = float(np.max(np.asarray(energy)[near]))
        return e, (f"the largest of the {int(near.sum())} complete trials nearest its "
                   "configuration")

    @staticmethod
    def predict_proposal_j(recent: Sequence[float]) -> float:
        """The next proposal's predicted joules per trial."""
        return max(recent[-RECENT_PROPOSALS:], default=0.0)

    def _head(self, in_flight_j: float, n_in_flight: int) -> str:
        return (f"energy_budget_j={self.budget_j:g} J: spent {self.spent_j:.6g} J (trials + "
                f"proposals), {n_in_flight} trial(s) in flight predicted at "
                f"{in_flight_j:.6g} J")

    def affordable(self, records: Sequence[TrialRecord], in_flight_j: float, n_in_flight: int,
                   recent_proposals: Sequence[float], want: int) -> tuple[int, str]:
        """How many of ``want`` new trials may be proposed now, and why not more.

        Each is taken to cost at least the cheapest complete trial so far plus
        its proposal: an optimistic bound, so that no trial that could fit is
        refused here (:meth:`admits` then judges the proposed configuration).

        Args:
            records: The study's finished trials (all sessions), to predict from.
            in_flight_j: Predicted joules of this call's trials still running.
            n_in_flight: How many of them.
            recent_proposals: Per-trial proposal joules, oldest first.
            want: How many the loop would like to start.
        """
        pool, what = self._finished(records)
        prop = self.predict_proposal_j(recent_proposals)
        if not pool:
            n = 1 if n_in_flight == 0 and self.spent_j + prop < self.budget_j else 0
            return min(n, want), ("no trial has finished yet: its energy is unknown, "
                                  "trials start one at a time")
        low = min(budget_cost_j(r) for r in pool)
        room = self.budget_j - self.spent_j - in_flight_j
        per = low + prop
        n = int(room // per) if per > 0 else want
        n = max(0, min(n, want))
        return n, (f"{self._head(in_flight_j, n_in_flight)}; not even the cheapest of "
                   f"{len(pool)} {what} trials ({low:.6g} J) + {prop:.3g} J for its proposal "
                   "would fit")

    def admits(self, records: Sequence[TrialRecord], space: SearchSpace,
               params: Mapping[str, Any], in_flight_j: float, n_in_flight: int
               ) -> tuple[bool, float, str]:
        """Whether a proposed trial (its proposal already spent) may start.

        Returns:
            ``(fits, predicted joules, why)``; ``why`` says what was predicted and
            from what (the stop reason when it does not fit).
        """
        pred = self.predict_config_j(records, space, params) or self.predict_trial_j(records)
        if pred is None:  # nothing finished: one at a time (affordable() saw to it)
            return n_in_flight == 0, 0.0, "no trial has finished yet"
        each, how = pred
        fits = self.spent_j + in_flight_j + each <= self.budget_j
        return fits, each, (f"{self._head(in_flight_j, n_in_flight)}; the next trial "
                            f"{dict(params)} is predicted to need {each:.6g} J ({how})")
