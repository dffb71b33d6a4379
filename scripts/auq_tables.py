"""AUQ's tables and figures (arXiv 2601.15703) from ``results/`` alone, and the command that runs them.

    python -m agentic_repro.scripts.auq_tables build [results_root=results] [backbone=local]   # zero backbone calls
    python -m agentic_repro.scripts.auq_tables run what=table1 backbone=local [size=smoke]       # run, then build
    python -m agentic_repro.scripts.auq_tables run what=fig4|fig5|fig6|all backbone=local dry_run=true

Everything it reads is in ``scripts/experiments/auq_main.yaml`` (rows, benchmarks, sweeps, size protocols, the
paper's numbers). Writes under ``results/auq-report/``:

- ``table1-<backbone>.{md,tex,csv}``: calibration per aggregation (T-ECE, T-BS for Φ_last, Φ_avg, Φ_min, Φ_prod),
  one table per benchmark; T-ECE's bins and edge convention are the yaml's ``t_ece`` option (:mod:`agentic_repro.auq.metrics`),
  the other convention's value shown beside a cell where they differ by more than ``show_other_above``.
- ``table2-<backbone>.{md,tex,csv}``: success rate [95% Wilson interval] and AUROC of C(τ) per aggregation,
  the paper's SR beside ours; the "fixes x% of ReAct failures, regresses y% of its successes" comparison.
- ``figure3-<backbone>``: belief traces (mean confidence by step, UAM-only vs Dual, success vs failure, with the
  success/failure counts, the paper's counts in the legend) and the Δ scatter of System-2 interventions.
- ``figure4-<backbone>``: SR vs memory window h (ReAct vs AUQ without expansion, the paper's arms);
  ``figure5-<backbone>``: memory expansion at h = 5 and the full-memory bars; ``figure5-models``: the gains per
  backbone on disk beside the paper's (cross-model); ``figure6-<backbone>``: τ Pareto (SR vs average API calls
  per episode) beside the paper's points; ``figures-<backbone>.md``: each figure's protocol line.

Each table and figure runs with the paper's settings for it (yaml ``settings``: Tables 1-2 and Figure 3 at h = 5,
τ = 0.85, as the headline) and prints a protocol line generated from what its runs recorded, set against those
settings; a WebShop cell scored without the original's spaCy tagger is footnoted (yaml ``webshop_tagger``).

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

from agentic_repro.auq.metrics import BIN_CONVENTION, BIN_TEXT, N_BINS, PHIS, Trajectory, calibration_report, trajectory_of
from agentic_repro.scripts.collect import Agg, RunIndex
from agentic_repro.scripts.protocol import compare as compare_setting
from agentic_repro.scripts.protocol import judge_of, models, n_modes, num, sampling, split_of
from agentic_repro.scripts.render import Cell, Footnotes, Table, fmt, write_csv, write_tables
from agentic_repro.scripts.runs import load_experiment, method_config, parse_args

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
    from agentic_repro.envs.data import WEBSHOP_FILES
    from agentic_repro.evaluators.data import data_dir

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


# ---- protocol lines ---------------------------------------------------------------------------------------
# What a table's or figure's runs recorded, set against the paper's settings for it (auq_main.yaml `settings`):
# generated from config.yaml / meta.json / calls.jsonl / predictions, never typed.

AUQ_SETTINGS = (("tau", "τ"), ("memory_expansion", "memory expansion"), ("n_paths", "N"), ("max_refinements", "D"),
                ("temperature", "System-2 T"))


def _h(v: Any) -> str:
    return "full" if v is None else num(v)


def _onoff(v: Any) -> Any:
    return ("on" if v else "off") if isinstance(v, bool) else v


def _distinct(values: list[Any]) -> list[Any]:
    out: list[Any] = []
    for v in values:
        if v not in out:
            out.append(v)
    return out


def compare_sweep(name: str, ours: list[Any], paper: Any) -> str:
    """As :func:`agentic_repro.scripts.protocol.compare`, but a paper list is a sweep (Figure 4's windows, Figure 6's τ): ours
    matches when every value we ran is one of its points."""
    if not isinstance(paper, list) or not ours:
        return compare_setting(name, ours, paper)
    want = [num(v) for v in paper]
    txt = "/".join(num(v) for v in ours)
    if all(num(v) in want for v in ours):
        return f"{name} {txt} (points of the paper's {'/'.join(want)})"
    return f"{name} {txt} ≠ paper {'/'.join(want)}"


def run_params(run: Any) -> dict[str, Any]:
    return (run.config().get("method") or {}).get("params") or {}


def tagger_of(run: Any) -> list[str]:
    """The WebShop noun taggers a run's scored problems recorded (score_details.noun_tagger)."""
    return _distinct([str((p.get("score_details") or {}).get("noun_tagger") or "not recorded")
                      for p in run.predictions() if p.get("status", "ok") != "error"])


