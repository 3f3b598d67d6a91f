"""Datasets: loaders for the real files and generators of the same schema for offline use.

* Insurance (Kaggle ``insurance.csv``: age, sex, bmi, children, smoker, region,
  charges; 1,338 rows in the original, 1,000 by default here).
* MovieLens-1M ``ratings.dat`` (``UserID::MovieID::Rating::Timestamp``; full size
  1,000,209 ratings by 6,040 users on 3,706 movies, every user with >= 20 ratings).
* An image folder (one subfolder per class, PNG/JPEG files inside).

Generated data are synthetic with the real schema and sizes; they are not the
real data and carry none of its statistics beyond what is documented here.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ecopt.data.pipeline import StagedDataset

__all__ = [
    "make_insurance",
    "write_insurance",
    "make_movielens",
    "write_movielens",
    "write_movielens_side_files",
    "find_real_data",
    "make_epsilon_block",
    "MOVIELENS_1M",
    "make_image_folder",
    "ImageFolder",
    "IMAGE_SUFFIXES",
]

#: Sizes of the real MovieLens-1M ``ratings.dat``.
MOVIELENS_1M = {"n_users": 6040, "n_movies": 3706, "n_ratings": 1_000_209, "max_movie_id": 3952}
REGIONS = ("northeast", "northwest", "southeast", "southwest")
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".gif")


def make_insurance(n_rows: int = 1000, seed: int = 0, missing_frac: float = 0.0) -> Any:
    """A pandas DataFrame with the Insurance schema.

    Charges follow the shape of the real table (a linear effect of age, bmi and
    children, a large smoker premium, log-normal noise) so a model has
    something to learn.

    Args:
        n_rows: Number of rows (``>= 1``).
        seed: Random seed.
        missing_frac: Fraction of cells of age, sex, bmi, children and region
            set missing (``0 <= missing_frac < 1``); smoker and charges stay whole.

    Raises:
        ValueError: for ``n_rows < 1`` or ``missing_frac`` outside ``[0, 1)``.
    """
    import pandas as pd

    if isinstance(n_rows, bool) or int(n_rows) != n_rows or n_rows < 1:
        raise ValueError(f"n_rows must be a positive integer, got {n_rows!r}")
    if not 0 <= missing_frac < 1:
        raise ValueError(f"missing_frac must lie in [0, 1), got {missing_frac!r}")
    rng = np.random.default_rng(seed)
    age = rng.integers(18, 65, n_rows)
    sex = rng.choice(["female", "male"], n_rows)
    bmi = np.round(rng.normal(30.7, 6.1, n_rows).clip(15.9, 53.1), 3)
    children = rng.choice(6, n_rows, p=[0.43, 0.24, 0.18, 0.12, 0.02, 0.01])
    smoker = rng.choice(["no", "yes"], n_rows, p=[0.8, 0.2])
    region = rng.choice(REGIONS, n_rows)
    reg_eff = {"northeast": 1000.0, "northwest": 500.0, "southeast": 0.0, "southwest": -300.0}
    charges = (-11000 + 256 * age + 340 * bmi + 475 * children + 23800 * (smoker == "yes")
               + np.array([reg_eff[r] for r in region]))
    charges = np.round(np.maximum(charges, 1121.87) * rng.lognormal(0.0, 0.15, n_rows), 5)
    df = pd.DataFrame({"age": age.astype("float64"), "sex": sex, "bmi": bmi,
                       "children": children.astype("float64"), "smoker": smoker,
                       "region": region, "charges": charges})
    if missing_frac > 0:
        df = df.astype({"sex": object, "region": object})
        for c in ("age", "sex", "bmi", "children", "region"):
            mask = rng.random(n_rows) < missing_frac
            df.loc[mask, c] = None
    if missing_frac == 0:
        df = df.astype({"age": "int64", "children": "int64"})
    return df


def write_insurance(path: str | Path, n_rows: int = 1000, seed: int = 0,
                    missing_frac: float = 0.0) -> Path:
    """Write a generated Insurance table as CSV, or Parquet for ``.parquet`` paths.

    Returns:
        The path written.
    """
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    df = make_insurance(n_rows, seed, missing_frac)
    if p.suffix.lower() in (".parquet", ".pq"):
        df.to_parquet(p, index=False)
    else:
        df.to_csv(p, index=False)
    return p


def make_movielens(n_users: int = 300, n_movies: int = 400, n_ratings: int = 20_000,
                   seed: int = 0, min_per_user: int = 20) -> np.ndarray:
    """Ratings with MovieLens-1M's shape: ``n_ratings x 4`` int64 (user, movie, rating, time).

    Every user rates at least ``min_per_user`` distinct movies (as in ML-1M) and,
    where the sizes allow, at most 62.5 % of them (ML-1M's busiest user: 2,314);
    movie popularity is Zipf-like; ratings 1-5 come from user and movie
    biases plus a low-rank taste term; each user's timestamps increase.
    ``make_movielens(**{k: MOVIELENS_1M[k] for k in ("n_users", "n_movies",
    "n_ratings")})`` gives the full size.

    Raises:
        ValueError: when the sizes are inconsistent (too few ratings for
            ``min_per_user``, or more per user than there are movies).
    """
    for name, v in (("n_users", n_users), ("n_movies", n_movies), ("n_ratings", n_ratings)):
        if isinstance(v, bool) or int(v) != v or v < 1:
            raise ValueError(f"{name} must be a positive integer, got {v!r}")
    if n_ratings < n_users * min_per_user:
        raise ValueError(f"n_ratings >= n_users * min_per_user must hold, got {n_ratings} < "
                         f"{n_users} * {min_per_user}")
    if n_ratings > n_users * n_movies:
        raise ValueError(f"n_ratings <= n_users * n_movies must hold, got {n_ratings}")
    rng = np.random.default_rng(seed)
    extra = rng.lognormal(0, 1.2, n_users)
    counts = min_per_user + np.floor(extra / extra.sum() * (n_ratings - n_users * min_per_user))
    counts = counts.astype(np.int64)
    counts[np.argsort(-extra)[: n_ratings - counts.sum()]] += 1
    # ML-1M's busiest user rated 2,314 of 3,706 movies (62 %); cap users there
    # unless the sizes asked for need denser users.
    cap = int(0.625 * n_movies)
    if cap < min_per_user or n_users * cap < n_ratings:
        cap = n_movies
    over = counts - cap
    while (over > 0).any():  # spill what is over the cap onto users with room
        spill = int(over[over > 0].sum())
        counts = np.minimum(counts, cap)
        room = np.flatnonzero(counts < cap)
        np.add.at(counts, rng.choice(room, spill), 1)
        over = counts - cap
    max_id = max(n_movies, round(n_movies * MOVIELENS_1M["max_movie_id"] / MOVIELENS_1M["n_movies"]))
    movie_ids = np.sort(rng.choice(np.arange(1, max_id + 1), n_movies, replace=False))
    pop = 1.0 / np.arange(1, n_movies + 1) ** 0.8
    pop = rng.permutation(pop)
    logpop = np.log(pop)
    k = 4
    u_f, m_f = rng.normal(0, 0.6, (n_users, k)), rng.normal(0, 0.6, (n_movies, k))
    u_b, m_b = rng.normal(0, 0.4, n_users), rng.normal(0, 0.5, n_movies)
    out = np.empty((int(counts.sum()), 4), dtype=np.int64)
    row = 0
    t0 = 956_703_932  # ML-1M's first timestamp (2000-04-25)
    for u in range(n_users):
        c = int(counts[u])
        # Gumbel top-k: c distinct movies, drawn by popularity, without a Python loop.
        movies = np.argpartition(-(logpop + rng.gumbel(size=n_movies)), c - 1)[:c]
        score = 3.6 + u_b[u] + m_b[movies] + m_f[movies] @ u_f[u] + rng.normal(0, 0.7, c)
        ratings = np.clip(np.rint(score), 1, 5)
        start = t0 + int(rng.integers(0, 80_000_000))
        times = start + np.sort(rng.integers(0, 3_000_000, c))
        out[row:row + c, 0] = u + 1
        out[row:row + c, 1] = movie_ids[movies]
        out[row:row + c, 2] = ratings
        out[row:row + c, 3] = times
        row += c
    return out


def write_movielens(path: str | Path, n_users: int = 300, n_movies: int = 400,
                    n_ratings: int = 20_000, seed: int = 0, full: bool = False) -> Path:
    """Write generated ratings in ``ratings.dat`` format (``UserID::MovieID::Rating::Timestamp``).

    Args:
        path: File to write (a directory gets ``ratings.dat`` inside).
        full: Use MovieLens-1M's full sizes (6,040 users, 3,706 movies,
            1,000,209 ratings), ignoring the size arguments.

    Returns:
        The file written.
    """
    p = Path(path)
    if p.is_dir():
        p = p / "ratings.dat"
    p.parent.mkdir(parents=True, exist_ok=True)
    if full:
        n_users, n_movies, n_ratings = (MOVIELENS_1M["n_users"], MOVIELENS_1M["n_movies"],
                                        MOVIELENS_1M["n_ratings"])
    arr = make_movielens(n_users, n_movies, n_ratings, seed)
    lines = "\n".join("::".join(map(str, r)) for r in arr.tolist())
    p.write_text(lines + "\n", encoding="ascii")
    return p


#: ML-1M's users.dat codes: age groups and the 21 occupations (0-20).
ML_AGES = (1, 18, 25, 35, 45, 50, 56)
ML_GENRES = ("Action", "Adventure", "Animation", "Children's", "Comedy", "Crime", "Documentary",
             "Drama", "Fantasy", "Film-Noir", "Horror", "Musical", "Mystery", "Romance",
             "Sci-Fi", "Thriller", "War", "Western")


def write_movielens_side_files(folder: str | Path, ratings: str | Path | None = None,
                               seed: int = 0) -> tuple[Path, Path]:
    """Write ``users.dat`` and ``movies.dat`` in ML-1M's formats for the ids in ``ratings``.

    ``users.dat``: ``UserID::Gender::Age::Occupation::Zip-code`` (Age one of
    ML-1M's groups, Occupation 0-20); ``movies.dat``: ``MovieID::Title::Genres``
    (titles like ``Title 12: Part 2 (1995)``, with a colon inside as real titles
    have; Genres ``|``-separated from ML-1M's 18). Generated, not real.

    Args:
        folder: Where to write (created).
        ratings: A ``ratings.dat`` whose user and movie ids the files cover
            (default: ``folder/ratings.dat``).
        seed: Random seed.

    Returns:
        ``(users_path, movies_path)``.
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    src = Path(ratings) if ratings is not None else folder / "ratings.dat"
    u_ids, m_ids = _ids_of(src)
    users, movies = np.unique(u_ids), np.unique(m_ids)
    rng = np.random.default_rng(seed)
    u_lines = [f"{u}::{'MF'[int(rng.integers(2))]}::{ML_AGES[int(rng.integers(len(ML_AGES)))]}::"
               f"{int(rng.integers(21))}::{int(rng.integers(10000, 99999)):05d}" for u in users]
    m_lines = []
    for m in movies:
        k = int(rng.integers(1, 4))
        genres = "|".join(sorted(rng.choice(ML_GENRES, k, replace=False)))
        part = f": Part {int(rng.integers(2, 4))}" if rng.random() < 0.1 else ""
        m_lines.append(f"{m}::Title {m}{part} ({int(rng.integers(1919, 2001))})::{genres}")
    up, mp = folder / "users.dat", folder / "movies.dat"
    up.write_text("\n".join(u_lines) + "\n", encoding="latin-1")
    mp.write_text("\n".join(m_lines) + "\n", encoding="latin-1")
    return up, mp


def _ids_of(ratings: Path) -> tuple[np.ndarray, np.ndarray]:
    import pandas as pd

    df = pd.read_csv(ratings, sep=":", header=None, usecols=[0, 2], names=["u", "m"],
                     dtype="int64")
    return df["u"].to_numpy(), df["m"].to_numpy()


def find_real_data(name: str, search: Sequence[str | Path] = ()) -> Path | None:
    """The real data file of ``name`` if one is present, else ``None``.

    Looks for ``insurance.csv`` (``name="insurance"``) or ``ml-1m/ratings.dat``
    (``name="movielens"``, with ``users.dat`` and ``movies.dat`` beside it when
    they exist) in ``search``, then ``$ECOPT_DATA_DIR``, ``./data`` and
    ``~/.ecopt/data``. Nothing is downloaded.

    Raises:
        ValueError: for an unknown name.
    """
    import os

    rel = {"insurance": ("insurance.csv",), "movielens": ("ml-1m/ratings.dat", "ratings.dat")}
    if name not in rel:
        raise ValueError(f"name must be one of {sorted(rel)}, got {name!r}")
    roots = [Path(s) for s in search]
    if os.environ.get("ECOPT_DATA_DIR"):
        roots.append(Path(os.environ["ECOPT_DATA_DIR"]))
    roots += [Path("data"), Path.home() / ".ecopt" / "data"]
    for root in roots:
        for r in rel[name]:
            if (root / r).is_file():
                return root / r
    return None


def make_epsilon_block(block: int, rows: int, features: int = 2000, seed: int = 0
                       ) -> tuple[np.ndarray, np.ndarray]:
    """One block of a dense binary-classification table shaped like PASCAL's Epsilon.

    Epsilon has 2,000 dense features per row, each row scaled to unit L2 norm,
    and balanced +-1 labels (400,000 training rows). Here the label is
    ``x . w + noise > 0`` for one fixed random ``w`` (a linear model reaches
    about 90 %, as on Epsilon); blocks are independent given ``(block, seed)``,
    so a cluster can generate its partitions where they are used.

    Args:
        block: Block index (its rows are seeded by ``(seed, block)``).
        rows: Rows in the block.
        features: Columns (2,000 as in Epsilon).
        seed: Data seed (``w`` depends on it only).

    Returns:
        ``(x, y)``: ``rows x features`` float32 and ``rows`` float32 labels in {0, 1}.

    Raises:
        ValueError: for ``rows < 1`` or ``features < 2``.
    """
    if rows < 1 or features < 2:
        raise ValueError(f"rows >= 1 and features >= 2 must hold, got rows={rows}, "
                         f"features={features}")
    w = np.random.default_rng([seed, 2**31 - 1]).standard_normal(features)
    rng = np.random.default_rng([seed, block])
    x = rng.standard_normal((rows, features)).astype(np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    score = x @ w.astype(np.float32)
    noise = rng.standard_normal(rows).astype(np.float32) * 0.3 * float(score.std() or 1.0)
    return x, (score + noise > 0).astype(np.float32)


def make_image_folder(root: str | Path, n_classes: int = 3, images_per_class: int = 20,
                      size: int = 32, seed: int = 0, image_format: str = "png") -> Path:
    """Write ``root/class_<k>/img_<i>.png`` (or ``.jpg``) images a small CNN can tell apart.

    Class ``k`` has a bright square in one of several positions on a noisy
    background with a class-specific tint. ``image_format="jpeg"`` writes
    quality-90 JPEGs (what photo datasets hold; decoding them costs CPU).

    Raises:
        ValueError: for fewer than 2 classes, no images, ``size < 8`` or an
            unknown ``image_format``.
    """
    if image_format not in ("png", "jpeg"):
        raise ValueError(f"image_format must be 'png' or 'jpeg', got {image_format!r}")
    from PIL import Image

    if n_classes < 2:
        raise ValueError(f"n_classes >= 2 must hold, got {n_classes}")
    if images_per_class < 1:
        raise ValueError(f"images_per_class >= 1 must hold, got {images_per_class}")
    if size < 8:
        raise ValueError(f"size >= 8 must hold, got {size}")
    root = Path(root)
    rng = np.random.default_rng(seed)
    tints = rng.uniform(40, 200, (n_classes, 3))
    q = size // 4
    for k in range(n_classes):
        d = root / f"class_{k}"
        d.mkdir(parents=True, exist_ok=True)
        for i in range(images_per_class):
            img = rng.normal(0, 30, (size, size, 3)) + tints[k]
            angle = 2 * np.pi * k / n_classes
            cy = int(size / 2 + np.sin(angle) * size / 4 + rng.integers(-1, 2))
            cx = int(size / 2 + np.cos(angle) * size / 4 + rng.integers(-1, 2))
            img[max(0, cy - q // 2):cy + q // 2, max(0, cx - q // 2):cx + q // 2] = 250
            im = Image.fromarray(img.clip(0, 255).astype(np.uint8))
            if image_format == "jpeg":
                im.save(d / f"img_{i:04d}.jpg", quality=90)
            else:
                im.save(d / f"img_{i:04d}.png")
    return root


class _Decode:
    """Open an image file, convert to RGB, resize (a picklable stage)."""

    def __init__(self, size: int) -> None:
        self.size = size

    def __call__(self, path: Any) -> Any:
        from PIL import Image, UnidentifiedImageError

        try:
            with Image.open(path) as f:
                im = f.convert("RGB")
                if im.size != (self.size, self.size):
                    im = im.resize((self.size, self.size))
                return np.asarray(im, dtype=np.uint8)
        except (UnidentifiedImageError, OSError) as exc:
            raise ValueError(f"cannot decode image {str(path)!r}: {exc}") from exc


def _to_tensor(arr: np.ndarray) -> Any:
    """``H x W x 3`` uint8 -> ``3 x H x W`` float32 in about ``[-1, 1]``."""
    import torch

    return torch.from_numpy(np.ascontiguousarray(arr.transpose(2, 0, 1))).float().div_(127.5).sub_(1.0)


class ImageFolder(StagedDataset):
    """Images in class subfolders (``root/<class>/<image>``), decoded per sample.

    Stages: ``decode`` (PIL open, RGB, resize to ``size``) and ``to_tensor``
    (``3 x size x size`` float32). Classes are the sorted subfolder names.

    Args:
        root: The folder holding one subfolder per class.
        size: Side of the square images the model sees, pixels.

    Raises:
        FileNotFoundError: when ``root`` does not exist.
        ValueError: when it holds no class subfolders, or a class folder holds no
            images (naming the folder). Undecodable files raise ``ValueError``
            naming the file when they are read.
    """

    def __init__(self, root: str | Path, size: int = 32) -> None:
        root = Path(root)
        if not root.exists():
            raise FileNotFoundError(f"image folder not found: {str(root)!r}")
        if not root.is_dir():
            raise ValueError(f"image folder {str(root)!r} is a file; pass the folder that holds "
                             "one subfolder per class")
        classes = sorted(d.name for d in root.iterdir() if d.is_dir() and not d.name.startswith("."))
        if not classes:
            raise ValueError(f"image folder {str(root)!r} has no class subfolders "
                             "(expected root/<class>/<image>.png)")
        paths: list[Path] = []
        labels: list[int] = []
        for k, c in enumerate(classes):
            files = sorted(f for f in (root / c).iterdir()
                           if f.is_file() and f.suffix.lower() in IMAGE_SUFFIXES)
            if not files:
                raise ValueError(f"class folder {str(root / c)!r} holds no images "
                                 f"(suffixes {list(IMAGE_SUFFIXES)})")
            paths += files
            labels += [k] * len(files)
        self.root = root
        self.classes = classes
        self.size = size
        super().__init__(paths, [("decode", _Decode(size)), ("to_tensor", _to_tensor)], labels)
