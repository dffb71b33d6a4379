"""The run folder: append-only predictions and ledger, metrics, config and metadata.

``calls.jsonl`` gets one line per backbone request the moment it returns or fails (the bill, even for
problems that later error or are killed); ``requests.jsonl`` one line per request when it is sent (so a
resume can tell how many were in flight when a run was killed); ``predictions.jsonl`` one line per problem
when it completes. An interrupted run loses nothing finished and a re-run resumes by id.

Errors are not wrong answers: a problem whose method raised is ``status: error``, left out of the headline
score, counted in ``n_errors`` and retried by the next run; a run with any error is ``complete: false``.
So is a run whose ledger does not cover its answers (``ledger_gap``: ``calls.jsonl`` missing or torn): the
next run re-runs those problems, replaying their calls from the cache, until the bill covers every answer.
"""
from __future__ import annotations

import json
import math
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentic_repro.harness.ledger import CallLog, CallRecord, CallSummary, LedgerFile


class ResultsWriteError(OSError):
    """The results folder cannot be written (read-only, full, gone): one line naming the path and errno."""

    def __init__(self, path: Path, exc: OSError) -> None:
        super().__init__(exc.errno, exc.strerror or str(exc), str(path))
        self.path = path

    def __str__(self) -> str:
        return (f"cannot write {self.path}: [Errno {self.errno}] {self.strerror}; finished problems already on "
                "disk are kept: free space or fix permissions (or pick another results_root=...) and re-run")


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
    @property
    def identity(self) -> Path: return self.root / "identity.json"
    @property
    def requests(self) -> Path: return self.root / "requests.jsonl"


class CorruptFile(ValueError):
    """A JSON file the harness wrote cannot be parsed: one line naming it and the fix."""


def read_json(path: str | os.PathLike[str], *, what: str, fix: str | None = None, default: Any = None) -> Any:
    """``path``'s JSON, ``default`` when it does not exist; a damaged file raises :class:`CorruptFile`
    naming the file, what it is and ``fix`` (default: delete or restore it) instead of ``Expecting value``."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        return default
    except UnicodeDecodeError as exc:
        text, err = None, exc
    if text is not None:
        try:
            return json.loads(text)
        except ValueError as exc:
            err = exc
    detail = "it is empty" if text is not None and not text.strip() else f"{type(err).__name__}: {err}"
    raise CorruptFile(f"{p} ({what}) is damaged, not JSON ({detail}); fix: "
                      f"{fix or 'restore it from a copy, or delete it and re-run'}")


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
        try:
            paths.root.mkdir(parents=True, exist_ok=True)
            self._repair(paths.predictions)
            self._repair(paths.calls)
            self._repair(paths.requests)
        except OSError as exc:
            raise ResultsWriteError(Path(exc.filename or paths.root), exc) from exc
        self.ledger = LedgerFile(paths.calls, fsync=fsync)
        self.journal = LedgerFile(paths.requests)

    def call_log(self, attempt: str) -> CallLog:
        """The list a problem attempt's calls go into: each is written to ``calls.jsonl`` as it is added."""
        return CallLog(self.ledger, attempt, journal=self.journal)

    def close(self) -> None:
        self.ledger.close()
        self.journal.close()

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
        """Problems with a final record whose calls are all on the bill; errored ones are retried on resume,
        and so are answers whose ledger lines are missing (their calls replay from the cache, so the bill
        covers every answer again)."""
        done = {k: v for k, v in latest_by_id(read_jsonl_tolerant(self.paths.predictions)).items()
                if v.get("status") != "error"}
        gaps = {p["id"] for p in ledger_gaps(list(done.values()), read_jsonl_tolerant(self.paths.calls))}
        return {k: v for k, v in done.items() if k not in gaps}

    def append(self, prediction: dict[str, Any], calls: list[CallRecord]) -> None:
        """Write one problem's calls (tagged with its attempt id) unless a :class:`CallLog` wrote them as they
        happened, then its prediction."""
        if isinstance(calls, CallLog):
            if calls.attempt != prediction["attempt"]:
                raise ValueError(f"prediction attempt {prediction['attempt']} != its calls' {calls.attempt}")
        elif calls:
            with open(self.paths.calls, "a", encoding="utf-8") as fh:
                fh.writelines(json.dumps({**c.to_dict(), "attempt": prediction["attempt"]}, ensure_ascii=False) + "\n"
                              for c in calls)
                fh.flush()
                if self.fsync:
                    os.fsync(fh.fileno())
        try:
            with open(self.paths.predictions, "a", encoding="utf-8") as fh:
                fh.write(json.dumps(prediction, ensure_ascii=False, default=str) + "\n")
                fh.flush()
                if self.fsync:
                    os.fsync(fh.fileno())
        except OSError as exc:  # a write error carries no filename: name it here
            raise ResultsWriteError(self.paths.predictions, exc) from exc

    def write_json(self, path: Path, obj: Any) -> None:
        """Atomic write (temporary file, then rename); on failure no ``.tmp`` is left behind."""
        write_json_atomic(path, obj)


