"""At the provider's limit: the adaptive rate controller (harness/rate_limit.py) against fixed concurrency.

    python bench/rate_limit.py                      # 2,000 CoT-SC(5) calls per scenario, 10 s windows
    python bench/rate_limit.py --calls 1000 --window 5

One loopback double (tests/rate_limit_server.py, its own process) enforces an RPM and a TPM limit per window the
way OpenAI does (429 + Retry-After + x-ratelimit-* headers, limits reset per window, latency growing with load).
Each scenario sends ``--calls`` CoT-SC(5) requests (n=5, max_tokens 64, prompts of mixed length: 40-1,500
words) through the harness's own LLMClient and OpenAI-compatible backbone, with up to 256 problems in flight:

1. ``adaptive`` (rpm/tpm not configured: learned from the headers) vs ``fixed-8``, ``fixed-32``, ``fixed-128``
   (today's behaviour: that many requests in flight, 429s retried with backoff honouring Retry-After);
2. ``two processes`` on one key (one shared limiter file), half the calls each;
3. ``halved``: adaptive, the limit halved mid-run (from the next window on);
4. ``actual``: a second double that charges the tokens a reply actually uses (admitting under OpenAI's rule, the
   larger of the prompt and n x max_tokens) and reports them in ``x-ratelimit-remaining-*``; the papers' CoT-SC
   settings (n=5, max_tokens 4096) with chains of thought of 100-400 words per choice. ``actual`` learns the charge
   (``rate_limit.charge: auto``); ``actual-reserved`` is the controller before it learned (``charge: reserved``,
   every request charged its full reservation), cut at ``--deadline-reserved``.

Reported per scenario: the admitted tokens per full window over the limit (``sustained``: windows after the first
and before the last, which are ramp-up and tail), overall, the share of requests answered 429, errors (requests
that exhausted their retries: reported, never answers) and wall time; the load average before and after.
Everything is loopback and bounded: each scenario stops after ``--deadline`` seconds.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _common import ROOT, free_port  # the script's own folder (bench/ is not part of the package)

WORDS = ["the", "of", "and", "to", "in", "is", "was", "for", "on", "that", "with", "as", "by", "at", "from", "his", "her", "an", "were", "which", "are", "this", "be", "has", "had", "it", "apple", "number", "train", "station", "seven", "eleven", "twice", "half", "total", "remaining", "each", "bought", "sold", "price", "cost"]


def prompts(calls: int, seed: int) -> list[str]:
    """Mixed prompt lengths: log-uniform 40-1,500 words (a short question to a long few-shot context)."""
    rng = random.Random(seed)
    out = []
    for i in range(calls):
        n = int(round(40 * (1500 / 40) ** rng.random()))
        out.append(f"Problem {i}: " + " ".join(rng.choice(WORDS) for _ in range(n)) + ". What is the answer?")
    return out


def settings(mode: str, share_path: str, window_s: float, charge: str = "auto") -> dict[str, Any]:
    if mode == "adaptive":
        return {"mode": "adaptive", "start": 8, "min": 1, "max": 256, "window_s": window_s, "share_path": share_path,
                **({} if charge == "auto" else {"charge": charge})}
    return {"mode": "fixed"}


async def drive(url: str, mode: str, concurrency: int, calls: int, seed: int, key: str, tag: str,
                share_path: str, window_s: float, deadline_s: float, max_tokens: int = 64,
                charge: str = "auto") -> dict[str, Any]:
    """Send ``calls`` CoT-SC(5) calls through the harness; counts of answered / errored / unfinished."""
    from agentic_repro.harness.backbone import BackboneError, OpenAICompatibleBackbone, RetryPolicy
    from agentic_repro.harness.cache import ResponseCache
    from agentic_repro.harness.ledger import Price
    from agentic_repro.harness.llm import LLMClient
    from agentic_repro.harness.rate_limit import parse_rate_limit

    rl = parse_rate_limit(settings(mode, share_path, window_s, charge), kind="openai")
    bb = OpenAICompatibleBackbone(name="bench", model="bench-model", base_url=url, api_key=key, price=Price(0, 0),
                                  max_concurrency=concurrency, supports_n=True, extra_body={"user": tag},
                                  retry=RetryPolicy(max_attempts=6, base_delay_s=1.0, max_delay_s=60.0, timeout_s=120),
                                  rate_limit=rl)
    cache = ResponseCache(Path(tempfile.mkdtemp()) / "c.sqlite", "off")
    llm = LLMClient(bb, cache, run_id="bench", method="cot_sc", defaults={})
    gate = asyncio.Semaphore(256)  # problems in flight (runner.max_concurrent_problems)
    counts = {"ok": 0, "error": 0}

    async def one(i: int, text: str) -> None:
        async with gate:
            try:
                await llm.generate([{"role": "user", "content": text}], stage="sample", problem_id=f"p{i}", seed=seed + i,
                                   sink=lambda r: None, n=5, temperature=0.7, max_tokens=max_tokens)
                counts["ok"] += 1
            except BackboneError:
                counts["error"] += 1

    t0 = time.perf_counter()
    tasks = [asyncio.ensure_future(one(i, p)) for i, p in enumerate(prompts(calls, seed))]
    done, pending = await asyncio.wait(tasks, timeout=deadline_s)
    for t in pending:
        t.cancel()
    await asyncio.gather(*pending, return_exceptions=True)
    wall = time.perf_counter() - t0
    await bb.aclose()
    cache.close()
    summary = llm.rate_summary()
    return {"tag": tag, "mode": mode if mode == "adaptive" else f"fixed-{concurrency}", "wall_s": round(wall, 2),
            **counts, "unfinished": len(pending), "client": summary}


# ---- the double ------------------------------------------------------------------------------------------------
def http(url: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
    req = urllib.request.Request(url, data=None if body is None else json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"}, method="GET" if body is None else "POST")
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.loads(r.read() or b"{}")


def start_double(rpm: int, tpm: int, window_s: float, max_seconds: float,
                 extra: tuple[str, ...] = ()) -> tuple[subprocess.Popen, str]:
    port = free_port()
    proc = subprocess.Popen([sys.executable, str(ROOT / "tests" / "rate_limit_server.py"), "--port", str(port),
                             "--rpm", str(rpm), "--tpm", str(tpm), "--window", str(window_s), "--base-latency", "0.3",
                             "--latency-per-request", "0.005", "--max-seconds", str(max_seconds), *extra])
    url = f"http://127.0.0.1:{port}/v1"
    for _ in range(200):
        try:
            http(f"{url}/stats")
            return proc, url
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise RuntimeError("the rate-limited double did not start")


def window_figures(stats: dict[str, Any], tag: str | None = None) -> dict[str, Any]:
    """Admitted tokens per window over that window's limit: every window, and the full ones (not first, last)."""
    wins = sorted((int(w), c) for w, c in stats["windows"].items())
    limits = {int(w): v for w, v in stats["limits_by_window"].items()}
    key = "tokens" if tag is None else f"tokens@{tag}"
    ratios = [(w, c.get(key, 0) / limits.get(w, [0, stats["tpm"]])[1]) for w, c in wins]
    full = ratios[1:-1]
    return {"per_window": ratios, "sustained": sum(r for _, r in full) / len(full) if full else float("nan"),
            "windows": len(ratios)}


