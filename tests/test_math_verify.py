"""MATH on math-verify (the default) vs the AFlow-style checker, with hand-checked verdicts.

Each row: a model output, the gold answer (as MATH stores it: the last \\boxed{} of the
solution), the verdict a careful human gives, and what the AFlow-style checker says today.
Where math-verify 0.9.0 is wrong, the test pins its documented behaviour (see
evaluators/math_verify_equiv.py) and the human verdict sits next to it.
"""
from __future__ import annotations

import asyncio
import time

import pytest

from evaluators.math_tasks import MATH
from evaluators.math_verify_equiv import math_verify_equiv
from harness.types import Problem

# (class, output, gold, hand verdict, aflow verdict)
CASES = [
    # mixed numbers: 4 2/3 = 14/3, 137 1/2 = 275/2 (= 137.5)
    ("mixed number pred", "\\boxed{4\\frac{2}{3}}", "\\frac{14}{3}", True, False),
    ("mixed number gold", "\\boxed{\\frac{275}{2}}", "137 \\frac{1}{2}", True, False),
    ("mixed number gold, decimal pred", "\\boxed{137.5}", "137 \\frac{1}{2}", True, False),
    ("mixed number, wrong value", "\\boxed{\\frac{8}{3}}", "4\\frac{2}{3}", False, True),  # aflow reads 4*(2/3)
    # unions written in another order
    ("union order", "\\boxed{(3,\\infty)\\cup(-\\infty,1)}", "(-\\infty,1)\\cup(3,\\infty)", True, False),
    ("union, different interval", "\\boxed{(-\\infty,1]\\cup(3,\\infty)}", "(-\\infty,1)\\cup(3,\\infty)", False, False),
    # \pm against two-element sets
    ("pm vs set", "\\boxed{\\pm 2}", "-2, 2", True, False),
    ("set vs pm", "\\boxed{2, -2}", "\\pm 2", True, False),
    ("pm sqrt vs set", "\\boxed{\\pm\\sqrt{3}}", "\\sqrt{3}, -\\sqrt{3}", True, False),
    ("pm, wrong magnitude", "\\boxed{\\pm 3}", "-2, 2", False, False),
    # equations: the same line or plane written differently
    ("line, rhs only", "\\boxed{2x+3}", "y = 2x + 3", True, True),  # aflow drops a short "y ="
    ("line rearranged", "\\boxed{y - 2x = 3}", "y = 2x + 3", True, False),
    ("plane, scalar multiple", "\\boxed{4x+2y-6z=10}", "2x + y - 3z = 5", True, False),
    ("plane, moved constant", "\\boxed{2x - y + 3z = 5}", "2x - y + 3z - 5 = 0", True, False),
    ("plane, different", "\\boxed{2x + y - 3z = 6}", "2x + y - 3z = 5", False, False),
    # base subscripts: 52_8 is 42 in base ten; the question asks for base 8
    ("base, same", "\\boxed{52_8}", "52_8", True, True),
    ("base, value in base ten", "\\boxed{42}", "52_8", False, False),
    ("base, digits without subscript", "\\boxed{52}", "52_8", True, False),
    # text answers that differ only in case
    ("case", "\\boxed{East}", "\\text{east}", True, False),
    ("case in text", "\\boxed{\\text{Monday}}", "\\text{monday}", True, False),
    ("different word", "\\boxed{West}", "\\text{east}", False, False),
    # no \boxed{}: the last line is a sentence ending in the number
    ("sentence", "We add the marbles.\nSo the total number of marbles is 5.", "5", True, False),
    ("sentence, wrong", "We add the marbles.\nSo the total number of marbles is 6.", "5", False, False),
    # percent against a fraction: 50% = 1/2 (the question asks for a fraction or a percent alike)
    ("percent, unboxed vs percent gold", "so it is $50\\%$", "50", True, True),
]

