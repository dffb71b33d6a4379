"""Reference scores: does this harness reproduce a backbone's published single-model numbers?

    python -m agentic_repro.scripts.reference_scores [backbone=local] [yes=true] [run=false] [<Hydra overrides>...]
    make reference-scores BACKBONE=local

For the chosen backbone, each *reference cell* of configs/reference_scores.yaml (a benchmark under a named
protocol: benchmark config x method config) is run through :mod:`agentic_repro.harness.runner` like any run (cached,
resumable, ledgered, one folder per cell under ``results/<experiment>/``) and set beside the number its maker or
a paper published: inside or outside our 95% interval, and the gap. Embedded backbones get the model maker's
own protocol (Qwen2.5-Coder's EvalPlus prompt); a priced backbone gets IO and CoT on a seeded sample of each
Table 1 benchmark, after its cost estimate is confirmed (``yes=true`` for non-interactive use).

Writes ``results/reference_scores/<backbone>.{md,csv,png}``; each row names its run folder. A cell whose run has
errors is shown as incomplete, never as a number; a cell that cannot be run here says why (``missing``).
docs/reference-scores.md has the findings.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from collections.abc import Callable

import yaml

from agentic_repro.scripts.collect import Agg, RunIndex, stop_fraction
from agentic_repro.scripts.render import Table, fmt, write_csv, write_tables
from agentic_repro.scripts.runs import CONFIGS, Planned, eprint, execute, parse_args, plan, run_cli

CONFIG = CONFIGS / "reference_scores.yaml"
FIELDS = ["cell", "label", "benchmark", "method", "protocol", "status", "n", "selected", "errors", "score_pct",
          "ci_low", "ci_high", "ci_method", "published", "verdict", "gap", "gap_outside_interval", "stop_share", "source",
          "run"]


@dataclass
class Cell:
    name: str
    label: str
    benchmark: str | None = None
    method: str | None = None
    overrides: list[str] = field(default_factory=list)
    published: float | None = None
    source: str = ""
    protocol: str = ""
    missing: str | None = None

    @classmethod
    def of(cls, d: dict[str, Any], extra: list[str] | None = None) -> Cell:
        return cls(name=str(d["name"]), label=str(d.get("label") or d["name"]), benchmark=d.get("benchmark"),
                   method=d.get("method"), overrides=[*(d.get("overrides") or []), *(extra or [])],
                   published=None if d.get("published") is None else float(d["published"]),
                   source=" ".join(str(d.get("source") or "").split()),
                   protocol=" ".join(str(d.get("protocol") or "").split()), missing=d.get("missing"))

    def run_overrides(self, backbone: str, experiment: str, seed: int) -> list[str]:
        return [f"benchmark={self.benchmark}", f"method={self.method}", f"backbone={backbone}",
                f"experiment={experiment}", f"seed={seed}", *self.overrides]


def load_config(path: Path = CONFIG) -> dict[str, Any]:
    return yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}


def backbone_config(backbone: str) -> dict[str, Any]:
    path = CONFIGS / "backbone" / f"{backbone}.yaml"
    if not path.exists():
        raise SystemExit(f"backbone={backbone!r}: no configs/backbone/{backbone}.yaml "
                         f"(have: {', '.join(sorted(p.stem for p in (CONFIGS / 'backbone').glob('*.yaml')))})")
    return yaml.safe_load(path.read_text(encoding="utf-8")) or {}


def is_priced(bb_cfg: dict[str, Any]) -> bool:
    return not _price(bb_cfg).free


def _price(bb_cfg: dict[str, Any]) -> Any:
    """The backbone's price as runs bill it (`price: table` = the dated table's price for its model)."""
    from agentic_repro.harness.pricing import Price

    return Price.from_config(bb_cfg.get("price", 0), str(bb_cfg.get("name")), model=bb_cfg.get("model"))


def cells_for(backbone: str, cfg: dict[str, Any], bb_cfg: dict[str, Any]) -> tuple[list[Cell], list[str]]:
    """The backbone's reference cells and the notes printed under its table."""
    embedded = (cfg.get("backbones") or {}).get(backbone)
    if embedded is not None:
        notes = [f"Model: {embedded.get('model', backbone)}."] + ([" ".join(embedded["note"].split())]
                                                                   if embedded.get("note") else [])
        return [Cell.of(c) for c in embedded.get("cells") or []], notes
    if not is_priced(bb_cfg):
        return [], [f"configs/reference_scores.yaml has no cells for backbone {backbone} (an unpriced backbone): "
                    "add its published numbers under `backbones:`"]
    api = cfg["api"]
    sample = [f"sample={int(api['sample'])}", f"benchmark.sample_seed={int(api['sample_seed'])}"]
    cells = [Cell(name=f"{b}_{m}", label=f"{b} ({ {'io': 'IO', 'cot': 'CoT'}.get(m, m)})", benchmark=b, method=m,
                  overrides=list(sample), protocol=f"ours: configs/method/{m}.yaml on a seeded sample of "
                                                   f"{api['sample']} of the Table 1 split",
                  source="DenoiseFlow Table 1: IO/CoT rows not recovered")
             for b in api["benchmarks"] for m in api["methods"]]
    papers = (api.get("papers") or {})
    cells += [Cell.of(c, sample) for c in papers.get(backbone) or []]
    notes = [" ".join(str(n).split()) for n in papers.get("notes") or []]
    return cells, notes


