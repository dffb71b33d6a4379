"""ADAS (Hu et al., ICLR 2025): Meta Agent Search over an archive of agents written as code.

Facts from the authors' code (ShengranHu/ADAS @2702bee: ``_mgsm/search.py``, ``_drop/search.py``,
``_mgsm/utils.py``; prompts and the initial archive in ``prompts/adas_prompts.json``, extracted from
``_mgsm/mgsm_prompt.py`` and ``_drop/drop_prompt.py``), re-implemented, not copied:

- The archive starts with 7 agents (CoT, CoT-SC, Self-Refine, LLM Debate, Step-back Abstraction,
  Quality-Diversity, Dynamic Assignment of Roles); each is evaluated on the validation set and gets a fitness
  string, "95% Bootstrap Confidence Interval: (lo%, hi%), Median: m%" (100,000 bootstrap means).
- Each generation the meta agent sees the whole archive (JSON) in the base prompt and answers one JSON agent
  (``thought``, ``name``, ``code`` = ``def forward(self, taskInfo)``), then reflects twice on it (Reflexion
  prompts 1 and 2, the first naming the previous archive entry) at temperature 0.8.
- The candidate is evaluated; if it raises on any question (``executor.map`` re-raises the first failing
  question's exception, in question order) or scores < 1 %, the meta agent is asked to debug it with the error
  (up to ``debug_max`` = 3 evaluations; ``debug_on: any_failure``). It enters the archive with its fitness and
  generation number only from an evaluation that raised nothing; a candidate that still crashes on some question
  is left out (``debug_on: all_failed``, ours earlier: only a candidate failing on every question is debugged,
  a partly crashing one joins the archive).
- 30 generations; 128 validation questions (``valid_size``), ``n_repreat`` 1.

Agents run only in the sandbox (:mod:`agentic_repro.baselines.autoflow.workflow`, ``kind: adas``): each ``LLMAgentBase``
call is a request the harness answers (prompt built and JSON parsed here, as ``LLMAgentBase.query``).
"""
from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

from agentic_repro.baselines.autoflow.search import SearchContext, SearchResult

WORKFLOW_SOLVER = "agentic_repro.baselines.autoflow.workflow:SandboxedWorkflow"
PROMPTS = json.loads((Path(__file__).parent / "prompts" / "adas_prompts.json").read_text(encoding="utf-8"))
DEBUG_MESSAGE = ("Error during evaluation:\n{error}\nCarefully consider where you went wrong in your latest "
                 "implementation. Using insights from previous attempts, try to debug the current code to implement "
                 "the same thought. Repeat your previous thought in 'thought', and put your thinking for debugging "
                 "in 'debug_thought'")

#: what LLMAgentBase asks of an 'answer' field, per benchmark (released: MGSM, DROP; others ours)
ANSWER_DESCRIPTIONS = {
    "mgsm": "Return ONLY an integer. DO NOT return anything other than the integer answer.",
    "gsm8k": "Return ONLY an integer. DO NOT return anything other than the integer answer.",
    "drop": "Directly answer the question. Keep it very concise.",
    "hotpotqa": "Directly answer the question. Keep it very concise.",
    "math": "Return ONLY the final answer as a number or a LaTeX expression, nothing else.",
    "code": "Return ONLY the complete Python code of the requested function, without any explanation.",
}
#: how the base prompt names a benchmark we adapt it to (the DROP set is used verbatim on drop)
LABELS = {
    "gsm8k": "the Grade School Math benchmark (GSM8K), which evaluates multi-step mathematical problem-solving on "
             "grade school math word problems",
    "math": "the MATH benchmark, which evaluates problem-solving on competition mathematics problems",
    "humaneval": "the HumanEval benchmark, which evaluates writing a Python function from its signature and "
                 "docstring",
    "mbpp": "the Mostly Basic Python Problems benchmark (MBPP), which evaluates writing a short Python function "
            "from a description and an example test",
    "hotpotqa": "the HotpotQA benchmark, which evaluates multi-hop question answering over several paragraphs",
    # DyFlow's five (ours, as above)
    "math_l5": "the MATH benchmark (Level 5), which evaluates problem-solving on competition mathematics problems",
    "humaneval_dyflow": "the HumanEval benchmark, which evaluates writing a Python function from its signature and "
                        "docstring",
    "pubmedqa": "the PubMedQA benchmark, which evaluates answering biomedical research questions with yes, no or "
                "maybe from a PubMed abstract",
    "socialmaze": "the SocialMaze benchmark, which evaluates social reasoning: deducing the criminal and one's own "
                  "hidden role from the players' statements over several rounds",
    "livebench": "the LiveBench reasoning tasks (spatial reasoning, web of lies, zebra puzzles), which evaluate "
                 "logical reasoning",
}
#: how the example block names a benchmark (default: its name in capitals)
DISPLAY = {"humaneval": "HumanEval", "humaneval_dyflow": "HumanEval", "math_l5": "MATH", "pubmedqa": "PubMedQA",
           "socialmaze": "SocialMaze", "livebench": "LiveBench"}


