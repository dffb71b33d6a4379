"""A generated workflow as a harness method: its code runs in the sandbox, its operators here.

``SandboxedWorkflow(graph=..., prompt=...)`` is what a search's candidates and its frozen artifact run:
the graph (AFlow's ``graph.py``: ``class Workflow`` with ``async def __call__(self, problem[, entry_point])``)
and its prompt module (``prompt.py``: string constants) go to the sandbox through
:mod:`baselines.autoflow.channel`; every operator request is checked against the allowed operator set and
run by :mod:`baselines.autoflow.operators` on the problem context under role ``role`` (ledger, cache,
budgets). What the workflow sees of a problem is the task text the benchmark renders (and, for code, the
entry point); never the gold or the scored tests.
"""
from __future__ import annotations

import inspect
from typing import Any

from harness.types import Solution
from harness.view import ProblemView

from baselines.autoflow import operators as ops_mod
from baselines.autoflow.channel import Limits, OperatorCallError, OperatorRefused, run_workflow

#: what a request's argument may be (plain data; lists of such)
_PLAIN = (str, int, float, bool, type(None))


def _plain(v: Any, depth: int = 0) -> bool:
    if isinstance(v, _PLAIN):
        return True
    if isinstance(v, list) and depth < 2:
        return all(_plain(x, depth + 1) for x in v)
    return False


class SandboxedWorkflow:
    """``operators``: the names a workflow may call (None: every operator of the vocabulary, plus ``LLM``);
    ``limits``: :class:`~baselines.autoflow.channel.Limits` fields; ``sampling``: executor sampling defaults
    for every operator call (AFlow's executor: temperature 0 unless the config says otherwise)."""

    def __init__(self, graph: str, prompt: str = "", *, role: str | None = "executor",
                 operators: list[str] | None = None, limits: dict[str, Any] | None = None,
                 sampling: dict[str, Any] | None = None, dataset: str | None = None, name: str = "") -> None:
        self.name = name
        self.graph, self.prompt = graph, prompt or ""
        self.role = role
        allowed = list(operators) if operators is not None else [*ops_mod.OPERATORS, "LLM"]
        unknown = [o for o in allowed if o not in ops_mod.OPERATORS and o != "LLM"]
        if unknown:
            raise ValueError(f"unknown operator(s) {unknown}; known: {sorted(ops_mod.OPERATORS)} and LLM")
        self.allowed = frozenset(allowed)
        self.limits = Limits(**(limits or {}))
        self.sampling = dict(sampling or {})
        self.dataset = dataset

    def payload(self, problem: ProblemView, ctx: Any) -> dict[str, Any]:
        out = {"problem": ctx.benchmark.render(problem), "dataset": self.dataset or ctx.benchmark.name,
               "name": "workflow"}
        if ctx.benchmark.domain == "code" and problem.fields.get("entry_point"):
            out["entry_point"] = str(problem.fields["entry_point"])
        return out

    async def solve(self, problem: ProblemView, ctx: Any) -> Solution:
        ops = ops_mod.Ops(ctx, role=self.role, **self.sampling)

        async def handler(op: str, args: dict[str, Any]) -> Any:
            if op not in self.allowed:
                raise OperatorRefused(f"operator {op!r} is not allowed (allowed: {sorted(self.allowed)})")
            if not all(isinstance(k, str) and _plain(v) for k, v in args.items()):
                raise OperatorRefused(f"{op}: arguments must be plain text, numbers or lists of them")
            if op == "LLM":
                if set(args) != {"prompt"} or not isinstance(args["prompt"], str):
                    raise OperatorCallError("LLM takes one text argument: prompt")
                text = await ops.ask(args["prompt"], stage="LLM")
                ops.record("LLM", prompt=args["prompt"], response=text)
                return text
            fn = ops_mod.OPERATORS[op]
            try:
                inspect.signature(fn).bind(ops, **args)
            except TypeError as exc:
                raise OperatorCallError(f"{op}: {exc}") from None
            if any(k == "stage" or k.startswith("_") for k in args):
                raise OperatorCallError(f"{op}: argument names may not be 'stage' or start with '_'")
            try:
                return await fn(ops, **args)
            except (ValueError, TypeError) as exc:  # the workflow's arguments (e.g. ScEnsemble of no solutions)
                ops.record(op, operator_error=f"{type(exc).__name__}: {exc}")
                raise OperatorCallError(f"{op}: {type(exc).__name__}: {exc}") from None

        outcome = await run_workflow(self.graph, self.prompt, self.payload(problem, ctx), handler, self.limits)
        trace = {"workflow": outcome.to_dict(), "operators": ops.trace}
        # a failed workflow answers nothing: the benchmark scores it 0 (AFlow scores a crashed graph 0 too)
        return Solution(answer=outcome.answer or "", trace=trace)
