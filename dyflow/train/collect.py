"""Self-play collection: DyFlow run folders -> designer SFT and KTO datasets (paper §3.3, D.2; release
``train/generate_training_data.py``).

Each answered problem of a DyFlow run holds, per stage, ``{"summary": z_t, "designer_messages": [...],
"designer_output": raw text, "stage": G_t (StageGraph JSON), "outputs": {...}}`` under ``trace["stages"]``
Every stage becomes one example (prompt -> G_t), labelled *preferred*
when the trajectory's final answer is correct and *discarded* otherwise (trajectory-level supervision, paper
§3.3 "Preference Optimization Strategy"). SFT keeps the preferred stages; KTO keeps both at a 1:1 ratio (D.2).

The choices the paper leaves open are named options (``CollectOptions``), recorded in each dataset's provenance:

- ``prompt``: ``messages`` (default) — the designer's own chat messages for that stage, exactly what the served
  designer sees at inference (the release trains on the designer call's input: the design prompt with the
  problem and the summary z_t), so the trained adapter needs no code change; ``summary`` — z_t alone (the paper's
  notation G_t ~ pi(.|z_t), literally).
- ``completion``: ``stage`` (default) — the validated G_t written back in the released designer JSON
  (:meth:`agentic_repro.dyflow.schema.StageGraph.to_designer`): the format the design prompt asks for and DyFlow's parser
  reads, so the served adapter needs no code change, without the prose or the broken JSON a repaired reply had;
  ``raw`` — the designer's text of the accepted attempt (the release's ``output``, verbatim). Either way only
  stages the designer designed and that validated are examples: ``stage: null`` (design failed) and
  ``status: fallback`` (a stage the method substituted) are skipped and counted in ``collect.json``.
- ``label_source``: ``score`` (default, the deterministic scorer) or ``judge_score`` (the LLM judge, as the paper
  scores MATH/LiveBench/SocialMaze); a problem without that field is dropped, never guessed.
- ``threshold``: a score ``>=`` it is success (1.0).
- ``train_splits``: the splits a source run may have read (``train``); a run on any other split (a scored one: test,
  dev, all) or one that recorded none is refused before anything is written (``agentic_repro.training.splits``).

Only problems that were answered (``status: ok``) are read (``agentic_repro.training.datasets``): an errored problem is never
training data. The score is read after the run: DyFlow never saw it while designing.
"""
from __future__ import annotations

import json
import os
import sys
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any
from collections.abc import Sequence

from agentic_repro.dyflow.schema import StageGraph, stage_from_trace
from agentic_repro.training.datasets import Dataset, Example, RunSource, Trajectory, build_kto, build_sft, find_runs
from agentic_repro.training.splits import TRAIN_SPLITS, refuse_scored_splits, run_split

__all__ = ["CollectOptions", "CollectResult", "collect", "designer_identity", "main", "stage_examples"]

PROMPTS = ("messages", "summary")
COMPLETIONS = ("stage", "raw")
LABEL_SOURCES = ("score", "judge_score")


@dataclass(frozen=True)
class CollectOptions:
    prompt: str = "messages"
    completion: str = "stage"
    label_source: str = "score"
    threshold: float = 1.0
    ratio: float | None = 1.0          # KTO preferred : discarded (D.2: 1:1)
    seed: int = 0
    stages_key: str = "stages"
    benchmarks: tuple[str, ...] | None = None   # keep only runs of these benchmarks (cross-task training, Table 3)
    train_splits: tuple[str, ...] = TRAIN_SPLITS   # splits a source run may have read; a scored split is refused

    def check(self) -> None:
        for key, allowed in (("prompt", PROMPTS), ("completion", COMPLETIONS), ("label_source", LABEL_SOURCES)):
            if getattr(self, key) not in allowed:
                raise ValueError(f"collect: {key}={getattr(self, key)!r}; choose one of {', '.join(allowed)}")


