"""AFlow (Zhang et al., ICLR 2025): MCTS-style search over code-represented workflows.

Facts from the authors' code (FoundationAgents/AFlow @364399e: ``scripts/optimizer.py``,
``scripts/optimizer_utils/{data,experience,graph,convergence}_utils.py``, ``scripts/prompts/optimize_prompt.py``,
``scripts/formatter.py``, ``run.py``, ``workspace/*/workflows/round_1``), re-implemented, not copied:

- Round 1 is the released seed graph of the dataset (a single ``Custom`` with an empty instruction for
  GSM8K/MATH/DROP/HotpotQA; ``CustomCodeGenerate`` for HumanEval/MBPP), evaluated ``validate_runs`` times.
  A benchmark AFlow released no graph for starts from its domain's (``seed_graph: auto``, ``SEED_BY_DOMAIN``:
  ours, recorded in the artifact's ``extra.seed_graph``).
- Each later round: take the round-1 node plus the best rounds by mean validate score (``sample`` = 4 in
  all), pick a parent with the mixed distribution ``λ·uniform + (1−λ)·softmax(α·100·score)`` (α = 0.2,
  λ = 0.3); the optimiser gets the parent's graph (from ``class Workflow:`` on) and prompt module, its
  score, its experience (children's modifications that did / did not beat it), the operator descriptions
  and three random entries of its validate error log, and answers ``<modification>``, ``<graph>``,
  ``<prompt>`` in XML; a modification already tried on that parent is regenerated.
- The child is evaluated ``validate_runs`` times; its mean score back-propagates as experience to the
  parent (``succeed`` = child mean > parent mean).
- The search stops after ``rounds`` optimiser proposals (``Optimizer.optimize``: ``max_rounds`` iterations, each
  proposing round ``self.round + 1``; so rounds 2..21 for 20, ``rounds_count: proposals``) or at convergence (top-3
  mean unchanged within z·σ for 5 consecutive rounds, z = 0; ``run.py`` turns the check on).
- A graph that raises on a problem is re-run, up to 5 attempts, before it scores 0 (``benchmarks/*.py``
  ``_generate_output``: tenacity ``stop_after_attempt(5)``; ``crash_attempts``), in the search and on test.
- The optimiser reads each operator as the dataset's own ``template/operator.json`` writes it, and the graph runs
  that template's operators (DROP/HotpotQA: ``ScEnsemble(solutions)`` with their own prompt;
  ``operator_templates: dataset``).

Generated graphs run only in the sandbox (:mod:`agentic_repro.baselines.autoflow.workflow`); deviations are listed in
``baselines/README.md`` (AFlow row) and ``configs/method/aflow.yaml``.
"""
from __future__ import annotations

import json
import math
import random
import re
from typing import Any

from agentic_repro.baselines.autoflow import operators as ops_mod
from agentic_repro.baselines.autoflow.search import SearchContext, SearchResult

WORKFLOW_SOLVER = "agentic_repro.baselines.autoflow.workflow:SandboxedWorkflow"

# ---- released prompts (scripts/prompts/optimize_prompt.py, scripts/formatter.py) ---------------------------

OPTIMIZE_SYSTEM = """You are building a Graph and corresponding Prompt to jointly solve {type} problems. 
Referring to the given graph and prompt, which forms a basic example of a {type} solution approach, 
please reconstruct and optimize them. You can add, modify, or delete nodes, parameters, or prompts. Include your 
single modification in XML tags in your reply. Ensure they are complete and correct to avoid runtime failures. When 
optimizing, you can incorporate critical thinking methods like review, revise, ensemble (generating multiple answers through different/similar prompts, then voting/integrating/checking the majority to obtain a final answer), selfAsk, etc. Consider 
Python's loops (for, while, list comprehensions), conditional statements (if-elif-else, ternary operators), 
or machine learning techniques (e.g., linear regression, decision trees, neural networks, clustering). The graph 
complexity should not exceed 10. Use logical and control flow (IF-ELSE, loops) for a more enhanced graphical 
representation.Ensure that all the prompts required by the current graph from prompt_custom are included.Exclude any other prompts.
Output the modified graph and all the necessary Prompts in prompt_custom (if needed).
The prompt you need to generate is only the one used in `prompt_custom.XXX` within Custom. Other methods already have built-in prompts and are prohibited from being generated. Only generate those needed for use in `prompt_custom`; please remove any unused prompts in prompt_custom.
the generated prompt must not contain any placeholders.
Considering information loss, complex graphs may yield better results, but insufficient information transmission can omit the solution. It's crucial to include necessary context during the process."""

