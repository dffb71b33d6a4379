"""Harness overhead: achieved / ideal request throughput against a fixed-delay server.

500 GSM8K problems x CoT-SC(5) (2,500 requests) at backbone concurrency 32, against the
loopback test double that replies after exactly 100 ms. The ideal is concurrency / delay
requests per second; everything the harness does (prompting, cache, ledger, scoring,
appending results) shows up as lost throughput.

On a 2-core machine the test double and the client share the cores, so the same run also
measures bare clients firing the same number of requests at the same concurrency: ``httpx2`` (the
HTTP library the installed ``openai`` client, hence the harness, sends with; the like-for-like
reference) and ``httpx`` 0.28 (the earlier reference, ~2x slower than httpx2 under load here):
``bare_over_ideal`` is the ceiling any client reaches here, ``harness_over_bare`` the
harness's own share of the loss (goal >= 0.97). The harness itself runs once per library too
(``backbone.http_library``), and ``harness_over_bare_same_library`` compares each with its own bare client,
``best_harness_over_fastest_bare`` the harness's fastest setting with the fastest bare client. The bare client is timed before and after the
harness (``--rounds`` times each, alternating) and the harness is compared with their mean, so
a change in machine load during the run hits both sides alike.

Both sides are timed warm: the process first makes a 4-problem warm-up run into a throw-away
folder (and a warm-up bare burst), so one-time start-up (imports such as ``openai``, ~1 s on
this machine, the data file) is excluded from both and reported apart as ``startup_s``.
"""
from __future__ import annotations

import argparse
import json
import tempfile
import time

from _common import compose, fake_backbone_overrides, fake_server


async def bare_client(url: str, requests: int, concurrency: int, lib: str = "httpx") -> float:
    """Requests per second of a bare client (no harness) against the same server: ``httpx``, or ``httpx2``
    (the HTTP library the ``openai`` client, and so the harness, sends with in this environment)."""
    import asyncio
    import importlib

    httpx = importlib.import_module(lib)

    sem = asyncio.Semaphore(concurrency)
    body = {"model": "fake", "messages": [{"role": "user", "content": "What is 2+2?"}], "temperature": 0}
    # keep-alive for every connection (httpx keeps only 20 by default: beyond that each request reconnects)
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(limits=limits) as client:
        async def one() -> None:
            async with sem:
                for attempt in range(3):  # the server may close an idle keep-alive connection: resend once
                    try:
                        (await client.post(f"{url}/chat/completions", json=body)).json()
                        return
                    except httpx.TransportError:
                        if attempt == 2:
                            raise

        t0 = time.perf_counter()
        await asyncio.gather(*(one() for _ in range(requests)))
        return requests / (time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--problems", type=int, default=500)
    ap.add_argument("--k", type=int, default=5)
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--delay", type=float, default=0.1)
    ap.add_argument("--rounds", type=int, default=1, help="harness runs (each between two bare bursts)")
    args = ap.parse_args()
    import asyncio
    import importlib.util
    import os

    t_start = time.perf_counter()
    from agentic_repro.harness.runner import run_spec, spec_from_config

    with fake_server(args.delay) as url, tempfile.TemporaryDirectory() as tmp:
        def cfg(name: str, limit: int, library: str = "auto") -> dict:
            return compose([*fake_backbone_overrides(url, args.concurrency), f"backbone.http_library={library}",
                            "method=cot_sc",
                            f"method.params.k={args.k}", "benchmark=gsm8k", "benchmark.split=full", f"limit={limit}",
                            f"results_root={tmp}/{name}", f"cache.path={tmp}/{name}.sqlite", "runner.progress=false",
                            f"runner.max_concurrent_problems={4 * args.concurrency}"])

        libs = ["httpx2", "httpx"] if importlib.util.find_spec("httpx2") else ["httpx"]
        for lib in libs:
            run_spec(spec_from_config(cfg(f"warmup-{lib}", 4, lib)))
        for lib in libs:
            asyncio.run(bare_client(url, 4 * args.k, args.concurrency, lib))
        startup = time.perf_counter() - t_start
        bare: dict[str, list[float]] = {lib: [] for lib in libs}
        calls = args.problems * args.k

        def bare_burst() -> None:
            for lib in libs:
                bare[lib].append(asyncio.run(bare_client(url, calls, args.concurrency, lib)))

        bare_burst()
        harness_by: dict[str, list[float]] = {lib: [] for lib in libs}  # backbone.http_library=<lib>
        for r in range(args.rounds):
            for lib in libs:
                spec = spec_from_config(cfg(f"run{r}-{lib}", args.problems, lib))
                t0 = time.perf_counter()
                metrics = run_spec(spec)
                wall = time.perf_counter() - t0
                calls = metrics["this_invocation"]["backbone_calls"]
                harness_by[lib].append(calls / wall)
            bare_burst()
        ideal_rps = args.concurrency / args.delay
        mean = {lib: sum(v) / len(v) for lib, v in bare.items()}
        hmean = {lib: sum(v) / len(v) for lib, v in harness_by.items()}
        ref = libs[0]  # the library the openai client (http_library=auto, the default) sends with
        achieved_rps = hmean[ref]
        fastest_bare = max(mean, key=mean.get)
        print(json.dumps({"bench": "overhead", "problems": metrics["n"], "requests": calls,
                          "wall_s": round(calls / achieved_rps, 2), "ideal_wall_s": round(calls / ideal_rps, 2),
                          "startup_s": round(startup, 2), "achieved_rps": round(achieved_rps, 1),
                          "ideal_rps": round(ideal_rps, 1),
                          "harness_rps_by_http_library": {lib: round(m, 1) for lib, m in hmean.items()},
                          "harness_runs_rps": {lib: [round(h, 1) for h in v] for lib, v in harness_by.items()},
                          "bare_rps": {lib: round(m, 1) for lib, m in mean.items()},
                          "bare_runs_rps": {lib: [round(b, 1) for b in v] for lib, v in bare.items()},
                          "ratio_achieved_over_ideal": round(achieved_rps / ideal_rps, 3),
                          "bare_over_ideal": round(mean[ref] / ideal_rps, 3),
                          "harness_over_bare": round(achieved_rps / mean[ref], 3), "bare_reference": ref,
                          # each library's harness run against the bare client of the same library
                          "harness_over_bare_same_library": {lib: round(hmean[lib] / mean[lib], 3) for lib in libs},
                          # the harness's fastest setting against the fastest bare client measured
                          "best_harness_over_fastest_bare": round(max(hmean.values()) / mean[fastest_bare], 3),
                          "fastest_bare": fastest_bare,
                          "load_average": [round(x, 2) for x in os.getloadavg()],
                          "goal": ">= 0.97 (harness_over_bare)"}))

if __name__ == "__main__":
    main()
