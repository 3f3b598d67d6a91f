"""The shared pickling check that the Dask and Spark executors run before a study."""

from __future__ import annotations

import pickle
import threading

import pytest

from ecopt.executors.base import check_picklable
from ecopt.trial import Trial


def _module_level(trial: Trial) -> float:
    return 1.0


class _HoldsLock:
    def __init__(self) -> None:
        self.lock = threading.Lock()

    def __call__(self, trial: Trial) -> float:
        return 1.0


def test_picklable_objective_passes() -> None:
    check_picklable(_module_level, pickle.dumps, "Dask workers")


def test_unpicklable_objective_names_it_the_error_and_the_destination() -> None:
    with pytest.raises(ValueError) as e:
        check_picklable(_HoldsLock(), pickle.dumps, "Spark executors")
    text = str(e.value)
    assert "_HoldsLock" in text and "cannot be pickled" in text
    assert "TypeError" in text and "lock" in text
    assert "cannot be sent to Spark executors" in text
    assert "in a module the executors can import" in text
    assert e.value.__cause__ is None and e.value.__suppress_context__
