"""DyFlow's stage subgraph G_t and the trace layout every DyFlow run writes.

Why a schema: the designer's output is the object the method executes *and* the target the designer
is trained on (``dyflow/train/`` builds (z_t, G_t) examples from the trace fields below). One pydantic
model for both keeps "what ran" and "what is learnt" the same thing.

Paper §3.1: G_t = (V_t, E_t, v_start, C_end); an operator instance o = (O_k, φ, ψ) with O_k a template,
φ a fine-grained instruction and ψ a list of input keys into the memory buffer 𝓜 (plus
``original_problem``). The released designer prompt asks for JSON of the form::

    {"stage_id": "stage_N", "stage_description": "...",
     "operators": [{"operator_id": "op_N_1", "operator_description": "...",
                    "params": {"instruction_type": "GENERATE_ANSWER", "input_keys": ["original_problem"],
                               "output_key": "act_1", "input_usage": "..."}}]}

:meth:`StageGraph.from_designer` reads that form (and a flat form with our own field names);
:meth:`StageGraph.to_designer` writes it back (the clean training target). Field mapping:
``template`` = ``params.instruction_type`` (O_k), ``instruction`` = ``params.input_usage`` (φ: the
release fills the executor prompt's Guidance slot with it), ``description`` = ``operator_description``.
E_t is ``edges`` (given by the designer, or derived from data flow: o_j depends on o_i when one of
o_j's input keys is o_i's output key); v_start is ``start``; C_end is ``end_condition``.

Context rules (input keys must exist in 𝓜, ORGANIZE_SOLUTION alone, ...) depend on the run's state and
options and live in :mod:`agentic_repro.dyflow.validate`; this module only checks what a stage is on its own.

Trace layout (``Solution.trace`` → ``predictions.jsonl``), see :class:`DyFlowTrace` / :class:`StageRecord`::

    trace = {"method": "dyflow", "variant": ..., "options": {...},
             "stages": [ {"index": t, "summary": z_t, "designer_messages": [...], "designer_output": raw,
                          "stage": StageGraph JSON | null, "outputs": {output_key: text},
                          "attempts": [...], "notice": ..., "loop_warning": ..., "executed": [...],
                          "status": "executed" | "design_failed" | "fallback"} , ...],
             "terminated_by": "organize" | "terminate" | "c_end" | "t_max" | "design_failure" | "single_stage",
             "final_key": ..., "memory": {key: text}, "n_stages": ..., "designer_calls": ...}

For training, ``designer_messages`` is exactly what the designer saw for the accepted attempt and
``designer_output`` its raw reply; ``stage`` is the validated graph (``to_designer`` gives it as the
released JSON). A stage whose every attempt failed has ``stage: null`` (its attempts are kept).
"""
from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

ORIGINAL_PROBLEM = "original_problem"

# Paper Table 6 (App. C.1) ...
PAPER_TEMPLATES: dict[str, str] = {
    "GENERATE_PLAN": "Propose a high-level plan for solving the current subgoal.",
    "DECOMPOSE_PROBLEM": "Break a complex goal into subgoals.",
    "GENERATE_ANSWER": "Produce an answer candidate for the current task.",
    "REVIEW_SOLUTION": "Evaluate correctness or completeness of a prior answer.",
    "REFINE_ANSWER": "Modify or improve a previously generated answer.",
    "GENERATE_CODE": "Write code to solve the current subgoal.",
    "REFINE_CODE": "Improve or debug previously generated code.",
    "ORGANIZE_SOLUTION": "Summarize or structure the final answer for output.",
    "ENSEMBLE": "Aggregate multiple reasoning paths using voting.",
    "DEFAULT": "General-purpose fallback operator.",
    "TERMINATE": "End the workflow once the solution is complete.",
}
# ... and the two the released code adds (dyflow/core/operator.py @ fa6d828).
RELEASE_ONLY_TEMPLATES: dict[str, str] = {
    "SELF_CONSISTENCY_ENSEMBLE": "Generate multiple independent solutions (3-5 solutions) and select the best "
                                 "by majority vote.",
    "TEST_CODE": "Extract and execute Python code from a code problem solution to verify it runs correctly.",
}
TEMPLATES: tuple[str, ...] = (*PAPER_TEMPLATES, *RELEASE_ONLY_TEMPLATES)
TERMINAL_TEMPLATES = frozenset({"ORGANIZE_SOLUTION", "TERMINATE"})
LLM_FREE_TEMPLATES = frozenset({"TEST_CODE", "TERMINATE"})  # no executor call


