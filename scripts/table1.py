"""Table 1 from ``results/`` alone: methods (paper order) x benchmarks, each cell the mean score with its 95%
interval and n.

``python -m agentic_repro.scripts.table1 [results_root=results] [backbones=local,gpt-4o-mini]`` writes
``results/table1/table1.{md,tex,csv}`` with one table per backbone found on disk; zero backbone calls.

A cell is the mean over seeds of ``score_pct`` with a 95% interval over problems (:mod:`agentic_repro.scripts.stats`: Wilson
for accuracy/pass@1, Student t for F1). A cell whose runs have errors or unanswered problems shows
``incomplete answered/selected, k errors`` and is never averaged (:mod:`agentic_repro.scripts.collect`). A row whose method
deviates from its paper carries numbered footnotes: the ``deviations`` recorded in its runs' ``config.yaml``
(fallback ``configs/method/<name>.yaml``), the row's ``deviations`` in ``scripts/experiments/table1.yaml`` and the
reduced settings of the size protocol it ran under.
"""
from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentic_repro.scripts.collect import Agg, RunIndex, stop_fraction
from agentic_repro.scripts.protocol import compare, judge_of, models, n_modes, sampling, split_of, temperatures
from agentic_repro.scripts.render import Cell, Footnotes, Table, fmt, write_csv, write_tables
from agentic_repro.scripts.stats import paired_test
from agentic_repro.scripts.runs import csv_list, load_experiment, method_config, method_folder, parse_args

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
    return f"{fmt(a.mean)} {ci.text() if ci else '[—]'} {a.n_text()}"


def protocol_record(root: Path, exp: dict[str, Any], backbone: str) -> dict[str, Any]:
    """What the last ``reproduce_table1`` run on this backbone wrote about its protocol (size), if any."""
    p = Path(root) / exp["experiment"] / f"protocol-{backbone.split('@')[0]}.json"   # written per backbone config
    return json.loads(p.read_text(encoding="utf-8")) if p.exists() else {}


def method_deviations(row: dict[str, Any], aggs: dict[str, Agg]) -> list[str]:
    """The method's deviations as its runs recorded them (interface 9), else as its yaml states them."""
    recorded = [d for d in (a.deviations() for a in aggs.values() if a.runs) if d is not None]
    if recorded:
        return [d for ds in recorded for d in ds]
    return list(((method_config(row["method"]) or {}).get("deviations")) or [])


def row_deviations(row: dict[str, Any], aggs: dict[str, Agg], proto: dict[str, Any]) -> list[str]:
    """Footnote texts of one row: recorded method deviations (interface 9), the row's own, the protocol's
    reduced settings for this method."""
    out: list[str] = []
    for d in [*method_deviations(row, aggs), *(row.get("deviations") or [])]:
        if str(d) not in out:
            out.append(str(d))
    mo = ((proto.get("settings") or {}).get("method_overrides") or {}).get(row["method"])
    if row.get("searched"):  # a searched row ran the artifacts its cells name: their own record says how
        out.extend(n for n in searched_notes(row, aggs) if n not in out)
    elif mo and any(a.runs for a in aggs.values()):
        out.append(f"run at the reduced setting of size protocol '{proto.get('protocol')}': {' '.join(mo)}")
    return out


def searched_notes(row: dict[str, Any], aggs: dict[str, Agg]) -> list[str]:
    """A searched row's setting footnotes, from the artifacts its runs used (``trace.artifact.path`` of their
    predictions), compared with the method's configured search; never from the size protocol, which may not be
    the setting an artifact was searched at."""
    from agentic_repro.baselines.autoflow.artifact import ArtifactError, load_artifact, protocol_notes

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
    """Problem id -> score (%) averaged over the cell's seeds (:meth:`Agg.problem_scores`)."""
    return a.problem_scores()


def beats(a: dict[str, float], b: dict[str, float], alpha: float) -> bool:
    """Whether cell ``a`` is significantly above cell ``b``: direction AND p from one paired comparison, on the
    problems both answered. A cell that ran more problems is compared on the shared ones only, so its own mean
    (over problems the other never ran) decides nothing; no shared problem, no mark."""
    shared = set(a) & set(b)
    return bool(shared) and sum(a[k] - b[k] for k in shared) > 0 and paired_test(a, b).p < alpha


