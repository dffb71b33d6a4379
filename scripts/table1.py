"""Table 1 from ``results/`` alone: methods (paper order) x benchmarks, each cell the mean score with its 95%
interval and n.

``python -m scripts.table1 [results_root=results] [backbones=local,gpt-4o-mini]`` writes
``results/table1/table1.{md,tex,csv}`` with one table per backbone found on disk; zero backbone calls.

A cell is the mean over seeds of ``score_pct`` with a 95% interval over problems (:mod:`scripts.stats`: Wilson
for accuracy/pass@1, Student t for F1). A cell whose runs have errors or unanswered problems shows
``incomplete answered/selected, k errors`` and is never averaged (:mod:`scripts.collect`). A row whose method
deviates from its paper carries numbered footnotes: the ``deviations`` recorded in its runs' ``config.yaml``
(fallback ``configs/method/<name>.yaml``), the row's ``deviations`` in ``scripts/experiments/table1.yaml`` and the
reduced settings of the size protocol it ran under.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from scripts.collect import Agg, RunIndex, stop_fraction
from scripts.protocol import compare, judge_of, models, sampling, split_of, temperatures
from scripts.render import Cell, Footnotes, Table, fmt, write_csv, write_tables
from scripts.stats import paired_test
from scripts.runs import csv_list, load_experiment, method_config, method_folder, parse_args

CSV_FIELDS = ["backbone", "row", "method", "benchmark", "status", "mean", "ci_low", "ci_high", "ci_method", "std",
              "n_seeds", "seeds", "n_problems", "answered", "selected", "n_errors", "complete", "stop_pct", "paper",
              "paper_inferred", "diff", "diff_withheld", "protocol", "row_protocol", "footnotes", "reason", "first_error", "sources"]


def row_status(row: dict[str, Any]) -> tuple[str | None, str | None]:
    """(method result-folder name, reason it has no numbers) for a Table 1 row."""
    cfg = method_config(row["method"])
    if cfg is None:
        return None, row.get("missing") or f"not implemented yet (no configs/method/{row['method']}.yaml)"
    return method_folder(row["method"]), None


def cell_text(a: Agg) -> str:
    """``mean [low, high] n=…`` for a complete cell; ``incomplete answered/selected, k errors`` otherwise."""
    if a.incomplete:
        return a.incomplete_text()
    if a.mean is None:
        return "—"
    ci = a.ci()
    n = f"n={a.n_problems}" + (f"×{len(a.seeds)}" if len(a.seeds) > 1 else "")
    return f"{fmt(a.mean)} {ci.text() if ci else '[—]'} {n}"


def protocol_record(root: Path, exp: dict[str, Any], backbone: str) -> dict[str, Any]:
    """What the last ``reproduce_table1`` run on this backbone wrote about its protocol (size), if any."""
    p = Path(root) / exp["experiment"] / f"protocol-{backbone.split('@')[0]}.json"   # written per backbone config
    return json.loads(p.read_text(encoding="utf-8")) if p.exists() else {}


def row_deviations(row: dict[str, Any], aggs: dict[str, Agg], proto: dict[str, Any]) -> list[str]:
    """Footnote texts of one row: recorded method deviations (interface 9), the row's own, the protocol's
    reduced settings for this method."""
    out: list[str] = []
    recorded = [a.deviations() for a in aggs.values() if a.runs]
    recorded = [d for d in recorded if d is not None]
    if recorded:
        devs = [d for ds in recorded for d in ds]
    else:
        devs = list(((method_config(row["method"]) or {}).get("deviations")) or [])
    for d in [*devs, *(row.get("deviations") or [])]:
        if str(d) not in out:
            out.append(str(d))
    settings = proto.get("settings") or {}
    mo = (settings.get("method_overrides") or {}).get(row["method"])
    if row.get("searched"):  # a searched row ran the artifacts its cells name: their own record says how
        out.extend(n for n in searched_notes(row, aggs) if n not in out)
    elif mo and any(a.runs for a in aggs.values()):
        out.append(f"run at the reduced setting of size protocol '{proto.get('protocol')}': {' '.join(mo)}")
    return out


def searched_notes(row: dict[str, Any], aggs: dict[str, Agg]) -> list[str]:
    """A searched row's setting footnotes, from the artifacts its runs used (``trace.artifact.path`` of their
    predictions), compared with the method's configured search; never from the size protocol, which may not be
    the setting an artifact was searched at."""
    from baselines.autoflow.artifact import ArtifactError, load_artifact, protocol_notes

    configured = (method_config(row["method"]) or {}).get("search")
    notes: list[str] = []
    for a in aggs.values():
        paths = {(p.get("trace") or {}).get("artifact", {}).get("path") for r in a.runs for p in r.predictions()}
        for path in sorted(paths - {None}):
            try:
                got = protocol_notes(load_artifact(path), configured)
            except (ArtifactError, OSError, ValueError) as exc:
                got = [f"its search artifact {path} cannot be read ({exc})"]
            notes.extend(n for n in got if n not in notes)
    return notes


def row_label(row: dict[str, Any], aggs: dict[str, Agg]) -> str:
    """The method's own ``label`` (recorded in its runs' config.yaml, else its yaml: e.g. "LLM-Blender (backbone
    ranker/fuser)" says what ran), else the paper's row label from table1.yaml."""
    for a in aggs.values():
        for r in a.runs:
            lab = (r.config().get("method") or {}).get("label")
            if lab:
                return str(lab)
    return str((method_config(row["method"]) or {}).get("label") or row["label"])


