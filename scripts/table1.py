"""Table 1 from ``results/`` alone: methods (paper order) x benchmarks, mean ± std over seeds.

``python -m scripts.table1 [results_root=results] [backbones=local,gpt-4o-mini]`` writes
``results/table1/table1.{md,tex,csv}`` with one table per backbone found on disk; zero backbone calls.
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from scripts.collect import Agg, backbones_on_disk, load_runs
from scripts.render import Cell, Table, fmt, fmt_pm, write_csv, write_tables
from scripts.runs import csv_list, load_experiment, method_config, method_folder, parse_args

CSV_FIELDS = ["backbone", "row", "method", "benchmark", "status", "mean", "std", "n_seeds", "seeds", "n_problems",
              "complete", "paper", "paper_inferred", "diff", "reason", "sources"]


def row_status(row: dict[str, Any]) -> tuple[str | None, str | None]:
    """(method result-folder name, reason it has no numbers) for a Table 1 row."""
    cfg = method_config(row["method"])
    if cfg is None:
        return None, row.get("missing") or f"not implemented yet (no configs/method/{row['method']}.yaml)"
    return method_folder(row["method"]), None


def build(results_root: Path, backbone: str, exp: dict[str, Any] | None = None,
          seeds: list[int] | None = None) -> tuple[Table, list[dict[str, Any]]]:
    exp = exp or load_experiment("table1")
    root = Path(results_root)
    benches: list[str] = exp["benchmarks"]
    labels = exp.get("benchmark_labels", {})
    ref = (exp.get("reference") or {}).get("rows", {})
    ref_backbone = (exp.get("reference") or {}).get("backbone")

    # 1) numbers
    body: list[dict[str, Any]] = []
    for row in exp["rows"]:
        name, reason = row_status(row)
        aggs: dict[str, Agg] = {}
        if name is not None:
            aggs = {b: load_runs(root, exp["experiment"], b, name, backbone, seeds) for b in benches}
            if not any(a.mean is not None for a in aggs.values()):
                reason = "implemented, not run yet on this backbone"
        means = {b: aggs[b].mean for b in benches} if aggs else {b: None for b in benches}
        avg = sum(means.values()) / len(benches) if all(v is not None for v in means.values()) else None  # type: ignore[misc]
        body.append({"row": row, "name": name, "reason": reason, "aggs": aggs, "means": means, "avg": avg})

    # 2) best (bold) and second best (underlined) per column, among rows with a number
    rank: dict[str, tuple[float | None, float | None]] = {}
    for col in [*benches, "avg"]:
        vals = sorted({round(r["avg"] if col == "avg" else r["means"][col], 6) for r in body
                       if (r["avg"] if col == "avg" else r["means"][col]) is not None}, reverse=True)
        # a column where every method ties marks nothing
        rank[col] = (vals[0], vals[1]) if len(vals) > 1 else (None, None)

    def styled(col: str, value: float | None, text: str) -> Cell:
        best, second = rank[col]
        v = None if value is None else round(value, 6)
        return Cell(text, bold=v is not None and best is not None and v == best,
                    underline=v is not None and second is not None and v == second)

    # 3) the table, with the paper's rows and our difference under each row the paper reports
    columns = ["Method", *[labels.get(b, b) for b in benches], "Avg"]
    table = Table(title=f"Table 1: {backbone} (mean ± std over seeds; best bold, second underlined)",
                  columns=columns, label=f"tab:table1-{backbone}")
    records: list[dict[str, Any]] = []
    notes: list[str] = []
    missing_notes: list[str] = []
    groups_seen: list[str] = []
    any_inferred = any_partial = any_single = False
    for r in body:
        row, aggs = r["row"], r["aggs"]
        if groups_seen and row.get("group") != groups_seen[-1]:
            table.rules_after.add(len(table.rows) - 1)
        groups_seen.append(row.get("group"))
        cells: list[Any] = [row["label"]]
        for b in benches:
            a = aggs.get(b)
            if a is None or a.mean is None:
                cells.append("—")
                status = "missing" if r["name"] is None else "not_run"
                records.append({"backbone": backbone, "row": row["label"], "method": row["method"], "benchmark": b,
                                "status": status, "reason": r["reason"] or "not run yet"})
                continue
            text = fmt_pm(a.mean, a.std)
            if len(a.seeds) == 1:
                any_single = True
            if not a.complete:
                text += "*"
                any_partial = True
            cells.append(styled(b, a.mean, text))
            records.append({"backbone": backbone, "row": row["label"], "method": row["method"], "benchmark": b,
                            "status": "ok" if a.complete else "partial", "mean": round(a.mean, 4),
                            "std": None if a.std is None else round(a.std, 4), "n_seeds": len(a.seeds),
                            "seeds": " ".join(map(str, a.seeds)), "n_problems": a.n_problems,
                            "complete": a.complete, "sources": ";".join(a.sources(root))})
        if r["avg"] is not None:
            cells.append(styled("avg", r["avg"], fmt(r["avg"])))
            records.append({"backbone": backbone, "row": row["label"], "method": row["method"], "benchmark": "avg",
                            "status": "ok", "mean": round(r["avg"], 4),
                            "sources": ";".join(s for b in benches for s in aggs[b].sources(root))})
        else:
            cells.append("—")
        table.rows.append(cells)
        if r["reason"]:
            missing_notes.append(f"{row['label']}: {r['reason']}")

        pref = ref.get(row["label"])
        if pref:
            pcells: list[Any] = ["↳ paper"]
            dcells: list[Any] = ["↳ Δ (ours − paper)"]
            for b in [*benches, "avg"]:
                p = pref.get(b)
                ours = r["avg"] if b == "avg" else r["means"].get(b)
                if p is None:
                    pcells.append("—")
                    dcells.append("—")
                    continue
                inferred = bool(p.get("inferred"))
                any_inferred |= inferred
                pcells.append(fmt(p["value"]) + ("†" if inferred else ""))
                diff = None if ours is None else ours - float(p["value"])
                dcells.append(fmt(diff) if diff is None else ("+" if diff >= 0 else "") + fmt(diff))
                rec = next((x for x in records if x["row"] == row["label"] and x["benchmark"] == b), None)
                if rec is None:
                    rec = {"backbone": backbone, "row": row["label"], "method": row["method"], "benchmark": b,
                           "status": "missing" if r["name"] is None else "not_run", "reason": r["reason"]}
                    records.append(rec)
                rec.update({"paper": p["value"], "paper_inferred": inferred,
                            "diff": None if diff is None else round(diff, 4)})
            table.rows.append(pcells)
            table.rows.append(dcells)

    notes.append("Scores in %: accuracy (GSM8K, MATH), pass@1 (MBPP, HumanEval), F1 (HotpotQA, DROP). "
                 "Avg only when all six benchmarks have a number.")
    if any_single:
        notes.append("A cell without ± comes from a single seed.")
    if any_partial:
        notes.append("* the run is incomplete (not every selected problem finished); re-run the target to resume.")
    if ref:
        src = (exp.get("reference") or {}).get("source", "")
        notes.append(f"↳ paper: {src}." + (" † inferred by arithmetic from stated margins/averages, not stated."
                                          if any_inferred else ""))
        if ref_backbone and ref_backbone != backbone:
            notes.append(f"The paper used {ref_backbone}; Δ against a {backbone} run is not a like-for-like comparison.")
    sizes = {b: min((a.n_problems for r in body for bb, a in r["aggs"].items() if bb == b and a.mean is not None),
                    default=0) for b in benches}
    if any(sizes.values()):
        notes.append("Problems per seed (smallest over methods): "
                     + ", ".join(f"{labels.get(b, b)} {n}" for b, n in sizes.items() if n) + ".")
    proto_file = root / exp["experiment"] / f"protocol-{backbone}.json"
    if proto_file.exists():
        import json

        pr = json.loads(proto_file.read_text(encoding="utf-8"))
        st = pr.get("settings") or {}
        extra = [f"{k}={','.join(map(str, pr[k])) if isinstance(pr[k], list) else pr[k]}"
                 for k in ("methods", "benchmarks", "seeds", "limit") if pr.get(k)]
        extra += [o for o in pr.get("user_overrides") or []
                  if not o.startswith(("results_root=", "cache.path=", "runner.progress="))]
        mo = "; ".join(f"{m}: {' '.join(v)}" for m, v in (st.get("method_overrides") or {}).items())
        notes.append(f"Protocol '{pr.get('protocol')}' (last reproduce run): seeds {st.get('seeds')}, "
                     f"limit {st.get('limit')} {st.get('limit_by_benchmark') or ''}".rstrip()
                     + (f", overrides {' '.join(st.get('overrides') or [])}" if st.get("overrides") else "")
                     + (f", per method: {mo}" if mo else "")
                     + (f"; command line: {' '.join(extra)}" if extra else "") + ".")
    notes.extend(f"— {m}" for m in missing_notes)
    table.notes = notes
    return table, records


def write_all(results_root: Path, backbones: list[str] | None = None, out_dir: Path | None = None,
              exp: dict[str, Any] | None = None) -> dict[str, Any]:
    exp = exp or load_experiment("table1")
    root = Path(results_root)
    out = Path(out_dir or root / exp["experiment"])
    backbones = backbones or backbones_on_disk(root, exp["experiment"])
    tables, records = [], []
    for bb in backbones:
        t, recs = build(root, bb, exp)
        tables.append(t)
        records.extend(recs)
    if not tables:
        t, recs = build(root, "local", exp)
        tables, records = [t], recs
    header = ("# Table 1 (DenoiseFlow, arXiv 2603.00532): regenerated from results/ by `python -m scripts.table1`\n\n"
              "Every number below is the mean of `score_pct` over the `metrics.json` files listed in "
              "`table1.csv` (column `sources`).\n")
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
