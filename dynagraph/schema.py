"""The planner's DAG as validated JSON, and the experts' structured state feedback F_i = <o_i, xi_i, c_i>.

The planner answers ``{"nodes": [{"id", "expert", "subtask", "inputs": [ids]}]}``. :func:`validate_plan` parses
it (lenient JSON via json-repair), checks every node with pydantic and the whole graph with networkx, and returns
either the DAG or the list of errors the orchestrator sends back to the planner (cycles, unknown experts,
dangling inputs, duplicate ids, an empty plan). The same checks are the Topology Critic's legality gate.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any
from collections.abc import Iterable

import networkx as nx
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

#: Omega_E, the expert pool (paper §3.2.1).
EXPERTS = ("E_rag", "E_logic", "E_expr")
_ALIASES = {"rag": "E_rag", "e_rag": "E_rag", "retrieval": "E_rag", "logic": "E_logic", "e_logic": "E_logic",
            "expr": "E_expr", "e_expr": "E_expr", "expression": "E_expr"}


def canonical_expert(name: Any) -> str:
    """``E_rag`` / ``rag`` / ``E_RAG`` -> ``E_rag``; anything else is returned unchanged (and rejected later)."""
    s = str(name or "").strip()
    return _ALIASES.get(s.lower(), s if s in EXPERTS else _ALIASES.get(s.lower().replace(" ", "_"), s))


class PlanNode(BaseModel):
    """One node v_i: which expert runs which sub-task on which earlier nodes' outputs."""

    model_config = ConfigDict(extra="ignore")
    id: str = Field(min_length=1, max_length=40)
    expert: str
    subtask: str = Field(min_length=1)
    inputs: list[str] = Field(default_factory=list)

    @field_validator("id", mode="before")
    @classmethod
    def _id(cls, v: Any) -> str:
        return str(v).strip()

    @field_validator("expert", mode="before")
    @classmethod
    def _expert(cls, v: Any) -> str:
        return canonical_expert(v)

    @field_validator("inputs", mode="before")
    @classmethod
    def _inputs(cls, v: Any) -> list[str]:
        if v is None:
            return []
        if isinstance(v, (str, int)):
            v = [v]
        return [str(x).strip() for x in v]


@dataclass
class PlanCheck:
    """The outcome of validating one planner answer."""

    ok: bool
    nodes: list[PlanNode] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    parse: str = "ok"        # ok | repaired | malformed
    graph: nx.DiGraph | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "parse": self.parse, "errors": self.errors,
                "nodes": [n.model_dump() for n in self.nodes]}


_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL | re.IGNORECASE)


def parse_json_object(text: str) -> tuple[Any, str]:
    """(object or None, "ok" | "repaired" | "malformed"): strict JSON of the text or its first fenced block,
    else json-repair's best reading (which must be a dict or list)."""
    import json_repair

    text = text or ""
    for cand in [m.group(1) for m in _FENCE.finditer(text)] + [text.strip()]:
        try:
            return json.loads(cand), "ok"
        except ValueError:
            pass
    start = min([i for i in (text.find("{"), text.find("[")) if i >= 0], default=-1)
    if start < 0:
        return None, "malformed"
    try:
        obj = json_repair.loads(text[start:])
    except Exception:  # noqa: BLE001 - any failure of the repairer is "malformed"
        return None, "malformed"
    if isinstance(obj, (dict, list)) and obj:
        return obj, "repaired"
    return None, "malformed"


def validate_plan(text_or_obj: Any, *, available: Iterable[str] = (), reserved: Iterable[str] = (),
                  max_nodes: int | None = None) -> PlanCheck:
    """Check a planner answer. ``available``: ids of nodes already executed (a subgraph may depend on them);
    ``reserved``: ids already used in the graph's history (a new node may not reuse one)."""
    if isinstance(text_or_obj, str):
        obj, parse = parse_json_object(text_or_obj)
    else:
        obj, parse = text_or_obj, "ok"
    if obj is None:
        return PlanCheck(False, errors=["the answer is not JSON: give one JSON object {\"nodes\": [...]}"],
                         parse="malformed")
    raw_nodes = obj.get("nodes") if isinstance(obj, dict) else obj
    if not isinstance(raw_nodes, list) or not raw_nodes:
        return PlanCheck(False, errors=["the plan has no \"nodes\" list (or it is empty)"], parse=parse)
    nodes, errors = [], []
    for k, rn in enumerate(raw_nodes):
        try:
            nodes.append(PlanNode.model_validate(rn if isinstance(rn, dict) else {}))
        except ValidationError as exc:
            errors.append(f"node {k + 1} is malformed ({'; '.join(e['loc'][0].__str__() + ': ' + e['msg'] for e in exc.errors()[:3])})")
    available, reserved = set(available), set(reserved)
    ids = [n.id for n in nodes]
    for dup in sorted({i for i in ids if ids.count(i) > 1}):
        errors.append(f"node id {dup!r} is used more than once")
    for n in nodes:
        if n.id in reserved or n.id in available:
            errors.append(f"node id {n.id!r} is already used in the graph: choose a new id")
        if n.expert not in EXPERTS:
            errors.append(f"node {n.id!r}: unknown expert {n.expert!r} (choose one of {', '.join(EXPERTS)})")
        for i in n.inputs:
            if i == n.id:
                errors.append(f"node {n.id!r} depends on itself")
            elif i not in ids and i not in available:
                errors.append(f"node {n.id!r}: input {i!r} is not a node of the plan (dangling input)")
    if max_nodes is not None and len(nodes) > max_nodes:
        errors.append(f"the plan has {len(nodes)} nodes; at most {max_nodes} are allowed")
    g = nx.DiGraph()
    g.add_nodes_from(ids)
    for n in nodes:
        for i in n.inputs:
            if i in ids and i != n.id:
                g.add_edge(i, n.id)
    if not errors:
        try:
            cycle = nx.find_cycle(g)
            errors.append("the dependencies have a cycle: " + " -> ".join(f"{a}" for a, _ in cycle) + f" -> {cycle[0][0]}")
        except nx.NetworkXNoCycle:
            pass
    return PlanCheck(not errors, nodes, errors, parse, g if not errors else None)


