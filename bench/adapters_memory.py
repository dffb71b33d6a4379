"""LoRA adapters on the embedded base: serving memory with 0, 1 and 4 adapters, and the cost of switching.

Side by side in one run, on llama.cpp's ``llama-server`` with the shipped ``local`` server settings
(``configs/backbone/local.yaml``: slots, context per slot, threads by the rule):

* **memory**: peak resident memory (``VmHWM`` of the llama-server process, not its Python watcher) after start
  and one greedy request on the base and on every loaded adapter, for 0, 1 and 4 adapters. Goal: 4 adapters
  <= 1.1x the memory of 1 (llama.cpp keeps one base and small low-rank matrices per adapter).
* **switch latency**: on the 4-adapter server, the same prompt is sent again and again (``max_tokens`` 4):
  with the same adapter as the request before (the slot keeps its prompt cache) and with a different one
  (the slot discards its cache and re-reads the prompt). The difference is the per-request switch cost;
  this is why :func:`agentic_repro.harness.adapters.gather_by_adapter` runs calls adapter by adapter.
* **batching across adapters**: 4 concurrent requests on 4 different adapters vs. 4 on one adapter
  (requests on different adapters are never batched together).

The adapters are random LoRAs (r 8, alpha 16, q/v; the train helper's ``agentic_repro.training.fixtures.lora_gguf``) on the
real embedded base, built once (~30 s each, cached by content under ~/.cache/agentic-repro/fixtures).

    python bench/adapters_memory.py [--json out.json] [--parallel N] [--n-ctx N]
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agentic_repro.harness.embedded.gguf import KNOWN_MODELS, resolve_gguf
from agentic_repro.harness.embedded.server import LocalServer, choose_threads, lora_adapters

MODEL = "qwen2.5-coder-0.5b-instruct-q4_k_m"
PROMPT = ("You are reviewing a pull request for a Python library that parses configuration files. The change adds "
          "support for environment variable interpolation with a default value, written as ${NAME:-default}, and "
          "keeps the old ${NAME} form working. It also adds a strict mode that raises an error naming the file, "
          "the line and the variable when a variable is unset and has no default. List the three most important "
          "test cases the author should add, one line each.")


def _binary_pid(watcher_pid: int) -> int:
    """The llama-server process (the watcher's child)."""
    for _ in range(50):
        try:
            kids = Path(f"/proc/{watcher_pid}/task/{watcher_pid}/children").read_text().split()
        except OSError:
            kids = []
        if kids:
            return int(kids[0])
        time.sleep(0.1)
    raise RuntimeError(f"no llama-server child under pid {watcher_pid}")


def _mem_mib(pid: int) -> dict[str, float]:
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmHWM", "VmRSS"):
            out[key] = round(int(value.split()[0]) / 1024, 1)
    return out


async def _chat(client: Any, lora: list[dict[str, Any]] | None, max_tokens: int, prompt: str = PROMPT) -> tuple[float, int]:
    body: dict[str, Any] = {"model": MODEL, "messages": [{"role": "user", "content": prompt}], "temperature": 0,
                            "max_tokens": max_tokens}
    if lora is not None:
        body["lora"] = lora
    t0 = time.perf_counter()
    r = await client.post("/v1/chat/completions", json=body)
    r.raise_for_status()
    return time.perf_counter() - t0, int(r.json()["usage"]["completion_tokens"])


def _field(k: int, chosen: int | None) -> list[dict[str, Any]]:
    return [{"id": i, "scale": 1.0 if i == chosen else 0.0} for i in range(k)]


async def _exercise(url: str, k: int) -> None:
    import httpx

    async with httpx.AsyncClient(base_url=url, timeout=600) as c:
        await _chat(c, _field(k, None) if k else None, 8)
        for i in range(k):
            await _chat(c, _field(k, i), 8)


async def _switching(url: str, k: int, rounds: int) -> dict[str, Any]:
    import httpx

    same, switch = [], []
    async with httpx.AsyncClient(base_url=url, timeout=600) as c:
        await _chat(c, _field(k, 0), 4)
        current = 0
        for r in range(rounds):
            # same adapter as the previous request: the slot's prompt cache is reused
            same.append((await _chat(c, _field(k, current), 4))[0])
            current = (current + 1) % k
            switch.append((await _chat(c, _field(k, current), 4))[0])
    return {"same_adapter_s": round(statistics.median(same), 3), "switched_s": round(statistics.median(switch), 3),
            "switch_cost_s": round(statistics.median(switch) - statistics.median(same), 3), "rounds": rounds}


async def _concurrent(url: str, k: int, max_tokens: int) -> dict[str, Any]:
    import httpx

    out = {}
    async with httpx.AsyncClient(base_url=url, timeout=600) as c:
        for label, chosen in (("one_adapter", [0] * 4), ("four_adapters", list(range(4)))):
            prompts = [f"{PROMPT} (variant {label} {j})" for j in range(4)]
            t0 = time.perf_counter()
            res = await asyncio.gather(*(_chat(c, _field(k, a), max_tokens, p) for a, p in zip(chosen, prompts)))
            wall = time.perf_counter() - t0
            toks = sum(n for _, n in res)
            out[label] = {"tokens": toks, "wall_s": round(wall, 2), "tokens_per_s": round(toks / wall, 2)}
    return out


def server_settings(args: argparse.Namespace, note: str = "") -> tuple[int, int, int, tuple[float, ...], Path]:
    """(parallel, n_ctx, threads, load average, base GGUF) from ``configs/backbone/local.yaml`` unless
    ``--parallel``/``--n-ctx`` say otherwise; prints the machine line every memory bench starts with."""
    from agentic_repro.harness.compose import compose  # the shipped local config, resolved as a run would

    server_cfg = compose(["backbone=local"])["backbone"]["server"]
    parallel = args.parallel or int(server_cfg["parallel"])
    n_ctx = args.n_ctx or int(server_cfg["n_ctx"])
    threads = choose_threads(server_cfg.get("n_threads", "auto"))
    load0 = os.getloadavg()
    print(f"machine: {os.cpu_count()} CPUs, load average {load0[0]:.2f} {load0[1]:.2f} {load0[2]:.2f}; "
          f"llama-server parallel {parallel}, n_ctx {n_ctx} per slot, threads {threads}{note}")
    return parallel, n_ctx, threads, load0, resolve_gguf(KNOWN_MODELS[MODEL])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--parallel", type=int, default=None, help="slots (default: configs/backbone/local.yaml)")
    ap.add_argument("--n-ctx", type=int, default=None, help="context per slot (default: local.yaml)")
    ap.add_argument("--rounds", type=int, default=4, help="switch-latency rounds")
    ap.add_argument("--max-tokens", type=int, default=32, help="tokens per request of the concurrency pass")
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    parallel, n_ctx, threads, load0, base = server_settings(args)

    from agentic_repro.training.fixtures import lora_gguf

    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench-adapters-") as tmp:
        adapters = [lora_gguf("local", tmp, seed=s, name=f"adapter{s}") for s in range(1, 5)]
        print(f"4 random LoRA adapters (r 8, q/v) on the embedded base ready in {time.perf_counter() - t0:.1f} s "
              f"({adapters[0].stat().st_size / 2**20:.1f} MiB each)")
        rows, result = [], {"parallel": parallel, "n_ctx": n_ctx, "threads": threads, "load_before": load0}
        for k in (0, 1, 4):
            with LocalServer() as srv:
                url = srv.start(base, log_path=Path(tmp) / f"server-{k}.log", n_ctx=n_ctx, n_threads=threads,
                                model_alias=MODEL, parallel=parallel, lora=adapters[:k])
                pid = _binary_pid(srv.pid)  # type: ignore[arg-type]
                after_start = _mem_mib(pid)
                assert len(lora_adapters(url)) == k
                asyncio.run(_exercise(url, k))
                mem = _mem_mib(pid)
                row: dict[str, Any] = {"adapters": k, "peak_rss_mib": mem["VmHWM"], "rss_mib": mem["VmRSS"],
                                       "rss_after_start_mib": after_start["VmRSS"]}
                if k == 4:
                    row["switch"] = asyncio.run(_switching(url, k, args.rounds))
                    row["concurrent"] = asyncio.run(_concurrent(url, k, args.max_tokens))
                rows.append(row)
                print(f"  {k} adapters: peak RSS {row['peak_rss_mib']:7.1f} MiB, RSS {row['rss_mib']:7.1f} MiB "
                      f"(after start {row['rss_after_start_mib']:.1f})", flush=True)
    by = {r["adapters"]: r for r in rows}
    ratio = by[4]["peak_rss_mib"] / by[1]["peak_rss_mib"]
    print(f"peak memory 4 adapters / 1 adapter = {ratio:.3f} (goal <= 1.1: {'OK' if ratio <= 1.1 else 'ABOVE GOAL'}); "
          f"1 / 0 = {by[1]['peak_rss_mib'] / by[0]['peak_rss_mib']:.3f}")
    sw = by[4]["switch"]
    print(f"switch latency ({len(PROMPT.split())}-word prompt, max_tokens 4, median of {sw['rounds']}): same adapter "
          f"{sw['same_adapter_s']:.3f} s, switched {sw['switched_s']:.3f} s, cost {sw['switch_cost_s']:+.3f} s per switch")
    cc = by[4]["concurrent"]
    print(f"4 concurrent requests: one adapter {cc['one_adapter']['tokens_per_s']} tok/s, four adapters "
          f"{cc['four_adapters']['tokens_per_s']} tok/s")
    load1 = os.getloadavg()
    print(f"load average after: {load1[0]:.2f} {load1[1]:.2f} {load1[2]:.2f}")
    result.update(rows=rows, ratio_4_over_1=round(ratio, 4), load_after=load1)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
