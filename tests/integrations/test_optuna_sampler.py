"""EcoptSampler inside real Optuna studies (in memory, SQLite, journal; threads, processes)."""

from __future__ import annotations

import math
import subprocess
import sys
import textwrap
import warnings

import pytest

optuna = pytest.importorskip("optuna")

import ecopt  # noqa: E402
from ecopt.integrations.optuna import EcoptSampler  # noqa: E402
from ecopt.samplers import QLogNEHVISampler  # noqa: E402

optuna.logging.set_verbosity(optuna.logging.ERROR)
pytestmark = pytest.mark.filterwarnings("ignore::optuna.exceptions.ExperimentalWarning",
                                        "ignore::ecopt.samplers.FallbackWarning")


def existing_objective(trial: optuna.Trial) -> tuple[float, float]:
    """An Optuna user's objective as they already have it (nothing ecopt in it)."""
    x = trial.suggest_float("x", 1e-3, 1.0, log=True)
    n = trial.suggest_int("n", 1, 8)
    act = trial.suggest_categorical("act", ["relu", "tanh"])
    penalty = 0.1 if act == "tanh" else 0.0
    return (x - 0.3) ** 2 + penalty + 0.01 * n, -math.log(x) / n


def branin_currin(x0: float, x1: float) -> tuple[float, float]:
    from botorch.test_functions.multi_objective import BraninCurrin
    import torch

    y = BraninCurrin()(torch.tensor([[x0, x1]], dtype=torch.double))[0]
    return float(y[0]), float(y[1])


@pytest.mark.slow
def test_the_one_line_change_runs_an_existing_optuna_objective():
    study = optuna.create_study(directions=["minimize", "maximize"], sampler=EcoptSampler())
    study.optimize(existing_objective, n_trials=10)
    assert [t.state for t in study.trials] == [optuna.trial.TrialState.COMPLETE] * 10
    by = [t.system_attrs.get("ecopt:proposed_by") for t in study.trials]
    # Trial 0 has no search space yet: Sobol point 0, parameter by parameter; then the
    # rest of ecopt's Sobol design (n_init = min(2 (d + 1), 5) = 5), then the model.
    assert by[:5] == ["sobol"] * 5 and by[5:] == ["qlognehvi"] * 5
    for t in study.trials:
        assert 1e-3 <= t.params["x"] <= 1.0 and t.params["n"] in range(1, 9)
        assert t.params["act"] in ("relu", "tanh")
    assert study.best_trials  # Optuna's own Pareto front works on what we proposed


#: BoTorch's reference point for BraninCurrin (both objectives minimised).
BRANIN_CURRIN_REF = (18.0, 6.0)


def _ecopt_run(n: int, seed: int, tmp_path) -> list[tuple[dict, tuple[float, float]]]:
    """An ecopt.Study on BraninCurrin over [0, 1]^2, its default sampler with full proposals
    (as inside Optuna, which meters no proposal) and the seed."""
    space = ecopt.SearchSpace({"x0": ecopt.Float(0, 1), "x1": ecopt.Float(0, 1)})
    study = ecopt.Study(space, [ecopt.Objective("a", "min"), ecopt.Objective("b", "min")],
                        sampler=QLogNEHVISampler(proposal_share=None),
                        meter="wallclock", seed=seed, storage=tmp_path / f"ecopt-{seed}")

    def objective(t):
        a, b = branin_currin(t.params["x0"], t.params["x1"])
        return {"a": a, "b": b}

    study.optimize(objective, n_trials=n, show_progress=False)
    out = [(dict(r.params), (r.values["a"], r.values["b"])) for r in study.records]
    study.close()
    return out


def _optuna_run(n: int, seed: int, storage: object = None
                ) -> list[tuple[dict, tuple[float, float]]]:
    """The same as an Optuna user writes it: EcoptSampler(seed=seed), nothing else."""
    study = optuna.create_study(directions=["minimize", "minimize"], storage=storage,
                                sampler=EcoptSampler(seed=seed))

    def objective(trial):
        return branin_currin(trial.suggest_float("x0", 0, 1), trial.suggest_float("x1", 0, 1))

    study.optimize(objective, n_trials=n)
    return [(dict(t.params), tuple(t.values)) for t in study.trials]


