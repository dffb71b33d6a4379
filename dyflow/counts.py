"""How often DyFlow's designer failed and its answer came from a fallback, per problem and per run.

Why: a stage the designer could not design is spent silently (the loop goes on), and when no terminal operator
ran, ``no_answer=last_output`` answers with the latest output, which can be a REVIEW_SOLUTION verdict text.
Those answers are scored as DyFlow's, so every prediction's trace counts them (``trace.counts``) and the tables
sum them from ``predictions.jsonl`` and show them under the row (the method config's ``run_counts`` names :func:`run_counts`, which the runner
sums into ``metrics.json`` ``method_counts``).
"""
from __future__ import annotations

from typing import Any
from collections.abc import Iterable

KEYS = ("invalid_designs", "stages_given_up", "fallback_answers", "review_answers")


def problem_counts(trace: dict[str, Any]) -> dict[str, int]:
    """``invalid_designs``: designer replies that could not be used (each one re-asked or, the last, given up);
    ``stages_given_up``: planning steps spent with no valid stage after the re-asks; ``fallback_answers``: 1 when
    the answer is not a terminal operator's (``answer_from`` last_output / last_any_output); ``review_answers``: 1
    when that answer is a REVIEW_SOLUTION's text."""
    stages = trace.get("stages") or []
    fallback = str(trace.get("answer_from") or "").startswith("last_")   # last_output | last_any_output (+...)
    return {"invalid_designs": sum(1 for st in stages for a in st.get("attempts") or [] if a.get("status") == "invalid"),
            "stages_given_up": sum(1 for st in stages if st.get("status") == "design_failed"),
            "fallback_answers": int(fallback),
            "review_answers": int(fallback and trace.get("answer_template") == "REVIEW_SOLUTION")}


def run_counts(predictions: Iterable[dict[str, Any]]) -> dict[str, int]:
    """Sums over the answered problems (an errored problem is not scored, so not counted), plus ``problems``."""
    out = dict.fromkeys(KEYS, 0) | {"problems": 0}
    for p in predictions:
        if p.get("status") == "error":
            continue
        t = p.get("trace") or {}
        c = t.get("counts") if isinstance(t.get("counts"), dict) else problem_counts(t)
        out["problems"] += 1
        for k in KEYS:
            out[k] += int(c.get(k) or 0)
    return out


def note(c: dict[str, int]) -> str:
    """The text under a DyFlow row's cell."""
    return (f"{c['invalid_designs']} invalid designs, {c['stages_given_up']} stages given up, "
            f"{c['fallback_answers']} fallback answers ({c['review_answers']} a review)")
