"""The frozen result of a workflow search, and the test-time method that runs it.

A search (:mod:`agentic_repro.baselines.autoflow.search`) ends by writing one versioned JSON artifact: the found
workflow as a method config (``workflow: {solver, params}``, runnable by the harness like any method),
its validate score and per-round history, the optimiser's and executor's identities, and the search
cost per role. The test-time method (:class:`ArtifactMethod`, ``configs/method/aflow.yaml``
``params.artifact``) loads it and runs that workflow on the test split; the run's own ledger is the
inference cost, the artifact's ``search_cost`` the training cost (DyFlow Table 8 layout).
"""
from __future__ import annotations

import asyncio
import hashlib
import json
from pathlib import Path
from typing import Any

from agentic_repro.harness.method import Method, build_method
from agentic_repro.harness.results import read_json, write_json_atomic
from agentic_repro.harness.types import Solution
from agentic_repro.harness.view import ProblemView
from agentic_repro.harness.context import ProblemContext

ARTIFACT_FORMAT = "agentic-repro/workflow-artifact"
ARTIFACT_VERSION = 2  # bump when a key's meaning changes; loaders refuse other versions
# 2: search_cost counts fresh calls only (replays of a resumed search under search_cost.replayed)
REQUIRED = ("method", "benchmark", "split", "workflow", "validate_score", "history", "roles", "search_cost")


class ArtifactError(ValueError):
    """An artifact is missing, of another format/version, altered, or for another benchmark."""


def content_sha256(doc: dict[str, Any]) -> str:
    """Hash of the artifact's content (every key but ``sha256``), canonical JSON."""
    body = {k: v for k, v in doc.items() if k != "sha256"}
    return hashlib.sha256(json.dumps(body, sort_keys=True, ensure_ascii=False, default=str).encode()).hexdigest()


def write_artifact(path: Path, doc: dict[str, Any]) -> dict[str, Any]:
    """Write ``doc`` (plus format, version, sha256) atomically; returns what was written."""
    missing = [k for k in REQUIRED if k not in doc]
    if missing:
        raise ArtifactError(f"artifact lacks {missing}")
    wf = doc["workflow"]
    if not (isinstance(wf, dict) and isinstance(wf.get("solver"), str)):
        raise ArtifactError("artifact workflow must be a method config {solver: 'module:attr', params: {...}}")
    full = {"format": ARTIFACT_FORMAT, "version": ARTIFACT_VERSION, **doc}
    full["sha256"] = content_sha256(full)
    if path.exists():  # a re-run of a finished search keeps the artifact (and its sha256) the test runs name
        try:
            old = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            old = None
        if isinstance(old, dict) and _stable(old) == _stable(full) and old.get("sha256") == content_sha256(old):
            return old
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(path, full)
    return full


VOLATILE = ("sha256", "created", "search_wall_s")


def _stable(doc: dict[str, Any]) -> str:
    return json.dumps({k: v for k, v in doc.items() if k not in VOLATILE}, sort_keys=True, default=str)


def load_artifact(path: str | Path) -> dict[str, Any]:
    p = Path(path)
    if not p.exists():
        raise ArtifactError(f"no workflow artifact at {p}: run the search first, e.g. "
                            "`python -m agentic_repro.baselines.autoflow.search method=aflow benchmark=<b>` (it prints the path)")
    doc = read_json(p, what="workflow artifact", fix="re-run the search (python -m agentic_repro.baselines.autoflow.search "
                    "... restart=true), or restore the file")
    if not isinstance(doc, dict) or doc.get("format") != ARTIFACT_FORMAT:
        raise ArtifactError(f"{p} is not a workflow artifact (format "
                            f"{doc.get('format') if isinstance(doc, dict) else type(doc).__name__!r})")
    if doc.get("version") != ARTIFACT_VERSION:
        raise ArtifactError(f"{p} has artifact version {doc.get('version')}, this code reads {ARTIFACT_VERSION}: "
                            "re-run the search")
    if doc.get("sha256") != content_sha256(doc):
        raise ArtifactError(f"{p}: content does not match its sha256 (edited by hand?); re-run the search")
    return doc


#: keys of a method's ``search:`` block that say how to treat an artifact, not how the search ran
POLICY_KEYS = ("stale_artifact",)


def search_config_diff(recorded: Any, wanted: Any, prefix: str = "") -> list[str]:
    """Where an artifact's recorded ``search_config`` and a run's ``method.search`` differ, one
    ``key: artifact value != run value`` per leaf (dotted keys; :data:`POLICY_KEYS` ignored)."""
    if isinstance(recorded, dict) and isinstance(wanted, dict):
        out: list[str] = []
        for k in sorted(set(recorded) | set(wanted), key=str):
            if not prefix and k in POLICY_KEYS:
                continue
            out += search_config_diff(recorded.get(k), wanted.get(k), f"{prefix}{k}.")
        return out
    if recorded == wanted:
        return []
    return [f"{prefix.rstrip('.')}: {json.dumps(recorded, default=str)} (artifact) != "
            f"{json.dumps(wanted, default=str)} (this run)"]


