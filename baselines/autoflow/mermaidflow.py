"""MermaidFlow (Zheng et al. 2025, "Redefining Agentic Workflow Generation via Safety-Constrained Evolutionary
Programming"): workflows are typed Mermaid flowcharts over AFlow's operators; an LLM optimiser evolves them
(mutation of one parent, crossover of two) with an LLM judge picking among four children and a static checker
rejecting ill-typed graphs; every accepted graph is scored on the validate split.

Facts taken from chengqiArchy/MermaidFlow (``scripts/optimizer.py``, ``scripts/mermaid_workflow.py``,
``scripts/evolution_related.py``, ``scripts/evolution_prompt.py``, ``run.py``, ``workspace/*/workflows/round_1``) and
ChengqiCodeTrip/MermaidFlow_Linter (``scripts/MermaidChecker.py``, ``config/*.json``); prompts verbatim in
:mod:`agentic_repro.baselines.autoflow.mermaidflow_prompts`:

- round 1 is the released seed graph; every later round picks a parent among the top ``sample`` rounds by AFlow's
  mixed probability (alpha 0.2, lambda 0.3 over scores x 100); from round 5 on (``self.round >= 4``) a round is
  a **crossover** with probability **0.1**: two distinct parents drawn the same way, ``GENERATE_CHILDREN_PROMPT``;
  otherwise a **mutation** of the parent (``UPDATE_WORKFLOW_MERMAID_<type>`` with its experience, score and three
  logged failures). Either way the optimiser writes **four** candidate children (XML ``graph_A..D``), an LLM judge
  (``LLM_AS_JUDGER`` / ``LLM_AS_JUDGER_SINGLE``) selects one, and the checker tests it; a failing graph is sent back
  with its errors (``LEARN_FROM_FAILED_MERMAID``), at most **3** tries; a modification already tried on that parent
  is regenerated (``check_modification``);
- the checker: W1 PROBLEM and RETURN exist, W2 every classed node lies on a path PROBLEM -> node -> RETURN, W3
  both are ``Interface``, W4 node classes are legal operator classes, W5 an ensemble has >= 2 inputs; the
  released "hard" check compiles with the Mermaid CLI;
- each graph is evaluated ``validation_rounds`` times on validate; experience is back-propagated to the parent.

Deviations (``configs/method/mermaidflow.yaml``): the Mermaid graph is **interpreted** (:func:`run_graph`) instead of
asking the optimiser for Python code and ``exec``-ing it, so the extra code-generation call per round is not made
and a graph's prompts are those of its ``<prompt_X>`` field; the hard check is our own parser (no Node.js Mermaid
CLI) plus type rules the interpreter needs (acyclic, RETURN has one input, inputs of the right kind); QA has no
released guidance: ours follows the math one with AnswerGenerate.
"""
from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass, field
from typing import Any

from agentic_repro.harness.types import Solution

from agentic_repro.baselines.autoflow import mermaidflow_prompts as P
from agentic_repro.baselines.autoflow import operators as O
from agentic_repro.harness.context import ProblemContext
from agentic_repro.harness.view import ProblemView

# ---- the typed graph ----------------------------------------------------------------------------------------

CLASS_TO_OP = {"CustomOp": "Custom", "ProgrammerOp": "Programmer", "ProgramOp": "Programmer",
               "ScEnSembleOp": "ScEnsemble", "ScEnsembleOp": "ScEnsemble", "CustomCodeGenerateOp": "CustomCodeGenerate",
               "TestOp": "Test", "Interface": "Interface", "DecisionOp": "Decision", "Decision": "Decision",
               "AnswerGenerateOp": "AnswerGenerate"}
# the released checker's legal classes (checker_config.json) + the spellings its own guidance uses (ours)
LEGAL_CLASSES = {"math": {"CustomOp", "ProgrammerOp", "ScEnSembleOp", "CustomCodeGenerateOp", "TestOp", "Interface",
                          "ProgramOp", "ScEnsembleOp"},
                 "code": {"CustomOp", "ProgrammerOp", "ScEnSembleOp", "CustomCodeGenerateOp", "TestOp", "Interface",
                          "ScEnsembleOp", "DecisionOp", "Decision"},
                 "qa": {"CustomOp", "AnswerGenerateOp", "ScEnSembleOp", "ScEnsembleOp", "Interface"}}
OPS_BY_TYPE = {"math": {"Custom", "Programmer", "ScEnsemble"},
               "code": {"Custom", "CustomCodeGenerate", "ScEnsemble", "Test", "Decision"},
               "qa": {"Custom", "AnswerGenerate", "ScEnsemble"}}
