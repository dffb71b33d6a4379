"""Locating and reading benchmark data files from the configurable data directory."""
from __future__ import annotations

import json
import os
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentic_repro.harness.hashing import sha256_file  # noqa: F401 - re-exported for the loaders

DATA_ENV = "AGENTIC_REPRO_DATA"


class DataMissingError(FileNotFoundError):
    """A benchmark file is not in the data directory."""


class DataRowError(ValueError):
    """A data row lacks a field its benchmark reads: one line naming the benchmark, the file, the row and the field."""


def problem_from_row(make: Callable[[dict[str, Any], int], Any], row: dict[str, Any], arg: int, *, benchmark: str,
                     source: object, position: int) -> Any:
    """``make(row, arg)`` (a benchmark's ``make_problem``); a row missing a field it reads raises
    :class:`DataRowError` naming the benchmark, the file(s) ``source``, the row (``position``: 0-based among the
    rows read, and its id when it has one) and the field, instead of a bare ``KeyError: 'answer'``."""
    try:
        return make(row, arg)
    except KeyError as exc:
        name = exc.args[0] if exc.args else "?"
        ident = next((f", {k} {row[k]!r}" for k in ("id", "_id", "task_id", "question_id") if k in row), "")
        raise DataRowError(
            f"benchmark {benchmark}: row {position} (0-based{ident}) of {source} has no field {name!r} that the "
            f"benchmark reads (the row's fields: {', '.join(map(str, row)) or 'none'}); the file is not in this "
            "benchmark's format: re-run `make data`, or fix that row") from exc


def data_dir(override: str | Path | None = None) -> Path:
    """``override`` > $AGENTIC_REPRO_DATA > ``data/`` (relative to the working directory)."""
    return Path(override or os.environ.get(DATA_ENV) or "data").expanduser().resolve()


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        raise DataMissingError(
            f"benchmark data file {path} is missing: run `make data` (copies it from ../shared/datasets "
            f"or downloads it), or point ${DATA_ENV} at a folder that has it")
    rows = []
    with open(path, encoding="utf-8") as fh:
        for line_no, line in enumerate(fh, 1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as exc:
                    raise ValueError(f"{path}:{line_no}: not valid JSON ({exc}); re-run `make data`") from exc
    return rows


def select(rows: list[Any], *, limit: int | None, sample: int | None, sample_seed: int) -> list[int]:
    """Indices of the rows to run: a seeded random ``sample`` (kept in file order), then ``limit``."""
    idx = list(range(len(rows)))
    if sample is not None and sample < len(idx):
        idx = sorted(random.Random(sample_seed).sample(idx, sample))
    if limit is not None:
        idx = idx[: int(limit)]
    return idx