def t_ece_setting(exp: dict[str, Any]) -> dict[str, Any]:
    t = exp.get("t_ece") or {}
    return {"bins": int(t.get("bins", N_BINS)), "convention": t.get("convention", BIN_CONVENTION),
            "show_other_above": float(t.get("show_other_above", 0.01))}


def protocol_parts(runs: list[Any], paper: dict[str, Any], bench: str, exp: dict[str, Any] | None = None
                   ) -> list[str]:
    """One benchmark's settings as its runs recorded them, each "= paper", "≠ paper X" or "(paper: not stated)"."""
    if not runs:
        return []
    parts = [compare_setting("backbone", models(runs), paper.get("backbone"))]
    splits = [split_of(r) for r in runs]
    parts.append(compare_setting("split", _distinct([s for s, _, _ in splits]), (paper.get("split") or {}).get(bench)))
    n_txt = "/".join(_distinct([f"{sel}" + (f" of {tot}" if tot is not None else "") for _, sel, tot in splits]))
    pn = (paper.get("n") or {}).get(bench)
    same_n = pn is not None and all(sel == pn for _, sel, _ in splits)
    parts.append(f"n {n_txt}" + (" (paper: not stated)" if pn is None else " = paper" if same_n else f" ≠ paper {pn}"))
    parts.append("seeds " + "/".join(str(s) for s in _distinct([r.seed for r in runs])))
    windows = [_h(run_params(r)["window"]) for r in runs if "window" in run_params(r)]
    pw = paper.get("window", "not in yaml")
    if pw != "not in yaml":
        parts.append(compare_sweep("window h", _distinct(windows),
                                     [_h(w) for w in pw] if isinstance(pw, list) else _h(pw)))
    steps = _distinct([((r.config().get("benchmark") or {}).get("env") or {}).get("max_steps") for r in runs])
    parts.append(compare_setting("step cap", [s for s in steps if s is not None], paper.get("max_steps")))
    mt = _distinct([sampling(r).get("max_tokens") for r in runs if sampling(r).get("max_tokens") is not None])
    if mt:
        parts.append(compare_setting("max_tokens", mt, None))
    auq = [r for r in runs if run_params(r).get("variant") in ("inverse", "dual")]
    for key, label in AUQ_SETTINGS:
        vals = _distinct([_onoff(run_params(r)[key]) for r in auq if key in run_params(r)])
        if vals and key in paper:
            pv = paper[key]
            parts.append(compare_sweep(label, vals, [_onoff(v) for v in pv] if isinstance(pv, list) else _onoff(pv)))
    parts += [m for m in [n_modes(runs)] if m]   # a method that samples: how its n samples reached the provider
    judges = _distinct([j for j in map(judge_of, runs) if j])
    if judges:
        parts.append(f"scored by judge {'/'.join(judges)}")
    if bench == "webshop":
        orig = ((exp or {}).get("webshop_tagger") or {}).get("original")
        tags = _distinct([t for r in runs for t in tagger_of(r)])
        parts.append(f"noun tagger {'/'.join(tags)}" + ("" if orig is None else
                                                       " = the original's" if all(t.startswith(orig) for t in tags)
                                                       else f" ≠ the original's {orig}"))
    return parts


def protocol_line(exp: dict[str, Any], which: str, runs_by_bench: dict[str, list[Any]], extra: list[str] = ()
                  ) -> str | None:
    """"Protocol (recorded by the runs; paper settings for <which>: <source>): ALFWorld: ... | WebShop: ..."."""
    paper = ((exp.get("settings") or {}).get(which) or {}).get("paper") or {}
    return note_line(exp, which, {b: protocol_parts(runs, paper, b, exp) for b, runs in runs_by_bench.items()}, extra)


