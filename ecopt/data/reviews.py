"""A generated Spanish-review-like corpus: tourist reviews with a polarity and a place type.

Seed 002 classified RestMex reviews (Spanish-language reviews of Mexican
tourist places, polarity 1-5, type hotel / restaurant / attraction). That
corpus is not shipped and nothing is downloaded, so :func:`make_review_block`
writes documents of the same shape from a Spanish vocabulary held in this
module:

* every review has a place type (``hotel``, ``restaurante``, ``atracción``)
  and a true polarity 1-5, skewed positive as review sites are
  (:data:`POLARITY_P`);
* its words are function words, general travel words, topic words of its
  place type (and a few of the other types': hotels have restaurants),
  intensifiers, and sentiment words whose level centres on the polarity but
  spreads one or two levels (a 3-star review mixes praise and complaints);
  some sentiment words are negated (``no`` + a word of the opposite level,
  "no fue bueno"), which a bag of words reads the wrong way;
* each word list is drawn Zipf-like (probability ~ 1 / rank^1.1 in the
  order written here), so a few words dominate as in real text;
* lengths are long-tailed, 20-120 words (median about 45);
* sentences are capitalised and punctuated the Spanish way (``¡...!``,
  ``¿...?``, commas, ``...``), with accents and ``ñ``, and now and then a
  number ("2 noches"), which the tokenisers drop.

The label of the classification task is **binary polarity**: 1 for a
positive review (polarity 4-5), 0 otherwise (1-3), with
:data:`LABEL_NOISE` of the labels flipped (reviewers' stars disagree with
their words). The seed's task was the 5-class polarity; the binary task keeps
the experiment's accuracy and F1 comparable across engines, and
:class:`ReviewBlock` carries the 5-level polarity and the place type for
anyone who wants the seed's tasks. A bag-of-words TF-IDF logistic regression
reaches roughly 0.85-0.9 accuracy on it (the test suite checks it is clearly
above the majority class and below 1).

Tokenisation: both engines must see the same tokens. :data:`TOKEN_PATTERN`
(scikit-learn's ``token_pattern``) and :data:`SPARK_TOKEN_PATTERN` (Spark's
``RegexTokenizer(pattern=..., gaps=False)``) each match runs of letters,
accented ones included, after lower-casing; digits, punctuation and
``¡``/``¿`` separate tokens. :func:`tokenize` is the same rule in plain
Python. (Spark's plain ``Tokenizer`` splits on white space only and keeps
``"excelente!"`` whole; scikit-learn's default pattern drops one-letter words
such as ``y``, ``a``, ``o``.)

Example:
    >>> from ecopt.data.reviews import make_review_block, tokenize
    >>> block = make_review_block(0, docs=3, seed=0)
    >>> len(block.texts), block.labels.shape
    (3, (3,))
"""

from __future__ import annotations

import functools
import random
import re
from typing import NamedTuple

import numpy as np

__all__ = ["ReviewBlock", "make_review_block", "tokenize", "TOKEN_PATTERN",
           "SPARK_TOKEN_PATTERN", "PLACES", "POLARITY_P", "LABEL_NOISE", "MIN_WORDS",
           "MAX_WORDS"]

#: scikit-learn ``token_pattern``: a run of letters (``\w`` without digits and ``_``), so
#: accented letters and ``ñ`` stay inside words and one-letter words (``y``, ``a``) count.
TOKEN_PATTERN = r"[^\W\d_]+"
#: Spark ``RegexTokenizer(pattern=SPARK_TOKEN_PATTERN, gaps=False, toLowercase=True)``:
#: the same rule in Java's regex syntax (``\p{L}``: any letter).
SPARK_TOKEN_PATTERN = r"\p{L}+"
PLACES = ("hotel", "restaurante", "atracción")
#: Share of each place type among the generated reviews.
PLACE_P = (0.35, 0.35, 0.30)
#: Probability of polarity 1, 2, 3, 4, 5 (skewed positive, as on review sites).
POLARITY_P = (0.09, 0.11, 0.18, 0.26, 0.36)
#: Fraction of labels flipped after the text is written.
LABEL_NOISE = 0.05
MIN_WORDS, MAX_WORDS = 20, 120

_TOKEN_RE = re.compile(TOKEN_PATTERN)

# ---- vocabulary (most frequent first within each list) -------------------------------------