INTERFACES = {"PROBLEM", "RETURN", "ENTRY_POINT"}

_NODE_RE = re.compile(r'^(\w+)\s*(\(\[(.*?)\]\)|\["(.*?)"\]|\[(.*?)\]|\{(.*?)\})\s*$')
_EDGE_RE = re.compile(r'^(\w+)\s*(?:--\s*([^->|]+?)\s*-->|-->)\s*(?:\|(.*?)\|)?\s*(\w+)\s*$')
_CLASS_RE = re.compile(r"^class\s+([\w,]+)\s+(\w+)\s*;?$")
_PARAM_RE = re.compile(r"\((\w+)\s*:\s*(.*?)\)\s*$", re.DOTALL)


@dataclass
class Node:
    id: str
    label: str = ""
    shape: str = "box"
    cls: str | None = None

    @property
    def op(self) -> str:
        if self.id in INTERFACES:
            return "Interface"
        if self.cls and self.cls in CLASS_TO_OP:
            return CLASS_TO_OP[self.cls]
        if self.shape == "decision":
            return "Decision"
        first = re.split(r"<br\s*/?>|\(|\s", self.label.strip(), maxsplit=1)[0]
        return first or "Unknown"

    @property
    def param(self) -> tuple[str | None, str]:
        m = _PARAM_RE.search(self.label.replace("<br/>", " ").replace("<br>", " "))
        return (m.group(1), m.group(2).strip().strip("'\"")) if m else (None, "")


@dataclass
class Graph:
    nodes: dict[str, Node] = field(default_factory=dict)
    edges: list[tuple[str, str, str | None]] = field(default_factory=list)   # (source, target, label)
    syntax_errors: list[str] = field(default_factory=list)

    def preds(self, n: str) -> list[tuple[str, str | None]]:
        return [(a, lab) for a, b, lab in self.edges if b == n]

    def succs(self, n: str) -> list[tuple[str, str | None]]:
        return [(b, lab) for a, b, lab in self.edges if a == n]


def parse_mermaid(text: str) -> Graph:
    """Nodes, class assignments and edges of a ``flowchart TD`` (the subset the released guidance uses)."""
    g = Graph()
    body = re.sub(r"^\s*```(?:mermaid)?\s*|\s*```\s*$", "", text or "", flags=re.MULTILINE)
    lines = [ln.strip().rstrip(";").strip() for ln in body.splitlines()]
    if not any(re.match(r"^(flowchart|graph)\s+(TD|TB|LR)\s*$", ln) for ln in lines):
        g.syntax_errors.append("missing 'flowchart TD' header")
    for i, ln in enumerate(lines, 1):
        if not ln or ln.startswith("%%") or ln.startswith("classDef") or re.match(r"^(flowchart|graph)\s", ln):
            continue
        m = _CLASS_RE.match(ln)
        if m:
            for nid in m.group(1).split(","):
                g.nodes.setdefault(nid, Node(nid)).cls = m.group(2)
            continue
        m = _NODE_RE.match(ln)
        if m:
            nid = m.group(1)
            node = g.nodes.setdefault(nid, Node(nid))
            if m.group(3) is not None:
                node.label, node.shape = m.group(3), "interface"
            elif m.group(6) is not None:
                node.label, node.shape = m.group(6), "decision"
            else:
                node.label, node.shape = (m.group(4) if m.group(4) is not None else m.group(5)), "box"
            continue
        m = _EDGE_RE.match(ln)
        if m:
            a, text_label, pipe_label, b = m.groups()
            g.nodes.setdefault(a, Node(a))
            g.nodes.setdefault(b, Node(b))
            g.edges.append((a, b, (pipe_label or text_label or None) and (pipe_label or text_label).strip()))
            continue
        g.syntax_errors.append(f"line {i} is not Mermaid this checker can read: {ln[:120]}")
    return g


def _has_path(g: Graph, a: str, b: str) -> bool:
    seen, todo = set(), [a]
    while todo:
        n = todo.pop()
        if n == b:
            return True
        if n not in seen:
            seen.add(n)
            todo.extend(s for s, _ in g.succs(n))
    return False


def topo_order(g: Graph) -> list[str] | None:
    indeg = {n: 0 for n in g.nodes}
    for _, b, _ in g.edges:
        indeg[b] += 1
    queue = [n for n in g.nodes if indeg[n] == 0]
    order = []
    while queue:
        n = queue.pop(0)
        order.append(n)
        for s, _ in g.succs(n):
            indeg[s] -= 1
            if indeg[s] == 0:
                queue.append(s)
    return order if len(order) == len(g.nodes) else None


