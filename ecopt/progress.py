"""A progress bar for ``Study.optimize``: trials, current hypervolume, energy spent."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from ecopt.trial import TrialRecord, TrialState

if TYPE_CHECKING:
    from ecopt.study import Study

__all__ = ["Progress"]


class Progress:
    """Wraps tqdm; silent when disabled (scripts, CI) or when tqdm is missing.

    Args:
        study: The study being optimised.
        total: Trials expected in this call.
        enabled: ``True``/``False``, or ``None`` for "when stderr is a terminal".
    """

    def __init__(self, study: Study, total: int, enabled: bool | None = None) -> None:
        if enabled is None:
            enabled = bool(getattr(sys.stderr, "isatty", lambda: False)())
        self.study = study
        self.energy_j = 0.0
        self.measured = True
        self.failed = 0
        self._bar: Any = None
        if enabled:
            from tqdm.auto import tqdm

            self._bar = tqdm(total=total, desc=f"ecopt {study.name}", unit="trial",
                             dynamic_ncols=True)

    def update(self, record: TrialRecord) -> None:
        """Account for one finished trial."""
        self.energy_j += record.energy_j
        if record.phases and not record.measured:
            self.measured = False
        if record.state is not TrialState.COMPLETE:
            self.failed += 1
        if self._bar is None:
            return
        label = "J" if self.measured else "J (estimated)"
        self._bar.set_postfix_str(
            f"hv={self.study.hypervolume():.4g} energy={self.energy_j:.4g} {label} "
            f"failed={self.failed}", refresh=False)
        self._bar.update(1)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None
