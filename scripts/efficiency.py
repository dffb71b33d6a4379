"""Efficiency and behaviour tables from ``results/`` alone (zero backbone calls).

- Table 3: avg calls, tokens, $ and FLOPs per problem, retry % (every method, from metrics.json / predictions.jsonl);
  and, for methods whose runs use several backbone roles (designer, executor, judge, ...), the same per role
  (``metrics.json`` ``by_role``, else summed from ``calls.jsonl``'s ``role``);
- Table 9: strategy distribution and average K (DenoiseFlow traces: ``route``, ``K``);
- Table 10: refinement recovery (problems that entered Correcting and ended correct);
- Figure 3: risk vs success with a binned Spearman ρ (trace ``risk``; otherwise 1 − confidence, labelled so);
- Table 8: cross-model, CoT vs DenoiseFlow on GSM8K/MATH for every configured backbone.

DenoiseFlow's per-run numbers come from ``agentic_repro.denoiseflow.report`` (its ``table3``/``table9``/``table10``/``risk_bins``
and ``spearman`` over the trace fields ``route``, ``K``, ``r``, ``refinement``): this module only aggregates them per
benchmark and backbone and writes Markdown/LaTeX/CSV and a PNG/PDF figure.

    python -m agentic_repro.scripts.efficiency [results_root=results] [experiment=table1]
"""
from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any

from agentic_repro.scripts.collect import Agg, RunIndex
from agentic_repro.scripts.figstyle import empty_panel, plt, save
from agentic_repro.scripts.render import Table, fmt, fmt_pm, write_csv, write_tables
from agentic_repro.scripts.runs import CONFIGS, load_experiment, parse_args

# Trace keys read from predictions.jsonl (DenoiseFlow writes these; other methods simply lack them).
ROUTE_KEYS = ("route",)
K_KEYS = ("K",)
RISK_KEYS = ("r",)


def _df_report():
    """agentic_repro.denoiseflow.report if DenoiseFlow is installed, else None."""
    try:
        from agentic_repro.denoiseflow import report
    except Exception:  # noqa: BLE001
        return None
    return report


def _triggered(p: dict[str, Any]) -> bool | None:
    ref = (p.get("trace") or {}).get("refinement")
    return None if not isinstance(ref, dict) else bool(ref.get("triggered"))


def _first(trace: dict[str, Any], keys: tuple[str, ...]) -> Any:
    for k in keys:
        if isinstance(trace, dict) and trace.get(k) is not None:
            return trace[k]
    return None


def _preds(agg: Agg) -> list[dict[str, Any]]:
    return [p for r in agg.scored for p in r.predictions()]