def check_graph(text: str, qtype: str) -> list[str]:
    """The released soft checks W1-W5 (on class-assigned nodes, as MermaidChecker) plus what the interpreter
    needs (syntax, acyclic, known operators for this task type, RETURN with one input, Test fed by code).
    Empty list: the graph passes."""
    g = parse_mermaid(text)
    errs = list(g.syntax_errors)
    classed = {n.id: n.cls for n in g.nodes.values() if n.cls}
    if "PROBLEM" not in classed:
        errs.append("W1: Missing required 'PROBLEM' node in the flowchart, which is the starting point of the workflow")
    if "RETURN" not in classed:
        errs.append("W1: Missing required 'RETURN' node in the flowchart, which is the endpoint of the workflow")
    for nid in classed:
        if nid in ("PROBLEM", "RETURN") or nid not in g.nodes:
            continue
        to_p = "PROBLEM" in g.nodes and _has_path(g, "PROBLEM", nid)
        to_r = "RETURN" in g.nodes and _has_path(g, nid, "RETURN")
        if nid != "ENTRY_POINT" and not (to_p and to_r):
            errs.append(f"W2: Node '{nid}' is not properly connected in the workflow. Connected to PROBLEM: {to_p}, "
                        f"Connected to RETURN: {to_r}. Each node must have a path from PROBLEM and a path to RETURN.")
    for nid in ("PROBLEM", "RETURN"):
        if nid in classed and classed[nid] != "Interface":
            errs.append(f"W3: {nid} node must be of 'Interface' class type")
    legal = LEGAL_CLASSES.get(qtype, LEGAL_CLASSES["math"])
    for nid, c in classed.items():
        if c not in legal:
            errs.append(f"W4: Node '{nid}' has an invalid type '{c}'. Valid types are: {', '.join(sorted(legal))}")
    for n in g.nodes.values():
        if n.op == "ScEnsemble" and len(g.preds(n.id)) < 2:
            errs.append(f"W5: ScEnSembleOp node '{n.id}' must have at least 2 incoming connections, but only has "
                        f"{len(g.preds(n.id))}. Ensemble operations require multiple inputs to function properly.")
    # what the interpreter needs (ours)
    if topo_order(g) is None:
        errs.append("T1: the graph has a cycle; a workflow must be acyclic")
    allowed = OPS_BY_TYPE.get(qtype, OPS_BY_TYPE["math"])
    for n in g.nodes.values():
        if n.op != "Interface" and n.op not in allowed:
            errs.append(f"T2: node '{n.id}' is a '{n.op}' operator, not one of {sorted(allowed)} for {qtype} tasks")
        if n.id not in INTERFACES and n.op != "Interface" and not g.preds(n.id):
            errs.append(f"T3: node '{n.id}' has no input")
    if "RETURN" in g.nodes and len(g.preds("RETURN")) != 1 and not any(
            g.nodes[a].op == "Decision" for a, _ in g.preds("RETURN")):
        errs.append(f"T4: RETURN must receive exactly one output (it has {len(g.preds('RETURN'))})")
    if "PROBLEM" in g.nodes and g.preds("PROBLEM"):
        errs.append("T5: PROBLEM provides input but never receives any")
    if "RETURN" in g.nodes and g.succs("RETURN"):
        errs.append("T5: RETURN receives output but never produces any")
    if qtype == "code":
        for n in g.nodes.values():
            if n.op == "Test" and not any(g.nodes[a].op in ("CustomCodeGenerate", "ScEnsemble", "Test", "Decision")
                                          for a, _ in g.preds(n.id)):
                errs.append(f"T6: Test node '{n.id}' needs a code solution as input")
    return errs


def parse_prompts(text: str) -> dict[str, str]:
    """``NAME = \"\"\"...\"\"\"`` / ``NAME="..."`` definitions (prompt.py style, the guidance's format)."""
    out: dict[str, str] = {}
    body = text or ""
    for m in re.finditer(r'^\s*([A-Za-z_]\w*)\s*=\s*("""|\'\'\')(.*?)\2', body, re.DOTALL | re.MULTILINE):
        out[m.group(1).upper()] = m.group(3).strip()
    for m in re.finditer(r'^\s*([A-Za-z_]\w*)\s*=\s*"((?:[^"\\\n]|\\.)*)"\s*$', body, re.MULTILINE):
        out.setdefault(m.group(1).upper(), m.group(2).encode().decode("unicode_escape", "ignore").strip())
    return out


