"""Callbacks of :meth:`ecopt.Study.optimize`: what runs beside the loop.

A callback is any ``callback(study, record)`` callable, called after each
trial is saved, in order (Optuna's shape). A callback that raises is logged
and skipped: it never loses a trial. An :class:`OptimizeCallback` may also
hook the start and the end of the call, and the moment before each proposal,
where it can stop the call (no new trial starts; those in flight finish).

``optimize()``'s conveniences build these callbacks, so everything the loop
shows or decides beside proposing and recording is one of them:

* ``show_progress`` (on when stderr is a terminal): :class:`ProgressBar`;
* ``stop_when_converged``: :class:`StopWhenConverged`;
* ``live=True``: the notebook front of :mod:`ecopt.report.live`. The core
  never imports the reports, so this one is found through
  :func:`display_callback`, in which the package (``ecopt/__init__.py``)
  registers the report layer's factory; a display that needs matplotlib is
  imported only when asked for.

Example:
    >>> class EveryTenth(ecopt.callbacks.OptimizeCallback):
    ...     def __call__(self, study, record):
    ...         if record.number % 10 == 9:
    ...             print(record.number, study.hypervolume())
    >>> study.optimize(objective, n_trials=30, callbacks=[EveryTenth()])
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable
from typing import IO, Any

from ecopt._convergence import StoppingRule
from ecopt._search import proposal_energy_j
from ecopt.fmt import fmt_number
from ecopt.trial import TrialRecord, TrialState

__all__ = ["Callback", "OptimizeCallback", "ProgressBar", "StopWhenConverged", "quiet_from_env",
           "register_display", "display_callback"]

log = logging.getLogger("ecopt")

#: ``callback(study, record)``, called after each trial is saved (``study``: the
#: :class:`ecopt.Study`; typed ``Any`` so that this module never imports the study).
Callback = Callable[[Any, TrialRecord], None]


class OptimizeCallback:
    """A callback with hooks around the loop; every hook is optional (the defaults do nothing).

    ``study`` is the :class:`ecopt.Study` being optimised.
    """

    def on_start(self, study: Any, n_trials: int | None) -> None:
        """Before anything starts. Raise ``ValueError`` to refuse the call (no trial runs).

        Args:
            study: The study.
            n_trials: The call's ``n_trials`` (``None``: until a budget stops it).
        """

    def before_proposal(self, study: Any) -> str | None:
        """Before each proposal: a reason to start no new trial, or ``None`` to go on."""
        return None

    def __call__(self, study: Any, record: TrialRecord) -> None:
        """After each trial is saved."""

    def on_end(self, study: Any, stop_reason: str | None) -> None:
        """After the call (also when it raised); ``stop_reason`` says why it stopped proposing."""


def quiet_from_env() -> bool:
    """Whether ``ECOPT_QUIET`` asks for no progress bar (``1``, ``true``, ``yes``, ``on``)."""
    return os.environ.get("ECOPT_QUIET", "").strip().lower() in ("1", "true", "yes", "on")


class ProgressBar(OptimizeCallback):
    """A progress bar for ``Study.optimize``: trials, current hypervolume, energy spent.

    The bar (tqdm) shows, after each finished trial::

        ecopt quickstart: 60%|██████    | 6/10 [00:04<00:02, hv=0.0123 front=3 energy=41.2 J (estimated) failed=1]

    * ``hv``: the study's hypervolume now (reference point inferred from the
      front where no threshold was given, so it can move, and the hypervolume
      drop, when a new trial changes the front; the line then says
      "(reference point moved)");
    * ``front``: how many trials are on the Pareto front;
    * ``energy``: joules spent by every trial of the study so far (earlier
      sessions included) and by the proposals that made them, labelled
      "(estimated)" as soon as any joule was estimated, "n/a" when the meter
      records no energy;
    * ``failed``: failed or infeasible trials in this call (``pruned`` apart).

    Quiet mode, for scripts and CI: ``study.optimize(..., show_progress=False)``,
    or the environment variable ``ECOPT_QUIET=1`` (which wins over the default
    "show when stderr is a terminal"). Each finished trial is also logged at
    INFO level on the ``ecopt`` logger, so scripts can keep a trace without a bar.

    Where no terminal redraws a bar (a pipe, a batch job's log file),
    ``lines=True`` writes one plain line per finished trial instead::

        ecopt quickstart: trial 6 complete (6/10): hv=0.0123 front=3 energy=41.2 J (estimated) failed=1

    Args:
        enabled: ``True``/``False``, or ``None`` for "when stderr is a terminal
            and ``ECOPT_QUIET`` is not set".
        file: Where the bar (or the lines) is written (default stderr).
        lines: One line per finished trial, flushed at once, instead of a bar.

    Attributes:
        energy_j: Joules of every finished trial of the study so far (with their proposals).
        measured: ``False`` once any joule was estimated.
        has_energy: Whether any trial recorded energy at all.
        failed: Failed or infeasible trials in this call.
        pruned: Pruned trials in this call.
        done: Trials finished in this call.
    """

    def __init__(self, enabled: bool | None = None, file: IO[str] | None = None, *,
                 lines: bool = False) -> None:
        if enabled is None:
            enabled = bool(getattr(sys.stderr, "isatty", lambda: False)()) and not quiet_from_env()
        self.enabled = bool(enabled)
        self.file = file
        self.lines = bool(lines)
        self.total: int | None = None
        self.energy_j = 0.0
        self.measured = True
        self.has_energy = False
        self.failed = self.pruned = self.done = 0
        self._study: Any = None
        self._bar: Any = None
        self._ref: list[float] | None = None

    def on_start(self, study: Any, n_trials: int | None) -> None:
        self._study, self.total = study, n_trials
        self.energy_j, self.measured, self.has_energy = 0.0, True, False
        self.failed = self.pruned = self.done = 0
        self._ref = study.reference_point()
        for r in study.records:  # a resumed study: count what earlier sessions spent
            self._account(r)
        self.close()
        if not self.enabled or self.lines:
            return
        try:
            from tqdm.auto import tqdm
        except ImportError:  # pragma: no cover - tqdm is a dependency
            return
        self._bar = tqdm(total=n_trials, desc=f"ecopt {study.name}", unit="trial",
                         dynamic_ncols=True, file=self.file if self.file is not None else sys.stderr)

    def _account(self, record: TrialRecord) -> None:
        self.energy_j += record.energy_j + proposal_energy_j(record)  # trials + proposals
        for p in record.phases.values():
            if p.measurement.components:
                self.has_energy = True
                if not p.measured:
                    self.measured = False

    @property
    def energy_label(self) -> str:
        """``"12.3 J"``, ``"12.3 J (estimated)"`` or ``"n/a"``."""
        if not self.has_energy:
            return "n/a"
        return f"{fmt_number(self.energy_j)} J" + ("" if self.measured else " (estimated)")

    def postfix(self) -> str:
        """The text shown after the bar."""
        ref = self._study.reference_point()
        moved = " (reference point moved)" if self._ref is not None and ref != self._ref else ""
        self._ref = ref
        hv = self._study.hypervolume(ref) if ref is not None else 0.0
        front = len(self._study.best_trials())
        pruned = f" pruned={self.pruned}" if self.pruned else ""
        return (f"hv={fmt_number(hv)}{moved} front={front} energy={self.energy_label} "
                f"failed={self.failed}{pruned}")

    def __call__(self, study: Any, record: TrialRecord) -> None:
        """Account for one finished trial."""
        if self._study is None:  # called without on_start (used by hand)
            self._study = study
        self._account(record)
        self.done += 1
        if record.state is TrialState.PRUNED:
            self.pruned += 1
        elif record.state is not TrialState.COMPLETE:
            self.failed += 1
        printing = self.enabled and self.lines
        if self._bar is None and not printing and not log.isEnabledFor(logging.INFO):
            return
        text = self.postfix()
        line = (f"trial {record.number} {record.state.value} "
                f"({self.done}/{self.total if self.total is not None else '?'}): {text}")
        log.info("%s", line)
        if printing:
            out = self.file if self.file is not None else sys.stderr
            name = getattr(self._study, "name", None)
            print(f"ecopt {name}: {line}" if name else line, file=out, flush=True)
        if self._bar is not None:
            self._bar.set_postfix_str(text, refresh=False)
            self._bar.update(1)

    def on_end(self, study: Any, stop_reason: str | None) -> None:
        self.close()

    def close(self) -> None:
        """Close the bar (safe to call twice)."""
        if self._bar is not None:
            self._bar.close()
            self._bar = None


class StopWhenConverged(OptimizeCallback):
    """Start no new trial once the stopping rule says the search has converged.

    Before each proposal it evaluates :meth:`ecopt.Study.termination` (GPs
    fitted once per new set of finished trials, the evaluation metered like a
    proposal); when converged, the call stops proposing with the evaluation's
    line as its ``stop_reason``. ``optimize(stop_when_converged=...)`` builds
    it; passing it in ``callbacks=`` does the same.

    Args:
        rule: The :class:`~ecopt.StoppingRule`; ``None``: the study's
            :attr:`~ecopt.Study.stopping_rule` (the rule a re-opened study
            restored, else ``StoppingRule()``). The rule used becomes the
            study's ``stopping_rule``.

    Raises:
        ValueError: (when the call starts) with a sampler that has no model to
            bound the hypervolume still to gain.
    """

    def __init__(self, rule: StoppingRule | None = None) -> None:
        if rule is not None and not isinstance(rule, StoppingRule):
            raise ValueError(f"rule must be an ecopt.StoppingRule or None, got {rule!r}")
        self.rule = rule
        #: The rule of the running (or last) call.
        self.active: StoppingRule | None = None

    def on_start(self, study: Any, n_trials: int | None) -> None:
        sampler = study.sampler
        if not callable(getattr(sampler, "improvement_bound", None)):
            raise ValueError(f"stop_when_converged needs a model-based sampler ('qlognehvi' "
                             f"or 'qnehvi'); sampler {sampler.name!r} has no model "
                             "to bound the hypervolume still to gain")
        self.active = self.rule if self.rule is not None else study.stopping_rule
        study.stopping_rule = self.active

    def before_proposal(self, study: Any) -> str | None:
        t = study.termination(self.active)
        if not t.converged:
            return None
        reason: str = t.describe()
        log.info("stopping rule: %s; no more trials start", reason)
        return reason


_DISPLAYS: dict[str, Callable[[], Any]] = {}


def register_display(name: str, factory: Callable[[], Any]) -> None:
    """Make ``factory`` the display that ``optimize(<name>=True)`` builds.

    The upper layers (the reports) provide displays; the core asks for them by
    name and never imports them. ``factory()`` returns a callback, or ``None``
    where the display cannot run (it then says why, e.g. with a warning).
    """
    if not isinstance(name, str) or not name or not callable(factory):
        raise ValueError(f"register_display needs a non-empty name and a callable factory, "
                         f"got name={name!r}, factory={factory!r}")
    _DISPLAYS[name] = factory


def display_callback(name: str) -> Any:
    """The callback of the display ``name`` (``None`` where it cannot run here).

    Raises:
        ValueError: when no display of that name was registered.
    """
    factory = _DISPLAYS.get(name)
    if factory is None:
        raise ValueError(f"no display named {name!r} is registered (known: "
                         f"{sorted(_DISPLAYS)}); import ecopt, which registers the reports' "
                         "displays")
    return factory()

