"""The scorers a benchmark names (``scorer:`` in a JSONL benchmark's config): functions of the model's text and the
gold answer, with the same two outcomes as every scorer here: malformed output is a wrong answer (0, extracted None),
a checker that cannot judge raises :class:`~agentic_repro.harness.benchmark.ScorerFailure` (an error, never a 0).

Each is the scoring rule of the benchmark it came from, moved here unchanged so a YAML benchmark
(:mod:`agentic_repro.evaluators.jsonl`) and a class use the same code: ``numeric`` is GSM8K's, ``f1`` DROP's,
``math`` MATH's; ``exact`` is HotpotQA's answer normalisation compared whole; ``code`` HumanEval's and MBPP's (the
program runs in the sandbox; the sandbox failing is an error, never a 0).
"""
from __future__ import annotations

import ast
import asyncio
from collections.abc import Callable, Hashable
from typing import Any

from agentic_repro.evaluators import extract as ex
from agentic_repro.evaluators.math_equiv import is_equiv, normalize_math
from agentic_repro.evaluators.math_verify_equiv import MATH_VERIFY_VERSION, math_verify_equiv
from agentic_repro.evaluators.text_f1 import drop_f1_aflow, drop_f1_official, normalize_answer
from agentic_repro.harness.types import Score

Extractor = Callable[[str], "tuple[Any, str]"]

F1_MODES = ("aflow", "official")


# ---- numeric (GSM8K) ---------------------------------------------------------------------------

def numeric_key(extracted: Any) -> Hashable | None:
    """A number rounded to 6 places: the voting key (and the comparison) of a numeric answer."""
    value = ex.normalize_number(extracted) if extracted is not None else None
    return None if value is None else round(value, 6)


def numeric_correct(pred: Any, gold: Any) -> bool:
    p = ex.normalize_number(pred) if pred is not None else None
    g = ex.normalize_number(gold)
    return p is not None and g is not None and abs(round(p, 6) - g) <= 1e-6


def score_numeric(text: str, gold: Any, readings: dict[str, Extractor], mode: str) -> Score:
    """Every reading is scored and recorded (as lm-evaluation-harness reports strict-match and flexible-extract
    side by side); ``mode`` (one of them) is the headline."""
    scored = {}
    for name, fn in readings.items():
        pred, rule = fn(text or "")
        scored[name] = {"extracted": pred, "rule": rule, "correct": numeric_correct(pred, gold)}
    chosen = scored[mode]
    return Score(float(chosen["correct"]), chosen["extracted"],
                 {"rule": chosen["rule"], "extract": mode, "readings": scored, "gold": gold})


# ---- F1 (DROP) ---------------------------------------------------------------------------------

def text_key(extracted: Any) -> Hashable | None:
    """The voting key of a short text answer: SQuAD's normalisation (lower case, no articles or punctuation)."""
    if extracted is None:
        return None
    return normalize_answer(str(extracted)) or None


def score_f1(text: str, gold: str, pred: Any, rule: str, f1_mode: str) -> Score:
    """Token F1 of the extracted answer against the ``|``-separated references: ``aflow`` (DenoiseFlow A.4: the
    whole prediction against each reference, max) or ``official`` (the DROP script's number-aware bag F1). The F1
    of the raw output is recorded beside, so the effect of extraction stays visible."""
    if f1_mode == "aflow":
        f1 = drop_f1_aflow(pred or "", gold)
    elif f1_mode == "official":
        f1 = drop_f1_official(pred or "", gold.split("|"))
    else:
        raise ValueError(f"benchmark.f1_mode={f1_mode!r}: choose 'aflow' (DenoiseFlow A.4) or 'official'")
    return Score(f1, pred, {"rule": rule, "f1_mode": f1_mode, "gold": gold,
                            "f1_raw_output": drop_f1_aflow(text or "", gold)})


# ---- exact match -------------------------------------------------------------------------------

