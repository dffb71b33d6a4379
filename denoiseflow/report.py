"""DenoiseFlow tables and figure from run traces.

    python -m agentic_repro.denoiseflow.report RESULTS_DIR [--bins 5] [--out FIG.png]

Reads every ``predictions.jsonl`` under RESULTS_DIR whose records carry a DenoiseFlow trace, and prints:
- Table 3 (efficiency): average calls (logical, cache hits included) and backbone calls per problem,
  $ per problem, tokens per problem, Retry % (problems that entered Stage-3 refinement);
- Table 9 (strategy distribution): Direct / Branch share of the initial routing decision (the Refine
  route counts within Branch, as in the paper's Table 9), the Refine-route share, Refine % = the share
  of problems that entered Stage 3 from the Branch route (the paper's definition: a subset of Branch),
  Stage 3 entered from Direct (shown apart), and the average K within Branch mode;
- Table 10 (refinement recovery): refinements triggered, recovered by the verifier, and correct after
  refinement by the benchmark score;
and writes Figure 3 (binned estimated risk r vs success rate, with binned Spearman rho) to
RESULTS_DIR/denoiseflow_figure3.png unless --out is given.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any


def _read(path: Path) -> list[dict[str, Any]]:
    rows: dict[str, dict[str, Any]] = {}
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            line = line.strip()
            if not line:
                continue
            try:
                r = json.loads(line)
            except json.JSONDecodeError:
                continue  # a torn last line of an interrupted run
            rows[r["id"]] = r
    return list(rows.values())


def find_runs(root: Path) -> dict[str, list[dict[str, Any]]]:
    runs = {}
    for p in sorted(root.rglob("predictions.jsonl")):
        rows = [r for r in _read(p) if isinstance(r.get("trace"), dict) and "route" in r["trace"]]
        if rows:
            label = str(p.parent.relative_to(root)) if p.parent != root else p.parent.name
            runs[label or "."] = rows
    return runs


def _ranks(xs: list[float]) -> list[float]:
    order = sorted(range(len(xs)), key=lambda i: xs[i])
    ranks = [0.0] * len(xs)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and xs[order[j + 1]] == xs[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return ranks


def spearman(xs: list[float], ys: list[float]) -> float | None:
    if len(xs) < 2:
        return None
    rx, ry = _ranks(xs), _ranks(ys)
    mx, my = sum(rx) / len(rx), sum(ry) / len(ry)
    cov = sum((a - mx) * (b - my) for a, b in zip(rx, ry))
    vx = math.sqrt(sum((a - mx) ** 2 for a in rx))
    vy = math.sqrt(sum((b - my) ** 2 for b in ry))
    return None if vx == 0 or vy == 0 else cov / (vx * vy)


def risk_bins(rows: list[dict[str, Any]], bins: int) -> list[dict[str, float]]:
    """Equal-count bins of r (sorted), each with mean r and mean score (success rate)."""
    pts = sorted((float(r["trace"]["r"]), float(r.get("score") or 0.0)) for r in rows
                 if r["trace"].get("r") is not None and r.get("status", "ok") == "ok")
    if not pts:
        return []
    bins = max(1, min(bins, len(pts)))
    out = []
    for b in range(bins):
        chunk = pts[b * len(pts) // bins:(b + 1) * len(pts) // bins]
        if chunk:
            out.append({"risk": sum(x for x, _ in chunk) / len(chunk),
                        "success": sum(y for _, y in chunk) / len(chunk), "n": len(chunk)})
    return out


def table3(rows: list[dict[str, Any]]) -> dict[str, float]:
    n = len(rows) or 1
    return {"n": len(rows), "score": sum(float(r.get("score") or 0) for r in rows) / n,
            "avg_calls": sum(r.get("calls", 0) for r in rows) / n,
            "avg_backbone_calls": sum(r.get("backbone_calls", 0) for r in rows) / n,
            "usd_per_problem": sum(r.get("cost_usd", 0.0) for r in rows) / n,
            "tokens_per_problem": sum(r.get("prompt_tokens", 0) + r.get("completion_tokens", 0) for r in rows) / n,
            "retry_pct": 100 * sum(bool(r["trace"].get("refinement", {}).get("triggered")) for r in rows) / n}


def table9(rows: list[dict[str, Any]]) -> dict[str, float]:
    """Table 9 as the paper defines it: Direct and Branch are the initial routes (the Refine route counts
    within Branch) and sum to 100 %; Refine % is the share of problems that entered Stage 3 *from the
    Branch route* (a subset of Branch). Stage 3 entered from Direct (``direct_on_fail``) is reported
    separately (``stage3_direct_pct``) and is in Table 3's Retry %."""
    n = len(rows) or 1
    routes = [r["trace"].get("route") for r in rows]
    branchy = [r for r in rows if r["trace"].get("route") in ("branch", "refine")]
    ks = [r["trace"].get("K", 1) for r in branchy]
    trig = lambda r: bool(r["trace"].get("refinement", {}).get("triggered"))
    return {"direct_pct": 100 * routes.count("direct") / n,
            "branch_pct": 100 * len(branchy) / n,
            "refine_route_pct": 100 * routes.count("refine") / n,
            "refine_pct": 100 * sum(trig(r) for r in branchy) / n,
            "stage3_direct_pct": 100 * sum(trig(r) for r in rows if r["trace"].get("route") == "direct") / n,
            "avg_k_branch": sum(ks) / len(ks) if ks else 0.0,
            "avg_k_all": sum(r["trace"].get("K", 1) for r in rows) / n}


