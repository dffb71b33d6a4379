"""DyFlow's tables and figures (Tables 1-4, 8, 9, 10; Figures 3/7, 4, 6) from ``results/`` alone, and the runs
they need.

    python -m agentic_repro.scripts.dyflow_tables table=all                       # render everything on disk (no backbone call)
    python -m agentic_repro.scripts.dyflow_tables table=table1 run=true backbone=local   # run what is missing, then render
    python -m agentic_repro.scripts.dyflow_tables table=table4 run=true size=paper backbone=vllm
    python -m agentic_repro.scripts.dyflow_tables table=table1 run=true dry_run=true     # print the plan only

Options: ``table`` (table1|table2|table3|table4|table8|table9|table10|passk|operators|all; ``selfplay`` /
``selfplay-B``: the self-play runs on the train splits that dyflow.train learns from), ``run``, ``dry_run``,
``backbone``, ``size`` (embedded|paper; default from the backbone), ``results_root``, ``out``, ``seeds``,
``limit``, ``methods``, ``benchmarks`` (comma lists narrowing the plan), ``protocol`` (paper: the paper's / release's
measurement, default; ours: the benchmark configs' rules, experiments ``<name>-ours``; every table prints the protocol
its runs recorded; under ``paper`` the judge-scored benchmarks show the LLM judge's score with the rule-based one on a
``↳ rule-based score`` row); any other ``key=value`` is a Hydra override for every run. Rows, sizes and the paper's numbers are
``scripts/experiments/dyflow_tables.yaml``. Every number comes from ``agentic_repro.scripts.collect`` (``metrics.json`` +
``predictions.jsonl``; the CSV's ``sources`` column lists the files); a cell with errors or unanswered problems
shows ``incomplete`` and is never averaged; a row whose method, benchmark, backbone or adapter is not there prints
"—" with the reason. Under each DyFlow row: its designer failures and fallback answers (``agentic_repro.dyflow.counts``, from the
traces). Table 8's DyFlow training cost is the self-play runs' fresh calls (``calls.jsonl``, cache hits excluded). Outputs: ``results/dyflow_tables/<table>.{md,tex,csv}`` and ``figures/*.png|pdf``.
"""
from __future__ import annotations

import functools
import json
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from agentic_repro.dyflow.counts import KEYS as DYFLOW_COUNTS
from agentic_repro.dyflow.counts import note as dyflow_note
from agentic_repro.dyflow.counts import run_counts as dyflow_run_counts
from agentic_repro.scripts.collect import Agg, RunIndex, SeedRun
from agentic_repro.scripts.render import Cell, Footnotes, Table, fmt, write_csv, write_tables
from agentic_repro.scripts.runs import CONFIGS, EXPERIMENTS, Planned, csv_list, method_config, method_folder, parse_args
from agentic_repro.scripts.table1 import cell_protocol, cell_text, marks_note, row_protocol, significance_marks

REPO = Path(__file__).resolve().parents[1]
TABLES = ("table1", "table2", "table3", "table4", "table8", "table9", "table10", "passk", "operators")
OPTIONS = {"table": "all", "run": "false", "dry_run": "false", "backbone": "local", "size": None,
           "results_root": "results", "out": None, "seeds": None, "limit": None, "methods": None, "benchmarks": None, "protocol": None}
# Table 1's extra row: DyFlow with the untrained designer (the run's own model), the same runs as Table 2's base row
UNTRAINED = {"label": "DyFlow, untrained designer", "method": "dyflow", "experiment": "dyflow_table2-base"}
CSV_FIELDS = ["table", "backbone", "row", "method", "benchmark", "status", "scorer", "rule_mean", "mean", "ci_low",
              "ci_high", "n_problems",
              "n_seeds", "n_errors", "invalid_designs", "stages_given_up", "fallback_answers", "review_answers",
              "paper", "diff", "value", "reason", "protocol", "row_protocol", "sources"]


def load_spec() -> dict[str, Any]:
    return yaml.safe_load((EXPERIMENTS / "dyflow_tables.yaml").read_text(encoding="utf-8"))


def size_for(spec: dict[str, Any], backbone: str, requested: str | None) -> tuple[str, dict[str, Any]]:
    name = requested or spec.get("size_by_backbone", {}).get(backbone) or spec.get("default_size", "paper")
    if name not in spec["sizes"]:
        raise SystemExit(f"size={name!r} is not one of {sorted(spec['sizes'])} (scripts/experiments/dyflow_tables.yaml)")
    return name, spec["sizes"][name]


# ---- the measurement protocol ---------------------------------------------------------------------------------------
def protocol_of(spec: dict[str, Any], requested: str | None = None) -> tuple[str, dict[str, Any]]:
    """(name, settings) of the benchmark protocol: ``protocol=`` on the command line, else the spec's default."""
    name = requested or spec.get("protocol", "paper")
    if name not in (spec.get("protocols") or {}):
        raise SystemExit(f"protocol={name!r} is not one of {sorted(spec.get('protocols') or {})} "
                         "(scripts/experiments/dyflow_tables.yaml)")
    return name, spec["protocols"][name]


def protocol_overrides(prot: dict[str, Any], method: str, bench: str, trained_on: list[str] | tuple[str, ...] = (),
                       whole_split: bool = True) -> list[str]:
    """The benchmark overrides of a run under protocol ``prot``. The whole-file split (HumanEval's 164) only where
    the problems were never learnt from: not for a designer trained on the benchmark, not for a searched method
    (it searched on the train part) and not for a run that picks its own split (self-play)."""
    out = list((prot.get("benchmark_overrides") or {}).get(bench) or [])
    split = (prot.get("full_split") or {}).get(bench)
    if split and whole_split and bench not in trained_on and not (method_config(method) or {}).get("search"):
        out.append(f"benchmark.split={split}")
    return out


def role_overrides(prot: dict[str, Any], method: str, bench: str, backbone: str) -> tuple[list[str], str | None]:
    """The judge (and, on DyFlow runs off the embedded model, the summariser) the protocol binds, and why one
    could not be bound (its backbone config is missing)."""
    out: list[str] = []
    why = None
    judge = prot.get("judge") or {}
    if bench in (judge.get("benchmarks") or []):
        jb = judge.get("embedded") if _is_embedded(backbone) else judge.get("api")
        if jb and (CONFIGS / "backbone" / f"{jb}.yaml").exists():
            out.append(f"backbone@roles.judge={jb}")
        elif jb:
            why = f"judge {jb}: no configs/backbone/{jb}.yaml (the rule-based score is the headline)"
    sb = (prot.get("summarizer") or {}).get("api")
    if sb and not _is_embedded(backbone) and "summarizer" in ((method_config(method) or {}).get("roles") or []):
        if (CONFIGS / "backbone" / f"{sb}.yaml").exists():
            out.append(f"backbone@roles.summarizer={sb}")
        else:
            why = (why + "; " if why else "") + f"summarizer {sb}: no configs/backbone/{sb}.yaml"
    return out, why


def _judge_scores(r: SeedRun) -> dict[str, float] | None:
    """Answered problem id -> the judge's score, or None unless every answered prediction has a parsed verdict."""
    out = {}
    for p in r.predictions():
        if p.get("status", "ok") == "error":
            continue
        j = p.get("judge") if isinstance(p.get("judge"), dict) else {}
        if j.get("score") is None:
            return None
        out[p["id"]] = float(j["score"])
    return out


class JudgedRun(SeedRun):
    """A run read through its LLM judge: ``score_pct`` and the per-problem scores are the judge's."""

    @property
    def score_pct(self) -> float | None:   # type: ignore[override]
        s = _judge_scores(self)
        return None if not s else 100.0 * sum(s.values()) / len(s)

    def problem_scores(self) -> dict[str, float]:
        return _judge_scores(self) or {}


def unparsed_verdicts(a: Agg) -> tuple[int, int]:
    """(answers the judge gave no verdict on, answers) over a cell read through its judge; (0, 0) otherwise."""
    preds = [p for r in a.runs if isinstance(r, JudgedRun) for p in r.predictions() if p.get("status", "ok") != "error"]
    return sum(1 for p in preds if (p.get("judge") if isinstance(p.get("judge"), dict) else {}).get("score") is None), \
        len(preds)


