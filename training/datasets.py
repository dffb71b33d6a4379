"""Training datasets built from results: SFT examples, KTO examples and DPO pairs, each a JSONL file with provenance.

A method supplies one function, ``extract(trajectory) -> list[Example]``: which (prompt, completion) pairs a
finished problem yields and how each is labelled (``True``/``False`` for desirable/undesirable, or a float reward).
The builders here are method-agnostic: they read run folders (``predictions.jsonl``, ``calls.jsonl``,
``trajectories.jsonl``, ``meta.json``), hand each answered problem to ``extract``, apply the named filter rules and
write the dataset. Problems that ended in an error (an infrastructure failure, a crash) are never training data.

File format: line 1 is ``{"provenance": {...}}`` (builder and version, kind, source runs with the sha256 of each
file read, roles, scorer versions, filter rules and counts); every further line is one example with its own
``source`` (run, problem id, attempt, score). :func:`read_dataset` returns both; the dataset's hash is the sha256 of
the file's bytes, which a trained adapter records as ``training_data_sha256``.
"""
from __future__ import annotations

import hashlib
import json
import os
import random
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentic_repro.harness.hashing import sha256_file
from agentic_repro.harness.results import read_jsonl_tolerant

__all__ = ["BUILDER_VERSION", "Dataset", "Example", "RunSource", "Trajectory", "build_dpo", "build_kto",
           "build_sft", "dataset_sha256", "find_runs", "read_dataset", "trace_examples", "trajectories"]

BUILDER_VERSION = "1"
Prompt = str | list[dict[str, Any]]  # plain text, or chat messages [{"role", "content"}]


@dataclass(frozen=True)
class Example:
    """One training example a method's extractor yields. ``label``: bool (desirable?) or float (reward)."""

    prompt: Prompt
    completion: str
    label: bool | float | None = None
    role: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class RunSource:
    """A run folder and what identifies it."""

    root: Path
    run_id: str
    meta: dict[str, Any]
    files: dict[str, str]  # file name -> sha256 of the bytes read


@dataclass(frozen=True)
class Trajectory:
    """One answered problem of a run, as the extractor sees it: the prediction record, its calls and steps."""

    run: RunSource
    record: dict[str, Any]
    calls: list[dict[str, Any]]
    steps: list[dict[str, Any]]

    @property
    def id(self) -> str:
        return str(self.record["id"])

    @property
    def score(self) -> float:
        return float(self.record.get("score") or 0.0)

    @property
    def trace(self) -> dict[str, Any]:
        return self.record.get("trace") or {}


_jsonl = read_jsonl_tolerant  # a torn last line of a killed run is skipped, as the runner's own reader does


def find_runs(paths: Iterable[str | os.PathLike[str]]) -> list[RunSource]:
    """Every run folder (one holding ``predictions.jsonl``) at or under ``paths``, in path order."""
    roots: list[Path] = []
    for p in map(Path, paths):
        if (p / "predictions.jsonl").is_file():
            roots.append(p)
        elif p.is_dir():
            roots.extend(sorted(q.parent for q in p.rglob("predictions.jsonl")))
        else:
            raise FileNotFoundError(f"{p}: not a run folder (no predictions.jsonl) nor a folder of runs")
    if not roots:
        raise FileNotFoundError(f"no run folder (predictions.jsonl) under {', '.join(map(str, paths))}")
    out = []
    for root in dict.fromkeys(r.resolve() for r in roots):
        meta_path = root / "meta.json"
        meta = json.loads(meta_path.read_text(encoding="utf-8")) if meta_path.is_file() else {}
        files = {n: sha256_file(root / n) for n in ("predictions.jsonl", "calls.jsonl", "trajectories.jsonl",
                                                        "meta.json", "config.yaml") if (root / n).is_file()}
        out.append(RunSource(root, str(meta.get("run_id") or root), meta, files))
    return out


