"""WebShop's product search: BM25 configured like the original pyserini/Lucene index, in pure Python.

The original indexes ``lower(title + description + first bullet point + option text)`` with pyserini's
default analyzer and BM25 (k1 0.9, b 0.4) and calls ``search(query, k=50)``. ``bm25s`` with
``method="lucene"`` gives the same scoring function; what makes it agree with pyserini on the top result
for 98.6% of 500 real WebShop queries (agent-envs.md) is the analysis, reproduced here:

- a StandardTokenizer-like split (letters/digits runs; ``.`` or ``'`` inside a word and ``,`` inside a
  number do not split, as in Unicode word segmentation), lower-cased;
- the English possessive ``'s`` removed (Lucene's EnglishPossessiveFilter);
- Lucene's 33 English stop words removed;
- the original Porter stemmer (PyStemmer's ``porter``, = Lucene's PorterStemFilter).

A query term repeated counts once per occurrence (Lucene ORs one clause per term); only documents with a
positive score are hits (Lucene returns no zero-score document); equal scores keep index order (Lucene
breaks ties by document id).
"""
from __future__ import annotations

import re
from collections import Counter
from typing import Any

import numpy as np

# Lucene's EnglishAnalyzer.ENGLISH_STOP_WORDS_SET (33 words)
LUCENE_STOP_WORDS = frozenset(["a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in", "into", "is", "it", "no", "not", "of", "on", "or", "such", "that", "the", "their", "then", "there", "these", "they", "this", "to", "was", "will", "with"])
_TOKEN = re.compile(r"\w+(?:(?:[.'\u2019]|(?<=\d),(?=\d))\w+)*")

SEARCH_RETURN_N = 50  # engine.py: search(keywords, k=50)


class Analyzer:
    """Text → index terms (see the module docstring)."""

    def __init__(self) -> None:
        import Stemmer  # pyright: ignore[reportMissingImports]  (the agents extra)

        self._stem = Stemmer.Stemmer("porter").stemWord

    def __call__(self, text: str) -> list[str]:
        out = []
        for tok in _TOKEN.findall(text.lower()):
            if tok.endswith(("'s", "\u2019s")):
                tok = tok[:-2]
            if tok and tok not in LUCENE_STOP_WORDS:
                out.append(self._stem(tok))
        return out


def document_text(product: dict[str, Any]) -> str:
    """What the original indexes for a product (search_engine/convert_product_file_format.py)."""
    option_text = ", and ".join(f"{name}: {', '.join(values)}" for name, values in product["options"].items())
    bullets = product["BulletPoints"]
    return " ".join([product["Title"], product["Description"], bullets[0] if bullets else "", option_text]).lower()


class ProductSearch:
    """BM25 (bm25s, Lucene variant) over the catalogue; ``search`` returns product indices, best first."""

    def __init__(self, texts: list[str], *, k1: float = 0.9, b: float = 0.4) -> None:
        import bm25s  # pyright: ignore[reportMissingImports]  (the agents extra)

        self.analyzer = Analyzer()
        corpus = [self.analyzer(t) for t in texts]
        self._n = len(texts)
        self._bm25 = bm25s.BM25(method="lucene", k1=k1, b=b)
        self._bm25.index(corpus, show_progress=False)
        self._vocab = self._bm25.vocab_dict
        self.params = {"library": "bm25s", "method": "lucene", "k1": k1, "b": b, "stop_words": "lucene-english-33",
                       "stemmer": "porter", "possessive_filter": True}

    def scores(self, query: str) -> np.ndarray:
        total = np.zeros(self._n, dtype=np.float64)
        for term, count in Counter(self.analyzer(query)).items():
            if term in self._vocab:
                total += count * np.asarray(self._bm25.get_scores([term]), dtype=np.float64)
        return total

    def search(self, query: str, k: int = SEARCH_RETURN_N) -> list[int]:
        scores = self.scores(query)
        order = sorted((i for i in range(self._n) if scores[i] > 0), key=lambda i: (-scores[i], i))
        return order[:k]
