"""Estimate what a target costs on a priced backbone from the ledger of runs already measured on another one.

    python -m agentic_repro.scripts.estimate_cost [results_root=results] [measured=local] [target=gpt-4o-mini]
        [experiment=table1] [batch=false] [caching=true]

For every (benchmark, method) measured under results/<experiment>/<benchmark>/<method>/<measured>/, the mean
prompt and completion tokens per problem (from metrics.json totals, i.e. calls.jsonl) are scaled to the paper
protocol's size (every problem of the configured split x the protocol's seeds) and priced with the SAME dated table
the runs bill with (configs/prices.yaml, harness/pricing.py) at the target's model:

- ``list $``: the papers' formula, input + output tokens at list price (what the releases report);
- ``billed $``: what the provider would charge: with ``caching=true``, the share of prompt tokens the provider's
  automatic prompt cache would serve, simulated on the measured runs' own prompts (OpenAI's rule: an exact prefix
  of an earlier prompt, >= 1,024 tokens, in 128-token steps; the prompts come from the response cache the runs
  wrote), priced at the cached-input rate; with ``batch=true``, the single-call methods (IO, CoT, CoT-SC: their
  calls are independent) at the Batch API's price.

An ESTIMATE: another model writes longer or shorter answers and tokenizes differently; cached replies count as
paid. Also prints the measured wall time per problem (on this machine) for the same runs.
"""
from __future__ import annotations

import bisect
import sys
from pathlib import Path
from typing import Any

import yaml

from agentic_repro.harness.pricing import Price, Usage
from agentic_repro.scripts.collect import RunIndex
from agentic_repro.scripts.render import Table, write_csv, write_tables
from agentic_repro.scripts.runs import CONFIGS, compose, load_experiment, parse_args

#: methods whose calls are independent of each other (one prompt, no step waits on another): a Batch API can run them
BATCHABLE = ("io", "cot", "cot_sc")
#: OpenAI's automatic prompt caching (platform.openai.com/docs/guides/prompt-caching): prefix >= 1,024 tokens,
#: hits in 128-token steps
CACHE_MIN_TOKENS, CACHE_STEP_TOKENS = 1024, 128
AUQ_NOTE = ("AUQ's agent prompt changes at character 94 of every step ('Prior to this step, you have already taken "
            "N step(s).'), so a provider's prefix cache serves none of it: AUQ rows are billed at full input price.")


def split_size(benchmark: str) -> int:
    from agentic_repro.evaluators.base import build_benchmark

    cfg = compose([f"benchmark={benchmark}"])["benchmark"]
    problems, _ = build_benchmark(cfg).load()
    return len(problems)