def trajectories(runs: Sequence[RunSource]) -> Iterator[Trajectory]:
    """The final record of every problem that was answered (status ok), with its attempt's calls and steps."""
    for run in runs:
        final: dict[str, dict[str, Any]] = {}
        for r in _jsonl(run.root / "predictions.jsonl"):
            final[str(r["id"])] = r
        calls = _jsonl(run.root / "calls.jsonl")
        steps = _jsonl(run.root / "trajectories.jsonl")
        for rec in final.values():
            if rec.get("status", "ok") != "ok":
                continue
            attempt = rec.get("attempt")
            yield Trajectory(run, rec,
                             [c for c in calls if c.get("attempt") == attempt and c.get("problem_id") == rec["id"]],
                             [s for s in steps if s.get("attempt") == attempt and s.get("problem_id") == rec["id"]])


def trace_examples(key: str = "training_examples", *, success_threshold: float = 1.0,
                   label: str = "outcome") -> Callable[[Trajectory], list[Example]]:
    """A ready extractor for methods that record ``trace[key] = [{"prompt", "completion", "role"?, "reward"?}]``.

    ``label="outcome"``: every pair is labelled by the problem's score (``score >= success_threshold``), as DyFlow
    labels a trajectory's stages by its final answer; ``label="reward"``: the pair's own ``reward`` field.
    """
    if label not in ("outcome", "reward"):
        raise ValueError(f"trace_examples: label must be 'outcome' or 'reward', not {label!r}")

    def extract(t: Trajectory) -> list[Example]:
        out = []
        for i, item in enumerate(t.trace.get(key) or []):
            lab: bool | float = t.score >= success_threshold if label == "outcome" else float(item["reward"])
            out.append(Example(item["prompt"], str(item["completion"]), lab, item.get("role"), {"index": i}))
        return out

    extract.__name__ = f"trace_examples[{key},{label},{success_threshold}]"
    return extract


# ---- building ----------------------------------------------------------------------------------------------------
@dataclass
class Dataset:
    """A written dataset: its path, provenance header, rows and sha256."""

    path: Path
    provenance: dict[str, Any]
    rows: list[dict[str, Any]]
    sha256: str


def _collect(runs: Sequence[RunSource], extract: Callable[[Trajectory], Iterable[Example]],
             roles: Sequence[str] | None) -> tuple[list[tuple[Example, dict[str, Any]]], int]:
    items, n = [], 0
    for t in trajectories(runs):
        n += 1
        for ex in extract(t):
            if not isinstance(ex, Example):
                raise TypeError(f"the extractor returned {type(ex).__name__}, not training.datasets.Example")
            if roles is not None and ex.role not in roles:
                continue
            src = {"run": t.run.run_id, "run_dir": str(t.run.root), "problem_id": t.id,
                   "attempt": t.record.get("attempt"), "score": t.record.get("score"), **({"meta": ex.meta}
                                                                                        if ex.meta else {})}
            items.append((ex, src))
    return items, n


def _provenance(kind: str, runs: Sequence[RunSource], extract: Callable[..., Any], rules: dict[str, Any],
                counts: dict[str, Any], roles_seen: set[str | None]) -> dict[str, Any]:
    return {
        "builder": "agentic_repro.training.datasets", "builder_version": BUILDER_VERSION, "kind": kind,
        "extractor": getattr(extract, "__qualname__", None) or repr(extract),
        "extractor_module": getattr(extract, "__module__", None),
        "sources": [{"run_id": r.run_id, "path": str(r.root), "files": r.files,
                     "benchmark": r.meta.get("benchmark"), "model": _short_model(r.meta.get("model")),
                     "roles": r.meta.get("roles"), "git": r.meta.get("git")} for r in runs],
        "scorers": sorted({json.dumps(r.meta.get("benchmark"), sort_keys=True) for r in runs if r.meta.get("benchmark")}),
        "roles": sorted(str(x) for x in roles_seen),
        "rules": rules, "counts": counts,
    }


def _short_model(model: Any) -> Any:
    if not isinstance(model, dict):
        return model
    return {k: model[k] for k in ("kind", "model", "name", "gguf", "base_url") if k in model} or model


