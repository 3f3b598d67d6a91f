"""measure_generate: tokens/J of greedy generation through the generation workload's measurement."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
generation = pytest.importorskip("ecopt.workloads.generation")
if not hasattr(generation, "measure_generation"):  # arrives with the GPU workload work
    pytest.skip("ecopt.workloads.generation.measure_generation is not in this tree yet",
                allow_module_level=True)

import ecopt  # noqa: E402
from ecopt.integrations.transformers import measure_generate  # noqa: E402


def test_decode_tokens_per_joule_with_prefill_apart_and_provenance():
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(vocab_size=32, n_positions=32, n_embd=16, n_layer=1,
                                       n_head=2)).eval()
    ids = torch.randint(0, 32, (3, 5))
    study = ecopt.Study(ecopt.SearchSpace({"x": ecopt.Float(0, 1)}),
                        [ecopt.Objective("tokens_per_joule", "max")], sampler="random",
                        meter="estimate")
    trial = study.ask()
    m = measure_generate(model, ids, trial, max_new_tokens=4, min_window_s=0.0)
    assert m.batch_size == 3 and m.prompt_len == 5 and m.rounds >= 1
    # Tokens after the first, from decode steps; each window repeats its decode until it
    # lasts the estimate meter's 10 ms (issue 28: no window of a shipped workload is short).
    assert m.decode_tokens == 3 * 3 * m.rounds * m.decode_repeats
    assert not trial.phases["decode"].short_window and not trial.phases["prefill"].short_window
    assert m.decode_tokens_per_joule > 0 and m.prefill_j_per_prompt > 0
    ph = trial.phases
    assert {"prefill", "decode"} <= set(ph)
    assert ph["decode"].samples == m.decode_tokens
    assert not ph["decode"].measured and ph["decode"].measurement.meter == "estimate"
    assert m.metrics()["decode_tokens_per_joule"] == pytest.approx(m.decode_tokens_per_joule)
