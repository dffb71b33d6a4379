"""DynaGraph Table 1 (methods x StrategyQA / MATH-500 / FinQA: Acc, #Tok / TFLOPs, latency) and Table 2 (mechanism
ablation: Acc, latency), ours beside the paper's known cells (dynagraph-supplement.md §2-3).

    python -m agentic_repro.scripts.dynagraph_tables table=1 [backbone=local] [limit=N] [report_only=true] [dry_run=true]
    python -m agentic_repro.scripts.dynagraph_tables table=2 ...

Under each row: "↳ paper" (the paper's known cells in our columns, "—" where it states no number) and "↳ protocol"
(generated from what the runs recorded, never typed: backbone, temperature, top-p, max tokens, the row's stated
settings such as SC's k = 5 and DynaGraph's tau_c / tau_u, adapters; per benchmark the scorer, split and n with the
size reduction), each against what the paper states (the experiment yaml's ``paper_protocol``). FinQA shows both of
its official measures: execution accuracy (Acc) and program accuracy (``score_details.program_correct``).

Metrics per cell, from the runs on disk: accuracy (% over answered problems; a run with errors is "incomplete" and
never averaged), tokens per problem (prompt + completion of every call: planning, failed and reconstructed
branches included), TFLOPs per problem (2 x parameters x tokens, from the ledger; "—" with the reason when a
backbone's parameter count is unknown, never 0), mean end-to-end latency per problem (the runner's per-problem wall
time over the problems whose every call was fresh: a replayed cache hit has no latency, so a cell with replayed
problems says how many it left out, "—" when all were; runs are unbatched only with
runner.max_concurrent_problems=1, which the plan sets). DynaGraph cells also count fallbacks and re-asks
(``agentic_repro.dynagraph.counts``, from predictions.jsonl). Peak serving memory comes from ``bench/dynagraph_memory.py --json
results/dynagraph/memory.json`` when that file exists. Writes results/dynagraph/table{1,2}.{md,tex,csv}.
"""
from __future__ import annotations

import functools
import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentic_repro.dynagraph.counts import cell_note, run_counts
from agentic_repro.scripts.collect import RunIndex
from agentic_repro.scripts.protocol import compare, n_modes, num, split_of
from agentic_repro.scripts.render import Cell, Footnotes, Table, fmt, write_csv, write_tables
from agentic_repro.scripts.runs import (CONFIGS, Planned, csv_list, eprint, execute, load_experiment, logger_override, method_config,
                          method_folder, parse_args, plan, require_backbone_key)

OPTIONS = {"table": "1", "backbone": "local", "protocol": None, "methods": None, "benchmarks": None, "limit": None,
           "report_only": "false", "dry_run": "false", "logger": "none", "results_root": "results"}
CSV_FIELDS = ["table", "backbone", "row", "method", "benchmark", "status", "acc", "program_acc", "n_problems", "n_errors",
              "tokens_per_problem", "tflops_per_problem", "latency_s", "latency_problems", "latency_replayed",
              "fallbacks", "reasks", "fallback_patches", "fallback_errors", "paper_acc", "paper_tok", "paper_lat",
              "footnotes", "protocol", "row_protocol", "reason", "sources"]


def _true(v: Any) -> bool:
    return str(v).lower() in ("1", "true", "yes")


def benchmark_exists(b: str) -> bool:
    return (CONFIGS / "benchmark" / f"{b}.yaml").exists()


def build_plan(exp: dict[str, Any], opts: dict[str, Any], extra: list[str]) -> list[Planned]:
    bb = opts["backbone"]
    pname = opts.get("protocol") or exp.get("protocol_by_backbone", {}).get(bb) or exp["default_protocol"]
    proto = exp["protocols"][pname]
    want, benches = csv_list(opts.get("methods")), csv_list(opts.get("benchmarks")) or exp["benchmarks"]
    items = []
    for row in exp["rows"]:
        m = row.get("method")
        if not m or (want and m not in want) or method_config(m) is None:
            continue
        for b in benches:
            if not benchmark_exists(b):
                continue
            limit = opts.get("limit") or proto.get("limit")
            for s in proto["seeds"]:
                ov = [f"experiment={exp['experiment']}", f"method={m}", f"benchmark={b}", f"backbone={bb}",
                      f"seed={s}", f"limit={'null' if limit in (None, 'null') else int(limit)}",
                      "runner.max_concurrent_problems=1",          # the paper's unbatched, single-sample latency
                      *(exp.get("benchmark_overrides") or {}).get(b, []), *proto.get("overrides", []),
                      *[o.replace("${backbone}", bb) for o in [*row.get("overrides", []),
                                                               *(row.get("overrides_by_protocol") or {}).get(pname, [])]],
                      *extra]
                items.append(Planned(f"{m}/{b}/{bb}/seed={s}", ov))
    return items