def significance_marks(column: list[Agg | None], alpha: float) -> dict[int, str]:
    """Row index -> "bold" | "underline" in one benchmark column of complete cells.

    The highest mean is bold only if it :func:`beats` every other complete cell (:func:`agentic_repro.scripts.stats.paired_test`:
    exact McNemar on 0/1 scores, Wilcoxon signed-rank on F1, at ``alpha``, above it on their shared problems); the
    second highest is underlined only if the best is bold and it too beats every cell below it. Ties on the mean,
    or a column with one complete cell, mark nothing."""
    cells = [(i, a) for i, a in enumerate(column) if a is not None and a.mean is not None]
    if len(cells) < 2:
        return {}
    cells.sort(key=lambda ia: -ia[1].mean)  # type: ignore[operator]
    scores = {i: problem_scores(a) for i, a in cells}

    def beats_all_below(k: int) -> bool:
        i, a = cells[k]
        return all(round(a.mean, 6) > round(b.mean, 6)  # type: ignore[arg-type]
                   and beats(scores[i], scores[j], alpha) for j, b in cells[k + 1:])

    out: dict[int, str] = {}
    if beats_all_below(0):
        out[cells[0][0]] = "bold"
        if len(cells) > 2 and beats_all_below(1):
            out[cells[1][0]] = "underline"
    return out


# ---- the protocol line under each ↳ paper row ------------------------------------------------------------

def scorer_protocol(runs: list[Any], pb: dict[str, Any]) -> tuple[str, list[str]]:
    """(the scorer part of a cell's protocol text, what in it redefines the metric): every scorer key the paper's
    rule names as the runs recorded it (config.yaml ``benchmark``), and the judge that scored them, if any."""
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
    return (f"scorer {', '.join(keys) or 'not recorded'}" + (f", judge {'/'.join(judges)}" if judges else "")
            + f" (paper: {pb.get('scorer', 'not stated')}{'' if judges else ', no judge'})"), redefined


def split_protocol(a: Agg, pb: dict[str, Any], pp: dict[str, Any]) -> tuple[str, list[str]]:
    """(the problems part of a cell's protocol text, ["split"] when they are not the paper's population): split
    and n of N (meta.json), the share of the paper's problems, the seeds."""
    sizes = sorted({split_of(r) for r in a.runs}, key=str)
    text = ", ".join(f"split {s} n={n}" + (f" of {t}" if t else "") for s, n, t in sizes)
    redefined = []
    if any(s not in (pb.get("same_problems") or []) for s, _, _ in sizes):
        redefined.append("split")
        text += " (other problems than the paper's)"
    paper_n = pb.get("n")
    text += f" vs paper {pb.get('split', 'not stated')}"
    n = min(sel for _, sel, _ in sizes)
    if paper_n:
        text += f": {n} of the paper's {paper_n} problems ({100 * n / int(paper_n):.1f}%)"
    seeds = sorted({int(s) for s in a.seeds})
    return f"{text}; {compare('seeds', seeds, pp.get('seeds'))}", redefined


def cell_protocol(b: str, a: Agg | None, pp: dict[str, Any]) -> tuple[str, list[str]]:
    """(one benchmark's protocol text, what in it changes the metric's definition) from the cell's runs:
    scorer rule (config.yaml benchmark keys) and judge, split and n of N (meta.json), seeds, against the paper's."""
    pb = (pp.get("benchmarks") or {}).get(b) or {}
    if a is None or not a.runs:
        return f"not run; paper: {pb.get('scorer', 'scorer not stated')}, {pb.get('split', 'split not stated')}", []
    scorer, redefined = scorer_protocol(list(a.runs), pb)
    split, other = split_protocol(a, pb, pp)
    return f"{scorer}; {split}", redefined + other


def row_protocol(label: str, aggs: dict[str, Agg], pp: dict[str, Any]) -> str:
    """The row-wide half of the protocol line: backbone (calls.jsonl models), temperatures (calls.jsonl), max
    tokens (config.yaml sampling), against the paper's (A.2); and, for a row that samples, its n_mode."""
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
    parts += [m for m in [n_modes(runs)] if m]   # how n samples reached the provider (harness/n_mode.py)
    return "↳ protocol: " + "; ".join(parts)


