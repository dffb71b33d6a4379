"""MaAS (Zhang et al. 2025, "Multi-agent Architecture Search via Agentic Supernet"): a controller samples, per query,
a sub-network of the operator supernet layer by layer; trained with cost-aware REINFORCE on the validate split.

Facts taken from bingreeky/MaAS (``maas/ext/maas/models/{controller,utils}.py``, ``benchmark/benchmark.py``,
``scripts/optimizer.py``, ``scripts/optimized/{GSM8K,MATH,HumanEval}/train/graph.py``, ``examples/maas/optimize.py``):

- **Controller** (``MultiLayerController``): 4 layers; each layer scores every operator by the cosine between a
  linear projection (384 -> 32) of the query's sentence embedding and a linear projection of the operator's
  embedding (layer 0: the operator alone, 384 -> 32; later layers: the operator concatenated with the *first*
  operator chosen in the previous layer, 768 -> 32), softmax over operators. Embeddings: all-MiniLM-L6-v2 of the
  query and of ``"<id>. <name>: <description>, with interface <interface>."`` per operator, as the graph's own
  template's ``operator.json`` writes it (HumanEval's describes code operators: ``generate(problem, entry_point,
  instruction)``...; ``operator_templates: dataset``; ``shared``: one table for every graph, our earlier texts).
- **Sampling** (``sample_operators``): operators drawn without replacement from the layer's distribution until
  their cumulative probability reaches the threshold **0.3**. Layer 0 must start with a Generate-type operator:
  EarlyStop in layer 0 becomes ``[Generate]`` with a **-1.5** log-prob penalty and stops; no Generate-type
  operator -> ``[Generate]``; a Generate-type operator not first is moved first. EarlyStop in a later layer stops
  after that layer. A layer's log-prob is the sum of the chosen operators' log-probs.
- **Training**: ``repetitions`` (= ``--sample``, default **4**) passes over the training set in batches of **4**;
  after each batch, Adam (lr **0.01**) on ``-mean(logprob * (score - 3 * cost))``, cost in USD per problem.
- **Graphs** (what the sampled operators do, per dataset) as in the released train graphs; see :func:`run_graph`.

Deviations (also in ``configs/method/maas.yaml`` ``deviations`` and baselines/README.md):
- trains on the benchmark's **validate** split (the issue's protocol; MaAS reads a user-supplied ``*_train.jsonl``);
- per-problem cost is the problem's own ledger cost (MaAS takes differences of a cumulative counter in result
  order, which misattributes cost under concurrency);
- the released GSM8K graph detaches the log-prob (``.item()``) so its controller never receives a gradient, and
  the released GSM8K/MATH GenerateCoT prompt raises ``KeyError`` in ``str.format`` (``\\boxed{-2}``); we train every
  benchmark through the intended gradient and format the prompt's braces literally;
- QA (HotpotQA, DROP) and MBPP have no released graph: QA uses the math graph without Programmer, MBPP the
  HumanEval graph (its visible test as Test's tests);
- TextGrad prompt rewriting (``--is_textgrad``, off by default in the release) is not implemented.

A batch's problems are one step of a growing validate run per repetition (``evals/maas_rep<r>``, ``limit`` grows by
a batch; finished problems are never re-run), sampled with the controller as it stands before that batch's update,
as in MaAS. The live controller is a file; every prediction's trace records the sha256 of the weights it sampled
with, and the optimiser refuses a batch sampled with other weights.
"""
from __future__ import annotations

import asyncio
import hashlib
import io
import random
from pathlib import Path
from typing import Any

from agentic_repro.harness.types import Solution

from agentic_repro.baselines.autoflow import operators as O
from agentic_repro.harness.context import ProblemContext
from agentic_repro.harness.view import ProblemView

GENERATE_NAMES = ("Generate", "GenerateCoT", "MultiGenerateCoT")