# ---- best / second marks: only where a paired test says the difference is real -------------------------------

def problem_scores(a: Agg) -> dict[str, float]:
    """Problem id -> score (%) averaged over the cell's seeds, over the problems every seed answered."""
    per = [r.problem_scores() for r in a.runs]
    common = set(per[0]).intersection(*per[1:]) if per else set()
    return {k: 100.0 * sum(p[k] for p in per) / len(per) for k in common}


def significance_marks(column: list[Agg | None], alpha: float) -> dict[int, str]:
    """Row index -> "bold" | "underline" in one benchmark column of complete cells.

    The highest mean is bold only if it beats every other complete cell by a paired test over their shared
    problems (:func:`scripts.stats.paired_test`: exact McNemar on 0/1 scores, Wilcoxon signed-rank on F1) at
    ``alpha``; the second highest is underlined only if the best is bold and it too beats every cell below it.
    Ties on the mean, or a column with one complete cell, mark nothing."""
    cells = [(i, a) for i, a in enumerate(column) if a is not None and a.mean is not None]
    if len(cells) < 2:
        return {}
    cells.sort(key=lambda ia: -ia[1].mean)  # type: ignore[operator]
    scores = {i: problem_scores(a) for i, a in cells}

    def beats_all_below(k: int) -> bool:
        i, a = cells[k]
        return all(round(a.mean, 6) > round(b.mean, 6)  # type: ignore[arg-type]
                   and paired_test(scores[i], scores[j]).p < alpha for j, b in cells[k + 1:])

    out: dict[int, str] = {}
    if beats_all_below(0):
        out[cells[0][0]] = "bold"
        if len(cells) > 2 and beats_all_below(1):
            out[cells[1][0]] = "underline"
    return out


# ---- the protocol line under each ↳ paper row ------------------------------------------------------------

def cell_protocol(b: str, a: Agg | None, pp: dict[str, Any]) -> tuple[str, list[str]]:
    """(one benchmark's protocol text, what in it changes the metric's definition) from the cell's runs:
    scorer rule (config.yaml benchmark keys) and judge, split and n of N (meta.json), seeds, against the paper's."""
    pb = (pp.get("benchmarks") or {}).get(b) or {}
    runs = list(a.runs) if a else []
    if not runs:
        return f"not run; paper: {pb.get('scorer', 'scorer not stated')}, {pb.get('split', 'split not stated')}", []
    redefined: list[str] = []
    keys = []
    for k, want in (pb.get("rule") or {}).items():
        got = sorted({str((r.config().get("benchmark") or {}).get(k, "not recorded")) for r in runs})
        same = got == [str(want)]
        keys.append(f"{k}={'/'.join(got)}" + ("" if same else f" ≠ paper {want}"))
        if not same:   # a run that did not record the key cannot show it measured what the paper did
            redefined.append(f"scorer {k}" + (" not recorded" if "not recorded" in got else ""))
    judges = sorted({j for j in map(judge_of, runs) if j})
    if judges:
        redefined.append("judge-scored")
    scorer = (f"scorer {', '.join(keys) or 'not recorded'}" + (f", judge {'/'.join(judges)}" if judges else "")
              + f" (paper: {pb.get('scorer', 'not stated')}{'' if judges else ', no judge'})")
    sizes = sorted({split_of(r) for r in runs}, key=str)
    split_txt = ", ".join(f"split {s} n={n}" + (f" of {t}" if t else "") for s, n, t in sizes)
    if any(s not in (pb.get("same_problems") or []) for s, _, _ in sizes):
        redefined.append("split")
        split_txt += " (other problems than the paper's)"
    paper_n = pb.get("n")
    split_txt += f" vs paper {pb.get('split', 'not stated')}"
    n = min(sel for _, sel, _ in sizes)
    if paper_n:
        split_txt += f": {n} of the paper's {paper_n} problems ({100 * n / int(paper_n):.1f}%)"
    seeds = sorted({int(s) for s in a.seeds})
    split_txt += f"; {compare('seeds', seeds, pp.get('seeds'))}"
    return f"{scorer}; {split_txt}", redefined


