"""A generated workflow as a harness method: its code runs in the sandbox, its operators here.

``SandboxedWorkflow(graph=..., prompt=...)`` is what a search's candidates and its frozen artifact run:
the graph (AFlow's ``graph.py``: ``class Workflow`` with ``async def __call__(self, problem[, entry_point])``)
and its prompt module (``prompt.py``: string constants) go to the sandbox through
:mod:`agentic_repro.baselines.autoflow.channel`; every operator request is checked against the allowed operator set and
run by :mod:`agentic_repro.baselines.autoflow.operators` on the problem context under role ``role`` (ledger, cache,
budgets). What the workflow sees of a problem is the task text the benchmark renders (and, for code, the
entry point); never the gold or the scored tests.
"""
from __future__ import annotations

import hashlib
import inspect
from collections import Counter
from typing import Any

from agentic_repro.harness.types import Solution
from agentic_repro.harness.view import ProblemView

from agentic_repro.baselines.autoflow import operators as ops_mod
from agentic_repro.baselines.autoflow.channel import Limits, OperatorCallError, OperatorRefused, run_workflow
from agentic_repro.harness.context import ProblemContext

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
    for every operator call (AFlow's executor: temperature 0 unless the config says otherwise).

    ``crash_attempts``: how many times a *failed workflow* (it crashed, hung, was refused...) runs on one problem
    before it scores 0; AFlow's benchmarks re-run a raising graph up to 5 times (tenacity
    ``stop_after_attempt(5)``). Each attempt continues the problem's sample counters, so it makes fresh calls (as
    a re-run against the API does), never a replay of the crash from the cache. An infrastructure failure is not
    retried here: it propagates and the problem is an error. ``operator_templates``: ``dataset`` runs ``dataset``'s
    own operators (AFlow's DROP/HotpotQA ScEnsemble has no question), ``shared`` one set for all. The defaults (1,
    ``shared``) are how artifacts written before these options ran; AFlow's search writes both explicitly."""

    def __init__(self, graph: str, prompt: str = "", *, kind: str = "aflow", role: str | None = "executor",
                 operators: list[str] | None = None, limits: dict[str, Any] | None = None,
                 sampling: dict[str, Any] | None = None, dataset: str | None = None,
                 answer_description: str = "", name: str = "", crash_attempts: int = 1,
                 operator_templates: str = "shared") -> None:
        if kind not in ("aflow", "adas"):
            raise ValueError(f"workflow kind {kind!r}: aflow (async class Workflow) or adas (def forward)")
        if int(crash_attempts) < 1:
            raise ValueError("crash_attempts must be >= 1")
        self.crash_attempts = int(crash_attempts)
        ops_mod._check_mode(operator_templates)
        self.operator_templates = operator_templates
        self.name = name
        self.kind = kind
        self.graph, self.prompt = graph, prompt or ""
        self.role = role
        self.answer_description = answer_description
        default = ["ADAS"] if kind == "adas" else [*ops_mod.OPERATORS, "LLM"]
        allowed = list(operators) if operators is not None else default
        unknown = [o for o in allowed if o not in ops_mod.OPERATORS and o not in ("LLM", "ADAS")]
        if unknown:
            raise ValueError(f"unknown operator(s) {unknown}; known: {sorted(ops_mod.OPERATORS)} and LLM")
        self.allowed = frozenset(allowed)
        self.limits = Limits(**(limits or {}))
        self.sampling = dict(sampling or {})
        self.dataset = dataset

    def payload(self, problem: ProblemView, ctx: ProblemContext) -> dict[str, Any]:
        seed = int.from_bytes(hashlib.sha256(f"{ctx.seed}:{problem.id}".encode()).digest()[:4], "big")
        out = {"problem": ctx.benchmark.render(problem), "dataset": self.dataset or ctx.benchmark.name,
               "name": "workflow", "seed": seed}
        if ctx.benchmark.domain == "code" and problem.fields.get("entry_point"):
            out["entry_point"] = str(problem.fields["entry_point"])
        return out

    async def solve(self, problem: ProblemView, ctx: ProblemContext) -> Solution:
        ops = ops_mod.Ops(ctx, role=self.role, **self.sampling)
        seen: Counter[str] = Counter()

        async def handler(op: str, args: dict[str, Any]) -> Any:
            if op not in self.allowed:
                raise OperatorRefused(f"operator {op!r} is not allowed (allowed: {sorted(self.allowed)})")
            if not all(isinstance(k, str) and _plain(v) for k, v in args.items()):
                raise OperatorRefused(f"{op}: arguments must be plain text, numbers or lists of them")
            if op == "ADAS":
                return await self._adas_agent(ctx, ops, seen, args)
            if op == "LLM":
                if set(args) != {"prompt"} or not isinstance(args["prompt"], str):
                    raise OperatorCallError("LLM takes one text argument: prompt")
                text = await ops.ask(args["prompt"], stage="LLM")
                ops.record("LLM", prompt=args["prompt"], response=text)
                return text
            fn = ops_mod.operator_for(op, self.dataset, self.operator_templates)
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

        failed: list[dict[str, Any]] = []
        for _ in range(self.crash_attempts):
            outcome = await run_workflow(self.graph, self.prompt, self.payload(problem, ctx), handler, self.limits,
                                         kind=self.kind)
            if outcome.ok:
                break
            failed.append({k: v for k, v in outcome.to_dict().items() if k != "requests"})
        trace = {"workflow": outcome.to_dict(), "operators": ops.trace}
        if self.crash_attempts > 1:
            trace["attempts"] = {"limit": self.crash_attempts, "ran": len(failed) + (1 if outcome.ok else 0),
                                 "failed": failed}
        # a failed workflow answers nothing: the benchmark scores it 0 (AFlow scores a crashed graph 0 too)
        return Solution(answer=outcome.answer or "", trace=trace)

    async def _adas_agent(self, ctx: ProblemContext, ops: Any, seen: Counter, args: dict[str, Any]) -> list[list[Any]]:
        """ADAS ``LLMAgentBase.query``: role + JSON format system prompt, the input infos and the instruction;
        the JSON reply's fields in its own order, missing ones filled with '' and extra ones dropped (as
        released). Returns ``[[field, value], ...]``."""
        import json_repair

        fields = args.get("output_fields")
        infos = args.get("input_infos")
        if not (isinstance(fields, list) and fields and all(isinstance(f, str) for f in fields)
                and isinstance(infos, list) and isinstance(args.get("instruction"), str)):
            raise OperatorCallError("LLMAgentBase needs output_fields (list of str), input infos and an instruction")
        desc = {k: f"Your {k}." if "answer" not in k else f"Your {k}. {self.answer_description}".rstrip()
                for k in fields}
        system = (f"You are a {args.get('role') or 'helpful assistant'}.\n\nReply EXACTLY with the following JSON "
                  f"format.\n{desc}\nDO NOT MISS ANY REQUEST FIELDS and ensure that your response is a well-formed "
                  "JSON object!\n")
        text = ""
        me = str(args.get("agent", ""))
        for info in infos:
            if not (isinstance(info, list) and len(info) == 4):
                continue
            name, author, content, idx = info
            author = f"{author} (yourself)" if author == me else author
            if name == "task":
                text += f"# Your Task:\n{content}\n\n"
            elif idx != -1:
                text += f"### {name} #{int(idx) + 1} by {author}:\n{content}\n\n"
            else:
                text += f"### {name} by {author}:\n{content}\n\n"
        user = text + args["instruction"]
        temp = args.get("temperature")
        temp = 0.5 if not isinstance(temp, (int, float)) or isinstance(temp, bool) else min(2.0, max(0.0, float(temp)))
        stage = "agent"
        key = hashlib.sha256((system + "\0" + user + f"\0{temp}").encode()).hexdigest()
        offset = seen[key]
        seen[key] += 1
        out = await ctx.generate([{"role": "system", "content": system}, {"role": "user", "content": user}],
                                 stage=stage, role=self.role, sample_offset=offset, temperature=temp,
                                 **{k: v for k, v in self.sampling.items() if k != "temperature"})
        reply = out[0].text
        try:
            parsed = json_repair.loads(reply)
        except Exception:  # noqa: BLE001 - an unreadable reply is an empty one (released: fields filled with '')
            parsed = {}
        resp = dict(parsed) if isinstance(parsed, dict) else {}
        for k in fields:
            if k not in resp and len(resp) < len(fields):
                resp[k] = ""
        for k in list(resp):
            if len(resp) > len(fields) and k not in fields:
                del resp[k]
        pairs = [[str(k), v if isinstance(v, (str, int, float, bool)) or v is None else json_dumps(v)]
                 for k, v in resp.items()]
        ops.record("LLMAgentBase", agent=me, fields=fields, reply=reply)
        return pairs


def json_dumps(v: Any) -> str:
    import json

    return json.dumps(v, ensure_ascii=False)
