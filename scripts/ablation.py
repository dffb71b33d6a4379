"""``make ablation``: Table 2, DenoiseFlow variants on GSM8K, MBPP, HotpotQA; score and cost relative to full.

    python -m agentic_repro.scripts.ablation backbone=local                # run what is missing, then write the table
    python -m agentic_repro.scripts.ablation report_only=true              # the table from results/ only (zero calls)

Options: backbone, protocol, variants, benchmarks, seeds, limit, report_only, dry_run, logger; other key=value
arguments are Hydra overrides for every run. Writes results/ablation/table2.{md,tex,csv}.
"""
from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

from agentic_repro.scripts.collect import RunIndex, cost_per_problem
from agentic_repro.scripts.render import Cell, Footnotes, Table, fmt, write_csv, write_tables
from agentic_repro.scripts.runs import (Planned, benchmark_overrides, csv_list, eprint, execute, load_experiment, logger_override,
                          method_config, parse_args, plan, require_backbone_key)

OPTIONS = {"backbone": "local", "protocol": None, "variants": None, "benchmarks": None, "seeds": None,
           "limit": None, "report_only": "false", "dry_run": "false", "logger": "none", "results_root": "results"}
CSV_FIELDS = ["backbone", "variant", "benchmark", "status", "score_mean", "ci_low", "ci_high", "ci_method", "score_std",
              "n_seeds", "n_problems", "answered", "selected", "n_errors", "score_rel", "cost_per_problem", "cost_unit",
              "cost_rel", "footnotes", "reason", "sources"]


def build_plan(exp: dict[str, Any], opts: dict[str, Any], extra: list[str]) -> list[Planned]:
    bb = opts["backbone"]
    pname = opts.get("protocol") or exp.get("protocol_by_backbone", {}).get(bb) or exp["default_protocol"]
    proto = exp["protocols"][pname]
    want = csv_list(opts.get("variants"))
    benches = csv_list(opts.get("benchmarks")) or exp["benchmarks"]
    seeds = [int(s) for s in (csv_list(opts.get("seeds")) or proto["seeds"])]
    items = []
    for v in exp["variants"]:
        if want and v["key"] not in want:
            continue
        for b in benches:
            limit = opts.get("limit") or proto.get("limit_by_benchmark", {}).get(b, proto.get("limit"))
            for s in seeds:
                ov = [f"experiment={exp['experiment']}", f"method={exp['method']}", *v["overrides"],
                      f"benchmark={b}", f"backbone={bb}", f"seed={s}",
                      f"limit={'null' if limit in (None, 'null') else int(limit)}", *proto.get("overrides", []),
                      *benchmark_overrides(proto, b), *extra]
                items.append(Planned(f"{v['key']}/{b}/{bb}/seed={s}", ov))
    return items


def variant_method_name(v: dict[str, Any], default: str) -> str:
    """The variant's result folder (``folder`` in ablation.yaml, else a ``method.name=`` override)."""
    if v.get("folder"):
        return str(v["folder"])
    for ov in v["overrides"]:
        if ov.startswith("method.name="):
            return ov.split("=", 1)[1]
    return default