_FUNCTION = (
    "de la que el en y a los se del las un por con no una su para es al lo como más pero "
    "sus le ya o fue este ha sí porque esta son entre está cuando sin sobre también me "
    "hasta hay donde todo nos durante todos uno les ni otros ese eso había ante esto mí "
    "antes algunos qué unos yo otro otras otra él tanto esa estos mucho nada muchos cual "
    "poco ella estar estas algunas algo nosotros mi mis tú te ti tu tus ellas nuestro "
    "nuestra nuestros vosotros os fuimos estuvimos tenía tienen tiene aquí allí ahí luego "
    "después además aunque mientras según tras desde casi siempre solo cada"
).split()
_INTENSIFIERS = "muy bastante súper demasiado realmente totalmente algo un_poco tan".split()
_GENERAL = (
    "lugar experiencia precio servicio atención personal visita viaje familia día noche "
    "tiempo gente vez zona ciudad calidad pareja amigos fin semana vacaciones centro "
    "ubicación ambiente vista opción dinero costo entrada estancia recomendación niños "
    "trato mañana tarde hora minutos cosa parte pueblo playa calle mexicano méxico "
    "cancún oaxaca guanajuato mérida tulum puebla"
).split()
_TOPIC: dict[str, list[str]] = {
    "hotel": (
        "habitación hotel cama baño recepción desayuno alberca piscina limpieza huéspedes "
        "toallas regadera colchón almohadas aire acondicionado wifi estacionamiento "
        "recepcionista suite balcón elevador ruido reservación check lobby jacuzzi "
        "camarista sábanas amenidades spa gimnasio bufete"
    ).split(),
    "restaurante": (
        "comida mesero platillo sabor cocina menú postre mesa cuenta propina tacos mole "
        "cerveza bebidas carne pescado mariscos salsa tortillas café vino chef porciones "
        "cena comensales guacamole enchiladas pozole mezcal margarita orden antojitos"
    ).split(),
    "atracción": (
        "ruinas pirámide guía recorrido museo cenote boletos fila paisaje historia zona "
        "arqueológica templo iglesia catedral cascada parque tour lancha mirador esculturas "
        "exposición murales escalinata selva grutas artesanías mercado jardín capilla "
        "sendero"
    ).split(),
}
#: Sentiment words by level 1 (very negative) .. 5 (very positive).
_SENTIMENT: dict[int, list[str]] = {
    1: ("pésimo horrible terrible asqueroso sucio grosero estafa decepcionante nunca "
        "insoportable lamentable peor desagradable inaceptable robo abusivo cucarachas "
        "pésima horrenda").split(),
    2: ("malo caro lento frío regular descuidado incómodo deficiente ruidoso tardaron "
        "mediocre escaso desorganizado viejo mala insípido tardado").split(),
    3: ("normal aceptable sencillo común correcto suficiente básico promedio estándar "
        "razonable cumple simple adecuado justo").split(),
    4: ("bueno agradable rico limpio amable recomendable bonito cómodo atento tranquilo "
        "buena sabroso accesible bien amplio fresco").split(),
    5: ("excelente increíble maravilloso espectacular delicioso perfecto encantó "
        "inolvidable hermoso impecable fantástico exquisito mágico recomendadísimo "
        "extraordinario magnífico").split(),
}
_OPENERS = ("fuimos", "llegamos", "visitamos", "estuvimos", "comimos", "nos hospedamos",
            "conocimos", "regresamos")
# Probability of a word slot holding each kind of word.
_KINDS = ("function", "general", "topic", "other_topic", "intensifier", "sentiment")
_KIND_P = np.array([0.46, 0.14, 0.17, 0.03, 0.05, 0.15])
_LEVEL_SHIFT = np.array([-2, -1, 0, 1, 2])
_LEVEL_SHIFT_P = np.array([0.06, 0.17, 0.54, 0.17, 0.06])
_NEGATION_P = 0.12


@functools.lru_cache(maxsize=None)
def _zipf(n: int, a: float = 1.1) -> np.ndarray:
    p = 1.0 / np.arange(1, n + 1) ** a
    return p / p.sum()


def _as_vocab() -> dict[str | int, np.ndarray]:
    lists: dict[str | int, list[str]] = {"function": _FUNCTION, "general": _GENERAL,
                                         "intensifier": _INTENSIFIERS}
    for place, ws in _TOPIC.items():
        lists[place] = ws
    for level, ws in _SENTIMENT.items():
        lists[level] = ws
    # "un_poco" is one draw of two words.
    return {k: np.array([w.replace("_", " ") for w in v], dtype=object) for k, v in lists.items()}


_VOCAB = _as_vocab()


class ReviewBlock(NamedTuple):
    """One block of generated reviews.

    Attributes:
        texts: ``docs`` review strings.
        labels: ``(docs,)`` float32 in {0, 1}: 1 for a positive review (polarity 4-5),
            after :data:`LABEL_NOISE` of them were flipped.
        polarity: ``(docs,)`` int8 true polarity 1-5 (before label noise).
        places: ``docs`` place types, each one of :data:`PLACES`.
    """

    texts: list[str]
    labels: np.ndarray
    polarity: np.ndarray
    places: list[str]


def tokenize(text: str) -> list[str]:
    """The corpus's tokens: lower-cased runs of letters (:data:`TOKEN_PATTERN`).

    Example:
        >>> tokenize("¡La atención fue excelente, 10/10!")
        ['la', 'atención', 'fue', 'excelente']
    """
    return _TOKEN_RE.findall(text.lower())