def delta_text(ours: float | None, paper: float, redefined: list[str]) -> tuple[str, float | None]:
    """(the ↳ Δ cell, the difference) of one cell against the paper's: withheld ("≠ measure (…)") where the recorded
    scorer or problems are not the paper's, "—" where we have no number."""
    if ours is not None and redefined:
        return f"≠ measure ({', '.join(dict.fromkeys(redefined))})", None
    diff = None if ours is None else ours - float(paper)
    return (fmt(diff) if diff is None else ("+" if diff >= 0 else "") + fmt(diff)), diff


def cell_record(records: list[dict[str, Any]], row: dict[str, Any], r: dict[str, Any], b: str, backbone: str,
                wanted: bool) -> dict[str, Any] | None:
    """The CSV record of one of the row's cells (``b`` may be "avg"), made "missing"/"not_run" when the table
    wrote none and ``wanted``."""
    rec = next((x for x in records if x["row"] == row["label"] and x["benchmark"] == b), None)
    if rec is None and wanted:
        rec = {"backbone": backbone, "row": row["label"], "method": row["method"], "benchmark": b,
               "status": "missing" if r["name"] is None else "not_run", "reason": r["reason"]}
        records.append(rec)
    return rec


def paper_rows(row: dict[str, Any], r: dict[str, Any], pref: dict[str, Any], benches: list[str],
               records: list[dict[str, Any]], backbone: str, pp: dict[str, Any]) -> list[list[Any]]:
    """The "↳ paper", "↳ Δ" and "↳ protocol" rows under a row the paper reports. A cell whose recorded scorer or
    split is not the paper's measures something else: its Δ is withheld ("≠ measure"), not printed."""
    pcells: list[Any] = ["↳ paper"]
    dcells: list[Any] = ["↳ Δ (ours − paper)"]
    protos = {b: cell_protocol(b, r["aggs"].get(b), pp) for b in benches}
    protos["avg"] = ("", [d for b in benches for d in protos[b][1]])   # Avg: redefined where any cell is
    rp = row_protocol(row["label"], r["aggs"], pp)
    for b in [*benches, "avg"]:
        p = pref.get(b)
        rec = cell_record(records, row, r, b, backbone, p is not None or b != "avg")
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
        ours = r["avg"] if b == "avg" else r["means"].get(b)
        redefined = protos[b][1]
        text, diff = delta_text(ours, p["value"], redefined)
        dcells.append(text)
        rec.update({"paper": p["value"], "paper_inferred": inferred,  # type: ignore[union-attr]
                    "diff": None if diff is None else round(diff, 4),
                    "diff_withheld": ", ".join(dict.fromkeys(redefined)) if ours is not None and redefined else None})
    return [pcells, dcells, [rp, *[protos[b][0] for b in benches], ""]]


def marks_note(alpha: float, experiment: str = "table1", n_means: str = "six") -> str:
    """The legend of the best/second marks: which test, at which level, set where."""
    return ("Best bold, second underlined only where the difference is significant: a paired test over the "
            "problems both cells answered (each problem's score averaged over seeds) gives both the direction and "
            "the p-value — cells that ran different problems are compared on their shared problems only, and a "
            "mark stands only where those carry it; exact McNemar on 0/1 scores "
            f"(accuracy, pass@1), Wilcoxon signed-rank otherwise (F1), two-sided p < {alpha:g} "
            f"(scripts/stats.py paired_test; `significance_alpha` in scripts/experiments/{experiment}.yaml); the best "
            "must beat every other complete cell of its column, the second every cell below it. Avg carries no "
            f"mark (a mean of {n_means} means has no paired test).")


