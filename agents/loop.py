"""The agent loop every agent shares: observation -> policy -> parsed action -> environment, step by step.

A policy is ``async def decide(ctx, state: AgentState) -> Decision``; :func:`run_episode` drives one episode of
a ``ctx.env()`` session with it. Each step is recorded as it happens through the session
(``trajectories.jsonl`` via harness/env.py): the action sent, the raw reply, the confidence and explanation
(None when the policy elicits none or the reply's tag is missing/malformed), whether the action was valid, the
number of model calls it took, and whatever the policy put in ``Decision.extra`` (reflections, samples).

- **Admissible actions** come from the environment (``StepResult.actions``); the environment's
  :class:`agentic_repro.agents.profiles.Profile` decides whether a proposed action is one of them (ALFWorld accepts the old
  "put" form, WebShop any ``search[...]`` on the search page).
- **Wasted steps**: an unparsable reply (``Decision.action is None``) or an inadmissible action costs one step
  and is recorded with ``valid: false``. ``invalid_action: send`` (default) sends it to the environment, which
  answers as it does ("Nothing happens." / "Invalid action!") and counts it against the step cap; an
  unparsable reply sends :data:`UNPARSABLE` so that nothing in a malformed reply is ever executed.
  ``invalid_action: skip`` sends nothing: the step is recorded as a note, the observation says the action was
  not admissible, and the loop counts it against the step cap itself.
- **Thoughts** (``allow_thoughts``, ReAct's transcript style): a ``think: ...`` / ``think[...]`` action is a
  valid step that the environment receives (ReAct's clients sent it too) and the agent sees "OK.".
- ``stop_when(state)`` lets an agent end an episode itself (recorded as a note; the environment is not done).
- **Memory window** ``h``: ``state.render(h)`` shows the last ``h`` steps (None = the full trajectory).
- **Step cap**: the environment's (``env.max_steps``, applied by the host); the episode ends at ``done``.
- **Resume** is per episode (harness/env.py): an episode killed midway is replayed from ``reset`` and the
  response cache makes the replay identical.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any
from collections.abc import Awaitable, Callable

from agentic_repro.agents.profiles import Profile, profile_for
from agentic_repro.harness.context import ProblemContext

UNPARSABLE = "(unparsable reply)"
SKIPPED = "Invalid action: {action!r} is not one of the admissible actions. Choose one of the admissible actions."
WINDOW = object()  # render(h=WINDOW): use the state's own window


@dataclass
class Turn:
    """One step: the observation the action answered, the action, what the model said, and the outcome."""

    observation: str
    action: str
    raw: str
    confidence: float | None = None
    explanation: str | None = None
    valid: bool = True
    info: dict[str, Any] = field(default_factory=dict)
    think: str | None = None        # the reasoning the reply gave (<think> / ReAct thought), shown in memory
    result: str = ""                # the observation the environment answered with (cleaned)
    sent: str | None = None         # what reached the environment (None: skipped)
    calls: int = 1
    thought: bool = False           # a ReAct "think:" step (valid, not an environment action)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Decision:
    """A policy's choice for one step; ``action`` None = nothing parsable (a wasted step)."""

    action: str | None
    raw: str
    confidence: float | None = None
    explanation: str | None = None
    calls: int = 1
    extra: dict[str, Any] = field(default_factory=dict)


def render_turns(turns: list[Turn], start: int = 1, *, with_confidence: bool = False, with_think: bool = True) -> str:
    """AUQ's ``{action_history}`` format (supplement §11.3): confidence and explanation lines only for UAM."""
    blocks = []
    for i, t in enumerate(turns, start):
        act = f"<action>{t.action}</action>"
        if with_think and t.think:
            act = f"<think>{t.think}</think> {act}"
        lines = [f"Step {i}:", f"Observation: {t.observation}", f"Action: {act}"]
        if with_confidence:
            c = "missing" if t.confidence is None else f"{t.confidence:g}"
            lines += [f"<confidence>{c}</confidence>", f"<explanation>{t.explanation or ''}</explanation>"]
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


@dataclass
class AgentState:
    """What a policy may see: the task, the trajectory so far, the current observation and admissible actions,
    the memory window, and inter-episode memory (Reflexion's reflections). Never the goal or the score."""

    task: str
    observation: str
    actions: list[str] | None
    turns: list[Turn] = field(default_factory=list)
    window: int | None = None
    first_observation: str = ""
    episode: int = 0
    memory: list[str] = field(default_factory=list)
    fields: dict[str, Any] = field(default_factory=dict)   # the problem view's fields (task_type, ...)
    max_steps: int | None = None

    @property
    def step(self) -> int:
        """Steps taken so far in this episode (the next one is ``step + 1``)."""
        return len(self.turns)

    def history(self, h: Any = WINDOW) -> list[Turn]:
        """The last ``h`` turns (``h`` None = all; default: the state's window)."""
        h = self.window if h is WINDOW else h
        if h is None:
            return list(self.turns)
        return list(self.turns[-int(h):]) if int(h) > 0 else []

    def render(self, h: Any = WINDOW, *, with_confidence: bool = False, with_think: bool = True) -> str:
        """The window's turns in AUQ's history format, numbered by their step in the episode."""
        shown = self.history(h)
        return render_turns(shown, self.step - len(shown) + 1, with_confidence=with_confidence, with_think=with_think)


