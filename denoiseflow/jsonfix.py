"""Lenient JSON reading for model output: repair what can be repaired, report what cannot."""
from __future__ import annotations

import ast
import json
import re
from typing import Any

_FENCE = re.compile(r"```(?:json|JSON)?\s*(.*?)```", re.DOTALL)


def _close_truncated(tail: str, stack: list[str], in_str: bool) -> str:
    """Close a JSON text cut off mid-way (max_tokens): end the open string, drop a dangling key or
    comma, then close the open brackets innermost first."""
    if in_str:
        tail += '"'
    else:
        tail = re.sub(r"//[^\n]*$", "", tail.rstrip()).rstrip()
    for _ in range(3):
        before = tail
        tail = re.sub(r',\s*"[^"]*"\s*:\s*$', "", tail)   # , "key":
        tail = re.sub(r'([{]\s*)"[^"]*"\s*:\s*$', r"\1", tail)  # { "key":
        tail = re.sub(r",\s*$", "", tail)
        if tail == before:
            break
    return tail + "".join("}" if b == "{" else "]" for b in reversed(stack))


def _candidates(text: str) -> list[tuple[str, bool]]:
    """(candidate, needed_repair) pairs, most specific first."""
    out = [(m.group(1), False) for m in _FENCE.finditer(text)]
    start = text.find("{")
    if start >= 0:
        stack: list[str] = []
        in_str, esc = False, False
        for i in range(start, len(text)):
            ch = text[i]
            if in_str:
                if esc:
                    esc = False
                elif ch == "\\":
                    esc = True
                elif ch == '"':
                    in_str = False
                continue
            if ch == '"':
                in_str = True
            elif ch in "{[":
                stack.append(ch)
            elif ch in "}]":
                if stack:
                    stack.pop()
                if not stack:
                    out.append((text[start:i + 1], False))
                    break
        else:  # truncated (e.g. max_tokens): close what is open
            out.append((_close_truncated(text[start:], stack, in_str), True))
    out.append((text, False))
    return out


def _repairs(s: str) -> list[str]:
    s = s.strip()
    fixed = re.sub(r"^\s*//[^\n]*$", "", s, flags=re.MULTILINE)               # whole-line comments
    fixed = re.sub(r",\s*\.\.\.\s*(?=[\]}])", "", fixed)             # template ellipses: [a, b, ...]
    fixed = re.sub(r",\s*([}\]])", r"\1", fixed)                     # trailing commas
    fixed2 = re.sub(r"([{,]\s*)([A-Za-z_][A-Za-z0-9_]*)\s*:", r'\1"\2":', fixed)  # bare keys
    return [s, fixed, fixed2]


def parse_json(text: str) -> tuple[dict[str, Any] | None, str]:
    """(object or None, status) with status in {"ok", "repaired", "malformed"}; never raises."""
    text = text or ""
    for cand, truncated in _candidates(text):
        variants = _repairs(cand)
        for strict in (True, False):  # json first (every repair), then Python-literal style
            for ri, v in enumerate(variants):
                try:
                    obj = json.loads(v) if strict else ast.literal_eval(v)
                except Exception:  # noqa: BLE001 - any parse failure means "try the next repair"
                    continue
                if isinstance(obj, dict):
                    obj = json.loads(json.dumps(obj, default=str))  # literal_eval may give sets/bytes/tuples
                    return obj, "ok" if (strict and ri == 0 and not truncated) else "repaired"
    return None, "malformed"
