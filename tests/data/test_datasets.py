"""Loaders on small hand-written files in the real formats, and generators of the same schema."""

from __future__ import annotations

import numpy as np
import pytest

from ecopt.data import (
    INSURANCE,
    MOVIELENS,
    ImageFolder,
    TablePipeline,
    make_image_folder,
    make_insurance,
    make_movielens,
    write_movielens,
)

# The first rows of Kaggle's insurance.csv, as that file writes them.
INSURANCE_CSV = """age,sex,bmi,children,smoker,region,charges
19,female,27.9,0,yes,southwest,16884.924
18,male,33.77,1,no,southeast,1725.5523
28,male,33,3,no,southeast,4449.462
33,male,22.705,0,no,northwest,21984.47061
32,male,28.88,0,no,northwest,3866.8552
"""

# MovieLens-1M ratings.dat lines (UserID::MovieID::Rating::Timestamp).
RATINGS_DAT = """1::1193::5::978300760
1::661::3::978302109
1::914::3::978301968
2::1357::5::978298709
2::3068::4::978299000
3::1193::4::978297039
"""


def test_insurance_loader_reads_the_real_format(tmp_path):
    p = tmp_path / "insurance.csv"
    p.write_text(INSURANCE_CSV)
    t = TablePipeline(p, INSURANCE, "polars").run()
    assert len(t) == 5
    np.testing.assert_allclose(t.target.numpy()[:2], [16884.924, 1725.5523], rtol=1e-6)
    assert t.stats["categories"]["region"] == ["northwest", "southeast", "southwest"]
    assert t.stats["means"]["age"] == pytest.approx(26.0)


def test_movielens_loader_reads_the_real_format(tmp_path):
    p = tmp_path / "ratings.dat"
    p.write_text(RATINGS_DAT)
    for backend in ("pandas", "polars"):
        t = TablePipeline(p, MOVIELENS, backend).run()
        assert t.cardinalities == [3, 5]  # 3 users, 5 distinct movies
        # MovieID 1193 is the third-smallest of (661, 914, 1193, 1357, 3068).
        assert t.codes[0].tolist() == [0, 2]
        assert t.target.tolist() == [5, 3, 3, 5, 4, 4]
        assert t.passthrough["Timestamp"][0] == 978300760


def test_insurance_generator_matches_the_schema():
    df = make_insurance(1000, seed=0)
    assert list(df.columns) == list(INSURANCE.columns) and len(df) == 1000
    assert df["age"].between(18, 64).all() and set(df["smoker"]) == {"no", "yes"}
    # The smoker premium is there for a model to find.
    assert df.groupby("smoker")["charges"].mean()["yes"] > 2 * df.groupby("smoker")["charges"].mean()["no"]
    holes = make_insurance(400, seed=0, missing_frac=0.2)
    assert holes["bmi"].isna().mean() > 0.1 and holes["charges"].notna().all()
    with pytest.raises(ValueError, match="missing_frac"):
        make_insurance(10, missing_frac=1.5)


def test_movielens_generator_keeps_the_ml1m_invariants(tmp_path):
    a = make_movielens(n_users=40, n_movies=60, n_ratings=1500, seed=2)
    assert a.shape == (1500, 4)
    users, counts = np.unique(a[:, 0], return_counts=True)
    assert len(users) == 40 and counts.min() >= 20
    assert len(np.unique(a[:, 0] * 10_000 + a[:, 1])) == 1500  # a user rates a movie once
    assert set(np.unique(a[:, 2])) <= {1, 2, 3, 4, 5}
    assert len(np.unique(a[:, 1])) <= 60
    p = write_movielens(tmp_path, n_users=40, n_movies=60, n_ratings=1500, seed=2)
    assert p.name == "ratings.dat"
    assert p.read_text().splitlines()[0].count("::") == 3
    with pytest.raises(ValueError, match="n_ratings >= n_users"):
        make_movielens(n_users=10, n_movies=50, n_ratings=100)


def test_image_folder_loader_and_its_errors(tmp_path):
    root = make_image_folder(tmp_path / "imgs", n_classes=2, images_per_class=3, size=12)
    ds = ImageFolder(root, size=8)
    assert ds.classes == ["class_0", "class_1"] and len(ds) == 6
    x, y = ds[4]
    assert tuple(x.shape) == (3, 8, 8) and y == 1 and -1.01 <= float(x.min()) <= float(x.max()) <= 1.01
    assert ds.stage_names == ("decode", "to_tensor")

    with pytest.raises(FileNotFoundError, match="nowhere"):
        ImageFolder(tmp_path / "nowhere")
    (root / "class_2").mkdir()
    with pytest.raises(ValueError, match=r"class_2.*holds no images"):
        ImageFolder(root)
    (root / "class_2" / "broken.png").write_bytes(b"not a png")
    ds = ImageFolder(root)
    with pytest.raises(ValueError, match=r"cannot decode image .*broken\.png"):
        ds[len(ds) - 1]