OPTIMIZE_INPUT = """
Here is a graph and the corresponding prompt (prompt only related to the custom method) that performed excellently in a previous iteration (maximum score is 1). You must make further optimizations and improvements based on this graph. The modified graph must differ from the provided example, and the specific differences should be noted within the <modification>xxx</modification> section.\n
<sample>
    <experience>{experience}</experience>
    <modification>(such as:add /delete /modify/ ...)</modification>
    <score>{score}</score>
    <graph>{graph}</graph>
    <prompt>{prompt}</prompt>(only prompt_custom)
    <operator_description>{operator_description}</operator_description>
</sample>
Below are the logs of some results with the aforementioned Graph that performed well but encountered errors, which can be used as references for optimization:
{log}

First, provide optimization ideas. **Only one detail point can be modified at a time**, and no more than 5 lines of code may be changed per modification—extensive modifications are strictly prohibited to maintain project focus!
When introducing new functionalities in the graph, please make sure to import the necessary libraries or modules yourself, except for operator, prompt_custom, create_llm_instance, and CostManage, which have already been automatically imported.
**Under no circumstances should Graph output None for any field.**
Use custom methods to restrict your output format, rather than using code (outside of the code, the system will extract answers based on certain rules and score them).
It is very important to format the Graph output answers, you can refer to the standard answer format in the log.
You do not need to manually import prompt_custom or operator to use them; they are already included in the execution environment.
"""

CUSTOM_USE = """\nHere's an example of using the `custom` method in graph:
```
# You can write your own prompt in <prompt>prompt_custom</prompt> and then use it in the Custom method in the graph
response = await self.custom(input=problem, instruction=prompt_custom.XXX_PROMPT)
# You can also concatenate previously generated string results in the input to provide more comprehensive contextual information.
# response = await self.custom(input=problem+f"xxx:{xxx}, xxx:{xxx}", instruction=prompt_custom.XXX_PROMPT)
# The output from the Custom method can be placed anywhere you need it, as shown in the example below
solution = await self.generate(problem=f"question:{problem}, xxx:{response['response']}")
```
Note: In custom, the input and instruction are directly concatenated(instruction+input), and placeholders are not supported. Please ensure to add comments and handle the concatenation externally.\n

**Introducing multiple operators at appropriate points can enhance performance. If you find that some provided operators are not yet used in the graph, try incorporating them.**
"""

XML_FORMAT = ("\n# Response format (must be strictly followed) (do not include any other formats except for the given "
              "XML format):\n<modification>modification</modification>\n<graph>graph</graph>\n<prompt>prompt</prompt>")

GRAPH_HEADER = """from typing import Literal
import workspace.{dataset}.workflows.template.operator as operator
import workspace.{dataset}.workflows.round_{round}.prompt as prompt_custom
from scripts.async_llm import create_llm_instance


from scripts.evaluator import DatasetType

"""

SEED_PROMPT = '# XXX_PROMPT = """\n#\n# Solve it.\n#\n# """\n'

_SEED_BODY_TEXT = '''class Workflow:
    def __init__(
        self,
        name: str,
        llm_config,
        dataset: DatasetType,
    ) -> None:
        self.name = name
        self.dataset = dataset
        self.llm = create_llm_instance(llm_config)
        self.custom = operator.Custom(self.llm)

    async def __call__(self, problem: str):
        """
        Implementation of the workflow
        """
        solution = await self.custom(input=problem, instruction="")
        return solution['response'], self.llm.get_usage_summary()["total_cost"]
'''

