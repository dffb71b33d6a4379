"""What the viewer shows, read from run folders: runs, their problems, each problem's calls and trace.

Read-only by construction: files are opened for reading only and the response cache through SQLite's
``mode=ro`` URI, so browsing a results tree can never change it (the tests checksum the tree). Nothing is
guessed: a value a run did not record is ``None`` (shown as "—"), an unreadable file is named in ``notes``
of the run, never skipped in silence.
"""
from __future__ import annotations

import hashlib
import json
import math
import re
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from agentic_repro.harness.results import latest_by_id, read_jsonl_tolerant

#: the files that make a folder a run folder (results/README.md)
RUN_MARKERS = ("predictions.jsonl", "metrics.json")
REPO = Path(__file__).resolve().parents[1]


def slug(text: str) -> str:
    """A file-name-safe id that stays readable and cannot collide (a short hash of the original)."""
    safe = re.sub(r"[^A-Za-z0-9._=-]+", "_", text).strip("_")[:80]
    return f"{safe}-{hashlib.sha1(text.encode('utf-8')).hexdigest()[:8]}"


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None


def _read_yaml(path: Path) -> Any:
    try:
        return yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None


@dataclass
class Run:
    """One run folder: ``<experiment>/<benchmark>/<method>/<backbone>/seed=<s>/``, named from its config."""

    path: Path
    rel: str
    config: dict[str, Any]
    metrics: dict[str, Any] | None
    meta: dict[str, Any] | None
    notes: list[str] = field(default_factory=list)   # files that could not be read, said on the page
    _reading: Reading | None = field(default=None, repr=False, compare=False)

    @property
    def id(self) -> str:
        return slug(self.rel)

    def _part(self, i: int) -> str | None:
        parts = Path(self.rel).parts
        return parts[i] if len(parts) >= -i else None

    @property
    def experiment(self) -> str | None:
        return self.config.get("experiment") or self._part(-5)

    @property
    def method(self) -> str | None:
        return (self.config.get("method") or {}).get("name") or self._part(-3)

    @property
    def benchmark(self) -> str | None:
        return (self.config.get("benchmark") or {}).get("name") or self._part(-4)

    @property
    def split(self) -> str | None:
        return (self.config.get("benchmark") or {}).get("split")

    @property
    def backbone(self) -> str | None:
        return (self.config.get("backbone") or {}).get("name") or self._part(-2)

    @property
    def seed(self) -> Any:
        s = self.config.get("seed")
        if s is None and (part := self._part(-1)) and part.startswith("seed="):
            s = part[5:]
        return s

    @property
    def roles(self) -> dict[str, str]:
        """Roles served by a backbone of their own (or an adapter): ``{role: backbone[+adapter]}``."""
        out = {}
        for name, r in (self.config.get("roles") or {}).items():
            if not isinstance(r, dict):
                continue
            label = r.get("name") or ""
            if r.get("adapter"):
                label = f"{label or self.backbone}+{r['adapter']}"
            if label:
                out[name] = label
        return out

    @property
    def status(self) -> str:
        """``complete`` | ``errors`` (some problems errored) | ``incomplete`` | ``running/stale`` (an invocation
        started after metrics.json was written has not finished: running, or killed) | ``no metrics``."""
        return self.reading().status

    def reading(self) -> Reading:
        """What the run's numbers cover (:func:`reading_of`), read once."""
        if self._reading is None:
            self._reading = reading_of(self)
        return self._reading

    def summary(self) -> dict[str, Any]:
        m = self.metrics or {}
        totals = m.get("totals") or {}
        r = self.reading()
        return {"id": self.id, "rel": self.rel, "experiment": self.experiment, "benchmark": self.benchmark,
                "split": self.split, "method": self.method, "backbone": self.backbone, "seed": self.seed,
                "roles": self.roles, "score_pct": r.score_pct, "interval": r.interval,
                "metric": m.get("metric"), "n": r.n, "selected": r.selected, "n_errors": r.n_errors,
                "cost_usd": totals.get("cost_usd") if r.from_metrics else None,
                "calls": totals.get("calls") if r.from_metrics else None,
                "status": r.status, "source": r.source, "covers": r.note, "graded": r.graded,
                "judge": r.judge}


