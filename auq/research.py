"""AUQ on the research agent: UAM/UAR at the Planner-Researcher interface, as the paper integrates it into EDR
(paper App. A.3.3, "Planner Augmentation" / "Execution Interception" / "Seamless Integration").

The research agent is the labelled stand-in of ``baselines/deep_research.py`` (planner → researchers with the
``search`` tool → analyst); AUQ changes only its planner step, so the two rows differ only there:

- **System 1**: the planner writes its sub-queries as a JSON list inside ``<plan>`` tags and, with the shared
  elicitation instruction (``agentic_repro.agents.confidence.ELICITATION``, the plan being its "action"), a ``<confidence>``
  and an ``<explanation>`` of its knowledge gaps (temperature: the run's sampling, stage ``plan``).
- **The switch**: c < tau (or a missing confidence, ``missing_confidence: reflect``) blocks the dispatch of
  researchers and runs System 2 (:func:`agentic_repro.auq.reflection.resolve`: N paths at T = 0.7 whose first reply answers
  the reflection prompt with the planner's own explanation fed back, each refined while below tau at most D
  more turns, S_cons selection; stage ``uar_reflect``). Plans are equivalent (one S_cons vote) when their
  queries are the same after case and whitespace folding.
- **Seamless integration**: the selected plan's queries go to the researchers, who do not know whether an
  intervention happened; the analyst writes the report.

``rounds`` > 1 (not in the paper: EDR's loop count was not recovered) lets the planner plan follow-up queries
after reading the notes of earlier rounds; the UAM memory then shows each earlier plan with its confidence and
explanation (variants ``forward``/``dual``) or without them (``inverse``), within ``window`` rounds; memory
expansion re-runs the reflection with every round shown when the window hides some (as in ``auq/method.py``).

Evidence: as the baseline (:func:`agentic_repro.baselines.deep_research.require_evidence`): without a search tool the
problem is refused unless ``evidence: closed_book``, which runs and marks the trace ``closed_book``.
Recorded in the trace: per round the plan, the System-2 record (trigger, c_init, c_final, every path's
candidates, S_cons, the executed path) and the queries; per problem ``system2_triggers``.
"""
from __future__ import annotations

import json
import re
from typing import Any

from agentic_repro.agents.confidence import ELICITATION, elicit
from agentic_repro.auq.method import VARIANTS
from agentic_repro.auq.prompts import fmt_confidence
from agentic_repro.auq.reflection import Candidate, UARConfig, resolve
from agentic_repro.baselines.deep_research import require_evidence, research_notes, write_report
from agentic_repro.harness.types import Solution
from agentic_repro.harness.context import ProblemContext
from agentic_repro.harness.view import ProblemView

PLAN = ("You are the planner of a research team. Task:\n{task}\n\n{memory}"
        "Write {n} web-search queries that together cover what the report needs. Give them as a JSON list of "
        "strings inside <plan> </plan> tags.\n\n" + ELICITATION + "\n(Your action is the plan.)")
MEMORY_HEADER = "Earlier research rounds (the most recent {shown} of {total}):\n\n"
MEMORY_ROUND = "Round {i}:\nPlan: {queries}\nNotes: {notes}"
MEMORY_UNCERTAINTY = "<confidence>{confidence}</confidence>\n<explanation>{explanation}</explanation>"
FOLLOW_UP = "Plan the next round: queries for what the notes above still leave open.\n\n"
REFLECT = (
    "\n\nBefore the researchers are dispatched, reflect on your plan.\n\nYou proposed:\n<plan>{plan}</plan>\n"
    "<confidence>{confidence}</confidence>\nand you explained your uncertainty as follows:\n"
    "<explanation>{explanation}</explanation>\n\n"
    "Critique this plan using your own explanation as the cue: for each gap it names, decide which query would "
    "close it (add, sharpen or replace queries; prefer authoritative sources). Then write the refined plan as a "
    "JSON list of strings inside <plan> </plan> tags (it may be the same plan).\n\n" + ELICITATION
    + "\n(Your action is the plan.)")
EXPAND = ("\n\nYour reflection so far saw only the most recent {window} round(s) and left you uncertain; every "
          "earlier round is shown above now. Use what they found or missed.")


def parse_plan(text: str | None, n: int) -> list[str] | None:
    """The queries of a ``<plan>`` reply: its JSON list of strings, else its non-empty lines; None when there
    is no ``<plan>`` tag or it holds no query (an unparsable plan gets no S_cons vote)."""
    found = re.findall(r"<plan>(.*?)</plan>", text or "", re.DOTALL | re.IGNORECASE)
    if not found:
        return None
    body = found[-1].strip()
    try:
        data = json.loads(body)
    except ValueError:
        data = None
    if isinstance(data, list) and all(isinstance(q, str) for q in data):
        qs = [q.strip() for q in data if q.strip()]
    else:
        qs = [re.sub(r"^\s*(?:[-*•]|\d+[.)])\s*", "", ln).strip().strip('",') for ln in body.splitlines()]
        qs = [q for q in qs if q and q not in ("[", "]")]
    return qs[:n] or None


def plan_key(queries: list[str] | None) -> str | None:
    return None if not queries else "\n".join(" ".join(q.lower().split()) for q in queries)


def candidate(text: str, n: int) -> Candidate:
    queries = parse_plan(text, n)
    e = elicit(text)
    return Candidate(action=None if queries is None else json.dumps(queries, ensure_ascii=False),
                     key=plan_key(queries), confidence=e.confidence, confidence_status=e.status,
                     explanation=e.explanation, raw=text)


