"""Estimated paper-protocol search + test cost of a searched method, from calls counted with the scripted backbone
(harness/scripted.py).

    python -m agentic_repro.baselines.autoflow.estimate method=aflow|adas|judgeflow benchmark=gsm8k [optimizer_price=3,15]
        [executor_price=0.15,0.6]

Runs the method's real search loop (its prompts, selection, operators, sandbox) at the paper's round count
with a scripted double: the optimiser always proposes a representative workflow under a new name (AFlow:
``SHAPES``, by default three ``Custom`` solutions + ``ScEnsemble``; ADAS: ``ADAS_AGENT``, 5 CoT agents + a
final decision; JudgeFlow: the blamed block becomes a 3-way ensemble), the executor answers with
``reply_words`` words, the optimiser with ``optimizer_words``. Each round is evaluated once on ONE validate problem; the
counted tokens are scaled to the whole validate split x ``validate_runs``. Tokens are words x 1.4 (the
README's rule for Table 1). Test cost: the frozen workflow's tokens per problem x the test split x 3 seeds.

An ESTIMATE: real optimisers write other workflows (often longer ones), real executors other lengths.
"""
from __future__ import annotations

import asyncio
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from agentic_repro.harness.results import read_jsonl_tolerant

TOKENS_PER_WORD = 1.4
#: the paper's optimiser, USD per 1M input/output tokens: AFlow claude-3-5-sonnet (run.py) $3/$15; ADAS
#: gpt-4o-2024-05-13 (search.py --model) $5/$15; JudgeFlow: ours, as AFlow. Executor: gpt-4o-mini $0.15/$0.60.
OPTIMIZER_PRICES = {"aflow": "3,15", "adas": "5,15", "judgeflow": "3,15"}
SHAPES = {
    "ensemble3": '''import asyncio
class Workflow:
    def __init__(self, name: str, llm_config, dataset: DatasetType) -> None:
        self.llm = create_llm_instance(llm_config)
        self.dataset = dataset
        self.custom = operator.Custom(self.llm)
        self.sc_ensemble = operator.ScEnsemble(self.llm)

    async def __call__(self, problem: str, *rest):
        sols = await asyncio.gather(*[self.custom(input=problem, instruction=prompt_custom.SOLVE_PROMPT)
                                      for _ in range(3)])
        # DROP/HotpotQA's released ScEnsemble takes the solutions only (their operator.json interface)
        extra = {} if self.dataset in ("DROP", "HotpotQA") else {"problem": problem}
        best = await self.sc_ensemble(solutions=[s["response"] for s in sols], **extra)
        return best["response"], self.llm.get_usage_summary()["total_cost"]
''',
}
SHAPE_PROMPT = 'SOLVE_PROMPT = """Solve the problem step by step and give the final answer at the end."""\n'
#: ADAS: a representative discovered agent (CoT-SC shape: 5 CoT agents + a final decision agent, 6 calls)
ADAS_AGENT = """def forward(self, taskInfo):
    cot = [LLMAgentBase(['thinking', 'answer'], 'CoT Agent', temperature=0.8) for _ in range(5)]
    final = LLMAgentBase(['thinking', 'answer'], 'Final Decision Agent', temperature=0.1)
    infos = []
    for agent in cot:
        thinking, answer = agent([taskInfo], 'Please think step by step and then solve the task.')
        infos.extend([thinking, answer])
    thinking, answer = final([taskInfo] + infos, 'Given all the above solutions, reason over them carefully and provide a final answer.')
    return answer
"""
#: JudgeFlow: the blamed block becomes an ensemble of 3 (4 calls)
JF_BLOCKS = [{"type": "seq", "description": "ensemble", "operators": [{"op": "ScEnsemble", "n": 3,
                                                                          "instruction": "Solve step by step. "}]}]


class EstimateScript:
    def __init__(self, shape: str, reply_words: int, optimizer_words: int) -> None:
        self.graph = SHAPES[shape]
        self.reply_words, self.optimizer_words = reply_words, optimizer_words
        self.proposals = 0

    def __call__(self, messages: list[dict[str, str]], sampling: dict[str, Any]) -> str:
        text = messages[-1]["content"]
        idea = " ".join(["idea"] * self.optimizer_words)
        if len(messages) > 1 and "expert machine learning researcher" in messages[1]["content"]:
            self.proposals += 1  # ADAS meta agent
            return json.dumps({"reflection": idea, "thought": idea, "name": f"Agent {self.proposals}",
                               "code": ADAS_AGENT})
        if text.startswith("You are the judge"):
            return json.dumps({"ranking": ["B1"], "reason": " ".join(["reason"] * 60)})
        if text.startswith("You are optimising an agentic workflow"):
            self.proposals += 1
            return json.dumps({"modification": f"modification {self.proposals} " + idea, "blocks": JF_BLOCKS})
        if messages[0]["role"] == "system" and "JSON format" in messages[0]["content"]:  # ADAS LLMAgentBase
            return json.dumps({"thinking": " ".join(["step"] * self.reply_words), "answer": "0"})
        if "You are building a Graph" in text or "<modification>" in text:
            self.proposals += 1
            idea = " ".join(["idea"] * max(0, self.optimizer_words - len(self.graph.split())))
            return (f"{idea}\n<modification>modification {self.proposals}</modification>\n<graph>{self.graph}</graph>"
                    f"\n<prompt>{SHAPE_PROMPT}</prompt>")
        filler = " ".join(["step"] * self.reply_words)
        if "solution_letter" in text:
            return f"<thought>{filler}</thought>\n<solution_letter>A</solution_letter>"
        return f"{filler}\nThe answer is 0. \\boxed{{0}}"


