"""Reading the action out of a model reply, in the two prompt styles the agents use.

- ``auq`` (AUQ's recovered ReAct prompt, supplement §11.1): the reply reasons in ``<think>`` tags and gives
  the action in ``<action>`` tags; the last ``<action>`` wins; without tags, a line ``Action: ...`` is
  accepted; otherwise nothing is parsable (None: a wasted step).
- ``react`` (ReAct's own few-shot transcript): the reply's first non-empty line is the action, a leading
  ``>`` or ``Action:`` removed (ReAct completed after ``>`` with stop ``\\n``).
"""
from __future__ import annotations

import re

from agentic_repro.agents.confidence import tag_text

_ACTION_LINE = re.compile(r"^\s*(?:\*\*)?action(?:\*\*)?\s*:\s*(.+?)\s*$", re.IGNORECASE | re.MULTILINE)


def _clean(action: str | None) -> str | None:
    if action is None:
        return None
    a = action.strip().strip("`").strip()
    if len(a) >= 2 and a[0] == a[-1] and a[0] in "'\"":
        a = a[1:-1].strip()
    return a or None


def parse_tagged(raw: str | None) -> tuple[str | None, str | None]:
    """(action, think) of an ``auq``-style reply; action None when nothing parsable."""
    think = tag_text(raw, "think")
    action = tag_text(raw, "action")
    if action is None and raw:
        found = _ACTION_LINE.findall(raw)
        action = found[-1] if found else None
    if action is not None:
        action = action.splitlines()[0] if action.strip() else action
    return _clean(action), (think or None)


def parse_react_line(raw: str | None) -> str | None:
    """The action of a ``react``-style reply: its first non-empty line, without ``>`` / ``Action:``."""
    for line in (raw or "").splitlines():
        line = line.strip()
        if not line:
            continue
        line = re.sub(r"^(?:>\s*|action\s*:\s*)", "", line, flags=re.IGNORECASE).strip()
        return _clean(line)
    return None


def parse_action(raw: str | None, style: str) -> tuple[str | None, str | None]:
    """(action, think) for ``style`` ``auq`` or ``react``."""
    if style == "auq":
        return parse_tagged(raw)
    if style == "react":
        return parse_react_line(raw), None
    raise ValueError(f"prompt style {style!r}: choose auq or react")