@pytest.mark.slow
def test_an_optuna_study_searches_as_well_as_an_ecopt_study(tmp_path):
    """Issue 37: BraninCurrin over [0, 1]^2, 20 trials, 2 seeds, SQLite storage. The first
    trial is Sobol point 0 and the design is indexed by trial number, so EcoptSampler
    proposes what ecopt.Study does, point for point, and reaches its hypervolume."""
    from ecopt.pareto import hypervolume

    hv = {"ecopt": [], "optuna": []}
    for seed in range(2):
        native = _ecopt_run(20, seed, tmp_path)
        inside = _optuna_run(20, seed, storage=f"sqlite:///{tmp_path / f'o{seed}.db'}")
        assert [p for p, _ in inside] == [p for p, _ in native], seed
        for key, run in (("ecopt", native), ("optuna", inside)):
            hv[key].append(hypervolume([y for _, y in run], BRANIN_CURRIN_REF, ["min", "min"]))
    assert sum(hv["optuna"]) >= 0.95 * sum(hv["ecopt"]) > 0


def test_the_design_after_the_centre_follows_the_seed():
    first = {seed: [p for p, _ in _optuna_run(3, seed)] for seed in (3, 4)}
    assert first[3] == [p for p, _ in _optuna_run(3, 3)]  # deterministic for a seed
    # the first trial is the centre of the space whatever the seed; the design follows it
    assert first[3][0] == first[4][0] and first[3][0] == pytest.approx(
        {k: 0.5 for k in first[3][0]})
    assert all(a != b for a, b in zip(first[3][1:], first[4][1:]))


@pytest.mark.slow
def test_running_trials_are_pending_points():
    sampler = EcoptSampler(seed=0, n_init=4)
    study = optuna.create_study(directions=["minimize", "minimize"], sampler=sampler)
    dists = {"x0": optuna.distributions.FloatDistribution(0, 1),
             "x1": optuna.distributions.FloatDistribution(0, 1)}
    for _ in range(5):
        t = study.ask(dists)
        study.tell(t, branin_currin(t.params["x0"], t.params["x1"]))
    a = study.ask(dists)  # running: never told
    b = study.ask(dists)
    assert a.params != b.params
    # b is exactly ecopt's proposal with a as the pending point.
    space, codecs = __import__("ecopt.integrations.optuna._convert", fromlist=["x"]) \
        .sampler_space(dists)
    records, pending, _ = sampler._history(study.get_trials(deepcopy=False), b._cached_frozen_trial,
                                           space, codecs, ["objective_0", "objective_1"])
    assert pending == [a.params]
    direct = QLogNEHVISampler(seed=0, n_init=4, proposal_share=None)  # as EcoptSampler's
    direct.bind([ecopt.Objective("objective_0", "min"), ecopt.Objective("objective_1", "min")],
                [], 0)
    assert direct.propose(space, records, pending, 1)[0].params == b.params
    # The proposal is in the trial's system attributes, for other workers to see.
    assert study.get_trials()[a.number].system_attrs["ecopt:relative_params"] == a.params


