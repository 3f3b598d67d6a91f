"""EcoptSampler keeps the contract of Optuna's samplers.

These are the behaviours Optuna's own generic sampler tests (``tests/samplers_tests``
and ``optuna.testing.pytest_samplers`` at 5.1, the multi-objective cases) check of
its samplers, written for EcoptSampler on real Optuna studies, so that an Optuna
release that changes the contract fails here first: pickling and copying,
``reseed_rng``, reproducibility in another process, enqueued and fixed params,
NaN and infinite values, failed and pruned trials, ``constraints_func`` returning
NaN, ``n_jobs``, ranges that change, conditional parameters.
"""

from __future__ import annotations

import copy
import json
import math
import os
import pickle
import subprocess
import sys
import textwrap
import warnings
from typing import Any

import pytest

optuna = pytest.importorskip("optuna")

from optuna.distributions import (  # noqa: E402
    CategoricalDistribution,
    FloatDistribution,
    IntDistribution,
)
from optuna.trial import TrialState  # noqa: E402

from ecopt.integrations.optuna import EcoptSampler  # noqa: E402
from ecopt.integrations.optuna._convert import sampler_space  # noqa: E402
from ecopt.trial import TrialState as EState  # noqa: E402

optuna.logging.set_verbosity(optuna.logging.ERROR)
pytestmark = pytest.mark.filterwarnings("ignore::optuna.exceptions.ExperimentalWarning",
                                        "ignore::ecopt.samplers.FallbackWarning",
                                        "ignore::FutureWarning")

#: Small settings: the contract, not the search quality, is under test here.
FAST = {"n_init": 3, "num_restarts": 2, "raw_samples": 32, "maxiter": 30}
NAMES = ["objective_0", "objective_1"]


def mixed(trial: optuna.Trial) -> tuple[float, float]:
    x = trial.suggest_float("x", 0.0, 1.0)
    n = trial.suggest_int("n", 1, 5)
    c = trial.suggest_categorical("c", ["a", "b"])
    return (x - 0.3) ** 2 + 0.1 * n + (0.2 if c == "b" else 0.0), (1 - x) ** 2 + 0.05 * (5 - n)


def new_study(sampler: EcoptSampler, storage: Any = None) -> optuna.Study:
    return optuna.create_study(directions=["minimize", "minimize"], sampler=sampler,
                               storage=storage)


def two(trial: optuna.Trial) -> tuple[float, float]:
    x, y = trial.suggest_float("x", 0.0, 1.0), trial.suggest_float("y", 0.0, 1.0)
    return (x - 0.3) ** 2 + y, (1 - x) ** 2 + (1 - y) ** 2


def history_of(study: optuna.Study, sampler: EcoptSampler | None = None
               ) -> tuple[list[Any], list[Any]]:
    """The sampler's view of the study: (records, pending), as of the next trial."""
    trials = study.get_trials(deepcopy=False)
    space, codecs = sampler_space(trials[0].distributions)
    me = optuna.trial.create_trial(state=TrialState.RUNNING)
    me.number = len(trials)
    records, pending, _ = (sampler or study.sampler)._history(trials, me, space, codecs, NAMES)
    return records, pending


# -- pickle, joblib, deepcopy ----------------------------------------------------------------
@pytest.mark.slow
def test_sampler_and_study_pickle_joblib_and_deepcopy_and_propose_the_same(tmp_path):
    joblib = pytest.importorskip("joblib")  # scikit-learn's dependency: always installed
    study = new_study(EcoptSampler(seed=1, **FAST))
    study.optimize(two, n_trials=3)  # the Sobol design: the next proposal is the model's
    joblib.dump(study, tmp_path / "study.pkl")  # Optuna's FAQ way of saving a study
    copies = {"pickle": pickle.loads(pickle.dumps(study)), "deepcopy": copy.deepcopy(study),
              "joblib": joblib.load(tmp_path / "study.pkl")}
    alone = pickle.loads(pickle.dumps(study.sampler))  # a sampler copied alone, in a copy
    copies["sampler only"] = copy.deepcopy(study)      # of the study with its history
    copies["sampler only"].sampler = alone
    dists = study.trials[0].distributions
    want = study.ask(dists)  # the original's next (model) proposal
    assert study.trials[-1].system_attrs["ecopt:proposed_by"] == "qlognehvi"
    for how, other in copies.items():
        assert other.sampler is not study.sampler
        assert other.sampler._lock is not study.sampler._lock  # rebuilt, not shared
        got = other.ask(dists)
        assert got.params == want.params, how
        assert other.trials[-1].system_attrs["ecopt:proposed_by"] == "qlognehvi"
    copies["pickle"].tell(copies["pickle"].trials[-1].number, two(optuna.trial.FixedTrial(
        got.params)))
    assert copies["pickle"].trials[-1].state is TrialState.COMPLETE


