"""Token F1: SQuAD F1, AFlow's DROP F1 and the official DROP F1, with hand-checked numbers."""
from __future__ import annotations

import sys

import pytest

from agentic_repro.evaluators import text_f1
from agentic_repro.evaluators.text_f1 import (drop_em_f1_official, drop_f1_aflow, drop_f1_official, hotpot_f1_official, max_f1,
                                normalize_answer, token_f1)


def test_normalize_answer() -> None:
    assert normalize_answer("The Cat, sat!") == "cat sat"
    assert normalize_answer("  An   apple  a day ") == "apple day"
    assert normalize_answer("Theory") == "theory"  # only whole-word articles go


def test_token_f1_by_hand() -> None:
    # pred [cat, sat] vs gold [cat, sat, down]: P = 2/2, R = 2/3, F1 = 2PR/(P+R) = 0.8
    assert token_f1("the cat sat", "a cat sat down") == pytest.approx(0.8)
    # repeated tokens count with multiplicity: pred [a1, a1] (P = 1/2) vs gold [a1] (R = 1) -> 2/3
    assert token_f1("x x", "x") == pytest.approx(2 / 3)
    assert token_f1("Paris", "paris.") == 1.0
    assert token_f1("London", "Paris") == 0.0
    assert token_f1("", "") == 1.0 and token_f1("the", "a") == 1.0  # both empty after normalising
    assert token_f1("x", "") == 0.0


def test_max_f1() -> None:
    assert max_f1("Paris", ["France", "paris"]) == 1.0
    assert max_f1("anything", []) == 0.0


def test_drop_f1_aflow_scores_the_whole_prediction() -> None:
    # "4 touchdowns" vs "4": P = 1/2, R = 1 -> 2/3; vs "four": 0; best 2/3
    assert drop_f1_aflow("4 touchdowns", "4|four") == pytest.approx(2 / 3)
    assert drop_f1_aflow("four", "4| four ") == 1.0
    # the prediction is NOT split on "|": "4|5" normalises to the single token "45"
    assert drop_f1_aflow("4|5", "4") == 0.0


def test_drop_official_numbers_are_normalised() -> None:
    assert drop_f1_official("4", ["4"]) == 1.0
    assert drop_f1_official("4.0", ["4"]) == 1.0  # "4.0" and "4" are both 4.0
    assert token_f1("4.0", "4") == 0.0  # SQuAD F1 sees "40" vs "4"
    assert drop_f1_official("1,000", ["1000"]) == 1.0


def test_drop_official_zero_when_numbers_disagree() -> None:
    # bags {5.0, yards} vs {4.0, yards}: the gold has a number the prediction lacks -> 0
    assert drop_f1_official("5 yards", ["4 yards"]) == 0.0
    assert token_f1("5 yards", "4 yards") == pytest.approx(0.5)


def test_drop_official_partial_spans_and_hyphens() -> None:
    # {bears} vs {chicago, bears}: P = 1, R = 1/2 -> 2/3, rounded to 0.67 as the official script does
    assert drop_f1_official("the Bears", ["Chicago Bears"]) == 0.67
    assert drop_f1_official("well-known", ["well known"]) == 1.0  # tokens split on hyphens


def test_drop_official_multi_span_alignment() -> None:
    # bags pred [{alice}, {bob}] vs gold [{bob}, {carol}]: best one-to-one alignment bob-bob (1),
    # carol-alice (0) -> mean 0.5; not an exact match
    assert drop_em_f1_official(["Alice", "Bob"], [["Bob", "Carol"]]) == (0.0, 0.5)
    assert drop_em_f1_official(["Alice", "Bob"], [["bob", "alice"]]) == (1.0, 1.0)
    # one predicted span for two gold spans: per-bag [1, 0] -> 0.5
    assert drop_f1_official("Bob", [["Bob", "Carol"]]) == 0.5


def test_drop_official_takes_the_best_gold() -> None:
    assert drop_f1_official("4", ["four", "4"]) == 1.0
    assert drop_f1_official("x", []) == 0.0


def test_alignment_without_scipy(monkeypatch: pytest.MonkeyPatch) -> None:
    with_scipy = text_f1._assign([[0.0, 1.0], [1.0, 0.2]])
    monkeypatch.setitem(sys.modules, "scipy.optimize", None)  # import now raises ImportError
    assert sorted(text_f1._assign([[0.0, 1.0], [1.0, 0.2]])) == sorted(with_scipy) == [(0, 1), (1, 0)]
    # 3 gold bags, 2 predicted: the two best distinct pairs win
    pairs = text_f1._assign([[0.1, 0.9], [0.8, 0.7], [0.0, 0.0]])
    assert sorted(pairs) == [(0, 1), (1, 0)]
    assert drop_em_f1_official(["Alice", "Bob"], [["Bob", "Carol"]]) == (0.0, 0.5)


def test_hotpot_official_yes_no_rule() -> None:
    # "yes it is" vs "yes": SQuAD F1 P = 1/3, R = 1 -> 0.5; the official rule zeroes it (sides differ, one is "yes")
    assert token_f1("yes it is", "yes") == pytest.approx(0.5)
    assert hotpot_f1_official("yes it is", "yes") == 0.0
    assert hotpot_f1_official("Yes.", "yes") == 1.0
    assert hotpot_f1_official("no", "yes") == 0.0
    # the rule also applies when the PREDICTION is the special token: "no" vs "no way": SQuAD 2/3, official 0
    assert token_f1("no", "no way") == pytest.approx(2 / 3)
    assert hotpot_f1_official("no", "no way") == 0.0
    # otherwise it is SQuAD F1: [cat, sat] vs [cat, sat, down] -> 0.8
    assert hotpot_f1_official("the cat sat", "a cat sat down") == pytest.approx(0.8)
    assert hotpot_f1_official("", "") == 0.0  # the official script has no "both empty" case: no common token


def test_hotpotqa_score_reports_both_f1() -> None:
    import asyncio

    from agentic_repro.evaluators.qa_tasks import HotpotQA
    from agentic_repro.harness.types import Problem

    bench = HotpotQA({"name": "hotpotqa"})
    problem = Problem(id="h1", index=0, fields={"question": "q", "context": ""}, gold="yes", benchmark="hotpotqa")
    score = asyncio.run(bench.score("Answer: yes it is", problem))
    assert score.value == pytest.approx(0.5)  # the A.4 headline
    assert score.details["f1_official"] == 0.0