def note_line(exp: dict[str, Any], which: str, parts_by_bench: dict[str, list[str]], extra: list[str] = ()
              ) -> str | None:
    """The table-level protocol note from per-benchmark parts (all of a figure's, or what a table's rows share)."""
    st = (exp.get("settings") or {}).get(which) or {}
    labels = exp.get("benchmark_labels") or {}
    per = [f"{labels.get(b, b)}: " + "; ".join(ps) for b, ps in parts_by_bench.items() if ps]
    if not per and not extra:
        return None
    head = f"Protocol (recorded by the runs, against the paper's {which} settings"
    head += f" [{st['source']}]" if st.get("source") else ""
    return head + "): " + " | ".join([*per, *extra])


#: The table note's pointer to the rows' own lines (a table's note holds only what every row that ran shares).
EACH_ROW = "a row's other settings: on its ↳ protocol line"


def row_protocols(exp: dict[str, Any], which: str, body: list[dict[str, Any]], benches: list[str]
                  ) -> tuple[dict[str, dict[str, str]], dict[str, list[str]]]:
    """(per method row and benchmark its ``↳ protocol`` text, per benchmark the parts every row that ran shares):
    each row's settings as its own runs recorded them against the paper's (backbone, split and n, seeds, window,
    τ/N/D, step cap, n_mode, judge); what all rows share goes to the table's note once, the rest stays on the row.
    A row with no run on a benchmark has no text there."""
    paper = ((exp.get("settings") or {}).get(which) or {}).get("paper") or {}
    parts = {b["row"]["label"]: {bench: protocol_parts(list(b["aggs"][bench].runs), paper, bench, exp)
                                 for bench in benches} for b in body}
    common: dict[str, list[str]] = {}
    for bench in benches:
        ran = [p[bench] for p in parts.values() if p[bench]]
        common[bench] = [x for x in ran[0] if all(x in r for r in ran[1:])] if ran else []
    rows = {label: {bench: "; ".join(x for x in ps if x not in common[bench]) or "the note's settings"
                    for bench, ps in p.items() if ps} for label, p in parts.items()}
    return rows, common


def t_ece_protocol(exp: dict[str, Any]) -> str:
    t = t_ece_setting(exp)
    other = "right_closed" if t["convention"] == "left_closed" else "left_closed"
    return (f"T-ECE: {t['bins']} equal-width bins, {BIN_TEXT[t['convention']]} (paper: not stated, no AUQ code "
            f"released; option t_ece.convention); a cell shows the {other.replace('_', '-')} value beside it where "
            f"the two differ by more than {num(t['show_other_above'])}")


def tagger_footnote(exp: dict[str, Any], aggs: list[Agg]) -> str | None:
    """The footnote of a WebShop cell whose runs did not use the original's noun tagger (None if they did)."""
    wt = exp.get("webshop_tagger") or {}
    orig = wt.get("original", "spacy:en_core_web_lg")
    tags = _distinct([t for a in aggs for r in a.runs for t in tagger_of(r)])
    if not tags or all(t.startswith(orig) for t in tags):
        return None
    return (f"WebShop scored with the noun tagger {'/'.join(tags)} (recorded by the runs), not the original's "
            f"{orig}: {wt.get('disagreement', 'disagreement not measured')}")


# ---- Tables 1 and 2 -----------------------------------------------------------------------------------------