def mixed_values(p: dict[str, Any]) -> tuple[float, float]:
    return mixed(optuna.trial.FixedTrial(p))


# -- reseed_rng and reproducibility ----------------------------------------------------------
def test_reseed_rng_changes_the_design_but_not_the_seed():
    def first_three(sampler: EcoptSampler) -> list[dict[str, Any]]:
        study = new_study(sampler)
        study.optimize(mixed, n_trials=3)  # the first trial and the Sobol design: no model
        return [t.params for t in study.trials]

    base = first_three(EcoptSampler(seed=1, **FAST))
    assert first_three(EcoptSampler(seed=1, **FAST)) == base  # same seed, same points
    reseeded = EcoptSampler(seed=1, **FAST)
    reseeded.reseed_rng()
    other = first_three(reseeded)
    assert reseeded.seed == 1  # what was given stays readable
    assert base[0] == other[0]  # the first trial is the centre of the space, for any seed
    assert all(a != b for a, b in zip(base[1:], other[1:]))
    again = EcoptSampler(seed=1, **FAST)
    again.reseed_rng()
    assert first_three(again) != other  # each reseed draws a fresh seed
    # The model's candidate sets come from the inner sampler's seed: reseeded too.
    assert reseeded.inner.seed != 1 and again.inner.seed != reseeded.inner.seed


def test_reseed_rng_reseeds_a_given_independent_sampler():
    ind = optuna.samplers.RandomSampler(seed=0)
    sampler = EcoptSampler(seed=0, independent_sampler=ind)
    before = ind._rng.rng.get_state()[1].tolist()
    sampler.reseed_rng()
    assert ind._rng.rng.get_state()[1].tolist() != before


_OTHER_PROCESS = textwrap.dedent("""
    import json, sys, warnings
    warnings.simplefilter("ignore")
    import optuna
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    sys.path.insert(0, sys.argv[1])
    from test_optuna_contract import FAST, mixed, new_study
    from ecopt.integrations.optuna import EcoptSampler
    study = new_study(EcoptSampler(seed=7, **FAST))
    study.optimize(mixed, n_trials=5)
    print(json.dumps([t.params for t in study.trials]))
""")


@pytest.mark.slow
def test_a_seeded_sampler_proposes_the_same_in_another_process():
    study = new_study(EcoptSampler(seed=7, **FAST))
    study.optimize(mixed, n_trials=5)  # 3 design points, then 2 model proposals
    here = [t.params for t in study.trials]
    assert [t.system_attrs["ecopt:proposed_by"] for t in study.trials][-1] == "qlognehvi"
    here_dir = os.path.dirname(os.path.abspath(__file__))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONHASHSEED"}  # hashes differ
    out = subprocess.run([sys.executable, "-c", _OTHER_PROCESS, here_dir], capture_output=True,
                         text=True, timeout=300, env=env)
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(out.stdout.strip().splitlines()[-1]) == here


# -- enqueued and fixed params ---------------------------------------------------------------
@pytest.mark.slow
def test_enqueued_and_partially_fixed_params_are_kept_and_learned_from():
    sampler = EcoptSampler(seed=2, **FAST)
    study = new_study(sampler)
    study.enqueue_trial({"x": 0.9, "n": 5, "c": "b"})
    study.enqueue_trial({"x": 0.25})  # the rest proposed by the sampler
    study.optimize(mixed, n_trials=3)
    assert study.trials[0].params == {"x": 0.9, "n": 5, "c": "b"}
    assert study.trials[1].params["x"] == 0.25
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        study.sampler = optuna.samplers.PartialFixedSampler({"n": 2}, study.sampler)
    study.optimize(mixed, n_trials=2)  # model proposals with n fixed
    assert [t.params["n"] for t in study.trials[3:]] == [2, 2]
    assert study.trials[-1].system_attrs["ecopt:proposed_by"] == "qlognehvi"
    records, _ = history_of(study, sampler)
    assert [r.params for r in records] == [
        {"x": t.params["x"], "n": t.params["n"], "c": ["a", "b"].index(t.params["c"])}
        for t in study.trials]
    assert records[0].proposed_by == "user"