@functools.cache
def _folder(method: str) -> str:
    """The method's results folder: its yaml's plain ``name`` (no Hydra compose, which is slow), else composed."""
    name = (method_config(method) or {}).get("name")
    return name if isinstance(name, str) and "${" not in name else method_folder(method)


def _is_dynagraph(method: str | None) -> bool:
    return str((method_config(method) or {}).get("solver") or "").startswith("agentic_repro.dynagraph.") if method else False


def _flops(runs: list[Any]) -> tuple[float | None, str | None]:
    """(FLOPs summed over the runs' answered calls, None) or (None, why unknown): a call whose backbone has no
    parameter count records ``flops: null``; that is unknown, never 0."""
    total, unknown = 0.0, set()
    for r in runs:
        for c in r.calls():
            if c.get("error"):
                continue
            if c.get("flops") is None:
                unknown.add(str(c.get("model") or c.get("role") or "?"))
            else:
                total += float(c["flops"])
    if unknown:
        return None, (f"TFLOPs unknown: no parameter count for {', '.join(sorted(unknown))} (set `params:` in the "
                      "backbone config, e.g. VLLM_MODEL_PARAMS for vllm)")
    return total, None


def _fresh_latency(runs: list[Any]) -> dict[str, Any]:
    """Mean per-problem latency over the answered problems whose every call was fresh, of runs made unbatched
    (``runner.max_concurrent_problems=1`` in their config.yaml; otherwise none is measured). A cached call has no
    latency (it was replayed, e.g. from the full variant's run into an ablation's), so a problem with any replayed
    call says nothing about latency; it is left out and counted. Calls are matched to the scored attempt by the
    ``attempt`` id both files carry (a record without one counts ``calls - backbone_calls`` as replayed)."""
    batched = sorted({str((r.config().get("runner") or {}).get("max_concurrent_problems")) for r in runs
                      if (r.config().get("runner") or {}).get("max_concurrent_problems") != 1})
    if batched:     # concurrent problems share the backbone: their wall times are not the paper's unbatched latency
        return {"lat": None, "lat_n": 0, "lat_replayed": 0,
                "lat_note": f"latency not measured unbatched (runner.max_concurrent_problems={', '.join(batched)}; "
                            "rerun with runner.max_concurrent_problems=1, as the table's plan does)"}
    lats, replayed, total = [], 0, 0
    for r in runs:
        hits: dict[str, int] = {}
        for c in r.calls():
            if c.get("cache_hit"):
                hits[str(c.get("attempt"))] = hits.get(str(c.get("attempt")), 0) + 1
        for p in r.predictions():
            if p.get("status") == "error":
                continue
            total += 1
            n_hit = hits.get(str(p["attempt"]), 0) if p.get("attempt") is not None else \
                int(p.get("calls") or 0) - int(p.get("backbone_calls", p.get("calls")) or 0)
            if n_hit:
                replayed += 1
            else:
                lats.append(float(p.get("latency_s") or 0.0))
    mean = sum(lats) / len(lats) if lats else None
    if not replayed:
        note = None
    elif mean is None:
        note = f"all {total} problems replayed calls from the cache: no latency measured"
    else:
        note = f"latency over {len(lats)} of {total} problems ({replayed} replayed calls from the cache)"
    return {"lat": mean, "lat_n": len(lats), "lat_replayed": replayed, "lat_note": note}