# Short names the released designer prompt itself uses ("try DECOMPOSE or ENSEMBLE instead") and their
# obvious siblings; anything else must be a template's full name.
ALIASES = {"DECOMPOSE": "DECOMPOSE_PROBLEM", "PLAN": "GENERATE_PLAN", "REVIEW": "REVIEW_SOLUTION",
           "REFINE": "REFINE_ANSWER", "ORGANIZE": "ORGANIZE_SOLUTION", "SELF_CONSISTENCY": "SELF_CONSISTENCY_ENSEMBLE",
           "SC_ENSEMBLE": "SELF_CONSISTENCY_ENSEMBLE", "ANSWER": "GENERATE_ANSWER", "TEST": "TEST_CODE"}


def normalise_template(name: Any) -> str:
    """``"generate answer"`` / ``"Generate-Answer"`` -> ``"GENERATE_ANSWER"``; the short names of
    :data:`ALIASES` -> their template."""
    t = "_".join(str(name or "").strip().upper().replace("-", " ").split())
    return ALIASES.get(t, t)


class OperatorInstance(BaseModel):
    """o = (O_k, φ, ψ) plus its output key in 𝓜 and the ids the release uses."""

    model_config = ConfigDict(extra="ignore")

    operator_id: str = ""
    template: str                      # O_k, one of TEMPLATES (checked in dyflow.validate with the run's set)
    instruction: str = ""              # φ (release: params.input_usage, the executor's Guidance)
    description: str = ""              # release: operator_description
    input_keys: list[str] = Field(default_factory=list)   # ψ
    output_key: str = ""
    final_answer_key: str = ""         # TERMINATE only (release params.final_answer_key): the key of 𝓜 it returns

    @field_validator("final_answer_key", mode="before")
    @classmethod
    def _answer_key(cls, v: Any) -> str:
        """The release's spellings of a key: ``act_3``, ``<<act_3>>``, ``actions.act_3.content``."""
        k = str(v or "").strip()
        if k.startswith("<<") and k.endswith(">>"):
            k = k[2:-2].strip()
        if k.startswith("actions.") and k.endswith(".content"):
            k = k[len("actions."):-len(".content")]
        return k

    @property
    def answer_key(self) -> str | None:
        """What TERMINATE returns: its ``final_answer_key``, else its first input key that is not the problem."""
        return self.final_answer_key or next((k for k in self.input_keys if k != ORIGINAL_PROBLEM), None)

    @field_validator("template", mode="before")
    @classmethod
    def _norm_template(cls, v: Any) -> str:
        t = normalise_template(v)
        if not t:
            raise ValueError("template (instruction_type) is empty")
        return t

    @field_validator("input_keys", mode="before")
    @classmethod
    def _keys_list(cls, v: Any) -> list[str]:
        if v is None:
            return []
        if isinstance(v, str):
            v = [v]
        if not isinstance(v, (list, tuple)):
            raise ValueError(f"input_keys must be a list of keys, not {type(v).__name__}")
        return [str(k).strip() for k in v if str(k).strip()]

    @field_validator("instruction", "description", "operator_id", "output_key", mode="before")
    @classmethod
    def _text(cls, v: Any) -> str:
        if v is None:
            return ""
        if isinstance(v, (dict, list)):
            import json

            return json.dumps(v, ensure_ascii=False)
        return str(v).strip()

    @property
    def terminal(self) -> bool:
        return self.template in TERMINAL_TEMPLATES