# ---- released graph prompts (MaAS scripts/optimized/<dataset>/train/template/prompt.py) --------------------------
MATH_SOLVE_PROMPT = """
You are a highly skilled mathematician tasked with solving a math problem. Follow these steps carefully:

1. Read and understand the problem thoroughly.
2. Identify all key information, variables, and relationships.
3. Determine the appropriate mathematical concepts, formulas, or equations to use.
4. Solve the problem step-by-step, showing all your work clearly.
5. Double-check your calculations and reasoning at each step.
6. Provide a clear and concise final answer.
7. Verify your solution by plugging it back into the original problem or using an alternative method if possible.

Format your answer as follows:
- Use LaTeX notation for mathematical expressions where appropriate.
- Show each step of your solution process clearly.
- Clearly state your final answer at the end of your solution.
- Express numerical answers as precise values (avoid rounding unless specified).
- Ensure that your final answer is a single numerical value without any units or additional text.
- Do not include any explanatory text with your final answer, just the number itself.

For example, if the final answer is 42.5, your response should end with just:
42.5

Here's the problem to solve:

"""

GSM8K_REFINE_ANSWER_PROMPT = """
Given the mathematical problem and the code from the code execution, please provide a well-formatted and detailed solution. Follow these guidelines:

1. Begin with a clear statement of the problem.
2. Explain the approach and any formulas or concepts used.
3. Show step-by-step calculations, using LaTeX notation for mathematical expressions.
4. Interpret the code output and incorporate it into your explanation.
5. Provide a final answer, enclosed in \\boxed{} LaTeX notation.
6. Ensure all mathematical notation is in LaTeX format.

Your response should be comprehensive, mathematically rigorous, and easy to follow.
"""

MATH_REFINE_ANSWER_PROMPT = """
Given the mathematical problem and the output from the code execution, please provide a well-formatted and detailed solution. Follow these guidelines:

1. Begin with a clear statement of the problem.
2. Explain the approach and any formulas or concepts used.
3. Show step-by-step calculations, using LaTeX notation for mathematical expressions.
4. Interpret the code output and incorporate it into your explanation.
5. Provide a final answer, enclosed in \\boxed{} LaTeX notation.
6. Ensure all mathematical notation is in LaTeX format.

Your response should be comprehensive, mathematically rigorous, and easy to follow.
"""

MATH_GENERATE_SOLUTION_PROMPT = """
Please solve the given mathematical problem step by step. Follow these guidelines:

1. State the problem clearly.
2. Outline the approach and any relevant formulas or concepts.
3. Provide detailed calculations, using LaTeX notation for mathematical expressions.
4. Explain each step of your reasoning.
5. Present the final answer enclosed in \\boxed{} LaTeX notation.
6. Ensure all mathematical notation is in LaTeX format.

Your solution should be thorough, mathematically sound, and easy to understand.
"""

MATH_DETAILED_SOLUTION_PROMPT = """
Provide a comprehensive, step-by-step solution to the given mathematical problem. Your response should include:

1. A clear restatement of the problem.
2. An explanation of the mathematical concepts and theorems involved.
3. A detailed, logical progression of steps leading to the solution.
4. Clear explanations for each step, including the reasoning behind it.
5. All mathematical expressions and equations in LaTeX format.
6. Visual aids or diagrams if applicable (described in text).
7. A final answer clearly marked and enclosed in \\boxed{} LaTeX notation.
8. A brief explanation of the significance of the result, if relevant.

Ensure your solution is rigorous, easy to follow, and educational for someone learning the concept.
"""

HUMANEVAL_IMPROVE_CODE_PROMPT = """
The previous solution failed some test cases in the HumanEval benchmark. Please conduct a thorough analysis of the problem statement, identifying all edge cases and potential pitfalls. Then, provide an improved solution that not only fixes the issues but also optimizes performance and adheres to industry-standard coding practices. Ensure your revised code includes clear, concise comments that explain your logic and design choices, and that it robustly handles all specified requirements.
"""

