"""DynaGraph's O(1) memory claim on the embedded base: one server with 1 vs 4 LoRA adapters (plan, rag, logic, expr)
vs three separately loaded model instances (the Multi-Agent 3x baseline), and the per-request adapter switch latency
in DynaGraph's call order (planner -> E_rag -> E_logic -> E_expr), side by side in one run, beside the paper's
16.6 GB vs > 49.5 GB (Fig. 6(a); RTX 5090, DeepSeek-8B bf16).

Wraps ``bench/adapters_memory.py`` (same base, server settings, random r-8 LoRAs and measurement helpers):

* **one base + adapters**: peak resident memory (VmHWM) and PSS of the llama-server process after start and one
  greedy request on the base and on every adapter, for 1 and 4 adapters;
* **three separate models**: three llama-server processes on the same base, alive together, each exercised once;
  the sum of their peak RSS (each process counts the weights it maps, as each GPU process holds its own copy)
  and of their PSS (shared file pages split between them: what the machine really spends on CPU, since llama.cpp
  mmaps one file);
* **switch latency**: the same prompt sent in DynaGraph's module order (every request switches adapter) vs the same
  number of requests on one adapter.

    python bench/dynagraph_memory.py [--json out.json] [--rounds 4]
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

# the script's own folder (bench/ is not part of the package)
from adapters_memory import MODEL, _binary_pid, _chat, _exercise, _field, _mem_mib, server_settings
from agentic_repro.harness.embedded.server import LocalServer, lora_adapters

PAPER = {"dynagraph_gb": 16.6, "multi_agent_3x_gb": 49.5, "note": "Fig. 6(a): DynaGraph ~16.6 GB peak GPU memory "
         "regardless of the expert pool; Multi-Agent (3x8B) > 49.5 GB (RTX 5090, DeepSeek-8B bf16)"}
MODULES = ["plan", "rag", "logic", "expr"]


def _pss_mib(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        return None
    return None


async def _module_order(url: str, k: int, rounds: int) -> dict[str, Any]:
    """Median latency of a request that switches adapter (DynaGraph's order) vs one that stays on adapter 0."""
    import httpx

    switched, same = [], []
    async with httpx.AsyncClient(base_url=url, timeout=600) as c:
        await _chat(c, _field(k, 0), 4)
        for _ in range(rounds):
            for i in range(1, k):
                switched.append((await _chat(c, _field(k, i), 4))[0])
            switched.append((await _chat(c, _field(k, 0), 4))[0])
        for _ in range(rounds * k):
            same.append((await _chat(c, _field(k, 0), 4))[0])
    s, m = statistics.median(switched), statistics.median(same)
    return {"switched_s": round(s, 3), "same_adapter_s": round(m, 3), "switch_cost_s": round(s - m, 3),
            "requests": len(switched)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--parallel", type=int, default=None)
    ap.add_argument("--n-ctx", type=int, default=None)
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    parallel, n_ctx, threads, load0, base = server_settings(args, note=f"; base {MODEL}")
    from agentic_repro.training.fixtures import lora_gguf

    out: dict[str, Any] = {"parallel": parallel, "n_ctx": n_ctx, "threads": threads, "load_before": load0,
                           "paper": PAPER}
    start_kw = dict(n_ctx=n_ctx, n_threads=threads, model_alias=MODEL, parallel=parallel)
    with tempfile.TemporaryDirectory(prefix="bench-dynagraph-") as tmp:
        adapters = [lora_gguf("local", tmp, seed=s, name=f"{MODULES[s - 1]}") for s in range(1, 5)]
        rows = {}
        for k in (1, 4):
            with LocalServer() as srv:
                url = srv.start(base, log_path=Path(tmp) / f"one-{k}.log", lora=adapters[:k], **start_kw)
                pid = _binary_pid(srv.pid)  # type: ignore[arg-type]
                assert len(lora_adapters(url)) == k
                asyncio.run(_exercise(url, k))
                mem = _mem_mib(pid)
                rows[k] = {"adapters": k, "peak_rss_mib": mem["VmHWM"], "rss_mib": mem["VmRSS"], "pss_mib": _pss_mib(pid)}
                if k == 4:
                    rows[k]["module_order"] = asyncio.run(_module_order(url, k, args.rounds))
            print(f"  one base + {k} adapter(s): peak RSS {rows[k]['peak_rss_mib']:.1f} MiB, PSS {rows[k]['pss_mib']} MiB",
                  flush=True)
        servers = [LocalServer() for _ in range(3)]
        try:
            sep = []
            for i, srv in enumerate(servers):
                url = srv.start(base, log_path=Path(tmp) / f"sep-{i}.log", **start_kw)
                asyncio.run(_exercise(url, 0))
                sep.append(_binary_pid(srv.pid))  # type: ignore[arg-type]
            mems = [_mem_mib(p) for p in sep]
            psss = [_pss_mib(p) for p in sep]
        finally:
            for srv in servers:
                srv.stop()
        three = {"instances": 3, "peak_rss_mib_each": [m["VmHWM"] for m in mems],
                 "peak_rss_mib_sum": round(sum(m["VmHWM"] for m in mems), 1),
                 "pss_mib_sum": round(sum(p or 0 for p in psss), 1)}
        print(f"  three separate models: peak RSS {three['peak_rss_mib_each']} MiB, sum {three['peak_rss_mib_sum']} "
              f"MiB, PSS sum {three['pss_mib_sum']} MiB", flush=True)
    r41 = rows[4]["peak_rss_mib"] / rows[1]["peak_rss_mib"]
    r3 = three["peak_rss_mib_sum"] / rows[4]["peak_rss_mib"]
    paper_r = PAPER["multi_agent_3x_gb"] / PAPER["dynagraph_gb"]
    mo = rows[4]["module_order"]
    print("\n| setting | ours: peak RSS (MiB) | ratio | paper (GB, GPU) | paper ratio |")
    print("|---|---|---|---|---|")
    print(f"| one base + 1 adapter | {rows[1]['peak_rss_mib']:.1f} | 1.000 | — | — |")
    print(f"| one base + 4 adapters (DynaGraph) | {rows[4]['peak_rss_mib']:.1f} | {r41:.3f} "
          f"(goal <= 1.1: {'OK' if r41 <= 1.1 else 'ABOVE GOAL'}) | {PAPER['dynagraph_gb']} | 1.00 |")
    print(f"| three separate models (Multi-Agent 3x) | {three['peak_rss_mib_sum']:.1f} (PSS {three['pss_mib_sum']:.1f}) "
          f"| {r3:.2f} x DynaGraph | > {PAPER['multi_agent_3x_gb']} | > {paper_r:.2f} x |")
    print(f"\nadapter switch in DynaGraph's module order ({mo['requests']} requests, max_tokens 4): switched "
          f"{mo['switched_s']:.3f} s vs same adapter {mo['same_adapter_s']:.3f} s median, {mo['switch_cost_s']:+.3f} s "
          f"per switch (paper: ~0.8 s adapter hot-loading per call on GPU)")
    load1 = os.getloadavg()
    print(f"load average after: {load1[0]:.2f} {load1[1]:.2f} {load1[2]:.2f}")
    out.update(one_base={str(k): v for k, v in rows.items()}, three_separate=three, ratio_4_over_1=round(r41, 4),
               ratio_three_over_dynagraph=round(r3, 3), load_after=load1)
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
