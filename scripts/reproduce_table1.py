"""``make reproduce-table1``: run every implemented Table 1 method on the six benchmarks, then write the table.

    python -m agentic_repro.scripts.reproduce_table1 backbone=local                 # embedded default, size `embedded` (< 1 h)
    python -m agentic_repro.scripts.reproduce_table1 backbone=local size=smoke      # ~10 min
    python -m agentic_repro.scripts.reproduce_table1 backbone=local size=large      # every cell, several hours
    python -m agentic_repro.scripts.reproduce_table1 backbone=gpt-4o-mini           # the paper's protocol (3 seeds, test splits)
    python -m agentic_repro.scripts.reproduce_table1 backbone=local methods=io,cot benchmarks=gsm8k,math limit=5 seeds=42,123
    python -m agentic_repro.scripts.reproduce_table1 backbone=local dry_run=true    # print the plan (and a time estimate) only

Script options: backbone, size (alias: protocol; embedded|smoke|large|paper; default from the backbone), methods,
benchmarks, seeds, limit, dry_run, logger (none|wandb), concurrent_runs (runs side by side: ``auto`` = the
backbone's ``max_concurrency``, one per embedded server slot; 1 = one after the other; default: the protocol's). Any other ``key=value`` is a Hydra override for every run
(e.g. ``runner.max_concurrent_problems=8``, ``results_root=/data/results``).

The rows and the size protocols live in ``scripts/experiments/table1.yaml``. Runs go cheapest first (the
protocol's ``run_order``), and a protocol may run a smaller one first (``first_pass``) so every cell has a number
within minutes; the same run folder then grows (a larger ``limit`` resumes). After each run the tables
(``results/table1/table1.{md,tex,csv}``) are re-rendered and the Markdown is printed, so Ctrl-C at any time
leaves an up-to-date table and the same command resumes. Runs already on disk are reused: a complete run is
skipped without starting a backbone, and only when its folder's identity is this configuration's. All runs share
one process, so the embedded server starts once; independent runs go side by side (``concurrent_runs``,
scripts/concurrent_runs.py) so the server's parallel slots stay busy, each still one folder, one lock, one ledger.

Each run's calls are checked for answers cut at ``max_tokens``: the share of calls whose ``finish_reason`` is
``stop`` (``calls.jsonl``) is printed per run, recorded in ``runtime-<backbone>.json`` and warned about below 95% (the table marks such a cell: scripts/table1.py).
The command exits non-zero when any planned cell is incomplete (errors or unanswered problems), naming the runs.
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

from agentic_repro.scripts.concurrent_runs import execute_concurrently
from agentic_repro.scripts.runs import (Planned, benchmark_overrides, compose, csv_list, eprint, load_experiment,
                                        logger_override, method_config, parse_args, plan, require_backbone_key)

OPTIONS = {"backbone": "local", "protocol": None, "size": None, "methods": None, "benchmarks": None, "seeds": None,
           "limit": None, "dry_run": "false", "logger": "none", "concurrent_runs": None}
STOP_TARGET = 0.95   # share of calls that must end with finish_reason=stop (answers not cut at max_tokens)


def resolve_protocol(exp: dict[str, Any], name: str) -> dict[str, Any]:
    """A protocol's settings with ``inherits`` applied (the child's keys win)."""
    protos = exp["protocols"]
    if name not in protos:
        raise SystemExit(f"size/protocol={name!r} is not one of {sorted(protos)} (scripts/experiments/table1.yaml)")
    p = dict(protos[name])
    parent = p.pop("inherits", None)
    return {**resolve_protocol(exp, parent), **p} if parent else p


def protocol_for(exp: dict[str, Any], backbone: str, requested: str | None) -> tuple[str, dict[str, Any]]:
    name = requested or exp.get("protocol_by_backbone", {}).get(backbone) or exp.get("default_protocol", "paper")
    return name, resolve_protocol(exp, name)


def _limit_for(proto: dict[str, Any], method: str, bench: str, opt_limit: Any) -> Any:
    if opt_limit is not None:
        return opt_limit
    limit = proto.get("limit_by_benchmark", {}).get(bench, proto.get("limit"))
    cap = proto.get("limit_by_method", {}).get(method)
    if isinstance(cap, dict):
        cap = cap.get(bench, cap.get("default"))
    if cap is not None:
        limit = int(cap) if limit is None else min(int(limit), int(cap))
    return limit


def _pass_items(exp: dict[str, Any], pname: str, proto: dict[str, Any], opts: dict[str, Any],
                user_overrides: list[str], skipped: list[tuple[str, str]] | None) -> list[Planned]:
    backbone = opts["backbone"]
    want_methods = csv_list(opts.get("methods"))
    benches = csv_list(opts.get("benchmarks")) or list(exp["benchmarks"])
    seeds_opt = [int(s) for s in csv_list(opts.get("seeds")) or []]
    order = list(proto.get("run_order") or [])
    bench_order = list(proto.get("benchmark_order") or exp["benchmarks"])
    rows = [r for r in exp["rows"] if not want_methods or r["method"] in want_methods or r["label"] in want_methods]
    items: list[Planned] = []
    for row in rows:
        m = row["method"]
        if method_config(m) is None:
            if skipped is not None:
                skipped.append((row["label"], row.get("missing") or f"no configs/method/{m}.yaml"))
            continue
        seeds = seeds_opt or [int(s) for s in proto.get("seeds_by_method", {}).get(m, proto["seeds"])]
        only = (proto.get("benchmarks_by_method") or {}).get(m)
        for b in benches:
            if only is not None and b not in only and not csv_list(opts.get("benchmarks")):
                continue
            limit = _limit_for(proto, m, b, opts.get("limit"))
            for s in seeds:
                ov = [f"experiment={exp['experiment']}", f"method={m}", f"benchmark={b}", f"backbone={backbone}",
                      f"seed={s}", f"limit={'null' if limit in (None, 'null') else int(limit)}",
                      *proto.get("overrides", []), *benchmark_overrides(proto, b),
                      *proto.get("method_overrides", {}).get(m, []),
                      *((proto.get("overrides_by_method_benchmark") or {}).get(m) or {}).get(b, []), *user_overrides]
                rank = (order.index(m) if m in order else len(order),
                        bench_order.index(b) if b in bench_order else len(bench_order), s)
                items.append(Planned(label=f"{m}/{b}/{backbone}/seed={s}", overrides=ov,
                                     extra={"method": m, "benchmark": b, "seed": s, "pass": pname,
                                            "limit": limit, "rank": rank}))
    return sorted(items, key=lambda it: it.extra["rank"])   # cheapest methods first (stable within a method)


def build_plan(exp: dict[str, Any], opts: dict[str, Any], user_overrides: list[str]) -> tuple[list[Planned], dict]:
    backbone = opts["backbone"]
    pname, proto = protocol_for(exp, backbone, opts.get("size") or opts.get("protocol"))
    skipped: list[tuple[str, str]] = []
    items: list[Planned] = []
    first = proto.get("first_pass")
    if first and opts.get("limit") is None:
        # a smaller size first: every cell gets a number early, then the same folders grow to this size
        fp = resolve_protocol(exp, first)
        for it in _pass_items(exp, first, fp, opts, user_overrides, None):
            it.label = f"{it.label} [{first}]"
            items.append(it)
    items += _pass_items(exp, pname, proto, opts, user_overrides, skipped)
    info = {"backbone": backbone, "protocol": pname, "protocol_settings": proto, "not_implemented": skipped,
            "user_overrides": user_overrides}
    return items, info


# ---- per-run checks ---------------------------------------------------------------------------------------

def run_check(it: Planned) -> dict[str, Any]:
    """Completeness and the stop-share of one planned run, read back from its folder."""
    from agentic_repro.scripts.collect import SeedRun, stop_fraction

    d = Path(it.spec.out_dir) if it.spec else None
    if d is None or not (d / "metrics.json").exists():
        return {"complete": False, "answered": 0, "selected": None, "n_errors": None, "stop": (0, 0, 0)}
    run = SeedRun(int(it.extra.get("seed", 0)), d, json.loads((d / "metrics.json").read_text(encoding="utf-8")))
    return {"complete": run.complete, "answered": run.n, "selected": run.selected, "n_errors": run.n_errors,
            "stop": stop_fraction(run.calls()), "dir": str(d)}


def stop_line(stop: tuple[int, int, int]) -> str:
    ok, known, total = stop
    if not known:
        return "finish_reason not recorded" if total else "no calls"
    pct = 100 * ok / known
    return f"{pct:.0f}% of {known} calls ended with stop" + ("" if pct >= 100 * STOP_TARGET else
                                                              f" (WARNING: below {100 * STOP_TARGET:.0f}%: answers cut "
                                                              "at max_tokens; raise it for this benchmark)")


def cell_line(it: Planned, chk: dict[str, Any], done: int, todo: int, elapsed_s: float, table: Path) -> str:
    """The one line printed when a planned run (a cell at one size and seed) finishes: which, its score, n and
    errors, its wall time, the share of answers not cut, and the time so far."""
    m = it.metrics or {}
    if m:
        score = f"{m.get('score_pct', float('nan')):.1f} n={m.get('n')}, {m.get('n_errors', 0)} errors"
    else:
        score = it.state + (f" ({it.error})" if it.error else "")
    if chk.get("complete") is False and m:
        score += f", incomplete {chk.get('answered')}/{chk.get('selected')}"
    return (f"[{done}/{todo} runs done] {it.label}: {score}; {it.wall_s:.0f} s; answers: {stop_line(chk['stop'])}; "
            f"{elapsed_s / 60:.1f} min so far -> {table}")


def estimate_s(items: list[Planned], results_root: Path, experiment: str,
               rates: dict[str, Any] | None = None) -> dict[str, float]:
    """Time the unfinished items still need, from runs of the same (method, benchmark) already on disk (any
    size): per answered problem, their measured backbone time (``totals.latency_s``: this machine, at its load
    then) and their token counts priced at ``rates`` (``timing`` in table1.yaml: idle per-token costs).
    Returns {"latency_s", "tokens_s", "estimated", "to_do"}."""
    from agentic_repro.scripts.collect import RunIndex

    index = RunIndex.scan(results_root, experiment)
    rates = rates or {}
    cg, cp = float(rates.get("gen_s_per_token") or 0), float(rates.get("prompt_s_per_token") or 0)
    per: dict[tuple[str, str], tuple[float, float]] = {}
    answered: dict[str, int] = {}
    for k, r in index.runs.items():
        answered[str(r.dir)] = r.n
        if r.n:
            per[(k.method, k.benchmark)] = (r.totals("latency_s") / r.n,
                                            (r.totals("completion_tokens") * cg + r.totals("prompt_tokens") * cp) / r.n)
    out = {"latency_s": 0.0, "tokens_s": 0.0, "estimated": 0, "to_do": 0}
    for it in items:
        if it.state not in ("new", "partial") or not it.spec:
            continue
        out["to_do"] += 1
        key = (str(it.spec.method_cfg["name"]), str(it.spec.benchmark_cfg["name"]))
        if key not in per:
            continue
        d = str(it.spec.out_dir)
        want = int(it.extra.get("limit") or 0)
        todo = max(0, want - answered.get(d, 0))
        out["latency_s"] += todo * per[key][0]
        out["tokens_s"] += todo * per[key][1]
        answered[d] = max(answered.get(d, 0), want)     # a later pass over the same folder only adds the rest
        out["estimated"] += 1
    return out


def concurrent_runs(opts: dict[str, Any], proto: dict[str, Any], run_overrides: list[str]) -> int:
    """Runs in flight at once: the option, else the protocol's ``concurrent_runs`` (default 1); ``auto`` is the
    backbone's ``max_concurrency`` (the requests it takes at once: one per embedded server slot) as a planned
    run's overrides (``run_overrides``) compose it."""
    value = opts.get("concurrent_runs") or proto.get("concurrent_runs") or 1
    if str(value) == "auto":
        return max(1, int(compose(run_overrides)["backbone"].get("max_concurrency") or 1))
    try:
        n = int(value)
    except ValueError:
        n = 0
    if n < 1:
        raise SystemExit(f"concurrent_runs={value!r}: give a number >= 1 or auto")
    return n