# which released graph a benchmark runs (MBPP and QA have none released: see the module docstring)
GRAPH_BY_BENCHMARK = {"gsm8k": "gsm8k", "math": "math", "humaneval": "code", "mbpp": "code",
                      "hotpotqa": "qa", "drop": "qa"}
GRAPH_BY_DOMAIN = {"math": "math", "code": "code", "qa": "qa"}


def graph_for(benchmark: str, domain: str, graph: str = "auto") -> str:
    if graph != "auto":
        return graph
    base = benchmark.split("_")[0].lower()
    return GRAPH_BY_BENCHMARK.get(base) or GRAPH_BY_DOMAIN.get(domain, "qa")


#: the MaAS template folder (scripts/optimized/<dataset>/train/template) whose operator.json a graph's operators are
#: embedded from; QA has no released template (ours: the shared descriptions)
TEMPLATE_BY_GRAPH = {"gsm8k": "GSM8K", "math": "MATH", "code": "HumanEval"}


def operator_texts(names: list[str], graph: str, mode: str = "dataset") -> list[str]:
    """The texts MaAS embeds per operator (GraphUtils.load_operators_description_maas: ids from 0), from the graph's
    template's operator.json (``mode`` ``dataset``; HumanEval's describe code operators) or one shared table."""
    return [O.description_text(i, n, TEMPLATE_BY_GRAPH.get(graph), mode) for i, n in enumerate(names)]


def operators_for(graph: str) -> list[str]:
    return list(O.MAAS_OPERATORS["code" if graph == "code" else "qa" if graph == "qa" else "math"])


# ---- the controller (torch) ----------------------------------------------------------------------------------

def _torch():
    import torch  # pyright: ignore[reportMissingImports]  (the embed/train extra)
    return torch


