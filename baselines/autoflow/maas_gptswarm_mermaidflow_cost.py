"""Estimated paper-protocol search + test cost of MaAS, GPTSwarm and MermaidFlow, from calls counted with the
scripted double.

    python -m agentic_repro.baselines.autoflow.maas_gptswarm_mermaidflow_cost [benchmarks=gsm8k,math,...] [methods=maas,...]

Each method's real search loop runs at a tiny size on the scripted double (MaAS: 1 repetition over 8 validate
problems, untrained controller; GPTSwarm: 4 iterations of 4 problems, initial edges; MermaidFlow: 2 rounds on 1 validate problem, the optimiser always
proposing a representative graph: three Custom solutions + ScEnsemble), the executor answering ``reply_words``
words and the optimiser ``optimizer_words``. The counted calls and tokens (words x 1.4, the README's Table 1 rule)
per unit (one problem solved, one MermaidFlow round of optimiser calls) are scaled to the paper protocol:
MaAS validate x 4 repetitions; GPTSwarm 200 iterations x 4 problems; MermaidFlow 20 rounds x 2 validation runs
x validate, 19 optimiser rounds; test: split x 3 seeds. Priced at gpt-4o-mini ($0.15/$0.60 per 1M; MaAS and
MermaidFlow's READMEs use gpt-4o-mini for both roles). An ESTIMATE: trained controllers/edges and real optimisers
choose other (often larger) workflows, and real replies have other lengths.
"""
from __future__ import annotations

import asyncio
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

TOKENS_PER_WORD = 1.4
PRICE = (0.15, 0.60)
BENCHMARKS = ["gsm8k", "math", "mbpp", "humaneval", "hotpotqa", "drop"]
TEST_SEEDS = 3

GRAPH = """flowchart TD
    PROBLEM([Problem])
    C1["Custom<br/>(role: solve_1)"]
    C2["Custom<br/>(role: solve_2)"]
    C3["Custom<br/>(role: solve_3)"]
    ENSEMBLE["ScEnsemble<br/>"]
    RETURN([Return response & cost])
    class PROBLEM Interface
    class RETURN Interface
    class C1 CustomOp
    class C2 CustomOp
    class C3 CustomOp
    class ENSEMBLE ScEnSembleOp
    PROBLEM --> |input|C1
    PROBLEM --> |input|C2
    PROBLEM --> |input|C3
    C1 --> ENSEMBLE
    C2 --> ENSEMBLE
    C3 --> ENSEMBLE
    ENSEMBLE --> RETURN"""
PROMPTS = 'SOLVE_1="Solve step by step."\nSOLVE_2="Solve carefully."\nSOLVE_3="Check each step."'


class Script:
    def __init__(self, reply_words: int, optimizer_words: int) -> None:
        self.reply, self.opt, self.n = reply_words, optimizer_words, 0

    def __call__(self, messages: list[dict[str, str]], sampling: dict[str, Any]) -> str:
        p = messages[-1]["content"]
        idea = " ".join(["idea"] * self.opt)
        if "graph_candidates" in p:
            return f"<justification>{idea}</justification><selected_graph>A</selected_graph>"
        if "You are building a Graph" in p or "combining elements from two parent graphs" in p:
            self.n += 1
            body = "".join(f"<modification_{c}>change {self.n}{c}</modification_{c}><graph_{c}>{GRAPH}</graph_{c}>"
                           f"<prompt_{c}>{PROMPTS}</prompt_{c}>" for c in "ABCD")
            return idea + body
        filler = " ".join(["step"] * self.reply)
        if "solution_letter" in p:
            return f"<thought>{filler}</thought><solution_letter>A</solution_letter>"
        if "Define a function named `solve`" in p:
            return "```python\ndef solve():\n    return 0\n```"
        if "<thought>content</thought>" in p:
            return f"<thought>{filler}</thought><answer>0</answer>"
        return f"{filler}\nThe answer is 0. \\boxed{{0}}\n```python\ndef f():\n    return 0\n```"


TINY = {"maas": ["method.search.params.repetitions=1", "method.search.params.batch_size=4",
                 "method.search.params.validate_limit=8", "method.search.params.embedder=hash"],
        "gptswarm": ["method.search.params.num_iters=4", "method.search.params.batch_size=4",
                     "method.search.params.validate_limit=8"],
        "mermaidflow": ["method.search.params.rounds=2", "method.search.params.validation_rounds=1",
                        "method.search.params.validate_limit=1", "method.search.params.check_convergence=false"]}