def _write(path: str | os.PathLike[str], provenance: dict[str, Any], rows: list[dict[str, Any]]) -> Dataset:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(json.dumps({"provenance": provenance}, ensure_ascii=False, sort_keys=True, default=str) + "\n")
        fh.writelines(json.dumps(row, ensure_ascii=False, sort_keys=True, default=str) + "\n" for row in rows)
    os.replace(tmp, path)
    return Dataset(path, provenance, rows, sha256_file(path))


def _is_desirable(label: bool | float | None, threshold: float) -> bool | None:
    if label is None:
        return None
    if isinstance(label, bool):
        return label
    return float(label) >= threshold


def build_sft(runs: Sequence[RunSource], extract: Callable[[Trajectory], Iterable[Example]],
              out: str | os.PathLike[str], *, keep: str = "desirable", threshold: float = 1.0,
              roles: Sequence[str] | None = None, dedupe: bool = True) -> Dataset:
    """SFT rows ``{"prompt", "completion"}``. ``keep="desirable"``: only examples labelled desirable (a float
    label counts when ``>= threshold``; unlabelled ones are kept: the extractor chose them); ``keep="all"``."""
    if keep not in ("desirable", "all"):
        raise ValueError(f"build_sft: keep must be 'desirable' or 'all', not {keep!r}")
    items, n_traj = _collect(runs, extract, roles)
    rows, seen, dropped, dups = [], set(), 0, 0
    for ex, src in items:
        if keep == "desirable" and _is_desirable(ex.label, threshold) is False:
            dropped += 1
            continue
        k = _key(ex.prompt, ex.completion)
        if dedupe and k in seen:
            dups += 1
            continue
        seen.add(k)
        rows.append({"prompt": ex.prompt, "completion": ex.completion, "role": ex.role, "source": src})
    rules = {"keep": keep, "threshold": threshold, "roles": list(roles) if roles is not None else None,
             "dedupe": dedupe, "status": "ok only (errored problems are never training data)"}
    counts = {"trajectories": n_traj, "examples": len(items), "undesirable_dropped": dropped, "duplicates": dups,
              "rows": len(rows)}
    return _write(out, _provenance("sft", runs, extract, rules, counts, {ex.role for ex, _ in items}), rows)


def build_kto(runs: Sequence[RunSource], extract: Callable[[Trajectory], Iterable[Example]],
              out: str | os.PathLike[str], *, ratio: float | None = 1.0, threshold: float = 1.0, seed: int = 0,
              roles: Sequence[str] | None = None, dedupe: bool = True) -> Dataset:
    """KTO rows ``{"prompt", "completion", "label": bool}``. ``ratio`` = desirable : undesirable wanted (DyFlow
    uses 1:1): the larger class is subsampled (seeded) to match; ``None`` keeps every example."""
    items, n_traj = _collect(runs, extract, roles)
    pos, neg, unlabelled, seen, dups = [], [], 0, set(), 0
    for ex, src in items:
        d = _is_desirable(ex.label, threshold)
        if d is None:
            unlabelled += 1
            continue
        k = _key(ex.prompt, ex.completion)
        if dedupe and k in seen:
            dups += 1
            continue
        seen.add(k)
        (pos if d else neg).append({"prompt": ex.prompt, "completion": ex.completion, "label": d, "role": ex.role,
                                    "source": src})
    before = {"desirable": len(pos), "undesirable": len(neg)}
    if ratio is not None and pos and neg:
        if ratio <= 0:
            raise ValueError("build_kto: ratio must be > 0 (desirable : undesirable) or None")
        rng = random.Random(seed)
        want_neg = round(len(pos) / ratio)
        if want_neg < len(neg):
            neg = [neg[i] for i in sorted(rng.sample(range(len(neg)), want_neg))]
        else:
            want_pos = round(len(neg) * ratio)
            if want_pos < len(pos):
                pos = [pos[i] for i in sorted(rng.sample(range(len(pos)), want_pos))]
    rows = pos + neg
    rules = {"ratio": ratio, "threshold": threshold, "seed": seed, "roles": list(roles) if roles is not None else None,
             "dedupe": dedupe, "status": "ok only (errored problems are never training data)"}
    counts = {"trajectories": n_traj, "examples": len(items), "unlabelled_dropped": unlabelled, "duplicates": dups,
              "before_balancing": before, "desirable": len(pos), "undesirable": len(neg), "rows": len(rows)}
    return _write(out, _provenance("kto", runs, extract, rules, counts, {ex.role for ex, _ in items}), rows)


