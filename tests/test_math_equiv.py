"""MATH answer equivalence: hand-checked pairs, the stage that decided, and the time limit."""
from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from agentic_repro.evaluators.base import ScorerFailure
from agentic_repro.evaluators.math_equiv import STAGES, _latex_to_py, _safe_py, is_equiv, normalize_math


@pytest.mark.parametrize("pred, gold, stage", [
    ("\\frac{1}{2}", "0.5", "numeric"),
    ("\\dfrac{3}{4}", "\\frac34", "normalized"),
    ("10\\text{ cm}", "10", "normalized"),
    ("\\text{(B)}", "B", "normalized"),
    ("90^\\circ", "90", "normalized"),
    ("90^{\\circ}", "90", "normalized"),
    ("x=3", "3", "normalized"),
    ("\\sqrt{2}/2", "\\frac{\\sqrt{2}}{2}", "numeric"),
    ("(1,2)", "(1, 2)", "normalized"),
    ("1,000", "1000", "numeric"),
    ("42", "42", "string"),
    ("\\$18", "18", "normalized"),
    ("50\\%", "50", "normalized"),
    (".5", "0.5", "normalized"),
    ("\\left( 3, \\frac{\\pi}{2} \\right)", "(3,\\frac{\\pi}{2})", "normalized"),
    ("-\\frac{1}{3}", "-1/3", "normalized"),
    ("\\frac{-1}{3}", "-\\frac13", "numeric"),
    ("2\\sqrt{3}", "\\sqrt{12}", "numeric"),
    ("\\frac{\\pi}{2}", "\\pi/2", "numeric"),
    ("\u03c0/2", "\\frac{\\pi}{2}", "numeric"),
    ("x^2+2x+1", "(x+1)^2", "symbolic"),
    ("\\frac{x^2-1}{x-1}", "x+1", "symbolic"),
    ("2, 3", "3,2", "numeric"),
    ("\\{1, 2\\}", "\\{2, 1\\}", "numeric"),
    ("[1,2)", "[1, 2)", "normalized"),
    ("(-\\infty,2)\\cup(3,\\infty)", "(-\\infty, 2) \\cup (3, \\infty)", "normalized"),
    ("\\begin{pmatrix} 1 \\\\ 2 \\end{pmatrix}", "\\begin{pmatrix}1\\\\2\\end{pmatrix}", "string"),  # element-wise
    ("\\begin{pmatrix} 1 \\\\ 2 \\end{pmatrix}", "(1,2)", "string"),
    ("\\begin{pmatrix} \\frac12 & 0 \\\\ 0 & 1 \\end{pmatrix}", "\\begin{pmatrix} 0.5 & 0 \\\\ 0 & 1 \\end{pmatrix}",
     "numeric"),
    ("\\text{Evelyn}", "Evelyn", "normalized"),
])
def test_equivalent(pred: str, gold: str, stage: str) -> None:
    assert is_equiv(pred, gold) == (True, stage)


@pytest.mark.parametrize("pred, gold, stage", [
    ("2", "3", "numeric"),
    ("3.14", "\\pi", "numeric"),
    ("(1,2]", "(1,2)", "normalized"),
    ("(1,2)", "[1,2]", "normalized"),
    ("(1,2)", "(2,1)", "numeric"),
    ("x+1", "x-1", "symbolic"),
    ("\\begin{pmatrix} 1 & 2 \\end{pmatrix}", "\\begin{pmatrix} 1 \\\\ 3 \\end{pmatrix}", "numeric"),
    ("1, 2", "1, 2, 3", "normalized"),
    ("\\text{(A)}", "B", "symbolic"),
])
def test_not_equivalent(pred: str, gold: str, stage: str) -> None:
    assert is_equiv(pred, gold) == (False, stage)


def test_no_prediction() -> None:
    assert is_equiv(None, "1") == (False, "none")


def test_pathological_expression_times_out_quickly_and_that_is_an_error() -> None:
    start = time.monotonic()
    with pytest.raises(ScorerFailure, match="did not decide within benchmark.symbolic_timeout_s=0.5s"):
        is_equiv("9^{9^{9}}", "1", timeout_s=0.5)      # was (False, "timeout"): a 0 with status ok
    # 1 s of CPU (the budget rounded up): ~1 s idle; on a busy machine the wall backstop (10 s here) at the latest
    assert time.monotonic() - start < 15.0
    assert is_equiv("9^{9^{9}}", "1", timeout_s=0.5, on_timeout="wrong") == (False, "timeout")  # the opt-out
    assert is_equiv("2", "2.0", timeout_s=0.5) == (True, "numeric")  # still usable afterwards


def test_a_dead_sympy_child_is_a_scorer_failure(monkeypatch) -> None:
    import os
    import signal

    from agentic_repro.evaluators import math_equiv

    def dies(a, b):
        os.kill(os.getpid(), signal.SIGKILL)   # runs in the forked child only

    monkeypatch.setattr(math_equiv, "_sympy_compare", dies)
    with pytest.raises(ScorerFailure, match="sympy checker could not judge.*child died"):
        is_equiv("x^2", "x*x")                 # was (False, "symbolic")


def test_a_crash_in_the_sympy_child_is_a_scorer_failure(monkeypatch) -> None:
    from agentic_repro.evaluators import math_equiv

    def crashes(a, b):
        raise AttributeError("checker bug")

    monkeypatch.setattr(math_equiv, "_sympy_compare", crashes)
    with pytest.raises(ScorerFailure, match="checker bug"):
        is_equiv("x^2", "x*x")


def test_sympy_rejecting_the_answer_is_still_a_wrong_answer() -> None:
    # model output sympy cannot parse or simplify is a verdict (not equivalent), not a failure
    for pred in ("1+", "x^^2", "(x", "\\frac{x}{", "\\sqrt{}", "x=="):
        assert is_equiv(pred, "x^2")[0] is False, pred


def test_model_output_never_reaches_eval(tmp_path: Path) -> None:
    target = tmp_path / "pwned"
    attack = f"__import__('os').system('touch {target}')"
    assert is_equiv(attack, "0")[0] is False
    assert is_equiv("\\text{x}.__class__", "0")[0] is False
    assert not target.exists()
    assert _safe_py("sqrt(2)/2 + x_1*pi") and not _safe_py("x.__class__") and not _safe_py("lambda: 1")
    assert _latex_to_py("\\frac{\\sqrt{2}}{2}") == "((sqrt(2))/(2))"
    assert _latex_to_py("\\input{/etc/passwd}") is None


def test_works_from_worker_threads() -> None:
    async def main() -> list[tuple[bool, str]]:
        pairs = [("\\sqrt{8}", "2\\sqrt{2}"), ("x^2-1", "(x-1)(x+1)"), ("1", "2")]
        return await asyncio.gather(*(asyncio.to_thread(is_equiv, p, g, 5.0) for p, g in pairs))

    assert asyncio.run(main()) == [(True, "numeric"), (True, "symbolic"), (False, "numeric")]


def test_normalize_math_is_a_usable_key() -> None:
    assert normalize_math("\\dfrac{1}{2}") == normalize_math("\\frac12") == "\\frac{1}{2}"
    assert normalize_math(" x = 5 ") == "5"
    assert normalize_math("\\left(1, 2\\right)") == "(1,2)"
    assert set(STAGES) == {"string", "normalized", "numeric", "symbolic", "timeout", "none"}