def scenario(url: str, args: argparse.Namespace, mode: str, concurrency: int, key: str) -> dict[str, Any]:
    http(f"{url}/control", {"reset": True, "rpm": args.rpm, "tpm": args.tpm})
    res = asyncio.run(drive(url, mode, concurrency, args.calls, 0, key, "main", args.share, args.window, args.deadline))
    stats = http(f"{url}/stats")
    return {**res, "server": stats, "fig": window_figures(stats)}


def line(name: str, res: dict[str, Any], tpm: int, window_s: float) -> str:
    s, f = res["server"], res["fig"]
    total = sum(c.get("tokens", 0) for c in s["windows"].values())
    overall = total / (res["wall_s"] / window_s * tpm)
    share = s["rejected"] / s["received"] if s["received"] else 0.0
    ctl = res["client"].get("controller") or {}
    return (f"{name:<14} sustained {f['sustained']:.3f}  overall {overall:.3f}  429 share {share:6.2%} "
            f"({s['rejected']}/{s['received']})  errors {res['error']}  unfinished {res['unfinished']}  "
            f"wall {res['wall_s']:6.1f} s" + (f"  concurrency now {ctl['concurrency']:.1f}, peak in flight "
                                               f"{ctl['peak_in_flight']}" if ctl else ""))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--window", type=float, default=10.0, help="the double's 'minute' (s)")
    ap.add_argument("--tpm", type=int, default=240_000, help="tokens per window")
    ap.add_argument("--rpm", type=int, default=600, help="requests per window")
    ap.add_argument("--deadline", type=float, default=300.0, help="seconds per scenario before it is cut")
    ap.add_argument("--only", default="adaptive,fixed-8,fixed-32,fixed-128,two,halved,actual,actual-reserved")
    ap.add_argument("--actual-calls", type=int, default=2600, help="calls of the actual-charge scenario")
    ap.add_argument("--actual-tpm", type=int, default=600_000, help="its tokens per window")
    ap.add_argument("--actual-rpm", type=int, default=6000, help="its requests per window")
    ap.add_argument("--deadline-reserved", type=float, default=60.0, help="seconds before actual-reserved is cut")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--url", help=argparse.SUPPRESS)
    ap.add_argument("--tag", default="main", help=argparse.SUPPRESS)
    ap.add_argument("--key", default="bench-key", help=argparse.SUPPRESS)
    ap.add_argument("--share", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:  # one of the two processes on one key
        res = asyncio.run(drive(args.url, "adaptive", 256, args.calls, args.seed, args.key, args.tag, args.share,
                                args.window, args.deadline))
        print(json.dumps(res))
        return
    tmp = Path(tempfile.mkdtemp(prefix="bench-rate-limit-"))
    args.share = str(tmp / "rate-limits.sqlite")
    only = set(args.only.split(","))
    print(f"rate_limit: {args.calls} CoT-SC(5) calls per scenario (n=5, max_tokens 64, prompts 40-1,500 words); "
          f"double: {args.tpm} tokens and {args.rpm} requests per {args.window:g} s window, latency 0.3 s + 5 ms per "
          f"request in flight; machine: {os.cpu_count()} CPUs, load average before: "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    proc, url = start_double(args.rpm, args.tpm, args.window, max_seconds=8 * args.deadline)
    results: dict[str, Any] = {}
    try:
        for name, mode, conc in (("adaptive", "adaptive", 256), ("fixed-8", "fixed", 8), ("fixed-32", "fixed", 32),
                                 ("fixed-128", "fixed", 128)):
            if name in only:
                results[name] = scenario(url, args, mode, conc, f"bench-key-{name}")
                print(line(name, results[name], args.tpm, args.window), flush=True)
        if "two" in only:
            results["two"] = two_processes(url, args)
        if "halved" in only:
            results["halved"] = halved(url, args)
    finally:
        proc.terminate()
        proc.wait(10)
    if only & {"actual", "actual-reserved"}:
        results.update(actual_charge(args, only))
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    out = tmp / "rate_limit.json"
    out.write_text(json.dumps(results, indent=1, default=str))
    print(f"details: {out}")


def two_processes(url: str, args: argparse.Namespace) -> dict[str, Any]:
    http(f"{url}/control", {"reset": True, "rpm": args.rpm, "tpm": args.tpm})
    half = args.calls // 2
    procs = {tag: subprocess.Popen([sys.executable, __file__, "--worker", "--url", url, "--calls", str(half), "--tag", tag,
                                    "--key", "bench-key-two", "--share", args.share, "--seed", str(seed),
                                    "--window", str(args.window), "--deadline", str(args.deadline)],
                                   stdout=subprocess.PIPE, text=True)
             for tag, seed in (("A", 0), ("B", 100_000))}
    res = {tag: json.loads(p.communicate(timeout=args.deadline + 60)[0].strip().splitlines()[-1])
           for tag, p in procs.items()}
    stats = http(f"{url}/stats")
    both = window_figures(stats)
    each = {tag: window_figures(stats, tag) for tag in procs}
    # windows where both processes were sending (the one that finishes first leaves a tail to the other)
    active = [w for w, _ in both["per_window"]
              if all(dict(each[t]["per_window"]).get(w, 0) > 0 for t in procs)][1:-1]
    together = sum(dict(both["per_window"])[w] for w in active) / len(active) if active else float("nan")
    shares = {t: sum(dict(each[t]["per_window"])[w] for w in active) / len(active) if active else float("nan")
              for t in procs}
    share429 = stats["rejected"] / stats["received"] if stats["received"] else 0.0
    print(f"two processes  together {together:.3f} of the limit, A {shares['A']:.3f}, B {shares['B']:.3f} "
          f"(over the {len(active)} full windows both sent in); 429 share {share429:.2%} "
          f"({stats['rejected']}/{stats['received']}); errors {res['A']['error'] + res['B']['error']}; "
          f"wall A {res['A']['wall_s']:.1f} s, B {res['B']['wall_s']:.1f} s", flush=True)
    return {"workers": res, "server": stats, "together": together, "each": shares}


def actual_charge(args: argparse.Namespace, only: set[str]) -> dict[str, Any]:
    """The double that deducts what a reply uses: CoT-SC(5) with max_tokens 4096, learned charge vs the reservation."""
    proc, url = start_double(args.actual_rpm, args.actual_tpm, args.window, max_seconds=8 * args.deadline,
                             extra=("--charge", "actual", "--answer-words", "100-400"))
    out: dict[str, Any] = {}
    print(f"actual charge: a double that deducts prompt + completion tokens (admits under max(prompt, n x max_tokens)); "
          f"{args.actual_tpm} tokens and {args.actual_rpm} requests per {args.window:g} s window; CoT-SC n=5, "
          f"max_tokens 4096, 100-400 words per choice", flush=True)
    try:
        for name, charge, calls, deadline in (("actual", "auto", args.actual_calls, args.deadline),
                                              ("actual-reserved", "reserved", args.actual_calls,
                                               args.deadline_reserved)):
            if name not in only:
                continue
            http(f"{url}/control", {"reset": True, "rpm": args.actual_rpm, "tpm": args.actual_tpm})
            res = asyncio.run(drive(url, "adaptive", 256, calls, 0, f"bench-key-{name}", "main", args.share,
                                    args.window, deadline, max_tokens=4096, charge=charge))
            stats = http(f"{url}/stats")
            out[name] = {**res, "server": stats, "fig": window_figures(stats)}
            ctl = res["client"].get("controller") or {}
            print(line(name, out[name], args.actual_tpm, args.window)
                  + f"  kept share of the reservation {ctl.get('charge', {}).get('kept_share_of_reservation')}",
                  flush=True)
    finally:
        proc.terminate()
        proc.wait(10)
    return out


def halved(url: str, args: argparse.Namespace) -> dict[str, Any]:
    http(f"{url}/control", {"reset": True, "rpm": args.rpm, "tpm": args.tpm})
    expected = args.calls * 720 / args.tpm * args.window  # ~720 tokens charged per call

    async def run() -> dict[str, Any]:
        async def halve() -> None:
            await asyncio.sleep(0.3 * expected)
            await asyncio.to_thread(http, f"{url}/control", {"tpm": args.tpm // 2})
        h = asyncio.ensure_future(halve())
        out = await drive(url, "adaptive", 256, args.calls, 0, "bench-key-halved", "main", args.share, args.window,
                          args.deadline)
        h.cancel()
        return out

    res = asyncio.run(run())
    stats = http(f"{url}/stats")
    limits = {int(w): v[1] for w, v in stats["limits_by_window"].items()}
    changed = min((w for w, t in limits.items() if t < args.tpm), default=None)
    rows = []
    for w, c in sorted((int(w), c) for w, c in stats["windows"].items()):
        rows.append(f"w{w}{'*' if w == changed else ''}: {c.get('tokens', 0) / limits.get(w, args.tpm):.2f} of "
                    f"{limits.get(w, args.tpm)}, {c.get('rejected', 0)} x 429")
    after = [(w, c) for w, c in ((int(w), c) for w, c in stats["windows"].items()) if changed is not None and w >= changed]
    def ok(w: int, c: dict[str, Any]) -> bool:
        return 0.9 <= c.get("tokens", 0) / limits[w] <= 1.0 and c.get("rejected", 0) <= 0.01 * max(1, c.get("requests", 0))
    full = after[:-1]  # the last window is the tail
    # settled: the first window from which every full window is at 0.9-1.0 of the new limit with <= 1% 429
    settled = next((w for i, (w, _) in enumerate(full) if all(ok(v, c) for v, c in full[i:])), None)
    rej_after = sum(c.get("rejected", 0) for _, c in after)
    print(f"halved         limit {args.tpm} -> {args.tpm // 2} from window {changed}; settled (every later window 0.9-1.0 "
          f"of the new limit, <= 1% 429) from window {settled} = {None if settled is None or changed is None else settled - changed} "
          f"window(s) after the change; 429s after the change: {rej_after}; errors {res['error']}; "
          f"wall {res['wall_s']:.1f} s", flush=True)
    print("               " + "; ".join(rows), flush=True)
    return {**res, "server": stats, "changed": changed, "settled": settled}


if __name__ == "__main__":
    main()