def main(argv: list[str] | None = None) -> int:
    opts, user_overrides = parse_args(list(sys.argv[1:] if argv is None else argv), OPTIONS)
    exp = load_experiment("table1")
    dry = str(opts.get("dry_run")).lower() in ("1", "true", "yes")
    if not dry:
        require_backbone_key(opts["backbone"])
    items, info = build_plan(exp, opts, user_overrides)
    side_by_side = concurrent_runs(opts, info["protocol_settings"],
                                   items[0].overrides if items else [f"backbone={info['backbone']}"])
    # side by side, the runs' progress bars would overwrite each other: the line per finished run shows progress
    base = [*logger_override(opts.get("logger")), *(["runner.progress=false"] if side_by_side > 1 else [])]
    plan(items, base)
    results_root = Path(items[0].spec.results_root) if items and items[0].spec else \
        Path(compose(user_overrides).get("results_root", "results"))

    eprint(f"Table 1 on backbone={info['backbone']} (size protocol={info['protocol']}): "
           f"{len(items)} runs planned, {side_by_side} side by side; not implemented: {', '.join(l for l, _ in info['not_implemented']) or 'none'}")
    est = estimate_s(items, results_root, exp["experiment"], exp.get("timing"))
    if est["estimated"]:
        eprint(f"estimate for {est['estimated']} of the {est['to_do']} runs to do, from same-cell runs on disk: "
               f"~{est['latency_s'] / 60:.0f} min at their measured backbone time, ~{est['tokens_s'] / 60:.0f} min at "
               f"the idle per-token costs of table1.yaml `timing`")
    if dry:
        for it in items:
            print(f"{it.state:8s} {it.label}  {' '.join(it.overrides)}" + (f"  ({it.error})" if it.error else ""))
        return 0

    out = results_root / exp["experiment"]
    out.mkdir(parents=True, exist_ok=True)
    (out / f"protocol-{info['backbone']}.json").write_text(json.dumps(
        {"backbone": info["backbone"], "protocol": info["protocol"], "settings": info["protocol_settings"],
         "user_overrides": user_overrides, "methods": csv_list(opts.get("methods")),
         "benchmarks": csv_list(opts.get("benchmarks")), "seeds": csv_list(opts.get("seeds")),
         "limit": opts.get("limit"), "concurrent_runs": side_by_side}, indent=2), encoding="utf-8")
    wb = None
    if opts.get("logger") not in (None, "", "none"):
        from agentic_repro.harness.logging_wandb import WandbLogger

        wb = WandbLogger.from_config(compose([*base, *user_overrides]),
                                     run_name=f"table1-{info['backbone']}", job_type="table1")

    from agentic_repro.scripts.table1 import write_all

    rt_path = out / f"runtime-{info['backbone']}.json"
    prev = {r["run"]: r for r in (json.loads(rt_path.read_text()) if rt_path.exists() else {}).get("runs", [])}
    t0 = time.time()
    state: dict[str, Any] = {"res": None, "finished": 0}

    def runtime_record() -> None:
        runs = []
        for it in items:
            if it.metrics is None and it.state == "done" and it.label in prev:
                runs.append({**prev[it.label], "reused": True})   # skipped now: keep the measurement of its run
                continue
            if it.metrics is None and not it.wall_s:
                continue
            tot = (it.metrics or {}).get("totals", {})
            chk = it.extra.get("check") or {}
            ok, known, _ = chk.get("stop", (0, 0, 0))
            runs.append({"run": it.label, "state": it.state, "wall_s": round(it.wall_s, 1), "error": it.error,
                         "backbone_calls": (it.metrics or {}).get("this_invocation", {}).get("backbone_calls"),
                         "calls": tot.get("calls"),
                         "tokens": tot.get("prompt_tokens", 0) + tot.get("completion_tokens", 0),
                         "prompt_tokens": tot.get("prompt_tokens"), "completion_tokens": tot.get("completion_tokens"),
                         "backbone_latency_s": tot.get("latency_s"), "answered": chk.get("answered"),
                         "selected": chk.get("selected"), "n_errors": chk.get("n_errors"),
                         "stop_calls": ok, "finish_reason_calls": known,
                         "stop_pct": round(100 * ok / known, 1) if known else None, "cost_usd": tot.get("cost_usd")})
        ok = sum(r.get("stop_calls") or 0 for r in runs)
        known = sum(r.get("finish_reason_calls") or 0 for r in runs)
        rt_path.write_text(json.dumps(
            {"backbone": info["backbone"], "protocol": info["protocol"], "concurrent_runs": side_by_side,
             "wall_s_this_invocation": round(time.time() - t0, 1),
             "wall_s_all_runs": round(sum(float(r.get("wall_s") or 0) for r in runs), 1),
             "stop_pct_all_runs": round(100 * ok / known, 1) if known else None,
             "finished_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "runs": runs}, indent=2),
            encoding="utf-8")

    def render(show: bool = False) -> None:
        """Re-write the table files; print the Markdown only when asked (at a resume's start and at the end), so a
        long run prints a line per cell rather than the whole table after every cell."""
        res = write_all(results_root, exp=exp)
        state["res"] = res
        if show:
            for t in res["tables"]:
                if info["backbone"] in t.title:
                    print(t.to_markdown(), flush=True)
        runtime_record()

    n_todo = sum(1 for it in items if it.state in ("new", "partial"))

    def on_done(it: Planned) -> None:
        it.extra["check"] = chk = run_check(it)
        state["finished"] += 1
        if wb:
            wb.log_run(it.spec, it.metrics)
        render()
        eprint(cell_line(it, chk, state["finished"], n_todo, time.time() - t0, out / "table1.md"))

    if any(it.state == "done" for it in items):
        render(show=True)             # resuming: show what is already there before the first new run
    try:
        execute_concurrently(items, concurrency=side_by_side, log=eprint, on_done=on_done)
    except KeyboardInterrupt:
        render(show=True)
        raise
    wall = time.time() - t0
    render(show=True)
    res = state["res"]
    print(f"wrote {', '.join(str(p) for p in res['paths'])} in {wall:.0f}s")

    # the stop check over every planned run (reused ones read from disk)
    checks = [(it, it.extra.get("check") or run_check(it)) for it in items if it.spec]
    ok = sum(c["stop"][0] for _, c in checks)
    known = sum(c["stop"][1] for _, c in checks)
    eprint(f"answers not cut at max_tokens: {stop_line((ok, known, sum(c['stop'][2] for _, c in checks)))} "
           f"over the {len(checks)} planned runs")
    if wb:
        for p in res["paths"]:
            wb.log_file(p)
        wb.log_table("table1", out / "table1.csv")
        wb.finish()
    failed = [it for it in items if it.state in ("failed", "invalid")]
    if failed:
        eprint(f"{len(failed)} runs failed or were invalid: " + "; ".join(f"{it.label}: {it.error}" for it in failed))
    seen_dirs: set[str] = set()
    incomplete = []
    for it, c in reversed(checks):        # a folder planned twice (first pass + full size): its last state counts
        d = c.get("dir") or str(it.spec.out_dir)
        if d in seen_dirs:
            continue
        seen_dirs.add(d)
        if not c["complete"] and it.state not in ("failed", "invalid"):
            incomplete.append((it, c))
    if incomplete:
        eprint(f"{len(incomplete)} cells are incomplete (shown as such in the table, not averaged): " + "; ".join(
            f"{it.label}: {c['answered']}/{c['selected']} answered, {c['n_errors']} errors ({c.get('dir')})"
            for it, c in reversed(incomplete)))
    return 1 if failed or incomplete else 0


if __name__ == "__main__":
    from agentic_repro.scripts.runs import run_cli

    run_cli(main)