def judged(a: Agg) -> Agg | None:
    """The cell read through the judge, or None when no run of it was judged."""
    if not a.runs or not any(isinstance(p.get("judge"), dict) for r in a.runs for p in r.predictions()):
        return None
    return Agg([JudgedRun(r.seed, r.dir, r.metrics, r._preds, r._config) for r in a.runs])


def _judge_label(a: Agg) -> str:
    names = sorted({str(((r.config().get("roles") or {}).get("judge") or {}).get("model")
                         or ((r.config().get("roles") or {}).get("judge") or {}).get("name") or "?") for r in a.runs})
    return ", ".join(names)


def _scored_of(r: SeedRun, bc: dict[str, Any]) -> str:
    """``<selected> of <total> problems`` from the run's meta.json, else the limit its config.yaml recorded."""
    try:
        data = json.loads((r.dir / "meta.json").read_text(encoding="utf-8")).get("data") or {}
    except (OSError, ValueError):
        data = {}
    if data.get("total") is not None:
        return f"{data.get('selected')} of {data['total']} problems"
    lim = bc.get("limit") if bc.get("limit") is not None else r.config().get("limit")
    return f"limit {lim}" if lim is not None else "every problem"


def protocol_note(body: list[tuple[str, dict[str, Agg]]], benches: list[str], labels: dict[str, str],
                  rule_where: str = "on the ↳ rule-based score row") -> str | None:
    """One line per table, from what the runs recorded (config.yaml, metrics.json): per benchmark the split, the
    problems scored of those selected, and the extraction rule, with the rows that ran each."""
    parts = []
    for b in benches:
        groups: dict[str, list[str]] = {}
        for label, aggs in body:
            a = aggs.get(b)
            for r in (a.runs if a else []):
                bc = r.config().get("benchmark") or {}
                key = f"split {bc.get('split', '?')}" + (f", extraction {bc['extraction']}" if bc.get("extraction") else "")
                key += f", {_scored_of(r, bc)}"
                if any(isinstance(p.get("judge"), dict) for p in r.predictions()):
                    jr = ((r.config().get("roles") or {}).get("judge") or {})
                    key += (f", headline = LLM judge {jr.get('model') or jr.get('name') or '?'} (the paper: "
                            f"gpt-4.1-mini), rule-based score {rule_where}")
                elif (bc.get("judge") or {}).get("enabled"):
                    key += ", headline = rule-based (no judge ran; the paper: judge gpt-4.1-mini)"
                if label not in groups.setdefault(key, []):
                    groups[key].append(label)
        if groups:
            one = len(groups) == 1
            parts.append(f"{labels[b]}: " + "; ".join(k if one else f"{k} ({', '.join(v)})" for k, v in groups.items()))
    return ("Protocol (recorded by the runs): " + " | ".join(parts)) if parts else None


# ---- what a row needs --------------------------------------------------------------------------------------
def _is_embedded(backbone: str) -> bool:
    return backbone.split("@")[0].startswith("local")


def adapter_path(spec: dict[str, Any], name: str, backbone: str, root: Path | None = None) -> Path:
    """The trained adapter ``name`` for ``backbone``: the GGUF LoRA for the embedded server, the peft folder else."""
    a = spec["adapters"]
    base = Path(root or a["dir"])
    if not base.is_absolute():
        base = REPO / base
    sub = base / a["files"].get(name, name)
    return sub / "adapter.gguf" if _is_embedded(backbone) else sub / "adapter"


def row_needs(spec: dict[str, Any], row: dict[str, Any], backbone: str, adapters_root: Path | None = None
              ) -> tuple[list[str], str | None]:
    """(the Hydra overrides the row's runs need beyond method/benchmark/backbone, the reason it cannot run)."""
    m = row.get("method")
    if m and method_config(m) is None:
        return [], row.get("missing") or f"not implemented yet (no configs/method/{m}.yaml)"
    ov: list[str] = []
    db = row.get("designer_backbone")
    if db:
        if not (CONFIGS / "backbone" / f"{db}.yaml").exists():
            return [], f"designer {db}: no configs/backbone/{db}.yaml (add one with its API key to run this row)"
        ov.append(f"backbone@roles.designer={db}")
    names = list(row.get("needs_adapters") or []) + ([row["designer_adapter"]] if row.get("designer_adapter") else [])
    for n in dict.fromkeys(names):
        p = adapter_path(spec, n, backbone, adapters_root)
        if not p.exists():
            return [], (f"needs the trained designer adapter {n!r} ({p.relative_to(REPO) if p.is_relative_to(REPO) else p}"
                        " missing): make reproduce-dyflow-train")
        ov.append(f"+backbone.adapters.{n}.path={p}")
    if row.get("designer_adapter"):
        ov.append(f"roles.designer.adapter={row['designer_adapter']}")
    return ov, None


def bench_missing(b: str) -> str | None:
    return None if (CONFIGS / "benchmark" / f"{b}.yaml").exists() else f"benchmark {b} not built (no configs/benchmark/{b}.yaml)"


# ---- reading results ---------------------------------------------------------------------------------------
@functools.cache
def _folder(method: str) -> str:
    """The result-folder name of a method config: its literal ``name:``, else composed (once per name)."""
    cfg = method_config(method)
    if cfg is None:
        return method
    name = cfg.get("name")
    return name if isinstance(name, str) and "${" not in name else method_folder(method)


class Results:
    """RunIndex per experiment, scanned once; ``suffix`` names the protocol's experiments (``-ours``)."""

    def __init__(self, root: Path, suffix: str = "") -> None:
        self.root = Path(root)
        self.suffix = suffix
        self._idx: dict[str, RunIndex] = {}

    def index(self, experiment: str) -> RunIndex:
        if experiment not in self._idx:
            self._idx[experiment] = RunIndex.scan(self.root, experiment + self.suffix)
        return self._idx[experiment]

    def agg(self, experiment: str, bench: str, method: str, backbone: str) -> Agg:
        return self.index(experiment).agg(bench, _folder(method), backbone)

    def backbones(self, experiments: list[str]) -> list[str]:
        seen: list[str] = []
        for e in experiments:
            for b in self.index(e).backbones():
                if b not in seen:
                    seen.append(b)
        return seen


def _embedded_note(backbone: str) -> str:
    return (f" — numbers on the embedded model ({backbone}), not comparable with the paper's (Phi-4)"
            if _is_embedded(backbone) else "")


def _paper_rows(ref_rows: dict[str, Any], label: str, ours: dict[str, float | None], cols: list[str]
                ) -> tuple[list[Any], list[Any]]:
    pref = ref_rows.get(label) or {}
    p, d = ["↳ paper"], ["↳ Δ (ours − paper)"]
    for c in cols:
        v = pref.get(c)
        o = ours.get(c)
        p.append("—" if v is None else fmt(float(v), 2))
        diff = None if v is None or o is None else o - float(v)
        d.append("—" if diff is None else ("+" if diff >= 0 else "") + fmt(diff))
    return p, d


def _code_domain(r: SeedRun, bench: str) -> bool:
    """Whether the run's benchmark is a code benchmark: the domain its recorded benchmark block declares (a YAML
    benchmark's ``domain:``) or its ``kind``'s class has (either spelling, harness/refs.py), else the same from
    configs/benchmark/<bench>.yaml."""
    from agentic_repro.harness.refs import resolve_ref

    block = r.config().get("benchmark") or {}
    path = CONFIGS / "benchmark" / f"{bench}.yaml"
    if not block.get("kind") and path.exists():
        block = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    if block.get("domain"):
        return block["domain"] == "code"
    try:
        return getattr(resolve_ref(str(block.get("kind") or ""), "benchmark.kind"), "domain", None) == "code"
    except ValueError:
        return False


def _code_postprocess(r: SeedRun) -> str:
    """The run's ``code_postprocess`` as it recorded it: config.yaml ``method.params``, else the options in its
    traces, else the DyFlow default when the config recorded params without it; "not recorded" otherwise."""
    from agentic_repro.dyflow.config import Options

    params = (r.config().get("method") or {}).get("params")
    if isinstance(params, dict):
        return str(params.get("code_postprocess", Options.code_postprocess))
    for p in r.predictions():
        opts = (p.get("trace") or {}).get("options") or {}
        if "code_postprocess" in opts:
            return str(opts["code_postprocess"])
    return "not recorded"


