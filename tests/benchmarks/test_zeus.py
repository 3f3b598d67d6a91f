"""The Zeus trace loader and its exact true front, on small traces in the real CSV format."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest

from benchmarks.zeus import DEFAULT_TARGETS, REF_FACTOR, ZeusTrace, power_files
from ecopt import pareto

from zeus_example import ZEUS_EXAMPLE  # tests/benchmarks/zeus_example.py (conftest puts it on the path)

EPOCHS = ZEUS_EXAMPLE.EPOCHS
LIMITS = ZEUS_EXAMPLE.LIMITS
_write_trace = ZEUS_EXAMPLE.write


def test_loader_joins_traces_and_samples_reaching_runs(tmp_path: Path) -> None:
    d = _write_trace(tmp_path / "tr")
    tr = ZeusTrace.load(d)  # the only power file is picked
    assert tr.gpu == "a40" and tr.target_metric == DEFAULT_TARGETS[("cifar100", "shufflenetv2")]
    assert tr.dims == ["batch_size", "power_limit"]
    assert len(tr.configs) == len(EPOCHS) * len(LIMITS)
    row = tr.configs[(tr.configs.batch_size == 32) & (tr.configs.power_limit == 100)].iloc[0]
    assert row["epochs"] == (10.0, 12.0) and row["n_runs"] == 3  # the NaN run is left out
    # Expected values are exact: mean epochs x time per epoch (x power for energy).
    e, t = tr.true_values({"batch_size": 32, "power_limit": 100})
    assert t == pytest.approx(11.0 * 30.0 * 1.5)
    assert e == pytest.approx(11.0 * 30.0 * 1.5 * 80.0)
    rng = np.random.default_rng(0)
    seen = {tuple(tr.sample({"batch_size": 32, "power_limit": 100}, rng)) for _ in range(50)}
    assert seen == {(10 * 45.0 * 80.0, 10 * 45.0), (12 * 45.0 * 80.0, 12 * 45.0)}
    space = tr.space()
    assert space["batch_size"].choices == (32, 64, 128) and space["batch_size"].ordered
    assert list(space["power_limit"].values) == list(LIMITS)
    with pytest.raises(ValueError, match="not in the Zeus trace"):
        tr.true_values({"batch_size": 16, "power_limit": 100})


def test_true_front_and_max_hv_match_brute_force(tmp_path: Path) -> None:
    tr = ZeusTrace.load(_write_trace(tmp_path / "tr"))
    Y = {(bs, pl): tuple(tr.true_values({"batch_size": bs, "power_limit": pl}))
         for bs, pl in itertools.product(EPOCHS, LIMITS)}
    brute = {k for k, y in Y.items()
             if not any(all(o <= v for o, v in zip(z, y)) and z != y for z in Y.values())}
    front = tr.true_front()
    assert {(int(r.batch_size), int(r.power_limit)) for r in front.itertuples()} == brute
    assert list(front["energy_j"]) == sorted(front["energy_j"])
    F = np.array([Y[k] for k in brute])
    ref = REF_FACTOR * F.max(axis=0)
    np.testing.assert_allclose(tr.ref_point(), ref)
    # Brute-force 2-D hypervolume: sweep the front sorted by energy.
    G = F[np.argsort(F[:, 0])] / ref
    hv = sum(((G[i + 1, 0] if i + 1 < len(G) else 1.0) - G[i, 0]) * (1.0 - G[i, 1])
             for i in range(len(G)))
    assert tr.max_hv() == pytest.approx(hv, rel=1e-12)
    prob = tr.problem()
    assert prob.max_hv == pytest.approx(hv)
    assert prob.hypervolume(F) == pytest.approx(hv)  # the true front scores max HV
    assert prob.log_gap(prob.hypervolume(F)) == pytest.approx(np.log10(1e-9 * hv))


def test_loader_searches_optimizer_when_both_traces_vary_it(tmp_path: Path) -> None:
    d = _write_trace(tmp_path / "tr", gpu="v100", optimizers=("adadelta", "adam"))
    _write_trace(tmp_path / "tr", gpu="a100", optimizers=("adadelta", "adam"), slow=0.5)
    assert [f.name for f in power_files(d)] == ["summary_power_a100.csv",
                                                "summary_power_v100.csv"]
    v100 = ZeusTrace.load(d)  # two power files: v100 is the default
    a100 = ZeusTrace.load(d, gpu="a100")
    assert v100.gpu == "v100" and a100.gpu == "a100"
    assert v100.dims == ["batch_size", "power_limit", "optimizer"]
    assert set(v100.space()["optimizer"].choices) == {"adadelta", "adam"}
    p = {"batch_size": 64, "power_limit": 200, "optimizer": "adam"}
    np.testing.assert_allclose(a100.true_values(p), 0.5 * v100.true_values(p))


def test_loader_rejects_bad_input(tmp_path: Path) -> None:
    d = _write_trace(tmp_path / "tr")
    with pytest.raises(FileNotFoundError, match="does not exist"):
        ZeusTrace.load(tmp_path / "nowhere", gpu="v100")
    with pytest.raises(ValueError, match="not a target"):
        ZeusTrace.load(d, target_metric=0.99)
    with pytest.raises(ValueError, match="not in both trace files"):
        ZeusTrace.load(d, dataset="squad", network="bert_base_uncased")
    (d / "summary_power_bad.csv").write_text("dataset,network,batch_size\ncifar100,x,1\n")
    with pytest.raises(ValueError, match="lacks column"):
        ZeusTrace.load(d, gpu="bad")


def test_real_traces_load_when_present() -> None:
    from benchmarks.problems import DEFAULT_ZEUS_DIR

    if not (DEFAULT_ZEUS_DIR / "summary_train.csv").is_file():
        pytest.skip("the shared Zeus traces are not next to this checkout")
    tr = ZeusTrace.load(DEFAULT_ZEUS_DIR)
    assert tr.gpu == "v100" and len(tr.configs) == 70
    front = tr.true_front()
    Y = tr.expected()
    assert pareto.non_dominated(Y, ["min", "min"]).sum() == len(front)