def designer_identity(run: RunSource) -> dict[str, Any]:
    """Who designed in this run: ``meta.json`` ``roles.designer`` (backbone, model identity, adapter identity)."""
    roles = run.meta.get("roles") or {}
    d = roles.get("designer") or roles.get("default") or {}
    return {k: d.get(k) for k in ("backbone", "own_backbone", "model", "adapter") if k in d} or \
        {"backbone": (run.meta.get("model") or {}).get("model") if isinstance(run.meta.get("model"), dict) else None}


def _outcome(t: Trajectory, opts: CollectOptions) -> bool | None:
    v = t.record.get(opts.label_source)
    return None if v is None else float(v) >= opts.threshold   # no score: unlabelled (dropped), never "wrong"


def _completion(graph: StageGraph, stage: dict[str, Any], opts: CollectOptions) -> str | None:
    if opts.completion == "raw":
        raw = stage.get("designer_output")
        return str(raw) if raw else None
    return json.dumps(graph.to_designer(), ensure_ascii=False)   # compact: whitespace tokens teach nothing


def _graph(stage: dict[str, Any]) -> tuple[StageGraph | None, str | None]:
    """(the validated G_t, None) or (None, why this stage is no example)."""
    if stage.get("status", "executed") == "fallback":
        return None, "fallback_stage"
    if stage.get("stage") is None:
        return None, "design_failed"
    try:
        return stage_from_trace(stage), None
    except ValueError:
        return None, "stage_not_valid"


def _prompt(stage: dict[str, Any], opts: CollectOptions) -> Any:
    if opts.prompt == "summary":
        z = stage.get("summary")
        return str(z) if z else None
    msgs = stage.get("designer_messages")
    if not msgs:
        return None
    return [{"role": m["role"], "content": m["content"]} for m in msgs]


def stage_examples(opts: CollectOptions | None = None):
    """The extractor for ``agentic_repro.training.datasets``: one :class:`Example` per designed stage of a trajectory."""
    opts = opts or CollectOptions()
    opts.check()
    skipped: Counter[str] = Counter()

    def extract(t: Trajectory) -> list[Example]:
        if opts.benchmarks is not None and _bench(t.run) not in opts.benchmarks:
            skipped["other_benchmark"] += 1
            return []
        label = _outcome(t, opts)
        if label is None:
            skipped[f"no_{opts.label_source}"] += 1
            return []
        out = []
        ident = designer_identity(t.run)
        for i, st in enumerate(t.trace.get(opts.stages_key) or []):
            graph, why = _graph(st)
            if graph is None:
                skipped[why or "no_stage"] += 1
                continue
            prompt, completion = _prompt(st, opts), _completion(graph, st, opts)
            if prompt is None or completion is None:
                skipped[f"stage_without_{opts.prompt if prompt is None else 'designer_output'}"] += 1
                continue
            out.append(Example(prompt, completion, label, "designer",
                               {"stage_index": i, "stage_id": graph.stage_id, "templates": graph.templates,
                                "benchmark": _bench(t.run), "designer": ident}))
        if not out:
            skipped["trajectory_without_stages"] += 1
        return out

    extract.__name__ = extract.__qualname__ = (
        f"agentic_repro.dyflow.train.collect.stage_examples[prompt={opts.prompt},completion={opts.completion},"
        f"label={opts.label_source}>={opts.threshold}]")
    extract.skipped = skipped  # type: ignore[attr-defined]
    return extract


def _bench(run: RunSource) -> str | None:
    b = run.meta.get("benchmark")
    return str(b.get("name")) if isinstance(b, dict) else (str(b) if b else None)


@dataclass
class CollectResult:
    sft: Dataset
    kto: Dataset
    summary_path: Path
    summary: dict[str, Any]