def table10(rows: list[dict[str, Any]], correct_threshold: float = 0.5) -> dict[str, float]:
    trig = [r for r in rows if r["trace"].get("refinement", {}).get("triggered")]
    rec = [r for r in trig if r["trace"]["refinement"].get("recovered")]
    good = [r for r in trig if float(r.get("score") or 0) >= correct_threshold]
    return {"triggered": len(trig), "recovered_verifier": len(rec),
            "recovery_pct": 100 * len(rec) / len(trig) if trig else 0.0,
            "correct_after": len(good),
            "avg_retries": sum(r["trace"]["refinement"].get("retries", 0) for r in trig) / len(trig) if trig else 0.0}


def _fmt_table(title: str, header: list[str], lines: list[list[Any]]) -> str:
    def cell(v: Any) -> str:
        if isinstance(v, float):
            return f"{v:.4f}" if abs(v) < 1 and v != 0 else f"{v:.2f}"
        return str(v)

    rows = [header] + [[cell(v) for v in line] for line in lines]
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    out = [title, " | ".join(h.ljust(w) for h, w in zip(header, widths)),
           "-+-".join("-" * w for w in widths)]
    out += [" | ".join(c.ljust(w) for c, w in zip(r, widths)) for r in rows[1:]]
    return "\n".join(out)


def report(root: Path, bins: int = 5, out: Path | None = None, plot: bool = True) -> dict[str, Any]:
    runs = find_runs(root)
    if not runs:
        raise SystemExit(f"no DenoiseFlow predictions under {root}")
    res: dict[str, Any] = {}
    t3, t9, t10, f3 = [], [], [], []
    for label, rows in runs.items():
        a, b, c = table3(rows), table9(rows), table10(rows)
        rb = risk_bins(rows, bins)
        rho = spearman([x["risk"] for x in rb], [x["success"] for x in rb])
        res[label] = {"table3": a, "table9": b, "table10": c, "figure3": {"bins": rb, "spearman": rho}}
        t3.append([label, a["n"], 100 * a["score"], a["avg_calls"], a["avg_backbone_calls"], a["usd_per_problem"],
                   a["tokens_per_problem"], a["retry_pct"]])
        t9.append([label, b["direct_pct"], b["branch_pct"], b["refine_route_pct"], b["refine_pct"],
                   b["stage3_direct_pct"], b["avg_k_branch"]])
        t10.append([label, c["triggered"], c["recovered_verifier"], c["recovery_pct"], c["correct_after"],
                    c["avg_retries"]])
        f3.append([label, len(rb), "n/a" if rho is None else f"{rho:+.3f}",
                   " ".join(f"{x['risk']:.2f}:{x['success']:.2f}" for x in rb)])
    if len(runs) > 1:  # the paper's Figure 3 pools every dataset
        pooled = [r for rows in runs.values() for r in rows]
        rb = risk_bins(pooled, bins)
        rho = spearman([x["risk"] for x in rb], [x["success"] for x in rb])
        res["ALL (pooled)"] = {"figure3": {"bins": rb, "spearman": rho}}
        f3.append(["ALL (pooled)", len(rb), "n/a" if rho is None else f"{rho:+.3f}",
                   " ".join(f"{x['risk']:.2f}:{x['success']:.2f}" for x in rb)])
    print(_fmt_table("Table 3 (efficiency)", ["run", "n", "score", "avg calls", "avg backbone calls", "$/problem",
                                             "tokens/problem", "retry %"], t3))
    print()
    print(_fmt_table("Table 9 (strategy distribution; Branch includes the Refine route; Refine % = Stage 3 "
                     "entered from Branch)",
                     ["run", "Direct %", "Branch %", "Refine-route %", "Refine %", "Stage 3 from Direct %",
                      "avg K (Branch)"], t9))
    print()
    print(_fmt_table("Table 10 (refinement recovery)", ["run", "triggered", "recovered (verifier)", "recovery %",
                                                         "correct after (score)", "avg retries"], t10))
    print()
    print(_fmt_table("Figure 3 (binned risk vs success; binned Spearman rho)", ["run", "bins", "rho",
                                                                                 "risk:success per bin"], f3))
    if plot:
        path = out or (root / "denoiseflow_figure3.png")
        _plot(res, path)
        print(f"\nfigure: {path}")
        res["figure_path"] = str(path)
    return res


def _plot(res: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4.2))
    for label, r in res.items():
        if not isinstance(r, dict) or "figure3" not in r:
            continue
        bins = r["figure3"]["bins"]
        rho = r["figure3"]["spearman"]
        ax.plot([b["risk"] for b in bins], [b["success"] for b in bins], marker="o",
                label=f"{label} (rho={'n/a' if rho is None else f'{rho:+.2f}'})")
    ax.set_xlabel("estimated risk r (bin mean)")
    ax.set_ylabel("success rate (mean score)")
    ax.set_ylim(-0.05, 1.05)
    ax.set_title("DenoiseFlow Figure 3: risk vs success")
    ax.legend(fontsize=6)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("results_dir", type=Path)
    ap.add_argument("--bins", type=int, default=5)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--json", type=Path, default=None, help="also write the numbers as JSON")
    args = ap.parse_args(argv)
    res = report(args.results_dir, args.bins, args.out)
    if args.json:
        args.json.write_text(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
