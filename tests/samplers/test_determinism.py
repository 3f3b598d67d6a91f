"""Proposals are a pure function of seed and history, whatever the thread count."""

from __future__ import annotations

import pytest

import ecopt
from ecopt.samplers import QLogNEHVISampler


@pytest.mark.slow
def test_forty_trials_propose_the_same_with_one_or_two_torch_threads():
    """Before each proposal ran on one thread, the same study with torch on one thread
    and on two (e.g. a study directory or not, another process) proposed the same first
    ~20 trials and then diverged: rounding that depends on the thread count, fed back."""
    import torch
    from botorch.test_functions.multi_objective import DTLZ2

    fn = DTLZ2(dim=6, num_objectives=2, negate=True)
    space = ecopt.SearchSpace({f"x{i}": ecopt.Float(0.0, 1.0) for i in range(6)})
    objs = [ecopt.Objective(f"f{j}", "max", float(r)) for j, r in enumerate(fn.ref_point)]

    def f(t: ecopt.Trial) -> dict[str, float]:
        y = fn(torch.tensor([[t[f"x{i}"] for i in range(6)]], dtype=torch.double))[0]
        return {"f0": float(y[0]), "f1": float(y[1])}

    def run(threads: int) -> list[dict]:
        before = torch.get_num_threads()
        torch.set_num_threads(threads)
        try:
            s = ecopt.Study(space, objs, sampler=QLogNEHVISampler(n_init=14, num_restarts=4,
                                                                  raw_samples=64, mc_samples=32),
                            meter="wallclock", seed=2)
            s.optimize(f, n_trials=40)
            assert torch.get_num_threads() == threads  # the sampler restores it
        finally:
            torch.set_num_threads(before)
        assert [r.proposed_by for r in s.records].count("qlognehvi") == 26
        return [r.params for r in s.records]

    assert run(1) == run(2)