_SEED_BODY_CODE = '''class Workflow:
    def __init__(
        self,
        name: str,
        llm_config,
        dataset: DatasetType,
    ) -> None:
        self.name = name
        self.dataset = dataset
        self.llm = create_llm_instance(llm_config)
        self.custom = operator.Custom(self.llm)
        self.custom_code_generate = operator.CustomCodeGenerate(self.llm)

    async def __call__(self, problem: str, entry_point: str):
        """
        Implementation of the workflow
        Custom operator to generate anything you want.
        But when you want to get standard code, you should use custom_code_generate operator.
        """
        # await self.custom(input=, instruction="")
        solution = await self.custom_code_generate(problem=problem, entry_point=entry_point, instruction="") # But When you want to get standard code ,you should use customcodegenerator.
        return solution['response'], self.llm.get_usage_summary()["total_cost"]
'''

#: our benchmark name -> AFlow's dataset name (workspace/<dataset>)
DATASETS = {"gsm8k": "GSM8K", "math": "MATH", "humaneval": "HumanEval", "mbpp": "MBPP", "drop": "DROP",
            "hotpotqa": "HotpotQA"}
#: ours: the released round-1 graph a benchmark WITHOUT one (DyFlow's five, MATH-500, ...) starts from, by its
#: domain (``seed_by_domain``): MATH's for math (MATH L5 / MATH-500 are MATH subsets), HumanEval's for code, DROP's
#: for QA and other text answers (AFlow's QA seeds, DROP and HotpotQA, are the same one-Custom graph)
SEED_BY_DOMAIN = {"math": "MATH", "code": "HumanEval", "qa": "DROP", "reasoning": "DROP"}


def choose_seed(benchmark: str, domain: str, seed_graph: str = "auto",
                by_domain: dict[str, str] | None = None) -> dict[str, Any]:
    """Which released round-1 graph the search starts from: ``seed_graph`` names an AFlow dataset, or ``auto``:
    the benchmark's own when AFlow released one, else the graph of its domain (recorded in the artifact)."""
    names = set(DATASETS.values())
    if seed_graph != "auto":
        if seed_graph not in names:
            raise ValueError(f"aflow: seed_graph={seed_graph!r}: choose auto or one of {sorted(names)}")
        return {"dataset": seed_graph, "rule": "seed_graph", "released_for_benchmark": DATASETS.get(benchmark) == seed_graph}
    if benchmark in DATASETS:
        return {"dataset": DATASETS[benchmark], "rule": "released", "released_for_benchmark": True}
    table = {**SEED_BY_DOMAIN, **(by_domain or {})}
    if domain not in table or table[domain] not in names:
        raise ValueError(f"aflow: {benchmark} has no released round-1 graph and its domain {domain!r} is not in "
                         f"seed_by_domain {table}: set method.search.params.seed_graph=<one of {sorted(names)}>")
    return {"dataset": table[domain], "rule": f"domain {domain}", "released_for_benchmark": False}


def aflow_dataset(benchmark: str, domain: str) -> str:
    return choose_seed(benchmark, domain)["dataset"]


def seed_graph(dataset: str) -> tuple[str, str]:
    """The released round-1 (graph, prompt) of ``dataset``."""
    body = _SEED_BODY_CODE if dataset in ("HumanEval", "MBPP") else _SEED_BODY_TEXT
    return GRAPH_HEADER.format(dataset=dataset, round=1) + body, SEED_PROMPT


def solve_graph(graph: str) -> str:
    """The part of a graph the optimiser sees: from ``class Workflow:`` on (GraphUtils.extract_solve_graph)."""
    m = re.search(r"class Workflow:.+", graph, re.DOTALL)
    return m.group(0) if m else graph


