"""Lexical similarity between a task and a lesson: TF-IDF cosine over word tokens.

The rule, in full (so a reader can predict what retrieval will do):

1. Tokenise: lower-case, split on anything that is not a letter or digit, drop
   English stop words (scikit-learn's list) and one-character tokens, and
   reduce a trailing plural "s" ("documents" → "document"). Pure numbers
   are dropped: tasks of the same kind differ exactly in their numbers.
2. Weigh each token by smoothed inverse document frequency over the texts being
   compared (the query plus the candidates): idf(t) = ln((1 + n) / (1 + df(t))) + 1,
   the same formula as scikit-learn's `TfidfVectorizer(smooth_idf=True)`.
3. Score = cosine of the two TF-IDF vectors, in [0, 1]. 0 means no content
   word in common; 1 means the same words in the same proportions.

No embeddings and no network: the score is deterministic and explainable,
which is what the relevance threshold (`min_relevance` in the memory) needs.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence

from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

_WORD = re.compile(r"[a-z0-9]+")


def tokens(text: str) -> list[str]:
    """Content words of `text`, normalised as described in the module docstring."""
    out = []
    for word in _WORD.findall(text.lower()):
        if len(word) < 2 or word in ENGLISH_STOP_WORDS or word.isdigit():
            continue
        if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
            word = word[:-1]
        out.append(word)
    return out


def _vector(counts: Counter[str], idf: dict[str, float]) -> dict[str, float]:
    vec = {t: c * idf[t] for t, c in counts.items()}
    norm = math.sqrt(sum(v * v for v in vec.values()))
    return {t: v / norm for t, v in vec.items()} if norm else {}


def similarities(query: str, documents: Sequence[str]) -> list[float]:
    """TF-IDF cosine of `query` against each document, IDF taken over all of them."""
    bags = [Counter(tokens(query))] + [Counter(tokens(d)) for d in documents]
    n = len(bags)
    df: Counter[str] = Counter()
    for bag in bags:
        df.update(bag.keys())
    idf = {t: math.log((1 + n) / (1 + d)) + 1.0 for t, d in df.items()}
    q = _vector(bags[0], idf)
    scores = []
    for bag in bags[1:]:
        d = _vector(bag, idf)
        scores.append(sum(w * d.get(t, 0.0) for t, w in q.items()))
    return scores


def similarity(a: str, b: str) -> float:
    """TF-IDF cosine of two texts (IDF over just the two)."""
    return similarities(a, [b])[0]
