"""Read finished runs from ``results/`` (metrics.json and friends) into per-cell aggregates.

Every number a reporting script prints comes from here, and each aggregate keeps the list of
``metrics.json`` files it was computed from (``sources``), so any table entry can be traced back.
"""
from __future__ import annotations

import json
import math
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.results import read_jsonl_tolerant


@dataclass
class SeedRun:
    seed: int
    dir: Path
    metrics: dict[str, Any]

    @property
    def score_pct(self) -> float | None:
        v = self.metrics.get("score_pct")
        return None if v is None or (isinstance(v, float) and math.isnan(v)) else float(v)

    @property
    def complete(self) -> bool:
        return bool(self.metrics.get("complete"))

    @property
    def n(self) -> int:
        return int(self.metrics.get("n") or 0)

    def per_problem(self, key: str) -> float:
        return float((self.metrics.get("per_problem") or {}).get(key) or 0.0)

    def totals(self, key: str) -> float:
        return float((self.metrics.get("totals") or {}).get(key) or 0.0)

    def predictions(self) -> list[dict[str, Any]]:
        rows = read_jsonl_tolerant(self.dir / "predictions.jsonl")
        latest: dict[str, dict[str, Any]] = {}
        for r in rows:
            latest[r["id"]] = r
        return list(latest.values())

    def config(self) -> dict[str, Any]:
        import yaml

        p = self.dir / "config.yaml"
        return yaml.safe_load(p.read_text()) if p.exists() else {}


@dataclass
class Agg:
    """Mean ± sample std over seeds of one (experiment, benchmark, method, backbone)."""

    runs: list[SeedRun] = field(default_factory=list)

    @property
    def scored(self) -> list[SeedRun]:
        return [r for r in self.runs if r.score_pct is not None and r.n > 0]

    @property
    def mean(self) -> float | None:
        s = [r.score_pct for r in self.scored]
        return sum(s) / len(s) if s else None  # type: ignore[arg-type]

    @property
    def std(self) -> float | None:
        s = [r.score_pct for r in self.scored]
        return statistics.stdev(s) if len(s) >= 2 else None  # type: ignore[arg-type]

    @property
    def complete(self) -> bool:
        return bool(self.scored) and all(r.complete for r in self.scored)

    @property
    def seeds(self) -> list[int]:
        return [r.seed for r in self.scored]

    @property
    def n_problems(self) -> int:
        return min((r.n for r in self.scored), default=0)

    def mean_of(self, fn) -> float | None:
        vals = [fn(r) for r in self.scored]
        return sum(vals) / len(vals) if vals else None

    def sources(self, root: Path) -> list[str]:
        return [_rel(r.dir / "metrics.json", root) for r in self.scored]


def _rel(p: Path, root: Path) -> str:
    try:
        return str(p.relative_to(root))
    except ValueError:
        return str(p)


def run_dir(root: Path, experiment: str, benchmark: str, method: str, backbone: str) -> Path:
    return Path(root) / experiment / benchmark / method / backbone


def load_runs(root: Path, experiment: str, benchmark: str, method: str, backbone: str,
              seeds: list[int] | None = None) -> Agg:
    base = run_dir(root, experiment, benchmark, method, backbone)
    runs = []
    if base.is_dir():
        for d in sorted(base.glob("seed=*")):
            m = d / "metrics.json"
            if not m.exists():
                continue
            try:
                seed = int(d.name.split("=", 1)[1])
                metrics = json.loads(m.read_text())
            except (ValueError, json.JSONDecodeError):
                continue
            if seeds is not None and seed not in seeds:
                continue
            runs.append(SeedRun(seed, d, metrics))
    return Agg(sorted(runs, key=lambda r: r.seed))


def backbones_on_disk(root: Path, experiment: str) -> list[str]:
    """Backbone names with at least one metrics.json under results/<experiment>/."""
    found = {p.parents[1].name for p in (Path(root) / experiment).glob("*/*/*/seed=*/metrics.json")}
    return sorted(found, key=lambda b: (b != "gpt-4o-mini", b))


def methods_on_disk(root: Path, experiment: str) -> list[str]:
    return sorted({p.parents[2].name for p in (Path(root) / experiment).glob("*/*/*/seed=*/metrics.json")})


def cost_per_problem(agg: Agg) -> tuple[float | None, str]:
    """($ per problem, "usd") when the backbone has a price, else (tokens per problem, "tokens")."""
    usd = agg.mean_of(lambda r: r.per_problem("cost_usd"))
    if usd:
        return usd, "usd"
    return agg.mean_of(lambda r: r.per_problem("tokens")), "tokens"