def row_protocol(label: str, aggs: dict[str, Agg], pp: dict[str, Any]) -> str:
    """The row-wide half of the protocol line: backbone (calls.jsonl models), temperatures (calls.jsonl), max
    tokens (config.yaml sampling), against the paper's (A.2)."""
    runs = [r for a in aggs.values() for r in a.runs]
    if not runs:
        return f"↳ protocol: not run; paper backbone {pp.get('backbone', 'not stated')}"
    bb = models(runs)
    parts = [f"backbone {'/'.join(bb) or 'not recorded'}"
             + (" = paper" if bb == [pp.get("backbone")] else f" ≠ paper {pp.get('backbone', 'not stated')}")]
    parts.append(compare("T", temperatures(runs), (pp.get("temperature_by_row") or {}).get(label,
                                                                                          pp.get("temperature"))))
    caps = sorted({int(s["max_tokens"]) for s in map(sampling, runs) if s.get("max_tokens") is not None})
    parts.append(compare("max tokens", caps, pp.get("max_tokens")))
    return "↳ protocol: " + "; ".join(parts)


def paper_rows(row: dict[str, Any], r: dict[str, Any], pref: dict[str, Any], benches: list[str],
               records: list[dict[str, Any]], backbone: str, pp: dict[str, Any]) -> list[list[Any]]:
    """The "↳ paper", "↳ Δ" and "↳ protocol" rows under a row the paper reports. A cell whose recorded scorer or
    split is not the paper's measures something else: its Δ is withheld ("≠ measure"), not printed."""
    pcells: list[Any] = ["↳ paper"]
    dcells: list[Any] = ["↳ Δ (ours − paper)"]
    protos = {b: cell_protocol(b, r["aggs"].get(b), pp) for b in benches}
    redefined_any = [d for b in benches for d in protos[b][1]]
    rp = row_protocol(row["label"], r["aggs"], pp)
    for b in [*benches, "avg"]:
        p = pref.get(b)
        ours = r["avg"] if b == "avg" else r["means"].get(b)
        rec = next((x for x in records if x["row"] == row["label"] and x["benchmark"] == b), None)
        if rec is None and (p is not None or b != "avg"):
            rec = {"backbone": backbone, "row": row["label"], "method": row["method"], "benchmark": b,
                   "status": "missing" if r["name"] is None else "not_run", "reason": r["reason"]}
            records.append(rec)
        if rec is not None:
            rec["row_protocol"] = rp
            if b != "avg":
                rec["protocol"] = protos[b][0]
        if p is None:
            pcells.append("—")
            dcells.append("—")
            continue
        inferred = bool(p.get("inferred"))
        pcells.append(fmt(p["value"]) + ("†" if inferred else ""))
        redefined = protos[b][1] if b != "avg" else redefined_any
        diff = None if ours is None or redefined else ours - float(p["value"])
        if ours is not None and redefined:
            dcells.append(f"≠ measure ({', '.join(dict.fromkeys(redefined))})")
        else:
            dcells.append(fmt(diff) if diff is None else ("+" if diff >= 0 else "") + fmt(diff))
        rec.update({"paper": p["value"], "paper_inferred": inferred,  # type: ignore[union-attr]
                    "diff": None if diff is None else round(diff, 4),
                    "diff_withheld": ", ".join(dict.fromkeys(redefined)) if ours is not None and redefined else None})
    return [pcells, dcells, [rp, *[protos[b][0] for b in benches], ""]]


