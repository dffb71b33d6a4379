"""ALFWorld with the real engine (alfworld 0.4.2 + textworld) on the real games: the splits, the put -> move
rewrite, stored walkthroughs replayed to wins, wrong actions that do not win."""
from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
import yaml

from agentic_repro.envs.alfworld import ALFWorld, ALFWorldEngine, rewrite_action, task_type
from agentic_repro.evaluators.data import data_dir
from agentic_repro.harness.types import Problem

CFG = yaml.safe_load((Path(__file__).parents[1] / "configs" / "benchmark" / "alfworld.yaml").read_text())


def walkthrough(problem_id: str) -> list[str]:
    game = data_dir() / CFG["games_dir"] / problem_id / "game.tw-pddl"
    return json.loads(game.read_text())["walkthrough"]


def test_rewrite_put_to_move():
    assert rewrite_action("put mug 1 in/on coffeemachine 1", "put_to_move") == "move mug 1 to coffeemachine 1"
    assert rewrite_action("put apple 2 in fridge 1", "put_to_move") == "move apple 2 to fridge 1"
    assert rewrite_action("put pen 1 on desk 2", "put_to_move") == "move pen 1 to desk 2"
    assert rewrite_action("go to desk 1", "put_to_move") == "go to desk 1"
    assert rewrite_action("put mug 1 in/on coffeemachine 1", "none") == "put mug 1 in/on coffeemachine 1"
    with pytest.raises(ValueError):
        rewrite_action("look", "sometimes")


@pytest.mark.parametrize("split,n", [("valid_unseen", 134), ("valid_seen", 140)])
def test_splits_are_the_official_games(split, n):
    problems, info = ALFWorld({**CFG, "split": split}).load()
    assert len(problems) == n == info.total and len({p.id for p in problems}) == n
    assert all(p.id.startswith(split + "/") and p.gold is None for p in problems)
    assert set(problems[0].fields) == {"split", "task_type"}  # nothing of the solution
    if split == "valid_unseen":  # the ReAct paper's counts
        counts = Counter(p.fields["task_type"] for p in problems)
        assert [counts[t] for t in ("pick_and_place_simple", "pick_clean_then_place_in_recep",
                                    "pick_heat_then_place_in_recep", "pick_cool_then_place_in_recep",
                                    "look_at_obj_in_light", "pick_two_obj_and_place")] == [24, 31, 23, 21, 18, 17]


def test_task_type_from_the_folder():
    assert task_type("valid_seen/pick_two_obj_and_place-Pen-None-Desk-1/trial_x") == "pick_two_obj_and_place"


@pytest.fixture(scope="module")
def engine():
    eng = ALFWorldEngine()
    yield eng
    eng.close()


def _problems(split: str, k: int) -> list[Problem]:
    problems, _ = ALFWorld({**CFG, "split": split}).load()
    step = len(problems) // k
    return [problems[i * step] for i in range(k)]  # spread over task types


@pytest.mark.parametrize("split", ["valid_unseen", "valid_seen"])
def test_stored_walkthroughs_win(engine, split):
    for problem in _problems(split, 2):
        first = engine.reset(problem, 0)
        assert "Your task is to:" in first.observation and first.actions and not first.done
        for action in walkthrough(problem.id):
            res = engine.step(action)
        assert res.done and res.info["won"] and res.info["success"] and res.reward == 1.0, problem.id


def test_wrong_actions_do_not_win(engine):
    problem = _problems("valid_unseen", 1)[0]
    engine.reset(problem, 0)
    for action in ["look", "inventory", "go to nowhere 9", "take everything"]:
        res = engine.step(action)
        assert not res.done and not res.info["won"] and res.reward == 0.0
    assert res.observation == "Nothing happens."


def test_old_put_form_wins_only_with_the_rewrite():
    problems, _ = ALFWorld({**CFG, "split": "valid_unseen"}).load()
    problem = next(p for p in problems if p.fields["task_type"] == "pick_and_place_simple")
    old_form = [f"put {a[5:].replace(' to ', ' in/on ', 1)}" if a.startswith("move ") else a
                for a in walkthrough(problem.id)]
    assert any(a.startswith("put ") for a in old_form)
    for rule, wins in (("put_to_move", True), ("none", False)):
        eng = ALFWorldEngine(action_rewrite=rule)
        eng.reset(problem, 0)
        for action in old_form:
            res = eng.step(action)
        eng.close()
        assert res.info["won"] is wins, rule
        if wins:
            assert res.info["rewritten_from"].startswith("put ") and res.info["sent"].startswith("move ")
