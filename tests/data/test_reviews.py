"""The generated Spanish-review-like corpus: seeded, Spanish-looking, learnable, one token rule."""

from __future__ import annotations

import collections
import shutil

import numpy as np
import pytest

from ecopt.data.reviews import (
    MAX_WORDS,
    MIN_WORDS,
    PLACES,
    SPARK_TOKEN_PATTERN,
    TOKEN_PATTERN,
    make_review_block,
    tokenize,
)

ACCENTED = set("áéíóúñü")
# What a Spanish review throws at a tokeniser: accents, ñ, ¡¿, digits, commas, ellipses.
TRICKY = ["¡La atención fue EXCELENTE, 10/10!", "¿Baño limpio? No... pésimo; año 2024.",
          "Niños y señoras: cumpleaños en Cancún (Quintana Roo) -- ¡volveríamos!",
          "Pingüino, acción—dirección; a e o y u"]


@pytest.fixture(scope="module")
def block():
    return make_review_block(0, 2000, seed=3)


def test_same_block_and_seed_give_the_same_reviews(block):
    again = make_review_block(0, 2000, seed=3)
    assert again.texts == block.texts
    assert np.array_equal(again.labels, block.labels)
    assert np.array_equal(again.polarity, block.polarity) and again.places == block.places
    assert make_review_block(0, 50, seed=4).texts != block.texts[:50]
    assert make_review_block(1, 50, seed=3).texts != make_review_block(0, 50, seed=3).texts


def test_reviews_look_spanish_with_accents_and_punctuation(block):
    tokens = [t for text in block.texts for t in tokenize(text)]
    counts = collections.Counter(tokens)
    assert {"de", "la", "que", "y", "muy", "no"} <= set(counts)
    accented = [w for w in counts if ACCENTED & set(w)]
    assert len(accented) >= 40, accented
    assert {"atención", "pésimo", "habitación", "increíble", "baño"} <= set(counts)
    joined = " ".join(block.texts)
    for mark in ("¡", "!", "¿", "?", ",", "..."):
        assert mark in joined, mark
    assert any(text[0].isupper() or text[0] in "¡¿" for text in block.texts)
    # Zipf-like: a few words dominate, many are rare.
    freq = np.array(sorted(counts.values(), reverse=True), dtype=float)
    assert freq[0] > 20 * np.median(freq)
    assert freq[:10].sum() > 0.25 * freq.sum()  # ten words: over a quarter of the text
    assert freq[len(freq) // 2:].sum() < 0.15 * freq.sum()  # the rarer half: under 15 %


def test_lengths_are_long_tailed_within_bounds(block):
    draws = np.array([len(tokenize(t)) - t.lower().split().count("no") for t in block.texts])
    assert draws.min() >= MIN_WORDS
    # Up to MAX_WORDS draws; an opener ("nos hospedamos") and two-word draws ("un poco")
    # add a handful of tokens.
    assert draws.max() <= MAX_WORDS + 10
    median = np.median(draws)
    assert 35 <= median <= 60 and np.percentile(draws, 95) > 1.8 * median


def test_labels_polarity_and_places(block):
    assert set(np.unique(block.polarity)) == {1, 2, 3, 4, 5}
    assert set(block.places) == set(PLACES)
    assert block.labels.dtype == np.float32 and set(np.unique(block.labels)) == {0.0, 1.0}
    agree = (block.labels == (block.polarity >= 4)).mean()
    assert 0.9 < agree < 0.99  # the label is the polarity class, with some labels flipped
    assert 0.45 < block.labels.mean() < 0.75
    # Topic words follow the place type.
    hotel = [t for t, p in zip(block.texts, block.places) if p == "hotel"]
    food = [t for t, p in zip(block.texts, block.places) if p == "restaurante"]
    share = lambda texts, w: np.mean([w in tokenize(t) for t in texts])  # noqa: E731
    assert share(hotel, "habitación") > 3 * share(food, "habitación")
    assert share(food, "comida") > 3 * share(hotel, "comida")


def test_a_bag_of_words_learns_it_well_but_not_perfectly():
    from sklearn.feature_extraction.text import HashingVectorizer, TfidfTransformer
    from sklearn.linear_model import LogisticRegression

    train, test = make_review_block(0, 3000, seed=1), make_review_block(1, 1000, seed=1)
    hv = HashingVectorizer(n_features=2**14, alternate_sign=False, norm=None,
                           token_pattern=TOKEN_PATTERN)
    tfidf = TfidfTransformer().fit(hv.transform(train.texts))
    lr = LogisticRegression(max_iter=200).fit(tfidf.transform(hv.transform(train.texts)),
                                              train.labels)
    acc = float((lr.predict(tfidf.transform(hv.transform(test.texts))) == test.labels).mean())
    majority = max(test.labels.mean(), 1 - test.labels.mean())
    assert acc > majority + 0.15, (acc, majority)
    assert acc < 0.97, acc  # label noise and negations keep it short of perfect


def test_scikit_learn_tokenises_as_the_corpus_rule(block):
    from sklearn.feature_extraction.text import HashingVectorizer

    analyse = HashingVectorizer(token_pattern=TOKEN_PATTERN).build_analyzer()
    for text in [*TRICKY, *block.texts[:200]]:
        assert analyse(text) == tokenize(text), text
    assert tokenize(TRICKY[0]) == ["la", "atención", "fue", "excelente"]
    assert tokenize(TRICKY[2])[:3] == ["niños", "y", "señoras"]
    assert "pingüino" in tokenize(TRICKY[3]) and "a" in tokenize(TRICKY[3])
    # scikit-learn's default pattern would lose the one-letter words ("y", "a", "o").
    default = HashingVectorizer().build_analyzer()
    assert "y" not in default(TRICKY[2])


def test_no_reviews_is_an_error():
    with pytest.raises(ValueError, match="docs >= 1 must hold, got 0"):
        make_review_block(0, 0)


@pytest.mark.slow
def test_spark_regex_tokenizer_gives_the_same_tokens(block):
    """Spark's RegexTokenizer with SPARK_TOKEN_PATTERN splits exactly as the local rule;
    the plain Tokenizer does not (it keeps punctuation on words)."""
    pytest.importorskip("pyspark")
    if shutil.which("java") is None:
        pytest.skip("Spark needs Java")
    from pyspark.ml.feature import RegexTokenizer, Tokenizer
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master("local[1]").appName("ecopt-test-reviews")
             .config("spark.ui.enabled", "false").config("spark.driver.host", "127.0.0.1")
             .config("spark.driver.bindAddress", "127.0.0.1").getOrCreate())
    try:
        texts = [*TRICKY, *block.texts[:300]]
        df = spark.createDataFrame([(t,) for t in texts], ["text"])
        rt = RegexTokenizer(inputCol="text", outputCol="words", pattern=SPARK_TOKEN_PATTERN,
                            gaps=False, toLowercase=True)
        got = [r["words"] for r in rt.transform(df).select("words").collect()]
        assert got == [tokenize(t) for t in texts]
        plain = [r["words"] for r in Tokenizer(inputCol="text", outputCol="words")
                 .transform(df).select("words").collect()]
        assert plain[0] != tokenize(TRICKY[0])  # "excelente," and "10/10!" stay whole
    finally:
        spark.stop()
