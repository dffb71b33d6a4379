"""The executor π_exec: one operator instance o = (O_k, φ, ψ) run over the memory 𝓜.

The prompt is the template's released text with ``{context}`` = for each input key
``"<key>'s Context:\\n<value>\\n"`` and ``{guidance}`` = ``"Input Usage:\\n<φ>\\n"`` (operator.py).
Templates without a released prompt (Table 6's GENERATE_CODE, REFINE_CODE) use the release's nearest one
(GENERATE_ANSWER, which the release uses for code too; REFINE_ANSWER); ENSEMBLE is the release's
SELF_CONSISTENCY_ENSEMBLE. TEST_CODE calls no model: it runs the solution against the tests the task
text shows, through the benchmark's ``run_public_tests`` tool (the harness sandbox), never in-process and
never the scored tests. Backbone failures propagate (an infrastructure error is never an operator output).
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from agentic_repro.dyflow import prompts as P
from agentic_repro.dyflow.config import Options
from agentic_repro.dyflow.schema import ORIGINAL_PROBLEM, OperatorInstance
from agentic_repro.harness.context import ProblemContext

PROMPT_OF = {"GENERATE_CODE": "GENERATE_ANSWER", "REFINE_CODE": "REFINE_ANSWER",
             "ENSEMBLE": "SELF_CONSISTENCY_ENSEMBLE"}
_VERDICT = re.compile(r"Overall\s+Verdict\s*[:：]\s*[*_`\s\"'<\[]*(accept|minor_issues|major_issues|reject)", re.IGNORECASE)


def verdict_of(review: str) -> str | None:
    """The REVIEW_SOLUTION verdict (the last one stated), or None."""
    found = _VERDICT.findall(review or "")
    return found[-1].lower() if found else None


@dataclass
class Calls:
    """Per-problem sample-index bookkeeping: an identical prompt asked again (a re-planned stage that
    repeats an operator, a retried design) gets the next sample index instead of the cached reply."""

    seen: dict[str, int] = field(default_factory=dict)

    def offset(self, role: str, messages: list[dict[str, str]], n: int = 1) -> int:
        key = role + "\x00" + json.dumps(messages, sort_keys=True, ensure_ascii=False)
        off = self.seen.get(key, 0)
        self.seen[key] = off + n
        return off


def _sampling(max_tokens: int | None, temperature: float) -> dict[str, Any]:
    out: dict[str, Any] = {"temperature": temperature}
    if max_tokens:
        out["max_tokens"] = max_tokens
    return out


def build_prompt(op: OperatorInstance, memory: dict[str, str], task: str) -> tuple[str, str, str]:
    """(prompt, context block, guidance block) for an LLM operator."""
    context = ""
    for k in op.input_keys:
        value = task if k == ORIGINAL_PROBLEM else memory[k]
        context += f"{k}'s Context:\n{value}\n"
    guidance = f"Input Usage:\n{op.instruction}\n" if op.instruction else ""
    template = P.OPERATOR_PROMPTS.get(PROMPT_OF.get(op.template, op.template), P.OPERATOR_PROMPTS["DEFAULT"])
    return P.fill(template, context=context, guidance=guidance), context, guidance


async def run_operator(ctx: ProblemContext, op: OperatorInstance, memory: dict[str, str], task: str, opts: Options,
                       calls: Calls) -> tuple[str, dict[str, Any]]:
    """(text stored in 𝓜, details for the trace)."""
    t = op.template
    if t == "TERMINATE":     # release: deprecated; the answer is params.final_answer_key's content
        key = op.answer_key   # (validated to exist: dyflow.validate.check_stage)
        return (memory.get(key, "") if key else ""), {"final_answer_key": key, "ledger_stage": None}
    if t == "TEST_CODE":
        return await _test_code(ctx, op, memory, task, opts)
    prompt, context, guidance = build_prompt(op, memory, task)
    messages = [{"role": "user", "content": prompt}]
    ledger = f"op:{t}"
    if t in ("ENSEMBLE", "SELF_CONSISTENCY_ENSEMBLE"):
        return await _ensemble(ctx, messages, context, guidance, opts, calls, ledger)
    out = await ctx.generate(messages, stage=ledger, role="executor",
                             sample_offset=calls.offset("executor", messages),
                             **_sampling(opts.executor_max_tokens, opts.executor_temperature))
    text = out[0].text
    info: dict[str, Any] = {"ledger_stage": ledger, "finish_reason": out[0].finish_reason}
    if t == "GENERATE_PLAN" and "Solution Plan:" in text:     # operator.py _process_output
        text = text[text.find("Solution Plan:") + len("Solution Plan:"):].strip()
    if t == "REVIEW_SOLUTION":
        info["verdict"] = verdict_of(text)
    return text, info


async def _ensemble(ctx: ProblemContext, messages: list[dict[str, str]], context: str, guidance: str, opts: Options,
                    calls: Calls, ledger: str) -> tuple[str, dict[str, Any]]:
    """n samples at T 0.7, then the adjudicator at T 0 picks one (operator.py); an unreadable pick
    falls back to the first sample, as released."""
    n = opts.ensemble_samples
    samples = await ctx.generate(messages, stage=f"{ledger}:sample", role="executor", n=n,
                                 sample_offset=calls.offset("executor", messages, n),
                                 **_sampling(opts.ensemble_max_tokens, opts.ensemble_temperature))
    texts = [s.text for s in samples]
    formatted = "\n\n".join(f"Solution {i + 1}:\n{s.strip()}" for i, s in enumerate(texts))
    sel_prompt = P.fill(P.ENSEMBLE_SELECTOR, context_block=context, guidance_block=guidance,
                        solutions_formatted=formatted)
    sel_msgs = [{"role": "user", "content": sel_prompt}]
    sel = await ctx.generate(sel_msgs, stage=f"{ledger}:select", role="executor",
                             sample_offset=calls.offset("executor", sel_msgs),
                             **_sampling(opts.selector_max_tokens, opts.selector_temperature))
    raw = sel[0].text
    index, method, conf, why = 0, "llm_majority_selection", None, None
    try:
        m = re.search(r"\{[\s\S]*\}", raw)
        if not m:
            raise ValueError("no JSON")
        data = json.loads(m.group())
        index = int(data.get("selected_index", 1)) - 1
        why = data.get("justification")
        try:
            conf = None if data.get("confidence") is None else float(data["confidence"])
        except (TypeError, ValueError):
            conf = None
    except (ValueError, TypeError, AttributeError):
        index, method, conf = 0, "fallback_first", 0.0
    index = max(0, min(index, len(texts) - 1))
    return texts[index], {"ledger_stage": ledger, "samples": texts, "selected_index": index,
                          "selection_method": method, "selector_raw": raw, "justification": why,
                          "confidence": conf}


async def _test_code(ctx: ProblemContext, op: OperatorInstance, memory: dict[str, str], task: str,
                     opts: Options) -> tuple[str, dict[str, Any]]:
    key = next((k for k in op.input_keys if k != ORIGINAL_PROBLEM), op.input_keys[0])
    text = task if key == ORIGINAL_PROBLEM else memory[key]
    code, _rule = ctx.benchmark.extract(text, ctx.problem) if ctx.benchmark.domain == "code" else (None, None)
    if code is None:     # not a code task: pull the python blocks as the release does
        blocks = re.findall(r"```(?:python|py|Python)?\s*(.*?)\s*```", text, re.DOTALL)
        code = "\n\n".join(blocks)
    info: dict[str, Any] = {"ledger_stage": None, "tested_key": key}
    if not str(code or "").strip():
        info["status"] = "no_code"
        return "No Python code blocks found in the solution.", info
    head = f"Extracted Code:\n```python\n{code}\n```\n\n"
    offered = any(t.name == "run_public_tests" for t in ctx.tools)
    if opts.test_code == "off" or not offered:
        info["status"] = "not_run"
        return head + ("Execution Status: Not run\nResult: no code execution is available for this task (TEST_CODE "
                       "runs only the tests a code task's text shows, in the harness sandbox)."), info
    res = await ctx.benchmark.run_public_tests(text, ctx.problem)
    if res is None:
        info["status"] = "no_tests"
        return head + "Execution Status: Not run\nResult: the task shows no tests to run.", info
    info.update({"status": "ran", "passed": res["passed"], "total": res["total"]})
    if res["passed"] == res["total"]:
        return head + f"Execution Status: Success\nResult: passed {res['passed']}/{res['total']} tests shown in " \
                      f"the task", info
    fails = [f"{r['test']}\n  -> {r['status']}: {(r.get('error') or '').strip()[-300:]}"
             for r in res["results"] if not r["passed"]]
    return head + f"**Execution Failed**\n\nError Details:\npassed {res['passed']}/{res['total']} tests shown in " \
                  f"the task; failing:\n" + "\n".join(fails), info
