"""Prompts of the planner and the three experts (written for this harness: the paper publishes none)."""
from __future__ import annotations

import json
from typing import Any

EXPERT_DOC = ("E_rag: retrieves and states facts (open-domain knowledge); E_logic: deduces or calculates from "
              "earlier results (closed-domain logic, arithmetic, yes/no checks); E_expr: writes the final answer "
              "from earlier results.")

PLAN_SYSTEM = "You are the Planner of a team of experts. You decompose a question into a small graph of sub-tasks."

PLAN = """Question:
{task}

Experts: {experts}

Write a plan as one JSON object: {{"nodes": [{{"id": "v1", "expert": "E_rag", "subtask": "...", "inputs": []}}, ...]}}.
Rules: at most {max_nodes} nodes; "inputs" lists the ids of earlier nodes whose results the sub-task needs; no cycles;
the last node is an E_expr node that writes the final answer from the results it takes as inputs.
Answer with the JSON object only."""

PLAN_RETRY = """Your plan was rejected:
{errors}
Write the corrected plan as one JSON object only."""

SUBGRAPH = """Question:
{task}

Experts: {experts}

Results established so far (node id: result):
{done}

Node {failed} ({expert}: "{subtask}") failed: {reasons}. It and everything after it were discarded.
Write a new sub-plan that finishes the task as one JSON object {{"nodes": [...]}} (same format: "id", "expert",
"subtask", "inputs"). New ids must differ from {used}; inputs may name the established nodes above or new nodes.
At most {max_nodes} nodes; the last node is an E_expr node that writes the final answer. JSON only."""

PATCH = """Question:
{task}

Node {failed} ({expert}: "{subtask}") produced an unreliable result: {reasons}.
Its inputs were:
{inputs}
Its output was:
{output}

Write ONE patch node that redoes this step correctly, as one JSON object {{"expert": "E_rag|E_logic|E_expr",
"subtask": "..."}}. It reads the same inputs. JSON only."""

EXPERT_SYSTEM = {
    "E_rag": "You are E_rag, the factual retrieval expert. You state facts and support each with evidence.",
    "E_logic": "You are E_logic, the logical deduction expert. You reason step by step and verify each step.",
    "E_expr": "You are E_expr, the expression expert. You write the final answer faithfully from the given results.",
}

EXPERT = {
    "E_rag": """Question: {task}
Your sub-task: {subtask}
{inputs}{evidence}
Answer with one JSON object: {{"assertions": ["fact", ...], "evidence": ["supporting text", ...],
"citations": ["source of each piece of evidence", ...], "confidence": <0..1, how reliable the evidence is>,
"anomaly": <true if you could not find support>}}""",
    "E_logic": """Question: {task}
Your sub-task: {subtask}
{inputs}
Answer with one JSON object: {{"reasoning": ["step", ...], "verifications": [true/false for each check of a step],
"result": "the sub-task's result", "confidence": <0..1, how self-consistent the reasoning is>,
"anomaly": <true if a step could not be verified>}}""",
    "E_expr": """Question: {task}
Your sub-task: {subtask}
{inputs}
Write the final answer. {answer_instruction}
Answer with one JSON object: {{"draft": "the answer text, ending with the required final answer format",
"unsupported": ["statements in the draft that no result supports", ...], "confidence": <0..1>,
"anomaly": <true if the results do not allow an answer>}}""",
}


def render_inputs(inputs: dict[str, str]) -> str:
    if not inputs:
        return ""
    return "Results of earlier steps:\n" + "\n".join(f"- {k}: {v}" for k, v in inputs.items()) + "\n"


def render_evidence(passages: Any) -> str:
    if passages is None or passages.source == "closed_book" or not passages.items:
        return ("Evidence: none retrieved (closed-book: use what you know and cite \"model recall\").\n"
                if passages is None or passages.source == "closed_book" else "Evidence: the search found nothing.\n")
    lines = [f"[{i + 1}] {(p['title'] + ': ') if p.get('title') else ''}{p['text'][:600]}"
             for i, p in enumerate(passages.items)]
    return "Evidence passages:\n" + "\n".join(lines) + "\n"


def render_done(done: dict[str, str]) -> str:
    return "\n".join(f"- {k}: {v[:400]}" for k, v in done.items()) or "(none)"


def dumps(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False)
