"""ReAct's policy as a reusable piece: build the step's messages, call the model, parse action/confidence.

Every agent baseline (ReAct, Reflexion, Self-Reflection, CoT-SC) and AUQ build on :class:`ReactPolicy`:
``decide`` is the ReAct step; ``sample`` draws ``n`` replies for the same state (CoT-SC, AUQ's Best-of-N);
``messages`` lets a wrapper add a cue (``extra``) or change the window/history format.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agentic_repro.agents.confidence import ELICITATION, elicit as elicit_reply
from agentic_repro.agents.loop import WINDOW, AgentState, Decision
from agentic_repro.agents.actions import parse_action
from agentic_repro.agents.prompts import auq_messages, react_examples, react_messages
from agentic_repro.agents.profiles import profile_for
from agentic_repro.harness.context import ProblemContext

STYLES = ("auq", "react")
ELICIT_MODES = ("none", "inline", "separate")
SEPARATE = "Your action for this step is the one you gave above.\n\n" + ELICITATION


@dataclass
class ReactPolicy:
    """Options (each a method config param; agents/README.md gives the sources):

    - ``style``: ``auq`` (AUQ's recovered template, admissible actions shown) or ``react`` (ReAct's transcript);
    - ``few_shot``: how many of ReAct's examples to show (ALFWorld 2 per task type, WebShop 1);
    - ``elicit_confidence``: ``none``; ``inline`` (AUQ's elicitation instruction appended to the act prompt, as
      AUQ's UAM does); ``separate`` (the act prompt is left as the baseline's; a follow-up call shows the chosen
      action and asks AUQ's instruction, so the actions are exactly the baseline's and calibration metrics exist
      for it: one extra call per step, stage ``confidence``). ``true``/``false`` mean ``inline``/``none``;
    - ``memory_confidence``: show past confidences/explanations in the history (AUQ's UAM format; ReAct: no);
    - ``sampling``: overrides of the run's sampling for the act call (temperature, max_tokens, ...).
    """

    style: str = "auq"
    few_shot: int = 2
    elicit_confidence: bool | str = "none"
    memory_confidence: bool = False
    stage: str = "act"
    sampling: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.style not in STYLES:
            raise ValueError(f"prompt style {self.style!r}: choose one of {STYLES}")
        mode = {True: "inline", False: "none", None: "none"}.get(self.elicit_confidence, self.elicit_confidence)
        if mode not in ELICIT_MODES:
            raise ValueError(f"elicit_confidence={self.elicit_confidence!r}: choose one of {ELICIT_MODES}")
        self.elicit_mode = mode

    @property
    def inline(self) -> bool:
        return self.elicit_mode == "inline"

    def env(self, ctx: ProblemContext) -> str:
        return profile_for(getattr(ctx.benchmark, "name", None)).name

    def examples(self, ctx: ProblemContext, state: AgentState) -> list[str]:
        return react_examples(self.env(ctx), state.fields.get("task_type"), int(self.few_shot))

    def messages(self, ctx: ProblemContext, state: AgentState, *, elicit: bool | None = None,
                 with_confidence: bool | None = None,
                 h: object = WINDOW, extra: str = "") -> list[dict[str, str]]:
        elicit = self.inline if elicit is None else elicit
        env, examples = self.env(ctx), self.examples(ctx, state)
        if self.style == "react":
            return react_messages(state, env, examples=examples, elicit=elicit, h=h, extra=extra)
        with_confidence = self.memory_confidence if with_confidence is None else with_confidence
        return auq_messages(state, env, examples=examples, elicit=elicit, with_confidence=with_confidence, h=h,
                            extra=extra)

    def call_sampling(self, elicit: bool) -> dict[str, Any]:
        s = dict(self.sampling)
        if self.style == "react" and not elicit:
            s.setdefault("stop", ["\n"])  # ReAct completed one line
        return s

    def parse(self, raw: str, *, elicit: bool | None = None, calls: int = 1, **extra: Any) -> Decision:
        """A :class:`Decision` from one reply (confidence None unless elicited and well-formed)."""
        elicit = self.inline if elicit is None else elicit
        action, think = parse_action(raw, self.style)
        info: dict[str, Any] = {"think": think} if think else {}
        conf = expl = None
        if elicit:
            e = elicit_reply(raw)
            conf, expl = e.confidence, e.explanation
            info["confidence_status"] = e.status
        return Decision(action, raw, conf, expl, calls=calls, extra={**info, **extra})

    async def sample(self, ctx: ProblemContext, state: AgentState, n: int = 1, *, stage: str | None = None,
                     sample_offset: int = 0, elicit: bool | None = None, extra: str = "", h: object = WINDOW,
                     with_confidence: bool | None = None, **sampling: Any) -> list[Decision]:
        """``n`` replies to the same step (distinct cached samples via ``sample_offset``)."""
        elicit = self.inline if elicit is None else elicit
        msgs = self.messages(ctx, state, elicit=elicit, with_confidence=with_confidence, h=h, extra=extra)
        comps = await ctx.generate(msgs, stage=stage or self.stage, n=n, sample_offset=sample_offset,
                                   **{**self.call_sampling(elicit), **sampling})
        return [self.parse(c.text, elicit=elicit, calls=1) for c in comps]

    async def add_confidence(self, ctx: ProblemContext, state: AgentState, d: Decision, *, stage: str = "confidence",
                             **sampling: Any) -> Decision:
        """``separate`` elicitation: one follow-up call on the base act prompt + the chosen reply; fills
        ``d.confidence``/``d.explanation`` (None when the tag is missing or malformed). Other modes: unchanged."""
        if self.elicit_mode != "separate":
            return d
        msgs = self.messages(ctx, state, elicit=False) + [{"role": "assistant", "content": d.raw},
                                                          {"role": "user", "content": SEPARATE}]
        text = (await ctx.generate(msgs, stage=stage, **{**{k: v for k, v in self.sampling.items() if k != "stop"},
                                                          **sampling}))[0].text
        e = elicit_reply(text)
        d.confidence, d.explanation, d.calls = e.confidence, e.explanation, d.calls + 1
        d.extra.update(confidence_status=e.status, confidence_reply=text)
        return d

    async def decide(self, ctx: ProblemContext, state: AgentState) -> Decision:
        """ReAct's step: one call (two with ``separate`` elicitation)."""
        return await self.add_confidence(ctx, state, (await self.sample(ctx, state, 1))[0])

    @property
    def allows_thoughts(self) -> bool:
        """ReAct's transcript style takes ``think: ...`` lines as (non-environment) steps; AUQ's does not."""
        return self.style == "react"
