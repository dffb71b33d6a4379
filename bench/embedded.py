"""Embedded backbone: llama-server with parallel slots vs. today's single-slot Python server, and harness vs. bare.

Two measurements, same machine, one run:

1. **Wall ratio** (goal <= 0.7x): the real harness runs CoT-SC(5) on the first 10 GSM8K test problems
   (``python -m agentic_repro.harness.run method=cot_sc benchmark=gsm8k limit=10``, response cache off) twice:
   on llama-cpp-python's server (``backbone.server.impl=python``: one request at a time, no ``n``, 1 request
   in flight) and on llama.cpp's ``llama-server`` as shipped (``parallel`` slots, ``n`` choices per request).
   Same model, threads, sampling and ``max_tokens``; the wall time of each whole run (server start included)
   is compared, with completion tokens/s and the score as a sanity check.
2. **Harness vs. bare** (keep >= 0.9): on the llama-server, the same chat requests (temperature 0,
   ``max_tokens`` 128, sequential) through bare ``httpx`` and through the harness backbone
   (``LlamaServerBackbone.complete``, or plain ``AsyncOpenAI`` with ``--client openai``); passes alternate
   (bare, harness, harness, bare, ...) so that no request follows the identical prompt.

    python bench/embedded.py                              # both (needs `make install-python-server`)
    python bench/embedded.py --skip-runs                  # only harness vs. bare
    python bench/embedded.py --problems 4 --max-tokens 256 --json out.json

``measure(client_call, ...)`` is the reusable part: ``client_call`` is any
``async (messages, max_tokens) -> completion_tokens`` callable.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agentic_repro.harness.embedded.gguf import KNOWN_MODELS, ModelSpec, resolve_gguf
from agentic_repro.harness.embedded.server import ServerPool, choose_threads, external_url, served_models

ROOT = Path(__file__).resolve().parents[1]

ClientCall = Callable[[list[dict[str, str]], int], Awaitable[int]]

SYSTEM = "You are a helpful programming assistant. Answer in detail."
PROMPTS = [
    "Write a Python function that merges two sorted lists, with a docstring and three doctests.",
    "Explain step by step how binary search works and give an iterative implementation in Python.",
    "Write a Python class implementing an LRU cache with get and put, and explain its complexity.",
    "Describe the difference between a process and a thread, with a short Python example of each.",
]


def messages_for(prompt: str) -> list[dict[str, str]]:
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": prompt}]


async def measure(client_call: ClientCall, prompts: list[str] = PROMPTS, *,
                  max_tokens: int = 128) -> dict[str, Any]:
    """Send ``prompts`` sequentially through ``client_call``; tokens/s over the whole pass."""
    tokens, seconds = [], []
    for p in prompts:
        t0 = time.perf_counter()
        n = await client_call(messages_for(p), max_tokens)
        seconds.append(time.perf_counter() - t0)
        tokens.append(int(n))
    return {"tokens": sum(tokens), "seconds": sum(seconds), "per_request_tokens": tokens,
            "per_request_seconds": [round(s, 3) for s in seconds],
            "tokens_per_s": sum(tokens) / sum(seconds) if sum(seconds) else 0.0}


# --------------------------------------------------------------------------- the two clients


def bare_call(base_url: str, model: str) -> tuple[ClientCall, Callable[[], Awaitable[None]]]:
    import httpx

    client = httpx.AsyncClient(base_url=base_url, timeout=600)

    async def call(messages: list[dict[str, str]], max_tokens: int) -> int:
        r = await client.post("/v1/chat/completions", json={
            "model": model, "messages": messages, "temperature": 0, "max_tokens": max_tokens})
        r.raise_for_status()
        return int(r.json()["usage"]["completion_tokens"])

    return call, client.aclose


def harness_call(base_url: str, model: str) -> tuple[ClientCall, Callable[[], Awaitable[None]]]:
    from agentic_repro.harness.backbone import LlamaServerBackbone, RetryPolicy
    from agentic_repro.harness.ledger import Price

    bb = LlamaServerBackbone(name="local", model=model, base_url=f"{base_url}/v1", server_url=base_url,
                             api_key="local", price=Price(0.0, 0.0), max_concurrency=1,
                             retry=RetryPolicy(max_attempts=1, timeout_s=600))

    async def call(messages: list[dict[str, str]], max_tokens: int) -> int:
        res = await bb.complete(messages, {"temperature": 0.0, "max_tokens": max_tokens}, 1)
        return sum(c.completion_tokens for c in res.completions)

    return call, bb.aclose


def openai_call(base_url: str, model: str) -> tuple[ClientCall, Callable[[], Awaitable[None]]]:
    from openai import AsyncOpenAI

    client = AsyncOpenAI(base_url=f"{base_url}/v1", api_key="local", max_retries=0, timeout=600)

    async def call(messages: list[dict[str, str]], max_tokens: int) -> int:
        r = await client.chat.completions.create(model=model, messages=messages, temperature=0,
                                                 max_tokens=max_tokens)
        return int(r.usage.completion_tokens)

    return call, client.close


CLIENTS = {"harness": harness_call, "openai": openai_call}


# --------------------------------------------------------------------------- main


async def compare(base_url: str, model: str, *, client: str, rounds: int, max_tokens: int) -> dict[str, Any]:
    bare, close_bare = bare_call(base_url, model)
    other, close_other = CLIENTS[client](base_url, model)
    try:
        await bare(messages_for("Say OK."), 4)  # warm-up: first request pays one-off costs
        passes: dict[str, list[dict[str, Any]]] = {"bare": [], client: []}
        for r in range(rounds):
            order = [("bare", bare), (client, other)]
            if r % 2:
                order.reverse()
            for label, call in order:
                res = await measure(call, max_tokens=max_tokens)
                passes[label].append(res)
                print(f"  round {r + 1} {label:8s} {res['tokens']:4d} tok in {res['seconds']:6.2f} s "
                      f"= {res['tokens_per_s']:6.2f} tok/s", flush=True)
    finally:
        await close_bare()
        await close_other()

    def total(label: str) -> dict[str, float]:
        toks = sum(p["tokens"] for p in passes[label])
        secs = sum(p["seconds"] for p in passes[label])
        return {"tokens": toks, "seconds": round(secs, 3), "tokens_per_s": round(toks / secs, 3),
                "median_pass_tokens_per_s": round(statistics.median(p["tokens_per_s"] for p in passes[label]), 3)}

    b, h = total("bare"), total(client)
    return {"bare": b, client: h, "ratio": round(h["tokens_per_s"] / b["tokens_per_s"], 4), "passes": passes}


# --------------------------------------------------------------------------- 1. CoT-SC runs


SERVERS = {
    # today's: llama-cpp-python's server, one request at a time, samples as separate requests
    "python": ["backbone.server.impl=python", "backbone.server.parallel=1", "backbone.supports_n=false",
               "backbone.max_concurrency=1"],
    # as shipped: llama-server, parallel slots, n choices per request
    "llama-server": [],
}


def cot_sc_run(server: str, *, problems: int, max_tokens: int, threads: int, out: Path) -> dict[str, Any]:
    """One real harness run; wall time of the whole process, plus what metrics.json says."""
    overrides = ["method=cot_sc", "benchmark=gsm8k", f"limit={problems}", "backbone=local",
                 f"backbone.server.n_threads={threads}", f"sampling.max_tokens={max_tokens}",
                 f"backbone.sampling.max_tokens={max_tokens}", "cache.mode=off", "runner.progress=false",
                 f"results_root={out}", f"experiment=bench-embedded-{server}", *SERVERS[server]]
    load_before = os.getloadavg()[0]
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "agentic_repro.harness.run", *overrides], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        _, stderr = proc.communicate()
    finally:  # the bench interrupted: the run (and through it its server) stops too
        if proc.poll() is None:
            proc.terminate()
            proc.wait(30)
    wall = time.perf_counter() - t0
    load_after = os.getloadavg()[0]
    metrics_files = sorted(out.glob(f"bench-embedded-{server}/**/metrics.json"))
    if proc.returncode != 0 or not metrics_files:
        raise SystemExit(f"the {server} run failed (exit {proc.returncode}):\n{stderr[-3000:]}")
    m = json.loads(metrics_files[0].read_text())
    totals = m.get("totals") or {}
    toks = int(totals.get("completion_tokens") or 0)
    return {"server": server, "wall_s": round(wall, 2), "n": m.get("n"), "score": m.get("score"),
            "complete": m.get("complete"), "calls": totals.get("calls"), "completion_tokens": toks,
            "completion_tokens_per_s": round(toks / wall, 2) if wall else None, "overrides": overrides,
            "load_1min_before_after": [round(load_before, 2), round(load_after, 2)]}


# --------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="qwen2.5-coder-0.5b-instruct-q4_k_m", choices=sorted(KNOWN_MODELS))
    ap.add_argument("--gguf", help="use this GGUF file instead of a packaged model (harness vs. bare only)")
    ap.add_argument("--client", default="harness", choices=sorted(CLIENTS))
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--max-tokens", type=int, default=128, help="harness vs. bare: tokens per request")
    ap.add_argument("--problems", type=int, default=10, help="CoT-SC runs: GSM8K problems")
    ap.add_argument("--run-max-tokens", type=int, default=512, help="CoT-SC runs: max_tokens per sample")
    ap.add_argument("--skip-runs", action="store_true", help="only the harness vs. bare measurement")
    ap.add_argument("--n-ctx", type=int, default=4096)
    ap.add_argument("--n-threads", default="auto", help="llama.cpp threads for every server (default: the rule)")
    ap.add_argument("--log", default=".cache/bench_embedded_server.log")
    ap.add_argument("--json", help="also write the full result here")
    args = ap.parse_args(argv)
    threads = choose_threads(args.n_threads)
    load0 = os.getloadavg()
    print(f"machine: {os.cpu_count()} CPUs, load average {load0[0]:.2f} {load0[1]:.2f} {load0[2]:.2f}; "
          f"llama.cpp threads {threads}")
    result: dict[str, Any] = {"threads": threads, "load_before": load0}

    if not args.skip_runs:
        print(f"1. CoT-SC(5) on {args.problems} GSM8K problems, max_tokens {args.run_max_tokens}, cache off")
        with tempfile.TemporaryDirectory(prefix="bench-embedded-") as tmp:
            runs = {}
            for server in ("python", "llama-server"):
                r = cot_sc_run(server, problems=args.problems, max_tokens=args.run_max_tokens, threads=threads,
                               out=Path(tmp))
                runs[server] = r
                print(f"  {server:12s}: {r['wall_s']:7.1f} s wall, {r['calls']} calls, {r['completion_tokens']} "
                      f"completion tokens ({r['completion_tokens_per_s']} tok/s), score {r['score']}, "
                      f"complete {r['complete']}, load {r['load_1min_before_after']}", flush=True)
        ratio = runs["llama-server"]["wall_s"] / runs["python"]["wall_s"]
        verdict = "OK" if ratio <= 0.7 else "ABOVE GOAL"
        print(f"wall ratio llama-server/python = {ratio:.3f} (goal <= 0.7: {verdict})")
        result.update(runs=runs, wall_ratio=round(ratio, 4))

    spec = ModelSpec(name=Path(args.gguf).stem, path=args.gguf) if args.gguf else KNOWN_MODELS[args.model]
    alias = spec.name
    print("2. harness vs. bare on llama-server")
    with ServerPool() as pool:
        t0 = time.perf_counter()
        url = external_url()
        if url:
            alias = served_models(url)[0]
            print(f"using {url} (AGENTIC_REPRO_LOCAL_URL), model {alias}")
        else:
            path = resolve_gguf(spec)
            url = pool.get_or_start(path, log_path=args.log, n_ctx=args.n_ctx, n_threads=threads,
                                    model_alias=alias)
            print(f"started {url} for {path.name} in {time.perf_counter() - t0:.1f} s "
                  f"(n_ctx={args.n_ctx}, n_threads={threads}; log {args.log})")
        print(f"{len(PROMPTS)} prompts x {args.rounds} rounds, T=0, max_tokens={args.max_tokens}, sequential")
        res = asyncio.run(compare(url, alias, client=args.client, rounds=args.rounds, max_tokens=args.max_tokens))

    b, h = res["bare"], res[args.client]
    print(f"bare server : {b['tokens_per_s']:.2f} tok/s ({b['tokens']} tok / {b['seconds']:.1f} s)")
    print(f"{args.client:12s}: {h['tokens_per_s']:.2f} tok/s ({h['tokens']} tok / {h['seconds']:.1f} s)")
    verdict = "OK" if res["ratio"] >= 0.9 else "BELOW GOAL"
    print(f"ratio {args.client}/bare = {res['ratio']:.3f} (goal >= 0.9: {verdict})")
    load1 = os.getloadavg()
    print(f"load average after: {load1[0]:.2f} {load1[1]:.2f} {load1[2]:.2f}")
    result.update(harness_vs_bare=res, load_after=load1)
    if args.json:
        result["env"] = {"model": alias, "python": platform.python_version(), "cpus": os.cpu_count(),
                         "n_threads": threads, "n_ctx": args.n_ctx, "max_tokens": args.max_tokens}
        Path(args.json).write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