def setting_note(doc: dict[str, Any], configured: dict[str, Any] | None) -> str | None:
    """The footnote of a searched row, from the artifact's own record: the search settings it ran at where
    they differ from the method's configured (paper) search; None when it ran at the configured one."""
    ran = (doc.get("search_config") or {}).get("params") or {}
    conf = (configured or {}).get("params") or {}
    diffs = [f"{k}={json.dumps(ran.get(k), default=str)} (configured {json.dumps(conf.get(k), default=str)})"
             for k in sorted(set(ran) | set(conf)) if ran.get(k) != conf.get(k)]
    if not diffs:
        return None
    return (f"searched on {doc.get('benchmark')}'s {doc.get('split')} split at a reduced setting (its artifact's "
            f"search_config): {', '.join(diffs)}")


def protocol_notes(doc: dict[str, Any], configured: dict[str, Any] | None) -> list[str]:
    """Every footnote a searched row takes from one artifact: its reduced setting (:func:`setting_note`) and what
    its search could not do as the paper did (``extra.not_as_paper``, written by the optimiser that ran: JudgeFlow's
    reconstruction, GPTSwarm's unoptimised node prompts), each prefixed so a reader sees it is not the paper's."""
    out = [n for n in [setting_note(doc, configured)] if n]
    for text in (doc.get("extra") or {}).get("not_as_paper") or []:
        out.append(f"{doc.get('method')}'s search is not the paper's: {text}")
    return out


class ArtifactMethod:
    """Runs the workflow a search froze. ``artifact`` may contain ``{benchmark}`` (filled with the run's
    benchmark name), so one method config serves every benchmark of a table.

    ``allow_transfer: false`` refuses an artifact searched on another benchmark (AFlow's transfer
    experiments set it true explicitly). A problem the search was scored on (``validate_ids``) is refused
    (an error, not a score): testing on searched problems would be a leak (HotpotQA ships no test file, so
    its default split is the validate one); ``allow_searched_problems: true`` lifts it, the trace says so."""

    def __init__(self, artifact: str, allow_transfer: bool = False, allow_searched_problems: bool = False,
                 name: str | None = None) -> None:
        if not artifact:
            raise ArtifactError("method.params.artifact is not set: give the artifact.json a search wrote")
        self.name = name or ""
        self.artifact = str(artifact)
        self.allow_transfer = bool(allow_transfer)
        self.allow_searched = bool(allow_searched_problems)
        self._loaded: dict[str, tuple[dict[str, Any], Method, str, frozenset[str]]] = {}
        self._lock = asyncio.Lock()

    def path_for(self, benchmark: str) -> Path:
        return Path(self.artifact.replace("{benchmark}", benchmark))

    async def _method(self, benchmark: str) -> tuple[dict[str, Any], Method, str, frozenset[str]]:
        async with self._lock:
            if benchmark not in self._loaded:
                path = self.path_for(benchmark)
                doc = load_artifact(path)
                if doc["benchmark"] != benchmark and not self.allow_transfer:
                    raise ArtifactError(f"{path} was searched on {doc['benchmark']}, this run is on {benchmark} "
                                        "(set method.params.allow_transfer=true to run it anyway)")
                wf = doc["workflow"]
                inner = build_method({"name": self.name or doc["method"], "solver": wf["solver"],
                                      "params": dict(wf.get("params") or {})})
                self._loaded[benchmark] = (doc, inner, str(path), frozenset(doc.get("validate_ids") or ()))
            return self._loaded[benchmark]

    async def preflight(self, run_ctx: Any) -> None:
        """Load (and check) the run's artifact before any problem: a missing or foreign artifact stops the
        run with one line instead of failing every problem."""
        await self._method(run_ctx.benchmark.name)

    async def solve(self, problem: ProblemView, ctx: ProblemContext) -> Solution:
        doc, inner, path, searched = await self._method(ctx.benchmark.name)
        leak = problem.id in searched and doc["benchmark"] == ctx.benchmark.name
        if leak and not self.allow_searched:
            raise ArtifactError(f"problem {problem.id} was in the search's {doc['split']} split: scoring the "
                                "frozen workflow on it would be a leak; run the test split (benchmark.split=test) "
                                "or set method.params.allow_searched_problems=true (recorded)")
        sol = await inner.solve(problem, ctx)
        trace = dict(sol.trace)
        trace["artifact"] = {"path": path, "sha256": doc["sha256"], "version": doc["version"],
                             "method": doc["method"], "searched_on": doc["benchmark"],
                             "validate_score": doc["validate_score"], "searched_problem": leak}
        return Solution(answer=sol.answer, confidence=sol.confidence, trace=trace)
