"""Proposals stay cheap next to cheap trials (issue 25 item 5): ``proposal_share``."""

from __future__ import annotations

import dataclasses

import pytest

import ecopt
from ecopt.samplers import QLogNEHVISampler
from ecopt.samplers.qnehvi import ECONOMY, ECONOMY_REFIT_EVERY, FULL_OVER_ECONOMY

SPACE = ecopt.SearchSpace({"x": ecopt.Float(0.0, 1.0), "y": ecopt.Float(0.0, 1.0)})
OBJS = [ecopt.Objective("f1", "min"), ecopt.Objective("f2", "min")]


def f(t: ecopt.Trial) -> dict[str, float]:
    return {"f1": t["x"], "f2": (1 - t["x"]) ** 2 + t["y"]}


@pytest.fixture(scope="module")
def cheap_study():
    from ecopt.samplers import qnehvi

    sampler = QLogNEHVISampler(n_init=3, num_restarts=4, raw_samples=96, maxiter=60,
                               proposal_share=0.25)
    study = ecopt.Study(SPACE, OBJS, sampler=sampler, seed=0, meter="wallclock")
    with pytest.MonkeyPatch.context() as mp:
        # refit_every alone decides here (the small-data rule has its own test)
        mp.setattr(qnehvi, "ECONOMY_REFIT_GROWTH", 10.0)
        study.optimize(f, n_trials=7, show_progress=False)
    return study, sampler


def test_cheap_trials_make_economy_proposals(cheap_study):
    study, _ = cheap_study
    model = [r for r in study.records if r.proposed_by == "qlognehvi"]
    assert len(model) == 4
    # The first model proposal is an economy one: no full proposal has been paid for, and
    # cheap trials never pay for one.
    first = model[0].proposal
    assert first["economy"]["active"] and first["economy"]["basis"] == "first"
    assert first["economy"]["hyperparameters"] == "optimised"  # nothing to keep yet
    assert first["optimiser"] == "scored"
    # the default per-fit prior: chosen where the hyperparameters were fitted, not where kept
    assert set(first["lengthscale_priors"]) == {"f1", "f2"}
    assert all("lengthscale_priors" not in r.proposal for r in model[1:])
    for r in model[1:]:
        e = r.proposal["economy"]
        # microsecond trials against proposals of a tenth of a second or more (wallclock meter:
        # no energy, so seconds); a full proposal's cost predicted from the economy one
        # that optimised its hyperparameters
        assert e["active"] and e["unit"] == "s" and e["ratio"] > 0.25, e
        assert e["basis"] == "predicted"
        assert e["full_proposal"] == pytest.approx(
            FULL_OVER_ECONOMY * first["search"]["duration_s"], rel=1e-3)
        # the user's 96 raw samples are more than none, fewer than ECONOMY's: they stay;
        # trials thousands of times cheaper than a proposal: the longest refit interval
        assert e["settings"] == {"raw_samples": 96, "fit_maxiter": 50, "mc_samples": 32,
                                 "cold_ftol": ECONOMY["cold_ftol"],
                                 "refit_every": ECONOMY_REFIT_EVERY[1]}
        assert r.proposal["mc_samples"] == 32  # fewer than a full proposal's 64
        # scored, not optimised; the first proposal's hyperparameters are kept as they are
        assert r.proposal["optimiser"] == "scored" and 0 < r.proposal["n_candidates"] <= 96
        assert e["hyperparameters"] == "kept"
        assert r.proposal["gp_state"]["fitted_at"] == first["n_observations"]
        assert r.proposal["gp_state"]["params"] == first["gp_state"]["params"]


def test_costly_trials_leave_proposals_unchanged(cheap_study):
    study, sampler = cheap_study
    slow = [dataclasses.replace(r, duration_s=1000.0) for r in study.records]
    e = sampler.economy(slow)
    assert e is not None and not e["active"] and "settings" not in e
    assert e["basis"] == "predicted" and e["ratio"] < 0.25
    got = sampler.propose(study.space, slow, [], 1)[0]
    assert got.info["economy"]["active"] is False
    assert got.info["optimiser"] == "continuous"  # a full proposal: gradient steps
    # once a full proposal is on record, its measured cost decides
    i = next(i for i, r in enumerate(slow) if r.proposed_by == "qlognehvi")
    slow[i] = dataclasses.replace(slow[i], proposal={**slow[i].proposal, "economy": {
        "active": False}})
    e = sampler.economy(slow)
    assert e["basis"] == "measured" and not e["active"]
    assert e["full_proposal"] == pytest.approx(slow[i].proposal["search"]["duration_s"],
                                               rel=1e-3)
    # the sampler's own settings are back after an economy proposal
    assert (sampler.num_restarts, sampler.raw_samples, sampler.maxiter, sampler.warm_start) \
        == (4, 96, 60, False)


