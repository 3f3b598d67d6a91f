"""ecopt.workloads.generation on a tiny real Gemma-3 model (random weights, CPU)."""

from __future__ import annotations

import pytest

import ecopt
from ecopt.workloads.generation import (GemmaArch, GenerationObjective, build_causal_lm,
                                        count_parameters, gemma3_config, predict_memory_gb)

TINY = GemmaArch(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                 num_attention_heads=1, num_key_value_heads=1)


def _study(tmp_path, space=None, name="s"):
    space = space or ecopt.SearchSpace({"batch_size": ecopt.Int(1, 64, log=True)})
    return ecopt.Study(space, [ecopt.Objective("tokens_per_joule", "max"),
                               ecopt.Objective("p95_latency_ms", "min")],
                       storage=tmp_path / name, sampler="random", meter="estimate")


def test_arch_validation_and_config():
    with pytest.raises(ValueError, match="multiple of num_attention_heads"):
        GemmaArch(hidden_size=30, num_attention_heads=4)
    with pytest.raises(ValueError, match="num_key_value_heads"):
        GemmaArch(hidden_size=64, num_attention_heads=2, num_key_value_heads=3)
    with pytest.raises(ValueError, match="vocab_size"):
        GemmaArch(vocab_size=0)
    cfg = gemma3_config(TINY)
    assert cfg.model_type == "gemma3_text" and cfg.hidden_size == 32 and cfg.head_dim == 32
    a = TINY.with_params({"hidden_size": 64, "batch_size": 8})
    assert a.hidden_size == 64 and a.vocab_size == 64 and a.resolved_head_dim == 64


def test_predicted_memory_by_hand():
    a = GemmaArch(vocab_size=10, hidden_size=4, intermediate_size=8, num_hidden_layers=1,
                  num_attention_heads=1, num_key_value_heads=1)
    # weights 100 params * 4 B; kv 2*1*1*4*(2+3)*2*4 = 320 B; prefill 2*2*(16+24)*4 = 640 B;
    # logits 2*2*10*4 = 160 B.
    got = predict_memory_gb(a, batch_size=2, prompt_len=2, max_new_tokens=3, n_params=100)
    assert got == pytest.approx((400 + 320 + 640 + 160) / 1e9)
    assert predict_memory_gb(a, 4, 2, 3, "bfloat16", 100) < predict_memory_gb(a, 4, 2, 3,
                                                                              "float32", 100)
    with pytest.raises(ValueError, match="batch_size"):
        predict_memory_gb(a, 0, 2, 3)
    with pytest.raises(ValueError, match="dtype"):
        predict_memory_gb(a, 1, 2, 3, "int8")


def test_predicted_weights_match_the_real_model():
    model = build_causal_lm(TINY)
    n = count_parameters(model)
    pred_no_kv = predict_memory_gb(TINY, 1, 1, 1) - predict_memory_gb(TINY, 1, 1, 1, n_params=0)
    assert pred_no_kv == pytest.approx(n * 4 / 1e9, rel=0.05)


def test_objective_measures_generation(tmp_path):
    obj = GenerationObjective(arch=TINY, device="cpu", max_new_tokens=4, prompt_len=3,
                              min_window_s=0.0)
    study = _study(tmp_path)
    t = study.ask(params={"batch_size": 3})
    rec = study.tell(t, obj(t))
    assert rec.state.value == "complete", rec.error
    gen = rec.phases["generate"]
    assert gen.samples == 12 and gen.samples == rec.metrics["generated_tokens"]
    assert rec.values["tokens_per_joule"] == pytest.approx(12 / gen.energy_j)
    assert not gen.measured  # the estimate meter says so
    assert rec.values["p95_latency_ms"] >= 0 and rec.metrics["tokens_per_s"] > 0
    assert rec.metrics["latency_per_token_ms"] > 0 and rec.metrics["peak_memory_gb"] > 0
    assert "warmup" in rec.phases and "load" in rec.phases
    study.close()


def test_memory_ceiling_makes_trials_infeasible(tmp_path):
    obj = GenerationObjective(arch=TINY, device="cpu", max_new_tokens=4, prompt_len=3,
                              min_window_s=0.0, max_memory_gb=predict_memory_gb(
                                  TINY, 8, 3, 4, n_params=count_parameters(build_causal_lm(TINY))))
    study = _study(tmp_path)
    ok = study.ask(params={"batch_size": 8})
    assert study.tell(ok, obj(ok)).state.value == "complete"
    big = study.ask(params={"batch_size": 64})
    try:
        obj(big)
    except ecopt.Infeasible as exc:
        rec = study.tell(big, exc)
    else:  # pragma: no cover
        pytest.fail("batch 64 should exceed the emulated ceiling")
    assert rec.state.value == "infeasible" and "emulated memory ceiling" in rec.error.message
    study.close()


def test_returns_and_searched_dtype(tmp_path):
    with pytest.raises(ValueError, match="returns"):
        GenerationObjective(returns=("accuracy",))
    obj = GenerationObjective(arch=TINY, device="cpu", max_new_tokens=2, prompt_len=2,
                              min_window_s=0.0, returns=("tokens_per_joule", "tokens_per_s"))
    space = ecopt.SearchSpace({"batch_size": ecopt.Int(1, 4),
                               "dtype": ecopt.Categorical(["float32", "bfloat16", "float16"])})
    study = ecopt.Study(space, [ecopt.Objective("tokens_per_joule", "max"),
                                ecopt.Objective("tokens_per_s", "max")],
                        storage=tmp_path / "d", sampler="random", meter="estimate")
    t = study.ask(params={"batch_size": 2, "dtype": "bfloat16"})
    r = study.tell(t, obj(t))
    assert r.state.value == "complete" and "p95_latency_ms" in r.metrics
    t = study.ask(params={"batch_size": 2, "dtype": "float16"})
    with pytest.raises(ecopt.Infeasible, match="float16"):
        obj(t)
    study.close()


def test_local_checkpoint_loads_without_download(tmp_path):
    model = build_causal_lm(TINY, seed=3)
    model.save_pretrained(tmp_path / "ckpt")
    again = build_causal_lm(model_path=str(tmp_path / "ckpt"))
    assert count_parameters(again) == count_parameters(model)
    with pytest.raises(ValueError, match="local directory"):
        build_causal_lm(model_path=str(tmp_path / "missing"))


def test_objective_on_a_local_checkpoint(tmp_path):
    from ecopt.workloads.generation import arch_from_config

    model = build_causal_lm(TINY, seed=1)
    model.save_pretrained(tmp_path / "ckpt")
    a = arch_from_config(model.config)
    assert (a.hidden_size, a.num_hidden_layers, a.vocab_size) == (32, 1, 64)
    obj = GenerationObjective(model_path=str(tmp_path / "ckpt"), device="cpu",
                              max_new_tokens=2, prompt_len=2, min_window_s=0.0,
                              max_memory_gb=predict_memory_gb(a, 4, 2, 2,
                                                              n_params=count_parameters(model)))
    study = _study(tmp_path)
    t = study.ask(params={"batch_size": 4})
    assert study.tell(t, obj(t)).state.value == "complete"
    t = study.ask(params={"batch_size": 5})
    with pytest.raises(ecopt.Infeasible, match="emulated memory ceiling"):
        obj(t)
    study.close()
