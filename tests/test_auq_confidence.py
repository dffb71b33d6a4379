"""AUQ's confidence parser (agents/confidence.py) reads exactly the form the elicitation asks for -- "Your
confidence level (0.0-1.0)" -- and records anything else as missing with its raw text, never an invented number;
and through AUQ the missing value triggers System 2 and stays out of memory and the metrics (issue 20 item 3)."""
from __future__ import annotations

import pytest

from agentic_repro.agents.confidence import ELICITATION, elicit, parse_confidence
from agentic_repro.auq.metrics import trajectory_of
from tests.conftest import run
from tests.doubles import ScriptedBackbone
from tests.test_auq_method import REFLECT, _right, _spec, _steps, _pred, counter, reply  # noqa: F401


def test_the_instruction_asks_for_a_decimal_in_zero_one():
    assert "Your confidence level (0.0-1.0)" in ELICITATION and "%" not in ELICITATION


@pytest.mark.parametrize("text,value", [
    ("0.85", 0.85), (" 0.85 ", 0.85), ("\n0.3\n", 0.3), (".85", 0.85), ("0.", 0.0), ("0", 0.0), ("1", 1.0),
    ("1.0", 1.0), ("1.00", 1.0), ("0.0", 0.0), ("+0.5", 0.5), ("-0", 0.0), ("0.123456", 0.123456),
])
def test_a_plain_decimal_in_zero_one_is_read(text, value):
    got, status, raw = parse_confidence(f"<action>go</action><confidence>{text}</confidence>")
    assert (got, status, raw) == (value, "ok", text.strip())


@pytest.mark.parametrize("text,status", [
    ("0,85", "malformed"),            # decimal comma: was 0.0 with status ok
    ("8/10", "malformed"),            # a fraction: was 0.08
    ("1e-1", "malformed"),            # an exponent: was 1.0
    ("Level 3: 0.85", "malformed"),   # words around the number: was 0.03
    ("2", "out_of_range"),            # a bare number above 1: was 0.02
    ("85", "out_of_range"),           # a 0-100 number: was 0.85 "rescaled_percent"
    ("85%", "malformed"),             # the instruction offers no percent form: was 0.85
    ("0.85%", "malformed"),
    ("1.5", "out_of_range"),
    ("-0.2", "out_of_range"),
    ("0.85 (fairly sure)", "malformed"),
    ("about 0.9", "malformed"),
    ("0.9.", "malformed"),
    ("0.7-0.8", "malformed"),
    ("high", "malformed"),
    ("nan", "malformed"),
    ("inf", "malformed"),
    ("\u0660.\u0668\u0665", "malformed"),  # Arabic-Indic digits: float() would read 0.85
    ("0.85 0.9", "malformed"),
])
def test_every_other_form_is_missing_with_its_raw_text(text, status):
    e = elicit(f"<action>go</action><confidence>{text}</confidence><explanation>e</explanation>")
    assert (e.confidence, e.status, e.text) == (None, status, text)
    assert e.explanation == "e"


def test_a_malformed_confidence_triggers_system_2_and_stays_missing(tmp_path, counter):
    """Through AUQ (dual): "0,85" was read as 0.0 (a low confidence, so System 2 ran for the wrong reason and
    memory showed 0.0); "8/10" was 0.08. Now both are missing: the trigger says so, memory shows "missing", the
    metrics see None."""
    seen = []

    def script(messages, sampling):
        text = messages[-1]["content"]
        seen.append(messages)
        if REFLECT in text:
            return reply(_right(text), "8/10")
        return reply(_right(text), "0,85")

    spec = _spec(tmp_path, counter, [1], "dual", max_refinements=0)
    assert run(spec, ScriptedBackbone(script))["score"] == 1.0
    steps = _steps(spec)
    assert [s["extra"]["confidence"] for s in steps] == [None, None]
    assert all(s["extra"]["auq"]["trigger"] == "missing_confidence" for s in steps)
    assert [s["extra"]["confidence_status"] for s in steps] == ["malformed", "malformed"]
    assert "<confidence>8/10</confidence>" in steps[0]["extra"]["raw"]        # the raw text is kept
    later = "\n".join(m["content"] for m in seen[-1])
    assert "<confidence>missing</confidence>" in later and "<confidence>0.0</confidence>" not in later
    assert trajectory_of(_pred(spec)).confidences == (None, None)
