"""ecopt.workloads.cnn: builder, FLOP counts checked by hand, CIFAR-10 loader on real-format files."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

import ecopt
from ecopt.workloads.cnn import (CNNObjective, build_cnn, conv_output_size, count_flops,
                                 count_parameters, load_cifar10, load_digits_images)


def test_flops_match_a_hand_count():
    # 1x8x8 input, one 3x3 conv to 4 channels, padding 1, stride 1, no pooling:
    # conv: 8*8 outputs x 4 channels x (1*3*3) MACs = 2304 MACs; BatchNorm/ReLU/pool uncounted;
    # linear 4 -> 10: 40 MACs. 2 FLOPs per MAC -> 2 * (2304 + 40) = 4688.
    m = build_cnn(1, 10, 8, channels=4, depth=1, kernel_size=3, stride=1, pooling="none")
    assert count_flops(m, (1, 1, 8, 8)) == 4688
    # Stride 2: 4x4 outputs -> 4*4*4*9 = 576 MACs (+40) -> 1232 FLOPs; same parameters.
    m2 = build_cnn(1, 10, 8, channels=4, depth=1, kernel_size=3, stride=2, pooling="none")
    assert count_flops(m2, (1, 1, 8, 8)) == 1232
    assert count_parameters(m) == count_parameters(m2) == 4 * 9 + 2 * 4 + 4 * 10 + 10
    # FLOPs scale with the batch.
    assert count_flops(m, (3, 1, 8, 8)) == 3 * 4688


def test_builder_sizes_and_validation():
    import torch

    m = build_cnn(1, 10, 8, channels=8, depth=3, kernel_size=3, stride=2, pooling="max")
    # 8 -> conv s2 -> 4 -> pool -> 2 ; -> conv -> 1 (pool skipped) ; -> conv -> 1
    assert m.feature_sizes == [8, 2, 1, 1]
    assert m(torch.zeros(2, 1, 8, 8)).shape == (2, 10)
    assert conv_output_size(32, 5, 2, 2) == 16
    with pytest.raises(ValueError, match="odd"):
        build_cnn(1, 10, 8, kernel_size=4)
    with pytest.raises(ValueError, match="pooling"):
        build_cnn(1, 10, 8, pooling="median")
    with pytest.raises(ValueError, match="depth"):
        build_cnn(1, 10, 8, depth=0)


def test_digits_images_shape():
    Xtr, ytr, Xte, yte = load_digits_images()
    assert Xtr.shape[1:] == (1, 8, 8) and Xte.shape[1:] == (1, 8, 8)
    assert Xtr.dtype == np.float32 and len(Xtr) + len(Xte) == 1797


def _write_batch(path, images, labels):
    # torchvision's cifar-10-batches-py format: a pickled dict with bytes keys.
    with open(path, "wb") as f:
        pickle.dump({b"batch_label": b"synthetic", b"labels": list(labels),
                     b"data": images.reshape(len(images), 3072),
                     b"filenames": [f"img{i}.png".encode() for i in range(len(images))]}, f)


@pytest.fixture
def cifar_dir(tmp_path):
    rng = np.random.default_rng(0)
    root = tmp_path / "cifar-10-batches-py"
    root.mkdir()
    for i in (1, 2):
        imgs = rng.integers(0, 256, size=(20, 3, 32, 32), dtype=np.uint8)
        imgs[0, 0] = 255  # first image: red channel saturated
        imgs[0, 1:] = 0
        _write_batch(root / f"data_batch_{i}", imgs, [(j + i) % 10 for j in range(20)])
    _write_batch(root / "test_batch", rng.integers(0, 256, size=(10, 3, 32, 32), dtype=np.uint8),
                 list(range(10)))
    return tmp_path


def test_cifar10_loader_reads_the_python_batches(cifar_dir):
    Xtr, ytr, Xte, yte = load_cifar10(cifar_dir)  # finds the cifar-10-batches-py subfolder
    assert Xtr.shape == (40, 3, 32, 32) and Xte.shape == (10, 3, 32, 32)
    assert Xtr.dtype == np.float32 and ytr.dtype == np.int64
    assert list(ytr[:3]) == [1, 2, 3] and list(ytr[20:22]) == [2, 3]  # batches in order
    assert list(yte) == list(range(10))
    # Channel-major layout: the first 1024 bytes are the red plane.
    assert Xtr[0, 0].min() > Xtr[0, 1].max()
    # Normalised per channel with training statistics.
    assert np.allclose(Xtr.mean(axis=(0, 2, 3)), 0, atol=1e-4)
    Xs, ys, _, _ = load_cifar10(cifar_dir / "cifar-10-batches-py", n_train=5, n_test=3)
    assert len(Xs) == 5 and len(ys) == 5


def test_cifar10_loader_errors(tmp_path, cifar_dir):
    with pytest.raises(FileNotFoundError, match="data_batch_1"):
        load_cifar10(tmp_path / "nowhere")
    root = cifar_dir / "cifar-10-batches-py"
    with open(root / "test_batch", "wb") as f:
        pickle.dump({b"data": np.zeros((2, 100), np.uint8), b"labels": [0, 1]}, f)
    with pytest.raises(ValueError, match="3072"):
        load_cifar10(cifar_dir)
    with open(root / "test_batch", "wb") as f:
        pickle.dump([1, 2, 3], f)
    with pytest.raises(ValueError, match="not a CIFAR-10 python batch"):
        load_cifar10(cifar_dir)


def test_cnn_objective_in_a_study_on_cifar_format(cifar_dir, tmp_path):
    obj = CNNObjective(cifar10_dir=str(cifar_dir), epochs=1, inference_passes=1,
                       inference_batch_size=8)
    space = ecopt.SearchSpace({"channels": ecopt.Int(2, 4), "depth": ecopt.Int(1, 2)})
    study = ecopt.Study(space, [ecopt.Objective("accuracy", "max"),
                                ecopt.Objective("samples_per_joule", "max")],
                        storage=tmp_path / "s", sampler="random", meter="estimate")
    study.optimize(obj, n_trials=1, show_progress=False)
    r = study.records[0]
    assert r.state.value == "complete", r.error
    assert 0 <= r.values["accuracy"] <= 1 and r.values["samples_per_joule"] > 0
    assert r.metrics["flops"] > 0 and r.metrics["n_params"] > 0
    assert set(r.phases) == {"load", "train", "validate", "inference"}
    assert r.phases["inference"].samples == 10 * r.metrics["inference_calls"]
    assert not r.phases["inference"].short_window and r.unreliable == ()
    assert [p.step for p in r.intermediate] == [1]  # the learning curve, one epoch
    assert r.intermediate[0].values["accuracy"] == pytest.approx(r.values["accuracy"])
    study.close()