# -- values that are not numbers, failed and pruned trials -----------------------------------
@pytest.mark.slow
def test_nan_and_infinite_values_are_failures_not_observations():
    bad = {1: (math.nan, 0.5), 2: (0.5, math.inf), 3: (-math.inf, 0.5)}

    def objective(trial: optuna.Trial) -> tuple[float, float]:
        values = mixed(trial)
        return bad.get(trial.number, values)

    study = new_study(EcoptSampler(seed=3, **FAST))
    study.optimize(objective, n_trials=6)
    states = [t.state for t in study.trials]
    assert states[1] is TrialState.FAIL and states[2] is states[3] is TrialState.COMPLETE
    records, _ = history_of(study)
    assert [r.state for r in records[1:4]] == [EState.FAILED] * 3
    assert all(r.values == {} or not all(map(math.isfinite, r.values.values()))
               for r in records[1:4])
    # The model took over from the finite trials and proposed something new.
    assert study.trials[-1].system_attrs["ecopt:proposed_by"] == "qlognehvi"
    assert study.trials[-1].params not in [t.params for t in study.trials[:-1]]


@pytest.mark.slow
def test_failed_and_pruned_trials_reach_the_sampler_where_they_were_proposed():
    def objective(trial: optuna.Trial) -> tuple[float, float]:
        x = trial.suggest_float("x", 0.0, 1.0)
        if trial.number == 3:
            raise RuntimeError("fails before it suggests n and c")
        if trial.number == 4:
            raise optuna.TrialPruned()  # pruned before any value
        return mixed(trial)

    study = new_study(EcoptSampler(seed=4, **{**FAST, "n_init": 6}))  # no model needed
    study.optimize(objective, n_trials=6, catch=(RuntimeError,))
    t3, t4 = study.trials[3], study.trials[4]
    assert t3.state is TrialState.FAIL and t4.state is TrialState.PRUNED
    assert set(t3.params) == {"x"}  # Optuna kept only what it suggested
    records, _ = history_of(study)
    by_number = {r.number: r for r in records}
    relative = t3.system_attrs["ecopt:relative_params"]
    assert by_number[3].state is EState.FAILED and by_number[3].values == {}
    assert by_number[3].params == {"x": t3.params["x"], "n": relative["n"],
                                   "c": ["a", "b"].index(relative["c"])}
    assert by_number[4].state is EState.PRUNED and by_number[4].values == {}
    assert study.trials[5].state is TrialState.COMPLETE


@pytest.mark.slow
def test_a_configuration_whose_trial_failed_is_never_proposed_again():
    """Issue 36 through Optuna: a failed configuration reaches the sampler as a failed
    record (by the conversion in _convert.py), so it is not proposed again."""
    def objective(trial: optuna.Trial) -> tuple[float, float]:
        kind = trial.suggest_categorical("kind", ["a", "b", "c"])
        if kind == "c":
            raise RuntimeError("kind c always fails")  # before n is suggested
        n = trial.suggest_int("n", 1, 4)
        return float(n) + (kind == "b"), 5.0 - n + 0.5 * (kind == "a")

    study = new_study(EcoptSampler(seed=5, **FAST))
    study.optimize(objective, n_trials=9, catch=(RuntimeError,))
    failed = [(t.system_attrs["ecopt:relative_params"].get("n"), t.params["kind"])
              for t in study.trials if t.state is TrialState.FAIL]
    assert failed  # the region was tried...
    assert len(failed) == len(set(failed))  # ...and no failed configuration twice
    assert len(study.trials) == 9


def test_constraints_func_returning_nan_stops_the_study_as_in_optuna():
    sampler = EcoptSampler(seed=0, constraints_func=lambda t: (math.nan,), **FAST)
    study = new_study(sampler)
    with pytest.raises(ValueError, match="NaN"):
        study.optimize(mixed, n_trials=3)
    trials = study.get_trials()
    # Optuna's own rule (GPSampler's test): the error stops the optimisation, the trial
    # stays complete with its values, and it has no constraint values.
    assert len(trials) == 1 and trials[0].state is TrialState.COMPLETE
    assert trials[0].values == list(mixed_values(trials[0].params))
    assert len(trials[0].constraints) == 0


