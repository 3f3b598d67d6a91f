"""The loop behind :meth:`ecopt.Study.optimize`: propose, submit, harvest, record.

One driver thread runs it; executors run the objectives (inline, in worker
processes or on a Dask cluster) and hand back :class:`~ecopt.trial.TrialOutcome`
futures. The driver alone writes the trial log, so every record goes through
:meth:`ecopt.Study.tell`.

What survives a stop:

* a trial whose future holds an outcome is recorded with that outcome, also
  when the stop (Ctrl-C, a lost executor) comes before the loop looked at it;
* only trials still running are recorded failed (``Interrupted``), keeping
  whatever the driver knows of them (phases measured in-process so far).
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, wait
from dataclasses import replace
from pathlib import Path
from typing import Any, Protocol

from ecopt import _failures
from ecopt._search import BUDGET_CHARGE_KEY, NOT_STARTED, BudgetCharge, EnergyBudget, charge_for
from ecopt.callbacks import Callback
from ecopt.errors import ExecutorLostError, MeterError, SystematicFailureError
from ecopt.executors import Executor
from ecopt.space import SearchSpace
from ecopt.trial import ErrorInfo, Trial, TrialOutcome, TrialRecord, TrialState

__all__ = ["FAIL_FAST_RULES", "MAX_FAILURE_RATE", "MIN_TRIALS_FOR_RATE", "OptimizeLoop",
           "LoopStudy"]

log = logging.getLogger("ecopt")

#: ``fail_fast`` stops a call when more than this share of its trials failed...
MAX_FAILURE_RATE = 0.5
#: ... once at least this many of its trials counted (Ax's orchestrator: 50% after 5).
MIN_TRIALS_FOR_RATE = 10
#: The rules ``fail_fast`` applies (:meth:`OptimizeLoop._count_failure`), in order.
FAIL_FAST_RULES = ("first", "spread", "rate")


def _fmt_params(params: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v!r}"
                     for k, v in params.items())


class LoopStudy(Protocol):
    """What the loop needs of the study it drives (an :class:`ecopt.Study`).

    A protocol, so that this module never imports the study (the study
    imports the loop).
    """

    space: SearchSpace
    _records: list[TrialRecord]
    _running: dict[int, Trial]
    _stop_requested: bool
    _stopping: str | None
    _proposal_energy_j: float
    _proposal_shares: list[float]

    @property
    def path(self) -> Path | None: ...

    def ask(self, n: int) -> list[Trial]: ...

    def tell(self, trial: Trial, *, outcome: TrialOutcome) -> TrialRecord: ...

    def _interrupt_running(self, why: str) -> None: ...


def _interrupted(t: Trial, why: str) -> TrialOutcome:
    """A running trial stopped from outside: keep what the driver measured of it."""
    return TrialOutcome.of(t, error=ErrorInfo("Interrupted", why, ""))


class OptimizeLoop:
    """One call of :meth:`Study.optimize` (see there for the arguments).

    Callbacks are called after each saved trial; those with a
    ``before_proposal(study)`` hook (:class:`ecopt.callbacks.OptimizeCallback`)
    are asked before each proposal and may stop the call.

    Attributes:
        done: Records of the trials this call ran, in the order they were saved.
        stop_reason: Why the loop stopped proposing (``"n_trials"``, ``"timeout"``,
            ``"sampler exhausted"``, ``"stopped by study.stop()"``, the energy
            budget with its numbers, the stopping rule's ``"converged: ..."``
            line...).
    """

    def __init__(self, study: LoopStudy, objective: Callable[[Trial], Any], n_trials: int | None,
                 batch_size: int, executor: Executor, timeout_s: float | None,
                 asynchronous: bool, callbacks: Sequence[Callback] = (), *,
                 energy_budget_j: float | None = None, fail_fast: int | None = None) -> None:
        self.study = study
        self.objective = objective
        self.batch_size = batch_size
        self.ex = executor
        self.timeout_s = timeout_s
        self.asynchronous = asynchronous
        self.callbacks = list(callbacks)
        #: Trials still to start (``None`` in ``n_trials``: until a budget stops the call).
        self.to_start = n_trials if n_trials is not None else sys.maxsize
        self.done: list[TrialRecord] = []
        self.in_flight: dict[Future[TrialOutcome], Trial] = {}
        self.stop_reason: str | None = None
        self.budget = EnergyBudget(energy_budget_j) if energy_budget_j is not None else None
        #: The budget's prediction of each trial in flight, joules, by trial number.
        self.predicted_j: dict[int, float] = {}
        #: Joules of the trials this call ran (every state), as recorded.
        self.trials_j = 0.0
        #: What the budget charged beyond the recorded joules (trials that read no energy).
        self.charged_extra_j = 0.0
        #: Set when the budget cannot be kept (nothing to estimate a missing reading from).
        self.budget_error: MeterError | None = None
        self._t0 = time.monotonic()
        self._proposals_j0 = study._proposal_energy_j
        #: Stop after this many consecutive trials failed the same way (``None``: never).
        self.fail_fast = fail_fast
        #: The current run of trials that failed with one error (type, raising line).
        self.streak: list[TrialRecord] = []
        #: This call's trials that count for ``fail_fast`` (successes and failures).
        self.counted: list[TrialRecord] = []
        #: Set once a ``fail_fast`` rule judged the failures systematic; raised by :meth:`run`.
        self.systematic: SystematicFailureError | None = None

    @property
    def proposals_j(self) -> float:
        """Joules of every proposal this call asked the sampler for."""
        return self.study._proposal_energy_j - self._proposals_j0

    @property
    def spent_j(self) -> float:
        """Joules this call spent: trials (as charged against a budget) + proposals."""
        return self.trials_j + self.charged_extra_j + self.proposals_j

    # -- recording -------------------------------------------------------------
    def _finish(self, t: Trial, out: TrialOutcome) -> None:
        self.predicted_j.pop(t.number, None)
        charge: BudgetCharge | None = None
        if self.budget is not None:
            charge = charge_for(out, self.study._records)
            if charge.estimated:
                out = replace(out, user_attrs={**out.user_attrs, BUDGET_CHARGE_KEY: charge.to_dict()})
        rec = self.study.tell(t, outcome=out)
        self.done.append(rec)
        self.trials_j += rec.energy_j
        if charge is not None:
            self._charge(rec, charge)
        for cb in self.callbacks:  # every trial, whatever the budget made of it
            try:
                cb(self.study, rec)
            except Exception as exc:  # noqa: BLE001 - a callback never loses the study's trials
                log.warning("callback %r failed after trial %d (the study goes on): %s: %s",
                            cb, rec.number, type(exc).__name__, exc, exc_info=True)
        self._count_failure(rec)

    def _charge(self, rec: TrialRecord, charge: BudgetCharge) -> None:
        """Count a trial against the budget: its energy, or the stated estimate where none was read."""
        assert self.budget is not None
        self.charged_extra_j += charge.charged_j - rec.energy_j
        if not charge.estimated:
            return
        if charge.power_w is None:
            self.to_start = 0
            self.budget_error = MeterError(
                f"energy_budget_j={self.budget.budget_j:g} J cannot be kept: trial {rec.number} "
                f"{charge.why}, and no trial of this study has read energy yet to estimate it "
                "from (a budget is only as good as the meter's readings). Fix the meter (ecopt "
                "meters lists what works here) or use meter='estimate'; the trial is recorded.")
            self.stop_reason = f"energy_budget_j: {self.budget_error}"
            return
        log.warning("energy budget: trial %d %s; charged %.6g J (%s)", rec.number, charge.why,
                    charge.charged_j, charge.how)

    def _count_failure(self, rec: TrialRecord) -> None:
        """Judge whether the failures so far are the objective's fault (``fail_fast=k``).

        Trials that :func:`ecopt._failures.counts_as_failure` calls failures
        count as failures (``failed`` trials whose objective ran, and trials
        pruned before they reported); complete trials and other pruned ones count
        as successes; infeasible trials (the configuration's fault), trials not
        started and those interrupted from outside are neutral. The call stops
        when one of :data:`FAIL_FAST_RULES` holds:

        1. ``first``: the first ``k`` counted trials of this call all failed, and
           no trial of the study has completed (one that has shows the objective
           runs);
        2. ``spread``: ``k`` failures in a row with the same error (exception type
           and the line that raised it) on configurations whose box holds a
           complete trial of the study: the error struck on both sides of a
           configuration that works, so it is not one bad region (a sampler that
           proposes neighbours inside a failing region never trips it);
        3. ``rate``: more than :data:`MAX_FAILURE_RATE` of this call's counted
           trials failed, once at least :data:`MIN_TRIALS_FOR_RATE` counted.
        """
        if self.fail_fast is None or self.systematic is not None:
            return
        failure = _failures.counts_as_failure(rec)
        if rec.state in (TrialState.COMPLETE, TrialState.PRUNED) and not failure:
            self.counted.append(rec)
            self.streak.clear()
            return
        if not failure:
            return
        self.counted.append(rec)
        key = _failures.error_key(rec)
        if self.streak and _failures.error_key(self.streak[-1]) != key:
            self.streak.clear()
        self.streak.append(rec)
        k = self.fail_fast
        failed = [r for r in self.counted if _failures.counts_as_failure(r)]
        why: str | None = None
        culprits: list[TrialRecord] = []
        # a study with complete trials has shown that the objective runs: its first
        # failures in this call may be one bad region (the other rules judge those)
        ran = any(r.state is TrialState.COMPLETE for r in self.study._records)
        if len(self.counted) == k and len(failed) == k and not ran:
            culprits = failed
            why = (f"the first {k} trials of this call all failed: the objective fails "
                   "wherever it runs")
        elif len(self.streak) >= k:
            inside = _failures.enclosed(self.study.space, self.streak, [
                r for r in self.study._records if r.state is TrialState.COMPLETE])
            if inside is not None:
                culprits = list(self.streak)
                why = (f"the same error {len(culprits)} times in a row, on configurations "
                       f"around trial {inside.number} ({_fmt_params(inside.params)}), which "
                       "completed: the error is not confined to one region of the space")
        if why is None and len(self.counted) >= MIN_TRIALS_FOR_RATE \
                and len(failed) > MAX_FAILURE_RATE * len(self.counted):
            culprits = failed
            why = (f"{len(failed)} of the {len(self.counted)} trials this call ran failed, "
                   f"more than {MAX_FAILURE_RATE:.0%} (checked from "
                   f"{MIN_TRIALS_FOR_RATE} trials on)")
        if why is None:
            return
        nums = tuple(r.number for r in culprits)
        last = culprits[-1]
        etype = last.error.type if last.error is not None else "TrialPruned"
        tb = last.error.traceback if last.error is not None else ""
        msg = last.error.message if last.error is not None else \
            "pruned before it reported a value"
        shown = msg if len(msg) <= 500 else msg[:500] + "..."
        where = _failures.error_key(last)[1]
        configs = "\n".join(f"  trial {r.number}: {_fmt_params(r.params)} -- {kind}"
                            + (f" at {at}" if at else "")
                            for r in culprits[-10:] for kind, at in [_failures.error_key(r)])
        self.systematic = SystematicFailureError(
            f"trials {', '.join(map(str, nums))} all failed with {etype}: {shown}"
            f"{' (raised at ' + where + ')' if where else ''} -- judged a bug in the objective, "
            f"not a bad configuration, because {why}; optimize() stopped "
            f"(fail_fast={self.fail_fast}).\nThe configurations:\n{configs}\n"
            "Every trial is recorded; fix the objective and call optimize() again to "
            "resume, raise ecopt.Infeasible for configurations that cannot run, or pass "
            "fail_fast=None to run on regardless."
            + (f"\nTraceback of trial {nums[-1]}:\n{tb}" if tb else ""),
            nums, etype, msg, tb)
        self.systematic.reason = why
        self.stop_reason = (f"fail_fast: trials {', '.join(map(str, nums))} failed with "
                            f"{etype}: {shown} ({why})")
        self.to_start = 0

    def _harvest(self, futures: Sequence[Future[TrialOutcome]]) -> ExecutorLostError | None:
        """Record the outcome of every finished future; return the executor's loss, if any."""
        lost: ExecutorLostError | None = None
        for fut in sorted(futures, key=lambda f: self.in_flight[f].number):
            t = self.in_flight.pop(fut)
            try:
                out = fut.result()
            except ExecutorLostError as exc:
                lost = exc
                self.in_flight[fut] = t
                continue
            except Exception as exc:  # the executor could not run it
                out = TrialOutcome.of(t, error=ErrorInfo.from_exception(exc))
            self._finish(t, out)
        return lost

    def _stop_everything(self, why: str, extra: Sequence[Trial] = ()) -> None:
        """Record finished futures as they are, then every trial still running as interrupted."""
        finished = [f for f in self.in_flight if f.done() and not f.cancelled()]
        # The trials recorded from here on are logged as the end of the call, not as
        # failures the study goes on after (it does not).
        self.study._stopping = why
        try:
            try:
                self._harvest(finished)
            except BaseException:  # a second Ctrl-C while saving: still mark the rest
                self._interrupt_rest(why, extra)
                raise
            self._interrupt_rest(why, extra)
        finally:
            self.study._stopping = None

    def _interrupt_rest(self, why: str, extra: Sequence[Trial]) -> None:
        trials = list(self.in_flight.values()) + [t for t in extra if t not in
                                                  self.in_flight.values()]
        self.in_flight.clear()
        for t in sorted(trials, key=lambda t: t.number):
            if t.number in self.study._running:
                self._finish(t, _interrupted(t, why))
        # Trials asked outside this loop (ask/tell by hand) are not ours to keep open either.
        self.study._interrupt_running(why)

    def _executor_lost(self, lost: ExecutorLostError, extra: Sequence[Trial] = ()
                       ) -> ExecutorLostError:
        n = len(self.in_flight) + len(extra)
        self._stop_everything(f"the executor was lost: {lost}", extra)
        where = f"the log in {str(self.study.path)!r} is complete" if self.study.path else \
            "this in-memory study keeps its records"
        return ExecutorLostError(
            f"{lost}; {n} trial(s) in flight were recorded as failed "
            f"(Interrupted) and {where}. Bring the scheduler back (or use another executor), "
            "re-open the study with the same storage and call optimize() again to resume"
        )

    # -- proposing ---------------------------------------------------------------
    def _may_start(self) -> bool:
        """Whether new trials may start; sets :attr:`stop_reason` when not."""
        if self.to_start <= 0:
            self.stop_reason = self.stop_reason or "n_trials"
            return False
        if self.study._stop_requested:
            self.stop_reason = "stopped by study.stop()"
            self.to_start = 0
            return False
        if self.timeout_s is not None and time.monotonic() - self._t0 > self.timeout_s:
            self.stop_reason = f"timeout_s={self.timeout_s:g} reached"
            self.to_start = 0
            return False
        if self.budget is not None and self._affordable(1)[0] == 0:
            if not self.in_flight:  # nothing left to free room: the budget is spent
                self.stop_reason = self._affordable(1)[1]
                self.to_start = 0
                log.info("energy budget: %s; no more trials start", self.stop_reason)
            return False
        for cb in self.callbacks:
            ask = getattr(cb, "before_proposal", None)
            if ask is None:
                continue
            try:
                why = ask(self.study)
            except Exception as exc:  # noqa: BLE001 - a callback never stops a study by failing
                log.warning("callback %r failed before a proposal (the study goes on): %s: %s",
                            cb, type(exc).__name__, exc, exc_info=True)
                continue
            if why:
                self.stop_reason = str(why)
                self.to_start = 0
                return False
        return True

    def _affordable(self, want: int) -> tuple[int, str]:
        """How many new trials the energy budget allows now (``want`` without a budget)."""
        if self.budget is None:
            return want, ""
        self._sync_budget()
        return self.budget.affordable(self.study._records, sum(self.predicted_j.values()),
                                      len(self.in_flight), self.study._proposal_shares, want)

    def _sync_budget(self) -> None:
        assert self.budget is not None
        self.budget.trials_j = self.trials_j + self.charged_extra_j
        self.budget.proposals_j = self.proposals_j

    def _admit(self, trials: list[Trial]) -> list[Trial]:
        """The proposed trials the energy budget lets start; the rest are recorded, not run.

        A trial predicted to overrun is saved as failed (``NotStarted``, the
        prediction in its message) with its proposal's energy, and ends the call.
        """
        if self.budget is None:
            return trials
        self._sync_budget()
        ok: list[Trial] = []
        for t in trials:
            fits, each, why = self.budget.admits(
                self.study._records, self.study.space, t.params,
                sum(self.predicted_j.values()), len(self.in_flight) + len(ok))
            if fits:
                ok.append(t)
                self.predicted_j[t.number] = each
                continue
            self.stop_reason = self.stop_reason or why
            self.to_start = 0
            log.info("energy budget: %s; it is not started", why)
            self._finish(t, TrialOutcome.of(t, duration_s=0.0, error=ErrorInfo(
                NOT_STARTED, f"not started: {why}", "")))
        return ok

    def _start_batch(self) -> bool:
        """Ask for and submit up to ``batch_size`` trials; False when the sampler has none."""
        free = self.ex.slots - len(self.in_flight)
        n = self._affordable(min(self.batch_size, self.to_start, free))[0]
        if n < 1:
            return True  # the budget waits for trials in flight (see _may_start)
        trials = self.study.ask(n)
        if not trials:
            log.warning("the sampler has nothing left to propose; stopping")
            self.stop_reason = "the sampler has nothing left to propose"
            self.to_start = 0
            return False
        self.to_start -= len(trials)
        trials = self._admit(trials)
        for i, t in enumerate(trials):
            if i and not self._may_start_queued(t, trials[i:]):
                break
            try:
                self.in_flight[self.ex.submit(self.objective, t)] = t
            except ExecutorLostError as exc:
                raise self._executor_lost(exc, trials[i:]) from exc
            except BaseException as exc:
                # Ctrl-C (or SystemExit...) inside an inline executor's submit: this trial
                # and the rest of the batch never ran to the end.
                self._stop_everything(f"stopped by {type(exc).__name__}", trials[i:])
                raise
        return True

    def _may_start_queued(self, t: Trial, rest: Sequence[Trial]) -> bool:
        """Whether the next trial of a batch may start, now that earlier ones may have ended.

        An inline executor runs a batch's trials one after another inside
        ``submit``: each one's result is recorded before the next starts, and
        the next starts only if the call may still go on (no ``fail_fast``
        stop) and the energy budget, with what the earlier ones really cost,
        still admits it. Otherwise it and the rest of the batch are recorded
        as failed (``NotStarted``) and never run.
        """
        finished = [f for f in self.in_flight if f.done()]
        if finished:
            lost = self._harvest(finished)
            if lost is not None:
                raise self._executor_lost(lost, rest) from lost
        why: str | None = None
        if self.systematic is not None or self.budget_error is not None:
            why = self.stop_reason or "stopped"
        elif self.budget is not None:
            self._sync_budget()
            mine = self.predicted_j.pop(t.number, 0.0)
            fits, each, reason = self.budget.admits(
                self.study._records, self.study.space, t.params,
                sum(self.predicted_j.values()), len(self.in_flight))
            if fits:
                self.predicted_j[t.number] = max(each, mine)
            else:
                why = reason
                self.stop_reason = self.stop_reason or reason
                log.info("energy budget: %s; it is not started", reason)
        if why is None:
            return True
        self.to_start = 0
        for q in rest:
            self.predicted_j.pop(q.number, None)
            self._finish(q, TrialOutcome.of(q, duration_s=0.0, error=ErrorInfo(
                NOT_STARTED, f"not started: {why}", "")))
        return False

    # -- the loop ------------------------------------------------------------------
    def run(self) -> list[TrialRecord]:
        """Run until ``n_trials`` started and finished (or a stop); return the records."""
        try:
            while self.in_flight or self._may_start():
                free = self.ex.slots - len(self.in_flight)
                if self.to_start > 0 and free > 0 and (self.asynchronous or not self.in_flight) \
                        and self._may_start():
                    if not self._start_batch():
                        continue
                    if self.asynchronous and self.to_start > 0 \
                            and self.ex.slots > len(self.in_flight) \
                            and not any(f.done() for f in self.in_flight):
                        # Fill every free slot before waiting, unless results are already
                        # in (the local executor runs inline): the sampler must see them.
                        continue
                if not self.in_flight:
                    continue
                finished, _ = wait(list(self.in_flight), timeout=1.0,
                                   return_when=FIRST_COMPLETED)
                lost = self._harvest(list(finished))
                if lost is not None:
                    raise self._executor_lost(lost) from lost
                failure = self.systematic or self.budget_error
                if failure is not None:
                    self._stop_everything(f"stopped: {self.stop_reason}")
                    raise failure
        except KeyboardInterrupt:
            self._stop_everything("stopped by KeyboardInterrupt")
            self.stop_reason = "KeyboardInterrupt"
            raise
        failure = self.systematic or self.budget_error
        if failure is not None:  # found inside a batch, with nothing left in flight
            raise failure
        return self.done