def code_rewrite_note(a: Agg, bench: str, labels: dict[str, str]) -> str | None:
    """The footnote of a DyFlow code cell whose runs did not apply the release's final-code rewrite (the
    gpt-4.1-mini code-extraction prompt of dyflow-supplement §3.2 on the final answer, then its first python
    block), from each run's recorded ``code_postprocess``; None when every run applied it or the cell is not code."""
    runs = [r for r in a.runs if _code_domain(r, bench)]
    got = sorted({_code_postprocess(r) for r in runs} - {"release"})
    if not got:
        return None
    return (f"{labels.get(bench, bench)}: the release's final-code rewrite (its code-extraction prompt, run with "
            f"gpt-4.1-mini, on the final answer; dyflow-supplement §3.2) was not applied: code_postprocess="
            f"{'/'.join(got)} recorded by the runs (method.params.code_postprocess=release applies it, on the "
            "executor role); the paper's numbers had it")


def footnoted(a: Agg, bench: str, labels: dict[str, str], feet: Footnotes) -> Any:
    """A DyFlow cell's text ("—" without runs), marked with the code-rewrite footnote where its runs had it off."""
    if not a.runs:
        return "—"
    rewrite = code_rewrite_note(a, bench, labels)
    return Cell(cell_text(a), sup=feet.marks([rewrite])) if rewrite else cell_text(a)


def search_setting_notes(method: str | None, aggs: dict[str, Agg]) -> list[str]:
    """For a searched row: the split and every search parameter its runs recorded (config.yaml) that differs from
    the method's config (the paper protocol), e.g. the tiny embedded size; nothing for a row without runs."""
    base = ((method_config(method) or {}).get("search") or {}) if method else {}
    if not base:
        return []
    out: list[str] = []
    for a in aggs.values():
        for r in a.runs:
            ran = (r.config().get("method") or {}).get("search") or {}
            if not ran:
                continue
            bp, rp = base.get("params") or {}, ran.get("params") or {}
            diffs = [f"{k}={json.dumps(rp.get(k))} (config: {json.dumps(bp.get(k))})"
                     for k in sorted(set(bp) | set(rp)) if rp.get(k) != bp.get(k)]
            text = f"search on the {ran.get('split', base.get('split'))} split" + \
                (f" at a reduced setting: {', '.join(diffs)}" if diffs else " at the config's setting")
            if text not in out:
                out.append(text)
    return out


@dataclass
class ScoreRendering:
    """What one score table collects while its rows are rendered (as Table 1's :class:`Rendering`): the CSV records
    (shared with the other tables of the call), the numbered footnotes, the per-row notes, whether a counts row ran."""

    key: str
    backbone: str
    labels: dict[str, str]
    root: Path
    records: list[dict[str, Any]]
    feet: Footnotes = field(default_factory=Footnotes)
    notes: list[str] = field(default_factory=list)
    counted: bool = False

    def own(self, row: dict[str, Any], b: str | None = None) -> list[dict[str, Any]]:
        """This table's records of ``row`` (of benchmark ``b`` when given)."""
        return [r for r in self.records if r["table"] == self.key and r["row"] == row["label"]
                and r["backbone"] == self.backbone and (b is None or r["benchmark"] == b)]


def score_body(res: Results, spec: dict[str, Any], t: dict[str, Any], backbone: str,
               extra_rows: list[dict[str, Any]] | None, judge_benches: list[str]) -> list[tuple[Any, ...]]:
    """Per row: (row with its rule-based cells under ``_rule``, experiment, cells by benchmark, means, Avg, why it
    has no numbers). On the judge-scored benchmarks the judge is the cell, the rule-based reading beside it."""
    benches = spec["benchmarks"]
    body = []
    for row in [*t["rows"], *(extra_rows or [])]:
        _, reason = row_needs(spec, row, backbone)
        exp = row.get("experiment") or t["experiment"]
        aggs = {b: res.agg(exp, b, row["method"], backbone) for b in benches}
        rule = {}
        for b in judge_benches:   # the paper's judge-scored benchmarks: the judge is the cell, the rule beside
            j = judged(aggs[b])
            if j is not None:
                rule[b], aggs[b] = aggs[b], j
        row = {**row, "_rule": rule}
        if reason is None and not any(a.runs for a in aggs.values()):
            reason = "implemented, not run yet on this backbone"
        if reason and any(a.runs for a in aggs.values()):
            reason = None          # runs exist (made when the requirement was met): show them
        means = {b: aggs[b].mean for b in benches}
        avg = sum(means.values()) / len(benches) if all(v is not None for v in means.values()) else None  # type: ignore[misc]
        body.append((row, exp, aggs, means, avg, reason))
    return body


def score_row_deviations(row: dict[str, Any], aggs: dict[str, Agg]) -> list[str]:
    """The row's footnote texts: deviations its runs recorded, the row's own (only once it ran), its search's
    recorded setting."""
    devs: list[str] = []
    for a in aggs.values():
        for d in a.deviations() or []:
            if d not in devs:
                devs.append(d)
    ran = any(a.runs for a in aggs.values())    # the row's own deviations describe how its runs ran
    for d in [*((row.get("deviations") or []) if ran else []), *search_setting_notes(row.get("method"), aggs)]:
        if d not in devs:
            devs.append(d)
    return devs


def score_cell(ren: ScoreRendering, row: dict[str, Any], b: str, a: Agg, reason: str | None, mark: str | None) -> Any:
    """One benchmark cell (its record appended): "—" when not run, else the cell's text, marked as ``mark`` says
    and footnoted where a DyFlow code run had the release's rewrite off."""
    rec = {"table": ren.key, "backbone": ren.backbone, "row": row["label"], "method": row.get("method"), "benchmark": b}
    if not a.runs:
        ren.records.append({**rec, "status": "missing", "reason": reason or bench_missing(b) or "not run yet"})
        return "—"
    ci = a.ci()
    rewrite = code_rewrite_note(a, b, ren.labels) if _is_dyflow(row.get("method")) else None
    unparsed, answered = unparsed_verdicts(a)
    # a judge-read cell with an answer the judge gave no verdict on has no number: say so, never the "—" of not run
    text = f"judge: no verdict on {unparsed}/{answered} answers (not averaged)" if unparsed and a.mean is None \
        else cell_text(a)
    status = "judge_unparsed" if unparsed and a.mean is None else "ok" if a.mean is not None else "incomplete"
    ren.records.append({**rec, "status": status, "mean": a.mean,
                        "ci_low": ci.low if ci else None, "ci_high": ci.high if ci else None,
                        "n_problems": a.n_problems, "n_seeds": len(a.seeds), "n_errors": a.n_errors,
                        "sources": ";".join(a.sources(ren.root))})
    return Cell(text, bold=mark == "bold", underline=mark == "underline",
                sup=ren.feet.marks([rewrite]) if rewrite else "")


def rule_row(ren: ScoreRendering, row: dict[str, Any], benches: list[str]) -> list[Any]:
    """The ``↳ rule-based score`` row under a row whose judge-scored cells show the judge (records say so)."""
    for rec in ren.own(row):
        if rec["benchmark"] in row["_rule"]:
            rec["scorer"] = "judge"
            rec["rule_mean"] = row["_rule"][rec["benchmark"]].mean
    return ["↳ rule-based score", *[cell_text(row["_rule"][b]) if b in row["_rule"] else "" for b in benches], ""]


def counts_row(ren: ScoreRendering, row: dict[str, Any], aggs: dict[str, Agg], benches: list[str]) -> list[Any]:
    """The ``↳ designer failures / fallback answers`` row under a DyFlow row (counts into its records)."""
    under = ["↳ designer failures / fallback answers"]
    for b in benches:
        c = dyflow_run_counts(p for r in aggs[b].runs for p in r.predictions()) if aggs[b].runs else None
        under.append("—" if c is None else dyflow_note(c))
        for rec in ren.own(row, b):
            if c:
                rec.update({k: c[k] for k in DYFLOW_COUNTS})
    ren.counted = True
    return [*under, "—"]