PROTOCOL_NOTE = ("↳ protocol: generated from what the cell's runs recorded (config.yaml scorer keys and sampling, "
                 "meta.json split and n of the split, calls.jsonl backbone models and temperatures, the seeds), each "
                 "against the paper's protocol (DenoiseFlow §4.1, A.1, A.2, A.4: `reference.protocol` in "
                 "scripts/experiments/table1.yaml): = paper, ≠ paper, or \"paper: not stated\". Where the scorer "
                 "rule or the problem population differs from the paper's the metric is another one: its ↳ Δ is "
                 "withheld (\"≠ measure (...)\", CSV diff_withheld), not printed; a smaller subset of the paper's "
                 "problems or another backbone/temperature changes the experiment, not the measure, and keeps its Δ.")


# ---- the table: numbers, then one row at a time, then the notes ------------------------------------------------

@dataclass
class Rendering:
    """What one backbone's table collects while its rows are rendered: the CSV records, the numbered footnotes and
    the facts its notes report (incomplete and missing cells, unisolated code, interval methods, cut answers)."""

    root: Path
    backbone: str
    labels: dict[str, str]
    records: list[dict[str, Any]] = field(default_factory=list)
    feet: Footnotes = field(default_factory=Footnotes)
    incomplete: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    unisolated: list[str] = field(default_factory=list)   # cells whose runs executed untrusted code unisolated
    ci_methods: set[str] = field(default_factory=set)
    stop: list[int] = field(default_factory=lambda: [0, 0, 0])   # stop_fraction summed over the table's calls
    cut: list[str] = field(default_factory=list)   # cells with more than CUT_SHARE of their calls cut at max_tokens
    any_inferred: bool = False

    def label(self, b: str) -> str:
        return self.labels.get(b, b)


def body_rows(exp: dict[str, Any], index: RunIndex, backbone: str, seeds: list[int] | None) -> list[dict[str, Any]]:
    """Per Table 1 row: its method folder, why it has no numbers, its cells (Agg per benchmark), means and Avg."""
    benches: list[str] = exp["benchmarks"]
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
    return body


def complete_record(a: Agg, rec: dict[str, Any], ren: Rendering) -> dict[str, Any]:
    """The CSV record of a complete cell: its mean, interval and spread."""
    ci = a.ci()
    if ci:
        ren.ci_methods.add(ci.method)
    return {**rec, "status": "ok", "mean": round(a.mean, 4),  # type: ignore[arg-type]
            "ci_low": None if ci is None else round(ci.low, 4),
            "ci_high": None if ci is None else round(ci.high, 4),
            "ci_method": None if ci is None else ci.method,
            "std": None if a.std is None else round(a.std, 4)}


def bench_cell(ren: Rendering, r: dict[str, Any], b: str, base: dict[str, Any], mark: str | None) -> Any:
    """One benchmark cell of a row (its record appended): "—" when not run, ``incomplete …`` (never averaged) when
    its runs have errors, else the mean with its interval, bold/underlined as ``mark`` says."""
    a = r["aggs"].get(b)
    if a is None or not a.runs:
        status = "missing" if r["name"] is None else "not_run"
        ren.records.append({**base, "status": status, "reason": r["reason"] or "not run yet"})
        return "—"
    where = f"{base['row']} / {ren.label(b)}"
    if any(run.sandbox_isolation() == "process" for run in a.runs):
        ren.unisolated.append(where)
    stop = stop_fraction([c for run in a.runs for c in run.calls()])
    ren.stop = [x + y for x, y in zip(ren.stop, stop)]
    cut = CUT_MARK if stop[1] and stop[1] - stop[0] > CUT_SHARE * stop[1] else ""   # issue 33: shown in the cell
    if cut:
        ren.cut.append(f"{where}: {stop[1] - stop[0]} of {stop[1]} calls cut")
    rec = {**base, "n_seeds": len(a.seeds), "seeds": " ".join(map(str, a.seeds)),
           "n_problems": a.n_problems, "answered": a.answered, "selected": a.selected,
           "n_errors": a.n_errors, "complete": a.complete,
           "stop_pct": round(100 * stop[0] / stop[1], 1) if stop[1] else None,
           "sources": ";".join(a.sources(ren.root))}
    if a.incomplete:
        err = a.first_error()
        ren.records.append({**rec, "status": "incomplete", "first_error": err,
                            "reason": "seeds ran different problems: not averaged" if a.mixed else
                            "errors, unanswered problems or stale metrics: not averaged"})
        ren.incomplete.append(f"{where}: {a.incomplete_text()}" + (f" (first error: {err[:160]})" if err else "")
                              + f" — {'; '.join(a.sources(ren.root))}")
        return Cell(cell_text(a) + cut)
    ren.records.append(complete_record(a, rec, ren))
    return Cell(cell_text(a) + cut, bold=mark == "bold", underline=mark == "underline")