def marks_note(alpha: float) -> str:
    return ("Best bold, second underlined only where the difference is significant: a paired test over the "
            "problems both cells answered (each problem's score averaged over seeds), exact McNemar on 0/1 scores "
            f"(accuracy, pass@1), Wilcoxon signed-rank otherwise (F1), two-sided p < {alpha:g} "
            "(scripts/stats.py paired_test; `significance_alpha` in scripts/experiments/table1.yaml); the best "
            "must beat every other complete cell of its column, the second every cell below it. Avg carries no "
            "mark (a mean of six means has no paired test).")


PROTOCOL_NOTE = ("↳ protocol: generated from what the cell's runs recorded (config.yaml scorer keys and sampling, "
                 "meta.json split and n of the split, calls.jsonl backbone models and temperatures, the seeds), each "
                 "against the paper's protocol (DenoiseFlow §4.1, A.1, A.2, A.4: `reference.protocol` in "
                 "scripts/experiments/table1.yaml): = paper, ≠ paper, or \"paper: not stated\". Where the scorer "
                 "rule or the problem population differs from the paper's the metric is another one: its ↳ Δ is "
                 "withheld (\"≠ measure (...)\", CSV diff_withheld), not printed; a smaller subset of the paper's "
                 "problems or another backbone/temperature changes the experiment, not the measure, and keeps its Δ.")