def table3(root: Path, exp_name: str, benches: list[str], backbone: str, methods: list[str]):
    index = RunIndex.scan(root, exp_name)
    t = Table(f"Table 3: efficiency, {backbone} (per problem, mean over seeds and benchmarks)",
              ["Method", "Avg calls", "Avg tokens", "$ / problem", "FLOPs / problem", "Retry %", "Score"],
              label=f"tab:eff-{backbone}")
    roles_t = Table(f"Table 3 by role: {backbone} (per problem, mean over seeds and benchmarks; methods with several "
                    "backbone roles)", ["Method", "Role", "Calls", "Prompt tokens", "Completion tokens", "$ / problem",
                                        "FLOPs / problem"], label=f"tab:eff-roles-{backbone}")
    recs = []
    for m in methods:
        aggs = [index.agg(b, m, backbone) for b in benches]
        aggs = [a for a in aggs if a.mean is not None]      # complete cells only: errors are never averaged
        if not aggs:
            continue
        calls = sum(a.mean_of(lambda r: r.per_problem("calls")) for a in aggs) / len(aggs)
        toks = sum(a.mean_of(lambda r: r.per_problem("tokens")) for a in aggs) / len(aggs)
        usd = sum(a.mean_of(lambda r: r.per_problem("cost_usd")) for a in aggs) / len(aggs)
        roles = _roles_per_problem(aggs)
        flops = sum(v["flops"] for v in roles.values()) if roles else None
        preds = [p for a in aggs for p in _preds(a)]
        retr = [_triggered(p) for p in preds if _triggered(p) is not None]
        retry_pct = 100 * sum(retr) / len(retr) if retr else None
        score = sum(a.mean for a in aggs) / len(aggs)
        t.rows.append([m, f"{calls:.2f}", f"{toks:.0f}", f"{usd:.5f}", _sci(flops), fmt(retry_pct), fmt(score)])
        recs.append({"table": 3, "backbone": backbone, "method": m, "calls": round(calls, 4), "tokens": round(toks, 1),
                     "cost_usd": usd, "flops": flops, "retry_pct": retry_pct, "score": round(score, 4),
                     "benchmarks": " ".join(b for b, a in zip(benches, aggs)),
                     "sources": ";".join(s for a in aggs for s in a.sources(root))})
        if len(roles) > 1:
            for role, v in sorted(roles.items()):
                roles_t.rows.append([m, role, f"{v['calls']:.2f}", f"{v['prompt_tokens']:.0f}",
                                     f"{v['completion_tokens']:.0f}", f"{v['cost_usd']:.5f}", _sci(v["flops"])])
                recs.append({"table": "3-role", "backbone": backbone, "method": m, "role": role,
                             "calls": round(v["calls"], 4), "tokens": round(v["prompt_tokens"] + v["completion_tokens"], 1),
                             "cost_usd": v["cost_usd"], "flops": v["flops"],
                             "sources": ";".join(s for a in aggs for s in a.sources(root))})
    t.notes = ["Benchmarks averaged: those each method has complete on disk. Retry %: share of problems that entered "
               "refinement (DenoiseFlow trace refinement.triggered; — for methods without it). "
               "$ is 0 on local backbones (no price); on an API it is the provider's bill (cost_usd: cached input at "
               "its rate, reasoning as output; the papers' input + output formula is metrics.json's cost_list_usd). "
               "FLOPs ≈ 2 × parameters × tokens (the ledger's estimate)."]
    roles_t.notes = ["Per role: metrics.json by_role (calls.jsonl role when absent), divided by answered problems. "
                     + ("" if roles_t.rows else "No run on disk uses more than one role yet.")]
    return t, recs, roles_t


def _roles_per_problem(aggs: list[Agg]) -> dict[str, dict[str, float]]:
    """role -> calls/tokens/$/FLOPs per problem, mean over the cells (each cell: mean over its seeds)."""
    out: dict[str, dict[str, float]] = {}
    for a in aggs:
        runs = [r for r in a.scored if r.n]
        for r in runs:
            for role, v in r.by_role().items():
                acc = out.setdefault(role, {"calls": 0.0, "prompt_tokens": 0.0, "completion_tokens": 0.0,
                                            "cost_usd": 0.0, "flops": 0.0})
                for k in acc:
                    acc[k] += float(v.get(k) or 0.0) / r.n / len(runs) / len(aggs)
    return out


def _sci(x: float | None) -> str:
    return "—" if not x else f"{x:.2e}"


