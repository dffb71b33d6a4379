"""DenoiseFlow cost bench: adaptive (full) vs Fixed K=7 on the same problems and backbone, in one process.

Paper (§4.3, §4.5): adaptive branching matches fixed K=7 at ~0.44-0.60x its cost; our goal is <= 0.45x.

    python bench/denoiseflow_cost.py                              # embedded 0.5B model, small default
    python bench/denoiseflow_cost.py --backbone gpt-4o-mini --limit 50 --benchmark gsm8k
    python bench/denoiseflow_cost.py --override method.params.window_size=4 --json out.json
    python bench/denoiseflow_cost.py --also wo_clr,full_restart     # Table 2 cost column: variant / full

Both runs share one response cache, so the second run replays the identical Stage-1 calls from it; every
number below is *logical* (each call counted whether or not it was a cache hit), i.e. what a fresh run
would pay. With a local model $ is 0, so backbone calls, tokens and FLOPs (2 x params x tokens) are the cost
measures; with a priced backbone the $ ratio is printed as well.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def compose(overrides: list[str]) -> dict[str, Any]:
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from omegaconf import OmegaConf

    config_dir = str(Path(__file__).resolve().parents[1] / "configs")
    with initialize_config_dir(config_dir=config_dir, version_base="1.3"):
        cfg = hydra_compose(config_name="config", overrides=overrides)
    return OmegaConf.to_container(cfg, resolve=True)  # type: ignore[return-value]


def summarise(out_dir: Path, metrics: dict[str, Any]) -> dict[str, Any]:
    from agentic_repro.harness.results import read_jsonl_tolerant

    preds = {p["id"]: p for p in read_jsonl_tolerant(out_dir / "predictions.jsonl")}
    calls = read_jsonl_tolerant(out_dir / "calls.jsonl")
    n = len(preds) or 1
    routes = [p["trace"].get("route") for p in preds.values() if isinstance(p.get("trace"), dict)]
    return {
        "n": len(preds), "score": metrics["score"],
        "calls_per_problem": sum(p["calls"] for p in preds.values()) / n,
        "tokens_per_problem": sum(p["prompt_tokens"] + p["completion_tokens"] for p in preds.values()) / n,
        "completion_tokens_per_problem": sum(p["completion_tokens"] for p in preds.values()) / n,
        "usd_per_problem": sum(p["cost_usd"] for p in preds.values()) / n,
        "flops_per_problem": sum(c.get("flops") or 0.0 for c in calls) / n,
        "routes": {r: routes.count(r) for r in sorted(set(routes), key=str)},
        "avg_K": sum(p["trace"].get("K", 1) for p in preds.values()) / n,
        "retry_pct": 100 * sum(bool(p["trace"].get("refinement", {}).get("triggered")) for p in preds.values()) / n,
        "errors": sum(p["status"] != "ok" for p in preds.values()),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--backbone", default="local")
    ap.add_argument("--benchmark", default="gsm8k")
    ap.add_argument("--limit", type=int, default=3)
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--max-tokens", type=int, default=160, help="backbone.sampling.max_tokens (0: config's)")
    ap.add_argument("--n-samples", type=int, default=5)
    ap.add_argument("--window-size", type=int, default=1)
    ap.add_argument("--results", type=Path, default=None, help="results root (default: a temp dir)")
    ap.add_argument("--override", action="append", default=[], help="extra Hydra override (repeatable)")
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--also", default="", help="extra Table 2 variants to run after full and fixed_k7, comma-separated "
                                               "(e.g. wo_clr,full_restart): their cost is printed relative to full")
    args = ap.parse_args(argv)

    from agentic_repro.harness.runner import Runner, spec_from_config

    root = args.results or Path(tempfile.mkdtemp(prefix="denoiseflow_cost_"))
    base = [f"backbone={args.backbone}", f"benchmark={args.benchmark}", f"limit={args.limit}", f"seed={args.seed}",
            "method=denoiseflow", "experiment=denoiseflow_cost", f"results_root={root / 'results'}",
            f"cache.path={root / 'cache.sqlite'}", "runner.progress=false",
            f"method.params.n_samples={args.n_samples}", f"method.params.window_size={args.window_size}",
            f"method.params.quantile_min_history={max(2, args.window_size)}"]
    if args.max_tokens:
        base.append(f"backbone.sampling.max_tokens={args.max_tokens}")
    if args.benchmark in ("mbpp", "humaneval"):
        base.append("benchmark.execute_code=true")
    base += args.override

    from agentic_repro.denoiseflow.config import canonical_variant
    from agentic_repro.harness.embedded.server import ServerPool

    extra = [canonical_variant(v) for v in args.also.split(",") if v.strip()]
    extra = [v for v in dict.fromkeys(extra) if v not in ("full", "fixed_k7")]

    async def both(pool: ServerPool) -> dict[str, Any]:
        out = {}
        for variant in ("full", "fixed_k7", *extra):
            spec = spec_from_config(compose([*base, f"denoiseflow.variant={variant}"]))
            t0 = time.time()
            metrics = await Runner(spec, servers=pool).run()
            out[variant] = {**summarise(spec.out_dir, metrics), "wall_s": round(time.time() - t0, 1),
                            "dir": str(spec.out_dir)}
        return out

    with ServerPool() as pool:  # one embedded server for both runs
        res = asyncio.run(both(pool))
    full, fixed = res["full"], res["fixed_k7"]

    def ratio(key: str) -> float | None:
        return None if not fixed[key] else full[key] / fixed[key]

    res["ratios_full_over_fixed_k7"] = {k: ratio(k) for k in ("calls_per_problem", "tokens_per_problem",
                                                                "completion_tokens_per_problem", "flops_per_problem",
                                                                "usd_per_problem")}
    res["setup"] = {"backbone": args.backbone, "benchmark": args.benchmark, "limit": args.limit, "seed": args.seed,
                    "max_tokens": args.max_tokens, "n_samples": args.n_samples, "window_size": args.window_size,
                    "overrides": args.override}
    print(f"DenoiseFlow cost bench: {args.benchmark}, {args.limit} problems, backbone={args.backbone}, "
          f"N={args.n_samples}, max_tokens={args.max_tokens or 'config'}")
    print(f"{'':22}{'full':>14}{'fixed K=7':>14}{'full/fixed':>12}")
    for key, label in (("score", "score"), ("calls_per_problem", "calls/problem"),
                       ("tokens_per_problem", "tokens/problem"),
                       ("completion_tokens_per_problem", "out tokens/problem"),
                       ("flops_per_problem", "FLOPs/problem"), ("usd_per_problem", "$/problem"),
                       ("avg_K", "avg K"), ("retry_pct", "retry %"), ("wall_s", "wall s")):
        a, b = full[key], fixed[key]
        r = (a / b) if isinstance(a, (int, float)) and b else None
        fmt = (lambda v: f"{v:14.3e}") if key == "flops_per_problem" else (lambda v: f"{v:14.4f}")
        print(f"{label:22}{fmt(a)}{fmt(b)}{'' if r is None else f'{r:12.3f}':>12}")
    print(f"routes full: {full['routes']}   routes fixed: {fixed['routes']}")
    if extra:
        keys = ("score", "calls_per_problem", "tokens_per_problem", "flops_per_problem", "retry_pct")
        print(f"{'variant':22}" + "".join(f"{k[:16]:>18}" for k in keys) + f"{'calls/full':>12}")
        for v in extra:
            row = res[v]
            r = row["calls_per_problem"] / full["calls_per_problem"] if full["calls_per_problem"] else None
            print(f"{v:22}" + "".join(f"{row[k]:18.4g}" for k in keys) + ("" if r is None else f"{r:12.3f}"))
            print(f"{'':22}routes {row['routes']}, errors {row['errors']}")
    print(f"errors: full {full['errors']}, fixed {fixed['errors']};  results under {root}")
    if args.json:
        args.json.write_text(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
