"""AUQ's tables and figures (arXiv 2601.15703) from ``results/`` alone, and the command that runs them.

    python -m scripts.auq_tables build [results_root=results] [backbone=local]   # zero backbone calls
    python -m scripts.auq_tables run what=table1 backbone=local [size=smoke]       # run, then build
    python -m scripts.auq_tables run what=fig4|fig5|fig6|all backbone=local dry_run=true

Everything it reads is in ``scripts/experiments/auq_main.yaml`` (rows, benchmarks, sweeps, size protocols, the
paper's numbers). Writes under ``results/auq-report/``:

- ``table1-<backbone>.{md,tex,csv}``: calibration per aggregation (T-ECE, T-BS for Φ_last, Φ_avg, Φ_min, Φ_prod),
  one table per benchmark; T-ECE uses 10 equal-width bins (:mod:`auq.metrics`).
- ``table2-<backbone>.{md,tex,csv}``: success rate [95% Wilson interval] and AUROC of C(τ) per aggregation,
  the paper's SR beside ours; the "fixes x% of ReAct failures, regresses y% of its successes" comparison.
- ``figure3-<backbone>``: belief traces (mean confidence by step, UAM-only vs Dual, success vs failure, with the
  success/failure counts, the paper's counts in the legend) and the Δ scatter of System-2 interventions.
- ``figure4-<backbone>``: SR vs memory window h; ``figure5-<backbone>``: memory expansion at h = 5;
  ``figure6-<backbone>``: τ Pareto (SR vs average API calls per episode) beside the paper's points.

Rules (as scripts/table1.py; `run` exits 1 when a planned run is not complete): a cell whose runs have errors or unanswered problems shows ``incomplete a/s, k
errors`` and is never averaged; a row whose method is not implemented or not run shows "—" with the reason; a
WebShop cell without the product files says so (fixture numbers are never WebShop: they run under another
benchmark name). Calibration metrics pool the trajectories of all seeds of a cell; trajectories without any
confidence are excluded from them and counted (``n conf/all``). Rows whose method has no native confidence
(the baselines: elicited with the same instruction for measurement) and rows run at a reduced protocol carry
footnotes.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from auq.metrics import PHIS, Trajectory, calibration_report, trajectory_of
from scripts.collect import Agg, RunIndex
from scripts.render import Cell, Footnotes, Table, fmt, write_csv, write_tables
from scripts.runs import load_experiment, method_config, parse_args

EXP_NAME = "auq_main"
OUT = "auq-report"
PHI_LABEL = {"last": "Φ_last", "avg": "Φ_avg", "min": "Φ_min", "prod": "Φ_prod"}


# ---- reading ------------------------------------------------------------------------------------------------

def trajectories(agg: Agg) -> list[Trajectory]:
    """Every answered problem's last episode, pooled over the cell's seeds."""
    out = []
    for r in agg.runs:
        for p in r.predictions():
            if p.get("status", "ok") != "error":
                out.append(trajectory_of(p))
    return out


def problem_success(agg: Agg) -> dict[tuple[int, str], bool]:
    return {(r.seed, p["id"]): float(p.get("score") or 0.0) >= 1.0 for r in agg.runs for p in r.predictions()
            if p.get("status", "ok") != "error"}


def avg_calls(agg: Agg) -> float | None:
    """Average model calls per episode (the paper's cost axis is API calls)."""
    return agg.mean_of(lambda r: r.per_problem("calls"))


def webshop_files_missing(data_root: str | None = None) -> list[str]:
    from envs.data import WEBSHOP_FILES
    from evaluators.data import data_dir

    root = data_dir(data_root) / "webshop"
    return [n for n in WEBSHOP_FILES if not (root / n).is_file()]


def footnotes_for(row: dict[str, Any], aggs: dict[str, Agg], proto: dict[str, Any] | None) -> list[str]:
    out: list[str] = []
    if row.get("native_confidence") is False:
        out.append("no native confidence: the method's own has none (elicited for measurement)")
    recorded = [a.deviations() for a in aggs.values() if a.runs]
    devs = [d for ds in recorded if ds for d in ds] if any(d is not None for d in recorded) else \
        list(((method_config(row["method"]) or {}).get("deviations")) or [])
    for d in devs:
        if str(d) not in out:
            out.append(str(d))
    defaults = ((method_config(row["method"]) or {}).get("params") or {})
    for text in recorded_settings(aggs, defaults):
        if text not in out:
            out.append(text)
    return out


def recorded_settings(aggs: dict[str, Agg], defaults: dict[str, Any] | None = None) -> list[str]:
    """The settings a cell's runs recorded in their config.yaml that differ from the paper's protocol (50 steps)
    or shape the result on a small model (max_tokens, few-shot, Reflexion trials): read from the runs, so a
    footnote says what ran whatever size produced it. Nothing when the runs kept the 50-step cap and the
    method's own few-shot/trial settings (``defaults``: its config's params)."""
    defaults = defaults or {}
    seen: list[str] = []
    for a in aggs.values():
        for r in a.runs:
            cfg = r.config()
            steps = ((cfg.get("benchmark") or {}).get("env") or {}).get("max_steps")
            mt = ((cfg.get("backbone") or {}).get("sampling") or {}).get("max_tokens") \
                or (cfg.get("sampling") or {}).get("max_tokens")
            params = (cfg.get("method") or {}).get("params") or {}
            parts = []
            if steps is not None and int(steps) != 50:
                parts.append(f"step cap {steps} (the paper: 50)")
            for k in ("few_shot", "trials"):
                if k in params and k in defaults and params[k] != defaults[k]:
                    parts.append(f"{k} {params[k]} (its config: {defaults[k]})")
            if parts and mt is not None:
                parts.append(f"max_tokens {mt}")
            text = "ran with " + ", ".join(parts) if parts else ""
            if text and text not in seen:
                seen.append(text)
    return seen


def protocol_record(root: Path, backbone: str) -> dict[str, Any] | None:
    p = Path(root) / OUT / f"protocol-{backbone.split('@')[0]}.json"
    return json.loads(p.read_text(encoding="utf-8")) if p.exists() else None


def backbone_title(backbone: str) -> str:
    return f"{backbone} (the embedded model: not comparable with the paper's GPT-4o/GPT-5.1)" \
        if backbone.startswith("local") else backbone


# ---- Tables 1 and 2 -----------------------------------------------------------------------------------------

def _cells(index: RunIndex, exp: dict[str, Any], backbone: str) -> list[dict[str, Any]]:
    body = []
    for row in exp["rows"]:
        folder = _folder(row)
        aggs = {b: index.agg(b, folder, backbone) for b in exp["benchmarks"]}
        reps = {b: (calibration_report(trajectories(a)) if a.complete else None) for b, a in aggs.items()}
        body.append({"row": row, "folder": folder, "aggs": aggs, "reports": reps})
    return body


def _folder(row: dict[str, Any]) -> str:
    if row.get("name"):
        return str(row["name"])
    cfg = method_config(row["method"]) or {}
    name = (cfg.get("method") or {}).get("name") if isinstance(cfg.get("method"), dict) else cfg.get("name")
    return str(name) if name and "${" not in str(name) else row["method"]


def _status(row, agg: Agg, bench: str) -> str | None:
    if method_config(row["method"]) is None:
        return f"— (not implemented: no configs/method/{row['method']}.yaml)"
    if not agg.runs:
        if bench == "webshop" and webshop_files_missing():
            return "— (WebShop product files missing: `make data`)"
        return "— (not run)"
    if agg.incomplete:
        return agg.incomplete_text()
    return None


def build_table1(index: RunIndex, exp: dict[str, Any], backbone: str, proto: dict[str, Any] | None = None
                 ) -> tuple[list[Table], list[dict[str, Any]]]:
    body = _cells(index, exp, backbone)
    tables, records = [], []
    for bench in exp["benchmarks"]:
        feet = Footnotes()
        cols = ["Method", *[f"{PHI_LABEL[p]} {m}" for p in PHIS for m in ("T-ECE↓", "T-BS↓")], "n conf/all"]
        t = Table(title=f"AUQ Table 1 ({exp['benchmark_labels'].get(bench, bench)}): calibration per aggregation, "
                        f"{backbone_title(backbone)}; T-ECE with 10 equal-width bins",
                  columns=cols, label=f"tab:auq-table1-{bench}-{backbone}")
        for b in body:
            row, agg, rep = b["row"], b["aggs"][bench], b["reports"][bench]
            marks = feet.marks(footnotes_for(row, {bench: agg}, proto))
            label = Cell(row["label"], sup=marks)
            status = _status(row, agg, bench)
            rec = {"backbone": backbone, "benchmark": bench, "method": row["method"], "row": row["label"],
                   "footnotes": feet.numbered(footnotes_for(row, {bench: agg}, proto)),
                   "sources": ";".join(agg.sources(index.root))}
            if status is not None or rep is None:
                t.rows.append([label, *([status or "—"] + [""] * (len(cols) - 2))])
                records.append({**rec, "status": status})
                continue
            n_conf = rep["n"] - rep["no_confidence"]
            if n_conf == 0:
                t.rows.append([label, "— (no step stated a parsable confidence)", *[""] * (len(cols) - 3),
                               f"0/{rep['n']}"])
                records.append({**rec, "status": "no confidence", "n": rep["n"], "n_conf": 0,
                                "missing_steps": rep["missing_steps"], "steps": rep["steps"]})
                continue
            cells = []
            for phi in PHIS:
                pr = rep["phi"][phi]
                cells += [fmt(pr["t_ece"], 3), fmt(pr["t_bs"], 3)]
                rec.update({f"{phi}_t_ece": pr["t_ece"], f"{phi}_t_bs": pr["t_bs"], f"{phi}_n": pr["n"]})
            t.rows.append([label, *cells, f"{n_conf}/{rep['n']}"])
            records.append({**rec, "status": "ok", "n": rep["n"], "n_conf": n_conf, "missing_steps": rep["missing_steps"],
                            "steps": rep["steps"]})
        t.notes = [*feet.notes(), "C(τ) per trajectory = Φ over its steps' verbalised confidences; missing "
                   "confidences are skipped (a trajectory with none is excluded and counted in n conf/all).",
                   "The paper's per-model Table 1 numbers were not recovered (supplement §6): no paper column."]
        tables.append(t)
    return tables, records


def compare(index: RunIndex, exp: dict[str, Any], backbone: str, bench: str) -> dict[str, Any] | None:
    """Per problem (same seed and id): the share of the base's failures ours fixes, of its successes it loses."""
    c = exp.get("compare") or {}
    rows = {r["method"]: r for r in exp["rows"]}
    if c.get("base") not in rows or c.get("ours") not in rows:
        return None
    a, b = index.agg(bench, _folder(rows[c["base"]]), backbone), index.agg(bench, _folder(rows[c["ours"]]), backbone)
    if not (a.complete and b.complete):
        return None
    sa, sb = problem_success(a), problem_success(b)
    common = sorted(set(sa) & set(sb))
    fails = [k for k in common if not sa[k]]
    wins = [k for k in common if sa[k]]
    fixed = sum(1 for k in fails if sb[k])
    regressed = sum(1 for k in wins if not sb[k])
    return {"benchmark": bench, "n": len(common), "base_failures": len(fails), "base_successes": len(wins),
            "fixed": fixed, "regressed": regressed,
            "fixed_pct": 100.0 * fixed / len(fails) if fails else None,
            "regressed_pct": 100.0 * regressed / len(wins) if wins else None}


def build_table2(index: RunIndex, exp: dict[str, Any], backbone: str, proto: dict[str, Any] | None = None
                 ) -> tuple[list[Table], list[dict[str, Any]]]:
    body = _cells(index, exp, backbone)
    paper = exp.get("paper") or {}
    feet = Footnotes()
    benches = exp["benchmarks"]
    labels = exp.get("benchmark_labels") or {}
    cols = ["Method"]
    for bench in benches:
        lab = labels.get(bench, bench)
        cols += [f"{lab} SR % [95%]", f"{lab} AUROC↑ (Φ_last/avg/min/prod)", f"{lab} calls/ep", f"{lab} paper SR"]
    t = Table(title=f"AUQ Table 2: success rate and AUROC of C(τ), {backbone_title(backbone)}", columns=cols,
              label=f"tab:auq-table2-{backbone}")
    records = []
    for b in body:
        row = b["row"]
        marks = feet.marks(footnotes_for(row, b["aggs"], proto))
        cells: list[Any] = [Cell(row["label"], sup=marks)]
        for bench in benches:
            agg, rep = b["aggs"][bench], b["reports"][bench]
            ps = (paper.get("success_rate") or {}).get(row["method"], {}).get(bench)
            pi = (paper.get("inferred_success_rate") or {}).get(row["method"], {}).get(bench)
            paper_txt = fmt(ps) if ps is not None else (f"({fmt(pi)} inferred)" if pi is not None else "—")
            status = _status(row, agg, bench)
            rec = {"backbone": backbone, "benchmark": bench, "method": row["method"], "row": row["label"],
                   "paper_sr": ps, "paper_sr_inferred": pi, "sources": ";".join(agg.sources(index.root))}
            if status is not None or rep is None:
                cells += [status or "—", "", "", paper_txt]
                records.append({**rec, "status": status})
                continue
            ci = agg.ci()
            sr = agg.mean
            aurocs = [rep["phi"][p]["auroc"] for p in PHIS]
            cells += [f"{fmt(sr)} {ci.text() if ci else '[—]'} n={agg.n_problems}",
                      " / ".join(fmt(x, 2) for x in aurocs), fmt(avg_calls(agg)), paper_txt]
            records.append({**rec, "status": "ok", "sr": sr, "ci_low": ci.low if ci else None,
                            "ci_high": ci.high if ci else None, "n": agg.n_problems, "calls_per_episode": avg_calls(agg),
                            **{f"auroc_{p}": a for p, a in zip(PHIS, aurocs)}})
        t.rows.append(cells)
    notes = list(feet.notes())
    notes.append("AUROC is '—' when a cell's trajectories are all successes or all failures (undefined).")
    pc = paper.get("compare") or {}
    for bench in benches:
        cmp = compare(index, exp, backbone, bench)
        lab = labels.get(bench, bench)
        c = exp.get("compare") or {}
        if cmp is None:
            notes.append(f"{lab}: {c.get('ours')} vs {c.get('base')} per problem: — (both cells must be complete)")
        else:
            notes.append(f"{lab}: {c.get('ours')} fixes {fmt(cmp['fixed_pct'])}% of {c.get('base')}'s failures "
                         f"({cmp['fixed']}/{cmp['base_failures']}) and regresses {fmt(cmp['regressed_pct'])}% of its "
                         f"successes ({cmp['regressed']}/{cmp['base_successes']}); the paper: "
                         f"{fmt(pc.get('fixed_pct'))}% / {fmt(pc.get('regressed_pct'))}%")
            records.append({"backbone": backbone, "benchmark": bench, "method": "compare", "row": "compare", **cmp})
    notes.append("Paper SR: Dual 74.3% ALFWorld, 42.5% WebShop (+10.7, +13.6); Forward 63.6% = 89/140 and ReAct "
                 "inferred as 74.3−10.7, 42.5−13.6 (supplement §6). The paper's AUROC values were not recovered.")
    t.notes = notes
    return [t], records


# ---- Figures ------------------------------------------------------------------------------------------------

def system2_events(agg: Agg) -> list[dict[str, Any]]:
    """Every System-2 intervention of a cell's runs: initial and final confidence, the episode's success."""
    out = []
    for r in agg.runs:
        for p in r.predictions():
            if p.get("status", "ok") == "error" or not p.get("episodes"):
                continue
            ok = float(p.get("score") or 0.0) >= 1.0
            for row in p["episodes"][-1].get("trajectory") or []:
                a = ((row.get("extra") or {}).get("auq") or {})
                if a.get("system2"):
                    out.append({"id": p["id"], "seed": r.seed, "step": row.get("step"), "success": ok,
                                "c_init": a.get("c_init"), "c_final": a.get("c_final"),
                                "expanded": bool(a.get("expanded"))})
    return out


def belief_traces(agg: Agg) -> dict[str, list[list[float | None]]]:
    out: dict[str, list[list[float | None]]] = {"success": [], "failure": []}
    for t in trajectories(agg):
        out["success" if t.success else "failure"].append(list(t.confidences))
    return out


def _mean_by_step(traces: list[list[float | None]]) -> tuple[list[int], list[float]]:
    xs, ys = [], []
    for i in range(max((len(t) for t in traces), default=0)):
        vals = [t[i] for t in traces if i < len(t) and t[i] is not None]
        if vals:
            xs.append(i + 1)
            ys.append(sum(vals) / len(vals))
    return xs, ys


def figure3(index: RunIndex, exp: dict[str, Any], backbone: str, out_dir: Path) -> tuple[list[Path], dict[str, Any]]:
    from scripts.figstyle import empty_panel, plt, save

    f3 = exp["figures"]["fig3"]
    rows = {r["method"]: r for r in exp["rows"]}
    bench = f3["benchmark"]
    counts = (exp.get("paper") or {}).get("fig3_counts") or {}
    pyplot = plt()
    fig, (ax1, ax2) = pyplot.subplots(1, 2, figsize=(11, 4))
    data: dict[str, Any] = {"benchmark": bench, "backbone": backbone}
    drew = False
    for key, style in (("uam", "--"), ("dual", "-")):
        m = f3[key]
        agg = index.agg(bench, _folder(rows[m]), backbone)
        if not agg.complete:
            data[m] = {"status": "incomplete" if agg.runs else "not run"}
            continue
        tr = belief_traces(agg)
        pc = counts.get(m, {})
        data[m] = {"success": len(tr["success"]), "failure": len(tr["failure"]), "paper": pc}
        for outcome, colour in (("success", "tab:green"), ("failure", "tab:red")):
            xs, ys = _mean_by_step(tr[outcome])
            if xs:
                drew = True
                ax1.plot(xs, ys, style, marker="o", ms=3, color=colour,
                         label=f"{rows[m]['label']} {outcome} (n={len(tr[outcome])}; paper {pc.get(outcome, '—')})")
    tau = _tau_of(exp, backbone, index, rows[f3["dual"]], bench)
    if drew:
        ax1.axhline(tau, color="grey", lw=0.8, ls=":", label=f"τ = {tau:g}")
        ax1.set_xlabel("step")
        ax1.set_ylabel("mean verbalised confidence")
        ax1.set_title("Belief traces")
        ax1.legend(fontsize=7)
    else:
        empty_panel(ax1, "no complete UAM-only / Dual runs on disk")
    dual = index.agg(bench, _folder(rows[f3["dual"]]), backbone)
    ev = [e for e in system2_events(dual) if e["c_init"] is not None and e["c_final"] is not None] if dual.complete else []
    data["system2"] = _delta_summary(ev)
    if ev:
        for ok, colour in ((True, "tab:green"), (False, "tab:red")):
            pts = [e for e in ev if e["success"] == ok]
            ax2.scatter([e["c_init"] for e in pts], [e["c_final"] for e in pts], s=14, alpha=0.6, color=colour,
                        label=f"{'success' if ok else 'failure'} episodes (n={len(pts)}, mean Δ="
                              f"{fmt(data['system2'][('success' if ok else 'failure')]['mean_delta'], 2)})")
        ax2.plot([0, 1], [0, 1], color="grey", lw=0.8)
        ax2.set_xlabel("confidence before System 2 (c_init)")
        ax2.set_ylabel("confidence after System 2")
        ax2.set_title("System-2 interventions (Δ = after − before)")
        ax2.legend(fontsize=7)
    else:
        empty_panel(ax2, "no System-2 interventions with both confidences on disk")
    fig.suptitle(f"AUQ Figure 3 ({bench}, {backbone})", fontsize=10)
    return save(fig, out_dir / f"figure3-{backbone}"), data


def _delta_summary(ev: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {"n": len(ev)}
    for ok, name in ((True, "success"), (False, "failure")):
        d = [e["c_final"] - e["c_init"] for e in ev if e["success"] == ok]
        out[name] = {"n": len(d), "mean_delta": sum(d) / len(d) if d else None}
    return out


def _tau_of(exp, backbone, index, row, bench) -> float:
    agg = index.agg(bench, _folder(row), backbone)
    for r in agg.runs:
        tau = ((r.config().get("method") or {}).get("params") or {}).get("tau")
        if tau is not None:
            return float(tau)
    return float((((method_config(row["method"]) or {}).get("method") or {}).get("params") or {}).get("tau", 0.85))


def _h_name(h: Any) -> str:
    return "full" if h is None else f"h{int(h)}"


def window_experiment(exp: dict[str, Any], h: Any) -> str:
    return exp["figures"]["fig4"]["experiment"].format(h=_h_name(h))


def tau_experiment(exp: dict[str, Any], tau: float, h: Any) -> str:
    return exp["figures"]["fig6"]["experiment"].format(tau=f"{tau:g}", h=_h_name(h))


def _sr(agg: Agg) -> float | None:
    return agg.mean if agg.complete else None


def figure4(root: Path, exp: dict[str, Any], backbone: str, out_dir: Path) -> tuple[list[Path], dict[str, Any]]:
    from scripts.figstyle import empty_panel, plt, save

    f4 = exp["figures"]["fig4"]
    rows = {r["method"]: r for r in exp["rows"]}
    pyplot = plt()
    fig, ax = pyplot.subplots(figsize=(6, 4))
    data: dict[str, Any] = {"windows": [_h_name(h) for h in f4["windows"]]}
    drew = False
    for m in f4["methods"]:
        pts = []
        for i, h in enumerate(f4["windows"]):
            agg = RunIndex.scan(root, window_experiment(exp, h)).agg(f4["benchmark"], _folder(rows[m]), backbone)
            pts.append((i, _sr(agg), agg.incomplete))
        data[m] = [{"h": _h_name(h), "sr": sr, "incomplete": inc} for h, (_, sr, inc) in zip(f4["windows"], pts)]
        xs = [i for i, sr, _ in pts if sr is not None]
        if xs:
            drew = True
            ax.plot(xs, [sr for _, sr, _ in pts if sr is not None], "o-", label=rows[m]["label"])
    if drew:
        ax.set_xticks(range(len(f4["windows"])), data["windows"])
        ax.set_xlabel("memory window h")
        ax.set_ylabel("success rate (%)")
        ax.legend()
    else:
        empty_panel(ax, "no complete memory-window runs on disk (make reproduce-auq-fig4)")
    ax.set_title(f"AUQ Figure 4: memory window ({f4['benchmark']}, {backbone}); paper: AUQ +5.0 at h=1", fontsize=9)
    return save(fig, out_dir / f"figure4-{backbone}"), data


def fig5_bars(exp: dict[str, Any]) -> list[dict[str, Any]]:
    rows = {r["method"]: r for r in exp["rows"]}
    return [{**b, "folder": b.get("name") or _folder(rows[b["method"]])} for b in exp["figures"]["fig5"]["bars"]]


def figure5(root: Path, exp: dict[str, Any], backbone: str, out_dir: Path) -> tuple[list[Path], dict[str, Any]]:
    from scripts.figstyle import empty_panel, plt, save

    f5 = exp["figures"]["fig5"]
    index = RunIndex.scan(root, f5["experiment"])
    pyplot = plt()
    fig, ax = pyplot.subplots(figsize=(6, 4))
    data: dict[str, Any] = {"bars": []}
    for b in fig5_bars(exp):
        agg = index.agg(f5["benchmark"], b["folder"], backbone)
        data["bars"].append({"label": b["label"], "sr": _sr(agg), "incomplete": agg.incomplete,
                             "calls_per_episode": avg_calls(agg) if agg.complete else None})
    if any(b["sr"] is not None for b in data["bars"]):
        ax.bar(range(len(data["bars"])), [b["sr"] or 0.0 for b in data["bars"]],
               color=["tab:grey", "tab:blue", "tab:orange"][: len(data["bars"])])
        ax.set_xticks(range(len(data["bars"])), [b["label"] + ("" if b["sr"] is not None else "\n(—)")
                                                 for b in data["bars"]], fontsize=8)
        ax.set_ylabel("success rate (%)")
    else:
        empty_panel(ax, "no complete h=5 runs on disk (make reproduce-auq-fig5)")
    ax.set_title(f"AUQ Figure 5: memory expansion at h={f5['window']} ({backbone}); paper: +17.9 (GPT-5.1)", fontsize=9)
    return save(fig, out_dir / f"figure5-{backbone}"), data


def figure6(root: Path, exp: dict[str, Any], backbone: str, out_dir: Path) -> tuple[list[Path], dict[str, Any]]:
    from scripts.figstyle import empty_panel, plt, save

    f6 = exp["figures"]["fig6"]
    rows = {r["method"]: r for r in exp["rows"]}
    pyplot = plt()
    fig, (ax1, ax2) = pyplot.subplots(1, 2, figsize=(11, 4))
    data: dict[str, Any] = {"ours": {}, "paper": (exp.get("paper") or {}).get("fig6") or {}}
    drew = False
    for h in f6["windows"]:
        pts = []
        for tau in f6["taus"]:
            agg = RunIndex.scan(root, tau_experiment(exp, tau, h)).agg(f6["benchmark"], _folder(rows[f6["method"]]),
                                                                        backbone)
            pts.append({"tau": tau, "sr": _sr(agg), "calls_per_episode": avg_calls(agg) if agg.complete else None,
                        "incomplete": agg.incomplete})
        data["ours"][_h_name(h)] = pts
        ok = [p for p in pts if p["sr"] is not None and p["calls_per_episode"] is not None]
        if ok:
            drew = True
            ax1.plot([p["calls_per_episode"] for p in ok], [p["sr"] for p in ok], "o-", label=f"ours ({_h_name(h)})")
            for p in ok:
                ax1.annotate(f"τ={p['tau']:g}", (p["calls_per_episode"], p["sr"]), fontsize=7)
    if drew:
        ax1.set_xscale("log")
        ax1.set_xlabel("average API calls per episode (log)")
        ax1.set_ylabel("success rate (%)")
        ax1.legend(fontsize=8)
    else:
        empty_panel(ax1, "no complete τ-sweep runs on disk (make reproduce-auq-fig6)")
    ax1.set_title(f"ours ({f6['benchmark']}, {backbone})", fontsize=9)
    for name, pts in data["paper"].items():
        taus = sorted(pts, key=float)
        ax2.plot([pts[t][0] for t in taus], [pts[t][1] for t in taus], "o-", label=name)
        for t in taus:
            ax2.annotate(f"{float(t):g}", tuple(pts[t]), fontsize=6)
    ax2.set_xscale("log")
    ax2.set_xlabel("API calls as on the paper's slide (log)")
    ax2.set_ylabel("success rate (%)")
    ax2.set_title("paper (Figure 6, read from the slide, ±~3% on calls)", fontsize=9)
    ax2.legend(fontsize=7)
    fig.suptitle("AUQ Figure 6: τ Pareto (τ ∈ {0.8, 0.85, 0.9, 0.95})", fontsize=10)
    return save(fig, out_dir / f"figure6-{backbone}"), data


# ---- writing ------------------------------------------------------------------------------------------------

T1_FIELDS = ["backbone", "benchmark", "row", "method", "status", "n", "n_conf", "steps", "missing_steps",
             *[f"{p}_{m}" for p in PHIS for m in ("t_ece", "t_bs", "n")], "footnotes", "sources"]
T2_FIELDS = ["backbone", "benchmark", "row", "method", "status", "sr", "ci_low", "ci_high", "n", "calls_per_episode",
             *[f"auroc_{p}" for p in PHIS], "paper_sr", "paper_sr_inferred", "fixed", "base_failures", "fixed_pct",
             "regressed", "base_successes", "regressed_pct", "sources"]


def backbones(root: Path, exp: dict[str, Any]) -> list[str]:
    names = set(RunIndex.scan(root, exp["experiment"]).backbones())
    for h in exp["figures"]["fig4"]["windows"]:
        names |= set(RunIndex.scan(root, window_experiment(exp, h)).backbones())
    return sorted(names)


def write_all(results_root: Path, backbone: str | None = None, exp: dict[str, Any] | None = None) -> dict[str, Any]:
    """Every AUQ table and figure for each backbone on disk (or ``backbone``); zero backbone calls."""
    exp = exp or load_experiment(EXP_NAME)
    root = Path(results_root)
    out_dir = root / OUT
    paths: list[Path] = []
    data: dict[str, Any] = {}
    index = RunIndex.scan(root, exp["experiment"])
    for bb in ([backbone] if backbone else backbones(root, exp) or ["local"]):
        proto = protocol_record(root, bb)
        t1, r1 = build_table1(index, exp, bb, proto)
        t2, r2 = build_table2(index, exp, bb, proto)
        for name, tables, recs, fields in (("table1", t1, r1, T1_FIELDS), ("table2", t2, r2, T2_FIELDS)):
            md, tex = write_tables(out_dir / f"{name}-{bb}", tables,
                                   header="<!-- generated by python -m scripts.auq_tables build; do not edit -->")
            csv = out_dir / f"{name}-{bb}.csv"
            write_csv(csv, recs, fields)
            paths += [md, tex, csv]
        figs: dict[str, Any] = {}
        for name, fn, arg in (("figure3", figure3, index), ("figure4", figure4, root), ("figure5", figure5, root),
                              ("figure6", figure6, root)):
            ps, d = fn(arg, exp, bb, out_dir)
            paths += ps
            figs[name] = d
        fjson = out_dir / f"figures-{bb}.json"
        fjson.write_text(json.dumps(figs, indent=1, default=str), encoding="utf-8")
        paths.append(fjson)
        data[bb] = {"table1": r1, "table2": r2, "figures": figs, "tables": t1 + t2}
    return {"paths": paths, "data": data}


# ---- running ------------------------------------------------------------------------------------------------

def resolve_protocol(exp: dict[str, Any], backbone: str, size: str | None) -> dict[str, Any]:
    name = size or (exp.get("protocol_by_backbone") or {}).get(backbone) or exp.get("default_protocol", "paper")
    if name not in exp["protocols"]:
        raise SystemExit(f"size={name!r}: one of {sorted(exp['protocols'])} (scripts/experiments/{EXP_NAME}.yaml)")
    return {"name": name, **exp["protocols"][name]}


def plan_items(exp: dict[str, Any], what: str, backbone: str, proto: dict[str, Any],
               methods: list[str] | None = None) -> list[tuple[str, list[str]]]:
    """(label, Hydra overrides) of every run ``what`` needs: table1/table2 (the same runs), fig4, fig5, fig6."""
    rows = {r["method"]: r for r in exp["rows"]}
    seeds = proto.get("seeds") or [42]
    base = [f"backbone={backbone}", *proto.get("overrides", [])]

    def run(m: str, bench: str, experiment: str, extra: list[str]) -> list[tuple[str, list[str]]]:
        if method_config(m) is None:
            return []
        lim = (proto.get("limit") or {}).get(bench)
        out = []
        for s in seeds:
            ov = [*base, f"method={m}", f"benchmark={bench}", f"experiment={experiment}", f"seed={s}",
                  *(exp.get("benchmark_overrides") or {}).get(bench, []), *(rows.get(m, {}).get("overrides") or []),
                  *((proto.get("method_overrides") or {}).get(m) or []),
                  *extra, *([f"limit={lim}"] if lim is not None else [])]
            out.append((f"{experiment}/{bench}/{m}{' '.join(extra) and ' ' + ' '.join(extra)}/seed={s}", ov))
        return out

    items: list[tuple[str, list[str]]] = []
    figs = exp["figures"]
    if what in ("table1", "table2", "fig3", "all"):
        for row in exp["rows"]:
            if methods and row["method"] not in methods:
                continue
            for bench in exp["benchmarks"]:
                if bench == "webshop" and webshop_files_missing():
                    continue
                items += run(row["method"], bench, exp["experiment"], [])
    if what in ("fig4", "all"):
        for h in figs["fig4"]["windows"]:
            for m in figs["fig4"]["methods"]:
                items += run(m, figs["fig4"]["benchmark"], window_experiment(exp, h),
                             [f"method.params.window={'null' if h is None else int(h)}"])
    if what in ("fig5", "fig4", "all"):
        f5 = figs["fig5"]
        for b in fig5_bars(exp):
            extra = [f"method.params.window={int(f5['window'])}", *(b.get("overrides") or []),
                     *([f"method.name={b['name']}"] if b.get("name") else [])]
            items += run(b["method"], f5["benchmark"], f5["experiment"], extra)
    if what in ("fig6", "all"):
        f6 = figs["fig6"]
        for h in f6["windows"]:
            for tau in f6["taus"]:
                items += run(f6["method"], f6["benchmark"], tau_experiment(exp, tau, h),
                             [f"method.params.window={'null' if h is None else int(h)}", f"method.params.tau={tau}"])
    seen: set[str] = set()
    uniq = []
    for label, ov in items:
        if label not in seen:
            seen.add(label)
            uniq.append((label, ov))
    return uniq


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    cmd = argv.pop(0) if argv and "=" not in argv[0] else "build"
    opts, rest = parse_args(argv, {"results_root": "results", "backbone": None, "what": "table1", "size": None,
                                   "methods": None, "dry_run": "false"})
    exp = load_experiment(EXP_NAME)
    root = Path(opts["results_root"])
    bad: list[Any] = []
    if cmd == "run":
        from scripts.runs import Planned, execute, plan, require_backbone_key

        backbone = opts["backbone"] or "local"
        require_backbone_key(backbone)
        proto = resolve_protocol(exp, backbone, opts["size"])
        methods = [m.strip() for m in opts["methods"].split(",")] if opts["methods"] else None
        items = plan_items(exp, opts["what"], backbone, proto, methods)
        if webshop_files_missing() and opts["what"] in ("table1", "table2", "all"):
            print("WebShop: product files missing (items_shuffle_1000.json, items_human_ins.json): its cells say so; "
                  "`make data` with internet access fetches them")
        print(f"{len(items)} runs at size {proto['name']} on {backbone}:")
        for label, _ in items:
            print("  " + label)
        if opts["dry_run"].lower() == "true":
            return 0
        (root / OUT).mkdir(parents=True, exist_ok=True)
        extra = [o for o in rest if not o.startswith(("cache.", "runner.progress"))]
        (root / OUT / f"protocol-{backbone}.json").write_text(json.dumps({**proto, "extra_overrides": extra}, indent=1),
                                                              encoding="utf-8")
        planned = plan([Planned(label, [f"results_root={root}", *ov, *rest]) for label, ov in items], [])
        execute(planned)
        out = write_all(root, backbone, exp)
        bad = [it for it in planned if it.state != "done"]
        for it in bad:
            print(f"not complete: {it.label} ({it.state}{': ' + it.error if it.error else ''})", file=sys.stderr)
    elif cmd == "build":
        if rest:
            raise SystemExit(f"unknown arguments {rest}")
        out = write_all(root, opts["backbone"], exp)
    else:
        raise SystemExit(f"command {cmd!r}: build | run")
    for p in out["paths"]:
        print(p)
    for bb, d in out["data"].items():
        for t in d["tables"]:
            print(t.to_markdown())
    return 1 if cmd == "run" and bad else 0


if __name__ == "__main__":
    from scripts.runs import run_cli

    run_cli(main)