# ---- interpreting a graph ------------------------------------------------------------------------------------

async def run_graph(ops: O.Ops, graph_text: str, prompts: dict[str, str], ctx: ProblemContext,
                    qtype: str) -> dict[str, Any]:
    """Run the graph in topological order. PROBLEM carries the task text, ENTRY_POINT the entry point; a node's
    inputs are its active predecessors' outputs; a Decision node after a Test passes its value on only along the
    edges whose label matches the test result (passed/failed); RETURN gives the final answer."""
    g = parse_mermaid(graph_text)
    order = topo_order(g)
    if order is None:
        raise ValueError("MermaidFlow graph has a cycle")
    task = ctx.benchmark.render(ctx.problem)
    entry = ctx.problem.fields.get("entry_point") or ""
    val: dict[str, Any] = {}
    passed: dict[str, bool] = {}
    active_edge: dict[tuple[str, str], bool] = {}
    ran: list[str] = []
    answer = ""
    for nid in order:
        node = g.nodes[nid]
        preds = [(a, lab) for a, lab in g.preds(nid) if a in val and active_edge.get((a, nid), True)]
        untaken = any(active_edge.get((a, nid)) is False for a, _ in g.preds(nid))
        fed = [a for a, _ in g.preds(nid) if a not in INTERFACES]
        if (untaken and nid != "RETURN") or (fed and not any(a not in INTERFACES for a, _ in preds)):
            preds = []                     # on an untaken decision branch, or its inputs never ran
        if nid == "PROBLEM":
            val[nid] = task
        elif nid == "ENTRY_POINT":
            val[nid] = entry
        elif not preds:
            continue                       # not reached (an untaken decision branch)
        elif nid == "RETURN":
            answer = str(val[preds[0][0]])
            val[nid] = answer
        else:
            val[nid] = await _run_node(ops, g, node, preds, val, passed, prompts, task, entry, qtype)
            ran.append(f"{nid}:{node.op}")
        if node.op == "Decision":
            ok = any(passed.get(a) for a, _ in preds)
            for b, lab in g.succs(nid):
                low = (lab or "").lower()
                want_pass = any(w in low for w in ("pass", "success", "true", "yes"))
                want_fail = any(w in low for w in ("fail", "error", "false", "no"))
                active_edge[(nid, b)] = (ok and want_pass) or (not ok and want_fail) or not (want_pass or want_fail)
            passed[nid] = ok
    return {"answer": answer, "ran": ran}


def _input_text(g: Graph, preds: list[tuple[str, str | None]], val: dict[str, Any], task: str) -> str:
    """A node's ``input``: the problem (when PROBLEM feeds it) then each other input, named by its source."""
    parts = [task] if any(a == "PROBLEM" for a, _ in preds) else []
    for a, lab in preds:
        if a not in ("PROBLEM", "ENTRY_POINT"):
            parts.append(f"{lab or a}: {val[a]}")
    return "\n\n".join(parts) if parts else task


async def _run_node(ops: O.Ops, g: Graph, node: Node, preds: list[tuple[str, str | None]], val: dict[str, Any],
                    passed: dict[str, bool], prompts: dict[str, str], task: str, entry: str, qtype: str) -> Any:
    op = node.op
    key, arg = node.param
    instr = prompts.get(arg.upper(), "") if key in ("role", "instruction") else ""
    stage = f"{op}:{node.id}"
    inputs = [val[a] for a, _ in preds if a not in ("PROBLEM", "ENTRY_POINT")]
    if op == "Custom":
        return (await O.custom(ops, _input_text(g, preds, val, task), instr, stage=stage))["response"]
    if op == "AnswerGenerate":
        out = await O.answer_generate(ops, _input_text(g, preds, val, task), stage=stage)
        return out["answer"] or out["raw"]
    if op == "CustomCodeGenerate":
        return (await O.custom_code_generate(ops, _input_text(g, preds, val, task), entry, instr, stage=stage))["response"]
    if op == "Programmer":
        analysis = next((str(val[a]) for a, lab in preds if (lab or "").lower() == "analysis"), None)
        if analysis is None:
            others = [str(val[a]) for a, _ in preds if a not in ("PROBLEM", "ENTRY_POINT")]
            analysis = "\n\n".join(others) if others else (arg if key == "analysis" else "None")
        return (await O.programmer(ops, task, analysis, stage=stage))["output"]
    if op == "ScEnsemble":
        sols = [str(x) for x in inputs] or [task]
        return (await O.sc_ensemble(ops, sols, task, stage=stage))["response"]
    if op == "Test":
        sol = next((str(val[a]) for a, lab in preds if (lab or "").lower() == "solution"), None)
        if sol is None:
            sol = str(inputs[-1]) if inputs else ""
        res = await O.test(ops, task, sol, entry, stage=stage)
        passed[node.id] = bool(res["result"])
        return res["solution"]
    if op == "Decision":
        passed[node.id] = any(passed.get(a) for a, _ in preds)
        return inputs[-1] if inputs else ""
    raise ValueError(f"MermaidFlow node {node.id}: unknown operator {op!r}")