# ---- cost (priced backbones) ----------------------------------------------------------------------------------

def cost_estimate(cells: list[Cell], cfg: dict[str, Any], bb_cfg: dict[str, Any]) -> tuple[float, list[str]]:
    """(USD, one line per cell): configured tokens per problem x problems x the backbone's price. Cached
    replies are counted as paid (an upper bound)."""
    price = _price(bb_cfg)
    pin, pout = price.input_per_1m / 1e6, price.output_per_1m / 1e6
    table = cfg["api"]["tokens_per_problem"]
    n = int(cfg["api"]["sample"])
    total, lines = 0.0, []
    for c in cells:
        if c.missing or not c.benchmark:
            continue
        per = (table.get(c.method) or {}).get(c.benchmark) or (table.get(c.method) or {}).get(
            c.benchmark.split("_")[0]) or [300, 300]
        usd = n * (per[0] * pin + per[1] * pout)
        total += usd
        lines.append(f"  {c.label}: {n} problems x ~{per[0]}+{per[1]} tokens = ${usd:.3f}")
    return total, lines


def confirm(question: str, yes: bool, ask: Callable[[str], str] = input) -> bool:
    """``yes=true`` answers for the user; without it and without a terminal nothing is spent."""
    if yes:
        return True
    if not sys.stdin.isatty():
        eprint("not confirmed: no terminal to ask on; re-run with yes=true to spend it")
        return False
    return ask(question + " [y/N] ").strip().lower() in ("y", "yes")


# ---- the table ------------------------------------------------------------------------------------------------

def cell_record(cell: Cell, agg: Agg | None, root: Path) -> dict[str, Any]:
    """One row: our number and interval (complete runs only), the published number, inside/outside, the gap."""
    rec: dict[str, Any] = {"cell": cell.name, "label": cell.label, "benchmark": cell.benchmark or "",
                           "method": cell.method or "", "protocol": cell.protocol, "published": cell.published,
                           "source": cell.source}
    if cell.missing:
        return {**rec, "status": "missing", "verdict": " ".join(str(cell.missing).split())}
    if agg is None or not agg.runs:
        return {**rec, "status": "not_run", "verdict": "not run yet"}
    run = agg.runs[0]
    rec.update(run=str(run.dir.relative_to(root) if run.dir.is_relative_to(root) else run.dir),
               n=agg.answered, selected=agg.selected, errors=agg.n_errors)
    stop, known, _ = stop_fraction(run.calls())
    rec["stop_share"] = f"{stop}/{known}" if known else ""
    if not agg.complete:
        return {**rec, "status": "incomplete", "verdict": agg.incomplete_text()}
    ci = agg.ci()
    rec.update(status="ok", score_pct=round(agg.mean, 2), ci_low=None if ci is None else round(ci.low, 2),
               ci_high=None if ci is None else round(ci.high, 2), ci_method=None if ci is None else ci.method)
    if cell.published is None:
        return {**rec, "verdict": "no published number (our protocol)"}
    rec["gap"] = round(agg.mean - cell.published, 2)
    if ci is None:
        return {**rec, "verdict": "no interval (n < 2)"}
    inside = ci.low <= cell.published <= ci.high
    rec["gap_outside_interval"] = 0.0 if inside else round(
        cell.published - ci.high if cell.published > ci.high else ci.low - cell.published, 2)
    return {**rec, "verdict": "inside" if inside else "OUTSIDE"}


def records(cells: list[Cell], root: Path, experiment: str, backbone_label: str, seed: int) -> list[dict[str, Any]]:
    index = RunIndex.scan(root, experiment)
    return [cell_record(c, None if c.missing else index.agg(c.benchmark, c.method, backbone_label, [seed]), root)
            for c in cells]


def table(backbone: str, recs: list[dict[str, Any]], notes: list[str]) -> Table:
    """Protocols, missing reasons and sources are numbered notes, so each row stays one line."""
    from agentic_repro.scripts.render import Footnotes

    foot = Footnotes()
    t = Table(f"Reference scores: {backbone} (our 95% interval vs the published number)",
              ["Cell", "Protocol", "n", "Ours % [95% CI]", "Published", "Verdict", "Gap", "Stop", "Run"])
    for r in recs:
        ours = "—"
        if r["status"] == "ok":
            ci = "" if r.get("ci_low") is None else f" [{fmt(r['ci_low'])}, {fmt(r['ci_high'])}]"
            ci += " (t)" if ci and r.get("ci_method") == "t" else ""      # a graded score: Student t, not Wilson
            ours = f"{fmt(r['score_pct'])}{ci}"
        protocol = f"{r['method']} × {r['benchmark']}" if r["method"] else "—"
        if r["protocol"]:
            protocol += f" ({foot.marks([r['protocol']])})"
        verdict = r["verdict"]
        if r["status"] == "missing":
            verdict = f"missing ({foot.marks([verdict])})"
        published = fmt(r["published"]) + (f" ({foot.marks(['Source: ' + r['source']])})" if r["source"] else "")
        t.rows.append([r["label"], protocol, f"{r.get('n', '')}/{r.get('selected', '')}" if r.get("selected") else "—",
                       ours, published, verdict, fmt(r.get("gap")) if r.get("gap") is not None else "—",
                       r.get("stop_share") or "—", r.get("run") or "—"])
    t.notes = [*notes, *foot.notes(),
               "Gap = ours − published (points). Verdict: whether the published number lies inside our 95% "
               "interval over problems (Wilson for 0/1 scores; (t): Student t, for a cell with graded scores); an "
               "incomplete run is never a number. Stop = replies that ended "
               "with finish_reason=stop. Findings: docs/reference-scores.md."]
    return t