def _cells(index: RunIndex, exp: dict[str, Any], backbone: str) -> list[dict[str, Any]]:
    body = []
    for row in exp["rows"]:
        folder = _folder(row)
        aggs = {b: index.agg(b, folder, backbone) for b in exp["benchmarks"]}
        te = t_ece_setting(exp)
        reps = {b: (calibration_report(trajectories(a), n_bins=te["bins"], convention=te["convention"])
                    if a.complete else None) for b, a in aggs.items()}
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
    te = t_ece_setting(exp)
    tables, records = [], []
    row_proto, common = row_protocols(exp, "main", body, exp["benchmarks"])
    for bench in exp["benchmarks"]:
        feet = Footnotes()
        under: list[tuple[int, list[Any]]] = []
        cols = ["Method", *[f"{PHI_LABEL[p]} {m}" for p in PHIS for m in ("T-ECE↓", "T-BS↓")], "n conf/all"]
        t = Table(title=f"AUQ Table 1 ({exp['benchmark_labels'].get(bench, bench)}): calibration per aggregation, "
                        f"{backbone_title(backbone)}; T-ECE with {te['bins']} equal-width bins, "
                        f"{te['convention'].replace('_', '-')}",
                  columns=cols, label=f"tab:auq-table1-{bench}-{backbone}")
        for b in body:
            row, agg, rep = b["row"], b["aggs"][bench], b["reports"][bench]
            feats = footnotes_for(row, {bench: agg}, proto)
            tag = tagger_footnote(exp, [agg]) if bench == "webshop" else None
            feats += [tag] if tag else []
            marks = feet.marks(feats)
            label = Cell(row["label"], sup=marks)
            status = _status(row, agg, bench)
            proto = row_proto[row["label"]].get(bench)
            rec = {"backbone": backbone, "benchmark": bench, "method": row["method"], "row": row["label"],
                   "footnotes": feet.numbered(feats), "t_ece_convention": te["convention"],
                   "sources": ";".join(agg.sources(index.root)), "protocol": proto}
            if proto is not None:   # the row's own protocol line goes under the one row this body row appends
                under.append((len(t.rows) + 1, [Cell("↳ protocol: " + proto), *[""] * (len(cols) - 1)]))
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
                ece = fmt(pr["t_ece"], 3)
                if pr["t_ece"] is not None and pr["t_ece_other"] is not None \
                        and abs(pr["t_ece"] - pr["t_ece_other"]) > te["show_other_above"]:
                    ece += f" ({rep['bin_convention_other'].split('_')[0]}-closed {fmt(pr['t_ece_other'], 3)})"
                cells += [ece, fmt(pr["t_bs"], 3)]
                rec.update({f"{phi}_t_ece": pr["t_ece"], f"{phi}_t_ece_other": pr["t_ece_other"],
                            f"{phi}_t_bs": pr["t_bs"], f"{phi}_n": pr["n"]})
            t.rows.append([label, *cells, f"{n_conf}/{rep['n']}"])
            records.append({**rec, "status": "ok", "n": rep["n"], "n_conf": n_conf, "missing_steps": rep["missing_steps"],
                            "steps": rep["steps"]})
        for at, prow in reversed(under):
            t.rows.insert(at, prow)
        line = note_line(exp, "main", {bench: common[bench]}, [t_ece_protocol(exp), EACH_ROW])
        t.notes = [*feet.notes(), "C(τ) per trajectory = Φ over its steps' verbalised confidences; missing "
                   "confidences are skipped (a trajectory with none is excluded and counted in n conf/all).",
                   "The paper's per-model Table 1 numbers were not recovered (supplement §6): no paper column.",
                   *([line] if line else [])]
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
    row_proto, common = row_protocols(exp, "main", body, benches)
    for b in body:
        row = b["row"]
        marks = feet.marks(footnotes_for(row, b["aggs"], proto))
        cells: list[Any] = [Cell(row["label"], sup=marks)]
        own = row_proto[row["label"]]
        for bench in benches:
            agg, rep = b["aggs"][bench], b["reports"][bench]
            ps = (paper.get("success_rate") or {}).get(row["method"], {}).get(bench)
            pi = (paper.get("inferred_success_rate") or {}).get(row["method"], {}).get(bench)
            paper_txt = fmt(ps) if ps is not None else (f"({fmt(pi)} inferred)" if pi is not None else "—")
            status = _status(row, agg, bench)
            rec = {"backbone": backbone, "benchmark": bench, "method": row["method"], "row": row["label"],
                   "paper_sr": ps, "paper_sr_inferred": pi, "sources": ";".join(agg.sources(index.root)),
                   "protocol": own.get(bench)}
            if status is not None or rep is None:
                cells += [status or "—", "", "", paper_txt]
                records.append({**rec, "status": status})
                continue
            ci = agg.ci()
            sr = agg.mean
            aurocs = [rep["phi"][p]["auroc"] for p in PHIS]
            tag = tagger_footnote(exp, [agg]) if bench == "webshop" else None
            cells += [Cell(f"{fmt(sr)} {ci.text() if ci else '[—]'} {agg.n_text()}", sup=feet.marks([tag]) if tag else ""),
                      " / ".join(fmt(x, 2) for x in aurocs), fmt(avg_calls(agg)), paper_txt]
            records.append({**rec, "status": "ok", "sr": sr, "ci_low": ci.low if ci else None,
                            "ci_high": ci.high if ci else None, "n": agg.n_problems, "calls_per_episode": avg_calls(agg),
                            **{f"auroc_{p}": a for p, a in zip(PHIS, aurocs)}})
        t.rows.append(cells)
        if own:   # the row's protocol line: per benchmark, under its SR cell (the paper SR beside it)
            t.rows.append([Cell("↳ protocol"), *[x for bench in benches for x in (own.get(bench, "not run"), "", "", "")]])
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
    line = note_line(exp, "main", common, [EACH_ROW])
    t.notes = notes + ([line] if line else [])
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
    from agentic_repro.scripts.figstyle import empty_panel, plt, save

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
    data["protocol"] = protocol_line(exp, "main", {bench: [r for k in ("uam", "dual")
                                                           for r in index.agg(bench, _folder(rows[f3[k]]), backbone).runs]})
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


