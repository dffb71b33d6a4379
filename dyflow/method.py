"""DyFlow as a harness method: Algorithm 1 of the paper.

    s_0 = {p}; 𝓜 = {}
    for t < T_max:
        z_t = f_summary(s_t)                       (role summarizer)
        G_t ~ π_θ(· | z_t)                         (role designer; validated, repaired, re-asked)
        for o = (O_k, φ, ψ) in V_t, topological order:
            r = π_exec(φ, [𝓜[k] for k in ψ]);  𝓜[k_r] = r      (role executor)
        s_{t+1} = UpdateState(s_t, G_t, 𝓜)
        stop if C_end (a terminal operator ran: ORGANIZE_SOLUTION / TERMINATE)

plus the release's stage rules (dyflow/README.md). Variants: ``single_stage`` (w/o dynamic planning:
one designed stage, no feedback) and ``fixed_template`` (w/o dynamic operator: a fixed stage template,
no designer). The trace layout is :mod:`agentic_repro.dyflow.schema`'s.
"""
from __future__ import annotations

from typing import Any

from agentic_repro.dyflow import prompts as P
from agentic_repro.dyflow.config import Options
from agentic_repro.dyflow.counts import problem_counts
from agentic_repro.dyflow.designer import design_stage
from agentic_repro.dyflow.operators import Calls, run_operator, verdict_of
from agentic_repro.dyflow.schema import (ORIGINAL_PROBLEM, TERMINAL_TEMPLATES, ExecutedOperator, OperatorInstance, StageGraph,
                           StageRecord)
from agentic_repro.dyflow.state import ExecutedStage, WorkflowState, summarize
from agentic_repro.dyflow.validate import StageRules
from agentic_repro.harness.types import Solution
from agentic_repro.harness.context import ProblemContext
from agentic_repro.harness.view import ProblemView

ANSWER_TEMPLATES = ("ORGANIZE_SOLUTION", "REFINE_ANSWER", "REFINE_CODE", "GENERATE_ANSWER", "GENERATE_CODE",
                    "SELF_CONSISTENCY_ENSEMBLE", "ENSEMBLE", "DEFAULT")


def task_text(ctx: ProblemContext, opts: Options) -> str:
    """original_problem as run_dataset.py builds it: the question (with its answer format: PubMedQA's
    ``Question ... Context ... Answer the question ... [[yes]] ...``, SocialMaze's ``... Final Criminal ...``,
    here the task text + the benchmark's answer instruction when the text lacks it) + "\n\n" + the
    release's suffix for the domain (MATH's asks for a boxed answer, HumanEval's for a python block)."""
    bench = ctx.benchmark
    text = bench.render(ctx.problem)
    instr = bench.answer_instruction or ""
    own_format = opts.task_suffix == "release" and bench.domain in ("math", "code")
    if opts.append_answer_instruction and instr and instr not in text and not own_format:
        text += "\n\n" + instr
    if opts.task_suffix == "none":
        return text
    suffix = {"math": P.SUFFIX_MATH, "code": P.SUFFIX_CODE}.get(bench.domain, P.SUFFIX_REASONING)
    return text + "\n\n" + suffix


