"""The global artifacts repository S: the only channel between modules (experts never talk directly).

A typed, append-only store: each entry has a kind (query, plan, feedback, evidence, patch, subgraph,
answer), the key it is filed under (a node id) and its producer. An expert's prompt is built only from
entries read from S (:meth:`inputs_for`), and every read is logged, so the trace shows what each node saw.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

KINDS = ("query", "plan", "feedback", "evidence", "patch", "subgraph", "answer")


@dataclass
class Artifact:
    seq: int
    kind: str
    key: str
    producer: str
    payload: Any


@dataclass
class ArtifactStore:
    entries: list[Artifact] = field(default_factory=list)
    reads: list[dict[str, Any]] = field(default_factory=list)

    def put(self, kind: str, key: str, payload: Any, producer: str) -> Artifact:
        if kind not in KINDS:
            raise ValueError(f"unknown artifact kind {kind!r} (one of {KINDS})")
        a = Artifact(len(self.entries), kind, key, producer, payload)
        self.entries.append(a)
        return a

    def latest(self, kind: str, key: str) -> Artifact | None:
        for a in reversed(self.entries):
            if a.kind == kind and a.key == key:
                return a
        return None

    def inputs_for(self, reader: str, keys: list[str]) -> dict[str, str]:
        """The text outputs of the nodes ``keys`` (their latest feedback), as ``reader`` gets them."""
        out = {}
        for k in keys:
            a = self.latest("feedback", k)
            if a is None:
                raise KeyError(f"node {reader!r} reads {k!r}, which has no output in S")
            out[k] = a.payload["text"]
        self.reads.append({"reader": reader, "keys": list(keys)})
        return out

    def to_list(self) -> list[dict[str, Any]]:
        return [asdict(a) for a in self.entries]