def _cell_metrics(agg: Any) -> dict[str, Any]:
    runs = agg.scored
    n = sum(r.n for r in runs) or 1
    tokens = sum(r.totals("prompt_tokens") + r.totals("completion_tokens") for r in runs) / n
    flops, flops_why = _flops(runs)                        # 2 x params x tokens, from the ledger
    return {"acc": agg.mean, "tokens": tokens, "tflops": None if flops is None else flops / n / 1e12,
            "tflops_note": flops_why, **_fresh_latency(runs)}


def _lat_text(cm: dict[str, Any]) -> str:
    if cm["lat"] is None:
        return "—"
    return f"{cm['lat']:.1f}" + (f" ({cm['lat_n']} fresh of {cm['lat_n'] + cm['lat_replayed']})"
                                 if cm["lat_replayed"] else "")


def _count_fields(c: dict[str, int]) -> dict[str, int]:
    return {"fallbacks": c["problems_with_fallback"], "reasks": c["reasks"], "fallback_patches": c["fallback_patches"],
            "fallback_errors": c["fallback_errors"]}


PAPER_MIX = {"strategyqa": "85% patching", "math": "59% reconstruction"}


def intervention_mix(index: RunIndex, backbone: str, benches: list[str], labels: dict[str, str]) -> str:
    """Figure 6(b): the share of fine-grained patching vs subgraph reconstruction among DynaGraph's interventions,
    counted from the topology histories in the traces."""
    parts = []
    for b in benches:
        agg = index.agg(b, "dynagraph", backbone) if benchmark_exists(b) else None
        pat = rec = 0
        for r in (agg.runs if agg else []):
            for p in r.predictions():
                t = p.get("trace") or {}
                pat += int(t.get("patches") or 0)
                rec += int(t.get("reconstructions") or 0)
        ours = f"{100 * pat / (pat + rec):.0f}% patching of {pat + rec}" if pat + rec else "no intervention yet"
        parts.append(f"{labels.get(b, b)} {ours} (paper {PAPER_MIX.get(b, 'not stated')})")
    return "Figure 6(b) intervention mix, DynaGraph: " + "; ".join(parts)


def _paper(exp: dict[str, Any], key: str, b: str) -> dict[str, Any]:
    return ((exp.get("paper") or {}).get(key) or {}).get(b) or {}


def _answered_calls(runs: list[Any]) -> list[dict[str, Any]]:
    return [c for r in runs for c in r.calls() if not c.get("error")]


def row_protocol(row: dict[str, Any], runs: list[Any], exp: dict[str, Any]) -> str:
    """The row-wide half of the protocol line, from what the row's runs recorded (calls.jsonl: model and temperature
    of every answered call, adapters; config.yaml: top-p, max tokens, the row's stated settings) against what the
    paper states (``paper_protocol``, the row's ``paper_settings`` / ``paper_trained``)."""
    pp = exp.get("paper_protocol") or {}
    paper_bb = (pp.get("backbone_by_row") or {}).get(row["label"], pp.get("backbone"))
    if not runs:
        return f"↳ protocol: not run (nothing recorded); paper backbone {paper_bb}"
    calls = _answered_calls(runs)
    models = sorted({str(c["model"]) for c in calls if c.get("model")})
    parts = [f"backbone {'/'.join(models) or 'not recorded'} vs paper {paper_bb}"]
    temps = sorted({float(c["temperature"]) for c in calls if c.get("temperature") is not None})
    parts.append(compare("T", temps, pp.get("temperature")))
    params = [((r.config().get("method") or {}).get("params") or {}) for r in runs]
    samplings = [(r.config().get("sampling") or {}) for r in runs]
    tops = sorted({float(p["top_p"]) if p.get("top_p") is not None else float(s["top_p"])
                   for p, s in zip(params, samplings) if p.get("top_p") is not None or s.get("top_p") is not None})
    parts.append(compare("top-p", tops, pp.get("top_p")))
    caps = sorted({f"{k.removeprefix('max_tokens').strip('_') or 'all'} {num(v)}" for p in params
                   for k, v in p.items() if k.startswith("max_tokens") and v is not None})
    if not caps:
        caps = sorted({f"all {num(s['max_tokens'])}" for s in samplings if s.get("max_tokens") is not None})
    parts.append(f"max tokens {', '.join(caps) or 'not recorded'}"
                 + ("" if pp.get("max_tokens") is None else f" vs paper {pp['max_tokens']}")
                 + (" (paper: not stated)" if pp.get("max_tokens") is None else ""))
    for key, want in (row.get("paper_settings") or {}).items():
        parts.append(compare(key, sorted({p[key] for p in params if p.get(key) is not None}, key=str), want))
    if row.get("paper_trained"):
        adapters = sorted({str(c["adapter"]) for c in calls if c.get("adapter")})
        parts.append(f"adapters {', '.join(adapters)}" if adapters else
                     "modules untrained (base model + role prompts)")
        parts[-1] += f" vs paper {row['paper_trained']}"
    parts += [m for m in [n_modes(runs)] if m]   # a row that samples: how its n samples reached the provider
    return "↳ protocol: " + "; ".join(parts)


