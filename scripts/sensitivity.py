"""Tables 11-14 and Figure 2 (DenoiseFlow §4.4 sensitivity) from ``results/sens_<param>/`` alone.

    python -m agentic_repro.scripts.sensitivity [results_root=results] [backbone=...]

Writes results/sensitivity/table{11,12,13,14}.{md,tex,csv} and results/sensitivity/figure2.{png,pdf}.
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from agentic_repro.scripts.collect import RunIndex, backbones_on_disk, cost_per_problem
from agentic_repro.scripts.figstyle import empty_panel, plt, save
from agentic_repro.scripts.render import Cell, Table, fmt, write_csv, write_tables
from agentic_repro.scripts.runs import load_experiment, parse_args

CSV_FIELDS = ["backbone", "param", "value", "benchmark", "status", "mean", "ci_low", "ci_high", "ci_method", "std",
              "n_seeds", "n_problems", "answered", "selected", "n_errors", "cost_per_problem", "cost_unit", "sources"]


def point_name(exp: dict[str, Any], param: str, value: Any) -> str:
    """The result folder of one point: same string Hydra builds from method.name=denoiseflow-<p>_${key}."""
    return f"{exp['method']}-{param}_{value}"


def collect(root: Path, exp: dict[str, Any], backbone: str) -> dict[str, dict[Any, dict[str, Any]]]:
    out: dict[str, dict[Any, dict[str, Any]]] = {}
    for p, spec in exp["params"].items():
        out[p] = {}
        index = RunIndex.scan(root, f"{exp['experiment_prefix']}_{p}")
        for v in spec["values"]:
            out[p][v] = {b: index.agg(b, point_name(exp, p, v), backbone) for b in exp["benchmarks"]}
    return out


def tables(root: Path, exp: dict[str, Any], backbone: str) -> tuple[list[Table], list[dict[str, Any]], dict]:
    data = collect(root, exp, backbone)
    labels = exp.get("benchmark_labels", {})
    out, records = [], []
    for p, spec in exp["params"].items():
        cols = [spec["label"], *[labels.get(b, b) for b in exp["benchmarks"]], "Avg", "Cost / problem"]
        t = Table(f"Table {spec['table']}: sensitivity to {spec['label']}, {backbone} (default {spec['default']})",
                  cols, label=f"tab:sens-{p}-{backbone}")
        units = set()
        for v in spec["values"]:
            row: list[Any] = [Cell(str(v), bold=v == spec["default"])]
            means, costs = [], []
            for b in exp["benchmarks"]:
                a = data[p][v][b]
                base = {"backbone": backbone, "param": p, "value": v, "benchmark": b,
                        "n_seeds": len(a.seeds), "n_problems": a.n_problems, "answered": a.answered,
                        "selected": a.selected, "n_errors": a.n_errors, "sources": ";".join(a.sources(root))}
                if a.incomplete:                      # errors are not wrong answers: shown, never averaged
                    row.append(a.incomplete_text())
                    records.append({**base, "status": "incomplete"})
                    continue
                ci = a.ci()
                row.append("—" if a.mean is None else f"{fmt(a.mean)} {ci.text() if ci else '[—]'}")
                if a.mean is not None:
                    means.append(a.mean)
                    c, u = cost_per_problem(a)
                    units.add(u)
                    costs.append(c or 0.0)
                    records.append({**base, "status": "ok", "mean": round(a.mean, 4),
                                    "ci_low": None if ci is None else round(ci.low, 4),
                                    "ci_high": None if ci is None else round(ci.high, 4),
                                    "ci_method": None if ci is None else ci.method,
                                    "std": None if a.std is None else round(a.std, 4),
                                    "cost_per_problem": c, "cost_unit": u})
            n = len(exp["benchmarks"])
            row.append(fmt(sum(means) / n) if len(means) == n else "—")
            if len(costs) == n:
                c = sum(costs) / n
                row.append(f"${c:.4f}" if units == {"usd"} else f"{c:.0f} tok")
            else:
                row.append("—")
            t.rows.append(row)
        mine = [r for r in records if r["param"] == p and r["status"] == "ok"]
        bad = [r for r in records if r["param"] == p and r["status"] == "incomplete"]
        t.notes = [(f"{min(r['n_problems'] for r in mine)}" if mine else "—")
                   + f" seeded random problems per benchmark here (the paper protocol: {exp['sample']}); "
                   "the default value in bold. Cells: score % [95% interval over problems: Wilson for accuracy/"
                   "pass@1, Student t for F1] (scripts/stats.py).",
                   "— not run yet (make sweeps)." if not mine and not bad else "— point not run yet."]
        if bad:
            t.notes.append("incomplete = errors (not wrong answers) or unanswered problems, never averaged: "
                           + "; ".join(f"{r['value']}/{r['benchmark']}: {r['answered']}/{r['selected']}, "
                                       f"{r['n_errors']} errors ({r['sources']})" for r in bad))
        out.append(t)
    return out, records, data


def figure2(root: Path, exp: dict[str, Any], backbone: str, data: dict, out_base: Path) -> list[Path]:
    pyplot = plt()
    params = list(exp["params"])
    fig, axes = pyplot.subplots(1, len(params), figsize=(4.2 * len(params), 3.6), squeeze=False)
    labels = exp.get("benchmark_labels", {})
    for ax, p in zip(axes[0], params):
        spec = exp["params"][p]
        any_line = False
        lo, hi = float("inf"), float("-inf")
        for b in exp["benchmarks"]:
            xs = [v for v in spec["values"] if data[p][v][b].mean is not None]   # complete points only
            if not xs:
                continue
            ys = [data[p][v][b].mean for v in xs]
            cis = [data[p][v][b].ci() for v in xs]          # error bars: the cells' 95% intervals
            errs = [[y - (c.low if c else y) for y, c in zip(ys, cis)], [(c.high if c else y) - y for y, c in zip(ys, cis)]]
            ax.errorbar(xs, ys, yerr=errs, marker="o", capsize=3, label=labels.get(b, b))
            lo = min(lo, *(y - e for y, e in zip(ys, errs[0])))
            hi = max(hi, *(y + e for y, e in zip(ys, errs[1])))
            any_line = True
        if any_line:
            ax.axvline(spec["default"], color="grey", ls="--", lw=1)
            ax.set_xlabel(spec["label"])
            ax.set_ylabel("score (%)")
            ax.set_xticks(spec["values"])
            pad = 0.08 * (max(spec["values"]) - min(spec["values"]))
            ax.set_xlim(min(spec["values"]) - pad, max(spec["values"]) + pad)
            if hi - lo < 5:                      # keep a readable span when the curves are flat
                mid = (hi + lo) / 2
                lo, hi = mid - 2.5, mid + 2.5
            ax.set_ylim(max(-2, lo - 1), min(102, hi + 1))
            ax.legend(loc="best")
        else:
            empty_panel(ax, f"{spec['label']}: no results yet\n(make sweeps)")
        ax.set_title(f"Sensitivity to {spec['label']}")
    fig.suptitle(f"Figure 2: hyper-parameter sensitivity ({backbone})", y=1.03)
    return save(fig, out_base)


def incomplete_points(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in records if r.get("status") == "incomplete"]


def write_all(results_root: Path, exp: dict[str, Any] | None = None, backbone: str | None = None) -> dict[str, Any]:
    exp = exp or load_experiment("sensitivity")
    root = Path(results_root)
    if backbone is None:
        found = [bb for p in exp["params"] for bb in backbones_on_disk(root, f"{exp['experiment_prefix']}_{p}")]
        backbone = sorted(set(found), key=lambda b: (b.split("@")[0] != "gpt-4o-mini", b))[0] if found else "local"
    ts, records, data = tables(root, exp, backbone)
    out = root / "sensitivity"
    paths: list[Path] = []
    for t, (p, spec) in zip(ts, exp["params"].items()):
        md, tex = write_tables(out / f"table{spec['table']}", [t])
        write_csv(out / f"table{spec['table']}.csv", [r for r in records if r["param"] == p], CSV_FIELDS)
        paths += [md, tex, out / f"table{spec['table']}.csv"]
    paths += figure2(root, exp, backbone, data, out / "figure2")
    return {"tables": ts, "records": records, "paths": paths}


def report(res: dict[str, Any]) -> int:
    """Print the tables; 1 (naming the runs) when a point is incomplete, else 0."""
    for t in res["tables"]:
        print(t.to_markdown())
    print("wrote " + ", ".join(map(str, res["paths"])))
    bad = incomplete_points(res["records"])
    if bad:
        print(f"{len(bad)} sweep points are incomplete (errors or unanswered problems; not averaged): "
              + "; ".join(f"{r['param']}={r['value']} {r['benchmark']}: {r['answered']}/{r['selected']} answered, "
                          f"{r['n_errors']} errors ({r['sources']})" for r in bad), file=sys.stderr)
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    opts, rest = parse_args(list(sys.argv[1:] if argv is None else argv), {"results_root": "results", "backbone": None})
    if rest:
        raise SystemExit(f"unknown arguments {rest}")
    return report(write_all(Path(opts["results_root"]), backbone=opts["backbone"]))


if __name__ == "__main__":
    raise SystemExit(main())