def _price(text: str) -> tuple[float, float]:
    a, b = (float(x) for x in text.split(","))
    return a, b


def estimate(overrides: list[str], *, shape: str = "ensemble3", reply_words: int = 215, optimizer_words: int = 700,
             optimizer_price: tuple[float, float] = (3.0, 15.0),
             executor_price: tuple[float, float] = (0.15, 0.6)) -> dict[str, Any]:
    from agentic_repro.baselines.autoflow.search import run_search, search_dir
    from agentic_repro.harness.benchmark import build_benchmark
    from agentic_repro.harness.runner import spec_from_config
    from agentic_repro.harness.compose import compose
    from agentic_repro.harness.scripted import ScriptedBackbone

    tmp = Path(tempfile.mkdtemp(prefix="autoflow-estimate-"))
    cfg = compose([*overrides, f"results_root={tmp}", "cache.mode=off", "runner.progress=false"])
    params = cfg["method"]["search"]["params"]
    optimiser = cfg["method"]["search"]["optimiser"]
    bench = dict(cfg["benchmark"])
    n_validate = len(build_benchmark({**bench, "split": cfg["method"]["search"].get("split", "validate"),
                                      "limit": None}).load()[0])
    judge_factor = 1.0
    if optimiser.endswith(":ADAS"):  # one question per candidate; scaled to valid_size x n_repeat
        paper_runs = int(params.get("n_repeat", 1))
        n_validate = min(n_validate, int(params.get("valid_size") or n_validate))
        params.update(n_repeat=1, valid_size=1, min_accuracy=0.0)  # no debug rounds (a real agent scores > 1 %)
    else:
        paper_runs = int(params.get("validate_runs", 1))
        params.update(validate_runs=1, validate_limit=1)
        if "check_convergence" in params:
            params["check_convergence"] = False
        if "judge_samples" in params:  # one failure judged per parent here; judge_samples at the paper size
            judge_factor = float(params["judge_samples"])
    try:
        n_test: int | None = len(build_benchmark({**bench, "split": "test", "limit": None}).load()[0])
    except ValueError:  # no test split shipped (HotpotQA)
        n_test = None
    spec = spec_from_config(cfg)
    doc = asyncio.run(run_search(spec, backbone=ScriptedBackbone(EstimateScript(shape, reply_words,
                                                                                optimizer_words))))
    out = search_dir(spec, cfg["method"]["search"])
    opt = [r for r in read_jsonl_tolerant(out / "optimizer" / "calls.jsonl")]
    weight = [judge_factor if str(r["stage"]).startswith("judge") else 1.0 for r in opt]
    opt_p = sum(r["prompt_tokens"] * w for r, w in zip(opt, weight)) * TOKENS_PER_WORD
    opt_c = sum(r["completion_tokens"] * w for r, w in zip(opt, weight)) * TOKENS_PER_WORD
    exe_p = exe_c = 0.0
    calls = 0
    last_pp = (0.0, 0.0, 0)
    evals = sorted((out / "evals").rglob("calls.jsonl"), key=lambda p: p.stat().st_mtime)
    for path in evals:  # each validate run of one question, in the order they ran
        rows = read_jsonl_tolerant(path)
        n = max(1, len({r["problem_id"] for r in rows}))
        p = sum(r["prompt_tokens"] for r in rows) * TOKENS_PER_WORD
        c = sum(r["completion_tokens"] for r in rows) * TOKENS_PER_WORD
        scale = n_validate * paper_runs / n
        exe_p, exe_c, calls = exe_p + p * scale, exe_c + c * scale, calls + len(rows) * scale
        last_pp = (p / n, c / n, len(rows) / n)  # the last candidate's cost per test problem
    usd_opt = (opt_p * optimizer_price[0] + opt_c * optimizer_price[1]) / 1e6
    usd_exe = (exe_p * executor_price[0] + exe_c * executor_price[1]) / 1e6
    test_p, test_c = last_pp[0] * (n_test or 0) * 3, last_pp[1] * (n_test or 0) * 3
    usd_test = (test_p * executor_price[0] + test_c * executor_price[1]) / 1e6
    return {"method": spec.method_cfg["name"], "benchmark": spec.benchmark_cfg["name"], "shape": shape,
            "rounds": len(doc["history"]), "validate_problems": n_validate, "validate_runs": paper_runs,
            "search": {"optimizer": {"calls": round(sum(weight)), "prompt_tokens": round(opt_p), "completion_tokens": round(opt_c),
                                     "usd": round(usd_opt, 2), "price_per_1m": optimizer_price},
                       "executor": {"calls": round(calls), "prompt_tokens": round(exe_p),
                                    "completion_tokens": round(exe_c), "usd": round(usd_exe, 2),
                                    "price_per_1m": executor_price}},
            "test": {"problems": n_test, "seeds": 3, "calls_per_problem": last_pp[2],
                     "prompt_tokens": round(test_p), "completion_tokens": round(test_c), "usd": round(usd_test, 2)},
            "assumptions": {"tokens_per_word": TOKENS_PER_WORD, "executor_reply_words": reply_words,
                            "optimizer_reply_words": optimizer_words}}


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    opts = {"shape": "ensemble3", "optimizer_price": "", "executor_price": "0.15,0.6"}
    rest = []
    for a in args:
        k, _, v = a.partition("=")
        if k in opts:
            opts[k] = v
        else:
            rest.append(a)
    method = next((a.split("=", 1)[1] for a in rest if a.startswith("method=")), "aflow")
    price = opts["optimizer_price"] or OPTIMIZER_PRICES.get(method, "3,15")
    res = estimate(rest, shape=opts["shape"], optimizer_price=_price(price),
                   executor_price=_price(opts["executor_price"]))
    print(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
