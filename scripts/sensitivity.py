"""Tables 11-14 and Figure 2 (DenoiseFlow §4.4 sensitivity) from ``results/sens_<param>/`` alone.

    python -m scripts.sensitivity [results_root=results] [backbone=...]

Writes results/sensitivity/table{11,12,13,14}.{md,tex,csv} and results/sensitivity/figure2.{png,pdf}.
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from scripts.collect import backbones_on_disk, cost_per_problem, load_runs
from scripts.figstyle import empty_panel, plt, save
from scripts.render import Cell, Table, fmt, fmt_pm, write_csv, write_tables
from scripts.runs import load_experiment, parse_args

CSV_FIELDS = ["backbone", "param", "value", "benchmark", "mean", "std", "n_seeds", "n_problems", "cost_per_problem",
              "cost_unit", "sources"]


def point_name(exp: dict[str, Any], param: str, value: Any) -> str:
    """The result folder of one point: same string Hydra builds from method.name=denoiseflow-<p>_${key}."""
    return f"{exp['method']}-{param}_{value}"


def collect(root: Path, exp: dict[str, Any], backbone: str) -> dict[str, dict[Any, dict[str, Any]]]:
    out: dict[str, dict[Any, dict[str, Any]]] = {}
    for p, spec in exp["params"].items():
        out[p] = {}
        for v in spec["values"]:
            out[p][v] = {b: load_runs(root, f"{exp['experiment_prefix']}_{p}", b, point_name(exp, p, v), backbone)
                         for b in exp["benchmarks"]}
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
                row.append(fmt_pm(a.mean, a.std) + ("" if a.mean is None or a.complete else "*"))
                if a.mean is not None:
                    means.append(a.mean)
                    c, u = cost_per_problem(a)
                    units.add(u)
                    costs.append(c or 0.0)
                    records.append({"backbone": backbone, "param": p, "value": v, "benchmark": b,
                                    "mean": round(a.mean, 4), "std": None if a.std is None else round(a.std, 4),
                                    "n_seeds": len(a.seeds), "n_problems": a.n_problems, "cost_per_problem": c,
                                    "cost_unit": u, "sources": ";".join(a.sources(root))})
            n = len(exp["benchmarks"])
            row.append(fmt(sum(means) / n) if len(means) == n else "—")
            if len(costs) == n:
                c = sum(costs) / n
                row.append(f"${c:.4f}" if units == {"usd"} else f"{c:.0f} tok")
            else:
                row.append("—")
            t.rows.append(row)
        mine = [r for r in records if r["param"] == p]
        t.notes = [(f"{min(r['n_problems'] for r in mine)}" if mine else "—")
                   + f" seeded random problems per benchmark here (the paper protocol: {exp['sample']}); "
                   "the default value in bold.",
                   "— not run yet (make sweeps)." if not mine else "* incomplete point."]
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
            xs = [v for v in spec["values"] if data[p][v][b].mean is not None]
            if not xs:
                continue
            ys = [data[p][v][b].mean for v in xs]
            errs = [data[p][v][b].std or 0.0 for v in xs]
            ax.errorbar(xs, ys, yerr=errs, marker="o", capsize=3, label=labels.get(b, b))
            lo, hi = min(lo, *(y - e for y, e in zip(ys, errs))), max(hi, *(y + e for y, e in zip(ys, errs)))
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


def write_all(results_root: Path, exp: dict[str, Any] | None = None, backbone: str | None = None) -> dict[str, Any]:
    exp = exp or load_experiment("sensitivity")
    root = Path(results_root)
    if backbone is None:
        found = [bb for p in exp["params"] for bb in backbones_on_disk(root, f"{exp['experiment_prefix']}_{p}")]
        backbone = sorted(set(found), key=lambda b: (b != "gpt-4o-mini", b))[0] if found else "local"
    ts, records, data = tables(root, exp, backbone)
    out = root / "sensitivity"
    paths: list[Path] = []
    for t, (p, spec) in zip(ts, exp["params"].items()):
        md, tex = write_tables(out / f"table{spec['table']}", [t])
        write_csv(out / f"table{spec['table']}.csv", [r for r in records if r["param"] == p], CSV_FIELDS)
        paths += [md, tex, out / f"table{spec['table']}.csv"]
    paths += figure2(root, exp, backbone, data, out / "figure2")
    return {"tables": ts, "records": records, "paths": paths}


def main(argv: list[str] | None = None) -> None:
    opts, rest = parse_args(list(sys.argv[1:] if argv is None else argv), {"results_root": "results", "backbone": None})
    if rest:
        raise SystemExit(f"unknown arguments {rest}")
    res = write_all(Path(opts["results_root"]), backbone=opts["backbone"])
    for t in res["tables"]:
        print(t.to_markdown())
    print("wrote " + ", ".join(map(str, res["paths"])))


if __name__ == "__main__":
    main()
