"""DynaGraph as a harness method: Planning -> Execution -> Evaluation -> Reconstruction (paper §3.1.2).

The Orchestrator asks the Planner (role ``planner``) for the initial DAG G^(0), validates it (re-asking on
errors, bounded), and executes it in topological order: each node's expert (roles ``expert1..3``: E_rag,
E_logic, E_expr) reads its inputs only from the global artifacts repository S and returns F_i. After every
node the Evaluator decides: continue, fine-grained patching (a patch node replaces the failed one and feeds its
consumers) or subgraph reconstruction (the failed node and everything downstream is truncated and re-planned).
Each module is a role, so it is a LoRA adapter over the shared base when ``roles.<r>.adapter`` binds one, else
the base model with the module's role prompt (labelled in the trace).
"""
from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass, field
from typing import Any

from agentic_repro.dynagraph import prompts as P
from agentic_repro.dynagraph.artifacts import ArtifactStore
from agentic_repro.dynagraph.config import Options, method_name
from agentic_repro.dynagraph.counts import plan_counts
from agentic_repro.dynagraph.evaluator import Budget, decide
from agentic_repro.dynagraph.evidence import make_source
from agentic_repro.dynagraph.schema import (EXPERTS, Feedback, PlanNode, canonical_expert, parse_feedback, parse_json_object,
                              validate_plan)
from agentic_repro.dynagraph.topology import TaskGraph
from agentic_repro.harness.answers import has_final_answer
from agentic_repro.harness.types import Solution
from agentic_repro.harness.context import ProblemContext
from agentic_repro.harness.view import ProblemView

def _errors_text(errors: list[str], limit: int = 6) -> str:
    """The first ``limit`` distinct errors, one a line (a long broken plan can have dozens)."""
    uniq = list(dict.fromkeys(errors))
    more = f"\n- ... and {len(uniq) - limit} more" if len(uniq) > limit else ""
    return "\n".join(f"- {e}" for e in uniq[:limit]) + more


class PlanFailure(RuntimeError):
    """The planner gave no valid plan within max_plan_attempts and fallback=error."""


@dataclass
class Trajectory:
    """One execution of DynaGraph on one problem (one sampled initial plan)."""

    sample: int
    S: ArtifactStore = field(default_factory=ArtifactStore)
    graph: TaskGraph = field(default_factory=TaskGraph)
    plans: list[dict[str, Any]] = field(default_factory=list)       # every planner call (initial, subgraph, patch)
    executions: list[dict[str, Any]] = field(default_factory=list)  # every node execution, with its messages
    events: list[dict[str, Any]] = field(default_factory=list)      # the Evaluator's decisions
    answer: str = ""
    confidence: float | None = None
    stopped: str | None = None
    counter: dict[str, int] = field(default_factory=dict)
    t0: float = field(default_factory=time.perf_counter)

    def offset(self, messages: list[dict[str, str]]) -> int:
        """Distinct cache sample index for a prompt repeated within this trajectory (e.g. a re-run node)."""
        h = hashlib.sha256(json.dumps(messages, sort_keys=True).encode()).hexdigest()
        k = self.counter.get(h, 0)
        self.counter[h] = k + 1
        return self.sample * 100 + k

    def summary(self) -> dict[str, Any]:
        ops = [h["op"] for h in self.graph.history]
        first = self.plans[0] if self.plans else {}
        return {"sample": self.sample, "answer": self.answer, "confidence": self.confidence,
                "nodes_executed": len(self.executions), "patches": ops.count("patch"),
                "reconstructions": ops.count("reconstruct"),
                "plan_legal_first_try": bool(first.get("attempts") and first["attempts"][0]["check"]["ok"]),
                "fallback_plan": any(p.get("fallback") for p in self.plans if p["kind"] != "patch"),
                **plan_counts(self.plans),
                "stopped": self.stopped,
                "seconds": round(time.perf_counter() - self.t0, 3)}

    def to_dict(self) -> dict[str, Any]:
        return {**self.summary(), "plans": self.plans, "executions": self.executions, "events": self.events,
                "topology_history": self.graph.history, "graph": self.graph.to_dict(), "S": self.S.to_list(),
                "S_reads": self.S.reads}


