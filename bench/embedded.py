"""Embedded backbone throughput: the bare llama.cpp server vs. the harness client.

Both paths send the same chat requests (temperature 0, ``max_tokens`` 128,
sequential) to the same local server:

* bare:    ``httpx`` POST to ``/v1/chat/completions``;
* harness: ``harness.backbone.OpenAICompatibleBackbone.complete`` (the client
  every run uses), or plain ``AsyncOpenAI`` with ``--client openai``.

Throughput = completion tokens (server-reported usage) / wall time of the
requests. Passes alternate (bare, harness, harness, bare, ...) so that no
request ever follows the identical prompt (llama.cpp would reuse its KV
prefix and skip the prompt read). Goal: harness / bare >= 0.9.

    python bench/embedded.py                      # starts the default 0.5B server
    AGENTIC_REPRO_LOCAL_URL=http://127.0.0.1:PORT python bench/embedded.py
    python bench/embedded.py --gguf /path/model.gguf --rounds 3 --json out.json

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
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness.gguf_model import KNOWN_MODELS, ModelSpec, resolve_gguf  # noqa: E402
from harness.local_server import ServerPool, external_url, served_models  # noqa: E402

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
    from harness.backbone import OpenAICompatibleBackbone, RetryPolicy
    from harness.ledger import Price

    bb = OpenAICompatibleBackbone(name="local", model=model, base_url=f"{base_url}/v1", api_key="local",
                                  price=Price(0.0, 0.0), max_concurrency=1, supports_n=False,
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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="qwen2.5-coder-0.5b-instruct-q4_k_m", choices=sorted(KNOWN_MODELS))
    ap.add_argument("--gguf", help="use this GGUF file instead of a packaged model")
    ap.add_argument("--client", default="harness", choices=sorted(CLIENTS))
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--n-ctx", type=int, default=8192)
    ap.add_argument("--n-threads", type=int, default=min(os.cpu_count() or 2, 8))
    ap.add_argument("--log", default=".cache/bench_embedded_server.log")
    ap.add_argument("--json", help="also write the full result here")
    args = ap.parse_args(argv)

    spec = ModelSpec(name=Path(args.gguf).stem, path=args.gguf) if args.gguf else KNOWN_MODELS[args.model]
    alias = spec.name
    with ServerPool() as pool:
        t0 = time.perf_counter()
        url = external_url()
        if url:
            alias = served_models(url)[0]
            print(f"using {url} (AGENTIC_REPRO_LOCAL_URL), model {alias}")
        else:
            path = resolve_gguf(spec)
            url = pool.get_or_start(path, log_path=args.log, n_ctx=args.n_ctx, n_threads=args.n_threads,
                                    model_alias=alias)
            print(f"started {url} for {path.name} in {time.perf_counter() - t0:.1f} s "
                  f"(n_ctx={args.n_ctx}, n_threads={args.n_threads}; log {args.log})")
        print(f"{len(PROMPTS)} prompts x {args.rounds} rounds, T=0, max_tokens={args.max_tokens}, sequential")
        res = asyncio.run(compare(url, alias, client=args.client, rounds=args.rounds, max_tokens=args.max_tokens))

    b, h = res["bare"], res[args.client]
    print(f"bare server : {b['tokens_per_s']:.2f} tok/s ({b['tokens']} tok / {b['seconds']:.1f} s)")
    print(f"{args.client:12s}: {h['tokens_per_s']:.2f} tok/s ({h['tokens']} tok / {h['seconds']:.1f} s)")
    verdict = "OK" if res["ratio"] >= 0.9 else "BELOW GOAL"
    print(f"ratio {args.client}/bare = {res['ratio']:.3f} (goal >= 0.9: {verdict})")
    if args.json:
        res["env"] = {"model": alias, "python": platform.python_version(), "cpus": os.cpu_count(),
                      "n_threads": args.n_threads, "n_ctx": args.n_ctx, "max_tokens": args.max_tokens}
        Path(args.json).write_text(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
