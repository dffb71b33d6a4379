"""The prompts of DenoiseFlow appendix G (G.1 understanding, G.2 solution, G.3 verification, G.4 refinement).

Wording follows the appendix; where our benchmarks need a fixed answer format for scoring, the
benchmark's ``answer_instruction`` is appended (it is part of every method's prompt in this harness).
Two additions are named options (``denoiseflow/README.md``): the "Problem analysis" block in G.2
(``solve_analysis``: it carries the E.4 branch seed) and the "keep earlier steps" / "uncertain aspects"
blocks in G.4 (``refine_keep_steps``, ``refine_enforced_slots``). Off, the prompt is the appendix text.
"""
from __future__ import annotations

import json
import re
from typing import Any

from agentic_repro.harness.view import ProblemView

UNDERSTAND_MATH = """You are analyzing a problem to extract its semantic structure.

Problem: {problem_text}

Analyze and respond in JSON format:
{{
  "goal": "What quantity/output is requested",
  "constraints": ["List of conditions to satisfy"],
  "inputs": ["Given values and their meanings"],
  "outputs": {{
    "answer_form": "number|expression|code|text",
    "units": "unit if applicable, else null",
    "format": "Expected output format"
  }},
  "plan": ["Step 1", "Step 2", ...],
  "complexity": "low|medium|high"
}}
Be precise and exhaustive in listing constraints."""

UNDERSTAND_QA = """You are analyzing a question that requires multi-step reasoning over the given context.

Context: {context}

Question: {question}

Analyze and respond in JSON format:
{{
  "question_type": "factoid|yesno|comparison|count",
  "answer_form": "entity|number|yes/no|list",
  "required_hops": [
    {{"hop": 1, "info": "What to find first"}},
    {{"hop": 2, "info": "What to find next"}}
  ],
  "key_entities": ["Entity mentions to track"],
  "reasoning_chain": "Brief logical chain"
}}"""

SOLVE_MATH = """Solve the following math problem step by step.

Problem: {problem_text}
{analysis}
Requirements:
- Show all calculation steps clearly
- State any assumptions made
- Final answer format: {answer_form}

Think through the problem systematically, then provide your solution. {answer_instruction}"""

SOLVE_CODE = """Write a Python function to solve the task.

Task: {problem_text}
{analysis}
Requirements:
- Function signature: {function_signature}
- Handle edge cases appropriately
- Code should be clean and efficient

```python
{function_signature}
    # Your implementation here
```
{answer_instruction}"""

SOLVE_QA = """Answer the question based on the context.

Context: {context}

Question: {question}
{analysis}
Instructions:
- Find relevant evidence in the context
- Chain the evidence logically
- Provide a concise answer
- Answer format: {answer_form}
{answer_instruction}

Evidence and reasoning:"""

VERIFY_MATH = """Verify if the answer is correct.

Problem: {problem_text}

Candidate Answer: {answer}

Expected Format: {answer_form}

Verification checklist:
1. Does the answer match the expected format?
2. Are all calculations mathematically correct?
3. Does the answer satisfy all constraints?
4. Is the final value reasonable?

Respond in JSON:
{{
  "verdict": "PASS" or "FAIL",
  "checks": {{"format_ok": true/false, "math_ok": true/false, "constraints_ok": true/false, "reasonable": true/false}},
  "reason": "Brief explanation",
  "confidence": 0.0-1.0
}}"""

VERIFY_QA = """Verify if the answer is supported by context.

Context: {context}

Question: {question}

Candidate Answer: {answer}

Verification checklist:
1. Is the answer directly supported by context?
2. Does it answer what was asked?
3. Is the answer complete (not partial)?
4. Quote supporting evidence if found.

Respond in JSON:
{{
  "verdict": "PASS" or "FAIL",
  "evidence": "Quoted text from context",
  "reason": "Brief explanation",
  "confidence": 0.0-1.0
}}"""

REFINE = """The previous solution failed verification.

Problem: {problem_text}

Previous Attempt: {previous_answer}

Failure Analysis:
- Verdict: {verdict}
- Reason: {failure_reason}
- Root Cause: {root_cause}
- Affected Step: {step_description}
{keep}{enforced}
Instructions:
1. Focus on fixing the identified root cause
2. Do NOT repeat the same mistake
3. Re-derive from the problematic step
4. Verify your fix addresses the issue
{answer_instruction}

Corrected solution:"""

# Full Restart ablation (Reflexion-style global regeneration): appended to every solution prompt of the
# fresh Stage 1 + Stage 2 run as its episodic memory; no localisation.
RESTART_MEMORY = """Memory of a previous attempt that failed verification:
Previous Attempt: {previous_answer}
Verdict: {verdict}
Reason: {failure_reason}
Reflect briefly on what went wrong, then solve the whole problem again from the beginning."""


def qa_parts(problem: ProblemView, rendered: str) -> tuple[str, str]:
    """(context, question) for QA prompts; falls back to the rendered task as the question."""
    f = problem.fields
    if "question" in f:
        return str(f.get("context") or ""), str(f["question"])
    return "", rendered


def function_signature(problem: ProblemView, rendered: str) -> str:
    m = re.search(r"^\s*(def [A-Za-z_][A-Za-z0-9_]*\s*\(.*?\)\s*(->\s*[^:]+)?:)", rendered, re.MULTILINE)
    if m:
        return m.group(1).strip()
    entry = problem.fields.get("entry_point") or "solution"   # MBPP: the name the task text's example test calls
    return f"def {entry}(...):"


def analysis_block(seed: dict[str, Any] | None, domain: str) -> str:
    """The branch seed (an understanding) as a short guide inside the solution prompt."""
    if not seed:
        return ""
    if domain == "qa":
        keys = ["question_type", "answer_form", "required_hops", "key_entities", "reasoning_chain"]
    else:
        keys = ["goal", "constraints", "inputs", "outputs", "plan"]
    kept = {k: seed[k] for k in keys if k in seed and seed[k] not in (None, "", [], {})}
    if not kept:
        return ""
    return "\nProblem analysis (use it as a guide):\n" + json.dumps(kept, ensure_ascii=False, indent=1)[:2500] + "\n"
