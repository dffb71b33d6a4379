"""Answer-extraction filters: values and the name of the rule that fired."""
from __future__ import annotations

import pytest

from agentic_repro.evaluators import extract as ex


def test_version_is_recorded() -> None:
    assert ex.EXTRACTION_VERSION == "2"


@pytest.mark.parametrize("answer, gold", [
    ("Natalia sold 48/2 = <<48/2=24>>24 clips in May.\n#### 72", "72"),
    ("He pays 1,000 + 200\n#### 1,200", "1200"),
    ("#### -3", "-3"),
    ("It is 2.5 hours\n#### 2.5", "2.5"),
])
def test_gsm8k_gold(answer: str, gold: str) -> None:
    assert ex.gsm8k_gold(answer) == gold


@pytest.mark.parametrize("text, value, rule", [
    ("so 3 + 4 = 7 and then 7 * 2 = 14. The answer is 14.", "14", "answer_is"),
    ("Total: $1,234.50 in all.", "1234.50", "last_number"),
    ("We get 10 apples.\n#### 12", "12", "hash"),
    ("#### $1,000.", "1000", "hash"),
    ("It is 5, so the answer is \\boxed{18}. Then 20.", "18", "boxed"),
    ("small models box: \\boxed{\\$1,250} #### 7", "1250", "boxed"),
    ("The result is \\boxed{\\frac{3}{4}}", "3/4", "boxed"),
    ("she has -5 dollars", "-5", "last_number"),
    ("He ate 3/4 of the pie", "3/4", "last_number"),
    ("The answer is: **42**", "42", "answer_is"),
    ("decimals like .5 count", ".5", "last_number"),
    ("x2 is not a number but 9 is", "9", "last_number"),
    ("no numbers here", None, "none"),
    ("", None, "none"),
])
def test_last_number(text: str, value: str | None, rule: str) -> None:
    assert ex.last_number(text) == (value, rule)


def test_normalize_number() -> None:
    assert ex.normalize_number("1,000") == 1000.0
    assert ex.normalize_number("$5.") == 5.0
    assert ex.normalize_number("3/4") == 0.75
    assert ex.normalize_number("-3/4") == -0.75
    assert ex.normalize_number("\\frac{1}{4}") == 0.25
    assert ex.normalize_number("50%") == 50.0
    assert ex.normalize_number("\u22122") == -2.0
    assert ex.normalize_number("abc") is None
    assert ex.normalize_number("1/0") is None
    assert ex.normalize_number(None) is None


@pytest.mark.parametrize("text, value, rule", [
    ("so $x = \\boxed{\\frac{1}{2}}$.", "\\frac{1}{2}", "boxed"),
    ("first \\boxed{1} then \\boxed{\\left(2, \\frac{\\sqrt{3}}{2}\\right)}", "\\left(2, \\frac{\\sqrt{3}}{2}\\right)", "boxed"),
    ("nested \\boxed{\\{1, \\{2\\}\\}} done", "\\{1, \\{2\\}\\}", "boxed"),
    ("\\fbox{A}", "A", "boxed"),
    ("The answer is $\\boxed 5$.", "5", "boxed"),
    ("so the final answer is $7$. I hope", "7", "final_answer"),
    ("we find $x=2$ and then $y = 3$", "y = 3", "last_math"),
    ("display \\[ z^2 \\] end", "z^2", "last_math"),
    ("no math at all\nJust 12.\n\n", "Just 12", "last_line"),
    ("", None, "none"),
])
def test_last_boxed(text: str, value: str | None, rule: str) -> None:
    assert ex.last_boxed(text) == (value, rule)


def test_last_boxed_skips_unbalanced_box() -> None:
    assert ex.last_boxed("a \\boxed{3} then cut \\boxed{12") == ("3", "boxed")


def test_boxed_extraction_is_linear_in_the_output() -> None:
    """Thousands of unclosed \\boxed{ (a degenerate generation) scanned the rest of the text once per box:
    3,000 took ~3-7 s per score, in every scorer that reads \\boxed{} (GSM8K, MATH, LiveBench, DROP)."""
    import time

    text = "\\boxed{" * 3000 + " \\boxed{42} " + "{" * 3000
    start = time.perf_counter()
    assert ex.boxed_contents(text) == ["42"] and ex.last_boxed(text) == ("42", "boxed")
    assert time.perf_counter() - start < 1.0
    # the same contents as a scan per box: nesting, escaped braces, unbalanced boxes, "\\boxed 5"
    assert ex.boxed_contents("\\boxed{a{b}c} \\boxed{\\{x\\}} \\fbox{1} \\boxed 5 \\boxed{open") == ["a{b}c", "\\{x\\}", "1", "5"]
    assert ex.boxed_contents("\\boxed{\\boxed{1}}") == ["\\boxed{1}", "1"]