def cached_tokens(prompt_chars: int, lcp_chars: int, prompt_tokens: int) -> int:
    """Tokens of a prompt the provider's cache serves when its first ``lcp_chars`` characters were sent before."""
    if prompt_chars <= 0 or prompt_tokens <= 0:
        return 0
    shared = int(prompt_tokens * lcp_chars / prompt_chars)
    if shared < CACHE_MIN_TOKENS:
        return 0
    return min(prompt_tokens, CACHE_MIN_TOKENS + (shared - CACHE_MIN_TOKENS) // CACHE_STEP_TOKENS * CACHE_STEP_TOKENS)


def prompt_text(messages: list[dict[str, Any]]) -> str:
    return "".join(f"<{m.get('role')}>{m.get('content')}\n" for m in messages)


def _lcp(a: str, b: str) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def simulate_prompt_cache(calls: list[dict[str, Any]], prompts: dict[str, str]) -> tuple[int, int, int]:
    """(prompt tokens, of them cacheable, calls whose prompt was found) over ``calls`` in time order: each prompt's
    longest common prefix with any earlier prompt (its neighbours in sorted order hold the longest)."""
    seen: list[str] = []
    total = cacheable = found = 0
    for c in sorted(calls, key=lambda c: c.get("time") or 0):
        if c.get("error"):
            continue
        total += int(c.get("prompt_tokens") or 0)
        text = prompts.get(str(c.get("key")))
        if text is None:
            continue
        found += 1
        i = bisect.bisect_left(seen, text)
        lcp = max((_lcp(text, seen[j]) for j in (i - 1, i) if 0 <= j < len(seen)), default=0)
        cacheable += cached_tokens(len(text), lcp, int(c.get("prompt_tokens") or 0))
        bisect.insort(seen, text)
    return total, cacheable, found


def run_prompts(run: Any, cache_path: Path | None) -> dict[str, str]:
    """Cache key -> prompt text of the run's calls, from the response cache the run wrote (its config's
    cache.path unless ``cache_path`` is given); empty when that cache is gone."""
    from agentic_repro.harness.cache import ResponseCache

    path = cache_path
    if path is None:
        cfg_file = run.dir / "config.yaml"
        cfg = yaml.safe_load(cfg_file.read_text(encoding="utf-8")) if cfg_file.exists() else {}
        path = Path(((cfg or {}).get("cache") or {}).get("path") or ".cache/responses.sqlite")
    if not path.exists():
        return {}
    cache = ResponseCache(path, "read-only")
    try:
        out = {}
        for c in run.calls():
            key = c.get("key")
            if key and key not in out:
                hit = cache.get(key)
                if hit and hit.get("messages"):
                    out[key] = prompt_text(hit["messages"])
        return out
    finally:
        cache.close()


def main(argv: list[str] | None = None) -> int:
    opts, rest = parse_args(list(sys.argv[1:] if argv is None else argv),
                            {"results_root": "results", "measured": "local", "target": "gpt-4o-mini",
                             "experiment": "table1", "batch": "false", "caching": "true", "cache": ""})
    if rest:
        raise SystemExit(f"unknown arguments {rest}")
    root = Path(opts["results_root"])
    batch, caching = opts["batch"].lower() == "true", opts["caching"].lower() == "true"
    cache_path = Path(opts["cache"]) if opts["cache"] else None
    exp = load_experiment("table1")
    seeds = len(exp["protocols"]["paper"]["seeds"])
    target_cfg = yaml.safe_load((CONFIGS / "backbone" / f"{opts['target']}.yaml").read_text())
    price = Price.from_config(target_cfg.get("price"), opts["target"], model=target_cfg.get("model"))
    order = [r["method"] for r in exp["rows"]]
    index = RunIndex.scan(root, opts["experiment"])
    methods = sorted(index.methods(), key=lambda m: (order.index(m) if m in order else 99, m))
    t = Table(f"Estimated cost of the paper protocol on {opts['target']} (from {opts['measured']} ledgers): "
              "billed $ per cell",
              ["Method", *[exp["benchmark_labels"][b] for b in exp["benchmarks"]], "Total billed $", "Total list $",
               "Calls/problem"])
    recs, sizes, grand, grand_list, unsimulated = [], {}, 0.0, 0.0, []
    for m in methods:
        row, total, total_list, calls_pp = [m], 0.0, 0.0, []
        tier = "batch" if batch and m in BATCHABLE else "standard"
        for b in exp["benchmarks"]:
            agg = index.agg(b, m, opts["measured"])
            n = sum(r.n for r in agg.scored)
            if not n:
                row.append("—")
                continue
            if b not in sizes:
                sizes[b] = split_size(b)
            ptok = sum(r.totals("prompt_tokens") for r in agg.scored) / n
            ctok = sum(r.totals("completion_tokens") for r in agg.scored) / n
            share = 0.0
            if caching:
                tot = cacheable = found = calls = 0
                for r in agg.scored:
                    rc = r.calls()
                    a, c_, f = simulate_prompt_cache(rc, run_prompts(r, cache_path))
                    tot, cacheable, found, calls = tot + a, cacheable + c_, found + f, calls + len(rc)
                share = cacheable / tot if tot else 0.0
                if calls and found < calls:
                    unsimulated.append(f"{m}/{b} ({found}/{calls} prompts in the response cache)")
            scale = sizes[b] * seeds
            usage = Usage(round(ptok * scale), round(ctok * scale), cached_tokens=round(ptok * scale * share))
            usd_list, usd = price.list_cost(usage), price.bill(usage, tier)
            wall = sum(float((r.metrics.get("this_invocation") or {}).get("wall_s") or 0) for r in agg.scored) / n
            calls_pp.append(sum(r.totals("calls") for r in agg.scored) / n)
            total += usd
            total_list += usd_list
            row.append(f"${usd:.2f}")
            recs.append({"method": m, "benchmark": b, "measured_problems": n, "prompt_tokens_per_problem": round(ptok),
                         "completion_tokens_per_problem": round(ctok), "cacheable_prompt_share": round(share, 4),
                         "tier": tier, "paper_problems": sizes[b], "seeds": seeds, "usd_list": round(usd_list, 6),
                         "usd_billed": round(usd, 6), "measured_wall_s_per_problem": round(wall, 1)})
        grand += total
        grand_list += total_list
        row += [f"${total:.2f}", f"${total_list:.2f}", f"{sum(calls_pp) / len(calls_pp):.1f}" if calls_pp else "—"]
        t.rows.append(row)
    std = price.rates("standard")
    t.notes = [f"Paper protocol sizes: {', '.join(f'{b}={n}' for b, n in sizes.items())} problems x {seeds} seeds. "
               f"Price: {price.model or opts['target']} from the dated table (configs/prices.yaml, "
               f"{price.source or price.origin}, checked {price.checked or '—'}): ${std.input}/1M input, "
               f"${std.cached_input if std.cached_input is not None else std.input}/1M cached input, "
               f"${std.output}/1M output. Grand total billed ≈ ${grand:.2f} (list price ≈ ${grand_list:.2f}). "
               f"An estimate: token counts measured on {opts['measured']}.",
               "Billed $ (the cells, 'Total billed $'): what the provider would charge"
               + (", with the prompt-cache share simulated on the runs' own prompts (OpenAI's rule: exact prefix "
                  ">= 1,024 tokens, 128-token steps) at the cached-input rate" if caching else ", no prompt caching")
               + (f"; {', '.join(BATCHABLE)} at the Batch API price" if batch else "; no Batch API")
               + ". List $ ('Total list $'): the papers' formula, input + output at list price."]
    if caching and any(m.startswith("auq") for m in methods):
        t.notes.append(AUQ_NOTE)
    if unsimulated:
        t.notes.append("Prompt cache not simulated for prompts missing from the response cache (billed at full "
                       f"input price): {'; '.join(unsimulated)}.")
    out = root / opts["experiment"]
    write_tables(out / f"cost-estimate-{opts['target']}", [t])
    write_csv(out / f"cost-estimate-{opts['target']}.csv", recs, list(recs[0]) if recs else ["method"])
    print(t.to_markdown())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
