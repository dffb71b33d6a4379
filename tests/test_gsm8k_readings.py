"""GSM8K: the protocol reading is the default, the flexible one is kept, both are recorded."""
from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
import yaml

from agentic_repro.evaluators.jsonl import JSONLBenchmark
from agentic_repro.harness.types import Problem

_CFG = yaml.safe_load((Path(__file__).parents[1] / "configs" / "benchmark" / "gsm8k.yaml").read_text(encoding="utf-8"))


def GSM8K(cfg: dict[str, Any]) -> JSONLBenchmark:  # declared in configs/benchmark/gsm8k.yaml
    return JSONLBenchmark({**_CFG, **cfg})


def _problem(gold: str) -> Problem:
    return Problem(id="g1", index=0, fields={"question": "q"}, gold=gold, benchmark="gsm8k")


def _score(text: str, gold: str, **cfg: object):
    return asyncio.run(GSM8K({"name": "gsm8k", "split": "test", **cfg}).score(text, _problem(gold)))


def test_protocol_is_the_default_and_both_readings_are_recorded() -> None:
    # the answer is 18, then a check computes 16: the protocol reads the last number (16), flexible reads 18
    text = "The answer is 18. Check: 18 - 2 = 16"
    score = _score(text, "18")
    assert score.value == 0.0 and score.extracted == "16" and score.details["extract"] == "protocol"
    r = score.details["readings"]
    assert r["protocol"] == {"extracted": "16", "rule": "protocol_last_number", "correct": False}
    assert r["flexible"] == {"extracted": "18", "rule": "answer_is", "correct": True}
    flex = _score(text, "18", extract="flexible")
    assert flex.value == 1.0 and flex.details["rule"] == "answer_is" and flex.details["readings"] == r


def test_unicode_minus_follows_each_reading() -> None:
    score = _score("She owes \u22125 dollars", "-5")
    assert score.details["readings"]["protocol"]["extracted"] == "5" and score.value == 0.0
    assert score.details["readings"]["flexible"] == {"extracted": "-5", "rule": "last_number", "correct": True}


def test_extract_and_answer_key_follow_the_chosen_reading() -> None:
    bench = GSM8K({"name": "gsm8k", "split": "test"})
    assert bench.extract("\\boxed{7} and then 9", _problem("7")) == ("9", "protocol_last_number")
    flex = GSM8K({"name": "gsm8k", "split": "test", "extract": "flexible"})
    assert flex.extract("\\boxed{7} and then 9", _problem("7")) == ("7", "boxed")
    assert bench.answer_key("1,000") == flex.answer_key("1000.0") == 1000.0


def test_unknown_reading_names_the_key() -> None:
    with pytest.raises(ValueError, match="benchmark.extract='strict'"):
        _score("1", "1", extract="strict")