class StageGraph(BaseModel):
    """G_t = (V_t, E_t, v_start, C_end) for one stage."""

    model_config = ConfigDict(extra="ignore")

    stage_id: str
    description: str = ""
    operators: list[OperatorInstance] = Field(min_length=1)           # V_t
    edges: list[tuple[str, str]] = Field(default_factory=list)        # E_t: (operator_id -> operator_id)
    start: str | None = None                                          # v_start (an operator_id)
    end_condition: Literal["operators_done", "terminate"] = "operators_done"   # C_end

    @field_validator("stage_id", mode="before")
    @classmethod
    def _sid(cls, v: Any) -> str:
        s = str(v if v is not None else "").strip()
        if not s:
            raise ValueError("stage_id is empty")
        return s

    @model_validator(mode="after")
    def _ids_and_edges(self) -> StageGraph:
        for i, op in enumerate(self.operators, 1):      # the release names them op_<stage>_<i>; fill gaps
            if not op.operator_id:
                op.operator_id = f"op_{self.stage_id}_{i}"
        ids = [op.operator_id for op in self.operators]
        if len(set(ids)) != len(ids):
            raise ValueError(f"operator ids repeat within the stage: {ids}")
        for a, b in self.edges:
            if a not in ids or b not in ids:
                raise ValueError(f"edge ({a}, {b}) names an operator that is not in this stage")
        if self.start is not None and self.start not in ids:
            raise ValueError(f"start {self.start!r} is not an operator of this stage")
        if any(op.terminal for op in self.operators):
            self.end_condition = "terminate"
        return self

    # ---- the released designer JSON ------------------------------------------------------------
    @classmethod
    def from_designer(cls, obj: Any) -> StageGraph:
        """Build from the designer's JSON (released form, or a flat form with our field names)."""
        if isinstance(obj, list) and len(obj) == 1 and isinstance(obj[0], dict):
            obj = obj[0]
        if not isinstance(obj, dict):
            raise ValueError(f"the stage must be a JSON object, got {type(obj).__name__}")
        ops_in = obj.get("operators")
        ops: list[dict[str, Any]] | Any = ops_in
        if isinstance(ops_in, list):
            ops = []
            for o in ops_in:
                if not isinstance(o, dict):
                    raise ValueError(f"each operator must be a JSON object, got {type(o).__name__}")
                p = o.get("params") if isinstance(o.get("params"), dict) else {}
                ops.append({
                    "operator_id": o.get("operator_id", o.get("id")),
                    "template": p.get("instruction_type", o.get("instruction_type", o.get("template"))),
                    "instruction": p.get("input_usage", o.get("input_usage", o.get("instruction"))),
                    "description": o.get("operator_description", o.get("description")),
                    "input_keys": p.get("input_keys", o.get("input_keys")),
                    "output_key": p.get("output_key", o.get("output_key")),
                    "final_answer_key": p.get("final_answer_key", o.get("final_answer_key")),
                })
        edges = obj.get("edges") or []
        if isinstance(edges, list):
            edges = [tuple(e) if isinstance(e, (list, tuple)) else
                     (e.get("from", e.get("source")), e.get("to", e.get("target"))) if isinstance(e, dict) else e
                     for e in edges]
        data = {"stage_id": obj.get("stage_id"), "description": obj.get("stage_description", obj.get("description")),
                "operators": ops, "edges": edges, "start": obj.get("start")}
        return cls.model_validate({k: v for k, v in data.items() if v is not None})

    def to_designer(self) -> dict[str, Any]:
        """The released JSON form (what the designer prompt asks for): the clean training target."""
        out: dict[str, Any] = {"stage_id": self.stage_id, "stage_description": self.description, "operators": [
            {"operator_id": op.operator_id, "operator_description": op.description,
             "params": {"instruction_type": op.template, "input_keys": list(op.input_keys),
                        "output_key": op.output_key, "input_usage": op.instruction,
                        **({"final_answer_key": op.final_answer_key} if op.final_answer_key else {})}}
            for op in self.operators]}
        if self.edges:
            out["edges"] = [list(e) for e in self.edges]
        if self.start:
            out["start"] = self.start
        return out

    # ---- execution order -----------------------------------------------------------------------
    def dependencies(self) -> dict[str, set[str]]:
        """E_t as operator_id -> the ids it waits for: the given edges plus data flow within the stage."""
        producer = {op.output_key: op.operator_id for op in self.operators if op.output_key}
        deps: dict[str, set[str]] = {op.operator_id: set() for op in self.operators}
        for a, b in self.edges:
            deps[b].add(a)
        for op in self.operators:
            for k in [*op.input_keys, *([op.final_answer_key] if op.final_answer_key else [])]:
                src = producer.get(k)
                if src is not None and src != op.operator_id:
                    deps[op.operator_id].add(src)
        return deps

    def topological_order(self) -> list[OperatorInstance]:
        """Kahn's order over :meth:`dependencies`, ties broken by listed order (the release's order),
        ``start`` first when it has no dependencies. Raises ``ValueError`` on a cycle."""
        deps = {k: set(v) for k, v in self.dependencies().items()}
        listed = [op.operator_id for op in self.operators]
        if self.start and not deps[self.start]:
            listed.remove(self.start)
            listed.insert(0, self.start)
        by_id = {op.operator_id: op for op in self.operators}
        order: list[OperatorInstance] = []
        done: set[str] = set()
        while len(order) < len(listed):
            ready = [i for i in listed if i not in done and deps[i] <= done]
            if not ready:
                left = [i for i in listed if i not in done]
                raise ValueError(f"the operators' dependencies form a cycle: {left}")
            order.append(by_id[ready[0]])
            done.add(ready[0])
        return order

    @property
    def templates(self) -> list[str]:
        return [op.template for op in self.operators]

    @property
    def terminal(self) -> bool:
        return any(op.terminal for op in self.operators)