def build(results_root: Path, backbone: str, exp: dict[str, Any],
          index: RunIndex | None = None) -> tuple[Table, list[dict[str, Any]]]:
    root = Path(results_root)
    index = index or RunIndex.scan(root, exp["experiment"])
    benches, labels = exp["benchmarks"], exp.get("benchmark_labels", {})
    implemented = method_config(exp["method"]) is not None
    cols = ["Variant"]
    for b in benches:
        cols += [f"{labels.get(b, b)} score", f"{labels.get(b, b)} rel.", f"{labels.get(b, b)} cost rel."]
    cols += ["Avg score", "Avg rel.", "Avg cost rel."]
    table = Table(f"Table 2: DenoiseFlow ablation, {backbone} (score % [95% interval] n, and score and cost relative "
                  "to the full model)", cols, label=f"tab:ablation-{backbone}")
    records: list[dict[str, Any]] = []
    full_name = variant_method_name(exp["variants"][0], exp["method"])
    full = {b: index.agg(b, full_name, backbone) for b in benches}
    units = set()
    feet = Footnotes()
    bad_notes: list[str] = []
    for v in exp["variants"]:
        name = variant_method_name(v, exp["method"])
        aggs = {b: index.agg(b, name, backbone) for b in benches}
        recorded = [a.deviations() for a in aggs.values() if a.runs]
        recorded = [d for d in recorded if d is not None]
        devs = [d for ds in recorded for d in ds] if recorded else \
            list((method_config(exp["method"]) or {}).get("deviations") or [])
        devs = list(dict.fromkeys([*devs, *(v.get("deviations") or [])])) if any(a.runs for a in aggs.values()) else []
        foot_csv = feet.numbered(devs) if devs else ""
        row: list[Any] = [v["label"]]
        scores, rels, crels = [], [], []
        for b in benches:
            agg = aggs[b]
            base = {"backbone": backbone, "variant": v["key"], "benchmark": b, "footnotes": foot_csv}
            if not agg.runs:
                reason = ("not implemented yet (no configs/method/%s.yaml)" % exp["method"]) if not implemented \
                    else "not run yet"
                row += ["—", "—", "—"]
                records.append({**base, "status": "missing" if not implemented else "not_run", "reason": reason})
                continue
            counts = {"n_seeds": len(agg.seeds), "n_problems": agg.n_problems, "answered": agg.answered,
                      "selected": agg.selected, "n_errors": agg.n_errors, "sources": ";".join(agg.sources(root))}
            if agg.incomplete:               # errors are not wrong answers: shown, never averaged
                row += [agg.incomplete_text(), "—", "—"]
                records.append({**base, **counts, "status": "incomplete",
                                "reason": "errors or unanswered problems: not averaged"})
                bad_notes.append(f"{v['label']} / {labels.get(b, b)}: {agg.incomplete_text()} ({counts['sources']})")
                continue
            cost, unit = cost_per_problem(agg)
            units.add(unit)
            f_cost, _ = cost_per_problem(full[b]) if full[b].mean is not None else (None, "")
            rel = agg.mean / full[b].mean if full[b].mean else None
            crel = cost / f_cost if (cost is not None and f_cost) else None
            ci = agg.ci()
            row += [f"{fmt(agg.mean)} {ci.text() if ci else '[—]'} n={agg.n_problems}",
                    "—" if rel is None else f"{rel:.3f}", "—" if crel is None else f"{crel:.2f}×"]
            scores.append(agg.mean)
            if rel is not None:
                rels.append(rel)
            if crel is not None:
                crels.append(crel)
            records.append({**base, **counts, "status": "ok", "score_mean": round(agg.mean, 4),  # type: ignore[arg-type]
                            "ci_low": None if ci is None else round(ci.low, 4),
                            "ci_high": None if ci is None else round(ci.high, 4),
                            "ci_method": None if ci is None else ci.method,
                            "score_std": None if agg.std is None else round(agg.std, 4),
                            "score_rel": None if rel is None else round(rel, 4),
                            "cost_per_problem": cost, "cost_unit": unit,
                            "cost_rel": None if crel is None else round(crel, 4)})
        n = len(benches)
        row += [fmt(sum(scores) / n) if len(scores) == n else "—",
                f"{sum(rels) / n:.3f}" if len(rels) == n else "—",
                f"{sum(crels) / n:.2f}×" if len(crels) == n else "—"]
        table.rows.append([Cell(row[0], bold=v["key"] == "full", sup=feet.marks(devs) if devs else ""), *row[1:]])
    table.notes = ["rel. = variant / full (score, then cost per problem); cost is "
                   + (" / ".join(sorted({"usd": "$ per problem", "tokens": "tokens per problem (no price on this backbone)"}
                                        [u] for u in units)) or "$ per problem (tokens when the backbone has no price)")
                   + " ($: the provider's bill, cost_usd; the papers' input + output formula is cost_list_usd)"
                   + ". Score: mean [95% interval over problems: Wilson for accuracy/pass@1, Student t for F1].",
                   *exp.get("reference_notes", [])]
    if bad_notes:
        table.notes.append("incomplete = errors (not wrong answers) or unanswered problems; never averaged: "
                           + " | ".join(bad_notes))
    if feet.texts:
        table.notes.append("Deviations from the paper that can change the score (numbered marks on the row):")
        table.notes.extend(feet.notes())
    if not implemented:
        table.notes.append(f"— DenoiseFlow is not implemented yet (no configs/method/{exp['method']}.yaml).")
    return table, records