def plot(backbone: str, recs: list[dict[str, Any]], base: Path) -> list[Path]:
    """One row per cell: our interval (bar) and point, the published number (cross)."""
    from agentic_repro.scripts.figstyle import plt, save

    pyplot = plt()
    rows = [r for r in recs if r["status"] == "ok" or r["published"] is not None]
    fig, ax = pyplot.subplots(figsize=(7.5, 0.55 * max(2, len(rows)) + 1.2))
    for y, r in enumerate(rows):
        if r["status"] == "ok" and r.get("ci_low") is not None:
            ax.plot([r["ci_low"], r["ci_high"]], [y, y], color="tab:blue", lw=3, solid_capstyle="butt")
            ax.plot([r["score_pct"]], [y], "o", color="tab:blue")
        elif r["status"] != "ok":
            ax.text(1, y, f"  {r['status']}", va="center", fontsize=8, color="gray")
        if r["published"] is not None:
            ax.plot([r["published"]], [y], "x", color="tab:red", ms=9, mew=2)
    ax.set_yticks(range(len(rows)), [r["label"] for r in rows])
    ax.set_xlim(0, 100)
    ax.invert_yaxis()
    ax.set_xlabel("score % (blue: ours, 95% interval; red ×: published)")
    ax.set_title(f"Reference scores: {backbone}")
    return save(fig, base)


def render(backbone: str, cells: list[Cell], notes: list[str], root: Path, experiment: str, out: Path,
           backbone_label: str, seed: int, echo: bool = True) -> list[dict[str, Any]]:
    """Write the md/tex/csv/png from the runs on disk (also after each run, so an interrupt leaves them current)."""
    recs = records(cells, root, experiment, backbone_label, seed)
    t = table(backbone, recs, notes)
    write_tables(out / backbone, [t])
    write_csv(out / f"{backbone}.csv", recs, FIELDS)
    plot(backbone, recs, out / backbone)
    if echo:
        print(t.to_markdown())
    return recs


# ---- entry point ----------------------------------------------------------------------------------------------

def main(argv: list[str] | None = None) -> int:
    opts, overrides = parse_args(list(sys.argv[1:] if argv is None else argv),
                                 {"backbone": "local", "yes": "false", "run": "true", "config": str(CONFIG),
                                  "results_root": "results"})
    backbone = str(opts["backbone"])
    cfg = load_config(Path(opts["config"]))
    bb_cfg = backbone_config(backbone)
    cells, notes = cells_for(backbone, cfg, bb_cfg)
    root = Path(opts["results_root"])
    experiment, seed = str(cfg.get("experiment", "reference")), int(cfg.get("seed", 42))
    out = root / str(cfg.get("out_dir", "reference_scores"))
    runnable = [c for c in cells if not c.missing]
    base = [f"results_root={root}", *overrides]
    items = plan([Planned(c.name, c.run_overrides(backbone, experiment, seed)) for c in runnable], base)
    from agentic_repro.scripts.collect import backbone_label

    label = backbone_label(items[0].spec.backbone_cfg) if items and items[0].spec else backbone
    if str(opts["run"]).lower() not in ("false", "0", "no") and any(it.state in ("new", "partial") for it in items):
        if is_priced(bb_cfg):
            from agentic_repro.scripts.runs import require_backbone_key

            require_backbone_key(backbone)
            usd, lines = cost_estimate(runnable, cfg, bb_cfg)
            eprint("\n".join([f"Estimated cost on {backbone}: ${usd:.2f} (cached replies counted as paid)", *lines]))
            if not confirm(f"Spend about ${usd:.2f} on {backbone}?", str(opts["yes"]).lower() in ("true", "1", "yes")):
                return 1
        execute(items, log=eprint, on_done=lambda _it: render(backbone, cells, notes, root, experiment, out,
                                                              label, seed, echo=False))
    recs = render(backbone, cells, notes, root, experiment, out, label, seed)
    bad = [r["cell"] for r in recs if r["status"] in ("incomplete", "not_run")] + \
        [it.label for it in items if it.state in ("invalid", "failed")]
    if bad:
        eprint(f"not complete: {', '.join(dict.fromkeys(bad))} (re-run the same command to resume)")
        return 3
    return 0


if __name__ == "__main__":
    run_cli(main)