# ---- expert state feedback ------------------------------------------------------------------------------

class RagOutput(BaseModel):
    """E_rag: o_i = <A (assertions), K (evidence), C (citations)>."""

    model_config = ConfigDict(extra="ignore")
    assertions: list[str] = Field(default_factory=list)
    evidence: list[str] = Field(default_factory=list)
    citations: list[str] = Field(default_factory=list)


class LogicOutput(BaseModel):
    """E_logic: o_i = <H (reasoning history), V (boolean verifications)>, plus the sub-task's result."""

    model_config = ConfigDict(extra="ignore")
    reasoning: list[str] = Field(default_factory=list)
    verifications: list[bool] = Field(default_factory=list)
    result: str = ""


class ExprOutput(BaseModel):
    """E_expr: o_i = <D (draft), U (unsupported statements)>."""

    model_config = ConfigDict(extra="ignore")
    draft: str = ""
    unsupported: list[str] = Field(default_factory=list)


OUTPUT_MODELS: dict[str, type[BaseModel]] = {"E_rag": RagOutput, "E_logic": LogicOutput, "E_expr": ExprOutput}


def _strs(v: Any) -> list[str]:
    if v is None:
        return []
    if isinstance(v, (str, int, float, bool)):
        return [str(v)]
    out = []
    for x in v:
        out.append(json.dumps(x, ensure_ascii=False) if isinstance(x, (dict, list)) else str(x))
    return out


def _bools(v: Any) -> list[bool]:
    out = []
    for x in (v if isinstance(v, list) else [v] if v is not None else []):
        if isinstance(x, dict):
            x = x.get("holds", x.get("ok", x.get("passed", x.get("result"))))
        if isinstance(x, str):
            x = x.strip().lower() in ("true", "yes", "1", "pass", "passed", "holds", "ok")
        out.append(bool(x))
    return out


def _confidence(v: Any) -> float | None:
    try:
        c = float(str(v).strip().rstrip("%"))
    except (TypeError, ValueError):
        return None
    if c > 1.0 and c <= 100.0:
        c = c / 100.0
    return c if 0.0 <= c <= 1.0 else None


@dataclass
class Feedback:
    """F_i = <o_i, xi_i, c_i> of one node, with why xi_i is set and how the answer parsed."""

    node_id: str
    expert: str
    output: dict[str, Any]
    xi: int
    c: float
    parse: str
    reasons: list[str] = field(default_factory=list)
    text: str = ""          # the output in plain text, what S hands to dependent nodes

    def to_dict(self) -> dict[str, Any]:
        return {"node": self.node_id, "expert": self.expert, "o": self.output, "xi": self.xi, "c": round(self.c, 4),
                "parse": self.parse, "reasons": self.reasons}


def parse_feedback(node_id: str, expert: str, raw: str, *, missing_confidence: float = 0.0) -> Feedback:
    """An expert's raw answer -> F_i. xi_i = 1 on a parse failure or a self-reported anomaly, and per expert:
    E_rag with no assertion (retrieval could not support any), E_logic with a failed verification, E_expr with
    an empty draft (a severe formatting deviation). A missing or malformed confidence counts as
    ``missing_confidence`` (default 0: an expert that does not calibrate itself is not trusted)."""
    obj, parse = parse_json_object(raw)
    reasons: list[str] = []
    if not isinstance(obj, dict):
        return Feedback(node_id, expert, {}, 1, missing_confidence, "malformed", ["parse failure"], (raw or "").strip())
    anomaly = obj.get("anomaly", obj.get("exception", False))
    if isinstance(anomaly, str):
        anomaly = anomaly.strip().lower() in ("true", "yes", "1")
    c = _confidence(obj.get("confidence"))
    if c is None:
        reasons.append("no valid confidence")
        c = missing_confidence
    model = OUTPUT_MODELS[expert]
    if expert == "E_rag":
        out = RagOutput(assertions=_strs(obj.get("assertions")), evidence=_strs(obj.get("evidence")),
                        citations=_strs(obj.get("citations")))
        if not out.assertions:
            reasons.append("no supported assertion")
        text = "\n".join(out.assertions)
    elif expert == "E_logic":
        out = LogicOutput(reasoning=_strs(obj.get("reasoning", obj.get("history"))),
                          verifications=_bools(obj.get("verifications")), result=str(obj.get("result", "") or ""))
        if out.verifications and not all(out.verifications):
            reasons.append("a verification failed")
        if not out.result.strip():
            reasons.append("no result")
        text = out.result.strip() or "\n".join(out.reasoning[-2:])
    else:
        out = model(draft=str(obj.get("draft", "") or ""), unsupported=_strs(obj.get("unsupported")))
        if not out.draft.strip():
            reasons.append("empty draft")
        text = out.draft.strip()
    if anomaly:
        reasons.append("self-reported anomaly")
    hard = [r for r in reasons if r != "no valid confidence"]
    return Feedback(node_id, expert, out.model_dump(), int(bool(hard)), float(c), parse, reasons, text)