def test_proposal_share_none_never_economises(cheap_study):
    study, _ = cheap_study
    assert QLogNEHVISampler(proposal_share=None).economy(study.records) is None


@pytest.mark.parametrize("bad", [0, -1.0, True, "0.25", float("inf")])
def test_bad_proposal_share(bad):
    with pytest.raises(ValueError, match="proposal_share must be None or a number > 0"):
        QLogNEHVISampler(proposal_share=bad)


def test_economy_keeps_a_users_lower_setting(cheap_study):
    study, _ = cheap_study
    e = QLogNEHVISampler(n_init=3, num_restarts=1, raw_samples=32,
                         proposal_share=0.25).economy(study.records)
    assert e is not None and e["active"]
    assert e["settings"]["raw_samples"] == 32
    assert e["settings"]["fit_maxiter"] == ECONOMY["fit_maxiter"]


@pytest.mark.parametrize("cold_ftol, used", [("auto", ECONOMY["cold_ftol"]), (None, None),
                                              (1e-4, 1e-4)])
def test_economy_fits_from_the_default_start_to_economys_tolerance(monkeypatch, cold_ftol,
                                                                   used):
    """With the default ``cold_ftol="auto"`` (scipy's tolerance for a full proposal's
    continuous GPs) an economy proposal's fit from BoTorch's default start stops at
    ``ECONOMY["cold_ftol"]`` (1e-6, what every recorded economy run used); a user's explicit
    tolerance stays. Read from the fits the proposals actually ran."""
    from ecopt.samplers import _models

    seen: list[float | None] = []
    init = _models._Fitter.__init__

    def spy(self, *args, **kwargs):
        init(self, *args, **kwargs)
        seen.append(self.cold_ftol)

    monkeypatch.setattr(_models._Fitter, "__init__", spy)
    sampler = QLogNEHVISampler(n_init=3, num_restarts=2, raw_samples=32, maxiter=20,
                               proposal_share=0.25, cold_ftol=cold_ftol)
    study = ecopt.Study(SPACE, OBJS, sampler=sampler, seed=3, meter="wallclock")
    study.optimize(f, n_trials=5, show_progress=False)
    model = [r.proposal for r in study.records if r.proposed_by == "qlognehvi"]
    assert [p["economy"]["active"] for p in model] == [True, True]
    assert model[0]["economy"]["settings"]["cold_ftol"] == used
    assert seen and set(seen) == {used}
    # the same sampler's full proposal keeps its own rule: scipy's tolerance under "auto"
    full = QLogNEHVISampler(n_init=3, num_restarts=2, raw_samples=32, maxiter=20,
                            proposal_share=None, cold_ftol=cold_ftol)
    seen.clear()
    ecopt.Study(SPACE, OBJS, sampler=full, seed=3, meter="wallclock").optimize(
        f, n_trials=4, show_progress=False)
    assert set(seen) == {None if cold_ftol == "auto" else used}


def small_economy_study(n_trials: int) -> list[dict]:
    """The model proposals' notes of a small economy study (3 Sobol trials first)."""
    sampler = QLogNEHVISampler(n_init=3, num_restarts=2, raw_samples=32, maxiter=20,
                               proposal_share=0.25)
    study = ecopt.Study(SPACE, OBJS, sampler=sampler, seed=1, meter="wallclock")
    study.optimize(f, n_trials=n_trials, show_progress=False)
    return [r.proposal for r in study.records if r.proposed_by == "qlognehvi"]


