"""What the agents know about each environment's text interface (agent side only, never the goal).

A profile cleans an observation the way ReAct's clients did, finds the task sentence in the first observation,
and decides whether a proposed action is admissible (returning the form to send). ALFWorld's "put O in/on R"
is admissible when the engine's "move O to R" is offered (alfworld >= 0.4 renamed it; the engine rewrites it,
envs/alfworld.py). WebShop's ``search[...]`` is admissible when the page offers ``search[<your query>]``.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

_WS = re.compile(r"\s+")


def normalise(action: str | None) -> str:
    """Lower case, single spaces, no surrounding quotes/backticks/brackets-of-the-reply or trailing period."""
    a = _WS.sub(" ", (action or "").strip()).strip()
    a = a.strip("`'\"").strip()
    a = a.removeprefix("> ")
    a = a.rstrip(".").strip()
    return a.lower()


@dataclass(frozen=True)
class Profile:
    """The generic profile: an action is admissible when it equals an offered one after :func:`normalise`."""

    name: str = "generic"
    thought_prefix: str | None = None   # ReAct-style thoughts ("think:" / "think[") are steps but not env actions

    def clean(self, observation: str, first: bool = False) -> str:
        return str(observation)

    def task(self, first_observation: str, rendered: str = "") -> str:
        """The task sentence; the generic profile uses the benchmark's rendered task text when there is one."""
        return (rendered or str(first_observation)).strip()

    def is_thought(self, action: str | None) -> bool:
        return bool(self.thought_prefix and action and action.strip().lower().startswith(self.thought_prefix))

    def admissible(self, action: str | None, actions: list[str] | None) -> str | None:
        """The offered form of ``action`` (what to send), or None when it is not admissible. Without an action
        list every non-empty action is admissible."""
        if not action or not action.strip():
            return None
        if actions is None:
            return action.strip()
        want = normalise(action)
        for a in actions:
            if normalise(a) == want:
                return a
        return None


class ALFWorldProfile(Profile):
    def __init__(self) -> None:
        super().__init__("alfworld", "think:")

    def clean(self, observation: str, first: bool = False) -> str:
        text = str(observation)
        if first and "-= Welcome to TextWorld" in text:
            text = "\n".join(text.split("\n\n")[1:])  # ReAct drops the welcome paragraph
        if text.startswith("You arrive at loc "):
            text = text[text.find(". ") + 2:]     # ReAct's process_ob
        return text.strip()

    def task(self, first_observation: str, rendered: str = "") -> str:
        m = re.search(r"Your task is to:\s*(.+)", first_observation)
        return m.group(1).strip() if m else first_observation.strip()

    def admissible(self, action: str | None, actions: list[str] | None) -> str | None:
        found = super().admissible(action, actions)
        if found is not None or not action or actions is None:
            return found
        from agentic_repro.envs.alfworld import rewrite_action

        moved = rewrite_action(normalise(action), "put_to_move")
        return super().admissible(moved, actions)


class WebShopProfile(Profile):
    def __init__(self) -> None:
        super().__init__("webshop", "think[")

    def task(self, first_observation: str, rendered: str = "") -> str:
        m = re.search(r"Instruction:\s*(?:\[SEP\])?\s*(.+?)\s*(?:\[SEP\]|\[Search\]|$)", first_observation, re.DOTALL | re.IGNORECASE)
        return _WS.sub(" ", m.group(1)).strip() if m else first_observation.strip()

    def admissible(self, action: str | None, actions: list[str] | None) -> str | None:
        if not action or actions is None:
            return super().admissible(action, actions)
        m = re.match(r"^\s*(search|click)\s*\[(.*)\]\s*$", action.strip(), re.DOTALL | re.IGNORECASE)
        if m is None:
            return None
        kind, arg = m.group(1).lower(), m.group(2).strip()
        if not arg:
            return None
        if kind == "search":
            return f"search[{arg}]" if any(a.lower().startswith("search[") for a in actions) else None
        return super().admissible(f"click[{arg}]", actions)


def profile_for(benchmark_name: str | None) -> Profile:
    name = (benchmark_name or "").lower()
    if name.startswith("alfworld"):
        return ALFWorldProfile()
    if name.startswith("webshop"):
        return WebShopProfile()
    return Profile()