class DyFlow:
    """The method object the runner builds from ``configs/method/dyflow*.yaml``."""

    def __init__(self, **params: Any) -> None:
        self.opts = Options.build(params)
        self.name = self.opts.folder or "dyflow"

    def _designer_adapter(self, ctx: ProblemContext) -> str | None:
        """The adapter to pass on designer calls: None when the role is bound to the required one (or
        nothing is required); the required one when the role binds none; a conflict is an error."""
        want = self.opts.designer_adapter
        run = getattr(ctx, "run", ctx)          # a problem context or the run context
        bound = getattr(run, "adapters", {}).get("designer")
        if want is None or bound == want:
            return None
        if bound is None:
            return want
        raise ValueError(f"DyFlow variant {self.opts.variant} runs the designer adapter {want!r}, but "
                         f"roles.designer.adapter={bound!r}; drop one of them")

    async def preflight(self, run_ctx: Any) -> None:
        """Before any problem: a variant whose designer adapter the run cannot serve stops here, with the
        adapter's name (never a silent run on the untrained designer)."""
        want = self.opts.designer_adapter
        if want is None or "designer" not in run_ctx.llms:
            return
        self._designer_adapter(run_ctx)            # a conflicting binding is refused
        try:
            run_ctx.llms["designer"].adapter_identity(want)
        except Exception as exc:
            raise RuntimeError(f"DyFlow {self.opts.variant} needs the trained designer adapter {want!r} "
                               f"(dyflow/train/), which this run's designer backbone does not serve: {exc}. "
                               f"Declare it, e.g. +backbone.adapters.{want}.path=/abs/{want}.gguf") from exc

    async def solve(self, problem: ProblemView, ctx: ProblemContext) -> Solution:
        opts = self.opts
        self._adapter = self._designer_adapter(ctx)
        state = WorkflowState(task=task_text(ctx, opts))
        calls = Calls()
        records: list[StageRecord] = []
        final_key: str | None = None
        designer_calls = 0
        if opts.planning == "fixed_template":
            terminated_by, final_key = await self._fixed(ctx, state, calls, records)
        else:
            terminated_by = "t_max"
            for t in range(opts.t_max if opts.planning == "dynamic" else 1):
                if len(state.stages) >= opts.max_stages:
                    terminated_by = "max_stages"
                    break
                rec, stage = await self._plan(ctx, state, calls, t)
                designer_calls += len(rec.attempts)
                records.append(rec)
                if stage is None:
                    state.errors.append(f"planning step {t + 1}: no valid stage after {len(rec.attempts)} "
                                        f"attempt(s): {rec.attempts[-1].error}")
                    if opts.planning == "single_stage":
                        terminated_by = "design_failure"
                    continue
                final_key = await self._execute(ctx, state, stage, rec, calls)
                if final_key is not None:
                    terminated_by = "organize" if any(op.template == "ORGANIZE_SOLUTION" for op in stage.operators
                                                      if op.output_key == final_key) else "terminate"
                    break
                if opts.planning == "single_stage":
                    terminated_by = "single_stage"
        answer, answer_key, answer_from = self._answer(state, final_key)
        answer_template = self._template_of(state, answer_key)
        if answer and opts.code_postprocess == "release" and ctx.benchmark.domain == "code":
            answer = await self._extract_code(ctx, answer)
            answer_from += "+code_extraction"
        summ = ctx.summary()
        trace = {
            "method": "dyflow", "variant": opts.variant, "options": opts.resolved(),
            "designer_adapter": self._adapter or getattr(getattr(ctx, "run", None), "adapters", {}).get("designer"),
            "original_problem": state.task,
            "stages": [r.model_dump(mode="json") for r in records],
            "terminated_by": terminated_by, "final_key": final_key, "answer_key": answer_key,
            "answer_from": answer_from, "answer_template": answer_template,
            "memory": dict(state.memory), "errors": list(state.errors),
            "n_stages": len(state.stages), "designer_calls": designer_calls,
            "operators_used": [op.template for st in state.stages for op in st.graph.operators
                               if op.output_key in st.outputs],
            "cost": {"calls": summ.calls, "prompt_tokens": summ.prompt_tokens,
                     "completion_tokens": summ.completion_tokens, "cost_usd": summ.cost_usd,
                     "by_stage": summ.by_stage},
        }
        if not answer:
            trace["method_failure"] = ("no stage could be designed" if not state.stages
                                       else "the workflow produced no answer")
        trace["counts"] = problem_counts(trace)
        return Solution(answer, trace=trace)

    @staticmethod
    def _template_of(state: WorkflowState, key: str | None) -> str | None:
        """The template of the operator whose output became the answer (the latest stage that wrote ``key``)."""
        for st in reversed(state.stages):
            if key in st.outputs:
                return next((op.template for op in st.graph.operators if op.output_key == key), None)
        return None

    # ---- one planning step ----------------------------------------------------------------------
    def _rules(self, state: WorkflowState) -> tuple[StageRules, str | None]:
        opts = self.opts
        n = len(state.stages) + 1
        notice = None
        if n >= opts.terminate_notice_stage:
            notice = P.fill(P.NOTICE_TERMINATE, n=str(n))
        elif n >= opts.notice_from_stage:
            notice = P.fill(P.NOTICE_CONSTRAINT, n=str(n))
        single = opts.planning == "single_stage"
        rules = StageRules(memory_keys=tuple(state.memory), stage_number=n, organize_alone=opts.organize_alone,
                           # from the first notice on, the released text asks to include ORGANIZE_SOLUTION
                           allow_mixed_terminal=single or n >= opts.notice_from_stage,
                           require_terminal=single, first_stage_needs_problem=opts.first_stage_needs_problem,
                           unknown_template=opts.unknown_template, key_repair=opts.key_repair,
                           validation=opts.validation)
        return rules, notice

    def _loop_warning(self, state: WorkflowState) -> str | None:
        g = self.opts.loop_guard
        hist = state.review_history()
        if g and len(hist) >= g and all(hist[-g:]):
            return P.LOOP_WARNING
        return None

    async def _plan(self, ctx: ProblemContext, state: WorkflowState, calls: Calls,
                    t: int) -> tuple[StageRecord, StageGraph | None]:
        opts = self.opts
        z = await summarize(ctx, state, temperature=opts.summarizer_temperature,
                            max_tokens=opts.summarizer_max_tokens, errors_in_summary=opts.errors_in_summary)
        rules, notice = self._rules(state)
        warning = self._loop_warning(state)
        base = P.paper_catalogue_prompt() if opts.operator_catalogue == "paper" else P.DESIGN_STAGE_PROMPT
        prompt = P.fill(base, problem_description=state.task, state_summary=z)
        if opts.planning == "single_stage":
            prompt += P.SINGLE_STAGE
        elif notice:
            prompt += notice
        if warning and opts.loop_warning_in_prompt:
            prompt += "\n\n" + warning
        stage, attempts = await design_stage(ctx, prompt, rules, opts, calls, adapter=self._adapter)
        last = next((a for a in attempts if a.status != "invalid"), attempts[-1])
        rec = StageRecord(index=t, summary=z, designer_messages=last.messages, designer_output=last.raw,
                          stage=None if stage is None else stage.model_dump(mode="json"), outputs={},
                          attempts=attempts, notice=notice, loop_warning=warning,
                          status="executed" if stage is not None else "design_failed")
        return rec, stage

    # ---- execution --------------------------------------------------------------------------------
    async def _execute(self, ctx: ProblemContext, state: WorkflowState, stage: StageGraph, rec: StageRecord | None,
                       calls: Calls) -> str | None:
        """Run V_t (topological order under ``validation=strict``; listed order, as the release, otherwise);
        returns the final answer's key when a terminal operator ran. Under release validation an operator
        whose input key is not in 𝓜 fails as in the release (``Input data not found``): recorded in the
        state's errors and the trace, no output, the stage goes on."""
        outputs: dict[str, str] = {}
        details: dict[str, dict[str, Any]] = {}
        executed: list[ExecutedOperator] = []
        final: str | None = None
        order = stage.topological_order() if self.opts.validation == "strict" else list(stage.operators)
        for op in order:
            if not op.output_key:     # the designer left it empty: a fresh key by execution order
                op.output_key = state.fresh_key({o.output_key for o in stage.operators})
            gone = [k for k in op.input_keys if k != ORIGINAL_PROBLEM and k not in state.memory]
            if gone or (op.template == "TEST_CODE" and not op.input_keys):
                err = (f"input data not found: {', '.join(gone)}" if gone else "TEST_CODE names no solution to test")
                state.errors.append(f"stage {len(state.stages) + 1}: operator {op.operator_id} "
                                    f"({op.template}) failed: {err}")
                executed.append(ExecutedOperator(operator_id=op.operator_id, template=op.template,
                                                 output_key=op.output_key, error=err))
                continue
            text, info = await run_operator(ctx, op, state.memory, state.task, self.opts, calls)
            state.memory[op.output_key] = text
            outputs[op.output_key] = text
            details[op.output_key] = info
            executed.append(ExecutedOperator(operator_id=op.operator_id, template=op.template,
                                             output_key=op.output_key, ledger_stage=info.get("ledger_stage"),
                                             **{k: v for k, v in info.items() if k != "ledger_stage"}))
            if op.template in TERMINAL_TEMPLATES:      # the release returns 'terminate' right away
                final = op.output_key
                break
        state.stages.append(ExecutedStage(stage, outputs, details))
        if rec is not None:
            rec.stage = stage.model_dump(mode="json")   # with the keys filled in
            rec.outputs = outputs
            rec.executed = executed
        return final

    def _answer(self, state: WorkflowState, final_key: str | None) -> tuple[str, str | None, str]:
        if final_key is not None:
            return state.memory.get(final_key, ""), final_key, "terminal"
        if self.opts.no_answer == "empty":
            return "", None, "none"
        for kinds in (ANSWER_TEMPLATES, None):   # the latest answer-producing output, else the latest output
            for st in reversed(state.stages):
                by_key = {op.output_key: op for op in st.graph.operators}
                for key in reversed(list(st.outputs)):
                    t = by_key[key].template
                    if (t in kinds if kinds else t != "TEST_CODE") and st.outputs[key].strip():
                        return st.outputs[key], key, "last_output" if kinds else "last_any_output"
        return "", None, "none"

    async def _extract_code(self, ctx: ProblemContext, answer: str) -> str:
        prompt = P.fill(P.CODE_EXTRACTION, question=ctx.benchmark.render(ctx.problem), final_answer=answer)
        sampling: dict[str, Any] = {"temperature": self.opts.executor_temperature}
        if self.opts.executor_max_tokens:
            sampling["max_tokens"] = self.opts.executor_max_tokens
        out = await ctx.generate([{"role": "user", "content": prompt}], stage="extract_code", role="executor",
                                 **sampling)
        return out[0].text

    # ---- w/o dynamic operator: the fixed-stage template -------------------------------------------
    async def _fixed(self, ctx: ProblemContext, state: WorkflowState, calls: Calls,
                     records: list[StageRecord]) -> tuple[str, str | None]:
        """Stage 1: GENERATE_PLAN -> GENERATE_ANSWER -> REVIEW_SOLUTION; then REFINE_ANSWER -> REVIEW_SOLUTION
        until the review accepts (at most ``fixed_max_refines``); then ORGANIZE_SOLUTION alone. The branch on
        the verdict is fixed edge logic, not a designer decision (paper §3.2's contrast)."""
        P_ = ORIGINAL_PROBLEM

        def op(i: int, s: int, template: str, keys: list[str], out: str, instruction: str) -> OperatorInstance:
            return OperatorInstance(operator_id=f"op_{s}_{i}", template=template, input_keys=keys, output_key=out,
                                    instruction=instruction, description=template.lower().replace("_", " "))

        async def run(graph: StageGraph) -> str | None:
            rec = StageRecord(index=len(records), summary="", designer_messages=[], designer_output="",
                              stage=None, outputs={}, fixed=True)
            records.append(rec)
            return await self._execute(ctx, state, graph, rec, calls)

        s = 1
        await run(StageGraph(stage_id="stage_1", description="Plan, solve and review.", operators=[
            op(1, s, "GENERATE_PLAN", [P_], "act_1", "Plan how to solve original_problem."),
            op(2, s, "GENERATE_ANSWER", [P_, "act_1"], "act_2", "Solve original_problem following the plan act_1."),
            op(3, s, "REVIEW_SOLUTION", [P_, "act_2"], "act_3", "Review the solution act_2 of original_problem.")]))
        answer, review, n = "act_2", "act_3", 3
        refines = 0
        while verdict_of(state.memory[review]) != "accept" and refines < self.opts.fixed_max_refines \
                and len(state.stages) + 1 < self.opts.max_stages:
            s += 1
            refines += 1
            a, r = f"act_{n + 1}", f"act_{n + 2}"
            await run(StageGraph(stage_id=f"stage_{s}", description="Refine the answer and review it.", operators=[
                op(1, s, "REFINE_ANSWER", [P_, answer, review], a,
                   f"Refine the solution {answer} of original_problem using the review {review}."),
                op(2, s, "REVIEW_SOLUTION", [P_, a], r, f"Review the solution {a} of original_problem.")]))
            answer, review, n = a, r, n + 2
        s += 1
        final = await run(StageGraph(stage_id=f"stage_{s}", description="Organize the final solution.", operators=[
            op(1, s, "ORGANIZE_SOLUTION", [P_, answer], f"act_{n + 1}",
               f"Present the final solution {answer} of original_problem.")]))
        state.n_outputs = n + 1
        return "organize", final