def prompt_set(benchmark: str, domain: str) -> str:
    return "drop" if benchmark == "drop" or domain == "qa" else "mgsm"


def adapt_base(base: str, benchmark: str, example: tuple[str, Any] | None) -> str:
    """The released base prompt with its benchmark sentence and example question replaced (not for DROP)."""
    if benchmark == "drop" or benchmark not in LABELS or example is None:
        return base
    base = re.sub(r"Your aim is to design an optimal agent performing well on [^\n]*",
                  f"Your aim is to design an optimal agent performing well on {LABELS[benchmark]}.", base, count=1)
    question, gold = example
    block = (f"## An example question from {DISPLAY.get(benchmark, benchmark.upper())}:\n\n"
             f"**Question**: {question}\n\n**Answer (Not Given)**: {gold}\n\n")
    return re.sub(r"## An example question from .*?(?=# The utility code:)", lambda _: block, base, count=1,
                  flags=re.DOTALL)


def bootstrap_fitness(scores: list[float], samples: int = 100_000, confidence: float = 0.95,
                      seed: int = 0) -> tuple[str, float]:
    """(the released fitness string, its median in percent): bootstrap means of the per-question scores."""
    import numpy as np

    data = np.asarray(scores, dtype=float)
    if data.size == 0:
        return "95% Bootstrap Confidence Interval: (0.0%, 0.0%), Median: 0.0%", 0.0
    rng = np.random.default_rng(seed)
    means = data[rng.integers(0, data.size, size=(samples, data.size))].mean(axis=1)
    lo, hi = np.percentile(means, [(1 - confidence) / 2 * 100, (1 + confidence) / 2 * 100])
    med = float(np.median(means))
    return (f"{int(confidence * 100)}% Bootstrap Confidence Interval: ({lo * 100:.1f}%, {hi * 100:.1f}%), "
            f"Median: {med * 100:.1f}%"), med * 100


def parse_agent(text: str) -> dict[str, Any] | None:
    """The meta agent's JSON (json-repair tolerates what response_format=json_object would have prevented)."""
    import json_repair

    try:
        obj = json_repair.loads(text or "")
    except Exception:  # noqa: BLE001
        return None
    if not isinstance(obj, dict) or not isinstance(obj.get("code"), str) or not obj["code"].strip():
        return None
    return obj