def avg_cell(ren: Rendering, r: dict[str, Any], benches: list[str], foot_csv: str) -> str:
    """The row's Avg: the mean of its six complete cells, unmarked (a mean of means has no paired test)."""
    if r["avg"] is None:
        return "—"
    row = r["row"]
    ren.records.append({"backbone": ren.backbone, "row": row["label"], "method": row["method"], "benchmark": "avg",
                        "status": "ok", "mean": round(r["avg"], 4), "footnotes": foot_csv,
                        "sources": ";".join(s for b in benches for s in r["aggs"][b].sources(ren.root))})
    return fmt(r["avg"])


def method_row(ren: Rendering, r: dict[str, Any], benches: list[str], proto: dict[str, Any],
               marks: dict[str, str | None]) -> list[Any]:
    """One method's table row: its label with its footnote marks (rows with numbers only: a row of "—" deviates
    from nothing yet), a cell per benchmark, Avg."""
    row, aggs = r["row"], r["aggs"]
    devs = row_deviations(row, aggs, proto) if any(a.runs for a in aggs.values()) else []
    foot_csv = ren.feet.numbered(devs) if devs else ""
    shown = row_label(row, aggs)
    cells: list[Any] = [Cell(shown, sup=ren.feet.marks(devs)) if devs else shown]
    for b in benches:
        base = {"backbone": ren.backbone, "row": row["label"], "method": row["method"], "benchmark": b,
                "footnotes": foot_csv}
        cells.append(bench_cell(ren, r, b, base, marks.get(b)))
    cells.append(avg_cell(ren, r, benches, foot_csv))
    if r["reason"]:
        ren.missing.append(f"{row['label']}: {r['reason']}")
    return cells


def scores_note(ci_methods: set[str]) -> str:
    return ("Scores in %: accuracy (GSM8K, MATH), pass@1 (MBPP, HumanEval), F1 (HotpotQA, DROP); each cell is "
            "the mean over problems (and over seeds when several: n=problems×seeds) with its 95% interval over "
            "problems — " + " / ".join(
                {"wilson": "Wilson score interval for accuracy/pass@1",
                 "t": "Student t interval for F1 (and for accuracy averaged over seeds)"}[m]
                for m in sorted(ci_methods, key=lambda m: m != "wilson"))
            + (" (scripts/stats.py)." if ci_methods else "scripts/stats.py.")
            + " Avg (no interval) only when all six benchmarks are complete.")


CUT_SHARE, CUT_MARK = 0.05, " ✂"   # a cell with more than 5% of its calls cut at max_tokens is marked


def cut_note(cut: list[str]) -> str:
    return (f"{CUT_MARK.strip()} = more than {100 * CUT_SHARE:.0f}% of the cell's calls ended at max_tokens "
            "(finish_reason=length, calls.jsonl): some answers were cut, so the score counts them as wrong where "
            "the method may not have failed; raise that benchmark's max_tokens (scripts/experiments/table1.yaml) "
            "and re-run with restart=true. " + "; ".join(cut) + ".")


def stop_note(stop: list[int]) -> str | None:
    """The share of calls that ended with finish_reason=stop (answers not cut), flagged below 90%."""
    if not stop[1]:
        return None
    pct = 100 * stop[0] / stop[1]
    return (f"Answers not cut: {pct:.1f}% of {stop[1]} calls ended with finish_reason=stop "
            f"(calls.jsonl){'' if pct >= 90 else ' — BELOW 90%: raise max_tokens for this protocol'}"
            + (f"; {stop[2] - stop[1]} calls recorded no finish_reason" if stop[2] > stop[1] else "") + ".")