def build_controller(input_dim: int = 384, hidden_dim: int = 32, num_layers: int = 4, seed: int = 0) -> Any:
    """The released architecture (``MultiLayerController``), initialised from ``seed``."""
    torch = _torch()
    nn = torch.nn

    class Selector(nn.Module):
        def __init__(self, first: bool) -> None:
            super().__init__()
            self.first = first
            self.operator_encoder = nn.Linear(input_dim if first else 2 * input_dim, hidden_dim)
            self.query_encoder = nn.Linear(input_dim, hidden_dim)

        def forward(self, q, ops, prev=None):
            F = torch.nn.functional
            qe = F.normalize(self.query_encoder(q.unsqueeze(0)), p=2, dim=1)
            if prev is not None and not self.first:
                x = torch.cat([ops, prev.unsqueeze(0).expand(ops.size(0), -1)], dim=1)
            elif not self.first:   # no previous operator: the released code feeds the operator alone, which
                x = torch.cat([ops, torch.zeros_like(ops)], dim=1)   # its 768-wide layer cannot take; zeros here
            else:
                x = ops
            oe = F.normalize(self.operator_encoder(x), p=2, dim=1)
            scores = qe @ oe.T
            return F.log_softmax(scores, dim=1).squeeze(0)

    class Controller(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.layers = nn.ModuleList([Selector(i == 0) for i in range(num_layers)])

    with torch.random.fork_rng():
        torch.manual_seed(seed)
        ctrl = Controller()
    ctrl.dims = {"input_dim": input_dim, "hidden_dim": hidden_dim, "num_layers": num_layers}
    return ctrl


def sample_layer(probs: list[float], threshold: float, rng: random.Random) -> list[int]:
    """``sample_operators``: draw without replacement until the drawn probabilities sum to ``threshold``."""
    chosen: list[int] = []
    total = 0.0
    remaining = list(range(len(probs)))
    while total < threshold and remaining:
        weights = [probs[i] for i in remaining]
        i = rng.choices(remaining, weights=weights)[0] if sum(weights) > 0 else remaining[0]
        chosen.append(i)
        total += probs[i]
        remaining.remove(i)
    return chosen or [max(range(len(probs)), key=lambda j: probs[j])]


def sample_architecture(controller: Any, query: Any, ops_emb: Any, names: list[str], *, threshold: float = 0.3,
                        rng: random.Random, penalty: float = 1.5) -> dict[str, Any]:
    """The released layer-by-layer sampling with its layer-0 rules; returns indices, names, penalty flag."""
    torch = _torch()
    layers: list[list[int]] = []
    penalised = False
    prev = None
    gen_idx = names.index("Generate") if "Generate" in names else 0
    with torch.no_grad():
        for li, layer in enumerate(controller.layers):
            probs = layer(query, ops_emb, prev).exp().tolist()
            sel = sample_layer(probs, threshold, rng)
            sel_names = [names[i] for i in sel]
            if li == 0:
                if "EarlyStop" in sel_names:
                    sel, penalised = [gen_idx], True
                elif not any("generate" in n.lower() for n in sel_names):
                    sel = [gen_idx]
                elif "generate" not in sel_names[0].lower():
                    k = next(j for j, n in enumerate(sel_names) if "generate" in n.lower())
                    sel = [sel[k], *sel[:k], *sel[k + 1:]]
            layers.append(sel)
            prev = ops_emb[sel[0]]
            if (li == 0 and penalised) or any(names[i] == "EarlyStop" for i in sel):
                break
    return {"layers": layers, "names": [[names[i] for i in sel] for sel in layers], "penalised": penalised,
            "penalty": penalty if penalised else 0.0}


def architecture_log_prob(controller: Any, query: Any, ops_emb: Any, arch: dict[str, Any]) -> Any:
    """Differentiable log-prob of a sampled architecture under ``controller``'s current weights (the sum over
    layers of the chosen operators' log-probs, minus the layer-0 EarlyStop penalty)."""
    torch = _torch()
    total = torch.zeros(())
    prev = None
    for li, sel in enumerate(arch["layers"]):
        lp = controller.layers[li](query, ops_emb, prev)
        total = total + lp[torch.tensor(sel)].sum()
        prev = ops_emb[sel[0]]
    return total - float(arch.get("penalty") or 0.0)


def save_state(obj: Any, path: Path) -> str:
    """``torch.save`` to ``path`` (atomically); returns the file's sha256."""
    torch = _torch()
    buf = io.BytesIO()
    torch.save(obj, buf)
    data = buf.getvalue()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_bytes(data)
    tmp.replace(path)
    return hashlib.sha256(data).hexdigest()


def load_state(path: Path, sha256: str | None = None) -> tuple[Any, str]:
    data = Path(path).read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    if sha256 and digest != sha256:
        raise ValueError(f"MaAS controller {path} has sha256 {digest[:12]}, the artifact says {sha256[:12]}")
    return _torch().load(io.BytesIO(data), weights_only=True), digest


def make_embedder(kind: str) -> Any:
    from agentic_repro.harness import embedding

    if kind == "hash":
        return embedding.HashEmbedder(dim=384)
    if kind == "minilm":
        return embedding.default_embedder()
    raise ValueError(f"MaAS embedder must be minilm or hash, not {kind!r}")


def query_text(ctx: ProblemContext, problem: ProblemView) -> str:
    """What MaAS embeds and feeds the graph: the task as the benchmark renders it."""
    return ctx.benchmark.render(problem)


# ---- the supernet (test-time method and validate-time workflow) ----------------------------------------------

class MaasSupernet:
    """Runs the sub-network the controller samples for each problem (the frozen MaAS method)."""

    def __init__(self, controller: str, controller_sha256: str | None = None, operators: list[str] | None = None,
                 graph: str = "auto", threshold: float = 0.3, early_stop_penalty: float = 1.5,
                 embedder: str = "minilm", role: str | None = "executor", temperature: float | None = None,
                 max_tokens: int | None = None, sample_salt: str = "test", programmer_timeout_s: float = 30.0,
                 qa_instruction: str = "answer_instruction", name: str | None = None,
                 operator_templates: str = "shared") -> None:
        # operator_templates defaults to shared: how a controller saved before the option was trained (its artifact
        # lacks the key); the search writes its own setting into the artifact's workflow
        O._check_mode(operator_templates)
        self.operator_templates = operator_templates
        self.name = name or "maas"
        self.controller_path = Path(controller)
        self.controller_sha256 = controller_sha256
        self.operators = list(operators) if operators else None
        self.graph = graph
        self.threshold = float(threshold)
        self.penalty = float(early_stop_penalty)
        self.embedder_kind = embedder
        self.role = role
        self.sampling = {"temperature": temperature, "max_tokens": max_tokens}
        self.salt = str(sample_salt)
        self.programmer_timeout_s = programmer_timeout_s
        self.qa_instruction = qa_instruction
        self._lock = asyncio.Lock()
        self._loaded: dict[str, Any] | None = None

    async def _setup(self, ctx: ProblemContext) -> dict[str, Any]:
        async with self._lock:
            if self._loaded is None:
                doc, sha = load_state(self.controller_path, self.controller_sha256)
                graph = graph_for(ctx.benchmark.name, ctx.benchmark.domain, self.graph)
                names = self.operators or list(doc.get("operators") or operators_for(graph))
                ctrl = build_controller(**doc["dims"])
                ctrl.load_state_dict(doc["state"])
                ctrl.eval()
                emb = ctx.resource(f"maas_embedder:{self.embedder_kind}", lambda: make_embedder(self.embedder_kind))
                torch = _torch()
                ops_emb = torch.tensor(emb.embed(operator_texts(names, graph, self.operator_templates)))
                self._loaded = {"ctrl": ctrl, "sha": sha, "names": names, "graph": graph, "emb": emb,
                                "ops_emb": ops_emb}
            return self._loaded

    async def solve(self, problem: ProblemView, ctx: ProblemContext) -> Solution:
        st = await self._setup(ctx)
        torch = _torch()
        q = query_text(ctx, problem)
        qv = torch.tensor(st["emb"].embed([q])[0])
        seed = int.from_bytes(hashlib.sha256(f"{ctx.seed}:{problem.id}:{self.salt}".encode()).digest()[:8], "big")
        arch = sample_architecture(st["ctrl"], qv, st["ops_emb"], st["names"], threshold=self.threshold,
                                   rng=random.Random(seed), penalty=self.penalty)
        ops = O.Ops(ctx, role=self.role, programmer_timeout_s=self.programmer_timeout_s, **self.sampling)
        answer = await run_graph(ops, st["graph"], arch["names"], q, ctx, self.qa_instruction)
        trace = {"maas": {**arch, "controller_sha256": st["sha"], "graph": st["graph"], "query": q,
                          "operators": st["names"], "salt": self.salt}, "ops": ops.trace}
        return Solution(answer=answer, trace=trace)


async def run_graph(ops: O.Ops, graph: str, layers: list[list[str]], q: str, ctx: ProblemContext,
                    qa_instruction: str = "answer_instruction") -> str:
    """What each sampled operator does, per released train graph (``scripts/optimized/<dataset>/train/graph.py``):
    operators of a layer run in order, each on the current solution; solutions accumulate; ScEnsemble replaces
    them with its pick; at the end ScEnsemble picks among several solutions. Then the graph's own tail:
    GSM8K verifies with Programmer and returns its output when it has one; code runs Test and, on failure,
    CustomCodeGenerate with IMPROVE_CODE_PROMPT."""
    entry = ctx.problem.fields.get("entry_point")
    code = graph == "code"
    solutions: list[str] = []
    current = ""
    if graph == "gsm8k":
        gen_instr = cot_instr = multi_instr = MATH_SOLVE_PROMPT
    elif graph == "math":
        gen_instr = cot_instr = MATH_DETAILED_SOLUTION_PROMPT
        multi_instr = MATH_GENERATE_SOLUTION_PROMPT
        pre = await O.programmer(ops, q)                      # MATH graph: Programmer first, always
        refined = await O.custom(ops, q + f"\nCode output: {pre['output']}", MATH_REFINE_ANSWER_PROMPT)
        solutions.append(refined["response"])
    elif graph == "qa":
        extra = ctx.benchmark.answer_instruction if qa_instruction == "answer_instruction" else qa_instruction
        gen_instr = cot_instr = multi_instr = (extra + "\n\n") if extra else ""
    elif code:
        gen_instr = cot_instr = multi_instr = ""
    else:
        raise ValueError(f"unknown MaAS graph {graph!r}")
    for layer in layers:
        for name in layer:
            if name in ("Generate", "GenerateCoT"):
                if code:
                    new = (await O.custom_code_generate(ops, q, entry, gen_instr, stage=name))["response"]
                elif name == "Generate":
                    new = (await O.custom(ops, q, gen_instr, stage="Generate"))["response"]
                else:
                    new = (await O.generate_cot(ops, q, cot_instr))["response"]
                solutions.append(new)
            elif name == "MultiGenerateCoT":
                if code:
                    outs = await asyncio.gather(*[O.custom_code_generate(ops, q, entry, multi_instr,
                                                                         stage="MultiGenerateCoT") for _ in range(3)])
                    got = [o["response"] for o in outs]
                else:
                    got = (await O.multi_generate_cot(ops, q, multi_instr))["response"]
                solutions.extend(got)
                new = got[-1]
            elif name == "SelfRefine":
                new = (await O.self_refine(ops, q, current))["response"]
                solutions.append(new)
            elif name == "Programmer":
                res = await O.programmer(ops, q, current)
                if graph == "gsm8k":
                    new = (await O.custom(ops, q + f"\nCode output: {res['code']}", GSM8K_REFINE_ANSWER_PROMPT,
                                          stage="Custom"))["response"]
                else:
                    new = res["output"]
                solutions.append(new)
            elif name == "Test":
                new = (await O.test(ops, q, current, entry))["solution"]
                solutions.append(new)
            elif name == "ScEnsemble":
                new = (await O.sc_ensemble(ops, solutions or [current], q))["response"]
                solutions = [new]
            else:                                              # EarlyStop (and anything else): no-op
                new = current
            current = new
    final = (await O.sc_ensemble(ops, solutions, q))["response"] if len(solutions) > 1 else current
    if graph == "gsm8k":
        ver = await O.programmer(ops, q, final)
        if ver["output"] and ver["output"] != "No code generated":
            return ver["output"]
        return final
    if code:
        t = await O.test(ops, q, final, entry)
        if t["result"]:
            return t["solution"]
        return (await O.custom_code_generate(ops, q, entry, HUMANEVAL_IMPROVE_CODE_PROMPT))["response"]
    return final


# ---- the search (cost-aware REINFORCE on validate) -----------------------------------------------------------

class MaasOptimiser:
    """``search(sctx)``: train the controller on the validate split; the artifact's workflow is the supernet with
    the trained controller (a file next to the artifact, named by its sha256)."""

    def __init__(self, repetitions: int = 4, batch_size: int = 4, lr: float = 0.01, cost_weight: float = 3.0,
                 threshold: float = 0.3, num_layers: int = 4, hidden_dim: int = 32, early_stop_penalty: float = 1.5,
                 embedder: str = "minilm", graph: str = "auto", operators: list[str] | None = None,
                 validate_limit: int | None = None, init_seed: int = 0, role: str | None = "executor",
                 temperature: float | None = None, max_tokens: int | None = None, cost_unit: str = "usd",
                 programmer_timeout_s: float = 30.0, qa_instruction: str = "answer_instruction",
                 operator_templates: str = "dataset") -> None:
        if cost_unit not in ("usd", "ktokens"):
            raise ValueError("cost_unit must be usd (released) or ktokens")
        O._check_mode(operator_templates)
        self.p = dict(repetitions=int(repetitions), batch_size=int(batch_size), lr=float(lr),
                      cost_weight=float(cost_weight), threshold=float(threshold), num_layers=int(num_layers),
                      hidden_dim=int(hidden_dim), early_stop_penalty=float(early_stop_penalty), embedder=embedder,
                      graph=graph, operators=operators, validate_limit=validate_limit, init_seed=int(init_seed),
                      role=role, temperature=temperature, max_tokens=max_tokens, cost_unit=cost_unit,
                      programmer_timeout_s=programmer_timeout_s, qa_instruction=qa_instruction,
                      operator_templates=operator_templates)

    def workflow(self, controller: Path, sha: str | None, names: list[str], salt: str) -> dict[str, Any]:
        p = self.p
        params = {"controller": str(controller), "controller_sha256": sha, "operators": names, "graph": p["graph"],
                  "threshold": p["threshold"], "early_stop_penalty": p["early_stop_penalty"],
                  "embedder": p["embedder"], "role": p["role"], "temperature": p["temperature"],
                  "max_tokens": p["max_tokens"], "sample_salt": salt,
                  "programmer_timeout_s": p["programmer_timeout_s"], "qa_instruction": p["qa_instruction"],
                  "operator_templates": p["operator_templates"]}
        return {"name": "maas", "solver": "agentic_repro.baselines.autoflow.maas:MaasSupernet", "params": params,
                "roles": [p["role"]] if p["role"] else [], "label": "MaAS", "deviations": []}

    def _cost(self, rec: dict[str, Any]) -> float:
        if self.p["cost_unit"] == "usd":
            return float(rec.get("cost_usd") or 0.0)
        stages = rec.get("cost_by_stage") or {}
        toks = sum(int(v.get("prompt_tokens", 0)) + int(v.get("completion_tokens", 0)) for v in stages.values())
        return toks / 1000.0

    async def search(self, sctx: Any) -> Any:
        from agentic_repro.baselines.autoflow.search import SearchResult

        torch = _torch()
        p = self.p
        bench = sctx.spec.benchmark_cfg["name"]
        domain = _domain_of(sctx)
        graph = graph_for(bench, domain, p["graph"])
        names = list(p["operators"] or operators_for(graph))
        work = Path(sctx.out_dir) / "maas"
        live = work / "controller_live.pt"
        emb = make_embedder(p["embedder"])
        ops_emb = torch.tensor(emb.embed(operator_texts(names, graph, p["operator_templates"])))
        dims = {"input_dim": int(ops_emb.shape[1]), "hidden_dim": p["hidden_dim"], "num_layers": p["num_layers"]}
        ctrl = build_controller(**dims, seed=p["init_seed"])
        adam = torch.optim.Adam(ctrl.parameters(), lr=p["lr"])
        state = sctx.resume() or {"rep": 1, "batch": 0, "history": [], "done": False}
        if state.get("checkpoint"):
            ck, _ = load_state(Path(state["checkpoint"]), state.get("checkpoint_sha256"))
            ctrl.load_state_dict(ck["state"])
            adam.load_state_dict(ck["adam"])
            sctx.log(f"resumed at repetition {state['rep']} batch {state['batch']}")
        history: list[dict[str, Any]] = state["history"]
        bs = p["batch_size"]
        cap = p["validate_limit"] if p["validate_limit"] is not None else sctx.spec.benchmark_cfg.get("limit")
        cap = None if cap is None else int(cap)
        while not state["done"]:
            rep, b = state["rep"], state["batch"]
            sha = save_state({"dims": dims, "operators": names, "state": ctrl.state_dict()}, live)
            end = (b + 1) * bs if cap is None else min((b + 1) * bs, cap)
            ev = await sctx.evaluate(self.workflow(live, None, names, salt=f"rep{rep}"), tag=f"maas_rep{rep}",
                                     limit=end)
            batch = sorted([r for r in ev.predictions if b * bs <= int(r["index"]) < end], key=lambda r: r["index"])
            stale = [r["id"] for r in batch if (r.get("trace") or {}).get("maas", {}).get("controller_sha256") != sha]
            if stale:
                raise RuntimeError(f"MaAS: validate problems {stale} of repetition {rep} were sampled with other "
                                   f"controller weights than batch {b}'s (folder {ev.run_dir}); remove that folder "
                                   "and search_state.json to restart the search")
            entry: dict[str, Any] = {"round": len(history) + 1, "repetition": rep, "batch": b,
                                     "ids": [r["id"] for r in batch], "controller_sha256": sha}
            if batch:
                logps, utils, scores, costs = [], [], [], []
                for r in batch:
                    m = r["trace"]["maas"]
                    qv = torch.tensor(emb.embed([m["query"]])[0])
                    logps.append(architecture_log_prob(ctrl, qv, ops_emb, m))
                    cost = self._cost(r)
                    scores.append(float(r["score"]))
                    costs.append(cost)
                    utils.append(float(r["score"]) - p["cost_weight"] * cost)
                loss = -(torch.stack(logps) * torch.tensor(utils, dtype=torch.float32)).mean()
                adam.zero_grad()
                loss.backward()
                adam.step()
                entry.update(scores=scores, costs=costs, utilities=utils, loss=float(loss.item()),
                             score=sum(scores) / len(scores),
                             architectures=[r["trace"]["maas"]["names"] for r in batch])
            if batch:
                history.append(entry)
            last_batch = len(batch) < bs or (cap is not None and end >= cap)
            if last_batch:
                state.update(rep=rep + 1, batch=0, done=rep + 1 > p["repetitions"])
            else:
                state["batch"] = b + 1
            ck_path = work / f"checkpoint_r{rep}_b{b}.pt"
            ck_sha = save_state({"state": ctrl.state_dict(), "adam": adam.state_dict()}, ck_path)
            state.update(history=history, checkpoint=str(ck_path), checkpoint_sha256=ck_sha)
            sctx.checkpoint(state)
            sctx.log(f"repetition {rep} batch {b}: {entry.get('score')} loss {entry.get('loss')}")
        final_tmp = work / "controller_final.pt"
        sha = save_state({"dims": dims, "operators": names, "state": ctrl.state_dict()}, final_tmp)
        final = work / f"controller_{sha[:16]}.pt"
        final_tmp.replace(final)
        reps: dict[int, list[float]] = {}
        for h in history:
            reps.setdefault(h["repetition"], []).extend(h.get("scores") or [])
        last = reps.get(max(reps)) if reps else []
        allv = [s for v in reps.values() for s in v]
        wf = self.workflow(final, sha, names, salt="test")
        return SearchResult(workflow={"solver": wf["solver"], "params": wf["params"], "roles": wf["roles"]},
                            validate_score=(sum(last) / len(last)) if last else 0.0, history=history,
                            extra={"controller": str(final), "controller_sha256": sha, "graph": graph,
                                   "operators": names, "dims": dims, "embedder": emb.name,
                                   "repetition_scores": {str(k): (sum(v) / len(v) if v else None)
                                                         for k, v in reps.items()},
                                   "mean_over_all_repetitions": (sum(allv) / len(allv)) if allv else None,
                                   "hyperparameters": {k: v for k, v in p.items()}})


def _domain_of(sctx: Any) -> str:
    from agentic_repro.harness.benchmark import build_benchmark

    return str(build_benchmark(sctx.spec.benchmark_cfg).domain)


def controller_summary(path: str | Path) -> dict[str, Any]:
    """Small description of a saved controller (for READMEs and tests)."""
    doc, sha = load_state(Path(path))
    n = sum(int(v.numel()) for v in doc["state"].values())
    return {"sha256": sha, "parameters": n, "dims": doc["dims"], "operators": doc["operators"]}


__all__ = [
    "MaasOptimiser",
    "MaasSupernet",
    "architecture_log_prob",
    "build_controller",
    "controller_summary",
    "graph_for",
    "run_graph",
    "sample_architecture",
    "sample_layer",
]