def operator_description(names: list[str], dataset: str | None = None, mode: str = "dataset") -> str:
    """``"<i>. <name>: <description>, with interface <interface>)."`` per operator (AFlow's own format), as the
    dataset's ``workspace/<dataset>/workflows/template/operator.json`` writes it (``mode`` ``shared``: one table)."""
    lines = []
    for i, name in enumerate(names, 1):
        d = ops_mod.describe(name, dataset, source="aflow", mode=mode)
        lines.append(f"{i}. {name}: {d['description']}, with interface {d['interface']}).")
    return "\n".join(lines) + "\n"


def parse_response(text: str) -> dict[str, str] | None:
    """The three XML fields (XmlFormatter; its regex fallback): None when graph or modification is missing."""
    found = {m.group(1): m.group(2).strip() for m in re.finditer(r"<(\w+)>(.*?)</\1>", text or "", re.DOTALL)}
    out = {k: found.get(k, "") for k in ("modification", "graph", "prompt")}
    if not out["graph"] or not out["modification"]:
        return None
    out["graph"] = _strip_fence(out["graph"])
    out["prompt"] = _strip_fence(out["prompt"])
    return out


def _strip_fence(text: str) -> str:
    m = re.fullmatch(r"\s*```(?:python|py)?\s*\n(.*?)\n?```\s*", text, re.DOTALL)
    return m.group(1) if m else text


def mixed_probabilities(scores: list[float], alpha: float, lam: float) -> list[float]:
    """λ·uniform + (1−λ)·softmax(α·(s − max s)) over scores in percent (DataUtils._compute_probabilities)."""
    n = len(scores)
    top = max(scores)
    w = [math.exp(alpha * (s - top)) for s in scores]
    z = sum(w)
    probs = [lam / n + (1 - lam) * x / z for x in w]
    total = sum(probs)
    return [p / total for p in probs]


def top_rounds(means: dict[int, float], sample: int) -> list[dict[str, Any]]:
    """Round 1 first, then the best distinct rounds by mean score, ``sample`` in all (DataUtils.get_top_rounds)."""
    ranked = sorted(means.items(), key=lambda kv: (-kv[1], kv[0]))
    out = [{"round": 1, "score": means[1]}] if 1 in means else []
    for r, s in ranked:
        if r != 1:
            if len(out) >= sample:
                break
            out.append({"round": r, "score": s})
    return out


def select_parent(items: list[dict[str, Any]], rng: random.Random, alpha: float, lam: float) -> tuple[dict[str, Any], list[float]]:
    ranked = sorted(items, key=lambda x: -x["score"])  # stable: ties keep top_rounds order
    probs = mixed_probabilities([100 * x["score"] for x in ranked], alpha, lam)
    u, acc = rng.random(), 0.0
    for item, p in zip(ranked, probs):
        acc += p
        if u < acc:
            return item, probs
    return ranked[-1], probs


def format_experience(exp: dict[str, Any] | None, parent: int) -> str:
    """ExperienceUtils.format_experience, wording as released (successes are listed as 'prohibit' too)."""
    if not exp:
        return f"No experience data found for round {parent}."
    text = f"Original Score: {exp['score']}\nThese are some conclusions drawn from experience:\n\n"
    for v in exp["failure"].values():
        text += f"-Absolutely prohibit {v['modification']} (Score: {v['score']})\n"
    for v in exp["success"].values():
        text += f"-Absolutely prohibit {v['modification']} \n"
    text += ("\n\nNote: Take into account past failures and avoid repeating the same mistakes, as these failures "
             "indicate that these approaches are ineffective. You must fundamentally change your way of thinking, "
             "rather than simply using more advanced Python syntax like for, if, else, etc., or modifying the prompt.")
    return text


