"""How close DyFlow's designer SFT examples come to D.2's 2,048-token cutoff, before any self-play run exists.

    python -m agentic_repro.dyflow.train.cutoff [benchmarks=math_l5,pubmedqa,livebench] [max_length=2048] [base=local]

Renders the stage-1 design prompt (the released DESIGN_STAGE_PROMPT with the task as run_dataset.py builds it and
the first-stage summary) of every train problem of the SFT benchmarks, with a two-operator stage in the released JSON
format as the reply, and counts by :func:`agentic_repro.training.cutoff.measure` how many the cutoff cuts; later stages add the
summaries z_1..z_t, so it also prints how many would pass the cutoff with that many more prompt tokens. A lower
bound on what a real SFT set meets (its own counts print when it is trained: ``agentic_repro.training.train``).
"""
from __future__ import annotations

import json
import sys
from types import SimpleNamespace
from typing import Any
from collections.abc import Sequence

# a released-format reply (StageGraph.to_designer's shape): the length of a typical two-operator stage
REPLY = {"stage_id": "stage_1", "description": "Plan the solution, then answer it.",
         "operators": [{"operator_id": "op_1", "template": "GENERATE_PLAN",
                        "instruction": "Break the problem into steps and identify what is asked.",
                        "input_keys": ["original_problem"], "output_key": "act_1"},
                       {"operator_id": "op_2", "template": "GENERATE_ANSWER",
                        "instruction": "Follow the plan and give the final answer in the required format.",
                        "input_keys": ["original_problem", "act_1"], "output_key": "act_2"}]}


def stage1_rows(benchmark: str) -> list[dict[str, Any]]:
    """Conversational SFT rows (stage-1 design prompt -> REPLY) for every train problem of ``benchmark``."""
    from agentic_repro.dyflow import prompts as P
    from agentic_repro.dyflow.config import Options
    from agentic_repro.dyflow.method import task_text
    from agentic_repro.harness.benchmark import build_benchmark
    from agentic_repro.harness.compose import compose

    bench = build_benchmark(compose([f"benchmark={benchmark}", "method=dyflow", "benchmark.split=train"])["benchmark"])
    problems, _ = bench.load()
    opts = Options.build({})
    reply = "```json\n" + json.dumps(REPLY, indent=2) + "\n```"
    return [{"prompt": [{"role": "user", "content": P.fill(
                P.DESIGN_STAGE_PROMPT, problem_description=task_text(SimpleNamespace(benchmark=bench, problem=p), opts),
                state_summary=P.FIRST_STAGE_SUMMARY)}],
             "completion": [{"role": "assistant", "content": reply}]} for p in problems]


def main(argv: Sequence[str] | None = None) -> int:
    from agentic_repro.harness.embedded.base_model import load_tokenizer, resolve_base
    from agentic_repro.training.cutoff import describe, encode, measure

    kv = dict(a.split("=", 1) for a in (sys.argv[1:] if argv is None else argv) if "=" in a)
    cutoff = int(kv.get("max_length", 2048))
    tok = load_tokenizer(resolve_base(kv.get("base", "local")))
    rows: list[dict[str, Any]] = []
    for b in kv.get("benchmarks", "math_l5,pubmedqa,livebench").split(","):
        got = stage1_rows(b)
        print(f"{b} train ({len(got)}): {describe(measure(tok, got, cutoff), 'llamafactory')}")
        rows += got
    lens = sorted(sum(map(len, encode(tok, r))) for r in rows)
    print(f"all ({len(rows)}): {describe(measure(tok, rows, cutoff), 'llamafactory')}; tokens median "
          f"{lens[len(lens) // 2]}, 90th percentile {lens[int(0.9 * len(lens))]}, max {lens[-1]}")
    for extra in (150, 300, 600):
        print(f"  with {extra} more prompt tokens (later stages' summaries): "
              f"{sum(1 for n in lens if n + extra > cutoff)} of {len(lens)} over {cutoff}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