def score_paper_rows(ren: ScoreRendering, ref: dict[str, Any], row: dict[str, Any], means: dict[str, float | None],
                     avg: float | None, benches: list[str]) -> list[list[Any]]:
    """The ``↳ paper`` and ``↳ Δ`` rows under a row the paper reports (paper value and Δ into its records)."""
    p, d = _paper_rows(ref, row["label"], {**means, "avg": avg}, [*benches, "avg"])
    for b in benches:
        v = ref[row["label"]].get(b)
        for r in ren.own(row, b):
            r["paper"] = v
            r["diff"] = None if v is None or r.get("mean") is None else round(r["mean"] - v, 4)
    return [p, d]


def designer_protocol(aggs: dict[str, Agg], pp: dict[str, Any]) -> str:
    """A DyFlow row's designer as its runs' designer calls recorded it (calls.jsonl model and adapter) against the
    paper's DyPlanner."""
    got = sorted({str(c.get("model") or "?") + (f" + adapter {c['adapter']}" if c.get("adapter") else "")
                  for a in aggs.values() for r in a.runs for c in r.calls()
                  if c.get("role") == "designer" and not c.get("error")})
    return f"designer {'/'.join(got) or 'not recorded'} vs paper {pp.get('designer', 'not stated')}"


def score_protocol_row(ren: ScoreRendering, row: dict[str, Any], aggs: dict[str, Agg], benches: list[str],
                       pp: dict[str, Any]) -> list[Any]:
    """The ``↳ protocol`` row under a row the paper reports, generated from what its runs recorded against
    ``paper_protocol`` (as Table 1's): backbone, designer (DyFlow rows), temperature, max tokens; per benchmark the
    scorer and judge, split and n of the paper's, seeds. A searched row says its test split holds out the part
    its search ran on (HumanEval: 109 of the paper's 164)."""
    rp = row_protocol(row["label"], aggs, pp)
    if _is_dyflow(row.get("method")):
        rp += "; " + designer_protocol(aggs, pp)
    searched = bool((method_config(row.get("method") or "") or {}).get("search")) if row.get("method") else False
    cells = []
    for b in benches:
        text = cell_protocol(b, aggs[b], pp)[0]
        if searched and aggs[b].runs:
            text += "; a searched row runs the test split only: its train part is held out for the search"
        cells.append(text)
        for rec in ren.own(row, b):
            rec["protocol"], rec["row_protocol"] = text, rp
    return [rp, *cells, ""]


def score_rows(ren: ScoreRendering, body_row: tuple[Any, ...], benches: list[str], marks: dict[str, dict[int, str]],
               ri: int, ref: dict[str, Any], pp: dict[str, Any] | None = None) -> list[list[Any]]:
    """One method's row and the rows under it: rule-based score, DyFlow's counts, the paper's value, Δ and the
    protocol line (where ``pp``, the paper's protocol, is given)."""
    row, _exp, aggs, means, avg, reason = body_row
    devs = score_row_deviations(row, aggs)
    cells: list[Any] = [Cell(row["label"], sup=ren.feet.marks(devs)) if devs else row["label"]]
    cells += [score_cell(ren, row, b, aggs[b], reason, marks[b].get(ri)) for b in benches]
    cells.append(fmt(avg) if avg is not None else "—")     # a mean of means has no paired test: no mark
    out = [cells]
    if row["_rule"]:   # the rule-based score of the judge-scored cells, beside the judge's
        out.append(rule_row(ren, row, benches))
    if _is_dyflow(row.get("method")) and any(a.runs for a in aggs.values()):
        out.append(counts_row(ren, row, aggs, benches))
    if row["label"] in ref:
        out.extend(score_paper_rows(ren, ref, row, means, avg, benches))
        if pp:
            out.append(score_protocol_row(ren, row, aggs, benches, pp))
    if reason:
        ren.notes.append(f"— {row['label']}: {reason}")
    return out


def score_notes(ren: ScoreRendering, spec: dict[str, Any], t: dict[str, Any], body: list[tuple[Any, ...]],
                alpha: float) -> list[str]:
    """The notes under a score table, in reading order."""
    benches = spec["benchmarks"]
    notes = [f"Scores in % (accuracy; pass@1 for HumanEval), mean over problems with its 95% interval "
             f"(scripts/stats.py); Avg only when all five are complete; incomplete cells are never averaged. "
             f"↳ paper: {(t.get('reference') or {}).get('source', spec['paper'])}.",
             marks_note(alpha, "dyflow_tables", "five")]
    line = protocol_note([(r[0]["label"], r[2]) for r in body], benches, ren.labels)
    if line:
        notes.append(line)
    if spec.get("paper_protocol") and (t.get("reference") or {}).get("rows"):
        notes.append("↳ protocol: generated from what each row's runs recorded (calls.jsonl models, designer calls "
                     "and temperatures, config.yaml scorer keys and max tokens, meta.json split and n, the seeds), "
                     "each against the paper's protocol (DyFlow §4.1, D.1 Table 7, D.3; `paper_protocol` in "
                     "scripts/experiments/dyflow_tables.yaml): = paper, ≠ paper, or \"paper: not stated\".")
    if ren.counted:
        notes.append("↳ designer failures / fallback answers (DyFlow rows, answered problems, from the traces): "
                     "invalid designs = designer replies that could not be used (re-asked); stages given up = "
                     "planning steps with no valid stage after the re-asks; fallback answers = answers that are "
                     "not a terminal operator's (no_answer=last_output), of which a review = a REVIEW_SOLUTION "
                     "text scored as the answer.")
    if ren.feet.texts:
        notes.append("Deviations recorded by the runs (numbered marks):")
        notes.extend(ren.feet.notes())
    notes.extend([f"— {ren.labels[b]}: {m}" for b in benches if (m := bench_missing(b))] + ren.notes)
    return notes


def score_table(res: Results, spec: dict[str, Any], key: str, backbone: str, records: list[dict[str, Any]],
                extra_rows: list[dict[str, Any]] | None = None, protocol: dict[str, Any] | None = None) -> Table:
    """Methods x the five benchmarks + Avg, the best bold and the second underlined where a paired test over the
    shared problems says they are (:func:`agentic_repro.scripts.table1.significance_marks`), the paper's row and Δ
    under each row it reports: the numbers (:func:`score_body`), the marks per column, a row at a time
    (:func:`score_rows`), the notes (:func:`score_notes`)."""
    t = spec[key]
    benches = spec["benchmarks"]
    labels = spec["benchmark_labels"]
    judge_benches = [b for b in benches if b in ((protocol or {}).get("judge") or {}).get("benchmarks", [])]
    ref = (t.get("reference") or {}).get("rows", {})
    table = Table(title=f"{t['title']} — {backbone}{_embedded_note(backbone)} (score % [95% interval] n; "
                  "bold/underlined: significantly best/second)",
                  columns=["Method", *[labels[b] for b in benches], "Avg"], label=f"tab:dyflow-{key}-{backbone}")
    body = score_body(res, spec, t, backbone, extra_rows, judge_benches)
    alpha = float(spec.get("significance_alpha", 0.05))   # best/second only where a paired test says so
    marks = {b: significance_marks([r[2][b] for r in body], alpha) for b in benches}
    ren = ScoreRendering(key, backbone, labels, res.root, records)
    pp = spec.get("paper_protocol") if "phi-4" in str((t.get("reference") or {}).get("backbone", "")).lower() else None
    for ri, body_row in enumerate(body):
        table.rows.extend(score_rows(ren, body_row, benches, marks, ri, ref, pp))
    table.notes = score_notes(ren, spec, t, body, alpha)
    return table


def _is_dyflow(method: str | None) -> bool:
    return bool(method) and str((method_config(method) or {}).get("solver") or "").startswith("agentic_repro.dyflow.")


