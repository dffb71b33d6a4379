"""MATH equivalence by ``math-verify`` (Hugging Face; the scorer of lighteval and open-r1).

``benchmark.equivalence=math_verify`` (the default). math-verify reads the whole model output
(its own extraction: last ``\\boxed{}`` first, then the last LaTeX / plain expression, so a
prediction whose last line is "... so the total is 5." still yields 5), parses the gold as
LaTeX, and compares: mixed numbers (``4\\frac{2}{3}``), ``\\pm`` against two-element sets,
unions and sets in any order, equations (``y = 2x + 3``; planes up to a scalar factor) and text
answers up to case. ``benchmark.equivalence=aflow`` selects :mod:`evaluators.math_equiv`, the
normalise → numeric → sympy checker of the AFlow/DenoiseFlow A.4 reading.

Both parse and verify run in one killable child (:mod:`evaluators.killable`) under
``symbolic_timeout_s``, with math-verify's own SIGALRM timeouts off (they fail in worker threads).

Where math-verify 0.9.0 is wrong (shown by ``tests/test_math_verify.py``, not patched here):
  * base subscripts are dropped: ``52_8`` parses as 52, so ``52_{10}`` and ``52`` are equivalent
    to ``52_8`` (the value 52_8 is 42; ``42`` is correctly *not* equivalent);
  * ``\\%`` is stripped like a unit: ``50\\%`` equals ``50`` and not ``\\frac12``;
  * a boxed percentage does not parse: ``\\boxed{50\\%}`` yields only the string ``50\\%``, which
    matches no numeric gold (``50``), while ``$50\\%$`` unboxed parses as 50.
"""
from __future__ import annotations

from typing import Any

from evaluators.killable import TIMEOUT, call_with_deadline

__all__ = ["math_verify_equiv", "MATH_VERIFY_VERSION"]

MATH_VERIFY_VERSION = "0.9.0"  # pinned in pyproject.toml; recorded in every score
_LOADED: dict[str, Any] = {}


def _math_verify() -> dict[str, Any]:
    """Import once in the parent, so forked children start with it loaded (~0.4 s otherwise)."""
    if not _LOADED:
        import logging

        import math_verify

        logging.getLogger("math_verify").setLevel(logging.ERROR)  # "timeout disabled" notice: ours is the child
        _LOADED.update(parse=math_verify.parse, verify=math_verify.verify,
                       version=getattr(math_verify, "__version__", MATH_VERIFY_VERSION))
    return _LOADED


def _shown(parsed: list[Any]) -> str | None:
    """What math-verify extracted, as text (its last element is the matched string)."""
    return str(parsed[-1])[:500] if parsed else None


def _check(output: str, gold: str) -> dict[str, Any]:
    """Runs in the child."""
    mv = _math_verify()
    gold_parsed = mv["parse"](f"${gold}$", parsing_timeout=None)
    if not gold_parsed:  # e.g. an answer written in \boxed{} only
        gold_parsed = mv["parse"](f"\\boxed{{{gold}}}", parsing_timeout=None)
    pred_parsed = mv["parse"](output, parsing_timeout=None)
    ok = bool(pred_parsed) and bool(gold_parsed) and bool(mv["verify"](gold_parsed, pred_parsed, timeout_seconds=None))
    return {"equivalent": ok, "pred": _shown(pred_parsed), "gold": _shown(gold_parsed),
            "verdict": "equivalent" if ok else ("no_answer" if not pred_parsed else "different")}


def math_verify_equiv(output: str | None, gold: str, timeout_s: float = 5.0) -> dict[str, Any]:
    """math-verify's verdict on a whole model output against a MATH gold answer.

    Returns ``{"equivalent", "verdict", "pred", "gold"}``; ``verdict`` is ``equivalent``,
    ``different``, ``no_answer`` (nothing parsable in the output), ``timeout`` (the child was
    killed at ``timeout_s``: not equivalent) or ``error`` (math-verify raised: not equivalent).
    """
    if output is None or not str(output).strip():
        return {"equivalent": False, "verdict": "no_answer", "pred": None, "gold": str(gold)}
    _math_verify()
    try:
        result = call_with_deadline(_check, (str(output), str(gold)), timeout_s)
    except RuntimeError as exc:
        return {"equivalent": False, "verdict": "error", "pred": None, "gold": str(gold), "error": str(exc)[:300]}
    if result is TIMEOUT:
        return {"equivalent": False, "verdict": "timeout", "pred": None, "gold": str(gold)}
    return result