def record_experience(st: dict[str, Any], row: dict[str, Any], r: int) -> None:
    """Back-propagate round ``r``'s outcome to its parent's experience (ExperienceUtils.update_experience):
    a success when it beat the parent's score, else a failure, with the modification that was tried."""
    e = st["experience"].setdefault(str(row["parent"]), {"score": row["parent_score"], "success": {}, "failure": {}})
    part = "success" if row["mean"] > row["parent_score"] else "failure"
    e[part][str(r)] = {"modification": row["modification"], "score": row["mean"]}


def converged(round_scores: list[list[float]], top_k: int, z: float, consecutive: int) -> bool:
    """ConvergenceUtils.check_convergence over rounds in order (each: its validate runs' scores)."""
    means = [sum(s) / len(s) for s in round_scores]
    stds = [math.sqrt(sum((x - m) ** 2 for x in s) / len(s)) for s, m in zip(round_scores, means)]
    if len(means) < top_k + 1:
        return False
    count, prev_y, prev_sigma = 0, None, None
    for i in range(len(means)):
        idx = sorted(range(i + 1), key=lambda j: -means[j])[:top_k]
        y = sum(means[j] for j in idx) / len(idx)
        sigma = math.sqrt(sum(stds[j] ** 2 for j in idx) / top_k ** 2)
        if prev_y is not None:
            if abs(y - prev_y) <= z * math.sqrt(sigma ** 2 + prev_sigma ** 2):
                count += 1
                if count >= consecutive:
                    return True
            else:
                count = 0
        prev_y, prev_sigma = y, sigma
    return False