def bench_protocol(b: str, runs: list[Any], exp: dict[str, Any], label: str) -> str:
    """One benchmark's half of the protocol line, from the runs' meta.json (the split, n selected of the split's
    total) and config.yaml (the scorer's keys), with the answers' recorded extraction rules."""
    pp = exp.get("paper_protocol") or {}
    paper_split = (pp.get("split") or {}).get(b, "not stated")
    if not runs:
        return f"not run; paper: {paper_split}"
    splits, sizes, scorer = set(), set(), set()
    for r in runs:
        cfg_b = r.config().get("benchmark") or {}
        split, selected, total = split_of(r)
        splits.add(split)
        sizes.add((selected, total))
        keys = [f"{k}={cfg_b.get(k)}" for k in (exp.get("scorer_keys") or {}).get(b, [])]
        judged = ((r.config().get("roles") or {}).get("judge") or {}).get("name")
        scorer.add(("judge " + str(judged) + " beside; " if judged else "")
                   + f"rule {cfg_b.get('metric', 'accuracy')}" + (f" ({', '.join(keys)})" if keys else ""))
    size = []
    for sel, total in sorted(sizes, key=str):
        size.append(f"n={sel}" + (f" of {total}" if total else "")
                    + (f" (size reduced to {100 * sel / int(total):.1f}%)" if total and sel < int(total) else ""))
    text = (f"{label}: scorer {' | '.join(sorted(scorer))} vs paper {pp.get('scorer', 'not stated')}; split "
            f"{'/'.join(sorted(splits))} {', '.join(size)} vs paper {paper_split}")
    rules = [((p.get("score_details") or {}).get("rule")) for r in runs for p in r.predictions()
             if p.get("status") != "error"]
    if "program" in rules or any(m.get("detail") == "program_correct" for m in (exp.get("measures") or {}).get(b, [])):
        text += f"; {rules.count('program')}/{len(rules)} answers gave a program (the rest a number, compared as an " \
                "executed result)"
    return text


def _measure(runs: list[Any], detail: str) -> tuple[float | None, str | None]:
    """Mean (%) of a per-prediction ``score_details`` verdict over the answered problems (FinQA's program accuracy),
    or (None, why) when a prediction did not record it: never counted as 0."""
    vals = []
    for r in runs:
        for p in r.predictions():
            if p.get("status") == "error":
                continue
            d = p.get("score_details") or {}
            if detail not in d:
                return None, f"{detail} not recorded by this run's scorer (problem {p.get('id')})"
            vals.append(bool(d[detail]))
    return (100.0 * sum(vals) / len(vals), None) if vals else (None, "no answered problem")


@dataclass
class GraphRendering:
    """What one DynaGraph table collects while its rows are rendered (as Table 1's :class:`Rendering`): the CSV
    records, the numbered footnotes, the incomplete cells and the notes of single cells."""

    root: Path
    backbone: str
    exp: dict[str, Any]
    table_no: int
    index: RunIndex
    feet: Footnotes = field(default_factory=Footnotes)
    records: list[dict[str, Any]] = field(default_factory=list)
    bad: list[str] = field(default_factory=list)
    cell_notes: list[str] = field(default_factory=list)

    @property
    def labels(self) -> dict[str, str]:
        return self.exp.get("benchmark_labels", {})

    @property
    def measures(self) -> dict[str, list[dict[str, Any]]]:
        return self.exp.get("measures") or {}

    def label(self, b: str) -> str:
        return self.labels.get(b, b)

    def width(self, b: str) -> int:
        """Columns of benchmark ``b``: Acc, its extra measures, (#Tok / TFLOPs in Table 1,) latency."""
        return 1 + len(self.measures.get(b, [])) + (2 if self.table_no == 1 else 1)