def fig4_arms(exp: dict[str, Any]) -> list[dict[str, Any]]:
    """Figure 4's arms with their result folders (``name`` when the arm's overrides make it another run)."""
    rows = {r["method"]: r for r in exp["rows"]}
    return [{**a, "folder": a.get("name") or _folder(rows.get(a["method"], {"method": a["method"]}))}
            for a in exp["figures"]["fig4"]["arms"]]


def arm_extra(window: Any, arm: dict[str, Any]) -> list[str]:
    """The Hydra overrides of one figure arm at one window (the same list wherever two figures share a run)."""
    return [f"method.params.window={'null' if window is None else int(window)}", *(arm.get("overrides") or []),
            *([f"method.name={arm['name']}"] if arm.get("name") else [])]


def figure4(root: Path, exp: dict[str, Any], backbone: str, out_dir: Path) -> tuple[list[Path], dict[str, Any]]:
    from agentic_repro.scripts.figstyle import empty_panel, plt, save

    f4 = exp["figures"]["fig4"]
    pyplot = plt()
    fig, ax = pyplot.subplots(figsize=(6, 4))
    data: dict[str, Any] = {"windows": [_h_name(h) for h in f4["windows"]], "arms": {}}
    runs: list[Any] = []
    drew = False
    for arm in fig4_arms(exp):
        pts = []
        for i, h in enumerate(f4["windows"]):
            agg = RunIndex.scan(root, window_experiment(exp, h)).agg(f4["benchmark"], arm["folder"], backbone)
            runs += agg.runs
            pts.append((i, _sr(agg), agg.incomplete))
        data["arms"][arm["label"]] = [{"h": _h_name(h), "sr": sr, "incomplete": inc}
                                      for h, (_, sr, inc) in zip(f4["windows"], pts)]
        data[arm["folder"]] = data["arms"][arm["label"]]
        xs = [i for i, sr, _ in pts if sr is not None]
        if xs:
            drew = True
            ax.plot(xs, [sr for _, sr, _ in pts if sr is not None], "o-", label=arm["label"])
    if drew:
        ax.set_xticks(range(len(f4["windows"])), data["windows"])
        ax.set_xlabel("memory window h")
        ax.set_ylabel("success rate (%)")
        ax.legend()
    else:
        empty_panel(ax, "no complete memory-window runs on disk (make reproduce-auq-fig4)")
    ax.set_title(f"AUQ Figure 4: memory window ({f4['benchmark']}, {backbone}); paper: AUQ +5.0 at h=1", fontsize=9)
    data["protocol"] = protocol_line(exp, "fig4", {f4["benchmark"]: runs})
    return save(fig, out_dir / f"figure4-{backbone}"), data


def fig5_bars(exp: dict[str, Any]) -> list[dict[str, Any]]:
    """Figure 5's bars with their folder, window and experiment (a bar without ``window`` is at fig5.window)."""
    rows = {r["method"]: r for r in exp["rows"]}
    f5 = exp["figures"]["fig5"]
    out = []
    for b in f5["bars"]:
        h = b["window"] if "window" in b else f5["window"]
        out.append({**b, "window": h, "experiment": f5["experiment"].format(h=_h_name(h)),
                    "folder": b.get("name") or _folder(rows.get(b["method"], {"method": b["method"]}))})
    return out