def table3(res: Results, spec: dict[str, Any], backbone: str, records: list[dict[str, Any]],
           protocol: dict[str, Any] | None = None) -> Table:
    t = spec["table3"]
    dom, labels = spec["domains"], spec["benchmark_labels"]
    splits = spec["selfplay"]["train_benchmarks"]
    table = Table(title=f"{t['title']} — {backbone}{_embedded_note(backbone)}",
                  columns=["Test", "Train", "CoT", "DyFlow", "paper CoT", "paper DyFlow", "Δ DyFlow − CoT (ours)"],
                  label=f"tab:dyflow-table3-{backbone}")
    protocol_rows: list[tuple[str, dict[str, Agg]]] = []
    feet = Footnotes()
    for row in t["rows"]:
        b = row["test"]
        cot = res.agg(t["cot"]["experiment"], b, t["cot"]["method"], backbone)
        dy = res.agg(row["experiment"], b, "dyflow", backbone)
        rule_of = {"CoT": cot, "DyFlow": dy}
        if b in ((protocol or {}).get("judge") or {}).get("benchmarks", []):   # judge-scored, as in Table 1
            cot, dy = judged(cot) or cot, judged(dy) or dy
        protocol_rows += [(f"CoT {dom[b]}", {b: cot}), (f"DyFlow {dom[b]}", {b: dy})]
        adir = spec["adapters"]["cross_task"][row["split"]]
        cells: list[Any] = [cell_text(cot) if cot.runs else "—", footnoted(dy, b, labels, feet)]
        gain = None if cot.mean is None or dy.mean is None else dy.mean - cot.mean
        train = ", ".join(dom[x] for x in splits[row["split"]])
        table.rows.append([f"{dom[b]} ({labels[b]})", train, *cells, fmt(row["paper"]["cot"], 2),
                           fmt(row["paper"]["dyflow"], 2), "—" if gain is None else ("+" if gain >= 0 else "") + fmt(gain)])
        for name, a in (("CoT", cot), ("DyFlow", dy)):
            records.append({"table": "table3", "backbone": backbone, "row": f"{dom[b]}/{name}", "benchmark": b,
                            "method": name.lower(), "status": "ok" if a.mean is not None else ("incomplete" if a.runs else "missing"),
                            "mean": a.mean, "paper": row["paper"][name.lower()], "n_problems": a.n_problems,
                            **({"scorer": "judge", "rule_mean": rule_of[name].mean} if a is not rule_of[name] else {}),
                            "reason": None if a.runs else f"not run (DyFlow designer trained on split {row['split']}: {adir})",
                            "sources": ";".join(a.sources(res.root))})
    table.notes = [f"Domains: {', '.join(f'{v} = {labels[k]}' for k, v in dom.items())}. Split A = the main DyPlanner "
                   f"(trained on {', '.join(labels[x] for x in splits['A'])}: Table 1's DyFlow runs); split B trained on "
                   f"{', '.join(labels[x] for x in splits['B'])} ({spec['adapters']['cross_task']['B']}). CoT from Table 1's runs."]
    line = protocol_note(protocol_rows, spec["benchmarks"], labels, "in the CSV (rule_mean)")
    if line:
        table.notes.append(line)
    if feet.texts:
        table.notes.append("Deviations recorded by the runs (numbered marks):")
        table.notes.extend(feet.notes())
    return table


# ---- costs ---------------------------------------------------------------------------------------------------
def _role_sums(a: Agg, roles: list[str] | None = None) -> dict[str, float] | None:
    """Mean over the cell's runs of prompt/completion tokens and $ (all roles, or only ``roles``)."""
    if not a.runs:
        return None
    tot = {"prompt_tokens": 0.0, "completion_tokens": 0.0, "cost_usd": 0.0}
    for r in a.runs:
        for role, v in r.by_role().items():
            if roles is None or role in roles:
                for k in tot:
                    tot[k] += float(v.get(k) or 0)
    return {k: v / len(a.runs) for k, v in tot.items()}


def _fresh_role_sums(a: Agg, roles: list[str] | None = None) -> tuple[dict[str, float] | None, str | None]:
    """Mean over the cell's runs of the tokens and $ of the *fresh* calls in ``calls.jsonl`` (all roles, or only
    ``roles``): a replayed cache hit (a resumed run re-asking what it had paid for, or a run replaying another's
    calls) cost nothing, so it is not training cost. (None, why) when a run has no ledger to tell them apart."""
    if not a.runs:
        return None, None
    tot = {"prompt_tokens": 0.0, "completion_tokens": 0.0, "cost_usd": 0.0, "replayed": 0.0}
    for r in a.runs:
        calls = r.calls()
        if not calls and r.n:
            return None, f"{r.dir / 'calls.jsonl'} is missing or empty: its fresh calls are unknown"
        for c in calls:
            if roles is not None and (c.get("role") or "default") not in roles:
                continue
            if c.get("cache_hit"):
                tot["replayed"] += 1
                continue
            tot["prompt_tokens"] += float(c.get("prompt_tokens") or 0)
            tot["completion_tokens"] += float(c.get("completion_tokens") or 0)
            tot["cost_usd"] += float(c.get("cost_usd") or 0.0)
    return {k: v / len(a.runs) for k, v in tot.items()}, None


def _artifact_cost(root: Path, method: str, bench: str, backbone: str) -> dict[str, float] | None:
    """Search (training) cost from a workflow-search artifact (interface 3: ``search_cost`` per role)."""
    hits = sorted((root / "search" / bench / _folder(method)).glob(f"{backbone}/seed=*/artifact.json"))
    if not hits:
        return None
    doc = json.loads(hits[0].read_text(encoding="utf-8"))
    sc = doc.get("search_cost") or {}
    roles = sc.get("by_role") if isinstance(sc.get("by_role"), dict) else \
        ({k: v for k, v in sc.items() if isinstance(v, dict)} or {"all": sc})
    tot = {"prompt_tokens": 0.0, "completion_tokens": 0.0, "cost_usd": 0.0}
    for v in roles.values():
        for k in tot:
            tot[k] += float(v.get(k) or 0)
    return tot


def _tok(x: float | None) -> str:
    return "—" if x is None else f"{int(round(x)):,}"


def _usd(x: float | None) -> str:
    return "—" if x is None else f"{x:.4f}" if x < 0.1 else f"{x:.2f}"


def table8(res: Results, spec: dict[str, Any], backbone: str, records: list[dict[str, Any]]) -> Table:
    t = spec["table8"]
    b = t["benchmark"]
    sp = spec["selfplay"]
    table = Table(title=f"{t['title']} — {backbone}{_embedded_note(backbone)}",
                  columns=["Method", "train prompt", "train compl.", "train $", "infer prompt", "infer compl.", "infer $",
                           "Acc. %", "paper train (p/c/$)", "paper infer (p/c/$)", "paper Acc."],
                  label=f"tab:dyflow-table8-{backbone}")
    notes = []
    for row in t["rows"]:
        a = res.agg(spec["table1"]["experiment"], b, row["method"], backbone)
        inf = _role_sums(a, row.get("roles"))
        train = None
        if row.get("training") == "artifact":
            train = _artifact_cost(res.root, row["method"], b, backbone)
        elif row.get("training") == "selfplay":
            train, why = _fresh_role_sums(res.agg(sp["experiment"], b, sp["method"], backbone), row.get("roles"))
            if why:
                notes.append(f"{row['label']} training: —, {why}.")
            elif train and train["replayed"]:
                notes.append(f"{row['label']} training: {train['replayed']:.0f} calls replayed from the cache are "
                             f"not counted (fresh calls only).")
        ref = (t.get("reference") or {}).get(row["label"], {})
        pr = lambda k: " / ".join([_tok(ref[k][0]), _tok(ref[k][1]), _usd(ref[k][2])]) if k in ref else "—"
        acc = a.mean if row.get("roles") in (None, ["designer"]) else None
        table.rows.append([row["label"], *(["—"] * 3 if train is None else
                                           [_tok(train["prompt_tokens"]), _tok(train["completion_tokens"]), _usd(train["cost_usd"])]),
                           *(["—"] * 3 if inf is None else
                             [_tok(inf["prompt_tokens"]), _tok(inf["completion_tokens"]), _usd(inf["cost_usd"])]),
                           fmt(acc) if acc is not None else ("incomplete" if a.incomplete else "—"),
                           pr("training"), pr("inference"), fmt(ref["acc"], 2) if "acc" in ref else "—"])
        records.append({"table": "table8", "backbone": backbone, "row": row["label"], "method": row["method"],
                        "benchmark": b, "status": "ok" if inf else "missing", "mean": acc,
                        "value": json.dumps({"training": train, "inference": inf}),
                        "n_problems": a.n_problems, "sources": ";".join(a.sources(res.root))})
        if row.get("note"):
            notes.append(f"{row['label']}: {row['note']}.")
    table.notes = [f"Tokens and $ summed over the run (mean over seeds) from metrics.json by_role: D. = designer, "
                   f"E. = executor, S. = summariser roles; the other rows count every role. Training = the workflow "
                   f"search's artifact (search_cost) for AFlow/MaAS, the self-play runs' fresh calls ({sp['experiment']}, "
                   f"train split; calls.jsonl, replayed cache hits not counted) for DyFlow. Inference rows are the Table 1 runs on {spec['benchmark_labels'][b]}; a small "
                   f"embedded run covers only its n problems (the paper: the whole test set).", *notes]
    return table


