"""The agents' prompts: ReAct's few-shot files (``make data``), AUQ's recovered ReAct template, and the two
ways a step's messages are built.

- ``auq`` style (default): AUQ's baseline prompt for ALFWorld as recovered in the supplement (§11.1, the
  [udcs] transcription of AUQ's Appendix A.4): system line, task, step count, the last ``h`` steps in the
  §11.3 history format, the current observation and the admissible actions, ``<think>``/``<action>`` tags.
  At step 0 the history paragraphs are left out (nothing to show). With ``few_shot > 0`` ReAct's own few-shot
  trajectories for the task type are shown first (ReAct's prompt files; AUQ's template itself is zero-shot).
  WebShop's AUQ prompt was not recovered: the same template with a WebShop system line (a recorded deviation).
- ``react`` style: ReAct's original transcript prompt ("Interact with a household to solve a task. Here are two
  examples." + two examples + "Here is the task:" + the episode as ``> action`` / observation lines; WebShop:
  ReAct's ``prompt1`` + the episode as ``Action:`` / ``Observation:``), continued by the model.

Reflexion's memory (its reflections of earlier failed trials) goes before the task, as Reflexion's
``EnvironmentHistory`` puts it ("Your memory for the task below:" / "Trial i:").
"""
from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

from agentic_repro.agents.confidence import ELICITATION
from agentic_repro.agents.loop import WINDOW, AgentState

PROMPT_FILES = {
    "react_alfworld": "react_alfworld_3prompts.jsonl",
    "react_webshop": "react_webshop_prompts.jsonl",
    "reflexion_alfworld": "reflexion_alfworld_few_shot_examples.jsonl",
    "reflexion_webshop": "reflexion_webshop_reflection_few_shot_examples.jsonl",
}
# ReAct's notebook / Reflexion's alfworld_trial.py: task-type prefix -> prompt key; examples _1 then _0
ALFWORLD_PREFIXES = {"pick_and_place": "put", "pick_clean_then_place": "clean", "pick_heat_then_place": "heat",
                     "pick_cool_then_place": "cool", "look_at_obj": "examine", "pick_two_obj": "puttwo"}
REACT_ALFWORLD_HEADER = "Interact with a household to solve a task. Here are two examples.\n"

SYSTEM = {
    "alfworld": "You are an expert agent operating in the ALFRED Embodied Environment.",   # §11.1
    "webshop": "You are an expert agent operating in the WebShop e-commerce environment.",  # not recovered: ours
    "generic": "You are an expert agent operating in an interactive text environment.",
}
TASK_LINE = "Your task is to: {task}"
HISTORY_LINES = ("Prior to this step, you have already taken {step_count} step(s).",
                 "Below are the most recent {history_length} observations and the corresponding actions you took:",
                 "{action_history}")
CURRENT_LINES = ("You are now at step {current_step} and your current observation is: {observation}\n"
                 "Your admissible actions of the current situation are: [{admissible}].")
INSTRUCTION = ("Now it's your turn to take an action.\n"
               "You should first reason step-by-step about the current situation. This reasoning process MUST be "
               "enclosed within <think> </think> tags.\n"
               "Once you've finished your reasoning, you should choose an admissible action for the current step and "
               "present it within <action> </action> tags.")


class PromptFileMissing(FileNotFoundError):
    pass


@lru_cache(maxsize=8)
def _load(path: str) -> tuple[dict, ...]:
    return tuple(json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines() if line.strip())


def prompt_rows(kind: str, data_dir: str | None = None) -> tuple[dict, ...]:
    """The records of one agent-prompt file under ``<data>/agent_prompts/`` (``make data`` places them)."""
    from agentic_repro.evaluators.data import data_dir as resolve

    path = resolve(data_dir) / "agent_prompts" / PROMPT_FILES[kind]
    if not path.is_file():
        raise PromptFileMissing(f"agent prompt file {path} is missing: run `make data` (copies ReAct's and "
                                "Reflexion's few-shot prompts, sha256-checked)")
    return _load(str(path))


