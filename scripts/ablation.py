"""``make ablation``: Table 2, DenoiseFlow variants on GSM8K, MBPP, HotpotQA; score and cost relative to full.

    python -m scripts.ablation backbone=local                # run what is missing, then write the table
    python -m scripts.ablation report_only=true              # the table from results/ only (zero calls)

Options: backbone, protocol, variants, benchmarks, seeds, limit, report_only, dry_run, logger; other key=value
arguments are Hydra overrides for every run. Writes results/ablation/table2.{md,tex,csv}.
"""
from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

from scripts.collect import backbones_on_disk, cost_per_problem, load_runs
from scripts.render import Cell, Table, fmt, fmt_pm, write_csv, write_tables
from scripts.runs import (Planned, csv_list, eprint, execute, load_experiment, logger_override, method_config,
                          parse_args, plan, require_backbone_key)

OPTIONS = {"backbone": "local", "protocol": None, "variants": None, "benchmarks": None, "seeds": None,
           "limit": None, "report_only": "false", "dry_run": "false", "logger": "none", "results_root": "results"}
CSV_FIELDS = ["backbone", "variant", "benchmark", "status", "score_mean", "score_std", "n_seeds", "score_rel",
              "cost_per_problem", "cost_unit", "cost_rel", "reason", "sources"]


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
                      f"limit={'null' if limit in (None, 'null') else int(limit)}", *proto.get("overrides", []), *extra]
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


def build(results_root: Path, backbone: str, exp: dict[str, Any]) -> tuple[Table, list[dict[str, Any]]]:
    root = Path(results_root)
    benches, labels = exp["benchmarks"], exp.get("benchmark_labels", {})
    implemented = method_config(exp["method"]) is not None
    cols = ["Variant"]
    for b in benches:
        cols += [f"{labels.get(b, b)} score", f"{labels.get(b, b)} rel.", f"{labels.get(b, b)} cost rel."]
    cols += ["Avg score", "Avg rel.", "Avg cost rel."]
    table = Table(f"Table 2: DenoiseFlow ablation, {backbone} (score %, and score and cost relative to the full model)",
                  cols, label=f"tab:ablation-{backbone}")
    records: list[dict[str, Any]] = []
    full_name = variant_method_name(exp["variants"][0], exp["method"])
    full = {b: load_runs(root, exp["experiment"], b, full_name, backbone) for b in benches}
    units = set()
    for v in exp["variants"]:
        name = variant_method_name(v, exp["method"])
        row: list[Any] = [v["label"]]
        scores, rels, crels = [], [], []
        for b in benches:
            agg = load_runs(root, exp["experiment"], b, name, backbone)
            if agg.mean is None:
                reason = ("not implemented yet (no configs/method/%s.yaml)" % exp["method"]) if not implemented \
                    else "not run yet"
                row += ["—", "—", "—"]
                records.append({"backbone": backbone, "variant": v["key"], "benchmark": b, "status": "missing"
                                if not implemented else "not_run", "reason": reason})
                continue
            cost, unit = cost_per_problem(agg)
            units.add(unit)
            f_cost, _ = cost_per_problem(full[b])
            rel = agg.mean / full[b].mean if full[b].mean else None
            crel = cost / f_cost if (cost is not None and f_cost) else None
            row += [fmt_pm(agg.mean, agg.std) + ("" if agg.complete else "*"),
                    "—" if rel is None else f"{rel:.3f}", "—" if crel is None else f"{crel:.2f}×"]
            scores.append(agg.mean)
            if rel is not None:
                rels.append(rel)
            if crel is not None:
                crels.append(crel)
            records.append({"backbone": backbone, "variant": v["key"], "benchmark": b,
                            "status": "ok" if agg.complete else "partial", "score_mean": round(agg.mean, 4),
                            "score_std": None if agg.std is None else round(agg.std, 4), "n_seeds": len(agg.seeds),
                            "score_rel": None if rel is None else round(rel, 4),
                            "cost_per_problem": cost, "cost_unit": unit,
                            "cost_rel": None if crel is None else round(crel, 4), "sources": ";".join(agg.sources(root))})
        n = len(benches)
        row += [fmt(sum(scores) / n) if len(scores) == n else "—",
                f"{sum(rels) / n:.3f}" if len(rels) == n else "—",
                f"{sum(crels) / n:.2f}×" if len(crels) == n else "—"]
        table.rows.append([Cell(row[0], bold=v["key"] == "full"), *row[1:]])
    table.notes = ["rel. = variant / full (score, then cost per problem); cost is "
                   + (" / ".join(sorted({"usd": "$ per problem", "tokens": "tokens per problem (no price on this backbone)"}
                                        [u] for u in units)) or "$ per problem (tokens when the backbone has no price)")
                   + ".", "* incomplete run.", *exp.get("reference_notes", [])]
    if not implemented:
        table.notes.append(f"— DenoiseFlow is not implemented yet (no configs/method/{exp['method']}.yaml).")
    return table, records


def write_all(results_root: Path, exp: dict[str, Any] | None = None,
              backbones: list[str] | None = None) -> dict[str, Any]:
    exp = exp or load_experiment("ablation")
    root = Path(results_root)
    backbones = backbones or backbones_on_disk(root, exp["experiment"]) or ["local"]
    tables, records = [], []
    for bb in backbones:
        t, r = build(root, bb, exp)
        tables.append(t)
        records += r
    out = root / exp["experiment"]
    md, tex = write_tables(out / "table2", tables, "# Table 2 (ablation): regenerated from results/ by "
                                                   "`python -m scripts.ablation report_only=true`\n")
    write_csv(out / "table2.csv", records, CSV_FIELDS)
    return {"tables": tables, "records": records, "paths": [md, tex, out / "table2.csv"]}


def main(argv: list[str] | None = None) -> int:
    opts, extra = parse_args(list(sys.argv[1:] if argv is None else argv), OPTIONS)
    exp = load_experiment("ablation")
    root = Path(opts["results_root"])
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
            execute(items, log=eprint)
            eprint(f"ablation runs: {time.time() - t0:.0f}s")
    res = write_all(root, exp)
    for t in res["tables"]:
        print(t.to_markdown())
    print("wrote " + ", ".join(map(str, res["paths"])))
    return 0


if __name__ == "__main__":
    from scripts.runs import run_cli

    run_cli(main)
