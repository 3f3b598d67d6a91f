"""Unit tests of the experiment scripts' parts: payback, comparisons, correlations, fits."""

from __future__ import annotations

import math

import pytest


def test_payback_arithmetic(script):
    gb = script("gemma_batch")
    # 100 J of search; 0.5 J/token at batch 1, 0.1 J/token at the best: 0.4 J saved per token.
    assert gb.payback_tokens(100.0, 0.5, 0.1) == pytest.approx(250.0)
    # The paper's scale: 38x better than batch 1 at 2.67 tokens/J.
    best = 1 / 2.67
    base = 38 / 2.67
    assert gb.payback_tokens(4802 * (base - best), base, best) == pytest.approx(4802)
    assert gb.payback_tokens(10.0, 0.1, 0.1) == math.inf
    assert gb.payback_tokens(10.0, 0.1, 0.2) == math.inf
    with pytest.raises(ValueError, match="search_energy_j"):
        gb.payback_tokens(-1.0, 0.5, 0.1)
    with pytest.raises(ValueError, match="best_j_per_token"):
        gb.payback_tokens(1.0, 0.5, math.nan)


def test_evaluations_to_reach(script):
    gb = script("gemma_batch")
    assert gb.evaluations_to_reach([1.0, None, 5.0, 9.0], 5.0) == 3
    assert gb.evaluations_to_reach([1.0, None], 5.0) is None
    assert gb.evaluations_to_reach([], 1.0) is None


def test_compare_methods(script):
    nas = script("nas_cnn")
    pts = {"a": [(0.9, 10.0), (0.8, 50.0), (0.7, 40.0)], "b": [(0.85, 20.0), (0.6, 100.0)]}
    c = nas.compare_methods(pts, accuracy_ref=0.5)
    assert c["a"]["n_pareto"] == 2 and c["b"]["n_pareto"] == 2
    assert c["a"]["best_accuracy"] == 0.9 and c["a"]["matched_accuracy"] == 0.85
    assert c["a"]["samples_per_joule_at_matched"] == 10.0
    assert c["b"]["samples_per_joule_at_matched"] == 20.0
    assert c["a"]["reference_point"] == [0.5, 10.0]
    # a: (0.9-0.5)*(10-10) + (0.8-0.5)*(50-10) = 12 ; b: 0.35*10 + 0.1*80 = 11.5
    assert c["a"]["hypervolume"] == pytest.approx(12.0)
    assert c["b"]["hypervolume"] == pytest.approx(11.5)
    assert nas.best_at_accuracy(pts["a"], 0.95) is None
    empty = nas.compare_methods({"a": pts["a"], "b": []})
    assert empty["b"]["n_pareto"] == 0 and empty["b"]["hypervolume"] == 0.0


def test_cnn_space_is_searchable(script):
    nas = script("nas_cnn")
    space = nas.cnn_space(epochs=2)
    p = space.validate({**nas.HAND_TUNED, "epochs": 2})
    assert p["kernel_size"] == 3 and space.dim == 7


def test_correlations(script):
    mv = script("metric_validity")
    e = [1.0, 2.0, 4.0, 8.0]
    c = mv.correlations(e, {"same": [10, 20, 40, 80], "reversed": [8, 4, 2, 1]})
    assert c["same"]["spearman"] == pytest.approx(1.0)
    assert c["same"]["pearson"] == pytest.approx(1.0)
    assert c["reversed"]["spearman"] == pytest.approx(-1.0)
    with pytest.raises(ValueError, match="at least 3"):
        mv.correlations([1.0, 2.0], {"x": [1, 2]})
    with pytest.raises(ValueError, match="values for"):
        mv.correlations(e, {"x": [1, 2, 3]})


def test_loglinear_fit_recovers_a_power_law(script):
    es = script("energy_scaling")
    P = [1e4, 1e5, 1e6, 1e7]
    T = [1000 * (p / 1e4) ** -0.5 for p in P]
    f = es.loglinear_fit(P, T)
    assert f["slope"] == pytest.approx(-0.5) and f["r2"] == pytest.approx(1.0)
    assert f["intercept"] == pytest.approx(5.0)
    assert f["semilog_slope"] < 0 and f["semilog_r2"] < 1.0
    with pytest.raises(ValueError, match=">= 3"):
        es.loglinear_fit([1, 2], [1, 2])
    with pytest.raises(ValueError, match="> 0"):
        es.loglinear_fit([1, 2, 0], [1, 2, 3])


def test_parse_sizes_and_family(script):
    es = script("energy_scaling")
    assert es.parse_sizes("32x1, 64x2,128x4") == ((32, 1), (64, 2), (128, 4))
    with pytest.raises(ValueError, match="HIDDENxLAYERS"):
        es.parse_sizes("32x1,64,128x2")
    with pytest.raises(ValueError, match="at least 3"):
        es.parse_sizes("32x1,64x2")
    a = es.family_arch(256, 4)
    assert a.num_attention_heads == 8 and a.num_key_value_heads == 2
    assert a.intermediate_size == 1024


def test_spread_and_devices(script):
    co = script("consistency")
    table = {"d1": {"m1": 100.0, "m2": 10.0, "m3": 1.0},
             "d2": {"m1": 200.0, "m2": 20.0, "m3": 2.0}}
    s = co.spread(table)
    # log10: per device the values are 2,1,0 (+log10 2): std 1; per model std of (x, x+0.301).
    assert s["std_across_models_log10"] == pytest.approx(1.0)
    assert s["std_across_devices_log10"] == pytest.approx(math.log10(2) / math.sqrt(2))
    assert s["spearman"]["d1 vs d2"] == pytest.approx(1.0)
    one = co.spread({"cpu": {"m1": 1.0, "m2": 2.0}})
    assert math.isnan(one["std_across_devices"]) and math.isnan(one["ratio_log10"])
    assert co.parse_devices("auto", False) == [("cpu", "cpu", None)]
    assert [d[0] for d in co.parse_devices("auto", True)] == ["cpu", "cuda"]
    assert co.parse_devices("cpu:1t,cpu:2t", False)[1] == ("cpu:2t", "cpu", 2)
    with pytest.raises(ValueError, match="no CUDA"):
        co.parse_devices("cuda", False)
    with pytest.raises(ValueError, match="devices must be"):
        co.parse_devices("tpu", False)
    with pytest.raises(ValueError, match="distinct"):
        co.parse_devices("cpu,cpu", False)