def reference_notes(exp: dict[str, Any], backbone: str, any_inferred: bool) -> list[str]:
    """Where the ↳ paper rows come from, and that another backbone than the paper's is not like for like."""
    reference = exp.get("reference") or {}
    if not reference.get("rows"):
        return []
    out = [PROTOCOL_NOTE] if reference.get("protocol") else []
    out.append(f"↳ paper: {reference.get('source', '')}."
               + (" † inferred by arithmetic from stated margins/averages, not stated." if any_inferred else ""))
    ref_backbone = reference.get("backbone")
    if ref_backbone and ref_backbone != backbone.split("@")[0]:
        out.append(f"The paper used {ref_backbone}; Δ against a {backbone} run is not a like-for-like comparison.")
    return out


def command_line(proto: dict[str, Any]) -> list[str]:
    """The narrowing options and Hydra overrides the last reproduce run was given (paths and progress left out)."""
    extra = [f"{k}={','.join(map(str, proto[k])) if isinstance(proto[k], list) else proto[k]}"
             for k in ("methods", "benchmarks", "seeds", "limit") if proto.get(k)]
    return extra + [o for o in proto.get("user_overrides") or []
                    if not o.startswith(("results_root=", "cache.path=", "runner.progress="))]


def size_note(exp: dict[str, Any], proto: dict[str, Any]) -> str | None:
    """The size protocol the last reproduce run used (protocol-<backbone>.json): seeds, limits, overrides."""
    if not proto:
        return None
    st = proto.get("settings") or {}
    mt = (exp.get("max_tokens") or {}).get(st.get("max_tokens") or "") or {}
    first = "every problem" if st.get("limit") is None else f"the first {st.get('limit')} problems"
    parts = [  # (text, shown when) in reading order
        (f" {st.get('limit_by_benchmark')}", st.get("limit_by_benchmark")),
        (" (at most: " + ", ".join(f"{m} {v}" for m, v in (st.get("limit_by_method") or {}).items()) + ")",
         st.get("limit_by_method")),
        ("; only on: " + "; ".join(f"{m} {'/'.join(v)}" for m, v in (st.get("benchmarks_by_method") or {}).items()),
         st.get("benchmarks_by_method")),
        ("; max_tokens " + ", ".join(f"{b} {v}" for b, v in mt.items()), mt),
        (f"; overrides {' '.join(st.get('overrides') or [])}", st.get("overrides")),
        ("; per benchmark: " + "; ".join(f"{b}: {' '.join(v)}" for b, v in (st.get("overrides_by_benchmark") or {}).items()),
         st.get("overrides_by_benchmark")),
        ("; per method and benchmark: " + "; ".join(f"{m} {b}: {' '.join(v)}" for m, bv in
                                                    (st.get("overrides_by_method_benchmark") or {}).items()
                                                    for b, v in bv.items()),
         st.get("overrides_by_method_benchmark")),
        (f"; command line: {' '.join(command_line(proto))}", command_line(proto)),
    ]
    return (f"Size '{proto.get('protocol')}' (last reproduce run): seeds {st.get('seeds')}, {first} of each split"
            + "".join(text for text, shown in parts if shown) + ".")


def rule_groups(body: list[dict[str, Any]], b: str, keys: list[str]) -> dict[str, list[str]]:
    """``k=v, ...`` of the scorer ``keys`` each run of benchmark ``b`` recorded -> the rows whose runs did."""
    groups: dict[str, list[str]] = {}
    for r in body:
        a = r["aggs"].get(b)
        for run in (a.runs if a else []):
            bc = run.config().get("benchmark") or {}
            rule = ", ".join(f"{k}={bc.get(k, 'not recorded')}" for k in keys)
            if rule and r["row"]["label"] not in groups.setdefault(rule, []):
                groups[rule].append(r["row"]["label"])
    return groups