def task_type(domain: str) -> str:
    return domain if domain in ("math", "code", "qa") else "qa"


class MermaidWorkflow:
    """A frozen MermaidFlow graph as a method (the artifact's workflow)."""

    def __init__(self, graph: str, prompt: str = "", qtype: str | None = None, role: str | None = "executor",
                 temperature: float | None = None, max_tokens: int | None = None, name: str | None = None) -> None:
        self.name = name or "mermaidflow"
        self.graph = graph
        self.prompt = prompt
        self.prompts = parse_prompts(prompt)
        self.qtype = qtype
        self.role = role
        self.sampling = {"temperature": temperature, "max_tokens": max_tokens}

    async def solve(self, problem: ProblemView, ctx: ProblemContext) -> Solution:
        qtype = self.qtype or task_type(ctx.benchmark.domain)
        ops = O.Ops(ctx, role=self.role, **self.sampling)
        out = await run_graph(ops, self.graph, self.prompts, ctx, qtype)
        return Solution(answer=out["answer"], trace={"mermaidflow": {"ran": out["ran"]}, "ops": ops.trace})


# ---- the search ----------------------------------------------------------------------------------------------

QA_GUIDANCE = P.MERMAID_CUSTOM_MATH.replace("for MATH Problems", "for QA Problems").replace(
    "classDef ProgrammerOp fill:#f9c2c2,stroke:#c23737,stroke-width:2px;",
    "classDef AnswerGenerateOp fill:#f9c2c2,stroke:#c23737,stroke-width:2px;")
QA_GUIDANCE = re.sub(r"# 3\. Programmer Operator Nodes.*?(?=# 4\. ScEnsemble)",
                     "# 3. AnswerGenerate Operator Nodes\n# Format: A[\"AnswerGenerate<br/>\"]\n"
                     "# Thinks step by step and gives a short final answer.\n#   PROBLEM --> |input| A\n"
                     "#   class A AnswerGenerateOp\n\n", QA_GUIDANCE, flags=re.DOTALL)
GUIDANCE = {"math": P.MERMAID_CUSTOM_MATH, "code": P.MERMAID_CUSTOM_CODE, "qa": QA_GUIDANCE}
UPDATE = {"math": P.UPDATE_WORKFLOW_MERMAID_MATH, "code": P.UPDATE_WORKFLOW_MERMAID_CODE,
          "qa": P.UPDATE_WORKFLOW_MERMAID_MATH}
FEW_SHOT = {"math": P.PROMPT_FEW_SHOT_MATH, "code": P.PROMPT_FEW_SHOT_CODE, "qa": ""}
SEED_BY_TYPE = {"math": "MATH", "code": "HumanEval", "qa": "GSM8K"}
SEED_BY_BENCHMARK = {"gsm8k": "GSM8K", "math": "MATH", "humaneval": "HumanEval", "mbpp": "MBPP"}

CANDIDATE_FIELDS = {f"{k}_{c}": d for c in "ABCD" for k, d in
                    (("modification", "modification"), ("graph", "graph represent by mermaid code"),
                     ("prompt", "prompt"))}
JUDGE_FIELDS = {"evaluation": "evaluation", "selected_graph": "selected graph", "justification": "justification"}


def xml_format(prompt: str, fields: dict[str, str]) -> str:
    """AFlow/MermaidFlow ``XmlFormatter.prepare_prompt``."""
    return (prompt + "\n# Response format (must be strictly followed) (do not include any other formats except for "
            "the given XML format):\n" + "\n".join(f"<{k}>{v}</{k}>" for k, v in fields.items()))


def parse_fields(text: str, names: list[str]) -> dict[str, str]:
    found = {m.group(1): m.group(2).strip() for m in re.finditer(r"<(\w+)>(.*?)</\1>", text or "", re.DOTALL)}
    return {k: found[k] for k in names if k in found}


