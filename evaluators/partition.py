"""Seeded train/test parts of one labelled file (DyFlow D.1: "TRAIN:TEST ≈ 1:3"; its split lists are unpublished).

A benchmark config with ``partition: {seed, sizes: {train: 84, test: 251}}`` and a split named in
``sizes`` gets that part of a seeded shuffle of the (filtered) rows: rows are ordered by
``sha256(f"{seed}:{key}")`` of their stable key (an id, never the file position), then cut in the
order ``sizes`` lists the parts. The same seed and file give the same ids on every machine and
Python version; parts are disjoint by construction. The whole-file splits (``all``, ``full``) read
every row; any other name is an error (a ``validate`` that silently read every row, test part
included, is how a workflow search would have searched on test).
The partition spec is part of the benchmark config, so it is recorded in every run's config.yaml.
"""
from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any
from collections.abc import Callable

from agentic_repro.evaluators.code_tasks import HumanEval
from agentic_repro.evaluators.data import sha256_file
from agentic_repro.evaluators.math_tasks import MATH


class PartitionError(ValueError):
    """The partition asks for more rows than the file has, names no sizes, or the split is unknown."""


WHOLE_FILE_SPLITS = ("all", "full")  # the splits that read every row, the partition's parts together


def partition_rows(rows: list[dict[str, Any]], spec: dict[str, Any], split: str,
                   key: Callable[[dict[str, Any]], str]) -> list[dict[str, Any]]:
    """The rows of part ``split`` of ``spec`` (in shuffled order), or all rows for a whole-file split."""
    sizes = {str(k): int(v) for k, v in (spec.get("sizes") or {}).items()}
    if not sizes:
        raise PartitionError("partition.sizes is empty: give {train: N, test: M}")
    if split not in sizes:
        if split in WHOLE_FILE_SPLITS:
            return rows
        raise PartitionError(f"split {split!r} is neither a part of this benchmark's partition "
                             f"({', '.join(sizes)}) nor a whole-file split ({', '.join(WHOLE_FILE_SPLITS)})")
    seed = int(spec.get("seed", 0))
    if sum(sizes.values()) > len(rows):
        raise PartitionError(f"partition sizes {sizes} need {sum(sizes.values())} rows; the file has {len(rows)}")
    keys = [key(r) for r in rows]
    if len(set(keys)) != len(keys):
        raise PartitionError("partition keys are not unique")
    order = sorted(range(len(rows)), key=lambda i: hashlib.sha256(f"{seed}:{keys[i]}".encode()).hexdigest())
    start = 0
    for name, n in sizes.items():
        if name == split:
            return [rows[i] for i in order[start:start + n]]
        start += n
    raise AssertionError("unreachable")


class Partitioned:
    """Mixin: ``filter_rows`` then the configured partition (``partition_key`` names the stable id)."""

    cfg: dict[str, Any]

    def partition_key(self, row: dict[str, Any]) -> str:
        raise NotImplementedError

    def filter_rows(self, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        rows = super().filter_rows(rows)  # type: ignore[misc]
        spec = self.cfg.get("partition")
        return partition_rows(rows, spec, str(self.cfg["split"]), self.partition_key) if spec else rows


class PartitionedMATH(Partitioned, MATH):
    """MATH with a type filter (``types: [...]``) and a seeded partition: DyFlow's MATH (MaAS's Level-5 subset)."""

    def filter_rows(self, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        types = self.cfg.get("types")
        if types:
            rows = [r for r in rows if (r.get("type") or r.get("subject")) in types]
        return super().filter_rows(rows)

    hidden_fields = ("solution",)

    def partition_key(self, row: dict[str, Any]) -> str:
        return str(row["unique_id"])

    def make_problem(self, row: dict[str, Any], row_index: int):  # harness.types.Problem
        problem = super().make_problem(row, row_index)
        problem.fields["solution"] = row.get("solution")  # hidden; what DyFlow's MATH judge compares against
        return problem

    def judge_fields(self, problem: Any) -> dict[str, str]:
        """DyFlow's MATH judge reads the reference *solution* (``problem['solution']`` in its benchmarks/math.py)."""
        return {"question": self.render(problem), "ground_truth": str(problem.fields.get("solution") or problem.gold)}


class PartitionedHumanEval(Partitioned, HumanEval):
    """HumanEval with DyFlow's 55 train / 109 test partition (or ``split=full``: all 164, D.1)."""

    def partition_key(self, row: dict[str, Any]) -> str:
        return str(row["task_id"])


def files_digest(paths: list[Path]) -> str:
    """One sha256 for a benchmark read from several files: of the lines "<name> <sha256 of the file>"."""
    lines = "".join(f"{p.name} {sha256_file(p)}\n" for p in paths)
    return hashlib.sha256(lines.encode()).hexdigest()
