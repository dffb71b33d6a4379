"""A benchmark is a loader + a prompt format + a scorer, configured declaratively.

Subclasses implement ``make_problem`` (raw record → :class:`Problem`),
``render`` (what the model reads), ``extract`` (the recorded answer-extraction
filter) and ``score``. Everything else comes from ``configs/benchmark/*.yaml``.
"""
from __future__ import annotations

import dataclasses
import hashlib
import importlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Hashable

from evaluators.data import data_dir, read_jsonl, select, sha256_file
from harness.types import Problem, Score


@dataclass(frozen=True)
class DataInfo:
    file: str
    sha256: str
    total: int
    selected: int
    split: str

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


class Benchmark:
    domain: str = "generic"  # "math" | "code" | "qa"

    def __init__(self, cfg: dict[str, Any]) -> None:
        self.cfg = cfg
        self.name: str = cfg["name"]
        self.version = str(cfg.get("version", "1"))
        self.answer_instruction: str = cfg.get("answer_instruction", "")

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
        problems = [dataclasses.replace(self.make_problem(rows[i], i), index=pos) for pos, i in enumerate(idx)]
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

    # ---- prompting -----------------------------------------------------------------------------
    def render(self, problem: Problem) -> str:
        """The task as the model reads it (question, context, signature...)."""
        raise NotImplementedError

    def prompt(self, problem: Problem, template: str) -> str:
        """Fill a method's template; ``{task}`` and ``{answer_instruction}`` are available."""
        return template.format(task=self.render(problem), answer_instruction=self.answer_instruction)

    # ---- scoring -------------------------------------------------------------------------------
    def extract(self, text: str, problem: Problem) -> tuple[Any, str]:
        """(extracted answer, name of the extraction rule that fired)."""
        raise NotImplementedError

    def answer_key(self, extracted: Any) -> Hashable | None:
        """A canonical form for voting: equal keys mean 'the same answer'."""
        return None if extracted is None else str(extracted).strip()

    async def score(self, text: str, problem: Problem) -> Score:
        raise NotImplementedError

    # ---- tools offered to methods --------------------------------------------------------------
    def public_tests(self, problem: Problem) -> list[str]:
        """Tests a method may run (never the hidden ones the score uses)."""
        return []

    async def run_public_tests(self, text: str, problem: Problem) -> dict[str, Any] | None:
        """Run the public tests on a candidate; ``None`` when the benchmark has none."""
        return None


def build_benchmark(cfg: dict[str, Any]) -> Benchmark:
    """Instantiate the class named by ``cfg['kind']`` (``module.Class``)."""
    module_name, _, cls_name = cfg["kind"].rpartition(".")
    cls = getattr(importlib.import_module(module_name), cls_name)
    return cls(cfg)