def _tokens(rows: list[dict[str, Any]]) -> tuple[int, int, int]:
    return (len(rows), sum(int(r.get("prompt_tokens") or 0) for r in rows),
            sum(int(r.get("completion_tokens") or 0) for r in rows))


def estimate(method: str, benchmark: str, *, reply_words: int = 215, optimizer_words: int = 700) -> dict[str, Any]:
    from agentic_repro.baselines.autoflow.search import run_search, search_dir
    from agentic_repro.harness.benchmark import build_benchmark
    from agentic_repro.harness.results import read_jsonl_tolerant
    from agentic_repro.harness.runner import spec_from_config
    from agentic_repro.harness.compose import compose
    from agentic_repro.harness.scripted import ScriptedBackbone

    tmp = Path(tempfile.mkdtemp(prefix="flowgraph-estimate-"))
    cfg = compose([f"method={method}", f"benchmark={benchmark}", *TINY[method], f"results_root={tmp}",
                   "cache.mode=off", "runner.progress=false",
                   *(["benchmark.execute_code=true"] if benchmark in ("mbpp", "humaneval") else [])])
    search = cfg["method"]["search"]
    bench = dict(cfg["benchmark"])
    n_val = len(build_benchmark({**bench, "split": search.get("split", "validate"), "limit": None}).load()[0])
    n_test = len(build_benchmark({**bench, "limit": None}).load()[0])
    spec = spec_from_config(cfg)
    asyncio.run(run_search(spec, backbone=ScriptedBackbone(Script(reply_words, optimizer_words))))
    out = search_dir(spec, search)
    executor = [r for p in (out / "evals").rglob("calls.jsonl") for r in read_jsonl_tolerant(p)]
    optimizer = read_jsonl_tolerant(out / "optimizer" / "calls.jsonl") if (out / "optimizer" / "calls.jsonl").exists() \
        else []
    solves = sum(1 for p in (out / "evals").rglob("predictions.jsonl") for _ in read_jsonl_tolerant(p))
    ec, ep, eo = _tokens(executor)
    oc, op, oo = _tokens(optimizer)
    per_solve = (ec / solves, ep * TOKENS_PER_WORD / solves, eo * TOKENS_PER_WORD / solves)
    if method == "maas":
        paper_solves, opt_rounds, measured_opt_rounds = n_val * 4, 0, 1
    elif method == "gptswarm":
        paper_solves, opt_rounds, measured_opt_rounds = 200 * 4, 0, 1
    else:
        paper_solves, opt_rounds, measured_opt_rounds = 20 * 2 * n_val, 19, 1
    s_calls = per_solve[0] * paper_solves + (oc / measured_opt_rounds) * opt_rounds
    s_in = per_solve[1] * paper_solves + (op * TOKENS_PER_WORD / measured_opt_rounds) * opt_rounds
    s_out = per_solve[2] * paper_solves + (oo * TOKENS_PER_WORD / measured_opt_rounds) * opt_rounds
    t_solves = n_test * TEST_SEEDS
    usd = lambda i, o: (i * PRICE[0] + o * PRICE[1]) / 1e6
    return {"method": method, "benchmark": benchmark, "validate": n_val, "test": n_test,
            "calls_per_solve": round(per_solve[0], 2), "search_calls": round(s_calls),
            "search_prompt_tokens": round(s_in), "search_completion_tokens": round(s_out),
            "search_usd": round(usd(s_in, s_out), 2), "test_calls": round(per_solve[0] * t_solves),
            "test_usd": round(usd(per_solve[1] * t_solves, per_solve[2] * t_solves), 2),
            "optimizer_calls_per_round": oc / measured_opt_rounds if opt_rounds else 0}


def main(argv: list[str]) -> None:
    args = dict(a.split("=", 1) for a in argv if "=" in a)
    methods = args.get("methods", "maas,gptswarm,mermaidflow").split(",")
    benches = args.get("benchmarks", ",".join(BENCHMARKS)).split(",")
    rows = [estimate(m, b) for m in methods for b in benches]
    for r in rows:
        print(json.dumps(r))
    tot = {m: round(sum(r["search_usd"] + r["test_usd"] for r in rows if r["method"] == m), 2) for m in methods}
    print(json.dumps({"total_usd_search_plus_test": tot}))


if __name__ == "__main__":
    main(sys.argv[1:])