def fig5_gains(exp: dict[str, Any], bars: list[dict[str, Any]]) -> dict[str, Any]:
    """Each configured gain (ours − base, SR points) from the bars' SRs, beside the paper's; None if either
    bar has no complete runs."""
    sr = {b["label"]: b["sr"] for b in bars}
    out = {}
    for name, g in ((exp["figures"]["fig5"].get("gains")) or {}).items():
        a, b = sr.get(g["ours"]), sr.get(g["base"])
        out[name] = {"ours": g["ours"], "base": g["base"], "gain": None if a is None or b is None else a - b,
                     "paper": g.get("paper") or {}}
    return out


def fig5_cell(root: Path, exp: dict[str, Any], backbone: str) -> tuple[list[dict[str, Any]], list[Any]]:
    f5 = exp["figures"]["fig5"]
    bars, runs = [], []
    for b in fig5_bars(exp):
        agg = RunIndex.scan(root, b["experiment"]).agg(f5["benchmark"], b["folder"], backbone)
        runs += agg.runs
        bars.append({"label": b["label"], "h": _h_name(b["window"]), "sr": _sr(agg), "incomplete": agg.incomplete,
                     "calls_per_episode": avg_calls(agg) if agg.complete else None})
    return bars, runs


def cross_model_note(exp: dict[str, Any], ran: list[str]) -> str:
    paper = ((exp.get("settings") or {}).get("fig5") or {}).get("paper", {}).get("backbone") or []
    return (f"cross-model: {len(ran)} backbone(s) with runs on disk ({', '.join(ran) or 'none'}); the paper: "
            f"{len(paper)} models ({', '.join(paper)})")


def figure5(root: Path, exp: dict[str, Any], backbone: str, out_dir: Path) -> tuple[list[Path], dict[str, Any]]:
    from agentic_repro.scripts.figstyle import empty_panel, plt, save

    f5 = exp["figures"]["fig5"]
    pyplot = plt()
    fig, ax = pyplot.subplots(figsize=(7, 4))
    bars, runs = fig5_cell(root, exp, backbone)
    data: dict[str, Any] = {"bars": bars, "gains": fig5_gains(exp, bars)}
    if any(b["sr"] is not None for b in bars):
        ax.bar(range(len(bars)), [b["sr"] or 0.0 for b in bars],
               color=["tab:grey", "tab:blue", "tab:orange", "silver", "tab:green"][: len(bars)])
        ax.set_xticks(range(len(bars)), [b["label"] + ("" if b["sr"] is not None else "\n(—)") for b in bars],
                      fontsize=7)
        ax.set_ylabel("success rate (%)")
    else:
        empty_panel(ax, "no complete h=5 / full-history runs on disk (make reproduce-auq-fig5)")
    ax.set_title(f"AUQ Figure 5: memory expansion at h={f5['window']} and full memory ({backbone}); paper: "
                 "+17.9 expansion (GPT-5.1), AUQ−ReAct +11.0 limited / +7.7 full", fontsize=8)
    data["protocol"] = protocol_line(exp, "fig5", {f5["benchmark"]: runs})
    return save(fig, out_dir / f"figure5-{backbone}"), data


def figure5_models(root: Path, exp: dict[str, Any], backbones_: list[str], out_dir: Path
                   ) -> tuple[list[Path], dict[str, Any]]:
    """Figure 5's cross-model panel: per backbone with runs, each gain (expansion; AUQ − ReAct at limited and
    full memory) beside the paper's."""
    from agentic_repro.scripts.figstyle import empty_panel, plt, save

    f5 = exp["figures"]["fig5"]
    per: dict[str, Any] = {}
    runs: list[Any] = []
    for bb in backbones_:
        bars, rs = fig5_cell(root, exp, bb)
        if rs:
            per[bb] = fig5_gains(exp, bars)
            runs += rs
    names = list(f5.get("gains") or {})
    pyplot = plt()
    fig, ax = pyplot.subplots(figsize=(7, 4))
    series = [(bb, [per[bb][n]["gain"] for n in names]) for bb in per]
    if series:
        paper = [next(iter((f5["gains"][n].get("paper") or {}).values()), None) for n in names]
        series.append(("paper (" + "; ".join(f"{n}: {', '.join(f5['gains'][n].get('paper') or {})}" for n in names)
                       + ")", paper))
    width = 0.8 / max(1, len(series))
    for k, (lab, vals) in enumerate(series):
        ax.bar([i + k * width for i, v in enumerate(vals) if v is not None], [v for v in vals if v is not None],
               width=width, label=lab)
    if series:
        ax.set_xticks([i + 0.4 - width / 2 for i in range(len(names))], names)
        ax.axhline(0, color="grey", lw=0.8)
        ax.set_ylabel("gain (SR points)")
        ax.legend(fontsize=6)
    else:
        empty_panel(ax, "no Figure 5 runs on any backbone")
    ran = [bb for bb in per]
    ax.set_title("AUQ Figure 5 (cross-model): " + cross_model_note(exp, ran), fontsize=7)
    data = {"backbones": per, "paper": {n: f5["gains"][n].get("paper") for n in names},
            "note": cross_model_note(exp, ran), "protocol": protocol_line(exp, "fig5", {f5["benchmark"]: runs})}
    return save(fig, out_dir / "figure5-models"), data