def test_economy_reoptimises_every_refit_every_observations(monkeypatch):
    """With ``refit_every`` 2, hyperparameters are optimised again at every second observation."""
    from ecopt.samplers import qnehvi

    monkeypatch.setattr(qnehvi, "ECONOMY_REFIT_EVERY", (2, 2))
    monkeypatch.setattr(qnehvi, "ECONOMY_REFIT_GROWTH", 10.0)  # refit_every alone decides
    model = small_economy_study(n_trials=8)
    got = [(p["n_observations"], p["economy"]["hyperparameters"], p["gp_state"]["fitted_at"])
           for p in model[1:]]
    # the first (economy) proposal fitted at 3 observations; then kept (4), optimised (5), ...
    assert model[0]["economy"]["basis"] == "first" and model[0]["gp_state"]["fitted_at"] == 3
    assert got == [(4, "kept", 3), (5, "optimised", 5), (6, "kept", 5), (7, "optimised", 7)]
    assert model[2]["gp_state"]["params"] != model[1]["gp_state"]["params"]


def test_economy_reoptimises_sooner_while_the_data_is_small():
    """Hyperparameters fitted to a few points are re-optimised after every new observation up
    to 8, then every quarter of the last fit's count, never later than ``refit_every``."""
    from ecopt.samplers._proposal import refit_due

    assert [refit_due(n, 4) for n in (3, 5, 7, 8, 11, 12, 16, 40)] == [1, 1, 1, 2, 2, 3, 4, 4]
    assert [refit_due(n, 2) for n in (5, 12, 40)] == [1, 2, 2]
    model = small_economy_study(n_trials=7)
    assert all(p["economy"]["active"] for p in model)
    assert [(p["n_observations"], p["economy"]["hyperparameters"]) for p in model[1:]] == [
        (n, "optimised") for n in (4, 5, 6)]


def test_economy_refits_keep_the_chosen_prior_until_the_data_doubles():
    """With ``lengthscale_prior="auto"`` an economy re-fit fits each output under the prior
    chosen last (one fit, not two) until the observations have doubled since that choice."""
    from ecopt.samplers._proposal import prior_due

    assert [prior_due(n) for n in (3, 4, 7)] == [6, 8, 14]
    model = small_economy_study(n_trials=8)
    got = [(p["n_observations"], p["economy"]["priors"], p["gp_state"]["priors_chosen_at"])
           for p in model]
    assert got == [(3, "chosen", 3), (4, "kept", 3), (5, "kept", 3), (6, "chosen", 6),
                   (7, "kept", 6)]
    for before, p in zip(model, model[1:]):
        # every output fitted under the prior in force, which the next proposal keeps
        assert p["lengthscale_priors"] == p["gp_state"]["priors"]
        if p["economy"]["priors"] == "kept":
            assert p["gp_state"]["priors"] == before["gp_state"]["priors"]


def test_a_kept_prior_is_one_fit_under_that_prior(monkeypatch):
    """``fit_outputs(kept_priors=...)`` fits the named outputs under the given prior only;
    the others are still compared under both."""
    import torch

    from ecopt.samplers import _models

    g = torch.Generator().manual_seed(0)
    X = torch.rand(10, 2, generator=g, dtype=torch.double)
    Y = torch.cat([torch.sin(6 * X[:, :1]), X[:, 1:] ** 2], dim=1)
    fits = []
    real_fit = _models._Fitter.fit
    monkeypatch.setattr(_models._Fitter, "fit",
                        lambda self, model, warm_started=False:
                        fits.append(1) or real_fit(self, model, warm_started))

    def run(kept):
        fits.clear()
        out = _models.fit_outputs(X, Y, None, [], ["a", "b"], warm=None, cold_check=False,
                                  warm_ftol=None, cold_ftol=None, lengthscale_prior="auto",
                                  kept_priors=kept)
        return out.priors, len(fits)

    chosen, n_fits = run(None)
    assert n_fits == 4  # two outputs under two priors
    other = {"gamma": "dim-scaled", "dim-scaled": "gamma"}[chosen["a"]]
    priors, n_fits = run({"a": other})
    assert priors == {"a": other, "b": chosen["b"]} and n_fits == 3


MIXED = ecopt.SearchSpace({"w": ecopt.Int(1, 64, log=True), "lr": ecopt.Float(1e-4, 1e-1, log=True),
                           "act": ecopt.Categorical(["relu", "tanh", "gelu"])})