def table9_10(root: Path, exp_name: str, benches: list[str], backbone: str, method: str, thr: float = 0.5):
    t9 = Table(f"Table 9: strategy distribution, {method}, {backbone}",
               ["Benchmark", "Direct %", "Branch %", "Refine-route %", "Refinement %", "Avg K (Branch)", "n"],
               label=f"tab:strategy-{backbone}")
    t10 = Table(f"Table 10: refinement recovery, {method}, {backbone}",
                ["Benchmark", "Triggered", "Recovered (verifier)", "Recovery %", "Correct after", "Avg retries"],
                label=f"tab:recovery-{backbone}")
    recs = []
    rep = _df_report()
    every: list[dict[str, Any]] = []
    for b in [*benches, "all"]:
        if b == "all":
            if len([r for r in recs if r["table"] == 9]) < 2:
                break
            preds, agg = every, None
        else:
            agg = RunIndex.scan(root, exp_name).agg(b, method, backbone)
            preds = [p for p in _preds(agg) if isinstance(p.get("trace"), dict) and "route" in p["trace"]]
            every += preds
        if not preds or rep is None:
            continue
        a, c = rep.table9(preds), rep.table10(preds, thr)
        t9.rows.append([b, fmt(a["direct_pct"]), fmt(a["branch_pct"]), fmt(a["refine_route_pct"]),
                        fmt(a["refine_pct"]), fmt(a["avg_k_branch"], 2), str(len(preds))])
        t10.rows.append([b, str(c["triggered"]), str(c["recovered_verifier"]),
                         fmt(c["recovery_pct"]) if c["triggered"] else "—", str(c["correct_after"]),
                         fmt(c["avg_retries"], 2) if c["triggered"] else "—"])
        recs.append({"table": 9, "backbone": backbone, "method": method, "benchmark": b, "n": len(preds),
                     "direct": a["direct_pct"], "branch": a["branch_pct"], "refine": a["refine_route_pct"],
                     "avg_k": a["avg_k_branch"], "entered_correcting": c["triggered"],
                     "recovered": c["recovered_verifier"], "sources": ";".join(agg.sources(root)) if agg else ""})
    t9.notes.append("Direct/Branch: the initial routing decision; Branch includes the Refine route (as the paper's "
                    "Table 9); Refinement %: problems that entered Stage-3 refinement. Computed by denoiseflow.report.")
    t10.notes.append("Triggered: problems that entered refinement; Recovered: the verifier accepted a retry; Correct "
                     "after: benchmark score ≥ 0.5 after refinement. Computed by denoiseflow.report.")
    for t in (t9, t10):
        if not t.rows:
            t.notes.append(f"— no {method} traces under results/{exp_name}/ for {backbone} yet"
                           + ("" if rep else " (denoiseflow is not importable)") + ".")
    return t9, t10, recs