def table9(res: Results, spec: dict[str, Any], backbone: str, records: list[dict[str, Any]]) -> Table:
    """Designer with designer: the paper's Table 9 columns are the designer's own tokens and $ (its MATH GPT-4.1
    row is Table 8's "DyFlow (D.)" training row, its DyPlanner row the D. inference row), so the compared columns
    are the designer role's (metrics.json by_role); the executor, summariser and whole run stand beside."""
    t, t2 = spec["table9"], spec["table2"]
    rows2 = {r["label"]: r for r in t2["rows"]}
    labels = spec["benchmark_labels"]
    table = Table(title=f"{t['title']} — {backbone}{_embedded_note(backbone)}",
                  columns=["Benchmark", "Designer", "Designer input tokens", "Designer output tokens", "Designer cost ($)",
                           "paper (designer) in / out / $", "executor in/out", "summarizer in/out",
                           "whole run in / out / $"],
                  label=f"tab:dyflow-table9-{backbone}")
    for b in spec["benchmarks"]:
        for d in t["designers"]:
            row = rows2[d]
            a = res.agg(row.get("experiment") or t2["experiment"], b, row["method"], backbone)
            tot = _role_sums(a)
            per = {r: _role_sums(a, [r]) for r in ("designer", "executor", "summarizer")}
            des = per["designer"]
            ref = (t.get("reference") or {}).get(b, {}).get(d)
            io = lambda s: "—" if s is None else f"{_tok(s['prompt_tokens'])} / {_tok(s['completion_tokens'])}"
            table.rows.append([labels[b], d, *(["—"] * 3 if des is None else
                                               [_tok(des["prompt_tokens"]), _tok(des["completion_tokens"]),
                                                _usd(des["cost_usd"])]),
                               "—" if not ref else f"{_tok(ref[0])} / {_tok(ref[1])} / {_usd(ref[2])}",
                               io(per["executor"]), io(per["summarizer"]),
                               "—" if tot is None else f"{io(tot)} / {_usd(tot['cost_usd'])}"])
            records.append({"table": "table9", "backbone": backbone, "row": d, "method": row["method"], "benchmark": b,
                            "status": "ok" if des else "missing", "value": json.dumps({"total": tot, **per}),
                            "paper": json.dumps(ref) if ref else None,
                            "n_problems": a.n_problems, "sources": ";".join(a.sources(res.root)),
                            "reason": None if des else (row_needs(spec, row, backbone)[1] or
                                                        ("no designer calls recorded" if tot else "not run yet"))})
    why = {r["row"]: r["reason"] for r in records if r.get("table") == "table9" and r.get("reason")}
    table.notes = ["Designer with designer: the first three columns are the designer role's tokens and $ of each "
                   "designer's DyFlow runs (Table 2's runs; metrics.json by_role), the paper's columns are its "
                   "designer's (its MATH GPT-4.1 row is Table 8's DyFlow (D.) training row, its DyPlanner row the D. "
                   "inference row). The executor, the summariser f_summary (a role of its own here; the release "
                   "hides its cost) and the whole run stand beside, with nothing in the paper to compare.",
                   *[f"— {d}: {w}" for d, w in why.items()]]
    return table


def table10(res: Results, spec: dict[str, Any], backbone: str, records: list[dict[str, Any]]) -> tuple[Table, dict]:
    t = spec["table10"]
    benches, labels = spec["benchmarks"], spec["benchmark_labels"]
    ref = (t.get("reference") or {}).get("rows", {})
    table = Table(title=t["title"], columns=["Model", *[labels[b] for b in benches]], label="tab:dyflow-table10")
    fig: dict[str, dict[str, dict[str, float | None]]] = {}
    feet = Footnotes()
    for ex in t["executors"]:
        bb = ex["backbone"]
        for m, name in (("cot", "CoT"), ("dyflow", "DyFlow")):
            aggs = {b: res.agg(t["experiment"], b, m, _run_backbone(res, t["experiment"], bb)) for b in benches}
            table.rows.append([f"{ex['label']} ({name})", *[footnoted(a, b, labels, feet) if m == "dyflow" else
                                                             (cell_text(a) if a.runs else "—") for b, a in aggs.items()]])
            fig.setdefault(ex["label"], {})[name] = {b: aggs[b].mean for b in benches}
            pref = (ref.get(ex["label"]) or {}).get(m)
            if pref:
                table.rows.append(["↳ paper", *[fmt(pref.get(b), 2) for b in benches]])
            for b in benches:
                records.append({"table": "table10", "backbone": bb, "row": f"{ex['label']} ({name})", "method": m,
                                "benchmark": b, "status": "ok" if aggs[b].mean is not None else "missing",
                                "mean": aggs[b].mean, "paper": (pref or {}).get(b),
                                "sources": ";".join(aggs[b].sources(res.root))})
    table.notes = [f"Each executor is the run's backbone; DyFlow's designer is fixed ({t['designer']['backbone']} with "
                   f"adapter {t['designer']['adapter']}). Executors without a backbone config or key print —. "
                   "Embedded rows are not comparable with the paper's."]
    if feet.texts:
        table.notes.extend(["Deviations recorded by the runs (numbered marks):", *feet.notes()])
    return table, fig


def _run_backbone(res: Results, experiment: str, bb: str) -> str:
    """The results-path name of a backbone config (``vllm`` runs are named ``vllm@<model>``)."""
    have = res.index(experiment).backbones()
    return bb if bb in have else next((h for h in have if h.split("@")[0] == bb), bb)