def table_columns(exp: dict[str, Any], table_no: int) -> list[str]:
    """Method, then per benchmark: Acc, its extra measures, #Tok / TFLOPs (Table 1), latency."""
    labels, measures = exp.get("benchmark_labels", {}), exp.get("measures") or {}
    cols = ["Method"]
    for b in exp["benchmarks"]:
        lab = labels.get(b, b)
        cols += [f"{lab} {(exp.get('acc_labels') or {}).get(b, 'Acc')}"]
        cols += [f"{lab} {m['label']}" for m in measures.get(b, [])]
        cols += [f"{lab} #Tok / TFLOPs", f"{lab} Lat. (s)"] if table_no == 1 else [f"{lab} Lat. (s)"]
    return cols


def table_title(backbone: str, table_no: int) -> str:
    title = (f"Table {table_no}: DynaGraph {'main results' if table_no == 1 else 'mechanism ablation'}, backbone "
             f"{backbone} (ours: Acc %, tokens and TFLOPs per problem, mean end-to-end latency; ↳ paper: DeepSeek-8B, "
             "RTX 5090; ↳ protocol: what our runs recorded against what the paper states)")
    if backbone.startswith("local"):
        title += " — numbers on the embedded 0.5B CPU model, not comparable to the paper's"
    return title


def graph_row_deviations(row: dict[str, Any]) -> list[str]:
    """A baseline's footnotes: DynaGraph's own description of it, then how ours differs; else the method's."""
    m = row.get("method")
    if "deviations" in row:
        return ([f"DynaGraph §4.1: {row['paper_baseline']}"] if row.get("paper_baseline") else []) + \
            [str(d) for d in row["deviations"]]
    return list((method_config(m) or {}).get("deviations") or []) if m else []


def paper_cells(pap: dict[str, Any], n_extra: int, table_no: int) -> list[Any]:
    """The paper's cells of one benchmark in our columns ("—" where it states none)."""
    cells: list[Any] = [f"{pap['acc']}" if "acc" in pap else "—", *["—"] * n_extra]
    cells += ([f"{pap['tok']} / —" if "tok" in pap else "—"] if table_no == 1 else [])
    return [*cells, f"{pap['lat']}" if "lat" in pap else "—"]


def cell_missing(m: str | None, b: str) -> str | None:
    """Why a row has no run of benchmark ``b`` to read: no method, no method config, no benchmark config."""
    return ("no method" if not m else f"no configs/method/{m}.yaml" if method_config(m) is None else
            f"no configs/benchmark/{b}.yaml yet" if not benchmark_exists(b) else None)


def incomplete_cells(ren: GraphRendering, row: dict[str, Any], b: str, agg: Any, counts: dict[str, Any] | None,
                     base: dict[str, Any]) -> list[Any]:
    """A cell with errors or unanswered problems: what it answered, never averaged (its record appended)."""
    text = agg.incomplete_text() + (f" ({counts['fallback_errors']} by fallback=error)"
                                    if counts and counts["fallback_errors"] else "")
    text += f", {cell_note(counts)}" if counts else ""
    ren.bad.append(f"{row['label']} / {ren.label(b)}: {text}")
    ren.records.append({**base, "status": "incomplete", "reason": "errors or unanswered problems: not averaged",
                        "n_errors": agg.n_errors, "sources": ";".join(agg.sources(ren.root)),
                        **(_count_fields(counts) if counts else {})})
    return [text] + ["—"] * (ren.width(b) - 1)