# ---- the trace -------------------------------------------------------------------
class Attempt(BaseModel):
    """One designer call for a stage: its reply and what validation made of it."""

    model_config = ConfigDict(extra="allow")

    kind: Literal["first", "reask"]
    messages: list[dict[str, str]]
    raw: str
    status: Literal["valid", "repaired", "invalid"]
    error: str | None = None          # the validation error (of the raw text, then of the repaired one)
    repair_error: str | None = None


class ExecutedOperator(BaseModel):
    model_config = ConfigDict(extra="allow")

    operator_id: str
    template: str
    output_key: str
    ledger_stage: str | None = None   # the cost-ledger stage name of its calls (None: no LLM call)
    error: str | None = None


class StageRecord(BaseModel):
    """One planning step t of Algorithm 1."""

    model_config = ConfigDict(extra="allow")

    index: int
    summary: str                              # z_t = f_summary(s_t)
    designer_messages: list[dict[str, str]]   # the accepted attempt's prompt (else the last one's)
    designer_output: str                      # the accepted attempt's raw reply (else the last one's)
    stage: dict[str, Any] | None              # StageGraph.model_dump(mode="json"), None if design failed
    outputs: dict[str, str]                   # output_key -> text written to 𝓜 in this stage
    attempts: list[Attempt] = Field(default_factory=list)
    notice: str | None = None                 # the stage-count notice appended to the designer prompt
    loop_warning: str | None = None
    executed: list[ExecutedOperator] = Field(default_factory=list)
    status: Literal["executed", "design_failed", "fallback"] = "executed"


class DyFlowTrace(BaseModel):
    model_config = ConfigDict(extra="allow")

    method: Literal["dyflow"] = "dyflow"
    variant: str
    options: dict[str, Any]
    stages: list[StageRecord]
    terminated_by: str
    final_key: str | None
    memory: dict[str, str]
    n_stages: int
    designer_calls: int


def stage_from_trace(record: dict[str, Any]) -> StageGraph | None:
    """The validated stage of a trace's stage record (``None`` when that stage's design failed)."""
    st = record.get("stage")
    return None if st is None else StageGraph.model_validate(st)
