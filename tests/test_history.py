"""The study's derived state, kept up to date per trial, equals the same state rebuilt from
the whole log (the rule it replaced)."""

from __future__ import annotations

import numpy as np
import pytest

import ecopt
from ecopt import pareto
from ecopt._history import FrontCache, SamplerHistory
from ecopt.pruners._curves import ObjectiveView, imputed_final
from ecopt.trial import Intermediate, TrialRecord, TrialState, with_state


def _records(n: int, m: int, seed: int) -> list[TrialRecord]:
    rng = np.random.default_rng(seed)
    out = []
    for k in range(n):
        u = rng.random()
        state = TrialState.FAILED if u < 0.1 else TrialState.PRUNED if u < 0.4 else \
            TrialState.COMPLETE
        vals = {f"f{j}": float(np.round(rng.random(), 1)) for j in range(m)}  # ties happen
        steps = int(rng.integers(1, 9)) if state is not TrialState.FAILED else 0
        curve = tuple(Intermediate(s, {"f0": vals["f0"] * s / 8}, 2.0 * s, 1.0 * s)
                      for s in range(1, steps + 1))
        out.append(TrialRecord(number=k, state=state, params={"x": float(rng.random())},
                               values=vals if state is TrialState.COMPLETE else
                               {"f0": curve[-1].values["f0"]} if curve else {},
                               feasible=bool(rng.random() > 0.15), intermediate=curve))
    return out


@pytest.mark.parametrize("m", [1, 2, 3])
def test_the_front_kept_per_trial_is_the_front_of_the_whole_log(m):
    objs = [ecopt.Objective(f"f{j}", "max" if j % 2 else "min") for j in range(m)]
    records = _records(120, m, seed=m)
    cache, log = FrontCache(objs), []
    for r in records:
        log.append(r)
        assert cache.update(log) == pareto.front_records(log, objs)
    assert cache.update(list(log)) == pareto.front_records(log, objs)  # another list: rebuilt


def _rebuilt(records, objectives, constraints):
    """The rule before it was kept up to date (Study._records_for_sampler, ecopt 47a50ec)."""
    if not any(r.state is TrialState.PRUNED for r in records):
        return list(records), []
    view = ObjectiveView.of(objectives, "auto")
    steps = [r.intermediate[-1].step for r in records
             if r.state is TrialState.COMPLETE and r.intermediate]
    final = max(steps) if steps else None
    out, pending = [], []
    for r in records:
        if r.state is TrialState.PRUNED:
            vals = None if constraints else imputed_final(r, view, final)
            if vals is None:
                pending.append(r.params)
                continue
            r = with_state(r, state=TrialState.COMPLETE, values=vals, feasible=True)
        out.append(r)
    return out, pending


@pytest.mark.parametrize("constraints", [[], [ecopt.Constraint("loss", "<=", 1.0)]])
def test_what_the_sampler_sees_kept_per_trial_equals_the_rebuild(constraints):
    objs = [ecopt.Objective("f0", "max"), ecopt.Objective("energy_j", "min")]
    records = [r if r.state is not TrialState.COMPLETE else
               with_state(r, values={"f0": r.values["f0"], "energy_j": r.values["f1"]})
               for r in _records(150, 2, seed=7)]
    history, log = SamplerHistory(objs, constraints), []
    for r in records:
        log.append(r)
        seen, pending = history.update(log)
        want_seen, want_pending = _rebuilt(log, objs, constraints)
        assert list(seen) == want_seen and pending == want_pending