def react_examples(env: str, task_type: str | None, k: int, data_dir: str | None = None) -> list[str]:
    """ReAct's few-shot examples for this environment (ALFWorld: by task type, ``_1`` then ``_0``)."""
    if k <= 0 or env not in ("alfworld", "webshop"):
        return []
    if env == "webshop":
        return [r["prompt"] for r in prompt_rows("react_webshop", data_dir) if r["name"] == "prompt1"][:k]
    prompts = {r["key"]: r["prompt"] for r in prompt_rows("react_alfworld", data_dir)}
    key = next((v for p, v in ALFWORLD_PREFIXES.items() if (task_type or "").startswith(p)), None)
    if key is None:
        raise ValueError(f"ALFWorld task type {task_type!r}: no ReAct examples for it")
    return [prompts[f"react_{key}_{i}"] for i in (1, 0, 2)][:k]


def reflexion_examples(env: str, data_dir: str | None = None) -> str:
    """Reflexion's reflection few-shot examples (ALFWorld or WebShop)."""
    return prompt_rows(f"reflexion_{env}", data_dir)[0]["text"]


def memory_block(memory: list[str]) -> str:
    """Reflexion's memory as its EnvironmentHistory shows it."""
    if not memory:
        return ""
    return "Your memory for the task below:" + "".join(f"\nTrial {i}:\n{m.strip()}" for i, m in enumerate(memory))


def auq_messages(state: AgentState, env: str, *, examples: list[str] = (), elicit: bool = False,
                 with_confidence: bool = False, h: object = WINDOW, extra: str = "") -> list[dict[str, str]]:
    """One step's messages in AUQ's template (see the module docstring); ``extra`` is appended last (a
    reflection cue, a critique)."""
    parts = []
    if examples:
        parts.append("Here are examples of solving similar tasks (ReAct's few-shot trajectories):\n\n"
                     + "\n\n".join(e.strip() for e in examples))
    if state.memory:
        parts.append(memory_block(state.memory))
    parts.append(TASK_LINE.format(task=state.task))
    shown = state.history(h)
    if state.step > 0 and shown:
        parts.append(HISTORY_LINES[0].format(step_count=state.step))
        parts.append(HISTORY_LINES[1].format(history_length=len(shown)))
        parts.append(state.render(h, with_confidence=with_confidence))
    elif state.step > 0:
        parts.append(HISTORY_LINES[0].format(step_count=state.step))
    admissible = ", ".join(f"'{a}'" for a in (state.actions or [])) if state.actions is not None else "any action"
    parts.append(CURRENT_LINES.format(current_step=state.step + 1, observation=state.observation,
                                      admissible=admissible))
    parts.append(INSTRUCTION)
    if elicit:
        parts.append(ELICITATION)
    if extra:
        parts.append(extra)
    return [{"role": "system", "content": SYSTEM.get(env, SYSTEM["generic"])},
            {"role": "user", "content": "\n\n".join(parts)}]


def react_messages(state: AgentState, env: str, *, examples: list[str] = (), elicit: bool = False,
                   h: object = WINDOW, extra: str = "") -> list[dict[str, str]]:
    """ReAct's transcript prompt, continued by the model (see the module docstring)."""
    shown = state.history(h)
    if env == "webshop":
        head = "".join(examples)
        body = f"{state.first_observation if state.step == len(shown) else '...'}\n\nAction:"
        for t in shown:
            body += f" {t.action}\nObservation: {t.result}\n\nAction:"
        ask = "Continue with the next action only (one line, in the form search[...], click[...] or think[...])."
    else:
        head = (REACT_ALFWORLD_HEADER + "".join(examples)) if examples else ""
        body = f"Here is the task:\n{state.first_observation}\n"
        if len(shown) < state.step:
            body += "...\n"
        body += "".join(f"> {t.action}\n{t.result}\n" for t in shown) + ">"
        ask = "Continue with the next line only: one action (or `think: ...`), without the leading '>'."
    mem = memory_block(state.memory)
    text = head + (("\n\n" + mem + "\n") if mem else "\n") + body
    tail = [ask] + ([ELICITATION] if elicit else []) + ([extra] if extra else [])
    return [{"role": "user", "content": text + "\n\n" + "\n\n".join(tail)}]
