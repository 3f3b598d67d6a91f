"""Proposals stay cheap next to cheap trials (issue 25 item 5): ``proposal_share``."""

from __future__ import annotations

import dataclasses

import pytest

import ecopt
from ecopt.samplers import QLogNEHVISampler
from ecopt.samplers.qnehvi import ECONOMY

SPACE = ecopt.SearchSpace({"x": ecopt.Float(0.0, 1.0), "y": ecopt.Float(0.0, 1.0)})
OBJS = [ecopt.Objective("f1", "min"), ecopt.Objective("f2", "min")]


def f(t: ecopt.Trial) -> dict[str, float]:
    return {"f1": t["x"], "f2": (1 - t["x"]) ** 2 + t["y"]}


@pytest.fixture(scope="module")
def cheap_study():
    sampler = QLogNEHVISampler(n_init=3, num_restarts=4, raw_samples=96, maxiter=60,
                               proposal_share=0.25)
    study = ecopt.Study(SPACE, OBJS, sampler=sampler, seed=0, meter="wallclock")
    study.optimize(f, n_trials=7, show_progress=False)
    return study, sampler


def test_cheap_trials_make_economy_proposals(cheap_study):
    study, _ = cheap_study
    model = [r for r in study.records if r.proposed_by == "qlognehvi"]
    assert len(model) == 4
    # The first model proposal has no full proposal to compare with yet.
    assert "economy" not in model[0].proposal
    for r in model[1:]:
        e = r.proposal["economy"]
        # microsecond trials against proposals of a tenth of a second or more (wallclock meter:
        # no energy, so seconds)
        assert e["active"] and e["unit"] == "s" and e["ratio"] > 0.25, e
        assert e["settings"] == {"num_restarts": 2, "raw_samples": 64, "maxiter": 50,
                                 "warm_start": True}
        assert e["full_proposal"] == pytest.approx(model[0].proposal["search"]["duration_s"],
                                                   rel=1e-3)


def test_costly_trials_leave_proposals_unchanged(cheap_study):
    study, sampler = cheap_study
    slow = [dataclasses.replace(r, duration_s=1000.0) for r in study.records]
    e = sampler.economy(slow)
    assert e is not None and not e["active"] and "settings" not in e
    got = sampler.propose(study.space, slow, [], 1)[0]
    assert got.info["economy"]["active"] is False
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
    assert e["settings"]["num_restarts"] == 1 and e["settings"]["raw_samples"] == 32
    assert e["settings"]["maxiter"] == ECONOMY["maxiter"]