def figure6(root: Path, exp: dict[str, Any], backbone: str, out_dir: Path) -> tuple[list[Path], dict[str, Any]]:
    from agentic_repro.scripts.figstyle import empty_panel, plt, save

    f6 = exp["figures"]["fig6"]
    rows = {r["method"]: r for r in exp["rows"]}
    pyplot = plt()
    fig, (ax1, ax2) = pyplot.subplots(1, 2, figsize=(11, 4))
    data: dict[str, Any] = {"ours": {}, "paper": (exp.get("paper") or {}).get("fig6") or {}}
    drew = False
    runs: list[Any] = []
    for h in f6["windows"]:
        pts = []
        for tau in f6["taus"]:
            agg = RunIndex.scan(root, tau_experiment(exp, tau, h)).agg(f6["benchmark"], _folder(rows[f6["method"]]),
                                                                        backbone)
            runs += agg.runs
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
    data["protocol"] = protocol_line(exp, "fig6", {f6["benchmark"]: runs})
    return save(fig, out_dir / f"figure6-{backbone}"), data


# ---- writing ------------------------------------------------------------------------------------------------

T1_FIELDS = ["backbone", "benchmark", "row", "method", "status", "n", "n_conf", "steps", "missing_steps",
             *[f"{p}_{m}" for p in PHIS for m in ("t_ece", "t_ece_other", "t_bs", "n")], "t_ece_convention", "footnotes",
             "sources"]
T2_FIELDS = ["backbone", "benchmark", "row", "method", "status", "sr", "ci_low", "ci_high", "n", "calls_per_episode",
             *[f"auroc_{p}" for p in PHIS], "paper_sr", "paper_sr_inferred", "fixed", "base_failures", "fixed_pct",
             "regressed", "base_successes", "regressed_pct", "sources"]


def write_figure_protocols(path: Path, figs: dict[str, Any]) -> Path:
    """Each figure's protocol line (from its runs) in one generated markdown file beside the images."""
    lines = ["<!-- generated by python -m agentic_repro.scripts.auq_tables build; do not edit -->", ""]
    for name, d in figs.items():
        lines += [f"- **{name}**: {d.get('protocol') or 'no runs on disk'}"]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


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
                                   header="<!-- generated by python -m agentic_repro.scripts.auq_tables build; do not edit -->")
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
        paths += [fjson, write_figure_protocols(out_dir / f"figures-{bb}.md", figs)]
        data[bb] = {"table1": r1, "table2": r2, "figures": figs, "tables": t1 + t2}
    ps, cross = figure5_models(root, exp, backbones(root, exp) or ([backbone] if backbone else []), out_dir)
    paths += ps
    (out_dir / "figure5-models.json").write_text(json.dumps(cross, indent=1, default=str), encoding="utf-8")
    paths.append(out_dir / "figure5-models.json")
    for d in data.values():
        d["figures"]["figure5_models"] = cross
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
                items += run(row["method"], bench, exp["experiment"],
                             list(((exp.get("settings") or {}).get("main") or {}).get("overrides") or []))
    if what in ("fig4", "all"):
        for h in figs["fig4"]["windows"]:
            for arm in fig4_arms(exp):
                items += run(arm["method"], figs["fig4"]["benchmark"], window_experiment(exp, h), arm_extra(h, arm))
    if what in ("fig5", "fig4", "all"):
        for b in fig5_bars(exp):
            items += run(b["method"], figs["fig5"]["benchmark"], b["experiment"], arm_extra(b["window"], b))
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
        from agentic_repro.scripts.runs import Planned, execute, plan, require_backbone_key

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
    from agentic_repro.scripts.runs import run_cli

    run_cli(main)