def complete_cells(ren: GraphRendering, row: dict[str, Any], b: str, agg: Any, counts: dict[str, Any] | None,
                   base: dict[str, Any]) -> list[Any]:
    """A complete cell: Acc (n), the extra measures, tokens / TFLOPs (Table 1) and latency (its record appended)."""
    extra = ren.measures.get(b, [])
    cm = _cell_metrics(agg)
    acc = f"{fmt(cm['acc'])} (n={agg.n_problems})" + (f", {cell_note(counts)}" if counts else "")
    mvals = {}
    for spec in extra:
        v, why = _measure(agg.scored, spec["detail"])
        mvals[spec["detail"]] = None if v is None else round(v, 2)
        if why:
            ren.cell_notes.append(f"{row['label']} / {ren.label(b)} {spec['label']}: {why}")
    lat = _lat_text(cm)
    tfl = "—" if cm["tflops"] is None else f"{cm['tflops']:.3g}"
    cells: list[Any] = [acc, *[("—" if mvals[s["detail"]] is None else f"{fmt(mvals[s['detail']])} (n={agg.n_problems})")
                               for s in extra]]
    cells += [f"{cm['tokens']:.0f} / {tfl}", lat] if ren.table_no == 1 else [lat]
    for why in (cm["tflops_note"] if ren.table_no == 1 else None, cm["lat_note"]):
        if why:
            ren.cell_notes.append(f"{row['label']} / {ren.label(b)}: {why}")
    ren.records.append({**base, "status": "ok", "acc": None if cm["acc"] is None else round(cm["acc"], 2),
                        "program_acc": mvals.get("program_correct"),
                        "n_problems": agg.n_problems, "n_errors": 0, "tokens_per_problem": round(cm["tokens"], 1),
                        "tflops_per_problem": cm["tflops"], "latency_s": cm["lat"],
                        "latency_problems": cm["lat_n"], "latency_replayed": cm["lat_replayed"],
                        "reason": "; ".join(x for x in (cm["tflops_note"], cm["lat_note"]) if x) or None,
                        "sources": ";".join(agg.sources(ren.root)), **(_count_fields(counts) if counts else {})})
    return cells


def bench_cells(ren: GraphRendering, row: dict[str, Any], b: str, devs: list[str]) -> tuple[list[Any], list[Any], list[Any], list[Any]]:
    """One benchmark of a row: (our cells, the paper's cells, the protocol cells, the runs read), its record
    appended: "—" when the method, benchmark or runs are missing, ``incomplete …`` or the numbers."""
    m = row.get("method")
    pap = _paper(ren.exp, m or row["label"], b)
    pcells = paper_cells(pap, len(ren.measures.get(b, [])), ren.table_no)
    width = ren.width(b)
    base = {"table": ren.table_no, "backbone": ren.backbone, "row": row["label"], "method": m, "benchmark": b,
            "paper_acc": pap.get("acc"), "paper_tok": pap.get("tok"), "paper_lat": pap.get("lat"),
            "footnotes": ren.feet.numbered(devs) if devs else ""}
    missing = cell_missing(m, b)
    agg = None if missing else ren.index.agg(b, _folder(m), ren.backbone)
    runs = list(agg.runs) if agg else []
    ptext = bench_protocol(b, runs, ren.exp, ren.label(b))
    proto_cells = [ptext] + [""] * (width - 1)
    base["protocol"] = ptext
    if missing:
        ren.records.append({**base, "status": "missing", "reason": row.get("missing", missing) if not m else missing})
        return ["—"] * width, pcells, proto_cells, runs
    if not agg.runs:
        ren.records.append({**base, "status": "not_run", "reason": "not run yet"})
        return ["—"] * width, pcells, proto_cells, runs
    counts = run_counts(p for r in agg.runs for p in r.predictions()) if _is_dynagraph(m) else None
    fill = incomplete_cells if agg.incomplete else complete_cells
    return fill(ren, row, b, agg, counts, base), pcells, proto_cells, runs


