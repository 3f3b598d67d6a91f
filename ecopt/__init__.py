"""ecopt: energy-aware multi-objective hyperparameter optimisation.

Search a hyperparameter space for the Pareto front between a quality metric
(accuracy, F1, RMSE...) and energy efficiency (samples or tokens per joule),
with every joule labelled by the meter that produced it.

Example:
    >>> import ecopt
    >>> space = ecopt.SearchSpace({"lr": ecopt.Float(1e-4, 1e-1, log=True),
    ...                            "width": ecopt.Int(8, 256, log=True)})
    >>> study = ecopt.Study(space, [ecopt.Objective("accuracy", "max"),
    ...                             ecopt.Objective("samples_per_joule", "max")],
    ...                     storage="runs/demo")
"""

from __future__ import annotations

from typing import Any

from ecopt import callbacks as _callbacks
from ecopt._convergence import StoppingRule, Termination
from ecopt._version import __version__
from ecopt.callbacks import OptimizeCallback, StopWhenConverged
from ecopt.errors import (
    EcoptError,
    ExecutorLostError,
    Infeasible,
    MeterError,
    MeterUnavailableError,
    NotAStudyError,
    SpecMismatchError,
    StudyLockedError,
    SystematicFailureError,
    TransferSourceError,
    TrialPruned,
)
from ecopt.meters.base import Measurement, Meter
from ecopt.objective import Constraint, Objective
from ecopt.samplers.base import Sampler
from ecopt.space import Categorical, Fixed, Float, Int, SearchSpace
from ecopt.study import Study, load_study
from ecopt.trial import Intermediate, Trial, TrialRecord, TrialState

__all__ = [
    "__version__",
    "SearchSpace",
    "Float",
    "Int",
    "Categorical",
    "Fixed",
    "Objective",
    "Constraint",
    "Study",
    "load_study",
    "Trial",
    "TrialRecord",
    "TrialState",
    "Sampler",
    "Meter",
    "Measurement",
    "EcoptError",
    "ExecutorLostError",
    "Infeasible",
    "MeterError",
    "MeterUnavailableError",
    "NotAStudyError",
    "SpecMismatchError",
    "StudyLockedError",
    "SystematicFailureError",
    "TransferSourceError",
    "TrialPruned",
    "Intermediate",
    "StoppingRule",
    "Termination",
    "StopWhenConverged",
    "OptimizeCallback",
    "pruners",
    "DaskExecutor",
    "pareto",
    "samplers",
    "meters",
    "plot",
    "registry",
    "callbacks",
]

_LAZY_MODULES = {"pareto", "samplers", "meters", "plot", "executors", "data", "workloads", "report",
                 "energy", "pruners", "integrations", "registry"}


def _live_front() -> Any:
    # The package wires its layers: the core asks for the display "live" by name
    # (optimize(live=True)) and never imports the reports; matplotlib loads on first use.
    from ecopt.report.live import live_callback

    return live_callback()


_callbacks.register_display("live", _live_front)


def __getattr__(name: str) -> Any:
    # Submodules on first use, so `import ecopt` stays light (no torch, no matplotlib).
    if name == "DaskExecutor":
        from ecopt.executors.dask import DaskExecutor

        return DaskExecutor
    if name in _LAZY_MODULES:
        import importlib

        return importlib.import_module(f"ecopt.{name}")
    raise AttributeError(f"module 'ecopt' has no attribute {name!r}")
