"""``make reproduce-table1``: run every implemented Table 1 method on the six benchmarks, then write the table.

    python -m scripts.reproduce_table1 backbone=local                 # embedded default, small protocol
    python -m scripts.reproduce_table1 backbone=gpt-4o-mini           # the paper's protocol (3 seeds, test splits)
    python -m scripts.reproduce_table1 backbone=local methods=io,cot benchmarks=gsm8k,math limit=5 seeds=42,123
    python -m scripts.reproduce_table1 backbone=local dry_run=true    # print the plan only

Script options: backbone, protocol (embedded|paper; default from the backbone), methods, benchmarks, seeds,
limit, dry_run, logger (none|wandb). Any other ``key=value`` is a Hydra override for every run
(e.g. ``runner.max_concurrent_problems=8``, ``results_root=/data/results``).

The rows and protocols live in ``scripts/experiments/table1.yaml``. Runs already on disk are reused: a complete
run is skipped without starting a backbone, a partial one resumes. All runs share one process, so the embedded
llama.cpp server starts once.
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

from scripts.runs import (Planned, compose, csv_list, eprint, execute, load_experiment, logger_override,
                          method_config, parse_args, plan, require_backbone_key)

OPTIONS = {"backbone": "local", "protocol": None, "methods": None, "benchmarks": None, "seeds": None,
           "limit": None, "dry_run": "false", "logger": "none"}


def protocol_for(exp: dict[str, Any], backbone: str, requested: str | None) -> tuple[str, dict[str, Any]]:
    name = requested or exp.get("protocol_by_backbone", {}).get(backbone) or exp.get("default_protocol", "paper")
    if name not in exp["protocols"]:
        raise SystemExit(f"protocol={name!r} is not one of {sorted(exp['protocols'])} (scripts/experiments/table1.yaml)")
    return name, exp["protocols"][name]


def build_plan(exp: dict[str, Any], opts: dict[str, Any], user_overrides: list[str]) -> tuple[list[Planned], dict]:
    backbone = opts["backbone"]
    pname, proto = protocol_for(exp, backbone, opts.get("protocol"))
    want_methods = csv_list(opts.get("methods"))
    benches = csv_list(opts.get("benchmarks")) or list(exp["benchmarks"])
    seeds_opt = [int(s) for s in csv_list(opts.get("seeds")) or []]
    items: list[Planned] = []
    skipped: list[tuple[str, str]] = []
    for row in exp["rows"]:
        m = row["method"]
        if want_methods and m not in want_methods and row["label"] not in want_methods:
            continue
        if method_config(m) is None:
            skipped.append((row["label"], row.get("missing") or f"no configs/method/{m}.yaml"))
            continue
        seeds = seeds_opt or [int(s) for s in proto.get("seeds_by_method", {}).get(m, proto["seeds"])]
        for b in benches:
            limit = opts.get("limit")
            if limit is None:
                limit = proto.get("limit_by_benchmark", {}).get(b, proto.get("limit"))
                cap = proto.get("limit_by_method", {}).get(m)
                if cap is not None:
                    limit = int(cap) if limit is None else min(int(limit), int(cap))
            for s in seeds:
                ov = [f"experiment={exp['experiment']}", f"method={m}", f"benchmark={b}", f"backbone={backbone}",
                      f"seed={s}", f"limit={'null' if limit in (None, 'null') else int(limit)}",
                      *proto.get("overrides", []), *proto.get("method_overrides", {}).get(m, []), *user_overrides]
                items.append(Planned(label=f"{m}/{b}/{backbone}/seed={s}", overrides=ov,
                                     extra={"method": m, "benchmark": b, "seed": s}))
    info = {"backbone": backbone, "protocol": pname, "protocol_settings": proto, "not_implemented": skipped,
            "user_overrides": user_overrides}
    return items, info


def main(argv: list[str] | None = None) -> int:
    opts, user_overrides = parse_args(list(sys.argv[1:] if argv is None else argv), OPTIONS)
    exp = load_experiment("table1")
    if str(opts.get("dry_run")).lower() not in ("1", "true", "yes"):
        require_backbone_key(opts["backbone"])
    items, info = build_plan(exp, opts, user_overrides)
    base = logger_override(opts.get("logger"))
    plan(items, base)
    results_root = Path(items[0].spec.results_root) if items and items[0].spec else \
        Path(compose(user_overrides).get("results_root", "results"))

    eprint(f"Table 1 on backbone={info['backbone']} (protocol={info['protocol']}): "
           f"{len(items)} runs planned; not implemented: {', '.join(l for l, _ in info['not_implemented']) or 'none'}")
    if str(opts.get("dry_run")).lower() in ("1", "true", "yes"):
        for it in items:
            print(f"{it.state:8s} {it.label}  {' '.join(it.overrides)}" + (f"  ({it.error})" if it.error else ""))
        return 0

    out = results_root / exp["experiment"]
    out.mkdir(parents=True, exist_ok=True)
    (out / f"protocol-{info['backbone']}.json").write_text(json.dumps(
        {"backbone": info["backbone"], "protocol": info["protocol"], "settings": info["protocol_settings"],
         "user_overrides": user_overrides, "methods": csv_list(opts.get("methods")),
         "benchmarks": csv_list(opts.get("benchmarks")), "seeds": csv_list(opts.get("seeds")),
         "limit": opts.get("limit")}, indent=2), encoding="utf-8")
    wb = None
    if opts.get("logger") not in (None, "", "none"):
        from harness.logging_wandb import WandbLogger

        wb = WandbLogger.from_config(compose([*base, *user_overrides]),
                                     run_name=f"table1-{info['backbone']}", job_type="table1")
    t0 = time.time()
    execute(items, log=eprint, on_done=(lambda it: wb.log_run(it.spec, it.metrics)) if wb else None)
    wall = time.time() - t0

    from scripts.table1 import write_all

    res = write_all(results_root, exp=exp)
    rt_path = out / f"runtime-{info['backbone']}.json"
    prev = {r["run"]: r for r in (json.loads(rt_path.read_text()) if rt_path.exists() else {}).get("runs", [])}
    runs = []
    for it in items:
        if it.metrics is None and it.state == "done" and it.label in prev:
            runs.append({**prev[it.label], "reused": True})   # skipped now: keep the measurement of its run
            continue
        tot = (it.metrics or {}).get("totals", {})
        runs.append({"run": it.label, "state": it.state, "wall_s": round(it.wall_s, 1), "error": it.error,
                     "backbone_calls": (it.metrics or {}).get("this_invocation", {}).get("backbone_calls"),
                     "calls": tot.get("calls"), "tokens": tot.get("prompt_tokens", 0) + tot.get("completion_tokens", 0),
                     "cost_usd": tot.get("cost_usd")})
    runtime = {"backbone": info["backbone"], "protocol": info["protocol"], "wall_s_this_invocation": round(wall, 1),
               "wall_s_all_runs": round(sum(float(r.get("wall_s") or 0) for r in runs), 1),
               "finished_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "runs": runs}
    rt_path.write_text(json.dumps(runtime, indent=2), encoding="utf-8")
    for t in res["tables"]:
        if info["backbone"] in t.title:
            print(t.to_markdown())
    print(f"wrote {', '.join(str(p) for p in res['paths'])} in {wall:.0f}s")
    if wb:
        for p in res["paths"]:
            wb.log_file(p)
        wb.log_table("table1", out / "table1.csv")
        wb.finish()
    failed = [it for it in items if it.state in ("failed", "invalid")]
    if failed:
        eprint(f"{len(failed)} runs failed or were invalid: " + "; ".join(f"{it.label}: {it.error}" for it in failed))
        return 1
    return 0


if __name__ == "__main__":
    from scripts.runs import run_cli

    run_cli(main)