def test_last_boxed_on_a_math_gold_solution() -> None:
    sol = ("The sum is $\\frac{1}{2} + \\frac{1}{3} = \\frac{5}{6}$. "
           "Thus the answer is $\\boxed{\\dfrac{5}{6}}$.")
    assert ex.last_boxed(sol) == ("\\dfrac{5}{6}", "boxed")


def test_extract_code_prefers_the_block_defining_the_entry_point() -> None:
    text = ("Here is a helper:\n```python\ndef helper(x):\n    return x\n```\n"
            "And the solution:\n```python\nimport math\n\ndef solve(n):\n    return helper(n) + 1\n```\n"
            "Example:\n```python\nprint(solve(1))\n```\n")
    code, rule = ex.extract_code(text, "solve")
    assert rule == "fence_entry_point" and code.startswith("import math") and "def solve" in code


def test_extract_code_longest_block_without_entry_point() -> None:
    text = "```py\nx = 1\n```\ntext\n```python\ndef f():\n    return 2\n```\n```bash\npip install foo && echo long long long\n```"
    assert ex.extract_code(text) == ("def f():\n    return 2\n", "fence_longest")


def test_extract_code_raw_untagged_unterminated_and_indented() -> None:
    assert ex.extract_code("def f():\n    return 1\n") == ("def f():\n    return 1\n", "raw")
    assert ex.extract_code("```\ndef g():\n    pass\n```") == ("def g():\n    pass\n", "fence_longest")
    code, rule = ex.extract_code("Sure!\n```python\ndef h():\n    return 3\n")
    assert rule == "fence_unterminated" and code == "def h():\n    return 3\n"
    code, rule = ex.extract_code("1. Do this:\n   ```python\n   def k():\n       return 4\n   ```\n", "k")
    assert rule == "fence_entry_point" and code == "def k():\n    return 4\n"


@pytest.mark.parametrize("text, value, rule", [
    ("Thought: the capital is Paris.\nAnswer: Paris.", "Paris", "answer_marker"),
    ("reasoning...\nFinal Answer: \"The Beatles\"", "The Beatles", "answer_marker"),
    ("ANSWER: **1,234**", "1,234", "answer_marker"),
    ("So the answer:\n\n  Marie Curie\n", "Marie Curie", "answer_marker"),
    ("<answer> yes </answer> Answer: no", "yes", "answer_tag"),
    ("the number is \\boxed{\\text{42 yards}}", "42 yards", "boxed"),
    ("Let me think.\nIt was in 1987.\n", "It was in 1987", "last_line"),
    ("   \n", "", "empty"),
])
def test_extract_short_answer(text: str, value: str, rule: str) -> None:
    assert ex.extract_short_answer(text) == (value, rule)


# ---- GSM8K protocol reading (AFlow/DenoiseFlow A.4: the last number of the output) ----------

@pytest.mark.parametrize("text, value", [
    ("so 3 + 4 = 7 and then 7 * 2 = 14. The answer is 14.", "14"),
    ("The answer is 18. Check: 18 - 2 = 16", "16"),          # no "answer is" priority: last number wins
    ("It is 5, so the answer is \\boxed{18}. Then 20.", "20"),  # no \\boxed{} priority either
    ("Total: $1,234.50 in all.", "1234.50"),
    ("#### 1,000,000", "1000000"),
    ("she has -5 dollars", "-5"),
    ("she has \u22125 dollars", "5"),                          # U+2212 is not a minus in the protocol regex
    ("He ate 3/4 of the pie", "4"),                            # no fractions
    ("x2 is the label", "2"),                                  # no look-behind
    ("+7 degrees", "7"),
    ("no numbers here", None),
    ("", None),
])
def test_last_number_protocol(text: str, value: str | None) -> None:
    assert ex.last_number_protocol(text) == (value, "protocol_last_number" if value is not None else "none")
