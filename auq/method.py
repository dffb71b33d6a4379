"""AUQ's three variants as one agent policy on the shared loop (``agentic_repro.agents.loop.run_episode``), wrapping ReAct's.

- **Forward** (UAM only, System 1): every step's reply gives an action, a verbalised confidence c_t and an
  explanation e_t (the recovered elicitation instruction, ``agentic_repro.agents.confidence.ELICITATION``, appended to the
  step prompt), and the history shows past (c_i, e_i) in the supplement's memory format (§11.3). No rule acts
  on the confidence: keeping it in context is the mechanism.
- **Inverse** (UAR only, System 2): the same elicitation, the history *without* confidences (ReAct's format),
  and the switch S = 1[c_t < tau]: on a trigger, :func:`agentic_repro.auq.reflection.resolve` runs Best-of-N
  critique-and-refine with S_cons selection and, with a limited window, Adaptive Memory Expansion.
- **Dual** (AUQ): both.

The base step (prompt, parsing, admissibility) is ReAct's (:class:`agentic_repro.agents.policy.ReactPolicy`, ``style`` and
``few_shot`` as for the ReAct row); AUQ changes only what the paper changes. A missing or malformed
``<confidence>`` is recorded as missing (never 1.0 or 0.0); memory expansion runs only when the window hides
earlier steps (``expansion_when: truncated``; ``always``: in every limited-window step, as literally stated); ``missing_confidence: reflect`` (default) treats
it as a trigger (the agent did not state that it is sure), ``act`` executes the proposal. Each step records,
under ``extra.auq``: whether System 2 ran and why, c_init (System 1) and c_final (executed), every path's
candidates, S_cons, and whether memory expansion ran; the executed candidate's (c, e) enter the memory.
"""
from __future__ import annotations

from typing import Any

from agentic_repro.agents.confidence import ELICITATION
from agentic_repro.agents.loop import WINDOW, AgentState, Decision, episode_solution, run_episode
from agentic_repro.agents.policy import ReactPolicy
from agentic_repro.agents.profiles import normalise, profile_for
from agentic_repro.auq import prompts
from agentic_repro.auq.reflection import Candidate, UARConfig, resolve
from agentic_repro.harness.context import ProblemContext
from agentic_repro.harness.view import ProblemView

VARIANTS = ("forward", "inverse", "dual")


