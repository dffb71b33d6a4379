"""E_rag's evidence source, pluggable and recorded: a local BM25 index (bm25s) over a configured corpus, a
search tool the benchmark (or a web-search setup) offers, or closed-book (the model's own recall, labelled).

Never the benchmark's gold facts or decomposition: a corpus inside a benchmark's own dataset folder is refused
(StrategyQA's annotated facts/paragraphs are its gold evidence).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentic_repro.harness.hashing import sha256_file
from agentic_repro.harness.context import ProblemContext

FORBIDDEN_PARTS = ("strategyqa",)   # dataset folders whose files carry gold evidence


@dataclass
class Passages:
    source: str                  # closed_book | bm25:<corpus sha> | tool:<name>
    items: list[dict[str, Any]]  # [{"id", "title", "text", "score"}]

    def to_dict(self) -> dict[str, Any]:
        return {"source": self.source, "items": [{**i, "text": i["text"][:500]} for i in self.items]}


class ClosedBook:
    label = "closed_book"

    def describe(self) -> dict[str, Any]:
        return {"kind": "closed_book", "note": "no retrieval: E_rag answers from the model's own recall"}

    async def retrieve(self, ctx: ProblemContext, query: str, k: int) -> Passages:
        return Passages("closed_book", [])


class Bm25Index:
    """BM25 (bm25s, English stop words, PyStemmer when installed) over a .jsonl or .txt corpus."""

    def __init__(self, corpus: str) -> None:
        p = Path(corpus).expanduser().resolve()
        if not p.is_file():
            raise FileNotFoundError(f"DynaGraph evidence corpus {p} does not exist")
        if any(part.lower() in FORBIDDEN_PARTS for part in p.parts):
            raise ValueError(f"DynaGraph evidence corpus {p} lies in a benchmark's dataset folder "
                             "(its annotated facts are gold evidence): give another corpus")
        self.path = p
        self.sha256 = sha256_file(p)
        self.docs = self._read(p)
        if not self.docs:
            raise ValueError(f"DynaGraph evidence corpus {p} has no passages")
        try:
            import bm25s  # pyright: ignore[reportMissingImports]  (the agents extra)
        except ImportError as exc:
            raise RuntimeError("DynaGraph evidence=bm25 needs bm25s: pip install -e '.[agents]'") from exc
        self._bm25s = bm25s
        self.stemmer = self._stemmer()
        tokens = bm25s.tokenize([f"{d['title']} {d['text']}" for d in self.docs], stopwords="en",
                                stemmer=self.stemmer, show_progress=False)
        self.retriever = bm25s.BM25()
        self.retriever.index(tokens, show_progress=False)
        self.label = f"bm25:{self.sha256[:12]}"

    @staticmethod
    def _stemmer() -> Any:
        try:
            import Stemmer  # pyright: ignore[reportMissingImports]  (the agents extra)

            return Stemmer.Stemmer("english")
        except ImportError:
            return None

    @staticmethod
    def _read(p: Path) -> list[dict[str, Any]]:
        docs = []
        if p.suffix == ".jsonl":
            for i, line in enumerate(p.read_text(encoding="utf-8").splitlines()):
                if line.strip():
                    row = json.loads(line)
                    docs.append({"id": str(row.get("id", i)), "title": str(row.get("title", "")),
                                 "text": str(row.get("text", row.get("contents", "")))})
        else:
            for i, line in enumerate(p.read_text(encoding="utf-8").splitlines()):
                if line.strip():
                    docs.append({"id": str(i), "title": "", "text": line.strip()})
        return docs

    def describe(self) -> dict[str, Any]:
        return {"kind": "bm25", "corpus": str(self.path), "sha256": self.sha256, "passages": len(self.docs),
                "stemmer": "english" if self.stemmer else None}

    def search(self, query: str, k: int) -> list[dict[str, Any]]:
        q = self._bm25s.tokenize([query], stopwords="en", stemmer=self.stemmer, show_progress=False)
        k = min(k, len(self.docs))
        if not q.vocab or k < 1:
            return []
        idx, scores = self.retriever.retrieve(q, k=k, show_progress=False)
        out = []
        for j, s in zip(idx[0], scores[0]):
            if float(s) > 0:
                d = self.docs[int(j)]
                out.append({**d, "score": round(float(s), 4)})
        return out

    async def retrieve(self, ctx: ProblemContext, query: str, k: int) -> Passages:
        return Passages(self.label, self.search(query, k))


class ToolSearch:
    """A search tool offered in ``ctx.tools`` (a benchmark's search, or a configured web-search tool)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.label = f"tool:{name}"

    def describe(self) -> dict[str, Any]:
        return {"kind": "tool", "tool": self.name}

    async def retrieve(self, ctx: ProblemContext, query: str, k: int) -> Passages:
        names = [t.name for t in ctx.tools]
        if self.name not in names:
            raise RuntimeError(f"DynaGraph evidence=tool: this problem offers no tool {self.name!r} (has {names})")
        spec = next(t for t in ctx.tools if t.name == self.name)
        arg = next(iter(spec.parameters), "query")
        res = await ctx.call_tool(self.name, **{arg: query})
        items = res if isinstance(res, list) else [res]
        out = []
        for i, it in enumerate(items[:k]):
            if isinstance(it, dict):
                out.append({"id": str(it.get("id", i)), "title": str(it.get("title", "")),
                            "text": str(it.get("text", it.get("snippet", it))), "score": it.get("score")})
            else:
                out.append({"id": str(i), "title": "", "text": str(it), "score": None})
        return Passages(self.label, out)


def make_source(opts: Any, cache: dict[str, Any] | None = None) -> Any:
    """The configured source (a BM25 index is built once per corpus and shared through ``cache``)."""
    if opts.evidence == "closed_book":
        return ClosedBook()
    if opts.evidence == "tool":
        return ToolSearch(opts.evidence_tool)
    key = f"bm25:{opts.corpus}"
    if cache is not None and key in cache:
        return cache[key]
    src = Bm25Index(opts.corpus)
    if cache is not None:
        cache[key] = src
    return src
