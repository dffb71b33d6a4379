"""The state s_t and the summariser z_t = f_summary(s_t).

s_t holds the task, the stages executed so far (their graphs and outputs), the memory 𝓜, review
verdicts, test results and errors (paper §3.1). f_summary follows the release (state.py): each executed
stage is summarised once, by the ``summarizer`` role, from its raw record; z_t is the numbered
summaries joined (``Stage n:\\n<summary>``), or the released first-stage sentence before any stage. With
``errors_in_summary`` the errors so far are appended (paper: s_t includes "any encountered errors").
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agentic_repro.dyflow import prompts as P
from agentic_repro.dyflow.schema import StageGraph
from agentic_repro.harness.context import ProblemContext


@dataclass
class ExecutedStage:
    graph: StageGraph
    outputs: dict[str, str]                 # output_key -> text, in execution order
    details: dict[str, dict[str, Any]]      # output_key -> the operator's trace details


@dataclass
class WorkflowState:
    task: str                                            # original_problem
    memory: dict[str, str] = field(default_factory=dict)  # 𝓜
    stages: list[ExecutedStage] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    summaries: list[str] = field(default_factory=list)   # one per executed stage, in order
    n_outputs: int = 0                                   # for keys the designer left empty

    def fresh_key(self, reserved: set[str] = frozenset()) -> str:  # type: ignore[assignment]
        """A key not yet in 𝓜 nor ``reserved`` (Algorithm 1 line 9: "by execution order")."""
        while True:
            self.n_outputs += 1
            key = f"act_{self.n_outputs}"
            if key not in self.memory and key not in reserved:
                return key

    def raw_info(self, st: ExecutedStage) -> str:
        """The release's ``_build_stage_raw_info`` text for one executed stage."""
        g = st.graph
        by_key = {op.output_key: op for op in g.operators}
        lines = []
        for key in st.outputs:
            op = by_key[key]
            content = st.outputs[key]
            if op.template == "REVIEW_SOLUTION":
                lines.append(f"\t##{g.stage_id}##: Review output key: {key}:\n {op.description}\n"
                             f" Instruction type: {op.template}\n"
                             f" Reviews actions: {', '.join(op.input_keys) or 'None'}\n Review content: {content}")
            elif op.template == "TEST_CODE":
                lines.append(f"\t##{g.stage_id}##: Solution output key: {key}:\n {op.description}\n"
                             f" Instruction type: {op.template}\n Solution content: {content}\n"
                             f" Code execution result: {st.details.get(key, {}).get('status')}")
            else:
                lines.append(f"\t##{g.stage_id}##: Solution output key: {key}:\n {op.description}\n"
                             f" Instruction type: {op.template}\n Solution content: {content}")
        if not lines:
            return f"Stage goal ({g.stage_id}):\n {g.description}\nNo actions executed in this stage."
        return f"Stage goal ({g.stage_id}):\n {g.description}\n" + "\n".join(lines)

    def review_history(self) -> list[bool]:
        """Per executed stage: did it contain REVIEW_SOLUTION (the loop guard's input)."""
        return ["REVIEW_SOLUTION" in st.graph.templates for st in self.stages]


async def summarize(ctx: ProblemContext, state: WorkflowState, *, temperature: float, max_tokens: int | None,
                    errors_in_summary: bool) -> str:
    """z_t: summarise the stages not summarised yet (summarizer role, ledger stage ``summarize``)."""
    for st in state.stages[len(state.summaries):]:
        prompt = P.fill(P.SUMMARY_PROMPT, stage_raw_info=state.raw_info(st))
        sampling: dict[str, Any] = {"temperature": temperature}
        if max_tokens:
            sampling["max_tokens"] = max_tokens
        out = await ctx.generate([{"role": "user", "content": prompt}], stage="summarize", role="summarizer",
                                 **sampling)
        state.summaries.append(out[0].text.strip())
    if not state.summaries:
        z = P.FIRST_STAGE_SUMMARY
    else:
        z = "\n\n".join(f"Stage {i}:\n{s}" for i, s in enumerate(state.summaries, 1))
    if errors_in_summary and state.errors:
        z += "\n\n" + P.ERRORS_HEADER + "\n" + "\n".join(f"- {e}" for e in state.errors)
    return z
