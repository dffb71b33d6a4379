"""Read finished runs from ``results/`` (metrics.json and friends) into per-cell aggregates.

Every number a reporting script prints comes from here, and each aggregate keeps the list of
``metrics.json`` files it was computed from (``sources``), so any table entry can be traced back.

Runs are found by what they recorded, not by where they sit: :class:`RunIndex` walks
``results/<experiment>/`` for ``metrics.json`` files and keys each run by its own ``config.yaml``
(benchmark and method names, the backbone as ``agentic_repro.harness.spec.backbone_dir`` names it, seed), so a change of
the folder layout (``agentic_repro.harness.runner.RunSpec.out_dir``) needs no change here. A folder without ``config.yaml`` (hand-made
fixtures) falls back to ``<benchmark>/<method>/<backbone>[/...]/seed=<s>``.

A cell is *incomplete* when any of its runs has errors (``n_errors > 0``), says ``complete: false``, or
answered fewer problems than it selected: such a cell is reported as ``answered/selected, k errors`` and is
never averaged (an error is not a wrong answer). Old metrics files without ``n_errors`` are read too: the
errors are counted from ``predictions.jsonl`` (``status: error``).
"""
from __future__ import annotations

import json
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentic_repro.harness.results import RunReading, read_jsonl_tolerant, read_run
from agentic_repro.scripts.stats import Interval, interval


