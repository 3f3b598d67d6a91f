"""ecopt.workloads.vision: COCO-sized images decoded by each dataframe backend's pipeline."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import ecopt
from ecopt.workloads.vision import (
    VISION_BACKENDS,
    VisionObjective,
    build_vision_model,
    decode_images,
    read_manifest,
    write_coco_like,
)


@pytest.fixture(scope="module")
def manifest(tmp_path_factory):
    return write_coco_like(tmp_path_factory.mktemp("coco"), n_images=9, n_classes=3, seed=1,
                           width=64, height=48)


def test_generated_set_is_coco_shaped_jpegs_with_a_manifest(tmp_path):
    from PIL import Image

    m = write_coco_like(tmp_path, n_images=4, n_classes=2)
    df = pd.read_csv(m)
    assert list(df.columns) == ["file_name", "width", "height", "category"]
    assert sorted(df["category"].unique()) == ["cat_0", "cat_1"]
    with Image.open(tmp_path / df["file_name"][0]) as im:
        assert im.format == "JPEG" and im.size == (640, 480)
    with pytest.raises(ValueError, match="n_images >= n_classes must hold, got n_images=1"):
        write_coco_like(tmp_path / "x", n_images=1, n_classes=2)


def test_every_backend_decodes_the_same_pixels_and_labels(manifest):
    rows = [7, 2, 4]  # decoded in manifest order
    out = {}
    for b in VISION_BACKENDS:
        x, y, classes = decode_images(read_manifest(manifest, b), b, manifest.parent, 24, rows)
        assert x.shape == (3, 24, 24, 3) and x.dtype == np.uint8 and x.flags.writeable
        out[b] = (x, y, classes)
    ref = out["pandas"]
    assert ref[2] == ["cat_0", "cat_1", "cat_2"] and ref[1].tolist() == [2, 1, 1]
    for b, (x, y, classes) in out.items():
        assert np.array_equal(x, ref[0]) and np.array_equal(y, ref[1]) and classes == ref[2], b
    # Pixels differ between images: the rows really are the ones asked for.
    assert not np.array_equal(ref[0][0], ref[0][1])


def test_bad_inputs_name_the_rule_and_value(manifest, tmp_path):
    with pytest.raises(ValueError, match=r"backend must be one of .*got 'arrow'"):
        read_manifest(manifest, "arrow")
    with pytest.raises(FileNotFoundError, match="image manifest not found"):
        read_manifest(tmp_path / "none.csv", "pandas")
    bad = tmp_path / "bad.csv"
    bad.write_text("path,category\na.jpg,x\n")
    for b in VISION_BACKENDS:
        with pytest.raises(ValueError, match="column 'file_name' is missing"):
            read_manifest(bad, b)
    broken = tmp_path / "broken.csv"
    broken.write_text("file_name,category\nnot_there.jpg,x\n")
    with pytest.raises(ValueError, match="cannot decode image"):
        decode_images(read_manifest(broken, "pandas"), "pandas", tmp_path, 16)
    with pytest.raises(ValueError, match="not a torchvision model"):
        build_vision_model("resnet_nineteen", 2)


def test_objective_measures_decoding_in_preprocess_and_inference(manifest):
    obj = VisionObjective(manifest=str(manifest), device="cpu",
                          defaults={"image_size": 16, "batch_size": 4, "epochs": 1})
    trial = ecopt.Trial(0, {"backend": "polars-lazy"}, ecopt.meters.get_meter("estimate"))
    out = obj(trial)
    assert set(out) == {"accuracy", "train_rows_per_joule"} and 0 <= out["accuracy"] <= 1
    assert set(trial.phases) == {"load", "preprocess", "train", "inference"}
    assert trial.phases["preprocess"].samples == 7 and trial.phases["inference"].samples == 2
    assert 0 < trial.metrics["data_cpu_share_inference"] < 1
    assert 0 < trial.metrics["data_share_train"] < 1
    assert trial.user_attrs["vision"]["model"] == "resnet18"
    assert trial.user_attrs["vision"]["pinned"] is False  # CPU: nothing to pin for


def test_backends_compared_in_one_repeat_train_the_same_model(manifest):
    """A ``seed`` param seeds the model (not the trial number), so the backends of one
    repeat of the dataframe study start from the same weights and the same batch order:
    the same pixels (test above) then give the same accuracy, whatever the trial number.
    Seeded by the trial number, dask's trials (2, 5, ...) trained other initialisations than
    pandas' (0, 3, ...), which is what made their accuracies differ (0.64 vs 0.80)."""
    import torch

    obj = VisionObjective(manifest=str(manifest), device="cpu",
                          defaults={"image_size": 16, "batch_size": 4, "epochs": 1})
    acc = {}
    for number, backend in ((0, "pandas"), (2, "dask"), (4, "polars")):
        trial = ecopt.Trial(number, {"backend": backend, "seed": 7},
                            ecopt.meters.get_meter("estimate"))
        acc[backend] = obj(trial)["accuracy"]
        assert torch.initial_seed() == 7  # the model's seed, not 0 + the trial number
    assert acc["pandas"] == acc["dask"] == acc["polars"]
    obj(ecopt.Trial(3, {"backend": "pandas"}, ecopt.meters.get_meter("estimate")))
    assert torch.initial_seed() == 3  # without the param: seed + trial number, as before


def test_model_seed_param_must_be_a_non_negative_integer():
    from ecopt.workloads.tabular import model_seed

    assert model_seed(ecopt.Trial(5, {}, ecopt.meters.get_meter("wallclock")), 10) == 15
    assert model_seed(ecopt.Trial(5, {"seed": 2}, ecopt.meters.get_meter("wallclock")), 10) == 2
    with pytest.raises(ValueError, match="non-negative integer, got -1"):
        model_seed(ecopt.Trial(5, {"seed": -1}, ecopt.meters.get_meter("wallclock")), 10)
