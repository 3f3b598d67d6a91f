"""A progress bar for ``Study.optimize``: trials, current hypervolume, energy spent.

The bar (tqdm) shows, after each finished trial::

    ecopt quickstart: 60%|██████    | 6/10 [00:04<00:02, hv=0.0123 front=3 energy=41.2 J (estimated) failed=1]

* ``hv``: the study's hypervolume now (reference point inferred where no
  threshold was given, so early values can move);
* ``front``: how many trials are on the Pareto front;
* ``energy``: joules spent by every trial of the study so far (earlier
  sessions included), labelled "(estimated)" as soon as any joule was
  estimated, "n/a" when the meter records no energy;
* ``failed``: failed or infeasible trials in this call.

Quiet mode, for scripts and CI: ``study.optimize(..., show_progress=False)``,
or the environment variable ``ECOPT_QUIET=1`` (which wins over the default
"show when stderr is a terminal"). Each finished trial is also logged at INFO
level on the ``ecopt`` logger, so scripts can keep a trace without a bar.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import IO, TYPE_CHECKING, Any

from ecopt.report.fmt import fmt_number
from ecopt.trial import TrialRecord, TrialState

if TYPE_CHECKING:
    from ecopt.study import Study

__all__ = ["Progress", "quiet_from_env"]

log = logging.getLogger("ecopt")


def quiet_from_env() -> bool:
    """Whether ``ECOPT_QUIET`` asks for no progress bar (``1``, ``true``, ``yes``)."""
    return os.environ.get("ECOPT_QUIET", "").strip().lower() in ("1", "true", "yes", "on")


class Progress:
    """Wraps tqdm; silent when disabled (scripts, CI) or when tqdm is missing.

    Args:
        study: The study being optimised.
        total: Trials expected in this call.
        enabled: ``True``/``False``, or ``None`` for "when stderr is a terminal
            and ``ECOPT_QUIET`` is not set".
        file: Where the bar is written (default stderr).

    Attributes:
        energy_j: Joules of every finished trial of the study so far.
        measured: ``False`` once any joule was estimated.
        has_energy: Whether any trial recorded energy at all.
        failed: Failed or infeasible trials in this call.
        done: Trials finished in this call.
    """

    def __init__(self, study: Study, total: int | None, enabled: bool | None = None,
                 file: IO[str] | None = None) -> None:
        if enabled is None:
            enabled = bool(getattr(sys.stderr, "isatty", lambda: False)()) and not quiet_from_env()
        self.study = study
        self.total = total
        self.energy_j = 0.0
        self.measured = True
        self.has_energy = False
        self.failed = 0
        self.pruned = 0
        self.done = 0
        for r in study.records:  # a resumed study: count what earlier sessions spent
            self._account(r)
        self._bar: Any = None
        if enabled:
            try:
                from tqdm.auto import tqdm
            except ImportError:  # pragma: no cover - tqdm is a dependency
                return
            self._bar = tqdm(total=total, desc=f"ecopt {study.name}", unit="trial",
                             dynamic_ncols=True, file=file if file is not None else sys.stderr)

    def _account(self, record: TrialRecord) -> None:
        from ecopt._search import proposal_energy_j

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
        hv = self.study.hypervolume()
        front = len(self.study.best_trials())
        pruned = f" pruned={self.pruned}" if self.pruned else ""
        return (f"hv={fmt_number(hv)} front={front} energy={self.energy_label} "
                f"failed={self.failed}{pruned}")

    def update(self, record: TrialRecord) -> None:
        """Account for one finished trial."""
        self._account(record)
        self.done += 1
        if record.state is TrialState.PRUNED:
            self.pruned += 1
        elif record.state is not TrialState.COMPLETE:
            self.failed += 1
        if self._bar is None and not log.isEnabledFor(logging.INFO):
            return
        text = self.postfix()
        log.info("trial %d %s (%d/%s): %s", record.number, record.state.value, self.done,
                 self.total if self.total is not None else "?", text)
        if self._bar is not None:
            self._bar.set_postfix_str(text, refresh=False)
            self._bar.update(1)

    def close(self) -> None:
        """Close the bar (safe to call twice)."""
        if self._bar is not None:
            self._bar.close()
            self._bar = None