def method_rows(ren: GraphRendering, row: dict[str, Any]) -> list[list[Any]]:
    """One method's row, with the ``↳ paper`` row (where the paper has cells) and the ``↳ protocol`` row under it
    (where the paper has cells or the row ran)."""
    devs = graph_row_deviations(row)
    cells: list[Any] = []
    pcells: list[Any] = [Cell("↳ paper")]
    proto_cells: list[Any] = []
    row_runs: list[Any] = []
    has_paper = False
    for b in ren.exp["benchmarks"]:
        has_paper |= bool(_paper(ren.exp, row.get("method") or row["label"], b))
        ours, paper, proto, runs = bench_cells(ren, row, b, devs)
        cells += ours
        pcells += paper
        proto_cells += proto
        row_runs += runs
    out = [[Cell(row["label"], bold=row.get("group") == "ours", sup=ren.feet.marks(devs) if devs else ""), *cells]]
    rp = row_protocol(row, row_runs, ren.exp)
    for rec in ren.records:
        if rec["row"] == row["label"]:
            rec["row_protocol"] = rp
    if has_paper or row_runs:
        if has_paper:
            out.append(pcells)
        out.append([Cell(rp), *proto_cells])
    return out


def graph_notes(ren: GraphRendering) -> list[str]:
    """The notes under one DynaGraph table, in reading order."""
    exp, benches, labels = ren.exp, ren.exp["benchmarks"], ren.labels
    notes = [f"paper: known cells only (dynagraph-supplement.md); {n}" for n in
             [str(v["note"]) for v in (exp.get("paper") or {}).values() if isinstance(v, dict) and v.get("note")]]
    notes += [f"{r['label']}: {r['missing']}" for r in exp["rows"] if r.get("missing")]
    notes.append("↳ paper: the paper's cells in our columns (Acc %, tokens, latency s); \"—\" = not stated or not "
                 "recovered (dynagraph-supplement.md §2-3), never typed from prose such as \"remains intact\". "
                 + ", ".join(f"{labels.get(b, b)} is the split the protocol line names" for b in benches
                             if labels.get(b, b) != b and "-" in labels.get(b, b))
                 + ("; the paper says only \"MATH\"" if "math" in benches else ""))
    notes.append("↳ protocol: generated from what the runs recorded (calls.jsonl models, temperatures and adapters; "
                 "config.yaml top-p, max tokens and the row's settings; meta.json split and n), each against what the "
                 "paper states (§4.1): = paper, ≠ paper, or \"paper: not stated\"")
    for b in benches:
        for spec in ren.measures.get(b, []):
            if spec.get("detail") == "program_correct":
                notes.append(f"{labels.get(b, b)}: FinQA's two official measures. "
                             f"{(exp.get('acc_labels') or {}).get(b, 'Acc')} = execution accuracy (the program executed, "
                             "or the answered number, rounded to 5 decimals, equals exe_ans: evaluators/finqa.py, "
                             f"numeric_match=official); {spec['label']} = program accuracy (symbolic equivalence with "
                             "the gold program, as the release's equal_program; an answer without a program is not "
                             "program-correct). The paper reports one FinQA Acc.")
    notes += memory_notes(ren)
    if any(_is_dynagraph(r.get("method")) for r in exp["rows"]):
        notes.append("DynaGraph cells: fallback = problems answered by the labelled fallback plan (after "
                     "max_plan_attempts failed planner answers), re-asks = re-asked planner answers, default patches = "
                     "patches the planner's unusable answer left to the default; `method.params.fallback=error` makes a "
                     "fallback problem an error (the cell is then incomplete)")
    notes.extend(ren.cell_notes)
    if ren.bad:
        notes.append("incomplete = errors (not wrong answers) or unanswered problems; never averaged: " + " | ".join(ren.bad))
    if ren.feet.texts:
        notes.append("Deviations that can change the score (numbered marks on the row; a baseline's cite DynaGraph's own "
                     "description of it, §4.1, and its settings, not the baseline's original paper):")
        notes.extend(ren.feet.notes())
    return notes