class ResearchAUQ:
    """Options are ``configs/method/auq_deep_research.yaml``'s params (sources in auq/README.md)."""

    def __init__(self, variant: str = "dual", tau: float = 0.95, n_paths: int = 3, max_refinements: int = 3,
                 temperature: float = 0.7, first_sample: str = "reflect", memory_expansion: bool = True,
                 missing_confidence: str = "reflect", n_queries: int = 3, k: int = 3, rounds: int = 1,
                 window: int | None = None, evidence: str = "required") -> None:
        if variant not in VARIANTS:
            raise ValueError(f"AUQ variant {variant!r}: choose one of {VARIANTS}")
        if missing_confidence not in ("reflect", "act"):
            raise ValueError(f"missing_confidence={missing_confidence!r}: reflect | act")
        if int(rounds) < 1 or (window is not None and int(window) < 1):
            raise ValueError("rounds >= 1 and window a positive integer or null")
        self.variant, self.uam, self.uar = variant, variant in ("forward", "dual"), variant in ("inverse", "dual")
        self.uar_cfg = UARConfig(tau=float(tau), n_paths=int(n_paths), max_refinements=int(max_refinements),
                                 temperature=float(temperature), first_sample=first_sample,
                                 memory_expansion=bool(memory_expansion))
        self.missing_confidence, self.evidence = missing_confidence, evidence
        self.n_queries, self.k, self.rounds = int(n_queries), int(k), int(rounds)
        self.window = None if window is None else int(window)

    def trigger(self, c: Candidate) -> str | None:
        return self.uar_cfg.trigger(c, self.missing_confidence) if self.uar else None

    def memory(self, done: list[dict[str, Any]], full: bool) -> str:
        shown = done if full or self.window is None else done[-self.window:]
        if not shown:
            return ""
        blocks = []
        for r in shown:
            b = MEMORY_ROUND.format(i=r["round"], queries=json.dumps(r["queries"], ensure_ascii=False),
                                    notes=" | ".join(n[:400] for n in r["notes"]))
            if self.uam:
                b += "\n" + MEMORY_UNCERTAINTY.format(confidence=fmt_confidence(r["confidence"]),
                                                      explanation=r["explanation"] or "(no explanation given)")
            blocks.append(b)
        return MEMORY_HEADER.format(shown=len(shown), total=len(done)) + "\n\n".join(blocks) + "\n\n" + FOLLOW_UP

    async def plan_round(self, ctx: ProblemContext, task: str, done: list[dict[str, Any]]) -> tuple[Candidate,
                         dict[str, Any]]:
        """One planner step: System 1, and System 2 when the switch fires. Returns the executed plan."""
        def step_messages(full: bool) -> list[dict[str, str]]:
            return [{"role": "user", "content": PLAN.format(task=task, memory=self.memory(done, full), n=self.n_queries)}]

        def messages_for(seed: Candidate, full: bool) -> list[dict[str, str]]:
            cue = REFLECT.format(plan=seed.action or "(no parsable plan)", confidence=fmt_confidence(seed.confidence),
                                 explanation=seed.explanation or "(no explanation given)")
            if full:
                cue = EXPAND.format(window=self.window) + cue
            return [{"role": "user", "content": step_messages(full)[0]["content"] + cue}]

        async def propose(messages: list[dict[str, str]], temperature: float, offset: int, stage: str) -> Candidate:
            comp = (await ctx.generate(messages, stage=stage, role="planner", sample_offset=offset + 1000 * len(done),
                                       temperature=temperature))[0]
            return candidate(comp.text, self.n_queries)

        first = candidate(await ctx.ask(step_messages(False)[0]["content"], stage="plan", role="planner"),
                          self.n_queries)
        why = self.trigger(first)
        record: dict[str, Any] = {"system2": why is not None, "trigger": why, "c_init": first.confidence,
                                  "c_final": first.confidence, "expanded": False, "system1": first.to_dict()}
        if why is None:
            return first, record
        limited = self.window is not None and len(done) > self.window
        chosen, rounds = await resolve(self.uar_cfg, first, propose, messages_for, step_messages,
                                       limited_memory=limited)
        record.update({"c_final": chosen.confidence, "expanded": len(rounds) > 1,
                       "calls_system2": sum(r.calls for r in rounds), "rounds": [r.to_dict() for r in rounds],
                       "chosen": {"phase": chosen.phase, "path": chosen.path, "depth": chosen.depth}})
        return chosen, record

    async def solve(self, problem: ProblemView, ctx: ProblemContext) -> Solution:
        has_search = require_evidence(ctx, self.evidence)
        task = ctx.benchmark.render(problem)
        done: list[dict[str, Any]] = []
        for i in range(1, self.rounds + 1):
            chosen, record = await self.plan_round(ctx, task, done)
            queries = json.loads(chosen.action) if chosen.action else [task[:200]]
            notes = await research_notes(ctx, queries, k=self.k, has_search=has_search)
            done.append({"round": i, "queries": queries, "notes": notes, "confidence": chosen.confidence,
                         "explanation": chosen.explanation, "auq": record,
                         "fallback_plan": chosen.action is None})
        report = await write_report(ctx, task, [n for r in done for n in r["notes"]])
        trace = {"agent": f"auq_{self.variant}", "variant": self.variant, "tau": self.uar_cfg.tau,
                 "closed_book": not has_search, "no_search_tool": not has_search, "rounds": done,
                 "queries": [q for r in done for q in r["queries"]],
                 "system2_triggers": sum(bool(r["auq"]["system2"]) for r in done),
                 "fallback_plans": sum(bool(r["fallback_plan"]) for r in done),   # rounds researching the task text
                 "missing_confidence_rounds": sum(r["confidence"] is None for r in done)}
        return Solution(report, confidence=done[-1]["confidence"], trace=trace)