def build(results_root: Path, backbone: str, exp: dict[str, Any] | None = None,
          seeds: list[int] | None = None, index: RunIndex | None = None) -> tuple[Table, list[dict[str, Any]]]:
    exp = exp or load_experiment("table1")
    alpha = float(exp.get("significance_alpha", 0.05))
    root = Path(results_root)
    index = index or RunIndex.scan(root, exp["experiment"])
    benches: list[str] = exp["benchmarks"]
    labels = exp.get("benchmark_labels", {})
    ref = (exp.get("reference") or {}).get("rows", {})
    ref_backbone = (exp.get("reference") or {}).get("backbone")
    pp = (exp.get("reference") or {}).get("protocol") or {}
    proto = protocol_record(root, exp, backbone)

    # 1) numbers
    body: list[dict[str, Any]] = []
    for row in exp["rows"]:
        name, reason = row_status(row)
        aggs: dict[str, Agg] = {}
        if name is not None:
            aggs = {b: index.agg(b, name, backbone, seeds) for b in benches}
            if not any(a.runs for a in aggs.values()):
                reason = "implemented, not run yet on this backbone"
        means = {b: aggs[b].mean for b in benches} if aggs else {b: None for b in benches}
        avg = sum(means.values()) / len(benches) if all(v is not None for v in means.values()) else None  # type: ignore[misc]
        body.append({"row": row, "name": name, "reason": reason, "aggs": aggs, "means": means, "avg": avg})

    # 2) best (bold) and second best (underlined) per column, only where a paired test says so
    marks = {b: significance_marks([r["aggs"].get(b) for r in body], alpha) for b in benches}

    def styled(col: str, i: int, text: str) -> Cell:
        m = marks.get(col, {}).get(i)
        return Cell(text, bold=m == "bold", underline=m == "underline")

    # 3) the table, with the paper's rows and our difference under each row the paper reports
    columns = ["Method", *[labels.get(b, b) for b in benches], "Avg"]
    table = Table(title=f"Table 1: {backbone} (score % [95% interval] n=problems; bold/underlined: significantly best/second)",
                  columns=columns, label=f"tab:table1-{backbone}")
    records: list[dict[str, Any]] = []
    notes: list[str] = []
    missing_notes: list[str] = []
    incomplete_notes: list[str] = []
    unisolated: list[str] = []  # cells whose runs executed untrusted code with sandbox.isolation=process
    feet = Footnotes()
    groups_seen: list[str] = []
    any_inferred = False
    ci_methods: set[str] = set()
    stop_all = [0, 0, 0]
    for ri, r in enumerate(body):
        row, aggs = r["row"], r["aggs"]
        if groups_seen and row.get("group") != groups_seen[-1]:
            table.rules_after.add(len(table.rows) - 1)
        groups_seen.append(row.get("group"))
        # footnotes on rows with numbers only (a row of "—" deviates from nothing yet)
        devs = row_deviations(row, aggs, proto) if any(a.runs for a in aggs.values()) else []
        foot_csv = feet.numbered(devs) if devs else ""
        shown = row_label(row, aggs)
        cells: list[Any] = [Cell(shown, sup=feet.marks(devs)) if devs else shown]
        for b in benches:
            a = aggs.get(b)
            base = {"backbone": backbone, "row": row["label"], "method": row["method"], "benchmark": b,
                    "footnotes": foot_csv}
            if a is None or not a.runs:
                cells.append("—")
                status = "missing" if r["name"] is None else "not_run"
                records.append({**base, "status": status, "reason": r["reason"] or "not run yet"})
                continue
            if any(run.sandbox_isolation() == "process" for run in a.runs):
                unisolated.append(f"{row['label']} / {labels.get(b, b)}")
            stop = stop_fraction([c for run in a.runs for c in run.calls()])
            stop_all = [x + y for x, y in zip(stop_all, stop)]
            rec = {**base, "n_seeds": len(a.seeds), "seeds": " ".join(map(str, a.seeds)),
                   "n_problems": a.n_problems, "answered": a.answered, "selected": a.selected,
                   "n_errors": a.n_errors, "complete": a.complete,
                   "stop_pct": round(100 * stop[0] / stop[1], 1) if stop[1] else None,
                   "sources": ";".join(a.sources(root))}
            if a.incomplete:
                cells.append(Cell(cell_text(a)))
                err = a.first_error()
                records.append({**rec, "status": "incomplete", "first_error": err,
                                "reason": "errors or unanswered problems: not averaged"})
                incomplete_notes.append(f"{row['label']} / {labels.get(b, b)}: {a.incomplete_text()}"
                                        + (f" (first error: {err[:160]})" if err else "")
                                        + f" — {'; '.join(a.sources(root))}")
                continue
            ci = a.ci()
            if ci:
                ci_methods.add(ci.method)
            cells.append(styled(b, ri, cell_text(a)))
            records.append({**rec, "status": "ok", "mean": round(a.mean, 4),  # type: ignore[arg-type]
                            "ci_low": None if ci is None else round(ci.low, 4),
                            "ci_high": None if ci is None else round(ci.high, 4),
                            "ci_method": None if ci is None else ci.method,
                            "std": None if a.std is None else round(a.std, 4)})
        if r["avg"] is not None:
            cells.append(fmt(r["avg"]))   # no paired test over a mean of means: no mark
            records.append({"backbone": backbone, "row": row["label"], "method": row["method"], "benchmark": "avg",
                            "status": "ok", "mean": round(r["avg"], 4), "footnotes": foot_csv,
                            "sources": ";".join(s for b in benches for s in aggs[b].sources(root))})
        else:
            cells.append("—")
        table.rows.append(cells)
        if r["reason"]:
            missing_notes.append(f"{row['label']}: {r['reason']}")

        pref = ref.get(row["label"])
        if pref:
            table.rows.extend(paper_rows(row, r, pref, benches, records, backbone, pp))
            any_inferred |= any(bool((pref.get(b) or {}).get("inferred")) for b in [*benches, "avg"])

    notes.append("Scores in %: accuracy (GSM8K, MATH), pass@1 (MBPP, HumanEval), F1 (HotpotQA, DROP); each cell is "
                 "the mean over problems (and over seeds when several: n=problems×seeds) with its 95% interval over "
                 "problems — " + " / ".join(
                     {"wilson": "Wilson score interval for accuracy/pass@1",
                      "t": "Student t interval for F1 (and for accuracy averaged over seeds)"}[m]
                     for m in sorted(ci_methods, key=lambda m: m != "wilson"))
                 + (" (scripts/stats.py)." if ci_methods else "scripts/stats.py.")
                 + " Avg (no interval) only when all six benchmarks are complete.")
    notes.append(marks_note(alpha))
    if incomplete_notes:
        notes.append("incomplete = the cell's runs have errors (infrastructure failures, not wrong answers) or "
                     "unanswered problems; it is not averaged. Re-run the target to resume or retry: "
                     + " | ".join(incomplete_notes))
    if stop_all[1]:
        pct = 100 * stop_all[0] / stop_all[1]
        notes.append(f"Answers not cut: {pct:.1f}% of {stop_all[1]} calls ended with finish_reason=stop "
                     f"(calls.jsonl){'' if pct >= 90 else ' — BELOW 90%: raise max_tokens for this protocol'}"
                     + (f"; {stop_all[2] - stop_all[1]} calls recorded no finish_reason" if stop_all[2] > stop_all[1]
                        else "") + ".")
    if ref and pp:
        notes.append(PROTOCOL_NOTE)
    if ref:
        src = (exp.get("reference") or {}).get("source", "")
        notes.append(f"↳ paper: {src}." + (" † inferred by arithmetic from stated margins/averages, not stated."
                                          if any_inferred else ""))
        if ref_backbone and ref_backbone != backbone.split("@")[0]:
            notes.append(f"The paper used {ref_backbone}; Δ against a {backbone} run is not a like-for-like comparison.")
    if proto:
        st = proto.get("settings") or {}
        extra = [f"{k}={','.join(map(str, proto[k])) if isinstance(proto[k], list) else proto[k]}"
                 for k in ("methods", "benchmarks", "seeds", "limit") if proto.get(k)]
        extra += [o for o in proto.get("user_overrides") or []
                  if not o.startswith(("results_root=", "cache.path=", "runner.progress="))]
        ob = "; ".join(f"{b}: {' '.join(v)}" for b, v in (st.get("overrides_by_benchmark") or {}).items())
        lm = ", ".join(f"{m} {v}" for m, v in (st.get("limit_by_method") or {}).items())
        bm = "; ".join(f"{m} {'/'.join(v)}" for m, v in (st.get("benchmarks_by_method") or {}).items())
        mt = (exp.get("max_tokens") or {}).get(st.get("max_tokens") or "") or {}
        first = "every problem" if st.get("limit") is None else f"the first {st.get('limit')} problems"
        notes.append(f"Size '{proto.get('protocol')}' (last reproduce run): seeds {st.get('seeds')}, {first} of each split"
                     + (f" {st.get('limit_by_benchmark')}" if st.get("limit_by_benchmark") else "")
                     + (f" (at most: {lm})" if lm else "") + (f"; only on: {bm}" if bm else "")
                     + (f"; max_tokens {', '.join(f'{b} {v}' for b, v in mt.items())}" if mt else "")
                     + (f"; overrides {' '.join(st.get('overrides') or [])}" if st.get("overrides") else "")
                     + (f"; per benchmark: {ob}" if ob else "")
                     + (f"; command line: {' '.join(extra)}" if extra else "") + ".")
    if feet.texts:
        notes.append("Deviations from the method's paper that can change its score (numbered marks on the row):")
        notes.extend(feet.notes())
    if unisolated:
        notes.append("Untrusted code ran without filesystem isolation (sandbox.isolation=process; "
                     f"evaluators/sandbox/README.md) in: {', '.join(unisolated)}.")
    notes.extend(f"— {m}" for m in missing_notes)
    table.notes = notes
    return table, records


