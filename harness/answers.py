"""Whether a reply *states* a final answer in the benchmark's format, or only lets one be guessed from unmarked text.

Shared by methods that stop or re-ask on it (Self-Reflection's step loop, DynaGraph's final E_expr check); it lives
in the harness so that neither method package imports the other.
"""
from __future__ import annotations

from agentic_repro.harness.context import ProblemContext

__all__ = ["FALLBACK_RULES", "has_final_answer"]

# extraction rules that only *guess* an answer from unmarked text (see evaluators/extract.py)
FALLBACK_RULES = frozenset({"none", "empty", "last_number", "protocol_last_number", "last_math", "last_line", "raw",
                            "fence_unterminated"})


def has_final_answer(ctx: ProblemContext, text: str) -> bool:
    """True when ``text`` states a final answer in the benchmark's format (not merely a guessable one)."""
    bench = ctx.benchmark
    extracted, rule = bench.extract(text or "", ctx.problem)
    return bench.answer_key(extracted) is not None and rule not in FALLBACK_RULES