def test_scored_candidates_are_valid_distinct_and_new():
    """The economy optimiser's candidates are valid configurations, none repeated or seen."""
    import numpy as np

    from ecopt.samplers._optimize import candidates

    around = np.array([MIXED.encode({"w": 8, "lr": 1e-2, "act": "tanh"})])
    U = candidates(MIXED, 128, around, seed=3)
    configs = [MIXED.decode(u) for u in U]
    assert len({tuple(sorted(c.items())) for c in configs}) == len(configs) > 64
    assert all(isinstance(c["w"], int) and 1 <= c["w"] <= 64 for c in configs)
    # half of them near the Pareto point: most of those keep its category
    assert sum(c["act"] == "tanh" for c in configs) > len(configs) / 2
    np.testing.assert_array_equal(U, candidates(MIXED, 128, around, seed=3))

    def g(t: ecopt.Trial) -> dict[str, float]:
        return {"f1": t["lr"] * t["w"], "f2": 1.0 / t["w"] + (t["act"] == "relu")}

    sampler = QLogNEHVISampler(n_init=4, num_restarts=2, raw_samples=32, maxiter=20,
                               proposal_share=0.25)
    study = ecopt.Study(MIXED, OBJS, sampler=sampler, seed=2, meter="wallclock")
    study.optimize(g, n_trials=8, show_progress=False)
    econ = [r for r in study.records if (r.proposal.get("economy") or {}).get("active")]
    assert econ and all(r.proposal["optimiser"] == "scored" for r in econ)
    keys = [tuple(sorted(r.params.items())) for r in study.records]
    assert len(set(keys)) == len(keys)


def test_economy_is_the_default_for_cheap_trials():
    """Issue 38 item 2: no option given, cheap trials get economy proposals after the first."""
    from ecopt.samplers.qnehvi import DEFAULT_PROPOSAL_SHARE

    sampler = QLogNEHVISampler(n_init=3, num_restarts=2, raw_samples=32, maxiter=30)
    assert sampler.proposal_share == DEFAULT_PROPOSAL_SHARE == 0.25
    study = ecopt.Study(SPACE, OBJS, sampler=sampler, seed=2, meter="wallclock")
    study.optimize(f, n_trials=5, show_progress=False)
    model = [r.proposal for r in study.records if r.proposed_by == "qlognehvi"]
    assert model[0]["economy"]["basis"] == "first" and model[1]["economy"]["active"]
    assert model[1]["economy"]["proposal_share"] == 0.25 and model[1]["optimiser"] == "scored"
    # the named sampler a Study builds by default is the same
    assert ecopt.Study(SPACE, OBJS, meter="wallclock").sampler.proposal_share == 0.25


def test_inside_optuna_proposals_stay_full():
    """Optuna meters no proposal, so EcoptSampler's inner sampler has no economy rule, and
    a share is refused (the rule would never measure a proposal)."""
    pytest.importorskip("optuna")
    from ecopt.integrations.optuna import EcoptSampler

    assert EcoptSampler(seed=0).inner.proposal_share is None
    with pytest.raises(ValueError, match="Optuna does not meter"):
        EcoptSampler(seed=0, proposal_share=0.5)


def test_the_first_infeasible_trial_beside_kept_hyperparameters_keeps_the_priors_note():
    """An economy proposal that keeps the objectives' hyperparameters and fits the
    feasibility GP for the first time says the priors were kept, and the next prior
    comparison stays where it was due."""
    sampler = QLogNEHVISampler(num_restarts=2, raw_samples=32)
    study = ecopt.Study(SPACE, OBJS, sampler=sampler, seed=0, meter="estimate")
    for i in range(8):
        t = study.ask()
        study.tell(t, MemoryError("CUDA out of memory") if i == 6 else
                   {"f1": t["x"] ** 2 + t["y"], "f2": (1 - t["x"]) ** 2 + t["y"]})
    last = study.records[7].proposal
    assert last["economy"]["hyperparameters"] == "kept"
    assert last.get("lengthscale_priors", {}).keys() == {"__feasible__"}
    assert last["economy"]["priors"] == "kept"
    assert last["gp_state"]["priors_chosen_at"] == \
        study.records[6].proposal["gp_state"]["priors_chosen_at"]