class AUQ:
    """Options are the method config's ``params`` (configs/method/auq_*.yaml; sources in auq/README.md)."""

    def __init__(self, variant: str = "dual", tau: float = 0.85, n_paths: int = 3, max_refinements: int = 3,
                 temperature: float = 0.7, first_sample: str = "reflect", memory_expansion: bool = True,
                 window: int | None = None, missing_confidence: str = "reflect", style: str = "auq",
                 few_shot: int = 2, invalid_action: str = "send", sampling: dict[str, Any] | None = None,
                 reflect_sampling: dict[str, Any] | None = None, expansion_when: str = "truncated") -> None:
        if variant not in VARIANTS:
            raise ValueError(f"AUQ variant {variant!r}: choose one of {VARIANTS}")
        if missing_confidence not in ("reflect", "act"):
            raise ValueError(f"missing_confidence={missing_confidence!r}: reflect | act")
        if expansion_when not in ("truncated", "always"):
            raise ValueError(f"expansion_when={expansion_when!r}: truncated | always")
        self.expansion_when = expansion_when
        if window is not None and int(window) < 1:
            raise ValueError(f"window={window}: a positive integer or null (full history)")
        self.variant = variant
        self.uam = variant in ("forward", "dual")
        self.uar = variant in ("inverse", "dual")
        self.window = None if window is None else int(window)
        self.missing_confidence = missing_confidence
        self.invalid_action = invalid_action
        self.uar_cfg = UARConfig(tau=float(tau), n_paths=int(n_paths), max_refinements=int(max_refinements),
                                 temperature=float(temperature), first_sample=first_sample,
                                 memory_expansion=bool(memory_expansion))
        self.policy = ReactPolicy(style=style, few_shot=int(few_shot), elicit_confidence="inline",
                                  memory_confidence=self.uam, stage="act", sampling=dict(sampling or {}))
        self.reflect_sampling = dict(reflect_sampling or {})

    # ---- one step ---------------------------------------------------------------------------------------
    def _candidate(self, ctx: ProblemContext, state: AgentState, d: Decision) -> Candidate:
        profile = profile_for(getattr(ctx.benchmark, "name", None))
        key = None
        if d.action:
            key = normalise(profile.admissible(d.action, state.actions) or d.action)
        return Candidate(action=d.action, key=key, confidence=d.confidence,
                         confidence_status=str(d.extra.get("confidence_status", "missing")),
                         explanation=d.explanation, raw=d.raw, think=d.extra.get("think"))

    def trigger(self, c: Candidate) -> str | None:
        """Why System 2 runs for this proposal (None: it does not)."""
        return self.uar_cfg.trigger(c, self.missing_confidence) if self.uar else None

    async def decide(self, ctx: ProblemContext, state: AgentState) -> Decision:
        d0 = await self.policy.decide(ctx, state)
        first = self._candidate(ctx, state, d0)
        why = self.trigger(first)
        record: dict[str, Any] = {"variant": self.variant, "tau": self.uar_cfg.tau, "system2": why is not None,
                                  "trigger": why, "c_init": first.confidence, "c_final": first.confidence,
                                  "expanded": False}
        if why is None:
            return Decision(d0.action, d0.raw, d0.confidence, d0.explanation, calls=1,
                            extra={**d0.extra, "auq": record})

        def step_messages(full: bool) -> list[dict[str, str]]:
            return self.policy.messages(ctx, state, elicit=True, h=None if full else WINDOW)

        def messages_for(seed: Candidate, full: bool) -> list[dict[str, str]]:
            cue = (prompts.EXPAND if full else prompts.REFLECT).format(
                action=seed.action or "(no parsable action)", confidence=prompts.fmt_confidence(seed.confidence),
                explanation=seed.explanation or "(no explanation given)", window=state.window)
            # the cue, then the elicitation instruction last (the reply must end with its confidence)
            return self.policy.messages(ctx, state, elicit=False, h=None if full else WINDOW,
                                        extra=f"{cue}\n\n{ELICITATION}")

        async def propose(messages: list[dict[str, str]], temperature: float, offset: int, stage: str) -> Candidate:
            sampling = {**self.policy.call_sampling(True), **self.reflect_sampling, "temperature": temperature}
            comp = (await ctx.generate(messages, stage=stage, n=1, sample_offset=offset, **sampling))[0]
            return self._candidate(ctx, state, self.policy.parse(comp.text, elicit=True))

        limited = state.window is not None and (self.expansion_when == "always" or state.step > state.window)
        chosen, rounds = await resolve(self.uar_cfg, first, propose, messages_for, step_messages,
                                       limited_memory=limited)
        s2_calls = sum(r.calls for r in rounds)
        record.update({"c_final": chosen.confidence, "expanded": len(rounds) > 1, "calls_system2": s2_calls,
                       "system1": first.to_dict(), "rounds": [r.to_dict() for r in rounds],
                       "chosen": {"phase": chosen.phase, "path": chosen.path, "depth": chosen.depth}})
        extra: dict[str, Any] = {"confidence_status": chosen.confidence_status, "auq": record}
        if chosen.think:
            extra["think"] = chosen.think
        return Decision(chosen.action, chosen.raw, chosen.confidence, chosen.explanation, calls=1 + s2_calls,
                        extra=extra)

    # ---- one problem ------------------------------------------------------------------------------------
    async def solve(self, problem: ProblemView, ctx: ProblemContext) -> Any:
        steps: list[dict[str, Any]] = []    # this problem's System-2 bookkeeping (no state on the instance)

        async def decide(c: Any, state: AgentState) -> Decision:
            d = await self.decide(c, state)
            a = d.extra.get("auq") or {}
            steps.append({"system2": bool(a.get("system2")), "trigger": a.get("trigger"), "c_init": a.get("c_init"),
                          "c_final": a.get("c_final"), "expanded": bool(a.get("expanded")), "calls": d.calls})
            return d

        async with ctx.env() as session:
            res = await run_episode(ctx, session, decide, window=self.window, invalid_action=self.invalid_action,
                                    allow_thoughts=self.policy.allows_thoughts)
        return episode_solution([res], agent=f"auq_{self.variant}", variant=self.variant, window=self.window,
                                tau=self.uar_cfg.tau, system2_triggers=sum(s["system2"] for s in steps),
                                expansions=sum(s["expanded"] for s in steps),
                                missing_confidence_steps=sum(1 for t in res.turns if t.confidence is None),
                                steps=steps)