def write_json_atomic(path: Path, obj: Any) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    text = json.dumps(obj, indent=2, ensure_ascii=False, default=str)
    try:
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except OSError as exc:
        try:
            tmp.unlink()
        except OSError:
            pass
        raise ResultsWriteError(path, exc) from exc


def ledger_gaps(answered: list[dict[str, Any]], calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Answered predictions with fewer ``calls.jsonl`` lines (by attempt) than the calls they record: a missing
    or torn ledger. Such an answer's cost is unknown, so a run holding one is not complete."""
    per_attempt: dict[Any, int] = {}
    for c in calls:
        per_attempt[c.get("attempt")] = per_attempt.get(c.get("attempt"), 0) + 1
    return [p for p in answered if per_attempt.get(p.get("attempt"), 0) < int(p.get("calls") or 0)]


def pending_exception() -> BaseException | None:
    """The exception propagating through the caller's ``finally`` (so a later write error does not mask it)."""
    return sys.exc_info()[1]


def compute_metrics(predictions: list[dict[str, Any]], calls: list[dict[str, Any]], metric: str,
                    selected: int | None = None) -> dict[str, Any]:
    """Headline over answered problems, errors counted apart, cost totals and per-role/per-stage aggregates,
    from the run's own files.

    ``totals``/``by_role``/``by_stage`` cover the final attempt of each answered problem (what the reported
    answers cost); ``bill`` covers every line of ``calls.jsonl`` (errored and interrupted attempts too).
    """
    preds = sorted(latest_by_id(predictions).values(), key=lambda p: (p.get("index") is None, p.get("index") or 0))
    answered = [p for p in preds if p.get("status") != "error"]
    errored = [p for p in preds if p.get("status") == "error"]
    scores = [float(p["score"]) for p in answered]
    n = len(scores)
    mean = sum(scores) / n if n else float("nan")
    var = sum((s - mean) ** 2 for s in scores) / (n - 1) if n > 1 else 0.0
    kept = {p["attempt"] for p in answered}
    # calls of an errored-then-retried attempt stay in the ledger; totals count final answered attempts only
    final_calls = [c for c in calls if c.get("attempt") in kept]
    s = CallSummary.of(final_calls)
    bill = CallSummary.of(calls)
    selected = len(preds) if selected is None else selected
    first_error = None
    if errored:
        e = errored[0]
        kinds = [c.get("error_kind") for c in calls if c.get("attempt") == e.get("attempt") and c.get("error")]
        first_error = {"id": e["id"], "error": e.get("error"), "kind": kinds[0] if kinds else None}
    gaps = ledger_gaps(answered, calls)
    ledger_gap = None
    if gaps:
        g = gaps[0]
        ledger_gap = {"n": len(gaps), "first": g["id"], "calls": int(g.get("calls") or 0),
                      "on_ledger": sum(1 for c in calls if c.get("attempt") == g.get("attempt"))}
    totals = s.to_dict()
    by_role, by_stage = totals.pop("by_role"), totals.pop("by_stage")
    totals["by_stage"] = by_stage  # kept where existing readers look for it
    bill_d = bill.to_dict()
    return {
        "metric": metric,
        "score": mean,
        "score_pct": 100 * mean if n else float("nan"),
        "n": n,
        "n_errors": len(errored),
        "selected": selected,
        "complete": not errored and n == selected and not gaps,
        "first_error": first_error,
        "ledger_gap": ledger_gap,  # answers whose calls are missing from calls.jsonl (None: the bill covers all)
        "stderr": math.sqrt(var / n) if n > 1 else 0.0,
        "n_empty": sum(1 for p in answered if not (p.get("raw_output") or "").strip()),
        "totals": totals,
        "by_role": by_role,
        "by_stage": by_stage,
        "bill": {k: bill_d[k] for k in ("calls", "backbone_calls", "errors", "prompt_tokens", "completion_tokens",
                                         "cost_usd", "billed_usd")},
        "per_problem": {
            "cost_usd": s.cost_usd / n if n else 0.0,
            "calls": s.calls / n if n else 0.0,
            "tokens": (s.prompt_tokens + s.completion_tokens) / n if n else 0.0,
        },
    }


def resume_report(calls: list[dict[str, Any]], requests: list[dict[str, Any]], predictions: list[dict[str, Any]],
                  started: float) -> dict[str, Any]:
    """What earlier interrupted invocations cost this one.

    ``interrupted_problems``: the problems this invocation worked on that an earlier stop left with an unfinished
    attempt (not the problems a run at another ``limit`` finished, whose records ``predictions`` may leave out,
    nor one an earlier invocation resumed already).

    ``lost_in_flight``: requests sent before this invocation that never got a ledger line (in flight at a
    kill); ``rebought``: of this invocation's requests, those re-sending one sent before it (what the kill cost:
    the lost ones, and the rare reply whose ledger line was written but whose cache entry was not, since the
    ledger line comes first so that no paid call is missing from the bill);
    ``replayed_from_cache``: calls of problems interrupted earlier that this invocation took from the cache
    (paid once, not again)."""
    recorded = {c.get("request") for c in calls if c.get("request") and c.get("error_kind") != "cancelled"}
    lost_keys = {r.get("key") for r in requests if r.get("time", 0) < started and r.get("request") not in recorded}
    sent_before = {r.get("key") for r in requests if r.get("time", 0) < started}
    now_sent = [r for r in requests if r.get("time", 0) >= started]
    finished_attempts = {p.get("attempt") for p in predictions}
    interrupted = {c.get("attempt") for c in calls if c.get("time", 0) < started} - finished_attempts
    interrupted_problems = {c.get("problem_id") for c in calls if c.get("attempt") in interrupted}
    interrupted_problems |= {r.get("problem_id") for r in requests
                             if r.get("time", 0) < started and r.get("key") in lost_keys}
    interrupted_problems &= {c.get("problem_id") for c in calls if c.get("time", 0) >= started}
    now = [c for c in calls if c.get("time", 0) >= started and c.get("problem_id") in interrupted_problems]
    return {"interrupted_problems": len(interrupted_problems - {None}),
            "lost_in_flight": len(lost_keys),
            "rebought": sum(1 for r in now_sent if r.get("key") in sent_before),
            "replayed_from_cache": sum(1 for c in now if c.get("cache_hit"))}


def sample_seed(run_seed: int, sample: int) -> int:
    """The run seed of sample ``sample`` of a ``samples_per_task`` run: sample 0 keeps the run seed (so it
    replays a plain run from the cache); the others get distinct, reproducible seeds."""
    if sample == 0:
        return run_seed
    return (run_seed * 1_000_003 + sample * 104_729) % (2 ** 31 - 1)


def pass_at_k(answered: list[dict[str, Any]], k: int, threshold: float) -> dict[str, Any]:
    """Unbiased pass@j for j = 1..k (Chen et al. 2021: 1 - C(n-c, j) / C(n, j) per problem, averaged).

    ``answered``: the answered sample records (``problem_id``, ``score``); a sample is correct when its
    score >= ``threshold``. A problem enters pass@j only with n >= j answered samples (errored samples
    are retried, never counted as wrong); ``pass_at_k_problems`` says how many problems each value covers."""
    by_problem: dict[str, list[bool]] = {}
    for r in answered:
        by_problem.setdefault(str(r.get("problem_id", r["id"])), []).append(float(r["score"]) >= threshold)
    values: dict[str, float | None] = {}
    counts: dict[str, int] = {}
    for j in range(1, k + 1):
        per = []
        for outcomes in by_problem.values():
            n, c = len(outcomes), sum(outcomes)
            if n >= j:
                per.append(1.0 - (math.comb(n - c, j) / math.comb(n, j)))
        values[str(j)] = sum(per) / len(per) if per else None
        counts[str(j)] = len(per)
    return {"pass_at_k": values, "pass_at_k_problems": counts}


# ---- reading a run: exactly the problems its current selection holds ---------------------------------------

@dataclass
class RunReading:
    """A run folder read through its current selection (``meta.json`` ``ids``, written when an invocation starts):
    the latest record of each selected id, never "the first k records" of ``predictions.jsonl`` (a re-run with
    another ``sample`` holds records of problems it no longer selects). Every table cell and the viewer read a run
    through this one object, so a number and the problems it claims are the same set."""

    ids: list[str]
    records: dict[str, dict[str, Any]]
    metrics: dict[str, Any]
    stale: str | None = None      # why metrics.json does not describe the current selection
    legacy: str | None = None     # why the selection cannot be told (an old folder): nothing is read from it
    unrecorded: int = 0           # an old folder's selected problems with neither a recorded id nor a record

    @property
    def scores(self) -> dict[str, float]:
        """Answered selected id -> score in [0, 1]."""
        return {k: float(r.get("score") or 0.0) for k, r in self.records.items() if r.get("status") != "error"}

    @property
    def errors(self) -> list[str]:
        return [k for k, r in self.records.items() if r.get("status") == "error"]

    @property
    def missing(self) -> list[str]:
        return [k for k in self.ids if k not in self.records]

    @property
    def n(self) -> int:
        return len(self.scores)

    @property
    def selected(self) -> int:
        return len(self.ids) + self.unrecorded

    @property
    def mean_pct(self) -> float | None:
        s = self.scores
        return 100.0 * sum(s.values()) / len(s) if s else None

    @property
    def complete(self) -> bool:
        """Metrics say complete and cover this selection; every selected problem answered, none an error."""
        return (self.stale is None and self.legacy is None and bool(self.metrics.get("complete"))
                and self.selected > 0 and not self.errors and not self.missing and not self.unrecorded)


def read_run(run_dir: str | os.PathLike[str], metrics: dict[str, Any] | None = None) -> RunReading:
    """The run in ``run_dir`` read through its current selection (see :class:`RunReading`).

    The selection is ``meta.json`` ``ids`` (this invocation's); a folder written before it was recorded falls back
    to ``metrics.json`` ``ids``, then to every record when their count is what metrics.json selected; otherwise
    (``legacy``) it cannot tell which records the numbers cover and reads nothing. ``stale``: the metrics cover
    another selection than the current one (an invocation running, killed, or a re-run at another size)."""
    paths = RunPaths(Path(run_dir))
    if metrics is None:   # the caller's copy when it has read it already (one reading of the file)
        metrics = read_json(paths.metrics, what="the run's metrics", default=None) or {}
    meta = read_json(paths.meta, what="the run's metadata", default=None)
    meta = meta if isinstance(meta, dict) else {}
    latest = latest_by_id(read_jsonl_tolerant(paths.predictions))
    covered = metrics.get("ids")
    ids = meta.get("ids")
    stale = legacy = None
    unrecorded = 0
    if ids is None:
        ids = covered
    if ids is None:   # an old folder: neither file recorded the selection
        sel = metrics.get("selected")
        if sel is not None and len(latest) > int(sel):
            legacy = (f"{paths.predictions} holds {len(latest)} problems and metrics.json selected {sel}, and the run "
                      "recorded no selection (made before selections were recorded): re-run it to record one")
            ids = []
        else:
            ids = sorted(latest, key=lambda k: (latest[k].get("index") is None, latest[k].get("index") or 0))
            unrecorded = max(0, int(sel or 0) - len(ids))
    ids = [str(k) for k in ids]
    if not metrics:
        stale = "no metrics.json yet (an invocation is running or was killed)"
    elif covered is None and meta.get("ids") is not None or covered is not None and [str(k) for k in covered] != ids:
        stale = (f"metrics.json covers {'an earlier' if covered is None else 'another'} selection than the current "
                 f"invocation's {len(ids)} problems (an invocation is running, was killed, or the folder was re-run "
                 "at another size)")
    return RunReading(ids, {k: latest[k] for k in ids if k in latest}, metrics, stale, legacy, unrecorded)