def test_a_share_near_zero_gives_the_longest_refit_interval():
    """A ratio over a share near 0 overflows to infinity: the longest re-fit interval, not
    a crash that turns every proposal into a Sobol fallback."""
    sampler = QLogNEHVISampler(n_init=3, num_restarts=2, raw_samples=32, maxiter=30,
                               proposal_share=1e-308)
    study = ecopt.Study(SPACE, OBJS, sampler=sampler, seed=2, meter="wallclock")
    study.optimize(f, n_trials=6, show_progress=False)
    assert not any("fallback" in r.proposal for r in study.records)
    model = [r.proposal["economy"] for r in study.records if r.proposed_by == "qlognehvi"]
    assert len(model) == 3 and all(e["active"] for e in model)
    assert model[-1]["settings"]["refit_every"] == ECONOMY_REFIT_EVERY[1]


def test_an_economy_batch_larger_than_its_fresh_candidates_repeats_nothing():
    """raw_samples=8 scored candidates, a batch of 12: more candidates are drawn, so no
    point of the batch repeats a trial or another point of the batch."""
    sampler = QLogNEHVISampler(num_restarts=2, raw_samples=8)
    study = ecopt.Study(SPACE, OBJS, sampler=sampler, seed=0, meter="estimate")
    for b in (5, 12):
        for t in study.ask(b):
            study.tell(t, {"f1": t["x"] ** 2 + t["y"], "f2": (1 - t["x"]) ** 2 + t["y"]})
    batch = study.records[5:]
    assert all(r.proposal["optimiser"] == "scored" and r.proposal["n_repeats"] == 0
               for r in batch)
    assert batch[0].proposal["n_candidates"] > 8
    keys = [tuple(sorted(r.params.items())) for r in study.records]
    assert len(set(keys)) == len(keys) == 17


def test_a_stopping_rule_evaluation_is_not_counted_as_the_proposals_cost():
    """With stop_when_converged, the convergence check's window is billed to the next
    proposal's search notes; the economy rule weighs the proposal without it."""
    from ecopt.samplers.qnehvi import _proposal_cost

    sampler = QLogNEHVISampler(n_init=3, num_restarts=2, raw_samples=32, maxiter=30)
    study = ecopt.Study(SPACE, OBJS, sampler=sampler, seed=0, meter="wallclock")
    study.optimize(f, n_trials=7, show_progress=False,
                   stop_when_converged=ecopt.StoppingRule(patience=100, min_trials=3))
    model = [r for r in study.records if r.proposed_by == "qlognehvi"]
    billed = [r for r in model if r.proposal["search"].get("convergence_check_s")]
    assert billed, [r.proposal["search"] for r in model]
    for r in billed:
        se = r.proposal["search"]
        assert _proposal_cost(se, "duration_s") == pytest.approx(
            se["duration_s"] - se["convergence_check_s"])
    # the prediction from the refits: FULL_OVER_ECONOMY x their own cost, check left out
    e = model[1].proposal["economy"]
    assert e["basis"] == "predicted" and e["unit"] == "s"
    own = _proposal_cost(model[0].proposal["search"], "duration_s")
    assert e["full_proposal"] == pytest.approx(FULL_OVER_ECONOMY * own, rel=1e-4)


def test_the_iteration_cap_shortens_warm_refits_only():
    """A fit from the default start runs to its tolerance even with ``fit_maxiter`` (the
    first economy proposal has nothing to warm-start from); a warm-started re-fit is capped."""
    import numpy as np
    import torch

    from ecopt.samplers._models import fit_outputs

    g = torch.Generator().manual_seed(0)
    X = torch.rand(12, 2, generator=g, dtype=torch.double)
    Y = (torch.sin(6 * X[:, :1]) + X[:, 1:] ** 2).reshape(-1, 1)

    def fit(maxiter, warm=None):
        return fit_outputs(X, Y, None, [], ["a"], warm=warm, cold_check=False,
                           warm_ftol=None, cold_ftol=None, lengthscale_prior="gamma",
                           fit_maxiter=maxiter).states["a"]

    def close(a, b) -> bool:
        return all(np.allclose(a[k], b[k], rtol=1e-2, atol=1e-2) for k in b)

    full = fit(None)
    assert fit(1) == full  # no warm start: the cap does not apply
    # Every raw hyperparameter moved by +1: one iteration from there stops short of the
    # optimum, an uncapped re-fit gets back to it.
    far = {"a": {k: [x + 1.0 for x in v] for k, v in full.items()}}
    assert not close(fit(1, warm=far), full)
    assert close(fit(None, warm=far), full)