@dataclass
class Reading:
    """The numbers the viewer shows for a run and exactly what they cover.

    ``from_metrics``: the numbers are metrics.json's (written by the run's latest invocation) over ``ids``;
    else (``running/stale``, ``no metrics``) they are the viewer's own count over the problems listed. ``ids``:
    the problems the numbers cover, in the order they were first written (None: metrics.json does not say which,
    so no interval is shown). ``note``: one line saying what is covered when it is not simply every problem
    listed."""

    status: str
    source: str
    from_metrics: bool
    ids: list[str] | None
    score_pct: float | None
    interval: list[float] | None
    n: int | None
    selected: int | None
    n_errors: int | None
    note: str | None
    graded: bool             # some answered score lies strictly between 0 and 1 (F1, RACE): no right/wrong
    judge: dict[str, Any]    # judge replies asked again (``reasks``, ``rejected`` by why); old RACE answers
                             # scored without a reference (``scored_without_reference``)


def _finite(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and math.isfinite(v) else None


def invocation_finished(run: Run) -> bool:
    """Whether the run's latest invocation ended (meta.json's ``ended``, written right after metrics.json). An
    invocation writes meta.json without ``ended`` when it starts, so a running or killed one leaves it unset and
    a metrics.json in the folder is an earlier invocation's. A folder without meta.json: nothing says otherwise."""
    meta = run.meta
    if not isinstance(meta, dict) or "started" not in meta:
        return True
    ended, started = meta.get("ended"), meta.get("started")
    return isinstance(ended, (int, float)) and (not isinstance(started, (int, float)) or ended >= started)


def stale_reason(run: Run, selection: Any) -> str | None:
    """Why metrics.json does not describe the run's current selection, or None: an invocation started after it and has
    not ended (running, or killed, even at the same selection), or ``selection.stale`` (harness.results.read_run: the
    current selection, meta.json's ids, is not the one metrics.json covers; or no metrics.json yet)."""
    if not invocation_finished(run):
        return "running or killed (meta.json: started, not ended)"
    return selection.stale if run.metrics is not None else None


def _scores(problems: list[dict[str, Any]]) -> list[float]:
    return [float(p["score"]) for p in problems
            if p.get("status") == "ok" and isinstance(p.get("score"), (int, float)) and math.isfinite(p["score"])]


def judge_counts(problems: list[dict[str, Any]]) -> dict[str, Any]:
    """Judge replies asked again over ``problems`` (by why) and the answers scored from a RACE reply that did not
    score the reference (recorded before RACE 4: the release's reference 0)."""
    rejected: dict[str, int] = {}
    no_reference = 0
    for p in problems:
        j = p.get("judge")
        if not isinstance(j, dict):
            continue
        for why in j.get("rejected") or []:
            rejected[why] = rejected.get(why, 0) + 1
        race = j.get("race") or {}
        if p.get("status") == "ok" and (race.get("missing_reference") or race.get("reference_zeroed")):
            no_reference += 1
    return {"reasks": sum(rejected.values()), "rejected": dict(sorted(rejected.items())),
            "scored_without_reference": no_reference}


def reading_of(run: Run) -> Reading:
    """The run's numbers and what they cover (issue 29 item 5: never metrics.json's score beside an interval or a
    problem list of other predictions, never ``complete`` over a run that is still going or was killed). The
    selection is the tables' own: :func:`agentic_repro.harness.results.read_run` (meta.json's ids, written when an
    invocation starts; metrics.json's for older folders).

    - metrics.json describes the current selection: its score, n and status, over those ids; an interval only over
      them (none for an old folder that cannot tell which records its numbers cover); another selection's records
      in predictions.jsonl are listed apart;
    - it does not (:func:`stale_reason`: running, killed, re-run): ``running/stale``, with the viewer's own count
      over the current selection's records, never metrics.json's numbers;
    - no metrics.json and no invocation under way: ``no metrics``, no score."""
    from agentic_repro.harness.results import CorruptFile, read_run
    from agentic_repro.scripts.stats import interval

    def ci(values: list[float]) -> list[float] | None:
        iv = interval([100.0 * v for v in values])
        return None if iv is None else [round(iv.low, 1), round(iv.high, 1)]

    latest = problems_of(run)
    graded = any(0.0 < s < 1.0 for s in _scores(list(latest.values())))
    m = run.metrics
    try:
        selection = read_run(run.path, metrics=m if m is not None else {})
    except CorruptFile as exc:     # a damaged meta.json: named on the page, the numbers not claimed
        run.notes.append(str(exc))
        return Reading("no metrics", "none", False, None, None, None, None, None, None, str(exc), graded,
                       judge_counts([]))
    stale = stale_reason(run, selection)
    if m is not None and stale is None:
        ids = None if selection.legacy else selection.ids
        note = None
        if selection.legacy:
            note = f"{selection.legacy}: metrics.json's numbers are shown without an interval"
        elif set(ids) != set(latest):
            note = (f"metrics.json covers {len(ids)} problems (this selection); predictions.jsonl holds "
                    f"{len(latest)}: the others are another selection's, listed apart")
        covered = list(selection.records.values()) if ids is not None else list(latest.values())
        status = "errors" if m.get("n_errors") else "complete" if m.get("complete") else "incomplete"
        return Reading(status, "metrics.json", True, ids, _finite(m.get("score_pct")),
                       ci(_scores(covered)) if ids is not None else None, m.get("n"), m.get("selected"),
                       m.get("n_errors"), note, graded, judge_counts(covered))
    if stale is None:  # no metrics.json and no invocation under way (no meta.json, or its metrics.json was removed)
        return Reading("no metrics", "none", False, None, None, None, None, None, None, None, graded,
                       judge_counts(list(latest.values())))
    # running, killed or re-run: the viewer's own count over the current selection, never metrics.json's numbers
    legacy = selection.legacy is not None
    ids = list(latest) if legacy else selection.ids
    problems = list(latest.values()) if legacy else list(selection.records.values())
    values = _scores(problems)
    note = (f"{stale}: the viewer's own count over the {len(problems)} problems of this selection in "
            f"predictions.jsonl, of {len(ids) if not legacy else '?'} selected"
            + ("; metrics.json is an earlier invocation's, not shown" if m is not None else ""))
    return Reading("running/stale", "predictions.jsonl (own count)", False, ids,
                   100.0 * sum(values) / len(values) if values else None, ci(values), len(values),
                   None if legacy else len(ids), sum(1 for p in problems if p.get("status") == "error"), note,
                   graded, judge_counts(problems))


def find_runs(root: Path) -> list[Run]:
    """Every run folder under ``root`` (``root`` itself may be one), sorted by path."""
    root = Path(root)
    folders = {p.parent for marker in RUN_MARKERS for p in root.rglob(marker)}
    return [load_run(f, root) for f in sorted(folders)]


def load_run(folder: Path, root: Path) -> Run:
    notes = []
    def safe(reader, name):
        try:
            return reader(folder / name)
        except (ValueError, yaml.YAMLError, UnicodeDecodeError, OSError) as exc:
            notes.append(f"{name} could not be read: {type(exc).__name__}: {exc}")
            return None
    rel = folder.relative_to(root).as_posix() if folder != root else folder.name
    return Run(folder, rel, safe(_read_yaml, "config.yaml") or {}, safe(_read_json, "metrics.json"),
               safe(_read_json, "meta.json"), notes)


def problems_of(run: Run) -> dict[str, dict[str, Any]]:
    """The latest attempt of each problem, in the order the problems were first written."""
    return latest_by_id(read_jsonl_tolerant(run.path / "predictions.jsonl"))


def _true_flag(trace: Any, names: tuple[str, ...]) -> bool:
    """A truthy ``names`` key in the trace, its ``counts``, or one of its ``rounds`` (AUQ's research rounds)."""
    if not isinstance(trace, dict):
        return False
    for k in names:
        if trace.get(k):
            return True
    counts = trace.get("counts")
    if isinstance(counts, dict) and any(counts.get(k) for k in names):
        return True
    rounds = trace.get("rounds")
    return isinstance(rounds, list) and any(isinstance(r, dict) and any(r.get(k) for k in names) for r in rounds)


#: trace keys that mark an answer the method did not reach by its own route (DynaGraph, DyFlow, autoflow, the
#: research agents' plan that fell back to the task text)
FALLBACK_KEYS = ("fallback", "fallbacks", "fallback_plan", "fallback_plans", "fallback_answers", "fallback_patches",
                 "fell_back")


def problem_rows(run: Run, calls: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """One row per problem: score, status, cost, calls and the flags the run page filters on."""
    calls = read_jsonl_tolerant(run.path / "calls.jsonl") if calls is None else calls
    cut: set[tuple[str, str]] = {(c.get("problem_id"), c.get("attempt")) for c in calls
                                 if c.get("finish_reason") == "length"}
    reading = run.reading()
    covered = None if reading.ids is None else set(reading.ids)
    rows = []
    for pid, p in problems_of(run).items():
        trace = p.get("trace")
        is_cut = (pid, p.get("attempt")) in cut or (isinstance(trace, dict) and trace.get("finish_reason") == "length")
        score = p.get("score")
        scored = p.get("status") == "ok" and isinstance(score, (int, float))
        judge = p.get("judge") if isinstance(p.get("judge"), dict) else {}
        race = judge.get("race") or {}
        rows.append({
            "id": pid, "page": slug(pid) + ".html", "status": p.get("status"), "score": score,
            # right / wrong only where scores are 0 or 1; a graded score (F1, RACE) is higher or lower, not wrong
            "right": scored and not reading.graded and score >= 1.0,
            "wrong": scored and not reading.graded and score < 1.0,
            "below": scored and score < 1.0,
            "error": p.get("error"), "extracted": p.get("extracted"), "gold": p.get("gold"),
            "cost_usd": p.get("cost_usd"), "calls": p.get("calls"), "fallback": _true_flag(trace, FALLBACK_KEYS),
            "cut": bool(is_cut), "confidence": p.get("confidence"),
            "reasks": len(judge.get("rejected") or []), "rejected": judge_counts([p])["rejected"],
            "no_reference": bool(p.get("status") == "ok"
                                 and (race.get("missing_reference") or race.get("reference_zeroed"))),
            "covered": covered is None or pid in covered})
    return rows


class ReplyStore:
    """Prompts and replies from the response cache, opened read-only; ``error`` says why one is not there."""

    def __init__(self, path: Path | None) -> None:
        self.path, self.error, self._db = path, None, None
        if path is None:
            self.error = "no response cache recorded in config.yaml"
            return
        if not path.exists():
            self.error = f"response cache {path} not found (pass --cache PATH)"
            return
        try:
            self._db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, check_same_thread=False)
        except sqlite3.Error as exc:
            self.error = f"response cache {path} cannot be opened read-only: {exc}"

    def get(self, key: str | None) -> dict[str, Any] | None:
        if self._db is None or not key:
            return None
        try:
            row = self._db.execute("SELECT value FROM responses WHERE key=?", (key,)).fetchone()
        except sqlite3.Error as exc:
            self.error = f"response cache {self.path}: {exc}"
            return None
        return json.loads(row[0]) if row else None

    def close(self) -> None:
        if self._db is not None:
            self._db.close()


def cache_path(run: Run, override: Path | None = None) -> Path | None:
    """The run's response cache: ``override``, else config.yaml's ``cache.path`` (a relative path is tried
    against the working directory and the checkout, where ``agentic_repro.harness.run`` is started)."""
    if override is not None:
        return Path(override)
    p = (run.config.get("cache") or {}).get("path")
    if not p:
        return None
    p = Path(p)
    if p.is_absolute():
        return p
    for base in (Path.cwd(), REPO):
        if (base / p).exists():
            return base / p
    return p


def problem_calls(run: Run, problem: dict[str, Any], calls: list[dict[str, Any]], requests: dict[str, str],
                  store: ReplyStore) -> list[dict[str, Any]]:
    """The ledger lines of the problem's latest attempt, in time order, each with its prompt and reply."""
    mine = [c for c in calls if c.get("problem_id") == problem.get("id") and c.get("attempt") == problem.get("attempt")]
    out = []
    for i, c in enumerate(sorted(mine, key=lambda c: c.get("time") or 0.0)):
        key = c.get("key") or requests.get(c.get("request") or "")
        hit = store.get(key)
        comp = (hit or {}).get("completion") or {}
        out.append({**c, "n": i + 1, "key": key, "messages": (hit or {}).get("messages"), "prompt_from": "cache",
                    "reply": comp.get("text") if hit else None, "found": hit is not None})
    trace = problem.get("trace")
    if len(out) == 1 and out[0]["messages"] is None and isinstance(trace, dict) and trace.get("messages"):
        # a single-call method (IO, CoT) records its prompt in the trace: a run cached before prompts were
        # stored with replies still shows it, labelled as coming from the trace
        out[0].update(messages=trace["messages"], prompt_from="trace")
    return out


def stage_groups(calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Consecutive calls of one stage and role, in call order: the problem's stages and roles as they ran."""
    groups: list[dict[str, Any]] = []
    for c in calls:
        if groups and groups[-1]["stage"] == c.get("stage") and groups[-1]["role"] == c.get("role"):
            groups[-1]["calls"] += 1
        else:
            groups.append({"stage": c.get("stage"), "role": c.get("role"), "calls": 1})
    return groups


def request_keys(run: Run) -> dict[str, str]:
    """``requests.jsonl``: request id -> cache key (how runs made before ledger lines had keys are joined)."""
    return {r["request"]: r["key"] for r in read_jsonl_tolerant(run.path / "requests.jsonl")
            if r.get("request") and r.get("key")}


def by_problem(rows: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Ledger or trajectory lines grouped by problem id, read once for all the problem pages of a run."""
    out: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        out.setdefault(r.get("problem_id"), []).append(r)
    return out


def trajectory(run: Run, problem: dict[str, Any], events: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """An environment problem's episode events (``trajectories.jsonl``) of its latest attempt."""
    events = read_jsonl_tolerant(run.path / "trajectories.jsonl") if events is None else events
    pid, attempt = problem.get("id"), problem.get("attempt")
    return [t for t in events if t.get("problem_id") == pid and t.get("attempt") == attempt]


def artifact_of(run: Run) -> dict[str, Any] | None:
    """A searched method's workflow artifact (``method.params.artifact``), with its search history."""
    path = ((run.config.get("method") or {}).get("params") or {}).get("artifact")
    if not isinstance(path, str):
        return None
    p = Path(path.replace("{benchmark}", str(run.benchmark)))
    candidates = [p] if p.is_absolute() else [Path.cwd() / p, REPO / p]
    for c in candidates:
        if c.exists():
            try:
                return {"path": str(c), **json.loads(c.read_text(encoding="utf-8"))}
            except (ValueError, OSError) as exc:
                return {"path": str(c), "error": f"{type(exc).__name__}: {exc}"}
    return {"path": str(p), "error": "artifact not found"}


def history_table(history: Any) -> dict[str, Any]:
    """A search history (one dict per round, keys by optimiser) as columns: the keys with a scalar value in
    some round, in first-seen order; what is nested stays per round as JSON."""
    rows = [h for h in history or [] if isinstance(h, dict)]
    cols: list[str] = []
    for h in rows:
        for k, v in h.items():
            if k not in cols and (v is None or isinstance(v, (str, int, float, bool))):
                cols.append(k)
    nested = [{k: v for k, v in h.items() if k not in cols} for h in rows]
    return {"columns": cols, "rows": rows, "nested": nested}


@dataclass
class Search:
    """A workflow search folder (``results/search/<benchmark>/<method>/<backbone>/seed=<s>/``: artifact.json)."""

    path: Path
    rel: str
    artifact: dict[str, Any]

    @property
    def id(self) -> str:
        return slug("search/" + self.rel)

    def summary(self) -> dict[str, Any]:
        a = self.artifact
        parts = Path(self.rel).parts
        total = ((a.get("search_cost") or {}).get("total") or {}) if isinstance(a.get("search_cost"), dict) else {}
        return {"id": self.id, "rel": self.rel, "method": a.get("method"), "benchmark": a.get("benchmark"),
                "split": a.get("split"), "backbone": parts[-2] if len(parts) >= 2 else None, "seed": a.get("seed"),
                "validate_score": a.get("validate_score"), "rounds": len(a.get("history") or []),
                "cost_usd": total.get("cost_usd"), "calls": total.get("calls"), "error": a.get("error")}


def find_searches(root: Path) -> list[Search]:
    """Every search folder under ``root``: its artifact (a damaged one is listed with the error)."""
    root = Path(root)
    out = []
    for art in sorted(root.rglob("artifact.json")):
        folder = art.parent
        try:
            doc = json.loads(art.read_text(encoding="utf-8"))
        except (ValueError, OSError) as exc:
            doc = {"error": f"{type(exc).__name__}: {exc}"}
        rel = folder.relative_to(root).as_posix() if folder != root else folder.name
        out.append(Search(folder, rel, {"path": str(art), **(doc if isinstance(doc, dict) else {})}))
    return out