def incomplete_cells(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in records if r.get("status") == "incomplete"]


def write_all(results_root: Path, backbones: list[str] | None = None, out_dir: Path | None = None,
              exp: dict[str, Any] | None = None) -> dict[str, Any]:
    exp = exp or load_experiment("table1")
    root = Path(results_root)
    out = Path(out_dir or root / exp["experiment"])
    index = RunIndex.scan(root, exp["experiment"])
    backbones = backbones or index.backbones()
    tables, records = [], []
    for bb in backbones:
        t, recs = build(root, bb, exp, index=index)
        tables.append(t)
        records.extend(recs)
    if not tables:
        t, recs = build(root, "local", exp, index=index)
        tables, records = [t], recs
    header = ("# Table 1 (DenoiseFlow, arXiv 2603.00532): regenerated from results/ by `python -m scripts.table1`\n\n"
              "Every number below is the mean of `score_pct` over the `metrics.json` files listed in "
              "`table1.csv` (column `sources`); the interval is computed from their `predictions.jsonl`.\n")
    md, tex = write_tables(out / "table1", tables, header)
    write_csv(out / "table1.csv", records, CSV_FIELDS)
    return {"tables": tables, "records": records, "paths": [md, tex, out / "table1.csv"]}


def main(argv: list[str] | None = None) -> None:
    opts, rest = parse_args(list(sys.argv[1:] if argv is None else argv),
                            {"results_root": "results", "backbones": None, "out": None})
    if rest:
        raise SystemExit(f"unknown arguments: {rest}")
    res = write_all(Path(opts["results_root"]), csv_list(opts["backbones"]),
                    Path(opts["out"]) if opts["out"] else None)
    for t in res["tables"]:
        print(t.to_markdown())
    print("wrote " + ", ".join(str(p) for p in res["paths"]))


if __name__ == "__main__":
    main()