def memory_notes(ren: GraphRendering) -> list[str]:
    """Table 1's intervention mix and peak serving memory (bench/dynagraph_memory.py's record, if written)."""
    if ren.table_no != 1:
        return []
    notes = [intervention_mix(ren.index, ren.backbone, ren.exp["benchmarks"], ren.labels)]
    mem = ren.root / ren.exp["experiment"] / "memory.json"
    if mem.is_file():
        d = json.loads(mem.read_text())
        notes.append(f"peak serving memory (bench/dynagraph_memory.py, embedded base): one base + 4 adapters "
                     f"{d['one_base']['4']['peak_rss_mib']:.0f} MiB ({d['ratio_4_over_1']:.3f}x one adapter); three "
                     f"separate models {d['three_separate']['peak_rss_mib_sum']:.0f} MiB "
                     f"({d['ratio_three_over_dynagraph']:.2f}x); paper 16.6 GB vs > 49.5 GB")
    else:
        notes.append("peak serving memory: run `python bench/dynagraph_memory.py --json results/dynagraph/memory.json`")
    return notes


def build(root: Path, backbone: str, exp: dict[str, Any], table_no: int, index: RunIndex | None = None
          ) -> tuple[Table, list[dict[str, Any]]]:
    """One table: a row per method, a "↳ paper" row under each row the paper has cells for (its numbers in our
    columns; "—" where it states none), and a "↳ protocol" line under each: the row's recorded backbone and
    settings, and per benchmark the scorer, split and n, all against what the paper states (:func:`method_rows`,
    :func:`bench_cells`, :func:`graph_notes`)."""
    ren = GraphRendering(root, backbone, exp, table_no, index or RunIndex.scan(root, exp["experiment"]))
    table = Table(table_title(backbone, table_no), table_columns(exp, table_no), label=f"tab:dynagraph{table_no}-{backbone}")
    for row in exp["rows"]:
        table.rows.extend(method_rows(ren, row))
    table.notes = graph_notes(ren)
    return table, ren.records


def write_all(root: Path, exp: dict[str, Any], table_no: int, backbones: list[str] | None = None) -> dict[str, Any]:
    index = RunIndex.scan(root, exp["experiment"])
    backbones = backbones or index.backbones() or ["local"]
    tables, records = [], []
    for bb in backbones:
        t, r = build(root, bb, exp, table_no, index)
        tables.append(t)
        records += r
    out = root / exp["experiment"]
    md, tex = write_tables(out / f"table{table_no}", tables, f"# DynaGraph Table {table_no}: regenerated from results/ "
                           f"by `python -m agentic_repro.scripts.dynagraph_tables table={table_no} report_only=true`\n")
    write_csv(out / f"table{table_no}.csv", records, CSV_FIELDS)
    return {"tables": tables, "records": records, "paths": [md, tex, out / f"table{table_no}.csv"]}


def main(argv: list[str] | None = None) -> int:
    opts, extra = parse_args(list(sys.argv[1:] if argv is None else argv), OPTIONS)
    table_no = int(opts["table"])
    if table_no not in (1, 2):
        eprint("table must be 1 or 2")
        return 2
    exp = load_experiment(f"dynagraph_table{table_no}")
    root = Path(opts["results_root"])
    failed: list[Planned] = []
    if not _true(opts["report_only"]):
        if not _true(opts["dry_run"]):
            require_backbone_key(opts["backbone"])
        items = plan(build_plan(exp, opts, [*extra, f"results_root={root}"]), logger_override(opts.get("logger")))
        if _true(opts["dry_run"]):
            for it in items:
                print(f"{it.state:8s} {it.label}  {' '.join(it.overrides)}" + (f" ({it.error})" if it.error else ""))
            return 0
        t0 = time.time()
        try:
            execute(items, log=eprint, on_done=lambda it: write_all(root, exp, table_no, [opts["backbone"]]))
        finally:
            write_all(root, exp, table_no, [opts["backbone"]])
        eprint(f"dynagraph table {table_no} runs: {time.time() - t0:.0f}s")
        failed = [it for it in items if it.state in ("failed", "invalid")]
    res = write_all(root, exp, table_no)
    for t in res["tables"]:
        print(t.to_markdown())
    print("wrote " + ", ".join(map(str, res["paths"])))
    if failed:
        eprint(f"{len(failed)} runs failed or were invalid: " + "; ".join(f"{it.label}: {it.error}" for it in failed))
    return 1 if failed or any(r["status"] == "incomplete" for r in res["records"]) else 0


if __name__ == "__main__":
    sys.exit(main())