@pytest.mark.slow
def test_a_slower_lower_trial_moves_off_a_point_a_higher_one_already_took():
    """The race two processes run: trial 6 (another worker) proposes and says its final
    point while trial 5 is still proposing from the same history, so both hold one point.
    Trial 6 stopped waiting for trial 5; trial 5 must see the taken point and move."""
    dists = {"x0": optuna.distributions.FloatDistribution(0, 1),
             "x1": optuna.distributions.FloatDistribution(0, 1)}

    def history(sampler):
        study = optuna.create_study(directions=["minimize", "minimize"], sampler=sampler)
        for _ in range(5):
            t = study.ask(dists)
            study.tell(t, branin_currin(t.params["x0"], t.params["x1"]))
        return study

    taken = history(EcoptSampler(seed=0, n_init=4)).ask(dists).params  # trial 5, alone
    sampler = EcoptSampler(seed=0, n_init=4)
    study = history(sampler)
    storage = study._storage
    five = storage.create_new_trial(study._study_id)
    six = storage.create_new_trial(study._study_id)
    propose = sampler._propose

    def slower(*args, **kwargs):
        out = propose(*args, **kwargs)
        if not storage.get_trial(six).system_attrs:  # the other worker finishes first
            storage.set_trial_system_attr(six, "ecopt:relative_params", out[0])
            storage.set_trial_system_attr(six, "ecopt:proposed_by", "qlognehvi")
        return out

    sampler._propose = slower
    params = sampler.sample_relative(study, storage.get_trial(five), dists)
    assert params != taken
    assert storage.get_trial(six).system_attrs["ecopt:relative_params"] == taken
    assert storage.get_trial(five).system_attrs["ecopt:relative_params"] == params


@pytest.mark.slow
def test_constraints_func_and_set_constraint_are_outcome_constraints():
    def constraints(t):
        return [t.params["x0"] - 0.5]  # feasible when x0 <= 0.5

    sampler = EcoptSampler(seed=1, n_init=4, constraints_func=constraints)
    study = optuna.create_study(directions=["minimize", "minimize"], sampler=sampler)

    def objective(trial):
        x0, x1 = trial.suggest_float("x0", 0, 1), trial.suggest_float("x1", 0, 1)
        trial.set_constraint("x1_cap", x1 - 0.9)
        return branin_currin(x0, x1)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        study.optimize(objective, n_trials=7)
    trials = study.get_trials()
    assert trials[-1].system_attrs["ecopt:proposed_by"] == "qlognehvi"
    assert trials[0].constraints.keys() == {"0", "x1_cap"}  # Optuna reads both forms
    space, codecs = __import__("ecopt.integrations.optuna._convert", fromlist=["x"]) \
        .sampler_space(study.best_trials[0].distributions)
    records, _, keys = sampler._history(trials, trials[-1], space, codecs,
                                        ["objective_0", "objective_1"])
    assert keys == ["0", "x1_cap"]
    for r, t in zip(records, trials[:-1]):
        assert r.metrics == {"constraint_0": pytest.approx(t.params["x0"] - 0.5),
                             "constraint_x1_cap": pytest.approx(t.params["x1"] - 0.9)}
        assert r.feasible == (t.params["x0"] <= 0.5 and t.params["x1"] <= 0.9)
    assert sampler.inner.constraints == [ecopt.Constraint("constraint_0", "<=", 0),
                                         ecopt.Constraint("constraint_x1_cap", "<=", 0)]
    with pytest.raises(ValueError, match="NaN"):
        bad = optuna.create_study(directions=["minimize", "minimize"],
                                  sampler=EcoptSampler(constraints_func=lambda t: [math.nan]))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            bad.optimize(objective, n_trials=1)


def test_a_single_objective_study_gets_a_clear_error():
    study = optuna.create_study(direction="minimize", sampler=EcoptSampler())
    with pytest.raises(ValueError, match="at least 2 directions.*GPSampler"):
        study.optimize(lambda t: t.suggest_float("x", 0, 1), n_trials=1)


def test_bad_options_are_refused_with_the_rule():
    with pytest.raises(ValueError, match="num_restarts >= 1"):
        EcoptSampler(num_restarts=0)
    with pytest.raises(ValueError, match="seed must be an integer"):
        EcoptSampler(seed=-1)
    with pytest.raises(ValueError, match=r"thresholds\[1\] must be a finite number"):
        EcoptSampler(thresholds=[1.0, math.inf])
    with pytest.raises(TypeError):
        EcoptSampler(no_such_option=1)
    # Optuna meters no proposal: an economy rule would never measure one
    with pytest.raises(ValueError, match="proposal_share=0.25"):
        EcoptSampler(proposal_share=0.25)
    EcoptSampler(proposal_share=None)
    s = EcoptSampler(seed=2, n_init=5, cost_aware=True)
    assert s.inner.n_init == 5 and s.inner.cost_aware and s.inner.seed == 2


