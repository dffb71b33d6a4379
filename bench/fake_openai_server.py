"""A throughput test double: an OpenAI-compatible chat endpoint on 127.0.0.1 with a fixed reply delay.

    python bench/fake_openai_server.py --port 8765 --delay 0.1

It answers every chat completion after ``--delay`` seconds with a short fixed text
(a GSM8K-style boxed number), n choices, and token usage; ``/v1/models`` lists one model.
Used by bench/overhead.py and bench/replay.py to measure the harness, not a model.
"""
from __future__ import annotations

import argparse
import asyncio
import time

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

REPLY = "We add the numbers step by step. The answer is \\boxed{42}."


def make_app(delay: float) -> Starlette:
    async def models(_: Request) -> JSONResponse:
        return JSONResponse({"object": "list", "data": [{"id": "fake", "object": "model", "owned_by": "bench"}]})

    async def chat(request: Request) -> JSONResponse:
        body = await request.json()
        await asyncio.sleep(delay)
        n = int(body.get("n") or 1)
        prompt_tokens = sum(len(str(m.get("content", "")).split()) for m in body.get("messages", []))
        return JSONResponse({
            "id": "chatcmpl-fake", "object": "chat.completion", "created": int(time.time()), "model": body["model"],
            "choices": [{"index": i, "finish_reason": "stop", "message": {"role": "assistant", "content": REPLY}}
                        for i in range(n)],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": 12 * n,
                      "total_tokens": prompt_tokens + 12 * n},
        })

    return Starlette(routes=[Route("/v1/models", models), Route("/v1/chat/completions", chat, methods=["POST"])])


def main() -> None:
    import uvicorn

    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--delay", type=float, default=0.1)
    args = ap.parse_args()
    uvicorn.run(make_app(args.delay), host="127.0.0.1", port=args.port, log_level="warning",
                backlog=4096, limit_concurrency=None)


if __name__ == "__main__":
    main()
