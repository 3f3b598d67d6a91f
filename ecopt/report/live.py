"""``Study.optimize(..., live=True)``: the front redrawn in place in a notebook.

:class:`LiveFront` is an ``optimize`` callback: after each saved trial it
draws the Pareto front (:func:`ecopt.plot.pareto`, so the same figure as the
report, with "estimated" on energy axes when the energy was estimated) and
replaces the previous drawing through one IPython display handle, so the
cell shows a single figure that changes as trials finish. Outside a Jupyter
kernel there is nothing to redraw: :func:`live_callback` warns once and
returns ``None`` (the study runs as usual).

Example:
    >>> study.optimize(objective, n_trials=30, live=True)   # in a notebook cell
"""

from __future__ import annotations

import io
import warnings
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ecopt.study import Study
    from ecopt.trial import TrialRecord

__all__ = ["LiveFront", "in_notebook", "live_callback"]


def in_notebook() -> bool:
    """Whether this code runs in a Jupyter kernel (where displays can be updated in place)."""
    import sys

    if "IPython" not in sys.modules:
        return False
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover
        return False
    shell = get_ipython()
    return shell is not None and "IPKernelApp" in getattr(shell, "config", {})


class LiveFront:
    """Redraw the front in one notebook output as each trial finishes (an optimize callback).

    Args:
        every: Redraw after every ``every``-th trial (a large study draws less often).
    """

    def __init__(self, every: int = 1) -> None:
        if isinstance(every, bool) or not isinstance(every, int) or every < 1:
            raise ValueError(f"every >= 1 must hold, got every={every!r}")
        self.every = every
        self._handle: Any = None
        self._seen = 0

    def __call__(self, study: Study, record: TrialRecord) -> None:
        self._seen += 1
        if self._seen % self.every:
            return
        from IPython.display import Image, display

        from ecopt.report import figures
        from ecopt.report.data import build_report

        data = build_report(study)
        fig = figures.pareto(data)
        buf = io.BytesIO()
        try:
            fig.savefig(buf, format="png", dpi=figures.DPI)
        finally:
            import matplotlib.pyplot as plt

            plt.close(fig)
        image = Image(data=buf.getvalue(), format="png")
        if self._handle is None:
            self._handle = display(image, display_id=True)
        else:
            self._handle.update(image)


def live_callback() -> LiveFront | None:
    """A :class:`LiveFront` in a notebook; elsewhere ``None`` with a warning saying why."""
    if not in_notebook():
        warnings.warn("optimize(live=True) redraws the front in a Jupyter notebook; this is not "
                      "one (no IPython kernel), so live=True does nothing here: use "
                      "`ecopt dashboard DIR` for a live page of a study with storage",
                      RuntimeWarning, stacklevel=5)
        return None
    return LiveFront()
