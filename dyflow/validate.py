"""Reading the designer's reply into a :class:`~dyflow.schema.StageGraph`, and the stage rules.

Order per attempt (issue 11 §1): parse the JSON the way the release does (```json fences,
``<stage_design>`` tags, balanced braces, the whole text); if that or the schema fails, repair the text
once with json-repair and validate again; if it still fails, or a context rule fails (which no repair
can fix), the designer is re-asked with the error (:mod:`agentic_repro.dyflow.designer`).
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from agentic_repro.dyflow.schema import ORIGINAL_PROBLEM, TEMPLATES, TERMINAL_TEMPLATES, StageGraph

_FENCE_JSON = re.compile(r"```json\s*([\s\S]*?)\s*```")
_FENCE_ANY = re.compile(r"```[a-zA-Z]*\s*([\s\S]*?)\s*```")
_TAGS = re.compile(r"<stage_design>([\s\S]*?)</stage_design>")


class StageError(ValueError):
    """A designer reply that cannot be used; the message is what the re-ask shows the designer."""


def _balanced_objects(text: str) -> list[str]:
    """Top-level ``{...}`` spans (braces inside JSON strings respected)."""
    out, depth, start, in_str, esc = [], 0, -1, False, False
    for i, ch in enumerate(text):
        if in_str:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
            continue
        if ch == '"' and depth > 0:
            in_str = True
        elif ch == "{":
            if depth == 0:
                start = i
            depth += 1
        elif ch == "}" and depth > 0:
            depth -= 1
            if depth == 0:
                out.append(text[start:i + 1])
    return out


def candidates(text: str) -> list[str]:
    """Texts that may hold the stage, most specific first (the release's order)."""
    out = [m for m in _FENCE_JSON.findall(text)]
    for tag in _TAGS.findall(text):
        out += _FENCE_JSON.findall(tag) + _balanced_objects(tag)
    out += _balanced_objects(text)
    out += _FENCE_ANY.findall(text)
    out.append(text.strip())
    seen, uniq = set(), []
    for c in out:
        if c and c not in seen:
            seen.add(c)
            uniq.append(c)
    return uniq


def _strict(text: str) -> StageGraph:
    """The first candidate that is JSON and a valid stage; else the error of the first JSON one."""
    first_error: str | None = None
    for c in candidates(text):
        try:
            obj = json.loads(c)
        except (json.JSONDecodeError, ValueError):
            continue
        if not isinstance(obj, (dict, list)):
            continue
        try:
            return StageGraph.from_designer(obj)
        except (ValidationError, ValueError) as exc:
            first_error = first_error or _schema_error(exc)
    raise StageError(first_error or "the reply holds no valid JSON object")


def _repaired(text: str) -> Any:
    """json-repair's reading of the most likely span: a fenced block, else from the first '{' on
    (a reply cut off at max_tokens has no closing brace)."""
    from json_repair import repair_json

    fenced = _FENCE_JSON.findall(text) or _FENCE_ANY.findall(text)
    span = fenced[0] if fenced else (text[text.find("{"):] if "{" in text else text)
    obj = repair_json(span, return_objects=True)
    if not isinstance(obj, (dict, list)) or not obj:
        raise StageError("json-repair found no JSON object in the reply")
    ops = obj.get("operators") if isinstance(obj, dict) else None
    if isinstance(ops, list) and len(ops) > 1 and isinstance(ops[-1], dict) and not _has_template(ops[-1]):
        obj["operators"] = ops[:-1]     # the operator a max_tokens cut left without its instruction_type
    return obj


def _has_template(op: dict[str, Any]) -> bool:
    p = op.get("params") if isinstance(op.get("params"), dict) else {}
    return bool(p.get("instruction_type") or op.get("instruction_type") or op.get("template"))


def _schema_error(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        parts = []
        for e in exc.errors()[:6]:
            loc = ".".join(str(x) for x in e.get("loc", ()))
            parts.append(f"{loc or 'stage'}: {e.get('msg')}")
        return "the stage does not match the schema: " + "; ".join(parts)
    return str(exc)


def read_stage(text: str, *, repair: bool) -> tuple[StageGraph, str, str | None]:
    """(stage, status, error of the strict reading) where status is ``valid`` or ``repaired``.

    Raises :class:`StageError` with the error of the strict reading (and of the repair) otherwise.
    """
    strict_error: str
    try:
        return _strict(text), "valid", None
    except (StageError, ValidationError, ValueError) as exc:
        strict_error = _schema_error(exc)
    if not repair:
        raise StageError(strict_error)
    try:
        return StageGraph.from_designer(_repaired(text)), "repaired", strict_error
    except (StageError, ValidationError, ValueError) as exc:
        err = StageError(strict_error)
        err.repair_error = _schema_error(exc)   # type: ignore[attr-defined]
        raise err from None


@dataclass
class StageRules:
    """What a stage must satisfy in the current state (the release's Design Rules as checks)."""

    memory_keys: tuple[str, ...]       # keys of 𝓜 so far
    stage_number: int                  # 1-based number this stage will have
    organize_alone: bool = True
    allow_mixed_terminal: bool = False  # the forced-termination stage and single-stage mode
    require_terminal: bool = False      # single-stage mode
    first_stage_needs_problem: bool = True
    unknown_template: str = "error"     # error | default (strict only: release validation runs DEFAULT)
    key_repair: str = "off"             # off (re-ask) | drop (unknown input keys are dropped, recorded)
    validation: str = "release"         # release | strict (see check_stage)


def check_stage(stage: StageGraph, rules: StageRules, fixes: list[str] | None = None) -> list[str]:
    """Every violated rule, as a message the designer can act on. Fixes in place, noted in ``fixes``:
    unknown types run as DEFAULT (``validation=release`` or ``unknown_template=default``: the release's
    fallback) and ``key_repair=drop`` (unknown input keys dropped; an LLM operator left without inputs gets
    ``original_problem``).

    ``validation=release`` (default) refuses only what the release could not run either: a stage that does
    not parse (before this), a TERMINATE without an existing answer key (the release would return None)
    and ``original_problem`` as an output key (our memory's reserved name); the rest runs as the release
    runs it (:meth:`agentic_repro.dyflow.method.DyFlow._execute`: listed order, an operator whose input is missing fails
    and the stage goes on, ORGANIZE_SOLUTION ends the stage wherever it stands). ``strict`` adds the
    released prompt's Design Rules as checks (known types, existing keys, no duplicate outputs, no cycle,
    ORGANIZE_SOLUTION alone, original_problem on the first stage)."""
    fixes = fixes if fixes is not None else []
    release = rules.validation == "release"
    available = set(rules.memory_keys) | {ORIGINAL_PROBLEM}
    errors = _known_templates(stage, rules, release, fixes) + _output_keys(stage, release)
    if rules.key_repair == "drop":
        _drop_unknown_inputs(stage, available, fixes)
    errors += [e for op in stage.operators for e in _operator_keys(stage, op, available, release)]
    if release:
        if rules.require_terminal and not any(op.template in TERMINAL_TEMPLATES for op in stage.operators):
            errors.append("the stage must end with ORGANIZE_SOLUTION")   # single-stage mode (ours)
        return errors
    return errors + _design_rules(stage, rules)


def _known_templates(stage: StageGraph, rules: StageRules, release: bool, fixes: list[str]) -> list[str]:
    """An unknown instruction_type: run as DEFAULT (the release's fallback, noted in ``fixes``) or an error."""
    errors = []
    for op in stage.operators:
        if op.template not in TEMPLATES:
            if release or rules.unknown_template == "default":
                fixes.append(f"{op.operator_id}: unknown instruction_type {op.template!r} run as DEFAULT")
                op.template = "DEFAULT"
            else:
                errors.append(f"{op.operator_id}: unknown instruction_type {op.template!r}; use one of "
                              f"{', '.join(TEMPLATES)}")
    return errors


def _output_keys(stage: StageGraph, release: bool) -> list[str]:
    """Duplicate output keys (strict only) and the reserved ``original_problem`` as an output key."""
    errors = []
    outs = [op.output_key for op in stage.operators if op.output_key]
    dup = sorted({k for k in outs if outs.count(k) > 1})
    if dup and not release:
        errors.append(f"output_key(s) {dup} are used by more than one operator of this stage")
    if ORIGINAL_PROBLEM in outs:
        errors.append(f"'{ORIGINAL_PROBLEM}' is reserved for the problem and cannot be an output_key")
    return errors


def _own_keys(stage: StageGraph, op: Any) -> set[str]:
    """The output keys of the stage's other operators."""
    return {o.output_key for o in stage.operators if o is not op and o.output_key}


def _drop_unknown_inputs(stage: StageGraph, available: set[str], fixes: list[str]) -> None:
    """``key_repair=drop``: unknown input keys are dropped (noted in ``fixes``); an LLM operator left without
    inputs gets ``original_problem``."""
    for op in stage.operators:
        own = _own_keys(stage, op)
        gone = [k for k in op.input_keys if k not in available and k not in own]
        if gone:
            op.input_keys = [k for k in op.input_keys if k not in gone]
            if not op.input_keys and op.template not in ("TERMINATE",):
                op.input_keys = [ORIGINAL_PROBLEM]
            fixes.append(f"{op.operator_id}: dropped unknown input_keys {gone}")


def _operator_keys(stage: StageGraph, op: Any, available: set[str], release: bool) -> list[str]:
    """One operator's keys: inputs that exist (strict), TEST_CODE's solution key (strict), TERMINATE's answer key."""
    errors = []
    own = _own_keys(stage, op)
    missing = [k for k in op.input_keys if k not in available and k not in own]
    if missing and not release:
        errors.append(f"{op.operator_id}: input_keys {missing} do not exist; available keys: "
                      f"{', '.join(sorted(available))}" + (f" and this stage's {', '.join(sorted(own))}"
                                                              if own else ""))
    if op.template == "TEST_CODE" and not op.input_keys and not release:
        errors.append(f"{op.operator_id}: TEST_CODE needs the key of the solution to test in input_keys")
    if op.template == "TERMINATE":
        key = op.answer_key
        if key is None:
            errors.append(f"{op.operator_id}: TERMINATE needs params.final_answer_key, the key of the answer")
        elif key == ORIGINAL_PROBLEM or (key not in available and key not in own):
            errors.append(f"{op.operator_id}: final_answer_key {key!r} does not exist; available keys: "
                          f"{', '.join(sorted(available - {ORIGINAL_PROBLEM}))}"
                          + (f" and this stage's {', '.join(sorted(own))}" if own else ""))
    return errors


def _design_rules(stage: StageGraph, rules: StageRules) -> list[str]:
    """``validation=strict``: the released prompt's Design Rules (no cycle, ORGANIZE_SOLUTION alone and last,
    original_problem on the first stage)."""
    errors = []
    try:
        stage.topological_order()
    except ValueError as exc:
        errors.append(str(exc))
    terminal = [op for op in stage.operators if op.template in TERMINAL_TEMPLATES]
    if terminal and len(stage.operators) > 1 and rules.organize_alone and not rules.allow_mixed_terminal:
        errors.append("NEVER mix ORGANIZE_SOLUTION with other operators in the same stage: put it alone in a "
                      "new stage once the solution is validated")
    if rules.require_terminal and not terminal:
        errors.append("the stage must end with ORGANIZE_SOLUTION")
    if rules.stage_number == 1 and rules.first_stage_needs_problem and \
            not any(ORIGINAL_PROBLEM in op.input_keys for op in stage.operators):
        errors.append("on the first stage at least one operator must have 'original_problem' in input_keys")
    return errors
