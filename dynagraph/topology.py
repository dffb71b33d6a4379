"""The live task graph G^(t) and the topological transformation operator T (patch / reconstruct).

Nodes keep their :class:`~dynagraph.schema.PlanNode` and a status (pending, done, superseded by a patch,
truncated by a reconstruction); only pending/done nodes are live. Every change appends a snapshot to
``history`` (the trace's topology history; Figure 6(b)'s patch/reconstruct shares are counted from it).
"""
from __future__ import annotations

from typing import Any
from collections.abc import Iterable

import networkx as nx

from agentic_repro.dynagraph.schema import PlanNode

LIVE = ("pending", "done")


class TaskGraph:
    def __init__(self) -> None:
        self.g = nx.DiGraph()
        self.history: list[dict[str, Any]] = []
        self.t = 0

    # ---- reading ------------------------------------------------------------------------------------
    def node(self, nid: str) -> PlanNode:
        return self.g.nodes[nid]["node"]

    def status(self, nid: str) -> str:
        return self.g.nodes[nid]["status"]

    def live(self) -> list[str]:
        return [n for n in self.g.nodes if self.g.nodes[n]["status"] in LIVE]

    def ids(self) -> set[str]:
        return set(self.g.nodes)

    def done(self) -> list[str]:
        return [n for n in self.g.nodes if self.g.nodes[n]["status"] == "done"]

    def live_graph(self) -> nx.DiGraph:
        return self.g.subgraph(self.live()).copy()

    def next_ready(self) -> str | None:
        """The first pending node (in topological order of the live graph) whose inputs are all done."""
        lg = self.live_graph()
        for n in nx.lexicographical_topological_sort(lg, key=lambda x: self.g.nodes[x]["order"]):
            if self.g.nodes[n]["status"] == "pending" and all(self.g.nodes[p]["status"] == "done"
                                                              for p in lg.predecessors(n)):
                return n
        return None

    def sinks(self) -> list[str]:
        lg = self.live_graph()
        return sorted((n for n in lg.nodes if lg.out_degree(n) == 0), key=lambda x: self.g.nodes[x]["order"])

    def descendants(self, nid: str) -> set[str]:
        return nx.descendants(self.live_graph(), nid) if nid in self.live() else set()

    # ---- changing -------------------------------------------------------------------------------------
    def _add(self, nodes: Iterable[PlanNode], origin: str, order: float | None = None) -> list[str]:
        added = []
        for n in nodes:
            self.g.add_node(n.id, node=n, status="pending", origin=origin,
                            order=len(self.g.nodes) if order is None else order)
            added.append(n.id)
        for n in nodes:
            for i in n.inputs:
                self.g.add_edge(i, n.id)
        return added

    def add_plan(self, nodes: list[PlanNode], origin: str = "plan", op: str | None = None) -> list[str]:
        added = self._add(nodes, origin)
        self._snapshot(op or origin, added=added)
        return added

    def mark_done(self, nid: str) -> None:
        self.g.nodes[nid]["status"] = "done"

    def insert_patch(self, failed: str, patch: PlanNode) -> str:
        """v_{i,patch} takes the failed node's place: same inputs as ``patch`` says (by default the failed
        node's), and every live consumer of the failed node now reads the patch instead."""
        consumers = [c for c in self.g.successors(failed) if self.g.nodes[c]["status"] in LIVE]
        self.g.nodes[failed]["status"] = "superseded"
        self._add([patch], "patch", order=self.g.nodes[failed]["order"] + 0.5)  # runs next: it sutures the gap
        for c in consumers:
            node = self.node(c)
            node.inputs = [patch.id if i == failed else i for i in node.inputs]
            self.g.remove_edge(failed, c)
            self.g.add_edge(patch.id, c)
        self._snapshot("patch", added=[patch.id], superseded=[failed], rewired=consumers)
        return patch.id

    def truncate(self, failed: str) -> list[str]:
        """Remove the failed node and every live branch downstream of it (their state is discarded)."""
        gone = sorted({failed} | self.descendants(failed), key=lambda x: self.g.nodes[x]["order"])
        for n in gone:
            self.g.nodes[n]["status"] = "truncated"
        return gone

    def reconstruct(self, failed: str, sub: list[PlanNode]) -> dict[str, list[str]]:
        gone = self.truncate(failed)
        added = self._add(sub, "reconstruct")
        self._snapshot("reconstruct", added=added, truncated=gone, failed=failed)
        return {"truncated": gone, "added": added}

    def _snapshot(self, op: str, **what: Any) -> None:
        self.t += 1
        lg = self.live_graph()
        self.history.append({"t": self.t, "op": op, **what,
                             "live_nodes": [{"id": n, "expert": self.node(n).expert, "inputs": list(self.node(n).inputs)}
                                            for n in sorted(lg.nodes, key=lambda x: self.g.nodes[x]["order"])]})

    def to_dict(self) -> dict[str, Any]:
        return {"nodes": [{**self.node(n).model_dump(), "status": self.g.nodes[n]["status"],
                           "origin": self.g.nodes[n]["origin"]}
                          for n in sorted(self.g.nodes, key=lambda x: self.g.nodes[x]["order"])]}
