"""MATH equivalence by ``math-verify`` (Hugging Face; the scorer of lighteval and open-r1).

``benchmark.equivalence=math_verify`` (the default). math-verify reads the whole model output
(its own extraction: last ``\\boxed{}`` first, then the last LaTeX / plain expression, so a
prediction whose last line is "... so the total is 5." still yields 5), parses the gold as
LaTeX, and compares: mixed numbers (``4\\frac{2}{3}``), ``\\pm`` against two-element sets,
unions and sets in any order, equations (``y = 2x + 3``; planes up to a scalar factor) and text
answers up to case. ``benchmark.equivalence=aflow`` selects :mod:`agentic_repro.evaluators.math_equiv`, the
normalise → numeric → sympy checker of the AFlow/DenoiseFlow A.4 reading.

Both parse and verify run in one killable child (:mod:`agentic_repro.evaluators.killable`) under
``symbolic_timeout_s``, with math-verify's own SIGALRM timeouts off (they fail in worker threads).

What is a wrong answer and what is a scorer failure: math-verify's own reading of the output (nothing
it can parse, a comparison it cannot make) is its verdict, ``no_answer`` / ``different`` (0), as in
lighteval. An exception that escapes math-verify, a child that dies without answering, or a gold answer
math-verify cannot parse (none of the 5,000 MATH test golds) means we could not judge: it raises
:class:`~evaluators.base.ScorerFailure`, and the problem is an error. So does a child killed at
``symbolic_timeout_s`` unless ``benchmark.checker_timeout: wrong`` (then it is a 0 with verdict ``timeout``,
lighteval's reading of a timeout).

Where math-verify 0.9.0 is wrong (shown by ``tests/test_math_verify.py``, not patched here):
  * base subscripts are dropped: ``52_8`` parses as 52, so ``52_{10}`` and ``52`` are equivalent
    to ``52_8`` (the value 52_8 is 42; ``42`` is correctly *not* equivalent);
  * ``\\%`` is stripped like a unit: ``50\\%`` equals ``50`` and not ``\\frac12``;
  * a boxed percentage does not parse: ``\\boxed{50\\%}`` yields only the string ``50\\%``, which
    matches no numeric gold (``50``), while ``$50\\%$`` unboxed parses as 50.
"""
from __future__ import annotations

from typing import Any

from agentic_repro.evaluators.base import ScorerFailure
from agentic_repro.evaluators.killable import TIMEOUT, call_with_deadline

__all__ = ["CHECKER_TIMEOUTS", "MATH_VERIFY_VERSION", "math_verify_equiv"]

CHECKER_TIMEOUTS = ("error", "wrong")  # benchmark.checker_timeout: a killed checker is an error | a 0

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


def math_verify_equiv(output: str | None, gold: str, timeout_s: float = 5.0,
                      on_timeout: str = "error") -> dict[str, Any]:
    """math-verify's verdict on a whole model output against a MATH gold answer.

    Returns ``{"equivalent", "verdict", "pred", "gold"}``; ``verdict`` is ``equivalent``,
    ``different`` or ``no_answer`` (nothing parsable in the output), or ``timeout`` with
    ``on_timeout="wrong"``. Raises :class:`ScorerFailure` when it cannot judge (module docstring).
    """
    if on_timeout not in CHECKER_TIMEOUTS:
        raise ValueError(f"benchmark.checker_timeout={on_timeout!r}: choose one of {list(CHECKER_TIMEOUTS)}")
    if output is None or not str(output).strip():
        return {"equivalent": False, "verdict": "no_answer", "pred": None, "gold": str(gold)}
    _math_verify()
    try:
        result = call_with_deadline(_check, (str(output), str(gold)), timeout_s)
    except RuntimeError as exc:
        raise ScorerFailure(f"math-verify {MATH_VERIFY_VERSION} could not judge this answer (the checker raised or "
                            f"its child died): {exc}") from exc
    if result is TIMEOUT:
        if on_timeout == "wrong":
            return {"equivalent": False, "verdict": "timeout", "pred": None, "gold": str(gold)}
        raise ScorerFailure(f"math-verify {MATH_VERIFY_VERSION} did not answer within benchmark.symbolic_timeout_s="
                            f"{timeout_s:g}s (its child was killed); raise the limit, or set "
                            "benchmark.checker_timeout=wrong to count a timeout as a wrong answer")
    if result.get("gold") is None and result.get("verdict") != "no_answer":
        raise ScorerFailure(f"math-verify {MATH_VERIFY_VERSION} cannot parse the gold answer {str(gold)[:200]!r}, "
                            "so no answer to this problem can be judged")
    return result