@pytest.mark.slow
def test_journal_storage_with_threads_proposes_distinct_points(tmp_path):
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend

    storage = JournalStorage(JournalFileBackend(str(tmp_path / "journal.log")))
    study = optuna.create_study(directions=["minimize", "minimize"], storage=storage,
                                sampler=EcoptSampler(seed=0, n_init=4))

    def objective(trial):
        return branin_currin(trial.suggest_float("x0", 0, 1), trial.suggest_float("x1", 0, 1))

    study.optimize(objective, n_trials=8, n_jobs=2)
    trials = study.get_trials()
    assert len(trials) == 8 and all(t.state.name == "COMPLETE" for t in trials)
    points = {(t.params["x0"], t.params["x1"]) for t in trials}
    assert len(points) == 8
    assert "qlognehvi" in {t.system_attrs.get("ecopt:proposed_by") for t in trials}


_WORKER = textwrap.dedent("""
    import sys, warnings
    warnings.simplefilter("ignore")
    import optuna
    from ecopt.integrations.optuna import EcoptSampler
    from botorch.test_functions.multi_objective import BraninCurrin
    import torch
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    f = BraninCurrin()
    def objective(trial):
        x = torch.tensor([[trial.suggest_float("x0", 0, 1), trial.suggest_float("x1", 0, 1)]],
                         dtype=torch.double)
        y = f(x)[0]
        return float(y[0]), float(y[1])
    study = optuna.load_study(study_name="shared", storage=sys.argv[1],
                              sampler=EcoptSampler(seed=0, n_init=4))
    study.optimize(objective, n_trials=int(sys.argv[2]))
""")


@pytest.mark.slow
@pytest.mark.parametrize("run", range(3))
def test_processes_sharing_one_sqlite_storage(tmp_path, run):
    """Two workers, same seed, one storage, started together: never one point twice (the
    design is indexed by trial number; model proposals wait for each other). 3 runs."""
    url = f"sqlite:///{tmp_path / 'optuna.db'}"
    optuna.create_study(study_name="shared", storage=url, directions=["minimize", "minimize"])
    procs = [subprocess.Popen([sys.executable, "-c", _WORKER, url, "4"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    for p in procs:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err[-2000:]
    trials = optuna.load_study(study_name="shared", storage=url).get_trials()
    assert len(trials) == 8 and all(t.state.name == "COMPLETE" for t in trials)
    points = [(t.params["x0"], t.params["x1"]) for t in trials]
    assert len(set(points)) == 8, points  # the two workers never ran one point twice
    by = [t.system_attrs.get("ecopt:proposed_by") for t in trials]
    assert by[0] == "sobol" and "qlognehvi" in by


def test_every_optuna_distribution_maps_without_loss():
    from optuna.distributions import (
        CategoricalDistribution,
        FloatDistribution,
        IntDistribution,
    )

    from ecopt.integrations.optuna._convert import sampler_space

    dists = {"f": FloatDistribution(1e-3, 1.0, log=True),
             "s": FloatDistribution(0.0, 1.0, step=0.25),
             "i": IntDistribution(2, 10, step=2), "l": IntDistribution(1, 64, log=True),
             "c": CategoricalDistribution(["a", None, 3, (1, 2)])}
    space, codecs = sampler_space(dists)
    assert space.to_dict()["s"] == {"type": "int", "low": 0, "high": 4, "log": False, "step": 1}
    for u in ([0.0] * 5, [1.0] * 5, [0.37, 0.61, 0.5, 0.2, 0.9]):
        params = {n: codecs[n].to_optuna(v) for n, v in space.decode(u).items()}
        for n, d in dists.items():  # every value Optuna itself accepts for the distribution
            assert d._contains(d.to_internal_repr(params[n])), (n, params[n])
            assert codecs[n].to_ecopt(params[n]) == space.validate(
                {k: codecs[k].to_ecopt(params[k]) for k in params})[n]
    assert {codecs["c"].to_optuna(i) for i in range(4)} == {"a", None, 3, (1, 2)}
    assert codecs["s"].to_optuna(3) == 0.75
