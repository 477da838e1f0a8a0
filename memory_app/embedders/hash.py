"""A fast, dependency-free lexical embedder: feature hashing of words, word bigrams and CJK characters.

Not semantic: texts are close when they share words (after a light stemming) or Chinese/Japanese/Korean
characters. For tests and as a clearly-labelled fallback when no model is configured.

Text is NFKC-normalised and lower-cased. Features: English (and other alphabetic) word unigrams with a light
suffix stemmer and a small stop-word list, adjacent word bigrams, each CJK character and each pair of adjacent
CJK characters. Each feature is hashed with BLAKE2b (stable across processes and machines, unlike ``hash()``)
to an index and a sign; weights are sublinear term frequencies (1 + log tf); the vector is L2-normalised.
The last dimension is reserved: text with no features (empty, punctuation only) maps to the unit vector on it.
"""

from __future__ import annotations

import functools
import hashlib
import math
import re
import unicodedata
from collections import Counter
from collections.abc import Sequence

from .base import Embedder, EmbedderMisconfigured, check_texts

# Han (with extensions and compatibility ideographs), kana, Hangul.
_CJK = (
    "\u3040-\u30ff\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
    "\U00020000-\U0002a6df\U0002a700-\U0002ebef\U00030000-\U0003134f"
)
_CJK_RUN = re.compile(f"([{_CJK}]+)")
_WORD = re.compile(r"[^\W_]+")

_STOP_WORDS = frozenset(
    """a an and are as at be been but by do does did for from had has have he her him his i if in into is it its
    me my of on or our she so than that the their them then there these they this to was we were what when which
    who will with would you your""".split()
)
_DOUBLED = re.compile(r"([b-df-hj-km-np-rtv-z])\1$")  # a doubled consonant (not l, s, z: "call", "pass")


def stem(word: str) -> str:
    """A light English stemmer: plural -s/-es/-ies, -ing, -ed, then a trailing -e, so that "likes", "liked",
    "liking" and "like" meet, as do "museum"/"museums" and "rain"/"raining"/"rained". Other words unchanged."""
    if len(word) < 4 or not word.isascii() or not word.isalpha():
        return word
    if word.endswith("ies") and len(word) > 4:
        word = word[:-3] + "y"
    elif word.endswith("ied") and len(word) > 4:
        word = word[:-3] + "y"
    elif word.endswith("ing") and len(word) > 5:
        word = _undouble(word[:-3])
    elif word.endswith("ed") and len(word) > 4:
        word = _undouble(word[:-2])
    elif word.endswith(("sses", "xes", "zes", "ches", "shes")):
        word = word[:-2]
    elif word.endswith("s") and not word.endswith(("ss", "us", "is")):
        word = word[:-1]
    if word.endswith("e") and len(word) > 3:
        word = word[:-1]
    return word


def _undouble(word: str) -> str:
    return word[:-1] if _DOUBLED.search(word) else word


def features(text: str) -> list[str]:
    """The hashed features of a text, with repeats (a repeat raises the term frequency)."""
    text = unicodedata.normalize("NFKC", text).lower()
    out: list[str] = []
    for i, part in enumerate(_CJK_RUN.split(text)):
        if not part:
            continue
        if i % 2:  # a run of CJK characters
            out.extend("c:" + ch for ch in part)
            out.extend("cc:" + part[j : j + 2] for j in range(len(part) - 1))
            continue
        words = _WORD.findall(part)
        kept = [w for w in words if w not in _STOP_WORDS] or words
        stems = [stem(w) for w in kept]
        out.extend("w:" + s for s in stems)
        out.extend(f"ww:{a} {b}" for a, b in zip(stems, stems[1:], strict=False))
    return out


@functools.lru_cache(maxsize=65536)
def _slot(feature: str, buckets: int) -> tuple[int, float]:
    digest = int.from_bytes(hashlib.blake2b(feature.encode("utf-8"), digest_size=8).digest(), "big")
    return digest % buckets, (1.0 if digest >> 63 else -1.0)


class HashEmbedder(Embedder):
    DEFAULT_DIMENSIONS = 384
    VERSION = "hash-v1"
    provider = "hash"

    def __init__(self, dimensions: int = DEFAULT_DIMENSIONS):
        if int(dimensions) < 2:
            raise EmbedderMisconfigured(f"The hash embedder needs at least 2 dimensions, not {dimensions}")
        self.dimensions = int(dimensions)
        self.key = f"{self.VERSION}:{self.dimensions}"
        self.label = "hash (lexical fallback, not semantic)"

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return [self._vector(text) for text in check_texts(texts)]

    def _vector(self, text: str) -> list[float]:
        buckets = self.dimensions - 1  # the last dimension is reserved for text without features
        vector = [0.0] * self.dimensions
        for feature, count in Counter(features(text)).items():
            index, sign = _slot(feature, buckets)
            vector[index] += sign * (1.0 + math.log(count))
        norm = math.sqrt(math.fsum(x * x for x in vector))
        if norm == 0.0:  # no features (or, vanishingly rarely, features that cancel out)
            vector = [0.0] * self.dimensions
            vector[-1] = 1.0
            return vector
        return [x / norm for x in vector]