def figure3(root: Path, exp_name: str, benches: list[str], backbone: str, methods: list[str], out: Path,
            n_bins: int = 5, thr: float = 0.5):
    """Risk vs success: per-problem points binned by risk; Spearman ρ of bin risk vs bin success rate."""
    from scipy.stats import spearmanr

    pyplot = plt()
    fig, ax = pyplot.subplots(figsize=(5.2, 3.8))
    stats = []
    index = RunIndex.scan(root, exp_name)
    for m in methods:
        pts = []
        src = "risk"
        for b in benches:
            for p in _preds(index.agg(b, m, backbone)):
                if p.get("status", "ok") != "ok":
                    continue
                risk = _first(p.get("trace") or {}, RISK_KEYS)
                if risk is None and p.get("confidence") is not None:
                    risk, src = 1.0 - float(p["confidence"]), "1 − confidence"
                if risk is not None:
                    pts.append((float(risk), 1.0 if float(p["score"]) >= thr else 0.0))
        if len(pts) < 2:
            continue
        pts.sort()
        bins = [pts[i * len(pts) // n_bins:(i + 1) * len(pts) // n_bins] for i in range(n_bins)]
        bins = [b for b in bins if b]
        xs = [sum(r for r, _ in b) / len(b) for b in bins]
        ys = [100 * sum(s for _, s in b) / len(b) for b in bins]
        rho = spearmanr(xs, ys).statistic if len(set(xs)) > 1 and len(set(ys)) > 1 else float("nan")
        # (denoiseflow.report.spearman gives the same rank correlation; scipy is already a core dependency)
        rho_txt = "n/a" if math.isnan(rho) else f"{rho:+.2f}"
        ax.plot(xs, ys, marker="o", lw=2.2 if m == "denoiseflow" else 1.2,
                label=f"{m} ({src}): binned ρ={rho_txt}, n={len(pts)}")
        stats.append({"table": "fig3", "backbone": backbone, "method": m, "risk_source": src, "n": len(pts),
                      "binned_spearman": rho, "bins_risk": xs, "bins_success": ys})
    if stats:
        ax.set_xlabel("estimated risk (mean of equal-count bins)")
        ax.set_ylabel("success rate (%)")
        ax.set_ylim(-5, 105)
        ax.set_xlim(-0.02, 1.02)
        ax.legend(loc="best")
    else:
        empty_panel(ax, "no per-problem risk or confidence\non disk yet")
    ax.set_title(f"Figure 3: risk vs success ({backbone})")
    return save(fig, out), stats


def table8(root: Path, exp_name: str) -> tuple[Table, list[dict[str, Any]]]:
    benches = ["gsm8k", "math"]
    configured = sorted(p.stem for p in (CONFIGS / "backbone").glob("*.yaml"))
    index = RunIndex.scan(root, exp_name)
    on_disk = index.backbones()
    t = Table("Table 8: cross-model, CoT vs DenoiseFlow (score %)",
              ["Backbone", "CoT GSM8K", "CoT MATH", "DenoiseFlow GSM8K", "DenoiseFlow MATH", "Δ avg"],
              label="tab:cross-model")
    recs = []
    configured = [c for c in configured if not any(b.split("@")[0] == c for b in on_disk)]   # on disk: its model
    for bb in sorted(set(configured) | set(on_disk), key=lambda b: (b.split("@")[0] != "gpt-4o-mini", b)):
        cells, means = [bb], {}
        for m in ("cot", "denoiseflow"):
            for b in benches:
                a = index.agg(b, m, bb)
                cells.append(a.incomplete_text() if a.incomplete else fmt_pm(a.mean, a.std))
                means[(m, b)] = a.mean
                if a.mean is not None:
                    recs.append({"table": 8, "backbone": bb, "method": m, "benchmark": b, "mean": a.mean,
                                 "sources": ";".join(a.sources(root))})
        d = [means[("denoiseflow", b)] - means[("cot", b)] for b in benches
             if means[("denoiseflow", b)] is not None and means[("cot", b)] is not None]
        cells.append(("+" if d and sum(d) >= 0 else "") + fmt(sum(d) / len(d)) if len(d) == 2 else "—")
        t.rows.append(cells)
    t.notes = ["Every backbone in configs/backbone/; — = not run on that backbone yet "
               "(make cross-model BACKBONE=<name>). Numbers come from results/table1/."]
    return t, recs


def write_all(results_root: Path, exp_name: str = "table1") -> dict[str, Any]:
    root = Path(results_root)
    exp = load_experiment("table1")
    benches = exp["benchmarks"]
    out = root / "efficiency"
    tables, recs, paths = [], [], []
    order = [r["method"] for r in exp["rows"]]
    index = RunIndex.scan(root, exp_name)
    methods = sorted(index.methods(), key=lambda m: (order.index(m) if m in order else 99, m))
    for bb in index.backbones() or ["local"]:
        t3, r3, t3r = table3(root, exp_name, benches, bb, methods)
        t9, t10, r9 = table9_10(root, exp_name, benches, bb, "denoiseflow")
        figs, stats = figure3(root, exp_name, benches, bb, methods, out / f"figure3-{bb}")
        tables += [t3, t3r, t9, t10]
        recs += r3 + r9 + stats
        paths += figs
    t8, r8 = table8(root, exp_name)
    tables.append(t8)
    recs += r8
    md, tex = write_tables(out / "efficiency", tables, "# Tables 3, 8, 9, 10: regenerated from results/ by "
                                                       "`python -m agentic_repro.scripts.efficiency`\n")
    write_csv(out / "efficiency.csv", recs, ["table", "backbone", "method", "role", "benchmark", "calls", "tokens",
                                             "cost_usd", "flops", "retry_pct", "score", "mean", "direct", "branch", "refine", "avg_k", "n",
                                             "entered_correcting", "recovered", "risk_source", "binned_spearman",
                                             "sources"])
    paths = [md, tex, out / "efficiency.csv", *paths]
    return {"tables": tables, "records": recs, "paths": paths}


def main(argv: list[str] | None = None) -> None:
    opts, rest = parse_args(list(sys.argv[1:] if argv is None else argv), {"results_root": "results",
                                                                          "experiment": "table1"})
    if rest:
        raise SystemExit(f"unknown arguments {rest}")
    res = write_all(Path(opts["results_root"]), opts["experiment"])
    for t in res["tables"]:
        print(t.to_markdown())
    print("wrote " + ", ".join(map(str, res["paths"])))


if __name__ == "__main__":
    main()
