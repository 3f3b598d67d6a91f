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


def test_objective_measures_prefill_and_decode_apart(tmp_path):
    obj = GenerationObjective(arch=TINY, device="cpu", max_new_tokens=4, prompt_len=3,
                              min_window_s=0.0)
    study = _study(tmp_path)
    t = study.ask(params={"batch_size": 3})
    rec = study.tell(t, obj(t))
    assert rec.state.value == "complete", rec.error
    pre, dec = rec.phases["prefill"], rec.phases["decode"]
    m = rec.metrics
    # One round (min_window_s=0): 3 prompts prefilled, 3 x (4 - 1) tokens decoded, each
    # window repeated until it lasts the estimate meter's 10 ms.
    assert pre.samples == 3 * m["prefill_repeats"]
    assert dec.samples == 9 * m["decode_repeats"]
    assert m["generated_tokens"] == 12
    assert m["decode_tokens_per_joule"] == pytest.approx(dec.samples / dec.energy_j)
    assert m["prefill_j_per_prompt"] == pytest.approx(pre.energy_j / pre.samples)
    one_prefill_j = pre.energy_j / m["prefill_repeats"]
    one_decode_j = dec.energy_j / m["decode_repeats"]
    assert rec.values["tokens_per_joule"] == pytest.approx(12 / (one_prefill_j + one_decode_j))
    assert m["decode_window_s"] == pytest.approx(dec.duration_s, rel=0.5)
    assert m["decode_window_short"] == 0.0  # sized to the meter's least window
    assert not rec.unreliable  # no figure from a window too short for the meter
    assert not dec.measured  # the estimate meter says so
    assert rec.values["p95_latency_ms"] >= m["latency_per_token_ms"] > 0 and m["ttft_ms"] > 0
    assert m["peak_memory_gb"] == m["peak_host_rss_gb"] > 0
    assert {"load", "warmup", "prefill", "decode"} == set(rec.phases)
    assert rec.user_attrs["device"] == "cpu"
    study.close()


def test_presets_have_the_published_shapes():
    from ecopt.workloads.generation import (GEMMA3_PRESETS, GEMMA3_PUBLISHED_PARAMS,
                                            gemma3_preset)

    cfg = gemma3_config(gemma3_preset("1b"))
    assert (cfg.hidden_size, cfg.num_hidden_layers, cfg.num_attention_heads,
            cfg.num_key_value_heads, cfg.head_dim, cfg.intermediate_size, cfg.vocab_size) == \
        (1152, 26, 4, 1, 256, 6912, 262_144)
    assert cfg.sliding_window == 512 and cfg.query_pre_attn_scalar == 256
    assert cfg.layer_types.count("full_attention") == 4  # 5 sliding : 1 global
    four = gemma3_config(GEMMA3_PRESETS["4b"])
    assert (four.hidden_size, four.num_hidden_layers, four.num_attention_heads,
            four.num_key_value_heads, four.intermediate_size) == (2560, 34, 8, 4, 10_240)
    small = gemma3_config(GEMMA3_PRESETS["270m"])
    assert (small.hidden_size, small.num_hidden_layers, small.intermediate_size) == (640, 18, 2048)
    for name, published in GEMMA3_PUBLISHED_PARAMS.items():
        assert GEMMA3_PRESETS[name].n_params == pytest.approx(published, rel=0.01), name
    assert GEMMA3_PRESETS["1b"].n_params == 999_885_952  # exactly
    with pytest.raises(ValueError, match="preset must be one of"):
        gemma3_preset("2b")


@pytest.mark.parametrize("name", ["270m", "1b", "4b", "12b"])
def test_presets_build_the_counted_model_without_memory(name):
    """On torch's meta device: the shapes only, no 4B weights allocated."""
    from ecopt.workloads.generation import GEMMA3_PRESETS

    model = build_causal_lm(GEMMA3_PRESETS[name], device="meta")
    assert next(model.parameters()).device.type == "meta"
    assert count_parameters(model) == GEMMA3_PRESETS[name].n_params
    assert model.config.hidden_size == GEMMA3_PRESETS[name].hidden_size


def test_hand_decoding_matches_generate():
    import torch

    from ecopt.workloads.generation import greedy_tokens

    model = build_causal_lm(GemmaArch(vocab_size=64, hidden_size=32, intermediate_size=64,
                                      num_hidden_layers=2, num_attention_heads=1,
                                      num_key_value_heads=1, sliding_window=4), seed=2)
    ids = torch.randint(3, 64, (3, 5), generator=torch.Generator().manual_seed(0))
    with torch.inference_mode():
        ref = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids),
                             max_new_tokens=9, min_new_tokens=9, do_sample=False,
                             pad_token_id=0)[:, 5:]
    assert torch.equal(greedy_tokens(model, ids, 9), ref)  # past the sliding window of 4
    assert torch.equal(greedy_tokens(model, ids, 9, use_cache=False), ref)


