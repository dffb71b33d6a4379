"""Every benchmark in configs/benchmark/ on adversarial model output (issue 20 item 1): malformed output is a score in
[0, 1] (a wrong answer), never an exception out of the scorer. An exception would make the problem an error -- the
verdict for *our* failures (ScorerFailure), not for a model that wrote garbage.

The benchmarks are discovered from configs/benchmark/*.yaml (a new YAML file is audited with no edit here), built
from their composed config as a run builds them, and scored on problems loaded from their data (the configured
split). What each kind of benchmark is audited for:

- a text-scored benchmark: every adversarial output scores in [0, 1], and its voting key does not raise;
- a code benchmark: the same for extraction and voting keys, and a few malformed programs score in [0, 1] through
  the sandbox;
- a benchmark whose headline is its judge (``judge.headline: true``): ``score`` refuses (raises), never a number;
- an environment: a method that never played is an error (NoEpisode), never a 0.

OPTIONS and EDGE_PROBLEMS add cases on top (a config's other scoring options; problems the shipped splits lack);
they never decide which benchmarks are audited.
"""
from __future__ import annotations

import asyncio
import random
from pathlib import Path
from typing import Any

import pytest

from agentic_repro.harness.benchmark import Benchmark, NoEpisode, build_benchmark
from agentic_repro.harness.types import Problem

CONFIG_DIR = Path(__file__).resolve().parents[1] / "configs" / "benchmark"
DISCOVERED = sorted(p.stem for p in CONFIG_DIR.glob("*.yaml"))

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
BAD_PROGRAMS = ["", "```python\ndef f(:\n```", "```python\nimport os\nos._exit(0)\n```", "\x00"]

#: Other scoring options of a config, audited beside the shipped one.
OPTIONS: dict[str, list[dict[str, Any]]] = {
    "gsm8k": [{"extract": "flexible"}],
    "drop": [{"f1_mode": "official"}],
    "math": [{"equivalence": "aflow"}],
    "pubmedqa": [{"extraction": "last_label"}],
}


def _p(bench: str, fields: dict[str, Any], gold: Any) -> Problem:
    return Problem(id="edge", index=0, fields=fields, gold=gold, benchmark=bench)


#: Problems a shipped split may lack (release dates that switch LiveBench's zebra scoring; FinQA's file is downloaded
#: by `make data` with internet, so the audit also holds a hand-written one).
EDGE_PROBLEMS: dict[str, list[Problem]] = {
    "livebench": [_p("livebench", {"task": "spatial", "release_date": "2024-06-24"}, "3"),
                  _p("livebench", {"task": "web_of_lies_v2", "release_date": "2024-06-24"}, "yes, no, yes"),
                  _p("livebench", {"task": "zebra_puzzle", "release_date": "2024-06-24"}, "red"),
                  _p("livebench", {"task": "zebra_puzzle", "release_date": "2025-01-01"}, "a, b-c, d")],
    "finqa": [_p("finqa", {"table": [["", "a"], ["r", "$ 5"], ["e"]], "program": "add(1, 2)", "question": "q",
                           "pre_text": [], "post_text": []}, 3.0)],
    "strategyqa": [_p("strategyqa", {}, True)],
    "socialmaze": [_p("socialmaze", {}, {"criminal": 2, "role": "investigator"})],
}


def _build(name: str, **options: Any) -> Benchmark:
    from agentic_repro.harness.compose import compose

    cfg = compose([f"benchmark={name}"])["benchmark"]
    return build_benchmark({**cfg, **options})


def _problems(name: str, bench: Benchmark, n: int) -> list[Problem]:
    """The first ``n`` problems of the configured split, and the edge problems. A benchmark whose data is not
    here fails (run `make data`), unless it has edge problems to audit instead (FinQA's download)."""
    from agentic_repro.evaluators.data import DataMissingError

    try:
        problems = bench.load()[0][:n]
    except DataMissingError:
        if name not in EDGE_PROBLEMS:
            raise
        problems = []
    return problems + EDGE_PROBLEMS.get(name, [])


def _judge_headline(bench: Benchmark) -> bool:
    return bool((bench.cfg.get("judge") or {}).get("headline"))


CASES = [(name, {}) for name in DISCOVERED] + [(name, opt) for name in DISCOVERED for opt in OPTIONS.get(name, [])]


def test_every_config_is_discovered_and_every_option_names_a_config() -> None:
    assert len(DISCOVERED) >= 15 and {"gsm8k", "drop", "math", "humaneval"} <= set(DISCOVERED)
    assert set(OPTIONS) | set(EDGE_PROBLEMS) <= set(DISCOVERED)


@pytest.mark.parametrize("name,options", CASES, ids=[f"{n}{'-' + '-'.join(map(str, o.values())) if o else ''}"
                                                     for n, o in CASES])
def test_malformed_output_is_a_score_never_an_exception(name: str, options: dict[str, Any]) -> None:
    bench = _build(name, **options)
    if bench.is_environment:  # scored from what the environment reported, never from text
        with pytest.raises(NoEpisode):
            asyncio.run(bench.score_episodes([], _p(name, {}, None)))
        return
    if _judge_headline(bench):  # RACE and the like: only the judge scores; the text scorer must refuse
        with pytest.raises(Exception):  # noqa: B017 - any refusal; what matters is that no number comes back
            asyncio.run(bench.score("an article", _p(name, {}, None)))
        return
    slow = bench.domain == "code" or name.startswith("math") or options.get("equivalence")
    problems = _problems(name, bench, 1 if slow else 3)
    assert problems, f"{name}: no problem to audit"
    texts = NASTY[:20] + RANDOM[:5] if slow else NASTY + RANDOM   # sympy/math-verify children and the sandbox are slow
    for problem in problems:
        for text in texts:
            if bench.domain == "code":
                extracted, _rule = bench.extract(text, problem)
                bench.answer_key(extracted)
                continue
            s = asyncio.run(bench.score(text, problem))
            assert 0.0 <= s.value <= 1.0, (name, text[:60])
            assert s.details.get("verdict", "different") in {"no_answer", "different", "equivalent"}  # math-verify's
            bench.answer_key(s.extracted)   # voting reads the extraction too
        if bench.domain == "code":
            for text in BAD_PROGRAMS:
                s = asyncio.run(bench.score(text, problem))
                assert 0.0 <= s.value <= 1.0, (name, text[:60])


def test_code_answer_keys_survive_programs_too_deep_for_the_parser():
    """Voting methods key code answers by their AST; a program nested too deep for Python's parser (a
    RecursionError or MemoryError from ast.parse) crashed the method instead of being compared as text."""
    bench = _build("humaneval")
    for code in ("-" * 100000 + "1", "x = " + "a." * 100000 + "b", "def f(:\n", "x\x00"):
        key = bench.answer_key(code)
        assert key == " ".join(code.split())
    assert bench.answer_key("x  =  1") == bench.answer_key("x = 1")


def test_math_answer_key_survives_nesting_deeper_than_the_stack():
    """A \\frac nested 1,500 deep made normalize_math raise RecursionError in answer_key (voting methods)."""
    bench = _build("math")
    deep = "\\frac{" * 1500 + "1" + "}{2}" * 1500
    assert bench.answer_key(deep) == deep
    assert bench.answer_key("\\frac12") == bench.answer_key("\\frac{1}{2}")