def make_review_block(block: int, docs: int, seed: int = 0) -> ReviewBlock:
    """One block of the generated Spanish-review-like corpus.

    Blocks are independent given ``(block, seed)``, so a cluster can build each
    partition where it is used and get the same rows as a local run.

    Args:
        block: Block index (its reviews are seeded by ``(seed, block)``).
        docs: Reviews in the block (``>= 1``).
        seed: Data seed.

    Returns:
        A :class:`ReviewBlock`; ``block[0]`` are the texts and ``block[1]`` the binary labels.

    Raises:
        ValueError: for ``docs < 1``.
    """
    if docs < 1:
        raise ValueError(f"docs >= 1 must hold, got {docs}")
    rng = np.random.default_rng([seed, block, 11])
    place_idx = rng.choice(len(PLACES), docs, p=PLACE_P)
    polarity = rng.choice(np.arange(1, 6), docs, p=POLARITY_P).astype(np.int8)
    lengths = np.minimum(MIN_WORDS + np.round(rng.lognormal(np.log(24.0), 0.75, docs)),
                         MAX_WORDS).astype(int)
    words = _draw_words(rng, np.repeat(place_idx, lengths), np.repeat(polarity, lengths))
    # Scalar draws (sentence sizes, punctuation) from Python's generator: numpy's costs
    # about a microsecond per scalar call, 20 times more, and a block makes ~10^5 of them.
    py = random.Random(int(rng.integers(2**63)))
    ends = np.cumsum(lengths)
    texts = [_review(py, list(words[e - n:e]), int(pol))
             for e, n, pol in zip(ends, lengths, polarity)]
    labels = (polarity >= 4).astype(np.float32)
    flip = rng.random(docs) < LABEL_NOISE
    labels[flip] = 1.0 - labels[flip]
    return ReviewBlock(texts, labels, polarity, [PLACES[p] for p in place_idx])


def _draw_words(rng: np.random.Generator, place: np.ndarray, polarity: np.ndarray
                ) -> np.ndarray:
    """One word (or "no" + word) per slot; ``place``/``polarity``: the slots' review's."""
    n = len(place)
    kinds = rng.choice(len(_KINDS), n, p=_KIND_P)
    words = np.empty(n, dtype=object)
    for k, kind in enumerate(_KINDS):
        at = kinds == k
        if kind in ("function", "general", "intensifier"):
            words[at] = _draw(rng, _VOCAB[kind], int(at.sum()))
        elif kind in ("topic", "other_topic"):
            # Another type's words now and then: hotels have restaurants and tours.
            owner = place if kind == "topic" else (place + 1 + rng.integers(0, 2, n)) % 3
            for q, name in enumerate(PLACES):
                here = at & (owner == q)
                words[here] = _draw(rng, _VOCAB[name], int(here.sum()))
        else:
            levels = np.clip(polarity + rng.choice(_LEVEL_SHIFT, n, p=_LEVEL_SHIFT_P), 1, 5)
            negated = at & (rng.random(n) < _NEGATION_P)  # "no fue bueno" in a bad review
            levels[negated] = 6 - levels[negated]
            for level in range(1, 6):
                here = at & (levels == level)
                words[here] = _draw(rng, _VOCAB[level], int(here.sum()))
            words[negated] = np.array(["no " + w for w in words[negated]], dtype=object)
    return words


def _review(py: random.Random, words: list[str], polarity: int) -> str:
    """Sentences of 5-13 words, capitalised, with Spanish punctuation; maybe an opener
    ("fuimos", "nos hospedamos") and a number ("2 noches", which the tokenisers drop)."""
    if py.random() < 0.3:
        words.insert(0, py.choice(_OPENERS))
    if py.random() < 0.15:
        words.insert(py.randrange(len(words)), str(py.randint(1, 10)))
    excl_p = 0.35 if polarity in (1, 5) else 0.08
    out: list[str] = []
    i = 0
    while i < len(words):
        size = py.randint(5, 13)
        sent = words[i:i + size]
        i += size
        parts = [w + ("," if py.random() < 0.07 else "") for w in sent[:-1]] + [sent[-1]]
        body = " ".join(parts)
        body = body[:1].upper() + body[1:]
        r = py.random()
        if r < excl_p:
            out.append(f"¡{body}!" + ("!" if py.random() < 0.3 else ""))
        elif r < excl_p + 0.05:
            out.append(f"¿{body}?")
        elif r < excl_p + 0.12:
            out.append(body + "...")
        else:
            out.append(body + ".")
    return " ".join(out)


def _draw(rng: np.random.Generator, ws: np.ndarray, size: int) -> np.ndarray:
    """``size`` Zipf-distributed draws from ``ws`` (its first words most often)."""
    if size == 0:
        return np.empty(0, dtype=object)
    return ws[rng.choice(len(ws), size, p=_zipf(len(ws)))]