def score_exact(text: str, gold: str, pred: Any, rule: str) -> Score:
    """1 when the extracted answer equals one of the ``|``-separated references after SQuAD's normalisation."""
    ok = pred is not None and normalize_answer(str(pred)) in {normalize_answer(g) for g in str(gold).split("|")}
    return Score(float(ok), pred, {"rule": rule, "gold": gold})


# ---- math equivalence (MATH) -------------------------------------------------------------------

def math_key(extracted: Any) -> Hashable | None:
    """The voting key of a math answer: its normalised LaTeX (as text when nested deeper than the stack)."""
    if extracted is None:
        return None
    try:
        return normalize_math(str(extracted))
    except RecursionError:  # nesting deeper than the normaliser's stack: malformed output, keyed as text
        return " ".join(str(extracted).split())


async def score_math(text: str, gold: str, pred: Any, rule: str, *, equivalence: str, timeout: float,
                     on_timeout: str) -> Score:
    """``math_verify`` (math-verify on the whole output) or ``aflow`` (the extracted answer, then normalise ->
    numeric -> sympy); either runs in a killable child under ``timeout`` seconds, and which one ran is recorded.
    A checker that cannot judge raises ScorerFailure (or, killed at the limit, per ``on_timeout``)."""
    if equivalence == "aflow":
        ok, how = await asyncio.to_thread(is_equiv, pred, str(gold), timeout, on_timeout)
        return Score(float(ok), pred, {"equivalence": "aflow", "rule": rule, "stage": how, "gold": gold,
                                       "checker_timeout": on_timeout})
    mv = await asyncio.to_thread(math_verify_equiv, text, str(gold), timeout, on_timeout)
    return Score(float(mv["equivalent"]), mv["pred"],
                 {"equivalence": "math_verify", "math_verify_version": MATH_VERIFY_VERSION,
                  "verdict": mv["verdict"], "gold_parsed": mv["gold"], "rule": rule, "boxed": pred,
                  "gold": gold, "checker_timeout": on_timeout})


# ---- code (HumanEval, MBPP) --------------------------------------------------------------------

class CodeExecutionDisabled(RuntimeError):
    """A code benchmark's score runs generated code, which its config has not allowed (``execute_code: true``)."""


def require_execution(cfg: dict[str, Any], name: str) -> None:
    """Refuse to score by running generated code unless the benchmark's config allows it (``execute_code: true``)."""
    if not cfg.get("execute_code", False):
        raise CodeExecutionDisabled(
            f"benchmark {name} scores by running generated code, which is off: "
            f"set benchmark.execute_code=true to allow it (it runs in a sandboxed subprocess)")


def code_key(extracted: Any) -> Hashable | None:
    """A program's formatting-insensitive identity (its AST): the voting key of a code answer."""
    if not extracted:
        return None
    try:
        return ast.dump(ast.parse(str(extracted)))
    except (SyntaxError, ValueError, RecursionError, MemoryError):  # too deep for the parser: a malformed
        return " ".join(str(extracted).split())                    # program, compared as text


async def score_code(code: str, rule: str, program: Any, *, timeout_s: float, memory_mb: int,
                     record: dict[str, Any] | None = None) -> Score:
    """Run ``program`` (the sandbox's :class:`~agentic_repro.evaluators.sandbox.Program` of ``code`` and the
    hidden tests) and score 1 if it passes. An empty program is a 0 that never runs; a sandbox that could not
    judge raises :class:`~agentic_repro.evaluators.sandbox.SandboxFailure`."""
    from agentic_repro.evaluators.sandbox import SandboxFailure, run_program_async

    record = record or {}
    if not code.strip():
        return Score(0.0, code, {"rule": rule, "status": "empty", **record})
    res = await run_program_async(program, timeout_s=timeout_s, memory_mb=memory_mb)
    if res.infrastructure:  # the sandbox could not judge it: an error for this problem, never a 0
        raise SandboxFailure(res.detail)
    return Score(float(res.passed), code, {"rule": rule, "status": res.status, "duration_s": round(res.duration_s, 3),
                                           "stderr_tail": res.stderr_tail[-500:], **record})