class DynaGraph:
    """The method object the runner builds from ``configs/method/dynagraph*.yaml``."""

    def __init__(self, **params: Any) -> None:
        self.opts = Options.build(params)
        self.name = method_name(self.opts.variant)
        if self.opts.folder and self.opts.folder != self.name and self.opts.folder in (
                method_name(v) for v in ("full", "wo_patching", "wo_reconstruction")):
            raise ValueError(f"DynaGraph variant {self.opts.variant!r} would write into folder {self.opts.folder!r}")
        self._cache: dict[str, Any] = {}

    # ---- modules ----------------------------------------------------------------------------------------
    def _module(self, ctx: ProblemContext, module: str) -> dict[str, Any]:
        role = self.opts.role(module)
        adapter = getattr(ctx.run, "adapters", {}).get(role)
        return {"module": module, "role": role, "adapter": adapter,
                "label": f"LoRA adapter {adapter}" if adapter else "base model + role prompt"}

    async def _call(self, ctx: ProblemContext, tr: Trajectory, module: str, messages: list[dict[str, str]], stage: str,
                    max_tokens: int | None) -> tuple[str, dict[str, Any]]:
        o = self.opts
        kw: dict[str, Any] = {"temperature": o.temperature, "top_p": o.top_p}
        if max_tokens:
            kw["max_tokens"] = max_tokens
        t0 = time.perf_counter()
        out = (await ctx.generate(messages, stage=stage, role=self.opts.role(module),
                                  sample_offset=tr.offset(messages), **kw))[0]
        meta = {"prompt_tokens": out.prompt_tokens, "completion_tokens": out.completion_tokens,
                "finish_reason": out.finish_reason, "seconds": round(time.perf_counter() - t0, 3)}
        return out.text, meta

    # ---- planning -------------------------------------------------------------------------------------------
    async def _plan(self, ctx: ProblemContext, tr: Trajectory, first: list[dict[str, str]], *, kind: str,
                    available: set[str]) -> list[PlanNode]:
        o = self.opts
        messages = list(first)
        record: dict[str, Any] = {"kind": kind, "attempts": [], "fallback": False}
        tr.plans.append(record)
        for attempt in range(o.max_plan_attempts):
            raw, meta = await self._call(ctx, tr, "plan", messages, f"{kind}" if attempt == 0 else f"{kind}_retry",
                                         o.max_tokens_plan)
            check = validate_plan(raw, available=available, reserved=tr.graph.ids(), max_nodes=o.max_plan_nodes)
            record["attempts"].append({"messages": messages, "raw": raw, "check": check.to_dict(), **meta})
            if check.ok:
                tr.S.put("plan" if kind == "plan" else "subgraph", f"{kind}:{len(tr.plans)}",
                         [n.model_dump() for n in check.nodes], "planner")
                return check.nodes
            messages = [*messages, {"role": "assistant", "content": raw},
                        {"role": "user", "content": P.PLAN_RETRY.format(errors=_errors_text(check.errors))}]
        if o.fallback == "error":
            raise PlanFailure(f"no valid {kind} after {o.max_plan_attempts} planner answers: "
                              f"{record['attempts'][-1]['check']['errors']}")
        record["fallback"] = True
        used = tr.graph.ids()
        k = 1 + len(used)
        while f"v{k}" in used or f"v{k + 1}" in used:
            k += 1
        a, b = f"v{k}", f"v{k + 1}"
        nodes = [PlanNode(id=a, expert="E_logic", subtask="Solve the question step by step.",
                          inputs=sorted(available)),
                 PlanNode(id=b, expert="E_expr", subtask="Write the final answer.", inputs=[a])]
        tr.S.put("plan" if kind == "plan" else "subgraph", f"{kind}:{len(tr.plans)}",
                 [n.model_dump() for n in nodes], "orchestrator:fallback")
        return nodes

    def _ensure_sink(self, tr: Trajectory) -> None:
        """The graph must end in one E_expr node (it writes the answer); add one reading every sink if not."""
        sinks = tr.graph.sinks()
        if len(sinks) == 1 and tr.graph.node(sinks[0]).expert == "E_expr":
            return
        k = 1 + len(tr.graph.ids())
        while f"final{k}" in tr.graph.ids():
            k += 1
        node = PlanNode(id=f"final{k}", expert="E_expr", subtask="Write the final answer from the results.",
                        inputs=sinks)
        tr.graph.add_plan([node], "orchestrator", op="orchestrator_sink")

    # ---- execution --------------------------------------------------------------------------------------------
    async def _execute(self, ctx: ProblemContext, tr: Trajectory, node: PlanNode, task: str, final: bool) -> Feedback:
        o = self.opts
        inputs = tr.S.inputs_for(node.id, node.inputs)
        evidence, passages = "", None
        if node.expert == "E_rag":
            src = make_source(o, self._cache)
            passages = await src.retrieve(ctx, f"{node.subtask} {task}"[:1000], o.evidence_k)
            tr.S.put("evidence", node.id, passages.to_dict(), src.label)
            evidence = P.render_evidence(passages)
        content = P.EXPERT[node.expert].format(task=task, subtask=node.subtask, inputs=P.render_inputs(inputs),
                                               evidence=evidence,
                                               answer_instruction=ctx.benchmark.answer_instruction or "")
        messages = [{"role": "system", "content": P.EXPERT_SYSTEM[node.expert]}, {"role": "user", "content": content}]
        raw, meta = await self._call(ctx, tr, node.expert, messages, f"expert:{node.expert}", o.max_tokens_expert)
        fb = parse_feedback(node.id, node.expert, raw, missing_confidence=o.missing_confidence)
        if node.expert == "E_rag" and passages is not None and passages.source != "closed_book" and not passages.items:
            fb.xi, fb.reasons = 1, [*fb.reasons, "retrieval found nothing"]
        if final and node.expert == "E_expr" and fb.parse != "malformed" and not has_final_answer(ctx, fb.text):
            fb.xi, fb.reasons = 1, [*fb.reasons, "final answer not in the required format"]
        tr.S.put("feedback", node.id, {**fb.to_dict(), "text": fb.text}, f"{node.expert}:{self.opts.role(node.expert)}")
        tr.executions.append({"node": node.id, "expert": node.expert, "origin": tr.graph.g.nodes[node.id]["origin"],
                              "messages": messages, "raw": raw, "feedback": fb.to_dict(), **meta})
        return fb

    async def _patch_node(self, ctx: ProblemContext, tr: Trajectory, nid: str, fb: Feedback, task: str) -> PlanNode:
        node = tr.graph.node(nid)
        inputs = tr.S.inputs_for(f"patch:{nid}", node.inputs)
        content = P.PATCH.format(task=task, failed=nid, expert=node.expert, subtask=node.subtask,
                                 reasons="; ".join(fb.reasons) or f"confidence {fb.c:.2f}",
                                 inputs=P.render_done(inputs), output=(fb.text or "(nothing)")[:800])
        messages = [{"role": "system", "content": P.PLAN_SYSTEM}, {"role": "user", "content": content}]
        raw, meta = await self._call(ctx, tr, "plan", messages, "patch_plan", self.opts.max_tokens_plan)
        obj, parse = parse_json_object(raw)
        k = 1
        while f"{nid}_patch{k}" in tr.graph.ids():
            k += 1
        expert, subtask, used_default = node.expert, node.subtask, True
        if isinstance(obj, dict) and obj.get("expert"):
            e = canonical_expert(obj.get("expert"))
            if e in EXPERTS and str(obj.get("subtask") or "").strip():
                expert, subtask, used_default = e, str(obj["subtask"]).strip(), False
        if tr.graph.sinks() == [nid]:
            expert = "E_expr"  # the answer-writing node stays E_expr
        patch = PlanNode(id=f"{nid}_patch{k}", expert=expert, subtask=subtask, inputs=list(node.inputs))
        tr.plans.append({"kind": "patch", "failed": nid, "attempts": [{"messages": messages, "raw": raw,
                         "check": {"ok": not used_default, "parse": parse}, **meta}],
                         "fallback": used_default, "node": patch.model_dump()})
        tr.S.put("patch", patch.id, patch.model_dump(), "planner")
        return patch

    async def _reconstruct(self, ctx: ProblemContext, tr: Trajectory, nid: str, fb: Feedback, task: str,
                           reasons: list[str]) -> None:
        node = tr.graph.node(nid)
        doomed = {nid} | tr.graph.descendants(nid)
        done = {d: tr.S.latest("feedback", d).payload["text"] for d in tr.graph.done() if d not in doomed}
        content = P.SUBGRAPH.format(task=task, experts=P.EXPERT_DOC, done=P.render_done(done), failed=nid,
                                    expert=node.expert, subtask=node.subtask, reasons="; ".join(reasons),
                                    used=", ".join(sorted(tr.graph.ids())), max_nodes=self.opts.max_plan_nodes)
        messages = [{"role": "system", "content": P.PLAN_SYSTEM}, {"role": "user", "content": content}]
        sub = await self._plan(ctx, tr, messages, kind="subgraph", available=set(done))
        tr.graph.reconstruct(nid, sub)   # truncates nid and everything downstream, then adds G_sub
        self._ensure_sink(tr)

    async def trajectory(self, ctx: ProblemContext, sample: int = 0) -> Trajectory:
        o = self.opts
        tr = Trajectory(sample)
        task = ctx.benchmark.render(ctx.problem)
        tr.S.put("query", "Q", task, "orchestrator")
        first = [{"role": "system", "content": P.PLAN_SYSTEM},
                 {"role": "user", "content": P.PLAN.format(task=task, experts=P.EXPERT_DOC, max_nodes=o.max_plan_nodes)}]
        nodes = await self._plan(ctx, tr, first, kind="plan", available=set())
        tr.graph.add_plan(nodes)
        self._ensure_sink(tr)
        budget = Budget.of(o)
        while True:
            nid = tr.graph.next_ready()
            if nid is None:
                break
            if budget.nodes <= 0:
                tr.stopped = "node budget exhausted"
                break
            budget.nodes -= 1
            final = tr.graph.sinks() == [nid]
            fb = await self._execute(ctx, tr, tr.graph.node(nid), task, final)
            tr.graph.mark_done(nid)
            live_c = [tr.S.latest("feedback", d).payload["c"] for d in tr.graph.done()]
            d = decide(fb, live_c, o, budget, is_patch=tr.graph.g.nodes[nid]["origin"] == "patch")
            tr.events.append({"node": nid, **d.to_dict()})
            if d.action == "patch":
                budget.patches -= 1
                tr.graph.insert_patch(nid, await self._patch_node(ctx, tr, nid, fb, task))
            elif d.action == "reconstruct":
                budget.reconstructions -= 1
                await self._reconstruct(ctx, tr, nid, fb, task, d.reasons)
        done_sinks = [s for s in tr.graph.sinks() if tr.graph.status(s) == "done"]
        last = done_sinks[-1] if done_sinks else (tr.graph.done()[-1] if tr.graph.done() else None)
        if last is not None:
            a = tr.S.latest("feedback", last).payload
            tr.answer, tr.confidence = a["text"], a["c"]
        tr.S.put("answer", "A", tr.answer, "orchestrator")
        return tr

    async def solve(self, problem: ProblemView, ctx: ProblemContext) -> Solution:
        o = self.opts
        modules = [self._module(ctx, m) for m in ("plan", *EXPERTS)]
        src = make_source(o, self._cache)
        header = {"variant": o.variant, "options": o.resolved(), "modules": modules, "evidence": src.describe()}
        if o.plan_samples == 1:
            tr = await self.trajectory(ctx, 0)
            return Solution(tr.answer, confidence=tr.confidence, trace={**header, **tr.to_dict()})
        cands = [await self.trajectory(ctx, i) for i in range(o.plan_samples)]
        return Solution(cands[0].answer, confidence=cands[0].confidence,
                        trace={**header, **cands[0].to_dict(), "candidates": [c.to_dict() for c in cands]})