# math-verify 0.9.0 is wrong here (documented in evaluators/math_verify_equiv.py): (output, gold, hand, math-verify)
MATH_VERIFY_WRONG = [
    ("percent vs fraction", "\\boxed{50\\%}", "\\frac12", True, False),      # \% stripped like a unit (50)
    ("fraction vs percent gold", "\\boxed{\\frac12}", "50\\%", True, False),  # gold 50\% read as 50
    ("boxed percent vs number", "\\boxed{50\\%}", "50", True, False),      # \boxed{50\%} does not parse
    ("base ten subscript", "\\boxed{52_{10}}", "52_8", False, True),       # subscripts dropped: 52 == 52
]


def _problem(gold: str) -> Problem:
    return Problem(id="m1", index=0, fields={"problem": "p"}, gold=gold, benchmark="math")


def _score(output: str, gold: str, **cfg: object):
    bench = MATH({"name": "math", "split": "test", **cfg})
    return asyncio.run(bench.score(output, _problem(gold)))


@pytest.mark.parametrize("name, output, gold, hand, aflow", CASES, ids=[c[0] for c in CASES])
def test_math_verify_matches_the_hand_verdict(name: str, output: str, gold: str, hand: bool, aflow: bool) -> None:
    score = _score(output, gold)
    assert score.details["equivalence"] == "math_verify" and score.details["math_verify_version"] == "0.9.0"
    assert bool(score.value) is hand, score


@pytest.mark.parametrize("name, output, gold, hand, aflow", CASES, ids=[c[0] for c in CASES])
def test_aflow_checker_verdicts_are_recorded(name: str, output: str, gold: str, hand: bool, aflow: bool) -> None:
    """The named alternative: what today's checker says on the same rows (wrong wherever aflow != hand)."""
    score = _score(output, gold, equivalence="aflow", symbolic_timeout_s=10.0)
    assert score.details["equivalence"] == "aflow" and "stage" in score.details
    assert bool(score.value) is aflow, score


@pytest.mark.parametrize("name, output, gold, hand, mv", MATH_VERIFY_WRONG, ids=[c[0] for c in MATH_VERIFY_WRONG])
def test_math_verify_documented_errors(name: str, output: str, gold: str, hand: bool, mv: bool) -> None:
    assert hand is not mv  # these are the rows where it is wrong
    assert bool(_score(output, gold).value) is mv


def test_recorded_details() -> None:
    score = _score("So the total is \\boxed{\\frac{14}{3}}.", "4\\frac{2}{3}")
    d = score.details
    assert score.value == 1.0 and d["verdict"] == "equivalent" and d["rule"] == "boxed" and d["boxed"] == "\\frac{14}{3}"
    assert score.extracted == "\\frac{14}{3}" and d["gold_parsed"] == "4\\frac{2}{3}"
    empty = _score("", "1")
    assert empty.value == 0.0 and empty.details["verdict"] == "no_answer"
    with pytest.raises(ValueError, match="benchmark.equivalence='sympy'"):
        _score("1", "1", equivalence="sympy")


def test_math_verify_is_killed_at_the_time_limit() -> None:
    start = time.monotonic()
    res = math_verify_equiv("\\boxed{9^{9^{9}}}", "1", timeout_s=0.5)
    assert res == {"equivalent": False, "verdict": "timeout", "pred": None, "gold": "1"}
    assert time.monotonic() - start < 2.5
    assert math_verify_equiv("\\boxed{2}", "2.0", timeout_s=5.0)["equivalent"]  # still usable afterwards


def test_math_verify_from_worker_threads() -> None:
    async def main() -> list[bool]:
        pairs = [("\\boxed{\\sqrt{8}}", "2\\sqrt{2}"), ("\\boxed{x^2-1}", "(x-1)(x+1)"), ("\\boxed{1}", "2")]
        return [r["equivalent"] for r in
                await asyncio.gather(*(asyncio.to_thread(math_verify_equiv, p, g, 10.0) for p, g in pairs))]

    assert asyncio.run(main()) == [True, True, False]