# -- threads, changing ranges, conditional parameters ----------------------------------------
@pytest.mark.slow
def test_n_jobs_threads_get_relative_params_and_distinct_points():
    def objective(trial: optuna.Trial) -> tuple[float, float]:
        assert trial._relative_params is None  # computed on the first suggest (Optuna 5)
        x, y = trial.suggest_float("x", -10, 10), trial.suggest_float("y", -10, 10)
        assert trial._relative_params is not None
        return x ** 2 + y, (x - 2) ** 2 - y

    study = new_study(EcoptSampler(seed=0, **FAST))
    study.optimize(objective, n_trials=6, n_jobs=2)
    assert [t.state for t in study.trials] == [TrialState.COMPLETE] * 6
    assert len({(t.params["x"], t.params["y"]) for t in study.trials}) == 6


@pytest.mark.slow
@pytest.mark.parametrize("low,high", [(0, 5), (0, 20), (20, 30)])
def test_a_range_that_changes_between_calls(low, high):
    def objective(trial: optuna.Trial, lo: int, hi: int) -> tuple[float, float]:
        v = trial.suggest_float("x", lo, hi) + trial.suggest_int("y", lo, hi)
        return v, -v

    study = new_study(EcoptSampler(seed=0, warn_independent_sampling=False, **FAST))
    study.optimize(lambda t: objective(t, 0, 10), n_trials=4)
    study.optimize(lambda t: objective(t, low, high), n_trials=3)
    assert [t.state for t in study.trials] == [TrialState.COMPLETE] * 7
    for t in study.trials[4:]:
        assert low <= t.params["x"] <= high and low <= t.params["y"] <= high


@pytest.mark.slow
def test_conditional_parameters():
    def objective(trial: optuna.Trial) -> tuple[float, float]:
        if trial.suggest_categorical("x", [True, False]):
            y = trial.suggest_float("y", 0, 1)
            return y, 1 - y
        z = trial.suggest_float("z", 0, 1)
        return 1 + z, z

    study = new_study(EcoptSampler(seed=0, warn_independent_sampling=False, **FAST))
    study.optimize(objective, n_trials=7)
    assert [t.state for t in study.trials] == [TrialState.COMPLETE] * 7
    assert {"ecopt:proposed_by"} <= set(study.trials[-1].system_attrs)


@pytest.mark.parametrize("distribution", [
    FloatDistribution(-1.0, 1.0), FloatDistribution(1e-7, 1.0, log=True),
    FloatDistribution(-10, 10, step=0.1), FloatDistribution(-10.2, 10.2, step=0.1),
    IntDistribution(-10, 10), IntDistribution(-10, 10, step=2), IntDistribution(1, 100, log=True),
    CategoricalDistribution((1, 2, 3)), CategoricalDistribution((1, "a")),
    CategoricalDistribution(("a", None)),
])
def test_sample_independent_returns_values_of_the_distribution(distribution):
    study = new_study(EcoptSampler(seed=0))
    for _ in range(20):  # trial 0 (Sobol point 0), then seeded random draws
        trial = optuna.trial.create_trial(state=TrialState.RUNNING)
        trial_id = study._storage.create_new_trial(study._study_id, template_trial=trial)
        frozen = study._storage.get_trial(trial_id)
        value = study.sampler.sample_independent(study, frozen, "x", distribution)
        assert distribution._contains(distribution.to_internal_repr(value))
        if not isinstance(distribution, CategoricalDistribution):
            assert type(value) in (int, float)  # never a numpy scalar
        if isinstance(distribution, FloatDistribution) and distribution.step is not None:
            k = (value - distribution.low) / distribution.step
            assert k == pytest.approx(round(k), abs=1e-8)


def test_single_valued_distributions():
    singles = {"a": CategoricalDistribution([1]), "b": IntDistribution(1, 1),
               "c": IntDistribution(1, 1, log=True), "d": FloatDistribution(1.0, 1.0),
               "f": FloatDistribution(1.0, 1.0, step=1.0)}
    study = new_study(EcoptSampler(seed=0, **FAST))
    for _ in range(2):
        trial = study.ask(fixed_distributions=singles)
        study.tell(trial, (1.0, 2.0))
        assert all(v == 1 for v in trial.params.values())