class ADAS:
    """The optimiser (``method.search.optimiser``); parameters and sources in ``configs/method/adas.yaml``."""

    def __init__(self, generations: int = 30, valid_size: int | None = 128, n_repeat: int = 1, debug_max: int = 3,
                 meta_temperature: float = 0.8, meta_max_tokens: int | None = 4096,
                 bootstrap_samples: int = 100_000, confidence: float = 0.95, prompts: str | None = None,
                 answer_description: str | None = None, limits: dict[str, Any] | None = None,
                 executor_sampling: dict[str, Any] | None = None, min_accuracy: float = 0.01,
                 initial_archive: list[str] | None = None, debug_on: str = "any_failure") -> None:
        if debug_on not in ("any_failure", "all_failed"):
            raise ValueError(f"adas: debug_on={debug_on!r}: any_failure (the release) or all_failed")
        self.debug_on = debug_on
        self.generations, self.valid_size, self.n_repeat = int(generations), valid_size, int(n_repeat)
        self.debug_max = int(debug_max)
        self.meta_sampling = {k: v for k, v in {"temperature": meta_temperature,
                                                "max_tokens": meta_max_tokens}.items() if v is not None}
        self.bootstrap = (int(bootstrap_samples), float(confidence))
        self.prompts = prompts
        self.answer_description = answer_description
        self.limits = dict(limits or {})
        self.executor_sampling = dict(executor_sampling or {})
        self.min_accuracy = float(min_accuracy)
        # ours (a size option, not the paper's): None = the whole released initial archive (7 agents); a list of
        # names keeps only those agents (released order): the tiny embedded size and the slow test use CoT only,
        # which cuts both the validate calls of the archive and the meta prompt (the archive is in it as JSON)
        self.initial_archive = None if initial_archive is None else [str(n) for n in initial_archive]
        if self.initial_archive is not None and not self.initial_archive:
            raise ValueError("initial_archive: give at least one agent name, or null for the released archive")

    def _answer_description(self, benchmark: str, domain: str) -> str:
        if self.answer_description is not None:
            return self.answer_description
        return ANSWER_DESCRIPTIONS.get(benchmark) or ANSWER_DESCRIPTIONS.get(domain, ANSWER_DESCRIPTIONS["drop"])

    def workflow_config(self, code: str, answer_description: str) -> dict[str, Any]:
        return {"solver": WORKFLOW_SOLVER,
                "params": {"graph": code, "kind": "adas", "role": "executor", "limits": self.limits,
                           "sampling": self.executor_sampling, "answer_description": answer_description}}

    def seeds(self, pset: dict[str, Any]) -> list[dict[str, Any]]:
        """The initial archive: the released one, or the agents ``initial_archive`` names (in released order)."""
        agents = pset["initial_archive"]
        if self.initial_archive is None:
            return agents
        names = [a["name"] for a in agents]
        unknown = [n for n in self.initial_archive if n not in names]
        if unknown:
            raise ValueError(f"initial_archive: {unknown} not in the released archive {names}")
        return [a for a in agents if a["name"] in self.initial_archive]

    async def evaluate(self, sctx: SearchContext, code: str, tag: str, answer: str) -> dict[str, Any]:
        scores: list[float] = []
        failures, first_failure, dirs = 0, None, []
        for k in range(self.n_repeat):
            ev = await sctx.evaluate({"name": "adas-agent", **self.workflow_config(code, answer),
                                      "roles": ["executor"]}, tag=f"{tag}/rep_{k}", seed=sctx.seed + k,
                                     limit=self.valid_size)
            dirs.append(ev.run_dir)
            for p in sorted(ev.predictions, key=lambda p: p.get("index", 0)):
                scores.append(float(p["score"]))
                wf = (p.get("trace") or {}).get("workflow") or {}
                if not wf.get("ok", True):
                    failures += 1
                    first_failure = first_failure or wf.get("detail") or wf.get("failure")
        fitness, median = bootstrap_fitness(scores, *self.bootstrap, seed=sctx.seed)
        return {"scores": scores, "mean": sum(scores) / max(1, len(scores)), "fitness": fitness, "median": median,
                "workflow_failures": failures, "first_failure": first_failure, "dirs": dirs, "n": len(scores)}

    async def _meta(self, sctx: SearchContext, messages: list[dict[str, str]], stage: str) -> dict[str, Any] | None:
        out = await sctx.optimize(messages, stage=stage, **self.meta_sampling)
        messages.append({"role": "assistant", "content": out[0].text})
        return parse_agent(out[0].text)

    async def search(self, sctx: SearchContext) -> SearchResult:
        bench, domain = sctx.benchmark_name, sctx.domain
        pset = PROMPTS["sets"][self.prompts or prompt_set(bench, domain)]
        answer = self._answer_description(bench, domain)
        base = adapt_base(pset["base"], bench, sctx.example_problem() if bench in LABELS else None)
        st = sctx.resume() or {"archive": [], "evals": [], "initial": 0, "generation": 0, "history": []}
        seeds = self.seeds(pset)
        while st["initial"] < len(seeds):  # the initial archive, each evaluated once
            sol = copy.deepcopy(seeds[st["initial"]])
            res = await self.evaluate(sctx, sol["code"], f"initial_{st['initial']}", answer)
            sol["generation"] = "initial"
            sol["fitness"] = res["fitness"]
            st["archive"].append(sol)
            st["evals"].append({k: res[k] for k in ("mean", "median", "n", "workflow_failures", "dirs")})
            st["history"].append({"generation": "initial", "name": sol["name"], "fitness": res["fitness"],
                                  "median": res["median"], "mean": res["mean"], "status": "ok"})
            st["initial"] += 1
            sctx.checkpoint(st)
        while st["generation"] < self.generations:
            n = st["generation"]
            archive_str = "[" + ",\n".join(json.dumps(s) for s in st["archive"]) + "]"
            user = base.replace("[ARCHIVE]", archive_str).replace("[EXAMPLE]", json.dumps(pset["example"]))
            messages = [{"role": "system", "content": pset["system_prompt"]}, {"role": "user", "content": user}]
            prev = st["archive"][-1] if n > 0 else None
            r1 = pset["reflexion_1"].replace("[EXAMPLE]", "Here is the previous agent you tried:\n"
                                             + json.dumps(prev) + "\n\n" if prev else "")
            entry: dict[str, Any] = {"generation": n + 1, "status": "no_candidate"}
            sol = await self._meta(sctx, messages, f"generation_{n + 1}_propose")
            for i, reflect in enumerate((r1, pset["reflexion_2"]), 1):
                if sol is None:
                    break
                messages[-1] = {"role": "assistant", "content": str(sol)}  # released: str(dict) of the reply
                messages.append({"role": "user", "content": reflect})
                sol = await self._meta(sctx, messages, f"generation_{n + 1}_reflect_{i}")
            kept: tuple[dict[str, Any], dict[str, Any]] | None = None
            tries = []
            for d in range(self.debug_max if sol is not None else 0):
                res = await self.evaluate(sctx, sol["code"], f"generation_{n + 1}/try_{d}", answer)
                crashed = (res["workflow_failures"] > 0 if self.debug_on == "any_failure"
                           else res["workflow_failures"] == res["n"])
                tries.append({"try": d, "mean": res["mean"], "workflow_failures": res["workflow_failures"]})
                if not crashed:
                    kept = (sol, res)
                if not crashed and res["mean"] >= self.min_accuracy:
                    break
                error = res["first_failure"] if crashed else "All 0 accuracy"
                if d == self.debug_max - 1:
                    break
                messages[-1] = {"role": "assistant", "content": str(sol)}
                messages.append({"role": "user", "content": DEBUG_MESSAGE.format(error=error)})
                fixed = await self._meta(sctx, messages, f"generation_{n + 1}_debug_{d + 1}")
                if fixed is None:
                    break
                sol = fixed
            if kept is not None:
                sol, res = kept
                sol = {k: v for k, v in sol.items() if k not in ("debug_thought", "reflection")}
                sol["fitness"] = res["fitness"]
                sol["generation"] = n + 1
                st["archive"].append(sol)
                st["evals"].append({k: res[k] for k in ("mean", "median", "n", "workflow_failures", "dirs")})
                entry.update(status="ok", name=sol.get("name"), fitness=res["fitness"], median=res["median"],
                             mean=res["mean"])
            elif sol is not None:
                entry.update(status="workflow_failed", name=sol.get("name"))
            entry["tries"] = tries
            st["history"].append(entry)
            st["generation"] = n + 1
            sctx.checkpoint(st)
            sctx.log(f"generation {n + 1}: {entry['status']} {entry.get('fitness', '')}")
        best_i = max(range(len(st["archive"])), key=lambda i: (st["evals"][i]["median"], st["evals"][i]["mean"], -i))
        best = st["archive"][best_i]
        return SearchResult(workflow=self.workflow_config(best["code"], answer),
                            validate_score=st["evals"][best_i]["mean"], history=st["history"],
                            extra={"best": {"name": best.get("name"), "generation": best.get("generation"),
                                            "fitness": best.get("fitness")},
                                   "archive": st["archive"], "prompt_set": self.prompts or prompt_set(bench, domain),
                                   "initial_archive": [a["name"] for a in seeds],
                                   "answer_description": answer})
