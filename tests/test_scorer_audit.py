"""Every deterministic scorer on adversarial model output (issue 20 item 1): malformed output is a score in
[0, 1] (a wrong answer), never an exception out of the scorer. An exception would make the problem an
error -- the verdict for *our* failures (ScorerFailure), not for a model that wrote garbage."""
from __future__ import annotations

import asyncio
import random

import pytest

from agentic_repro.evaluators.finqa import FinQA
from agentic_repro.evaluators.livebench import LiveBenchReasoning
from agentic_repro.evaluators.math_tasks import GSM8K, MATH
from agentic_repro.evaluators.pubmedqa import PubMedQA
from agentic_repro.evaluators.qa_tasks import DROP, HotpotQA
from agentic_repro.evaluators.socialmaze import SocialMaze
from agentic_repro.evaluators.strategyqa import StrategyQA
from agentic_repro.harness.types import Problem

NASTY = ["", " ", "9" * 5000, "Final Criminal: " + "9" * 5000 + "\nMy role: investigator", "\\boxed{" * 3000,
         "}" * 3000, "{" * 3000 + "1" + "}" * 3000, "\\frac{" * 2000, "\u0663\u0664", "1/0", "#### 1/0",
         "Answer: 1e999", "Program: exp(-8, 0.5)", "Program: exp(-8, 0.5), greater(#0, 1)", "Program: add(#x, 1)",
         "Program: divide(1, 0)", "Program: " + "add(1, 2), " * 300 + "add(#0, 1)", "Program: table_sum(e, none)",
         "<solution></solution>", "<solution>,,,,,</solution>", "**" * 1000, "***x***", "\x00\x01", "\u202e",
         "Answer: " + "-" * 1000, "[[" * 1000, "1,000,000,000,000,000,000,000.5", "$-$-$", "answer is: \u221e",
         "\\boxed{\\begin{pmatrix}" + "1&" * 300 + "\\end{pmatrix}}", "Answer: nan", "Answer: inf%", "0." * 1000]
_rng = random.Random(0)
RANDOM = ["".join(_rng.choice("0123456789.,-+/%$#(){}[]\\*_<>abcx^ \n") for _ in range(_rng.randint(1, 80)))
          for _ in range(150)]


def _p(bench, fields, gold):
    return Problem(id="x", index=0, fields=fields, gold=gold, benchmark=bench)


CASES = {
    "gsm8k": (GSM8K({"name": "gsm8k", "split": "test"}), _p("gsm8k", {"question": "q"}, "5")),
    "finqa": (FinQA({"name": "finqa", "split": "test"}),
              _p("finqa", {"table": [["", "a"], ["r", "$ 5"], ["e"]], "program": "add(1, 2)", "question": "q",
                           "pre_text": [], "post_text": []}, 3.0)),
    "livebench-spatial": (LiveBenchReasoning({"name": "lb", "split": "test"}),
                          _p("lb", {"task": "spatial", "release_date": "2024-06-24"}, "3")),
    "livebench-web-of-lies": (LiveBenchReasoning({"name": "lb", "split": "test"}),
                              _p("lb", {"task": "web_of_lies_v2", "release_date": "2024-06-24"}, "yes, no, yes")),
    "livebench-zebra-old": (LiveBenchReasoning({"name": "lb", "split": "test"}),
                            _p("lb", {"task": "zebra_puzzle", "release_date": "2024-06-24"}, "red")),
    "livebench-zebra-new": (LiveBenchReasoning({"name": "lb", "split": "test"}),
                            _p("lb", {"task": "zebra_puzzle", "release_date": "2025-01-01"}, "a, b-c, d")),
    "pubmedqa": (PubMedQA({"name": "pubmedqa", "split": "test"}), _p("pubmedqa", {}, "yes")),
    "socialmaze": (SocialMaze({"name": "sm", "split": "test"}), _p("sm", {}, {"criminal": 2, "role": "investigator"})),
    "strategyqa": (StrategyQA({"name": "sqa", "split": "dev"}), _p("sqa", {}, True)),
    "hotpotqa": (HotpotQA({"name": "hotpotqa", "split": "test"}), _p("hotpotqa", {"context": "", "question": "q"},
                                                                     "the answer")),
    "drop-aflow": (DROP({"name": "drop", "split": "test", "f1_mode": "aflow"}), _p("drop", {"passage": "p"}, "12|twelve")),
    "drop-official": (DROP({"name": "drop", "split": "test", "f1_mode": "official"}),
                      _p("drop", {"passage": "p"}, "12|twelve")),
    "math-aflow": (MATH({"name": "math", "split": "test", "equivalence": "aflow", "symbolic_timeout_s": 5}),
                   _p("math", {"problem": "p"}, "\\frac{1}{2}")),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_malformed_output_is_a_score_never_an_exception(name):
    bench, problem = CASES[name]
    for text in NASTY + (RANDOM if not name.startswith("math") else RANDOM[:20]):   # sympy children are slow
        s = asyncio.run(bench.score(text, problem))
        assert 0.0 <= s.value <= 1.0, (name, text[:60])
        bench.answer_key(s.extracted)   # voting reads the extraction too


def test_math_verify_on_malformed_output_is_a_verdict():
    bench = MATH({"name": "math", "split": "test", "symbolic_timeout_s": 5})
    problem = _p("math", {"problem": "p"}, "\\frac{1}{2}")
    verdicts = {asyncio.run(bench.score(t, problem)).details["verdict"] for t in NASTY}
    assert verdicts <= {"no_answer", "different", "equivalent"}


def test_code_answer_keys_survive_programs_too_deep_for_the_parser():
    """Voting methods key code answers by their AST; a program nested too deep for Python's parser (a
    RecursionError or MemoryError from ast.parse) crashed the method instead of being compared as text."""
    from agentic_repro.evaluators.code_tasks import HumanEval

    bench = HumanEval({"name": "humaneval", "split": "test"})
    for code in ("-" * 100000 + "1", "x = " + "a." * 100000 + "b", "def f(:\n", "x\x00"):
        key = bench.answer_key(code)
        assert key == " ".join(code.split())
    assert bench.answer_key("x  =  1") == bench.answer_key("x = 1")


def test_math_answer_key_survives_nesting_deeper_than_the_stack():
    """A \\frac nested 1,500 deep made normalize_math raise RecursionError in answer_key (voting methods)."""
    bench = MATH({"name": "math", "split": "test"})
    deep = "\\frac{" * 1500 + "1" + "}{2}" * 1500
    assert bench.answer_key(deep) == deep
    assert bench.answer_key("\\frac12") == bench.answer_key("\\frac{1}{2}")