# ---- figures ---------------------------------------------------------------------------------------------------
def passk(res: Results, spec: dict[str, Any], backbone: str, records: list[dict[str, Any]], out: Path) -> Table:
    from agentic_repro.scripts.figstyle import plt, save

    t = spec["passk"]
    benches, labels = spec["benchmarks"], spec["benchmark_labels"]
    curves: dict[str, dict[str, dict[int, float]]] = {}
    for m in t["methods"]:
        for b in benches:
            a = res.agg(t["experiment"], b, m["method"], backbone)
            if not a.complete:
                continue
            per: dict[int, list[float]] = {}
            for r in a.runs:
                for k, v in (r.metrics.get("pass_at_k") or {}).items():
                    if v is not None:
                        per.setdefault(int(k), []).append(100.0 * float(v))
            if per:
                curves.setdefault(m["label"], {})[b] = {k: sum(v) / len(v) for k, v in sorted(per.items())}
    ks = sorted({k for c in curves.values() for bc in c.values() for k in bc})
    table = Table(title=f"{t['title']} — {backbone}{_embedded_note(backbone)}",
                  columns=["Method", "Benchmark", *[f"pass@{k}" for k in ks]], label=f"tab:dyflow-passk-{backbone}")
    p = plt()
    fig, axes = p.subplots(1, len(benches), figsize=(3.2 * len(benches), 3.0), squeeze=False)
    for i, b in enumerate(benches):
        ax = axes[0][i]
        for label, c in curves.items():
            if b in c:
                ax.plot(list(c[b]), list(c[b].values()), marker="o", label=label)
                table.rows.append([label, labels[b], *[fmt(c[b].get(k)) for k in ks]])
                for k, v in c[b].items():
                    records.append({"table": "passk", "backbone": backbone, "row": label, "benchmark": b,
                                    "method": label, "status": "ok", "value": f"pass@{k}", "mean": v})
        ax.set_title(labels[b])
        ax.set_xlabel("k")
        if i == 0:
            ax.set_ylabel("pass@k (%)")
        if not any(b in c for c in curves.values()):
            ax.text(0.5, 0.5, "no runs", ha="center", va="center", transform=ax.transAxes)
    axes[0][0].legend()
    save(fig, out / "figures" / f"fig7_passk_per_benchmark-{backbone}")
    fig, ax = p.subplots(figsize=(4, 3))
    for label, c in curves.items():
        if len(c) == len(benches):        # the average only over all five, as Figure 3
            avg = {k: sum(c[b][k] for b in benches) / len(benches) for k in ks if all(k in c[b] for b in benches)}
            ax.plot(list(avg), list(avg.values()), marker="o", label=label)
            table.rows.append([label, "Avg", *[fmt(avg.get(k)) for k in ks]])
    ax.set_xlabel("k")
    ax.set_ylabel("average pass@k (%)")
    ax.set_title("Figure 3: average over the five benchmarks")
    if ax.lines:
        ax.legend()
    else:
        ax.text(0.5, 0.5, "needs all five benchmarks", ha="center", va="center", transform=ax.transAxes)
    save(fig, out / "figures" / f"fig3_passk_average-{backbone}")
    table.notes = ["Unbiased pass@k (Chen et al. 2021) from metrics.json pass_at_k of samples_per_task=k runs; complete "
                   "cells only. The paper states one value: DyFlow pass@5 on HumanEval = 98.17."]
    return table


def operators(res: Results, spec: dict[str, Any], backbone: str, records: list[dict[str, Any]], out: Path) -> Table:
    from agentic_repro.scripts.figstyle import plt, save

    t = spec["operators"]
    benches, labels = spec["benchmarks"], spec["benchmark_labels"]
    counts: dict[str, Counter[str]] = {}
    for b in benches:
        a = res.agg(t["experiment"], b, t["method"], backbone)
        c: Counter[str] = Counter()
        for r in a.runs:
            for p in r.predictions():
                if p.get("status", "ok") != "ok":
                    continue
                for st in (p.get("trace") or {}).get("stages") or []:
                    for op in (st.get("stage") or {}).get("operators") or []:
                        c[str(op.get("template"))] += 1
        if c:
            counts[b] = c
    templates = sorted({k for c in counts.values() for k in c}, key=lambda k: -sum(c[k] for c in counts.values()))
    table = Table(title=f"{t['title']} — {backbone}{_embedded_note(backbone)}",
                  columns=["Operator", *[labels[b] for b in counts]], label=f"tab:dyflow-fig6-{backbone}")
    for k in templates:
        table.rows.append([k, *[f"{100 * counts[b][k] / sum(counts[b].values()):.1f}% ({counts[b][k]})" for b in counts]])
        for b in counts:
            records.append({"table": "operators", "backbone": backbone, "row": k, "benchmark": b, "status": "ok",
                            "value": counts[b][k], "mean": 100 * counts[b][k] / sum(counts[b].values())})
    table.notes = ["Share of operator instances among all designed (validated) stages of DyFlow's answered problems, "
                   "per domain (count in parentheses), from predictions.jsonl traces."
                   + ("" if counts else " No DyFlow runs with traces on this backbone yet.")]
    p = plt()
    fig, ax = p.subplots(figsize=(1.2 + 1.1 * max(1, len(counts)), 0.9 + 0.35 * max(1, len(templates))))
    if counts:
        import numpy as np

        grid = np.array([[counts[b][k] / sum(counts[b].values()) for b in counts] for k in templates])
        im = ax.imshow(grid, cmap="Blues", aspect="auto")
        ax.set_xticks(range(len(counts)), [labels[b] for b in counts], rotation=30, ha="right")
        ax.set_yticks(range(len(templates)), templates)
        fig.colorbar(im, ax=ax, label="share of operators")
        ax.grid(False)
    else:
        ax.text(0.5, 0.5, "no DyFlow traces", ha="center", va="center", transform=ax.transAxes)
    ax.set_title("Figure 6: operator usage per domain")
    save(fig, out / "figures" / f"fig6_operator_usage-{backbone}")
    return table


def fig4(fig_data: dict, out: Path, spec: dict[str, Any]) -> None:
    from agentic_repro.scripts.figstyle import plt, save

    benches, labels = spec["benchmarks"], spec["benchmark_labels"]
    p = plt()
    fig, axes = p.subplots(1, len(benches), figsize=(3.2 * len(benches), 3.0), squeeze=False)
    for i, b in enumerate(benches):
        ax = axes[0][i]
        names = [e for e in fig_data if any(fig_data[e][m][b] is not None for m in fig_data[e])]
        for j, m in enumerate(("CoT", "DyFlow")):
            ax.bar([x + 0.4 * j for x in range(len(names))], [fig_data[e][m][b] or 0 for e in names], 0.4, label=m)
        ax.set_xticks([x + 0.2 for x in range(len(names))], names, rotation=30, ha="right", fontsize=7)
        ax.set_title(labels[b])
        if not names:
            ax.text(0.5, 0.5, "no runs", ha="center", va="center", transform=ax.transAxes)
    axes[0][0].legend()
    save(fig, out / "figures" / "fig4_cross_executor")


# ---- planning runs -------------------------------------------------------------------------------------------
def _limit(size: dict[str, Any], method: str, opt: Any) -> Any:
    if opt is not None:
        return opt
    cap = (size.get("limit_by_method") or {}).get(method)
    lim = size.get("limit")
    return cap if lim is None else (lim if cap is None else min(int(lim), int(cap)))


def searched_overrides(spec: dict[str, Any], method: str) -> list[str]:
    """A searched method (its config has ``search:``) searches on the split ``searched.split`` names (DyFlow's
    benchmarks have train/test only: the train split), on every table's runs of it."""
    cfg = method_config(method) or {}
    split = (spec.get("searched") or {}).get("split")
    return [f"method.search.split={split}"] if cfg.get("search") and split else []