def seed_for(benchmark: str, qtype: str) -> tuple[str, str]:
    ds = SEED_BY_BENCHMARK.get(benchmark.split("_")[0].lower()) or SEED_BY_TYPE[qtype]
    return P.SEED_GRAPHS[ds]


class MermaidFlowOptimiser:
    """``search(sctx)``: the evolutionary loop of the module docstring; every parameter is listed with its source
    in ``configs/method/mermaidflow.yaml``."""

    def __init__(self, rounds: int = 20, validation_rounds: int = 2, sample: int = 4, alpha: float = 0.2,
                 lambda_: float = 0.3, evolution_probability: float = 0.1, evolution_from_round: int = 4,
                 candidates: int = 4, check_tries: int = 3, max_regenerations: int = 3, log_samples: int = 3,
                 elites_history: int = 20, check_convergence: bool = True, convergence_top_k: int = 3,
                 convergence_z: float = 0.0, convergence_rounds: int = 5, optimizer_temperature: float | None = 1.0,
                 optimizer_max_tokens: int | None = None, validate_limit: int | None = None,
                 question_type: str | None = None, mismatch_f1: float = 0.3, role: str | None = "executor",
                 executor_temperature: float | None = None) -> None:
        self.p = dict(rounds=int(rounds), validation_rounds=int(validation_rounds), sample=int(sample),
                      alpha=float(alpha), lambda_=float(lambda_), evolution_probability=float(evolution_probability),
                      evolution_from_round=int(evolution_from_round), candidates=int(candidates),
                      check_tries=int(check_tries), max_regenerations=int(max_regenerations),
                      log_samples=int(log_samples), elites_history=int(elites_history),
                      check_convergence=bool(check_convergence), convergence=(int(convergence_top_k),
                                                                              float(convergence_z),
                                                                              int(convergence_rounds)),
                      validate_limit=validate_limit, question_type=question_type, mismatch_f1=float(mismatch_f1),
                      role=role, executor_temperature=executor_temperature)
        self.opt_sampling = {k: v for k, v in (("temperature", optimizer_temperature),
                                               ("max_tokens", optimizer_max_tokens)) if v is not None}

    def workflow(self, graph: str, prompt: str, qtype: str) -> dict[str, Any]:
        return {"solver": "agentic_repro.baselines.autoflow.mermaidflow:MermaidWorkflow",
                "params": {"graph": graph, "prompt": prompt, "qtype": qtype, "role": self.p["role"],
                           "temperature": self.p["executor_temperature"]},
                "roles": [self.p["role"]] if self.p["role"] else []}

    async def evaluate_round(self, sctx: Any, r: int, graph: str, prompt: str, qtype: str) -> dict[str, Any]:
        scores, log, runs = [], [], []
        wf = self.workflow(graph, prompt, qtype)
        for k in range(self.p["validation_rounds"]):
            ev = await sctx.evaluate({"name": f"mermaidflow-round{r}", **wf}, tag=f"mermaidflow_round_{r}/run_{k}",
                                     seed=sctx.seed + k, limit=self.p["validate_limit"])
            scores.append(ev.score)
            runs.append({"run": k, "score": ev.score, "n": ev.n, "dir": ev.run_dir})
            questions = getattr(ev, "questions", {}) or {}
            for pr in ev.predictions:
                s = float(pr.get("score") or 0.0)
                if pr.get("status") == "ok" and (s < self.p["mismatch_f1"] if qtype == "qa" else s <= 0.0):
                    log.append({"question": questions.get(pr["id"], pr["id"]), "right_answer": pr.get("gold"),
                                "model_output": pr.get("raw_output"), "extracted_output": pr.get("extracted"),
                                "extract_answer_code": "None"})
        return {"scores": scores, "mean": sum(scores) / len(scores), "log": log, "runs": runs}

    async def _ask(self, sctx: Any, prompt: str, stage: str, offset: int) -> str:
        out = await sctx.optimize([{"role": "user", "content": prompt}], stage=stage, sample_offset=offset,
                                  **self.opt_sampling)
        return out[0].text

    async def propose(self, sctx: Any, st: dict[str, Any], r: int, parent: dict[str, Any],
                      pair: list[dict[str, Any]] | None, elites_all: list[dict[str, Any]], qtype: str) -> dict[str, Any]:
        """Four children -> judge -> check, at most ``check_tries`` times (with the errors fed back), and
        regenerated when the modification was already tried on the parent."""
        from agentic_repro.baselines.autoflow.aflow import format_experience, operator_description

        prow = st["rounds"][str(parent["round"])]
        exp = st["experience"].get(str(parent["round"]))
        tried = set() if not exp else {v["modification"] for part in ("success", "failure") for v in exp[part].values()}
        rng = random.Random(f"{sctx.seed}:log:{r}")
        entries = prow.get("log") or []
        picked = rng.sample(entries, min(self.p["log_samples"], len(entries))) if entries else []
        log_text = "".join(json.dumps(e, indent=4, ensure_ascii=False, default=str) + "\n\n" for e in picked)
        ops_desc = operator_description(sorted(o for o in OPS_BY_TYPE[qtype] if o in O.DESCRIPTIONS))
        attempts: list[dict[str, Any]] = []
        calls = 0
        for regen in range(self.p["max_regenerations"]):
            last, errors = None, None
            chosen: dict[str, str] | None = None
            for t in range(self.p["check_tries"]):
                if pair:
                    a, b = (st["rounds"][str(x["round"])] for x in pair)
                    text = P.GENERATE_CHILDREN_PROMPT.format(
                        graph_A=a["graph"], prompt_A=a["prompt"], score_A=pair[0]["score"], graph_B=b["graph"],
                        prompt_B=b["prompt"], score_B=pair[1]["score"], mermiad_custom_prompt=GUIDANCE[qtype],
                        prompt_few_shot=FEW_SHOT[qtype])
                else:
                    text = UPDATE[qtype].format(experience=format_experience(exp, parent["round"]),
                                                score=parent["score"], graph_mermaid=prow["graph"],
                                                prompt=prow["prompt"], operator_description=ops_desc, type=qtype,
                                                log=log_text, prompt_few_shot=FEW_SHOT[qtype]) + GUIDANCE[qtype]
                if last and errors:
                    text += P.LEARN_FROM_FAILED_MERMAID.format(failed_mermaid=last, error_message=errors)
                kind = "crossover" if pair else "mutation"
                raw = await self._ask(sctx, xml_format(text, CANDIDATE_FIELDS), f"{kind}_round_{r}", calls)
                calls += 1
                cands = parse_fields(raw, list(CANDIDATE_FIELDS))
                letters = [c for c in "ABCD" if cands.get(f"graph_{c}")]
                if not letters:
                    attempts.append({"regen": regen, "try": t, "kind": kind, "candidates": 0})
                    continue
                blank = {k: cands.get(k, "") for k in CANDIDATE_FIELDS}
                if pair:
                    hist = "\n".join(f"\nhistory_graph_{i}:\n{e['graph']}\nhistory_prompt_{i}:\n{e['prompt']}\n"
                                     f"history_score_{i}:\n{e['score']}\n\n" for i, e in enumerate(elites_all))
                    jtext = P.LLM_AS_JUDGER.format(parent_graph_A=a["graph"], parent_prompt_A=a["prompt"],
                                                   parent_graph_B=b["graph"], parent_prompt_B=b["prompt"],
                                                   elites_history=hist, mermaid_usage=GUIDANCE[qtype], **blank)
                else:
                    jtext = P.LLM_AS_JUDGER_SINGLE.format(parent_graph=prow["graph"], parent_prompt=prow["prompt"],
                                                          mermaid_usage=GUIDANCE[qtype], **blank)
                jraw = await self._ask(sctx, xml_format(jtext, JUDGE_FIELDS), f"judge_round_{r}", calls)
                calls += 1
                sel = re.sub(r"[^A-D]", "", parse_fields(jraw, ["selected_graph"]).get("selected_graph", "").upper())
                pick = sel[:1] if sel[:1] in letters else letters[0]
                order = [pick] + [c for c in letters if c != pick]
                checks = {c: check_graph(cands[f"graph_{c}"], qtype) for c in order}
                ok = [c for c in order if not checks[c]]
                attempts.append({"regen": regen, "try": t, "kind": kind, "candidates": len(letters), "judged": pick,
                                 "judge_parsed": bool(sel), "errors": {c: checks[c][:6] for c in order}})
                if ok:
                    c = ok[0]
                    chosen = {"graph": cands[f"graph_{c}"], "prompt": cands.get(f"prompt_{c}", ""),
                              "modification": cands.get(f"modification_{c}", ""), "letter": c, "kind": kind}
                    break
                last, errors = cands[f"graph_{pick}"], "\n".join(checks[pick])
            if chosen is None:
                return {"attempts": attempts}
            if chosen["modification"] not in tried:
                chosen["attempts"] = attempts
                return chosen
            attempts.append({"regen": regen, "duplicate": True})
        return {"attempts": attempts}

    async def search(self, sctx: Any) -> Any:
        from agentic_repro.baselines.autoflow.aflow import (converged, mixed_probabilities, record_experience, select_parent,
                                             top_rounds)
        from agentic_repro.baselines.autoflow.maas import _domain_of
        from agentic_repro.baselines.autoflow.search import SearchResult

        p = self.p
        qtype = p["question_type"] or task_type(getattr(sctx, "domain", None) or _domain_of(sctx))
        bench = sctx.spec.benchmark_cfg["name"]
        st = sctx.resume() or {"rounds": {}, "experience": {}, "next_round": 1, "stopped": None}
        while st["next_round"] <= p["rounds"] and not st["stopped"]:
            r = st["next_round"]
            if r == 1:
                graph, prompt = seed_for(bench, qtype)
                row: dict[str, Any] = {"round": 1, "parent": None, "modification": "seed (released round 1)",
                                       "graph": graph, "prompt": prompt, "kind": "seed"}
            else:
                means = {int(k): v["mean"] for k, v in st["rounds"].items() if v.get("mean") is not None}
                elites = top_rounds(means, p["sample"])
                parent, probs = select_parent(elites, random.Random(f"{sctx.seed}:select:{r}"), p["alpha"],
                                              p["lambda_"])
                evo_rng = random.Random(f"{sctx.seed}:evolve:{r}")
                pair = None
                if (r - 1) >= p["evolution_from_round"] and evo_rng.random() < p["evolution_probability"] \
                        and len(elites) >= 2:
                    w = mixed_probabilities([100 * e["score"] for e in elites], p["alpha"], p["lambda_"])
                    i = evo_rng.choices(range(len(elites)), weights=w)[0]
                    j = evo_rng.choices(range(len(elites)), weights=w)[0]
                    while j == i:
                        j = evo_rng.randrange(len(elites))
                    pair = [elites[i], elites[j]]
                elites_all = [{"graph": st["rounds"][str(e["round"])]["graph"],
                               "prompt": st["rounds"][str(e["round"])]["prompt"], "score": e["score"]}
                              for e in top_rounds(means, p["elites_history"])]
                prop = await self.propose(sctx, st, r, parent, pair, elites_all, qtype)
                row = {"round": r, "parent": parent["round"], "parent_score": parent["score"],
                       "selection_probs": probs, "attempts": prop.get("attempts"),
                       "pair": [x["round"] for x in pair] if pair else None}
                if "graph" not in prop:
                    row.update(status="no_candidate", mean=None, scores=[], log=[], kind="crossover" if pair else
                               "mutation", failure="no checked, new candidate within the tries")
                    st["rounds"][str(r)] = row
                    st["next_round"] = r + 1
                    sctx.checkpoint(st)
                    sctx.log(f"round {r}: no candidate")
                    continue
                row.update(modification=prop["modification"], graph=prop["graph"], prompt=prop["prompt"],
                           kind=prop["kind"])
            row.update(await self.evaluate_round(sctx, r, row["graph"], row["prompt"], qtype))
            row["status"] = "ok"
            st["rounds"][str(r)] = row
            if r > 1:  # AFlow's experience back-propagation
                record_experience(st, row, r)
            st["next_round"] = r + 1
            scored = [v["scores"] for _, v in sorted(st["rounds"].items(), key=lambda kv: int(kv[0])) if v["scores"]]
            if p["check_convergence"] and converged(scored, *p["convergence"]):
                st["stopped"] = f"converged after round {r}"
            sctx.checkpoint(st)
            sctx.log(f"round {r} ({row['kind']}): mean {row['mean']:.4f}")
        best = max((v for v in st["rounds"].values() if v.get("mean") is not None),
                   key=lambda v: (v["mean"], -v["round"]))
        keys = ("round", "parent", "parent_score", "pair", "kind", "modification", "scores", "mean", "status",
                "failure", "selection_probs", "attempts", "runs", "graph", "prompt")
        history = [{k: v.get(k) for k in keys} for _, v in sorted(st["rounds"].items(), key=lambda kv: int(kv[0]))]
        return SearchResult(workflow=self.workflow(best["graph"], best["prompt"], qtype), validate_score=best["mean"],
                            history=history, extra={"best_round": best["round"], "stopped": st["stopped"],
                                                    "question_type": qtype, "experience": st["experience"],
                                                    "rounds_run": len(st["rounds"]),
                                                    "hyperparameters": {k: v for k, v in p.items()}})