@dataclass
class EpisodeResult:
    success: bool
    reward: float
    turns: list[Turn]
    steps: int
    wasted_steps: int
    truncated: bool = False
    episode: int = 0
    calls: int = 0

    def summary(self) -> dict[str, Any]:
        """The compact record kept in the method's trace (observations are in trajectories.jsonl)."""
        return {"episode": self.episode, "success": self.success, "reward": self.reward, "steps": self.steps,
                "wasted_steps": self.wasted_steps, "truncated": self.truncated, "calls": self.calls,
                "actions": [t.action for t in self.turns], "valid": [t.valid for t in self.turns],
                "confidences": [t.confidence for t in self.turns]}


Decide = Callable[[Any, AgentState], Awaitable[Decision]]


async def run_episode(ctx: ProblemContext, session: Any, decide: Decide, *, window: int | None = None,
                      profile: Profile | None = None, memory: list[str] | None = None, episode: int = 0,
                      invalid_action: str = "send", allow_thoughts: bool = False,
                      stop_when: Callable[[AgentState], bool] | None = None) -> EpisodeResult:
    """One episode: ``reset``, then ``decide`` / ``step`` until the environment (or the step cap) ends it."""
    if invalid_action not in ("send", "skip"):
        raise ValueError(f"invalid_action={invalid_action!r}: choose send or skip")
    if window is not None and int(window) < 1:
        raise ValueError(f"memory window h={window}: must be a positive integer or null (full history)")
    profile = profile or profile_for(getattr(ctx.benchmark, "name", None))
    res = await session.reset()
    first = profile.clean(res.observation, first=True)
    fields = dict(getattr(ctx.problem, "fields", {}) or {})
    try:
        rendered = ctx.benchmark.render(ctx.problem)
    except Exception:  # noqa: BLE001 - a benchmark without a task text: the first observation states it
        rendered = ""
    state = AgentState(task=profile.task(first, rendered), observation=first, actions=res.actions, window=window,
                       first_observation=first, episode=episode, memory=list(memory or []), fields=fields,
                       max_steps=session.max_steps)
    reward, success, truncated, wasted, calls = 0.0, False, False, 0, 0
    done = bool(res.done)
    while not done:
        d = await decide(ctx, state)
        calls += int(d.calls)
        thought = allow_thoughts and profile.is_thought(d.action)
        sent = d.action.strip() if thought and d.action else profile.admissible(d.action, state.actions)
        valid = sent is not None
        extra = {"raw": d.raw, "confidence": d.confidence, "explanation": d.explanation, "valid": valid,
                 "calls": int(d.calls), **d.extra}
        if not valid:
            wasted += 1
        if valid or invalid_action == "send":
            to_send = sent if valid else (d.action.strip() if d.action and d.action.strip() else UNPARSABLE)
            res = await session.step(to_send, **{**extra, **({"proposed": d.action} if d.action != to_send else {})})
            result = "OK." if thought else profile.clean(res.observation)
            info = dict(res.info or {})
            reward += float(res.reward)
            success = bool(info.get("success", info.get("won", success)))
            done, truncated = bool(res.done), bool(res.truncated)
            state.actions = res.actions
        else:  # skip: nothing reaches the environment; the loop applies the cap itself
            to_send, info = None, {"skipped": True}
            session.record(**{**extra, "wasted": True, "proposed": d.action})
            result = SKIPPED.format(action=d.action or "")
        state.turns.append(Turn(observation=state.observation, action=(d.action or "").strip(), raw=d.raw,
                                confidence=d.confidence, explanation=d.explanation, valid=valid, info=info,
                                think=d.extra.get("think"), result=result, sent=to_send, calls=int(d.calls),
                                thought=thought))
        state.observation = result
        if not done and state.max_steps is not None and state.step >= state.max_steps:
            done, truncated = True, True  # skipped steps count too (sent ones: the host has already capped)
        if not done and stop_when is not None and stop_when(state):
            session.record(stopped_by_agent=True)  # e.g. Reflexion ends a trial that repeats its last action
            break
    return EpisodeResult(success=success, reward=reward, turns=state.turns, steps=state.step, wasted_steps=wasted,
                         truncated=truncated, episode=episode, calls=calls)


def episode_solution(results: list[EpisodeResult], **trace: Any) -> Any:
    """The method's Solution: the last action as the answer (kept, not scored: the environment scores), the
    last step's confidence (None when not elicited), and every episode's summary in the trace."""
    from agentic_repro.harness.types import Solution

    last = results[-1] if results else None
    turns = last.turns if last else []
    return Solution(answer=turns[-1].action if turns else "", confidence=turns[-1].confidence if turns else None,
                    trace={**trace, "episodes": [r.summary() for r in results]})
