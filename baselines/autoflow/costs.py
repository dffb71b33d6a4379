"""Search cost and inference cost of a searched method, apart (DyFlow Table 8's layout).

    python -m agentic_repro.baselines.autoflow.costs results/<experiment>/<benchmark>/<method>/<backbone>/seed=<s> [...]

For each test run of a searched method (its trace names the artifact it ran), one row: the search ("training")
prompt/completion tokens and $ from the artifact's ``search_cost`` (every ledger of the search: optimiser and
validate runs), the inference prompt/completion tokens and $ from the run's own ``metrics.json`` (its
``calls.jsonl``), and the test score.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from agentic_repro.harness.results import read_jsonl_tolerant

from agentic_repro.baselines.autoflow.artifact import load_artifact

COLUMNS = ["method", "benchmark", "search_prompt_tokens", "search_completion_tokens", "search_usd",
           "inference_prompt_tokens", "inference_completion_tokens", "inference_usd", "score_pct", "n"]


def cost_row(run_dir: str | Path) -> dict[str, Any]:
    run = Path(run_dir)
    metrics = json.loads((run / "metrics.json").read_text(encoding="utf-8"))
    preds = read_jsonl_tolerant(run / "predictions.jsonl")
    paths = {(p.get("trace") or {}).get("artifact", {}).get("path") for p in preds} - {None}
    if len(paths) != 1:
        raise ValueError(f"{run}: not a run of one frozen workflow (artifacts named: {sorted(paths)})")
    art = load_artifact(next(iter(paths)))
    search = art["search_cost"]["total"]
    tot = metrics["totals"]
    return {"method": art["method"], "benchmark": art["benchmark"],
            "search_prompt_tokens": search["prompt_tokens"], "search_completion_tokens": search["completion_tokens"],
            "search_usd": round(search["cost_usd"], 6), "search_by_role": art["search_cost"]["by_role"],
            "inference_prompt_tokens": tot["prompt_tokens"], "inference_completion_tokens": tot["completion_tokens"],
            "inference_usd": round(tot["cost_usd"], 6), "score_pct": round(100 * metrics["score"], 2),
            "n": metrics["n"], "artifact_sha256": art["sha256"]}


def to_markdown(rows: list[dict[str, Any]]) -> str:
    head = ("| Method | Benchmark | Search prompt tok | Search completion tok | Search $ | Inference prompt tok | "
            "Inference completion tok | Inference $ | Score % (n) |")
    lines = [head, "|" + "---|" * 9]
    for r in rows:
        lines.append(f"| {r['method']} | {r['benchmark']} | {r['search_prompt_tokens']:,} | "
                     f"{r['search_completion_tokens']:,} | {r['search_usd']:.4f} | {r['inference_prompt_tokens']:,} | "
                     f"{r['inference_completion_tokens']:,} | {r['inference_usd']:.4f} | {r['score_pct']} ({r['n']}) |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    dirs = list(sys.argv[1:] if argv is None else argv)
    if not dirs:
        raise SystemExit(__doc__)
    print(to_markdown([cost_row(d) for d in dirs]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
