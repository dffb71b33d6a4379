"""The run folder: append-only predictions and ledger, metrics, config and metadata.

``predictions.jsonl`` and ``calls.jsonl`` are appended and flushed as each
problem completes (a problem's calls are written just before its prediction),
so an interrupted run loses nothing finished and a re-run resumes by id.
"""
from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.ledger import CallRecord, CallSummary


@dataclass(frozen=True)
class RunPaths:
    root: Path

    @property
    def predictions(self) -> Path: return self.root / "predictions.jsonl"
    @property
    def calls(self) -> Path: return self.root / "calls.jsonl"
    @property
    def metrics(self) -> Path: return self.root / "metrics.json"
    @property
    def config(self) -> Path: return self.root / "config.yaml"
    @property
    def meta(self) -> Path: return self.root / "meta.json"
    @property
    def method_state(self) -> Path: return self.root / "method_state.json"
    @property
    def reliability(self) -> Path: return self.root / "reliability.png"


def read_jsonl_tolerant(path: Path) -> list[dict[str, Any]]:
    """Rows of a JSONL file; a torn last line (killed mid-write) is ignored."""
    if not path.exists():
        return []
    rows = []
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            line = line.strip()
            if not line:
                continue
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return rows


def latest_by_id(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for r in rows:
        out[r["id"]] = r
    return out


class ResultWriter:
    """Appends flush to the OS after every problem (enough for Ctrl-C and kill); ``fsync=True`` also
    survives power loss, at ~5 ms per problem that blocks the event loop."""

    def __init__(self, paths: RunPaths, fsync: bool = False) -> None:
        self.paths = paths
        self.fsync = fsync
        paths.root.mkdir(parents=True, exist_ok=True)
        self._repair(paths.predictions)
        self._repair(paths.calls)

    @staticmethod
    def _repair(path: Path) -> None:
        """Drop a torn final line so appends start on a clean line."""
        if not path.exists() or path.stat().st_size == 0:
            return
        with open(path, "rb+") as fh:
            fh.seek(-1, os.SEEK_END)
            if fh.read(1) == b"\n":
                return
            data = path.read_bytes()
            cut = data.rfind(b"\n") + 1
            fh.seek(cut)
            fh.truncate()

    def finished(self) -> dict[str, dict[str, Any]]:
        """Problems with a final record; errored ones are retried on resume."""
        return {k: v for k, v in latest_by_id(read_jsonl_tolerant(self.paths.predictions)).items()
                if v.get("status") != "error"}

    def append(self, prediction: dict[str, Any], calls: list[CallRecord]) -> None:
        """Write one problem's calls (tagged with its attempt id), then its prediction."""
        if calls:
            with open(self.paths.calls, "a", encoding="utf-8") as fh:
                for c in calls:
                    fh.write(json.dumps({**c.to_dict(), "attempt": prediction["attempt"]}, ensure_ascii=False) + "\n")
                fh.flush()
                if self.fsync:
                    os.fsync(fh.fileno())
        with open(self.paths.predictions, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(prediction, ensure_ascii=False, default=str) + "\n")
            fh.flush()
            if self.fsync:
                os.fsync(fh.fileno())

    def write_json(self, path: Path, obj: Any) -> None:
        tmp = path.with_suffix(path.suffix + ".tmp")
        tmp.write_text(json.dumps(obj, indent=2, ensure_ascii=False, default=str), encoding="utf-8")
        os.replace(tmp, path)


def compute_metrics(predictions: list[dict[str, Any]], calls: list[dict[str, Any]], metric: str) -> dict[str, Any]:
    """Score mean and standard error plus cost totals, from the run's own files."""
    preds = list(latest_by_id(predictions).values())
    scores = [float(p["score"]) for p in preds]
    n = len(scores)
    mean = sum(scores) / n if n else float("nan")
    var = sum((s - mean) ** 2 for s in scores) / (n - 1) if n > 1 else 0.0
    kept = {p["attempt"] for p in preds}
    # calls of an errored-then-retried attempt stay in the ledger; totals count final attempts only
    final_calls = [c for c in calls if c.get("attempt") in kept]
    s = CallSummary.of(final_calls)
    return {
        "metric": metric,
        "score": mean,
        "score_pct": 100 * mean if n else float("nan"),
        "n": n,
        "stderr": math.sqrt(var / n) if n > 1 else 0.0,
        "n_errors": sum(1 for p in preds if p.get("status") == "error"),
        "n_empty": sum(1 for p in preds if not (p.get("raw_output") or "").strip()),
        "totals": s.to_dict(),
        "per_problem": {
            "cost_usd": s.cost_usd / n if n else 0.0,
            "calls": s.calls / n if n else 0.0,
            "tokens": (s.prompt_tokens + s.completion_tokens) / n if n else 0.0,
        },
    }