class AFlow:
    """The optimiser (``method.search.optimiser``); every parameter is documented with its source in
    ``configs/method/aflow.yaml`` and ``baselines/README.md``."""

    def __init__(self, rounds: int = 20, validate_runs: int = 5, sample: int = 4, alpha: float = 0.2,
                 lambda_: float = 0.3, check_convergence: bool = True, convergence_top_k: int = 3,
                 convergence_z: float = 0.0, convergence_rounds: int = 5, log_samples: int = 3,
                 max_regenerations: int = 3, optimizer_temperature: float | None = 1.0,
                 optimizer_max_tokens: int | None = None, operators: list[str] | None = None,
                 question_type: str | None = None, mismatch_f1: float = 0.3, limits: dict[str, Any] | None = None,
                 executor_sampling: dict[str, Any] | None = None, validate_limit: int | None = None,
                 seed_graph: str = "auto", seed_by_domain: dict[str, str] | None = None,
                 rounds_count: str = "proposals", crash_attempts: int = 5,
                 operator_templates: str = "dataset") -> None:
        if rounds < 1 or validate_runs < 1 or sample < 1:
            raise ValueError("aflow: rounds, validate_runs and sample must be >= 1")
        if rounds_count not in ("proposals", "graphs"):
            raise ValueError(f"aflow: rounds_count={rounds_count!r}: proposals (the release: rounds optimiser "
                             "proposals after the seed) or graphs (rounds graphs, the seed among them)")
        ops_mod._check_mode(operator_templates)
        self.rounds, self.validate_runs, self.sample = int(rounds), int(validate_runs), int(sample)
        self.rounds_count = rounds_count
        # the last round number: the release's Optimizer.optimize runs max_rounds iterations, each proposing round
        # self.round + 1 (round 1, the seed, is evaluated in the first), so 20 proposals and 21 graphs
        self.last_round = self.rounds + 1 if rounds_count == "proposals" else self.rounds
        self.crash_attempts = int(crash_attempts)
        self.operator_templates = operator_templates
        self.alpha, self.lam = float(alpha), float(lambda_)
        self.check_convergence = bool(check_convergence)
        self.conv = (int(convergence_top_k), float(convergence_z), int(convergence_rounds))
        self.log_samples = int(log_samples)
        self.max_regenerations = int(max_regenerations)
        self.opt_sampling = {k: v for k, v in {"temperature": optimizer_temperature,
                                               "max_tokens": optimizer_max_tokens}.items() if v is not None}
        self.operators = operators
        self.question_type = question_type
        self.mismatch_f1 = float(mismatch_f1)
        self.limits = dict(limits or {})
        self.executor_sampling = dict(executor_sampling or {})
        self.validate_limit = validate_limit
        self.seed_graph, self.seed_by_domain = str(seed_graph), dict(seed_by_domain or {})

    # ---- pieces ------------------------------------------------------------------------------------
    def _operators(self, domain: str) -> list[str]:
        return list(self.operators or ops_mod.AFLOW_OPERATORS.get(domain, ops_mod.AFLOW_OPERATORS["qa"]))

    def workflow_config(self, graph: str, prompt: str, dataset: str) -> dict[str, Any]:
        """The method config a round's graph runs as (and, frozen, the artifact's workflow)."""
        return {"solver": WORKFLOW_SOLVER,
                "params": {"graph": graph, "prompt": prompt, "role": "executor", "dataset": dataset,
                           "limits": self.limits, "sampling": self.executor_sampling,
                           "crash_attempts": self.crash_attempts, "operator_templates": self.operator_templates}}

    def _mismatch(self, pred: dict[str, Any], questions: dict[str, str], domain: str) -> bool:
        if pred.get("status") != "ok":
            return False
        score = float(pred.get("score") or 0.0)
        return score < self.mismatch_f1 if domain == "qa" else score <= 0.0

    async def evaluate_round(self, sctx: SearchContext, r: int, graph: str, prompt: str, dataset: str,
                             domain: str) -> dict[str, Any]:
        scores, log, runs = [], [], []
        wf = self.workflow_config(graph, prompt, dataset)
        for k in range(self.validate_runs):
            ev = await sctx.evaluate({"name": f"aflow-round{r}", **wf, "roles": ["executor"]},
                                     tag=f"round_{r}/run_{k}", seed=sctx.seed + k, limit=self.validate_limit)
            scores.append(ev.score)
            failed = sum(1 for p in ev.predictions if not ((p.get("trace") or {}).get("workflow") or {}).get("ok", True))
            runs.append({"run": k, "score": ev.score, "n": ev.n, "workflow_failures": failed, "dir": ev.run_dir})
            for p in ev.predictions:
                if self._mismatch(p, ev.questions, domain):
                    log.append({"question": ev.questions.get(p["id"], p["id"]), "right_answer": p.get("gold"),
                                "model_output": p.get("raw_output"), "extracted_output": p.get("extracted"),
                                "extract_answer_code": "None"})
        return {"scores": scores, "mean": sum(scores) / len(scores), "log": log, "runs": runs}

    async def propose(self, sctx: SearchContext, st: dict[str, Any], r: int, parent: dict[str, Any],
                      domain: str, dataset: str) -> dict[str, Any] | None:
        prow = st["rounds"][str(parent["round"])]
        exp = st["experience"].get(str(parent["round"]))
        rng = random.Random(f"{sctx.seed}:log:{r}")
        entries = prow["log"]
        picked = rng.sample(entries, min(self.log_samples, len(entries))) if entries else []
        log_text = "".join(json.dumps(e, indent=4, ensure_ascii=False) + "\n\n" for e in picked)
        qtype = self.question_type or domain
        text = OPTIMIZE_INPUT.format(experience=format_experience(exp, parent["round"]), score=parent["score"],
                                     graph=solve_graph(prow["graph"]), prompt=prow["prompt"],
                                     operator_description=operator_description(self._operators(domain), dataset,
                                                                               self.operator_templates),
                                     type=qtype, log=log_text)
        prompt = text + CUSTOM_USE + OPTIMIZE_SYSTEM.format(type=qtype) + XML_FORMAT
        tried = set() if not exp else {v["modification"] for part in ("success", "failure")
                                       for v in exp[part].values()}
        attempts = []
        for attempt in range(self.max_regenerations):
            out = await sctx.optimize([{"role": "user", "content": prompt}], stage=f"optimize_round_{r}",
                                      sample_offset=attempt, **self.opt_sampling)
            parsed = parse_response(out[0].text)
            attempts.append({"attempt": attempt, "parsed": parsed is not None,
                             "duplicate": bool(parsed and parsed["modification"] in tried)})
            if parsed and parsed["modification"] not in tried:
                parsed["graph"] = GRAPH_HEADER.format(dataset=dataset, round=r) + parsed["graph"]  # write_graph_files
                parsed["attempts"] = attempts
                return parsed
        return {"attempts": attempts}

    # ---- the loop --------------------------------------------------------------------------------------
    async def search(self, sctx: SearchContext) -> SearchResult:
        domain = sctx.domain
        seed = choose_seed(sctx.benchmark_name, domain, self.seed_graph, self.seed_by_domain)
        dataset = seed["dataset"]
        st = sctx.resume() or {"rounds": {}, "experience": {}, "next_round": 1, "stopped": None}
        while st["next_round"] <= self.last_round and not st["stopped"]:
            r = st["next_round"]
            if r == 1:
                graph, prompt = seed_graph(dataset)
                row: dict[str, Any] = {"round": 1, "parent": None, "modification": "seed (released round 1)"
                                       if seed["released_for_benchmark"] else f"seed (released round 1 of {dataset})",
                                       "graph": graph, "prompt": prompt}
            else:
                means = {int(k): v["mean"] for k, v in st["rounds"].items() if v.get("mean") is not None}
                parent, probs = select_parent(top_rounds(means, self.sample), random.Random(f"{sctx.seed}:select:{r}"),
                                              self.alpha, self.lam)
                proposal = await self.propose(sctx, st, r, parent, domain, dataset)
                row = {"round": r, "parent": parent["round"], "parent_score": parent["score"],
                       "selection_probs": probs, "attempts": proposal.get("attempts")}
                if "graph" not in proposal:
                    row.update(status="no_candidate", mean=None, scores=[], log=[],
                               failure="the optimiser gave no parseable, new modification")
                    st["rounds"][str(r)] = row
                    st["next_round"] = r + 1
                    sctx.checkpoint(st)
                    sctx.log(f"round {r}: no candidate")
                    continue
                row.update(modification=proposal["modification"], graph=proposal["graph"],
                           prompt=proposal["prompt"])
            row.update(await self.evaluate_round(sctx, r, row["graph"], row["prompt"], dataset, domain))
            row["status"] = "ok" if not any(run["workflow_failures"] == run["n"] for run in row["runs"]) \
                else "workflow_failed"
            st["rounds"][str(r)] = row
            if r > 1:
                record_experience(st, row, r)
            st["next_round"] = r + 1
            scored = [v["scores"] for _, v in sorted(st["rounds"].items(), key=lambda kv: int(kv[0])) if v["scores"]]
            if self.check_convergence and converged(scored, *self.conv):
                st["stopped"] = f"converged after round {r}"
            sctx.checkpoint(st)
            sctx.log(f"round {r}: mean {row['mean']:.4f} scores {row['scores']} status {row['status']}")
        best = max((v for v in st["rounds"].values() if v.get("mean") is not None),
                   key=lambda v: (v["mean"], -v["round"]))
        history = [{k: v.get(k) for k in ("round", "parent", "parent_score", "modification", "scores", "mean",
                                          "status", "failure", "selection_probs", "attempts", "runs")}
                   | {"graph": v.get("graph"), "prompt": v.get("prompt"), "log_entries": len(v.get("log") or [])}
                   for _, v in sorted(st["rounds"].items(), key=lambda kv: int(kv[0]))]
        return SearchResult(workflow=self.workflow_config(best["graph"], best["prompt"], dataset),
                            validate_score=best["mean"], history=history,
                            extra={"best_round": best["round"], "stopped": st["stopped"], "dataset": dataset,
                                   "seed_graph": seed,
                                   "operators": self._operators(domain), "experience": st["experience"],
                                   "rounds_run": len(st["rounds"])})
