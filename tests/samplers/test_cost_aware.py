"""Cost-aware proposals (``cost_aware=True``): real BoTorch fits, a real Study.

The only fake is the meter: it gives each ``train`` phase the joules the
objective sets (the machine has no energy counter that is deterministic).
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np
import pytest

import ecopt
from ecopt.meters.base import ComponentEnergy, Meter
from ecopt.samplers import QLogNEHVISampler, QNEHVISampler, _cost, get_sampler
from ecopt.samplers._encoding import encoding, to_model

# Full proposals: these tests watch the acquisition optimiser; one lengthscale prior: they
# count fits (one per outcome) and compare with and without the cost under one model.
FAST = {"num_restarts": 2, "raw_samples": 64, "mc_samples": 32, "maxiter": 50,
        "proposal_share": None, "lengthscale_prior": "gamma"}
SPACE = ecopt.SearchSpace({"x": ecopt.Float(0, 1), "y": ecopt.Float(0, 1)})
OBJS = [ecopt.Objective("f1", "min"), ecopt.Objective("f2", "min")]


class SetJoules(Meter):
    """Each window gets ``joules`` (set by the objective before its phase)."""

    name = "set-joules"

    def __init__(self) -> None:
        super().__init__()
        self.joules = 1e-6

    def _start(self) -> None:
        pass

    def _stop(self, state: Any, duration_s: float) -> dict[str, ComponentEnergy]:
        return {"cpu": ComponentEnergy(self.joules, "fake-set-joules", True)}


def _objective(meter: SetJoules, energy_j, values):
    def objective(trial: ecopt.Trial) -> dict[str, float]:
        meter.joules = energy_j(trial["x"], trial["y"])
        with trial.phase("train"):
            pass
        meter.joules = 1e-6  # the proposals' own windows: negligible
        return values(trial["x"], trial["y"])
    return objective


def _study(sampler: Any, meter: SetJoules, **kw: Any) -> ecopt.Study:
    return ecopt.Study(SPACE, OBJS, sampler=sampler, meter=meter, seed=0, **kw)


def _run(study: ecopt.Study, objective: Any, n: int) -> list[ecopt.TrialRecord]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return study.optimize(objective, n_trials=n)


def _front(x: float, y: float) -> dict[str, float]:
    return {"f1": x, "f2": 1 - math.sqrt(x) + y}


def test_cost_model_learns_a_known_cost_function():
    """energy = exp(3x + y): after 10 Sobol trials the model ranks held-out points
    right (Spearman > 0.9) and is within a factor of 1.5 of the truth."""
    from scipy.stats import spearmanr

    meter = SetJoules()
    truth = lambda x, y: math.exp(3 * x + y)
    recs = _run(_study("sobol", meter), _objective(meter, truth, _front), 10)
    assert [round(r.energy_j, 9) for r in recs] == \
        [round(truth(r.params["x"], r.params["y"]), 9) for r in recs]
    enc = encoding(SPACE)
    fit_kw = {"cat_dims": [], "warm": None, "cold_check": False, "warm_ftol": 1e-6,
              "cold_ftol": 1e-6}
    model = _cost.fit_cost(SPACE, enc, recs, 1.0, fit_kw)
    assert isinstance(model, _cost.CostModel) and model.n_trials == 10
    import torch

    U = np.random.default_rng(1).random((200, 2))
    pred = model.predict_energy_j(torch.tensor(to_model(U, enc), dtype=torch.double))
    true = np.exp(3 * U[:, 0] + U[:, 1])
    assert spearmanr(pred, true).statistic > 0.9
    ratio = pred / true
    assert ratio.min() > 1 / 1.5 and ratio.max() < 1.5, (ratio.min(), ratio.max())


def _fold(x: float, y: float) -> dict[str, float]:
    """Equally good at y = 0 and y = 1 (the front is at both edges)."""
    return {"f1": x, "f2": 1 - math.sqrt(x) + (1 - abs(2 * y - 1))}


def _half_30x(x: float, y: float) -> float:
    """30x more joules for y > 0.5 (smooth step)."""
    return math.exp(math.log(30.0) / (1 + math.exp(-40 * (y - 0.5))))


@pytest.mark.slow
def test_proposals_go_to_the_cheap_half_with_cost_aware():
    def cheap_share(cost_aware: bool, seed: int) -> tuple[float, float]:
        meter = SetJoules()
        s = ecopt.Study(SPACE, OBJS, meter=meter, seed=seed,
                        sampler=QLogNEHVISampler(n_init=6, cost_aware=cost_aware, **FAST))
        recs = _run(s, _objective(meter, _half_30x, _fold), 18)
        bo = [r for r in recs if r.proposed_by == "qlognehvi"]
        assert len(bo) == 12
        if cost_aware:
            for r in bo:  # the prediction of every model-based proposal is recorded
                c = r.proposal["cost"]
                assert c["active"] is True and c["model"] == _cost.MODEL
                assert c["predicted_energy_j"] > 0 and c["n_trials"] >= _cost.MIN_TRIALS
        else:
            assert all("cost" not in r.proposal for r in bo)
        return np.mean([r.params["y"] < 0.5 for r in bo]), sum(r.energy_j for r in bo)

    # Both edges of the front are equally good, so a cost-blind search splits its proposals
    # between them only on average (one seed put 11 of 12 on the cheap half): four seeds.
    on = [cheap_share(True, seed) for seed in range(4)]
    off = [cheap_share(False, seed) for seed in range(4)]
    share_on, share_off = np.mean([s for s, _ in on]), np.mean([s for s, _ in off])
    assert share_on >= 0.75, (on, off)
    assert share_on >= share_off + 0.2, (on, off)
    assert sum(e for _, e in on) < sum(e for _, e in off)


def test_predicted_cost_recorded_and_reasonable():
    meter = SetJoules()
    s = _study(QNEHVISampler(n_init=4, cost_aware=True, **FAST), meter)
    recs = _run(s, _objective(meter, lambda x, y: math.exp(3 * x), _front), 7)
    assert [r.proposed_by for r in recs] == ["sobol"] * 4 + ["qnehvi"] * 3
    assert all("cost" not in r.proposal for r in recs[:4])  # the Sobol design is unchanged
    for r in recs[4:]:
        c = r.proposal["cost"]
        assert c["active"] is True and c["cost_exponent"] == 1.0 and c["n_pruned_scaled"] == 0
        assert 1 / 3 < c["predicted_energy_j"] / r.energy_j < 3
        assert "__energy_j__" in r.proposal["gp_state"]["params"]
    assert s.sampler.describe()["cost_aware"] is True
    # Proposals stay a pure function of seed and history.
    again = _run(_study(QNEHVISampler(n_init=4, cost_aware=True, **FAST), meter),
                 _objective(meter, lambda x, y: math.exp(3 * x), _front), 7)
    assert [r.params for r in again] == [r.params for r in recs]


def test_fewer_than_three_energies_say_why_cost_was_not_used():
    meter = SetJoules()
    # The third trial's proposal has two trials with energy to learn from.
    s = _study(QLogNEHVISampler(n_init=2, cost_aware=True, **FAST), meter)
    recs = _run(s, _objective(meter, lambda x, y: 1.0, _front), 3)
    c = recs[2].proposal["cost"]
    assert recs[2].proposed_by == "qlognehvi"
    assert c["active"] is False and c["why"].startswith("2 trial(s) with energy, fewer than 3") and "without cost" in c["why"]
    assert "predicted_energy_j" not in c


def test_pruned_trials_cost_their_full_length():
    meter = SetJoules()

    def objective(trial: ecopt.Trial) -> dict[str, float]:
        for step in range(1, 5):
            meter.joules = 1.0
            with trial.phase("train"):
                pass
            trial.report(step, {"f1": trial["x"]})
            if trial["x"] > 0.5 and step == 2:
                raise ecopt.TrialPruned()
        return _front(trial["x"], trial["y"])

    recs = _run(ecopt.Study(SPACE, OBJS, sampler="sobol", meter=meter, seed=0), objective, 8)
    _, energy, n_pruned = _cost.cost_data(SPACE, recs)
    pruned = [r for r in recs if r.state is ecopt.TrialState.PRUNED]
    assert pruned and n_pruned == len(pruned) and len(energy) == len(recs)
    assert set(np.round(energy, 6)) == {4.0}  # 2 steps of 4 at 1 J, scaled to 4 steps


@pytest.mark.parametrize("kw, rule", [
    ({"cost_exponent": 1.5}, "0 <= cost_exponent <= 1"),
    ({"cost_exponent": -0.1}, "0 <= cost_exponent <= 1"),
    ({"cost_exponent": "1"}, "0 <= cost_exponent <= 1"),
    ({"cost_exponent": True}, "0 <= cost_exponent <= 1"),
    ({"cost_aware": "yes"}, "cost_aware must be True or False"),
])
def test_bad_options_name_the_rule_and_value(kw, rule):
    with pytest.raises(ValueError, match=rule) as e:
        QLogNEHVISampler(**kw)
    assert repr(next(iter(kw.values()))) in str(e.value)


def test_study_switch_is_deprecated_and_still_works():
    """``Study(cost_aware=...)`` (deprecated: the option is the sampler's) keeps its meaning."""
    assert get_sampler("qlognehvi", cost_aware=True).cost_aware is True  # type: ignore[attr-defined]
    with pytest.warns(DeprecationWarning, match="QLogNEHVISampler\\(cost_aware=True\\)"):
        s = ecopt.Study(SPACE, OBJS, meter="wallclock", cost_aware=True)
    assert s.sampler.cost_aware is True  # type: ignore[union-attr]
    with pytest.warns(DeprecationWarning):
        with pytest.raises(ValueError, match="cost_aware=True needs a model-based sampler"):
            ecopt.Study(SPACE, OBJS, sampler="random", meter="wallclock", cost_aware=True)
        with pytest.raises(ValueError, match="must match the sampler instance's"):
            ecopt.Study(SPACE, OBJS, sampler=QLogNEHVISampler(), meter="wallclock",
                        cost_aware=True)
        with pytest.raises(ValueError, match="cost_aware must be True, False or None"):
            ecopt.Study(SPACE, OBJS, meter="wallclock", cost_aware=1)
        ecopt.Study(SPACE, OBJS, sampler="random", meter="wallclock", cost_aware=False)


@pytest.mark.slow
def test_mixed_space_batches_with_cost():
    """The mixed optimiser and sequential greedy (q = 2, ``X_pending``) through the weighting."""
    space = ecopt.SearchSpace({"x": ecopt.Float(0, 1), "k": ecopt.Int(1, 8),
                               "c": ecopt.Categorical(["a", "b", "c"])})
    meter = SetJoules()

    def objective(trial: ecopt.Trial) -> dict[str, float]:
        meter.joules = trial["k"] * (3.0 if trial["c"] == "a" else 1.0)
        with trial.phase("train"):
            pass
        return {"f1": trial["x"] + 0.05 * trial["k"],
                "f2": (1 - trial["x"]) ** 2 + 0.05 * (8 - trial["k"])}

    s = ecopt.Study(space, OBJS, meter=meter, seed=0,
                    sampler=QLogNEHVISampler(n_init=4, cost_aware=True, **FAST))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        recs = s.optimize(objective, n_trials=6, batch_size=2, asynchronous=False)
    bo = [r for r in recs if r.proposed_by == "qlognehvi"]
    assert len(bo) == 2 and bo[0].proposal["optimiser"] == "mixed"
    assert all(r.proposal["cost"]["active"] for r in bo)
    assert bo[-1].params != bo[-2].params
    # Each point of a batch records its own prediction.
    assert bo[-1].proposal["cost"]["predicted_energy_j"] != \
        bo[-2].proposal["cost"]["predicted_energy_j"]


@pytest.fixture(scope="module")
def sobol_records() -> list[ecopt.TrialRecord]:
    """Six Sobol trials with energy exp(3x) for direct ``propose`` calls."""
    meter = SetJoules()
    return _run(_study("sobol", meter), _objective(meter, lambda x, y: math.exp(3 * x), _front), 6)


def _propose(records: list[ecopt.TrialRecord]) -> Any:
    sampler = QLogNEHVISampler(n_init=2, cost_aware=True, seed=0, **FAST)
    sampler.bind(OBJS, [], 0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        (p,) = sampler.propose(SPACE, records, [], 1)
    return p


@pytest.mark.parametrize("fails, why", [
    ("batches", "cost weighting failed in optimisation, proposed without cost: "),
    ("after 3", "cost weighting failed, proposed without cost: "),
], ids=["every-batch", "after-3-calls"])
def test_weighting_failing_in_the_optimiser_proposes_without_cost(monkeypatch, sobol_records,
                                                                   fails, why):
    """The weighted acquisition passes its one-point check, then raises in the optimiser:
    on every batch of points (so it passes each check), or from its fourth call on (so
    the check on BoTorch's public path catches it). The proposal is still model-based,
    made without cost, says why, and the fast paths (which work without cost) stay on."""
    # What this BoTorch switches off anyway (the compat layer, at older releases).
    base_off = _propose(sobol_records).info.get("fast_path_off", {})
    per_joule = _cost._per_joule_class()  # the weighted acquisition, on any BoTorch
    real = per_joule.forward
    calls = {"n": 0}

    def flaky(self: Any, X: Any, *args: Any, **kwargs: Any) -> Any:
        calls["n"] += 1
        if (X.shape[0] > 1) if fails == "batches" else calls["n"] > 3:
            raise RuntimeError("cost utility broke")
        return real(self, X, *args, **kwargs)

    monkeypatch.setattr(per_joule, "forward", flaky)
    p = _propose(sobol_records)
    assert p.proposed_by == "qlognehvi", p.info
    c = p.info["cost"]
    assert c["active"] is False and "predicted_energy_j" not in c
    assert c["why"] == why + "RuntimeError: cost utility broke"
    assert p.info.get("fast_path_off", {}) == base_off  # no fast path blamed for the cost
    # With cost: the fast path (check, batch), then BoTorch's public path (check, batch:
    # not reached when its check fails); then no cost.
    assert calls["n"] == (4 if fails == "batches" else 5)


def test_cost_model_fast_path_off_is_recorded(monkeypatch, sobol_records):
    """The closed-form fit failing for the cost GP alone shows in ``fast_path_off``."""
    from ecopt.samplers import _mll

    real = _mll.fit_exact_gp
    calls = {"n": 0}

    def third_fails(model: Any, *args: Any, **kwargs: Any) -> Any:
        calls["n"] += 1  # the two objectives' GPs, then the cost GP
        if calls["n"] >= 3:
            raise RuntimeError("closed form broke")
        return real(model, *args, **kwargs)

    monkeypatch.setattr(_mll, "fit_exact_gp", third_fails)
    p = _propose(sobol_records)
    assert p.proposed_by == "qlognehvi" and p.info["cost"]["active"] is True
    assert calls["n"] == 3
    why = p.info["fast_path_off"]["closed_form_fit"]
    assert why.startswith("cost model") and "RuntimeError: closed form broke" in why


def test_weighting_equals_botorchs_log_utility_where_ecopt_applies_its_rule(sobol_records):
    """On a BoTorch whose InverseCostWeightedUtility has no log form, ecopt weights by its
    rule (log EHVI - log of the batch's summed cost); on this one, the two agree."""
    import torch

    if not _cost._utility_has_log():
        pytest.skip("this BoTorch's InverseCostWeightedUtility has no log form to compare with")
    fit_kw = {"cat_dims": [], "warm": None, "cold_check": False, "warm_ftol": 1e-6,
              "cold_ftol": 1e-6}
    cost = _cost.fit_cost(SPACE, encoding(SPACE), sobol_records, 0.7, fit_kw)
    assert isinstance(cost, _cost.CostModel)

    class Acq(torch.nn.Module):
        model = cost.model

        def forward(self, X: Any) -> Any:
            return X.sum(dim=(-1, -2)) - 1.0

    X = torch.rand(5, 2, 2, dtype=torch.float64)
    theirs = _cost._PerJoule(Acq(), cost, True)
    ours = _cost._PerJoule(Acq(), cost, True)
    ours.utility = None
    assert theirs.utility is not None
    assert torch.allclose(ours(X), theirs(X))


def test_the_cost_models_prior_is_recorded_under_auto():
    meter = SetJoules()
    fast = {**FAST, "lengthscale_prior": "auto"}
    recs = _run(_study(QNEHVISampler(n_init=4, cost_aware=True, **fast), meter),
                _objective(meter, lambda x, y: math.exp(3 * x), _front), 6)
    for r in recs[4:]:
        priors = r.proposal["lengthscale_priors"]
        assert set(priors) == {"f1", "f2", "__energy_j__"}
        assert set(priors.values()) <= {"gamma", "dim-scaled"}