def scorer_note(body: list[dict[str, Any]], exp: dict[str, Any], labels: dict[str, str]) -> str | None:
    """Which scorer every cell's runs recorded (config.yaml ``benchmark``: the keys of the paper's rule), per
    benchmark with the rows that used each, against the paper's: a cell without a ↳ protocol line says it too."""
    pbs = (((exp.get("reference") or {}).get("protocol") or {}).get("benchmarks") or {})
    parts = []
    for b in exp["benchmarks"]:
        keys = [k for k in ((pbs.get(b) or {}).get("rule") or {}) if k != "metric"]
        groups = rule_groups(body, b, keys)
        if groups:
            want = ", ".join(f"{k}={pbs[b]['rule'][k]}" for k in keys)
            parts.append(f"{labels.get(b, b)}: " + "; ".join(f"{k} ({', '.join(v)})" for k, v in groups.items())
                         + f" (paper: {want})")
    return ("Scorer each cell's runs recorded (config.yaml): " + " | ".join(parts) + ".") if parts else None


def table_notes(ren: Rendering, exp: dict[str, Any], alpha: float, proto: dict[str, Any],
                body: list[dict[str, Any]]) -> list[str]:
    """The notes under one backbone's table, in reading order."""
    notes = [scores_note(ren.ci_methods), marks_note(alpha)]
    scorers = scorer_note(body, exp, ren.labels)
    if scorers:
        notes.append(scorers)
    if ren.incomplete:
        notes.append("incomplete = the cell's runs have errors (infrastructure failures, not wrong answers) or "
                     "unanswered problems, metrics that cover another selection (stale), or seeds that ran different "
                     "problems; it is not averaged. Re-run the target to resume or retry: "
                     + " | ".join(ren.incomplete))
    notes.extend(n for n in (stop_note(ren.stop), cut_note(ren.cut) if ren.cut else None, *reference_notes(exp, ren.backbone, ren.any_inferred),
                             size_note(exp, proto)) if n)
    if ren.feet.texts:
        notes.append("Deviations from the method's paper that can change its score (numbered marks on the row):")
        notes.extend(ren.feet.notes())
    if ren.unisolated:
        notes.append("Untrusted code ran without filesystem isolation (sandbox.isolation=process; "
                     f"evaluators/sandbox/README.md) in: {', '.join(ren.unisolated)}.")
    notes.extend(f"— {m}" for m in ren.missing)
    return notes


def build(results_root: Path, backbone: str, exp: dict[str, Any] | None = None,
          seeds: list[int] | None = None, index: RunIndex | None = None) -> tuple[Table, list[dict[str, Any]]]:
    """One backbone's Table 1 and its CSV records: the numbers (:func:`body_rows`), the significance marks per
    column, a row per method (:func:`method_row`) with the paper's rows under those it reports, the notes."""
    exp = exp or load_experiment("table1")
    alpha = float(exp.get("significance_alpha", 0.05))
    root = Path(results_root)
    index = index or RunIndex.scan(root, exp["experiment"])
    benches: list[str] = exp["benchmarks"]
    ref = (exp.get("reference") or {}).get("rows", {})
    pp = (exp.get("reference") or {}).get("protocol") or {}
    proto = protocol_record(root, exp, backbone)
    body = body_rows(exp, index, backbone, seeds)
    marks = {b: significance_marks([r["aggs"].get(b) for r in body], alpha) for b in benches}
    ren = Rendering(root, backbone, exp.get("benchmark_labels", {}))
    table = Table(title=f"Table 1: {backbone} (score % [95% interval] n=problems; bold/underlined: significantly best/second)",
                  columns=["Method", *[ren.label(b) for b in benches], "Avg"], label=f"tab:table1-{backbone}")
    for ri, r in enumerate(body):
        if ri and r["row"].get("group") != body[ri - 1]["row"].get("group"):
            table.rules_after.add(len(table.rows) - 1)
        table.rows.append(method_row(ren, r, benches, proto, {b: marks[b].get(ri) for b in benches}))
        pref = ref.get(r["row"]["label"])
        if pref:
            table.rows.extend(paper_rows(r["row"], r, pref, benches, ren.records, backbone, pp))
            ren.any_inferred |= any(bool((pref.get(b) or {}).get("inferred")) for b in [*benches, "avg"])
    table.notes = table_notes(ren, exp, alpha, proto, body)
    return table, ren.records


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
    header = ("# Table 1 (DenoiseFlow, arXiv 2603.00532): regenerated from results/ by `python -m agentic_repro.scripts.table1`\n\n"
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