def write_all(results_root: Path, exp: dict[str, Any] | None = None,
              backbones: list[str] | None = None) -> dict[str, Any]:
    exp = exp or load_experiment("ablation")
    root = Path(results_root)
    index = RunIndex.scan(root, exp["experiment"])
    backbones = backbones or index.backbones() or ["local"]
    tables, records = [], []
    for bb in backbones:
        t, r = build(root, bb, exp, index)
        tables.append(t)
        records += r
    out = root / exp["experiment"]
    md, tex = write_tables(out / "table2", tables, "# Table 2 (ablation): regenerated from results/ by "
                                                   "`python -m agentic_repro.scripts.ablation report_only=true`\n")
    write_csv(out / "table2.csv", records, CSV_FIELDS)
    return {"tables": tables, "records": records, "paths": [md, tex, out / "table2.csv"]}


def main(argv: list[str] | None = None) -> int:
    opts, extra = parse_args(list(sys.argv[1:] if argv is None else argv), OPTIONS)
    exp = load_experiment("ablation")
    root = Path(opts["results_root"])
    failed: list[Planned] = []
    if str(opts["report_only"]).lower() not in ("1", "true", "yes"):
        if method_config(exp["method"]) is None:
            eprint(f"ablation: configs/method/{exp['method']}.yaml does not exist yet; writing the empty table")
        else:
            if str(opts["dry_run"]).lower() not in ("1", "true", "yes"):
                require_backbone_key(opts["backbone"])
            items = plan(build_plan(exp, opts, [*extra, f"results_root={root}"]), logger_override(opts.get("logger")))
            if str(opts["dry_run"]).lower() in ("1", "true", "yes"):
                for it in items:
                    print(f"{it.state:8s} {it.label}  {' '.join(it.overrides)}" + (f" ({it.error})" if it.error else ""))
                return 0
            t0 = time.time()
            try:    # the table is re-rendered after each run, so Ctrl-C leaves it up to date
                execute(items, log=eprint, on_done=lambda it: write_all(root, exp))
            finally:
                write_all(root, exp)
            eprint(f"ablation runs: {time.time() - t0:.0f}s")
            failed = [it for it in items if it.state in ("failed", "invalid")]
    res = write_all(root, exp)
    for t in res["tables"]:
        print(t.to_markdown())
    print("wrote " + ", ".join(map(str, res["paths"])))
    bad = [r for r in res["records"] if r["status"] == "incomplete"]
    if bad:
        eprint(f"{len(bad)} cells are incomplete (errors or unanswered problems; not averaged): " + "; ".join(
            f"{r['variant']}/{r['benchmark']}: {r['answered']}/{r['selected']} answered, {r['n_errors']} errors "
            f"({r['sources']})" for r in bad))
    if failed:
        eprint(f"{len(failed)} runs failed or were invalid: " + "; ".join(f"{it.label}: {it.error}" for it in failed))
    return 1 if bad or failed else 0


if __name__ == "__main__":
    from agentic_repro.scripts.runs import run_cli

    run_cli(main)