def plan_items(spec: dict[str, Any], table: str, backbone: str, size: dict[str, Any], opts: dict[str, Any],
               user: list[str]) -> tuple[list[Planned], list[str]]:
    """The runs a table needs (rows x benchmarks x seeds) and the rows skipped with their reason."""
    seeds = [int(s) for s in csv_list(opts.get("seeds")) or size["seeds"]]
    items: list[Planned] = []
    skipped: list[str] = []

    only_m, only_b = csv_list(opts.get("methods")), csv_list(opts.get("benchmarks"))
    _, prot = protocol_of(spec, opts.get("protocol"))
    trained_a = list(spec["selfplay"]["train_benchmarks"]["A"])   # what the main DyPlanner learnt from

    def add(label: str, exp: str, method: str, bench: str, bb: str, extra: list[str], limit: Any = "size",
            trained_on: list[str] | tuple[str, ...] = (), whole_split: bool = True) -> None:
        if (only_m and method not in only_m) or (only_b and bench not in only_b):
            return
        if bench_missing(bench):
            skipped.append(f"{label} / {bench}: {bench_missing(bench)}")
            return
        lim = _limit(size, method, opts.get("limit")) if limit == "size" else limit
        roles_ov, why = role_overrides(prot, method, bench, bb)
        if why:
            skipped.append(f"{label} / {bench}: runs, but {why}")
        extra = [*protocol_overrides(prot, method, bench, trained_on, whole_split), *roles_ov,
                 *searched_overrides(spec, method),
                 *((size.get("method_overrides") or {}).get(method) or []), *extra]
        exp = exp + str(prot.get("experiment_suffix") or "")
        for s in seeds:
            ov = [f"experiment={exp}", f"method={method}", f"benchmark={bench}", f"backbone={bb}", f"seed={s}",
                  f"limit={'null' if lim in (None, 'null') else int(lim)}", *size.get("overrides", []), *extra, *user]
            items.append(Planned(label=f"{method}/{bench}/{bb}/seed={s} [{exp}]", overrides=ov,
                                 extra={"method": method, "benchmark": bench, "seed": s}))

    def rows_of(key: str) -> None:
        t = spec[key]
        for row in t["rows"]:
            ov, reason = row_needs(spec, row, backbone)
            if reason:
                skipped.append(f"{row['label']}: {reason}")
                continue
            trained = trained_a if (row.get("designer_adapter") or row.get("needs_adapters")) else []
            for b in spec["benchmarks"]:
                add(row["label"], row.get("experiment") or t["experiment"], row["method"], b, backbone, ov,
                    trained_on=trained)

    if table in ("table1", "table2", "table4"):
        rows_of(table)
        if table == "table1":   # the DyFlow row with the untrained designer (Table 2's base row) runs regardless
            for b in spec["benchmarks"]:
                add("DyFlow, untrained designer", UNTRAINED["experiment"], "dyflow", b, backbone, [])
    elif table == "table3":
        t = spec["table3"]
        for row in t["rows"]:
            add(f"CoT {row['test']}", t["cot"]["experiment"], t["cot"]["method"], row["test"], backbone, [])
            root = REPO / spec["adapters"]["cross_task"][row["split"]]
            ov, reason = row_needs(spec, {"method": "dyflow", "designer_adapter": "dyplanner"}, backbone, root)
            if reason:
                skipped.append(f"DyFlow {row['test']} (split {row['split']}): {reason}")
                continue
            add(f"DyFlow {row['test']}", row["experiment"], "dyflow", row["test"], backbone, ov,
                trained_on=spec["selfplay"]["train_benchmarks"][row["split"]])
    elif table == "table10":
        t = spec["table10"]
        d = t["designer"]
        gguf = adapter_path(spec, d["adapter"], d["backbone"])
        for ex in t["executors"]:
            if not (CONFIGS / "backbone" / f"{ex['backbone']}.yaml").exists():
                skipped.append(f"{ex['label']}: no configs/backbone/{ex['backbone']}.yaml")
                continue
            for b in spec["benchmarks"]:
                add(f"{ex['label']} CoT", t["experiment"], "cot", b, ex["backbone"], list(ex.get("overrides") or []))
                if not gguf.exists():
                    skipped.append(f"{ex['label']} DyFlow: needs the trained designer ({gguf} missing)")
                    continue
                add(f"{ex['label']} DyFlow", t["experiment"], "dyflow", b, ex["backbone"],
                    [*(ex.get("overrides") or []), f"backbone@roles.designer={d['backbone']}",
                     f"+roles.designer.adapters.{d['adapter']}.path={gguf}", f"roles.designer.adapter={d['adapter']}"],
                    trained_on=trained_a)
    elif table == "passk":
        t = spec["passk"]
        for m in t["methods"]:
            ov, reason = row_needs(spec, m, backbone)
            if reason:
                skipped.append(f"{m['label']}: {reason}")
                continue
            for b in spec["benchmarks"]:
                add(m["label"], t["experiment"], m["method"], b, backbone,
                    [f"samples_per_task={int(size.get('samples_per_task') or 5)}", *ov],
                    trained_on=trained_a if m.get("designer_adapter") else [])
    elif table in ("selfplay", "selfplay-B"):
        # self-play on the train splits (the designer as configured: e.g. backbone@roles.designer=<teacher>)
        sp = spec["selfplay"]
        split = "B" if table.endswith("-B") else "A"
        lim = opts.get("limit") if opts.get("limit") is not None else size.get("selfplay_limit")
        for b in sp["train_benchmarks"][split]:
            add(f"self-play {b}", sp["experiment"] + ("-B" if split == "B" else ""), sp["method"], b, backbone,
                [f"benchmark.split={sp['split']}"], limit=lim, whole_split=False)
    else:
        skipped.append(f"{table}: renders the runs of other tables (table1/table2), nothing of its own to run")
    return items, skipped


# ---- rendering ---------------------------------------------------------------------------------------------------
def write_all(results_root: Path, which: list[str], backbones: list[str] | None = None,
              out: Path | None = None, protocol: str | None = None) -> dict[str, Any]:
    spec = load_spec()
    pname, prot = protocol_of(spec, protocol)
    suffix = str(prot.get("experiment_suffix") or "")
    res = Results(results_root, suffix)
    out = Path(out or Path(results_root) / ("dyflow_tables" + suffix))
    exps = [spec[k]["experiment"] for k in ("table1", "table2", "table4", "table10", "passk")] + \
        [r["experiment"] for r in spec["table2"]["rows"] if r.get("experiment")]
    backbones = backbones or res.backbones(exps) or ["local"]
    written: dict[str, list[Path]] = {}
    tables: dict[str, list[Table]] = {}
    for key in which:
        records: list[dict[str, Any]] = []
        ts: list[Table] = []
        if key == "table10":
            t, fd = table10(res, spec, "all", records)
            ts.append(t)
            fig4(fd, out, spec)
        else:
            for bb in backbones:
                if key in ("table1", "table2", "table4"):
                    extra = [UNTRAINED] if key == "table1" else None
                    ts.append(score_table(res, spec, key, bb, records, extra, prot))
                elif key == "table3":
                    ts.append(table3(res, spec, bb, records, prot))
                elif key == "table8":
                    ts.append(table8(res, spec, bb, records))
                elif key == "table9":
                    ts.append(table9(res, spec, bb, records))
                elif key == "passk":
                    ts.append(passk(res, spec, bb, records, out))
                elif key == "operators":
                    ts.append(operators(res, spec, bb, records, out))
        header = (f"# {spec['paper']}: {key}, regenerated from results/ by `python -m agentic_repro.scripts.dyflow_tables "
                  f"table={key}` (protocol {pname}: scripts/experiments/dyflow_tables.yaml protocols)\n")
        md, tex = write_tables(out / key, ts, header)
        write_csv(out / f"{key}.csv", records, CSV_FIELDS)
        written[key] = [md, tex, out / f"{key}.csv"]
        tables[key] = ts
    return {"tables": tables, "paths": written, "out": out}


def main(argv: list[str] | None = None) -> int:
    opts, user = parse_args(list(sys.argv[1:] if argv is None else argv), OPTIONS)
    which = list(TABLES) if opts["table"] == "all" else csv_list(opts["table"]) or []
    bad = [w for w in which if w not in (*TABLES, "selfplay", "selfplay-B")]
    if bad:
        raise SystemExit(f"table={','.join(bad)}: choose from {', '.join(TABLES)} or all")
    root = Path(opts["results_root"])
    if str(opts["run"]).lower() in ("1", "true", "yes"):
        from agentic_repro.scripts.runs import eprint, execute, plan, require_backbone_key

        spec = load_spec()
        sname, size = size_for(spec, opts["backbone"], opts.get("size"))
        items, skipped = [], []
        for w in which:
            i, s = plan_items(spec, w, opts["backbone"], size, opts, [f"results_root={root}", *user])
            items += i
            skipped += s
        seen: set[str] = set()     # a run two tables share (Table 1's CoT in Table 3) is planned once
        items = [it for it in items if not (it.label in seen or seen.add(it.label))]
        plan(items, [])
        eprint(f"DyFlow {','.join(which)} on backbone={opts['backbone']} (size {sname}): {len(items)} runs planned; "
               f"not run: {len(skipped)}")
        for s in skipped:
            eprint(f"  — {s}")
        if str(opts["dry_run"]).lower() in ("1", "true", "yes"):
            for it in items:
                print(f"{it.state:8s} {it.label}  {' '.join(it.overrides)}" + (f"  ({it.error})" if it.error else ""))
            return 0
        require_backbone_key(opts["backbone"])
        execute(items, log=eprint)
    which = [w for w in which if w in TABLES]
    if not which:
        return 0
    resw = write_all(root, which, None, Path(opts["out"]) if opts["out"] else None, opts.get("protocol"))
    for key, ts in resw["tables"].items():
        for t in ts:
            print(t.to_markdown())
    print("wrote " + ", ".join(str(p) for ps in resw["paths"].values() for p in ps))
    return 0


if __name__ == "__main__":
    from agentic_repro.scripts.runs import run_cli

    run_cli(main)
