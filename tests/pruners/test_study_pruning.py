"""Both pruners end to end in a study: epochs saved, the front kept, decisions recorded."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

import ecopt
from ecopt.errors import TrialPruned

OBJS = [ecopt.Objective("acc", "max"), ecopt.Objective("energy_j", "min")]
SPACE = {"x": ecopt.Float(0, 1), "y": ecopt.Float(0, 1)}
EPOCHS = 15


def curve_objective(trial: ecopt.Trial) -> dict[str, float]:
    """Accuracy rises to a configuration's final value; energy grows linearly per epoch.

    Dominated configurations (bad y, or too much energy for their accuracy) show early.
    """
    x, y = trial["x"], trial["y"]
    final = 0.5 + 0.45 * math.sqrt(x) * math.exp(-((y - 0.3) ** 2) / 0.1)
    per_epoch = 10.0 + 90.0 * x
    rng = np.random.default_rng(trial.number)
    acc = 0.0
    for epoch in range(1, EPOCHS + 1):
        acc = final - (final - 0.1) * (1.0 + epoch / 2.0) ** -1.5 + 0.003 * rng.standard_normal()
        trial.report(epoch, {"acc": acc, "energy_j": per_epoch * epoch})
        if trial.should_stop():
            raise TrialPruned()
    return {"acc": acc, "energy_j": per_epoch * EPOCHS}


def _run(pruner, tmp_path=None):
    st = ecopt.Study(SPACE, OBJS, storage=tmp_path, sampler="random", meter="wallclock",
                     seed=5, pruner=pruner)
    recs = st.optimize(curve_objective, n_trials=40, show_progress=False)
    epochs = sum(len(r.intermediate) for r in recs)
    return st, recs, epochs


@pytest.mark.parametrize("name", ["hyperband", "dominance"])
def test_pruning_saves_epochs_and_records_why(name, tmp_path):
    base, _, full = _run(None)
    st, recs, epochs = _run(name, tmp_path / "s")
    pruned = [r for r in recs if r.state.value == "pruned"]
    assert pruned and epochs < full
    if name == "dominance":  # it stops only trials it is sure about: the front stays
        ref = [0.0, 10.0 * 100 * EPOCHS]
        assert st.hypervolume(ref) >= 0.9 * base.hypervolume(ref)
    for r in pruned:
        assert r.error.type == "TrialPruned" and r.error.message
        info = r.user_attrs["pruning"]
        assert info["step"] == r.intermediate[-1].step
        if name == "dominance":
            assert info["p_dominated"] >= 0.9 and set(info["objectives"]) == {"acc", "energy_j"}
        else:
            assert info["position"] >= info["promoted"]
    st.close()
    # The log keeps the decisions; the study reports them as pruned, never on the front.
    lines = [json.loads(x) for x in (tmp_path / "s" / "trials.jsonl").read_text().splitlines()]
    assert sum(x["state"] == "pruned" for x in lines) == len(pruned)
    back = ecopt.load_study(tmp_path / "s")
    assert all(r.state.value == "complete" for r in back.best_trials())


def test_dominance_never_prunes_what_ends_on_the_front():
    """Run every trial to the end while asking the pruner: none it would stop is on the front."""
    p = ecopt.pruners.DominancePruner()
    st = ecopt.Study(SPACE, OBJS, sampler="random", meter="wallclock", seed=11, pruner=p)
    would_stop: set[int] = set()

    def watch(trial):
        for epoch in range(1, EPOCHS + 1):
            x, y = trial["x"], trial["y"]
            final = 0.5 + 0.45 * math.sqrt(x) * math.exp(-((y - 0.3) ** 2) / 0.1)
            acc = final - (final - 0.1) * (1.0 + epoch / 2.0) ** -1.5
            trial.report(epoch, {"acc": acc, "energy_j": (10.0 + 90.0 * x) * epoch})
            if trial.should_stop():
                would_stop.add(trial.number)
        return {"acc": acc, "energy_j": (10.0 + 90.0 * trial["x"]) * EPOCHS}

    st.optimize(watch, n_trials=40, show_progress=False)
    assert would_stop  # it does judge trials...
    assert not would_stop & {r.number for r in st.best_trials()}  # ...never a front one


def test_the_sampler_learns_from_pruned_trials_at_their_judged_values(tmp_path):
    """Samplers model complete trials: a pruned one is shown complete at its judged values,
    so it is not proposed again as if never tried; the log keeps it pruned."""
    seen: list[tuple[list, list]] = []

    class Spy(ecopt.samplers.RandomSampler):
        def propose(self, space, records, pending, n):
            seen.append((list(records), [dict(p) for p in pending]))
            return super().propose(space, records, pending, n)

    import executor_objectives as T

    st = ecopt.Study(SPACE, [ecopt.Objective("f1", "min"), ecopt.Objective("f2", "min")],
                     storage=tmp_path / "s", sampler=Spy(seed=0), meter="wallclock",
                     pruner=T.OddTrialsPruner(at_step=1))
    recs = st.optimize(T.Curve(steps=2, epoch_s=0.0), n_trials=4, show_progress=False)
    assert [r.state.value for r in recs] == ["complete", "pruned", "complete", "pruned"]
    records, pending = seen[-1]
    shown = next(r for r in records if r.number == 1)
    assert shown.state.value == "complete" and pending == []
    assert shown.values == recs[1].intermediate[-1].values  # no prediction: its last report
    assert st.records[1].state.value == "pruned"
    # With constraints the judged values cannot be complete: pruned trials go as pending.
    st2 = ecopt.Study(SPACE, [ecopt.Objective("f1", "min"), ecopt.Objective("f2", "min")],
                      constraints=[ecopt.Constraint("lat", "<=", 2.0)],
                      sampler=Spy(seed=0), meter="wallclock",
                      pruner=T.OddTrialsPruner(at_step=1))

    def with_lat(trial):
        out = T.Curve(steps=2, epoch_s=0.0)(trial)
        return {**out, "lat": 1.0}

    recs2 = st2.optimize(with_lat, n_trials=3, show_progress=False)
    records, pending = seen[-1]
    assert recs2[1].state.value == "pruned" and pending == [recs2[1].params]
    assert all(r.number != 1 for r in records)