def build_dpo(runs: Sequence[RunSource], extract: Callable[[Trajectory], Iterable[Example]],
              out: str | os.PathLike[str], *, pairing: str = "best_worst", min_margin: float = 0.0,
              group_by: str = "prompt", roles: Sequence[str] | None = None) -> Dataset:
    """DPO rows ``{"prompt", "chosen", "rejected"}`` from examples sharing a prompt, ranked by their label (a float
    reward, or bool as 1/0). ``pairing="best_worst"``: one pair per prompt (highest vs lowest); ``"all"``: every
    pair whose reward gap is ``> min_margin``. Ties never make a pair. ``group_by="prompt"`` groups across runs
    and problems by the prompt itself; ``"problem"`` only within one problem of one run."""
    if pairing not in ("best_worst", "all"):
        raise ValueError(f"build_dpo: pairing must be 'best_worst' or 'all', not {pairing!r}")
    if group_by not in ("prompt", "problem"):
        raise ValueError(f"build_dpo: group_by must be 'prompt' or 'problem', not {group_by!r}")
    items, n_traj = _collect(runs, extract, roles)
    groups: dict[str, list[tuple[float, Example, dict[str, Any]]]] = {}
    unlabelled = 0
    for ex, src in items:
        if ex.label is None:
            unlabelled += 1
            continue
        k = _key(ex.prompt) if group_by == "prompt" else f"{src['run']}\0{src['problem_id']}\0{_key(ex.prompt)}"
        groups.setdefault(k, []).append((float(ex.label), ex, src))
    rows, no_pair = [], 0
    for members in groups.values():
        ranked = sorted(members, key=lambda m: -m[0])  # stable: first seen wins among equals
        if pairing == "best_worst":
            cands = [(ranked[0], ranked[-1])] if len(ranked) > 1 else []
        else:
            cands = [(a, b) for i, a in enumerate(ranked) for b in ranked[i + 1:]]
        made = 0
        for (ra, a, sa), (rb, b, sb) in cands:
            if ra - rb <= min_margin or ra == rb or a.completion == b.completion:
                continue
            rows.append({"prompt": a.prompt, "chosen": a.completion, "rejected": b.completion, "role": a.role,
                         "chosen_reward": ra, "rejected_reward": rb, "source": {"chosen": sa, "rejected": sb}})
            made += 1
        no_pair += made == 0
    rules = {"pairing": pairing, "min_margin": min_margin, "group_by": group_by,
             "roles": list(roles) if roles is not None else None,
             "status": "ok only (errored problems are never training data)", "ties": "never paired"}
    counts = {"trajectories": n_traj, "examples": len(items), "unlabelled_dropped": unlabelled,
              "prompts": len(groups), "prompts_without_pair": no_pair, "rows": len(rows)}
    return _write(out, _provenance("dpo", runs, extract, rules, counts, {ex.role for ex, _ in items}), rows)


def _key(*parts: Any) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


def read_dataset(path: str | os.PathLike[str]) -> Dataset:
    """(provenance, rows, sha256) of a dataset file written by this module (refuses other files)."""
    path = Path(path)
    lines = [ln for ln in path.read_text(encoding="utf-8").splitlines() if ln.strip()]
    if not lines:
        raise ValueError(f"{path}: empty dataset file")
    head = json.loads(lines[0])
    if not isinstance(head, dict) or "provenance" not in head:
        raise ValueError(f"{path}: line 1 is not a provenance header; build the file with training.datasets")
    return Dataset(path, head["provenance"], [json.loads(ln) for ln in lines[1:]], sha256_file(path))


def dataset_sha256(path: str | os.PathLike[str]) -> str:
    return sha256_file(Path(path))
