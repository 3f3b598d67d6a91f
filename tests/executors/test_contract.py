"""What every registered executor promises (docs/architecture.md, "An executor").

The suite runs over every name :mod:`ecopt.registry` knows (built in, registered, installed
by entry point), so a new executor gets these tests by being registered: a study runs its
trials there and each way a trial ends (returned, raised, out of memory, pruned) comes back
as the record it would be in process, with what the trial measured, and the log on disk
says the same. Dask and Spark start an embedded cluster: their cases are marked slow.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

import ecopt
import executor_objectives as T
from ecopt import registry
from ecopt.executors import Executor, get_executor
from ecopt.record import TrialState

#: Every executor name known here.
EXECUTORS = registry.names("executors")
#: Executors that start a cluster (seconds to tens of seconds): slow.
CLUSTERS = {"dask", "spark"}


@pytest.fixture(scope="module", params=[
    pytest.param(n, marks=pytest.mark.slow) if n in CLUSTERS else n for n in EXECUTORS])
def executor(request) -> Iterator[Executor]:
    """One executor of each kind for the module, with two slots where it has a choice."""
    name = request.param
    if name == "dask":
        pytest.importorskip("distributed")
    if name == "spark":
        pytest.importorskip("pyspark")
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    sizes = {"processes": {"n_workers": 2}, "dask": {"n_workers": 2},
             "spark": {"n_executors": 2}}
    ex = get_executor(name, **sizes.get(name, {}))
    yield ex
    ex.close()
    ex.close()  # closing twice is safe


def _study(path) -> ecopt.Study:
    return ecopt.Study(ecopt.SearchSpace({"x": ecopt.Float(0, 1), "y": ecopt.Float(0, 1)}),
                       [ecopt.Objective("f1", "min"), ecopt.Objective("f2", "min")],
                       storage=path, sampler="random", meter="estimate", seed=5)


def test_the_suite_covers_every_registered_executor():
    assert set(registry.BUILTIN["executors"]) <= set(EXECUTORS)


def test_every_ending_comes_back_as_its_record(executor, tmp_path):
    assert isinstance(executor, Executor) and executor.slots >= 1
    st = _study(tmp_path / "s")
    done = sorted(st.optimize(T.every_ending, n_trials=4, executor=executor,
                              show_progress=False), key=lambda r: r.number)
    assert [r.state for r in done] == [TrialState.COMPLETE, TrialState.FAILED,
                                       TrialState.INFEASIBLE, TrialState.PRUNED]
    ok, failed, oom, pruned = done
    assert ok.values == T.zdt1(ok.params["x"], ok.params["y"])
    assert ok.metrics == {"half_x": ok.params["x"] / 2} and ok.user_attrs == {"where": "worker"}
    work = ok.phases["work"]
    assert work.samples == 10 and work.count == 1 and work.duration_s > 0
    assert work.measurement.meter == "estimate" and work.energy_j > 0 and not work.measured
    assert [p.step for p in ok.intermediate] == [1] and ok.error is None
    assert failed.error.type == "ValueError" and "is bad" in failed.error.message
    assert "ValueError" in failed.error.traceback
    assert oom.error.type == "MemoryError"
    assert pruned.error.type == "TrialPruned" and len(pruned.intermediate) == 1
    assert pruned.values == T.zdt1(pruned.params["x"], pruned.params["y"])
    for r in done:
        assert r.started_at and r.duration_s >= 0 and r.worker and r.host
        assert r.proposed_by == "random"
    st.close()
    # The driver wrote each outcome to the log: reading it back gives the same records.
    assert sorted(ecopt.load_study(tmp_path / "s").records, key=lambda r: r.number) == done


def test_it_serves_a_second_optimize_call(executor, tmp_path):
    st = _study(tmp_path / "s")
    first = st.optimize(T.quick, n_trials=2, executor=executor, show_progress=False)
    second = st.optimize(T.quick, n_trials=2, executor=executor, show_progress=False)
    assert sorted(r.number for r in first + second) == [0, 1, 2, 3]
    assert all(r.state is TrialState.COMPLETE for r in first + second)
    st.close()