def test_short_windows_are_flagged_and_prefill_repeated(tmp_path):
    import torch

    from ecopt.workloads.generation import measure_generation

    model = build_causal_lm(TINY)
    ids = torch.randint(3, 64, (2, 3))
    study = _study(tmp_path)
    t = study.ask(params={"batch_size": 2})
    m = measure_generation(model, ids, t, max_new_tokens=3, min_window_s=0.0,
                           meter_period_s=30.0, max_window_repeats=20)
    assert m.decode_window_short and m.prefill_window_short  # 300 s is beyond the cap here
    assert m.prefill_repeats == 20 and m.decode_repeats == 20
    assert m.prefill_prompts == 2 * 20 and t.phases["prefill"].samples == 40
    assert t.phases["decode"].samples == m.decode_tokens == 2 * 2 * 20
    assert m.metrics()["meter_update_period_s"] == 30.0
    t2 = study.ask(params={"batch_size": 2})
    m2 = measure_generation(model, ids, t2, max_new_tokens=1, min_window_s=0.0,
                            meter_period_s=1e-9)
    # A negligible period: the window still lasts the meter's least window (10 ms).
    assert not m2.prefill_window_short and m2.prefill_window_min_s >= 0.01
    assert not t2.phases["prefill"].short_window
    assert m2.decode_tokens == 0 and "decode" not in t2.phases and m2.generated_tokens == 2
    with pytest.raises(ValueError, match="batch, prompt_len"):
        measure_generation(model, ids[0], t2, max_new_tokens=2)
    study.close()


def test_finding_2_windows_are_sized_to_ten_meter_periods(tmp_path):
    """Issue 30 finding 2: windows used to be sized to one period (a tick off = 100%)."""
    import torch

    from ecopt.workloads.generation import measure_generation

    model = build_causal_lm(TINY)
    ids = torch.randint(3, 64, (2, 3))
    study = _study(tmp_path)
    t = study.ask(params={"batch_size": 2})
    m = measure_generation(model, ids, t, max_new_tokens=4, min_window_s=0.0,
                           meter_period_s=0.01)
    assert m.min_window_s == pytest.approx(0.1)
    # Timed on the warm-up, so a loaded machine may make a window a little short; most of it.
    assert m.prefill_window_min_s >= 0.05 and m.decode_window_min_s >= 0.05
    assert m.prefill_repeats > 1 and m.decode_repeats > 1
    assert t.phases["decode"].samples == 2 * 3 * m.decode_repeats == m.decode_tokens
    j = t.phases["prefill"].energy_j / m.prefill_repeats + t.phases["decode"].energy_j / \
        m.decode_repeats
    assert m.tokens_per_joule == pytest.approx(2 * 4 / j)  # one prefill + one decode's joules
    assert m.metrics()["decode_repeats"] == m.decode_repeats
    study.close()


def test_windows_follow_the_nvml_meters_measured_period(tmp_path, monkeypatch):
    """The period comes from the meter (measured at start-up), and the meter finds the windows long."""
    import sys

    import torch

    import ecopt
    from ecopt.meters.nvml import NVMLMeter
    from ecopt.workloads.generation import measure_generation
    from fake_pynvml import FakeGpu, make_fake_pynvml

    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setitem(sys.modules, "pynvml", make_fake_pynvml(
        [FakeGpu(live=True, counter_period_s=0.01, power_mw=200_000)]))
    meter = NVMLMeter(gpus=[0])
    study = ecopt.Study(ecopt.SearchSpace({"batch_size": ecopt.Int(1, 8)}),
                        [ecopt.Objective("tokens_per_joule", "max")], storage=tmp_path / "n",
                        sampler="random", meter=meter)
    t = study.ask(params={"batch_size": 2})
    m = measure_generation(build_causal_lm(TINY), torch.randint(3, 64, (2, 3)), t,
                           max_new_tokens=4, min_window_s=0.0)
    assert m.meter_update_period_s == pytest.approx(0.01, rel=0.3)
    assert m.prefill_repeats > 1 and m.decode_repeats > 1
    for name in ("prefill", "decode"):
        c = t.phases[name].measurement.components["gpu:0"]
        assert c.source == "nvml-energy-counter" and t.phases[name].duration_s >= 0.05
    study.close()


def test_meter_update_period(fake_nvml_gpus):
    from ecopt.meters import get_meter
    from ecopt.meters.auto import CompositeMeter
    from ecopt.meters.nvml import NVMLMeter
    from ecopt.workloads.generation import meter_update_period_s

    assert meter_update_period_s(get_meter("estimate")) is None
    nv = NVMLMeter(counter_period_s=0.1)
    assert meter_update_period_s(nv) == 0.1
    both = CompositeMeter([NVMLMeter(mode="sampling", sampling_period_s=0.25),
                           get_meter("estimate")])
    assert meter_update_period_s(both) == 0.25


def test_max_batch_for_memory_is_the_largest_that_fits():
    from ecopt.workloads.generation import GEMMA3_PRESETS, max_batch_for_memory

    a = GEMMA3_PRESETS["1b"]
    b = max_batch_for_memory(a, 141.0, 16, 32, "bfloat16")
    assert predict_memory_gb(a, b, 16, 32, "bfloat16") <= 141.0
    assert predict_memory_gb(a, b + 1, 16, 32, "bfloat16") > 141.0
    assert 1000 < b < 1_000_000
    assert max_batch_for_memory(a, 0.5, 16, 32, "bfloat16") == 0  # the weights alone are 2 GB


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