@dataclass
class SeedRun:
    seed: int
    dir: Path
    metrics: dict[str, Any]
    _preds: list[dict[str, Any]] | None = field(default=None, repr=False)
    _config: dict[str, Any] | None = field(default=None, repr=False)
    _reading: RunReading | None = field(default=None, repr=False)

    def reading(self) -> RunReading:
        """The run read through its current selection (:func:`agentic_repro.harness.results.read_run`)."""
        if self._reading is None:
            self._reading = read_run(self.dir, self.metrics)
        return self._reading

    @property
    def score_pct(self) -> float | None:
        """Mean (%) over the answered problems of the current selection, from their records (the same set the
        interval and n come from); None when none is answered."""
        s = self.problem_scores()
        return 100.0 * sum(s.values()) / len(s) if s else None

    def predictions(self) -> list[dict[str, Any]]:
        """The latest record of every problem the run's current selection holds (a retried problem's last attempt),
        never records of problems an earlier, larger or other selection ran."""
        if self._preds is None:
            self._preds = list(self.reading().records.values())
        return self._preds

    def sandbox_isolation(self) -> str | None:
        """How the run contained untrusted code (meta.json ``sandbox.isolation``; None for runs before it was
        recorded)."""
        import json

        try:
            meta = json.loads((self.dir / "meta.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        sandbox = (meta.get("sandbox") or {}) if isinstance(meta, dict) else {}
        # the note outlives a resume under bwrap: some answers in the folder were made without isolation
        return "process" if sandbox.get("note") else sandbox.get("isolation")

    def config(self) -> dict[str, Any]:
        if self._config is None:
            import yaml

            p = self.dir / "config.yaml"
            self._config = (yaml.load(p.read_text(encoding="utf-8"), Loader=_yaml_loader()) or {}) \
                if p.exists() else {}
        return self._config

    # ---- completeness (n, n_errors, selected, complete) ---------------------------------
    @property
    def n_errors(self) -> int:
        """Selected problems whose latest record is an error."""
        return sum(1 for p in self.predictions() if p.get("status") == "error")

    @property
    def selected(self) -> int:
        """Problems (records) the current selection holds."""
        return self.reading().selected

    @property
    def n(self) -> int:
        """Answered problems of the current selection (errors excluded)."""
        return sum(1 for p in self.predictions() if p.get("status", "ok") != "error")

    @property
    def complete(self) -> bool:
        """metrics.json says complete and covers the current selection, every selected problem answered."""
        return self.reading().complete

    @property
    def unread(self) -> str | None:
        """Why the run's numbers cannot stand for its current selection (stale metrics, no recorded selection)."""
        r = self.reading()
        return r.legacy or r.stale

    def problem_scores(self) -> dict[str, float]:
        """Answered selected problem id -> score in [0, 1]."""
        return {p["id"]: float(p.get("score") or 0.0) for p in self.predictions() if p.get("status", "ok") != "error"}

    def selection(self) -> frozenset[str]:
        return frozenset(self.reading().ids)

    def per_problem(self, key: str) -> float:
        return float((self.metrics.get("per_problem") or {}).get(key) or 0.0)

    def totals(self, key: str) -> float:
        return float((self.metrics.get("totals") or {}).get(key) or 0.0)

    def calls(self) -> list[dict[str, Any]]:
        return read_jsonl_tolerant(self.dir / "calls.jsonl")

    def by_role(self) -> dict[str, dict[str, float]]:
        """Per-role totals: ``metrics.json`` ``by_role``, else summed from ``calls.jsonl``."""
        if isinstance(self.metrics.get("by_role"), dict) and self.metrics["by_role"]:
            return {str(k): {kk: float(vv or 0) for kk, vv in v.items() if isinstance(vv, (int, float))}
                    for k, v in self.metrics["by_role"].items()}
        out: dict[str, dict[str, float]] = {}
        for c in self.calls():
            r = out.setdefault(str(c.get("role") or "default"),
                               {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0, "cost_usd": 0.0, "flops": 0.0})
            r["calls"] += 1
            r["prompt_tokens"] += c.get("prompt_tokens") or 0
            r["completion_tokens"] += c.get("completion_tokens") or 0
            r["cost_usd"] += c.get("cost_usd") or 0.0
            r["flops"] += c.get("flops") or 0.0
        return out

    def label(self) -> str:
        return f"{self.dir}"


@dataclass
class Agg:
    """One table cell: the runs of one (experiment, benchmark, method, backbone), one per seed.

    The cell is ONE set of (problem, seed) scores: the problems each run's current selection holds (recorded per
    invocation, :func:`agentic_repro.harness.results.read_run`), for every seed. Its mean, interval and n all come
    from that set. Seeds whose selections differ make the cell *mixed*: shown, never averaged (a mean of per-seed
    means over different problems has no interval that contains it)."""

    runs: list[SeedRun] = field(default_factory=list)

    @property
    def scored(self) -> list[SeedRun]:
        """Runs with a number (complete or not); use :attr:`complete` before printing it."""
        return [r for r in self.runs if r.score_pct is not None and r.n > 0]

    @property
    def mixed(self) -> bool:
        """The seeds' selections differ (e.g. seed 42 on 40 problems, seed 123 on 5)."""
        return len({r.selection() for r in self.runs}) > 1

    @property
    def complete(self) -> bool:
        return bool(self.runs) and all(r.complete for r in self.runs) and not self.mixed

    @property
    def incomplete(self) -> bool:
        """Runs exist but one has errors or unanswered problems, stale metrics, or the seeds ran different
        problems: show it, never average it."""
        return bool(self.runs) and not self.complete

    @property
    def mean(self) -> float | None:
        """Mean (%) over the cell's (problem, seed) scores; None unless the cell is complete."""
        if not self.complete:
            return None
        m = self.problem_means()
        return sum(m) / len(m) if m else None

    @property
    def std(self) -> float | None:
        if self.mean is None:
            return None
        s = [r.score_pct for r in self.scored]
        return statistics.stdev(s) if len(s) >= 2 else None  # type: ignore[arg-type]

    @property
    def seeds(self) -> list[int]:
        return [r.seed for r in self.runs]

    @property
    def n_problems(self) -> int:
        """Problems of the cell (each seed's, when complete; else the fewest a seed answered)."""
        return min((r.n for r in self.runs), default=0)

    def n_text(self) -> str:
        """``n=problems`` or ``n=problems×seeds``: the size of the cell's (problem, seed) set."""
        return f"n={self.n_problems}" + (f"×{len(self.seeds)}" if len(self.seeds) > 1 else "")

    @property
    def answered(self) -> int:
        return sum(r.n for r in self.runs)

    @property
    def selected(self) -> int:
        return sum(r.selected for r in self.runs)

    @property
    def n_errors(self) -> int:
        return sum(r.n_errors for r in self.runs)

    def problem_scores(self) -> dict[str, float]:
        """Problem id -> score (%) averaged over the seeds, over the problems every seed answered (all of them
        in a complete cell: the paired tests of the marks read this)."""
        per = [r.problem_scores() for r in self.runs]
        if not per:
            return {}
        common = set(per[0]).intersection(*per[1:]) if len(per) > 1 else set(per[0])
        return {i: 100.0 * sum(p[i] for p in per) / len(per) for i in sorted(common)}

    def problem_means(self) -> list[float]:
        """Per-problem score (in %) averaged over seeds, over the problems every seed answered."""
        return list(self.problem_scores().values())

    def ci(self, level: float = 0.95) -> Interval | None:
        """95% interval of the cell's mean over problems (see :func:`agentic_repro.scripts.stats.interval`)."""
        return interval(self.problem_means(), level) if self.complete else None

    def incomplete_text(self) -> str:
        if self.mixed:
            return "seeds ran different problems (" + ", ".join(f"{r.seed}: {r.selected}" for r in self.runs) + \
                "): not averaged"
        if any(r.reading().legacy for r in self.runs):
            return "unreadable: no recorded selection"
        if any(r.reading().stale for r in self.runs):
            return f"stale {self.answered}/{self.selected}: metrics.json covers another selection"
        e = self.n_errors
        return f"incomplete {self.answered}/{self.selected}" + (f", {e} error{'s' if e != 1 else ''}" if e else "")

    def mean_of(self, fn) -> float | None:
        vals = [fn(r) for r in self.scored]
        return sum(vals) / len(vals) if vals else None

    def sources(self, root: Path) -> list[str]:
        return [_rel(r.dir / "metrics.json", root) for r in self.runs]

    def first_error(self) -> str | None:
        for r in self.runs:
            if r.unread:
                return f"{r.dir}: {r.unread}"
            fe = r.metrics.get("first_error")
            if isinstance(fe, dict) and fe.get("error"):       # {"id", "error", "kind"}
                return f"{fe['error']} (problem {fe.get('id')})"
            if fe:
                return str(fe)
            for p in r.predictions():
                if p.get("status") == "error" and p.get("error"):
                    return str(p["error"])
        return None

    def deviations(self) -> list[str] | None:
        """The method's ``deviations`` as recorded in the runs' ``config.yaml``; None when no run
        recorded the key (runs made before it existed: the caller falls back to the method's yaml)."""
        out: list[str] = []
        seen = False
        for r in self.runs:
            method = r.config().get("method") or {}
            if "deviations" in method:
                seen = True
                for d in method.get("deviations") or []:
                    if str(d) not in out:
                        out.append(str(d))
        return out if seen else None


def _yaml_loader():
    import yaml

    return getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _rel(p: Path, root: Path) -> str:
    try:
        return str(p.relative_to(root))
    except ValueError:
        return str(p)


@dataclass(frozen=True)
class RunKey:
    benchmark: str
    method: str
    backbone: str
    seed: int


class DuplicateRunKey(ValueError):
    """Two folders say they are the same run (benchmark, method, backbone, seed): which one a table reads would
    depend on the order folders sort in, so neither is read."""

    def __init__(self, key: RunKey, first: Path, second: Path) -> None:
        super().__init__(f"two folders hold the run {key.benchmark}/{key.method}/{key.backbone}/seed={key.seed}: "
                         f"{first} and {second}; move the one that is not the current run out of results/ (a kept "
                         "copy belongs outside the experiment's folder)")
        self.key, self.folders = key, (first, second)


class RunIndex:
    """Every run under ``results/<experiment>/``, keyed by what its ``config.yaml`` says it is."""

    def __init__(self, root: Path, experiment: str, runs: dict[RunKey, SeedRun]) -> None:
        self.root, self.experiment, self.runs = Path(root), experiment, runs

    @classmethod
    def scan(cls, root: Path, experiment: str) -> RunIndex:
        base = Path(root) / experiment
        runs: dict[RunKey, SeedRun] = {}
        if base.is_dir():
            for m in sorted(base.rglob("metrics.json")):
                try:
                    metrics = json.loads(m.read_text(encoding="utf-8"))
                except (OSError, json.JSONDecodeError):
                    continue
                key = _key_of(m.parent, base)
                if key is None:
                    continue
                if key[0] in runs:   # a kept copy (seed=42.old) must not replace, or be replaced by, the run
                    raise DuplicateRunKey(key[0], runs[key[0]].dir, m.parent)
                runs[key[0]] = SeedRun(key[0].seed, m.parent, metrics, _config=key[1])
        return cls(Path(root), experiment, runs)

    def agg(self, benchmark: str, method: str, backbone: str, seeds: list[int] | None = None) -> Agg:
        runs = [r for k, r in self.runs.items() if k.benchmark == benchmark and k.method == method
                and k.backbone == backbone and (seeds is None or k.seed in seeds)]
        return Agg(sorted(runs, key=lambda r: r.seed))

    def backbones(self) -> list[str]:
        return sorted({k.backbone for k in self.runs}, key=lambda b: (b.split("@")[0] != "gpt-4o-mini", b))

    def methods(self) -> list[str]:
        return sorted({k.method for k in self.runs})


def backbone_label(backbone_cfg: dict[str, Any]) -> str:
    """The backbone as the results path names it (``agentic_repro.harness.spec.backbone_dir``: ``local``, or
    ``vllm@<model slug>`` for an endpoint that can serve any model), so two models never share a table."""
    try:
        from agentic_repro.harness.spec import backbone_dir
    except ImportError:  # a core without model-named folders
        return str(backbone_cfg["name"])
    return backbone_dir(backbone_cfg)


def _key_of(d: Path, base: Path) -> tuple[RunKey, dict[str, Any]] | None:
    cfg_path = d / "config.yaml"
    if cfg_path.exists():
        import yaml

        try:
            cfg = yaml.load(cfg_path.read_text(encoding="utf-8"), Loader=_yaml_loader()) or {}
            return RunKey(str(cfg["benchmark"]["name"]), str(cfg["method"]["name"]), backbone_label(cfg["backbone"]),
                          int(cfg["seed"])), cfg
        except (KeyError, TypeError, ValueError, yaml.YAMLError):
            pass
    parts = d.relative_to(base).parts
    if len(parts) < 4 or not parts[-1].startswith("seed="):
        return None
    try:
        return RunKey(parts[0], parts[1], parts[2], int(parts[-1].split("=", 1)[1])), {}
    except ValueError:
        return None


def load_runs(root: Path, experiment: str, benchmark: str, method: str, backbone: str,
              seeds: list[int] | None = None) -> Agg:
    """One cell (scans the experiment; build a :class:`RunIndex` once when reading many cells)."""
    return RunIndex.scan(root, experiment).agg(benchmark, method, backbone, seeds)


def backbones_on_disk(root: Path, experiment: str) -> list[str]:
    """Backbone names with at least one metrics.json under results/<experiment>/."""
    return RunIndex.scan(root, experiment).backbones()


def methods_on_disk(root: Path, experiment: str) -> list[str]:
    return RunIndex.scan(root, experiment).methods()


def cost_per_problem(agg: Agg) -> tuple[float | None, str]:
    """($ per problem, "usd") when the backbone has a price, else (tokens per problem, "tokens")."""
    usd = agg.mean_of(lambda r: r.per_problem("cost_usd"))
    if usd:
        return usd, "usd"
    return agg.mean_of(lambda r: r.per_problem("tokens")), "tokens"


def stop_fraction(calls: list[dict[str, Any]]) -> tuple[int, int, int]:
    """(calls that ended with ``stop``, calls with a recorded finish_reason, all answered calls) of a ledger.
    Cached replays count: they are the answers the run scored."""
    answered = [c for c in calls if not c.get("error")]
    known = [c for c in answered if c.get("finish_reason")]
    return sum(1 for c in known if c["finish_reason"] == "stop"), len(known), len(answered)
