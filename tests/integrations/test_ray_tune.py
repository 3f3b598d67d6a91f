"""EcoptSearch (a Ray Tune Searcher proposing with qLogNEHVI) and metered phases in Tune
trainables, on a real local Ray (2 CPUs, one Ray session for this module)."""

from __future__ import annotations

import importlib.util
import math
import os
import time
from collections.abc import Iterator

import pytest

import ecopt

if importlib.util.find_spec("ray") is None:
    pytest.skip("ray is not installed (pip install 'ecopt[ray]')", allow_module_level=True)

from ecopt.integrations.ray import EcoptSearch, metered, tune_space  # noqa: E402
from ray import tune  # noqa: E402


def zdt1(x: float, y: float) -> tuple[float, float]:
    g = 1.0 + 9.0 * y
    return x, g * (1.0 - math.sqrt(x / g))


def test_tune_param_space_becomes_an_ecopt_space() -> None:
    space, constants = tune_space({"lr": tune.loguniform(1e-4, 1e-1), "x": tune.uniform(0, 1),
                                   "width": tune.randint(8, 513), "act": tune.choice(["a", "b"]),
                                   "epochs": 3})
    assert space["lr"] == ecopt.Float(1e-4, 1e-1, log=True)
    assert space["x"] == ecopt.Float(0.0, 1.0)
    assert space["width"] == ecopt.Int(8, 512)  # Tune's upper bound is exclusive
    assert space["act"] == ecopt.Categorical(["a", "b"]) and constants == {"epochs": 3}
    with pytest.raises(ValueError, match=r"param_space\['q'\].*no ecopt equivalent"):
        tune_space({"q": tune.quniform(0, 1, 0.1)})


def test_objectives_are_checked() -> None:
    with pytest.raises(ValueError, match="needs at least 2 metrics, got metric=\\['acc'\\]"):
        EcoptSearch(metric="acc", mode="max")
    with pytest.raises(ValueError, match="every mode must be 'min' or 'max'"):
        EcoptSearch(metric=["a", "b"], mode=["max", "obs"])
    with pytest.raises(ValueError, match="one mode per metric"):
        EcoptSearch(metric=["a", "b"], mode=["max"])


def _drive(search: EcoptSearch, n: int, fail: tuple[int, ...] = ()) -> list[dict]:
    """Tune's calls, by hand: suggest two at a time, complete them in order."""
    configs: list[dict] = []
    i = 0
    while i < n:
        ids = [f"t{i + k}" for k in range(min(2, n - i))]
        batch = [search.suggest(t) for t in ids]
        configs += batch
        for t, cfg in zip(ids, batch):
            f1, f2 = zdt1(cfg["x"], cfg["y"])
            if int(t[1:]) in fail:
                search.on_trial_complete(t, None, error=True)
            else:
                search.on_trial_complete(t, {"f1": f1, "f2": f2, "time_total_s": 0.1})
        i += len(ids)
    return configs


@pytest.mark.slow
def test_proposals_follow_tunes_results_deterministically_and_skip_errored_trials() -> None:
    space = ecopt.SearchSpace({"x": ecopt.Float(0, 1), "y": ecopt.Float(0, 1)})

    def make() -> EcoptSearch:
        return EcoptSearch(space, metric=["f1", "f2"], mode=["min", "min"], seed=3, n_init=4,
                           num_restarts=2, raw_samples=64)

    a, b = make(), make()
    ca, cb = _drive(a, 8, fail=(1,)), _drive(b, 8, fail=(1,))
    assert ca == cb  # a pure function of the seed and the history
    # Two proposals in flight at once are apart (the first is pending for the second).
    assert all(ca[i] != ca[i + 1] for i in range(0, 8, 2))
    recs = a.records
    assert [r.state.value for r in recs] == ["complete", "failed"] + ["complete"] * 6
    assert recs[1].values == {} and recs[1].error.type == "TuneTrialError"
    assert recs[0].values == pytest.approx(dict(zip(("f1", "f2"), zdt1(ca[0]["x"], ca[0]["y"]))))
    assert {r.proposed_by for r in recs[:4]} == {"sobol"}
    assert {r.proposed_by for r in recs[4:]} == {"qlognehvi"}  # the model, from Tune's results
    # A checkpoint restores the same search.
    c = make()
    c.set_state(a.get_state())
    assert c.suggest("next") == a.suggest("next")


@pytest.fixture(scope="module")
def ray_session(tmp_path_factory) -> Iterator[None]:
    from ecopt.executors.ray import import_ray, init_ray, shutdown_ray

    here = os.getcwd()
    os.chdir(tmp_path_factory.mktemp("ray-cwd"))
    try:
        started = init_ray(num_cpus=2)
    finally:
        os.chdir(here)
    yield
    if started and import_ray().is_initialized():
        shutdown_ray()


def trainable(config: dict) -> None:
    """ZDT1 with a metered inference phase; y > 0.9 raises (an errored Tune trial)."""
    if config["y"] > 0.9:
        raise RuntimeError("diverged")
    with metered("inference", samples=1000, meter="estimate") as phase:
        f1, f2 = zdt1(config["x"], config["y"])
        end = time.perf_counter() + 0.05  # the meters' clock
        while time.perf_counter() < end:
            pass
    tune.report({"f1": f1, "f2": f2, "epochs": config["epochs"], **phase.metrics})


@pytest.mark.slow
def test_a_tuner_changes_one_line_and_gets_ecopt_proposals_and_meters(ray_session,
                                                                      tmp_path) -> None:
    import sys

    from ray import cloudpickle

    # Tune's workers cannot import this test module: send the trainable by value.
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    search = EcoptSearch(metric=["f1", "f2"], mode=["min", "min"], seed=0, n_init=3,
                         num_restarts=2, raw_samples=64)
    tuner = tune.Tuner(
        trainable,
        param_space={"x": tune.uniform(0, 1), "y": tune.uniform(0, 1), "epochs": 2},
        tune_config=tune.TuneConfig(search_alg=search, num_samples=6, max_concurrent_trials=2),
        run_config=tune.RunConfig(storage_path=str(tmp_path), name="zdt1", verbose=0))
    grid = tuner.fit()
    assert len(grid) == 6
    recs = search.records
    assert len(recs) == 6 and len({r.user_attrs["tune_trial_id"] for r in recs}) == 6
    assert {res.metrics["trial_id"] for res in grid if "f1" in res.metrics} == \
        {r.user_attrs["tune_trial_id"] for r in recs if r.state is ecopt.TrialState.COMPLETE}
    errored = [r for r in recs if r.params["y"] > 0.9]
    assert all(r.state is ecopt.TrialState.FAILED for r in errored)
    done = [r for r in recs if r.state is ecopt.TrialState.COMPLETE]
    assert len(done) == 6 - len(errored) and all(r.params["y"] <= 0.9 for r in done)
    for r in done:  # Tune's own results, with the phase metered in the trainable
        assert r.values == pytest.approx(dict(zip(("f1", "f2"), zdt1(r.params["x"],
                                                                     r.params["y"]))))
        inf = r.phases["inference"]
        assert inf.samples == 1000 and inf.duration_s >= 0.05 and inf.energy_j > 0
        assert not inf.measured  # the estimate meter: labelled as such
    assert "qlognehvi" in {r.proposed_by for r in recs[3:]}
    best = grid.get_best_result(metric="f1", mode="min")
    assert best.metrics["epochs"] == 2 and best.metrics["inference_energy_measured"] is False
    assert best.metrics["inference_samples_per_joule"] > 0
