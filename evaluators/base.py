"""File-backed benchmarks: the core interface (:mod:`agentic_repro.harness.benchmark`) plus loading from files or the hub.

Subclasses implement ``make_problem`` (raw record → :class:`Problem`),
``render`` (what the model reads), ``extract`` (the recorded answer-extraction
filter) and ``score``. Everything else comes from ``configs/benchmark/*.yaml``.

A scorer keeps two outcomes apart: malformed *model output* (nothing to extract, a program that does not
run) is a wrong answer (0, extracted None); a scorer that cannot judge (our checker crashed, its child
died or ran out of time) raises :class:`ScorerFailure`, so the runner retries and then records the
problem as an error -- never a 0 averaged into a table.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path
from typing import Any

from agentic_repro.evaluators.data import data_dir, problem_from_row, read_jsonl, select, sha256_file
from agentic_repro.harness.benchmark import Benchmark as CoreBenchmark
from agentic_repro.harness.benchmark import DataInfo, ScorerFailure, build_benchmark
from agentic_repro.harness.types import Problem

__all__ = ["Benchmark", "DataInfo", "ScorerFailure", "build_benchmark"]  # ScorerFailure: the core's (harness.benchmark)


class Benchmark(CoreBenchmark):
    """A benchmark whose problems are rows of a JSONL split file (or a hub dataset)."""

    # ---- loading -------------------------------------------------------------------------------
    def split_file(self, root: Path) -> Path:
        split = self.cfg["split"]
        splits = self.cfg["splits"]
        if split not in splits or splits[split] is None:
            available = [k for k, v in splits.items() if v]
            note = self.cfg.get("split_notes", {}).get(split, "")
            raise ValueError(f"benchmark {self.name}: split '{split}' is not available"
                             f"{' (' + note + ')' if note else ''}; choose one of {available} "
                             f"with benchmark.split=...")
        return root / splits[split]

    def load(self, root: str | Path | None = None) -> tuple[list[Problem], DataInfo]:
        if self.cfg.get("source", "files") == "hub":
            rows, path, digest = self._hub_rows()
        else:
            path = self.split_file(data_dir(root))
            rows, digest = read_jsonl(path), None
        rows = self.filter_rows(rows)
        idx = select(rows, limit=self.cfg.get("limit"), sample=self.cfg.get("sample"),
                     sample_seed=int(self.cfg.get("sample_seed", 0)))
        # ids derive from the row's position in the file, so they do not move with limit/sample
        problems = [dataclasses.replace(problem_from_row(self.make_problem, rows[i], i, benchmark=self.name,
                                                         source=path, position=i), index=pos)
                    for pos, i in enumerate(idx)]
        ids = [p.id for p in problems]
        if len(set(ids)) != len(ids):
            raise ValueError(f"benchmark {self.name}: duplicate problem ids in {path}")
        info = DataInfo(file=str(path), sha256=digest or sha256_file(Path(path)), total=len(rows),
                        selected=len(problems), split=self.cfg["split"])
        return problems, info

    def _hub_rows(self) -> tuple[list[dict[str, Any]], str, str]:
        """Opt-in (``source: hub``): rows from the Hugging Face hub through ``datasets``; needs internet.

        ``hub: {path, name, split}`` in the benchmark config names a dataset whose records have the
        same fields as the files (e.g. openai/gsm8k, openai/openai_humaneval, google-research-datasets/mbpp,
        HuggingFaceH4/MATH-500). The digest recorded is the sha256 of the rows as JSON lines.
        """
        hub = self.cfg.get("hub") or {}
        if not hub.get("path"):
            raise ValueError(f"benchmark {self.name}: source=hub needs benchmark.hub.path (a hub dataset id); "
                             "this benchmark has no hub mapping, use source=files")
        import datasets

        ds = datasets.load_dataset(hub["path"], hub.get("name"), split=hub.get("split", "test"))
        rows = [dict(r) for r in ds]
        blob = "".join(json.dumps(r, sort_keys=True, default=str) + "\n" for r in rows).encode()
        ident = f"hub:{hub['path']}/{hub.get('name') or ''}:{hub.get('split', 'test')}"
        return rows, ident, hashlib.sha256(blob).hexdigest()

    def filter_rows(self, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return rows

    def make_problem(self, row: dict[str, Any], row_index: int) -> Problem:
        """Build a problem from the ``row_index``-th row of the split file."""
        raise NotImplementedError