def collect(paths: Sequence[str | os.PathLike[str]], out_dir: str | os.PathLike[str],
            opts: CollectOptions | None = None) -> CollectResult:
    """Write ``designer-sft.jsonl``, ``designer-kto.jsonl`` and ``collect.json`` (what was read, who designed,
    both datasets' sha256 and counts) under ``out_dir`` from every run folder at or under ``paths``."""
    opts = opts or CollectOptions()
    opts.check()
    runs = find_runs(paths)
    refuse_scored_splits(runs, opts.train_splits, builder="agentic_repro.dyflow.train.collect")
    out = Path(out_dir)
    sft_x, kto_x = stage_examples(opts), stage_examples(opts)
    sft = build_sft(runs, sft_x, out / "designer-sft.jsonl", keep="desirable", roles=["designer"])
    kto = build_kto(runs, kto_x, out / "designer-kto.jsonl", ratio=opts.ratio, seed=opts.seed, roles=["designer"])
    summary = {
        "collector": "agentic_repro.dyflow.train.collect", "options": {**asdict(opts), "benchmarks": list(opts.benchmarks)
                                                         if opts.benchmarks is not None else None},
        "runs": [{"run_id": r.run_id, "path": str(r.root), "benchmark": _bench(r), "split": run_split(r),
                  "designer": designer_identity(r),
                  "files": r.files} for r in runs],
        "designers": sorted({json.dumps(designer_identity(r), sort_keys=True, default=str) for r in runs}),
        "sft": {"path": str(sft.path), "sha256": sft.sha256, "counts": sft.provenance["counts"]},
        "kto": {"path": str(kto.path), "sha256": kto.sha256, "counts": kto.provenance["counts"]},
        "skipped": dict(kto_x.skipped),  # type: ignore[attr-defined]
    }
    summary["designers"] = [json.loads(d) for d in summary["designers"]]
    path = out / "collect.json"
    path.write_text(json.dumps(summary, indent=2, sort_keys=True, default=str) + "\n", encoding="utf-8")
    return CollectResult(sft, kto, path, summary)


def _parse(argv: Sequence[str]) -> tuple[list[str], str, CollectOptions]:
    kv = {}
    for a in argv:
        k, sep, v = a.partition("=")
        if not sep:
            raise SystemExit(f"argument {a!r} is not key=value")
        kv[k.lstrip("-")] = v
    runs = [p for p in kv.pop("runs", "").split(",") if p]
    out = kv.pop("out", "")
    if not runs or not out:
        raise SystemExit("usage: python -m agentic_repro.dyflow.train.collect runs=<run folders, comma-separated> out=<folder> "
                         "[prompt=messages|summary] [completion=raw|stage] [label_source=score|judge_score] "
                         "[threshold=1.0] [ratio=1.0|none] [seed=0] [benchmarks=math,pubmedqa,...] [train_splits=train]")
    return runs, out, _parse_options(kv)


def _parse_options(kv: dict[str, str]) -> CollectOptions:
    """CollectOptions from ``key=value`` strings (unknown keys are an error)."""
    o: dict[str, Any] = {}
    for k, v in kv.items():
        if k in ("prompt", "completion", "label_source", "stages_key"):
            o[k] = v
        elif k == "threshold":
            o[k] = float(v)
        elif k == "ratio":
            o[k] = None if v.lower() in ("none", "null") else float(v)
        elif k == "seed":
            o[k] = int(v)
        elif k in ("benchmarks", "train_splits"):
            o[k] = tuple(b for b in v.split(",") if b)
        else:
            raise ValueError(f"unknown option {k!r}")
    return CollectOptions(**o)


def main(argv: Sequence[str] | None = None) -> int:
    runs, out, opts = _parse(list(sys.argv[1:] if argv is None else argv))
    try:
        res = collect(runs, out, opts)
    except (FileNotFoundError, ValueError) as exc:
        print(f"agentic_repro.dyflow.train.collect: {exc}", file=sys.stderr)
        return 2
    c = res.kto.provenance["counts"]
    print(f"{len(res.summary['runs'])} runs, {c['trajectories']} trajectories -> SFT {len(res.sft.rows)} preferred "
          f"stages ({res.sft.path}, sha256 {res.sft.sha256[:12]}); KTO {c['desirable']}:{c['undesirable']} "
          f"preferred:discarded of {c['before_balancing']} ({res.kto.path}, sha256 {res.kto.sha256[:12]}); "
          f"skipped {res.summary['skipped'] or 'none'}; {res.summary_path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
