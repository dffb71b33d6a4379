"""Protocol lines: what a table cell's runs recorded (config.yaml, meta.json, calls.jsonl), set against what the
paper states, so a "↳ paper" comparison says how it differs instead of a reader guessing (issue 21).

Every value here is read from a run folder, never typed; the paper's side comes from an experiment yaml. A
difference that changes what the metric *is* (another scorer rule, another problem population) is returned
separately from one that only changes the conditions (backbone, temperature, size), because the first makes a
Δ against the paper meaningless while the second only makes it a different experiment.
"""
from __future__ import annotations

import json
from typing import Any


def num(v: Any) -> str:
    """0.7 -> "0.7", 5.0 -> "5", 4096 -> "4096": settings as a reader types them."""
    try:
        return f"{float(v):g}"
    except (TypeError, ValueError):
        return str(v)


def compare(name: str, ours: list[Any], paper: Any) -> str:
    """One setting: ours (every value the runs recorded) against the paper's: "= paper", "≠ paper X" or
    "(paper: not stated)"."""
    txt = "/".join(num(v) for v in ours) if ours else "not recorded"
    if paper is None:
        return f"{name} {txt} (paper: not stated)"
    want = [num(v) for v in (paper if isinstance(paper, list) else [paper])]
    if ours and sorted({num(v) for v in ours}) == sorted(set(want)):
        return f"{name} {txt} = paper"
    return f"{name} {txt} ≠ paper {'/'.join(want)}"


def run_meta(run: Any) -> dict[str, Any]:
    """A run's meta.json ({} when absent or unreadable: older fixtures have none)."""
    p = run.dir / "meta.json"
    try:
        doc = json.loads(p.read_text(encoding="utf-8")) if p.is_file() else {}
    except (OSError, ValueError):
        return {}
    return doc if isinstance(doc, dict) else {}


def sampling(run: Any) -> dict[str, Any]:
    """The sampling the run's calls got: the root ``sampling`` overlaid by ``backbone.sampling`` (as the runner
    merges them, harness/runner.py)."""
    cfg = run.config()
    return {**(cfg.get("sampling") or {}), **((cfg.get("backbone") or {}).get("sampling") or {})}


def temperatures(runs: list[Any]) -> list[float]:
    """Every temperature an answered call used (calls.jsonl), else the configured one."""
    got = {float(c["temperature"]) for r in runs for c in r.calls()
           if not c.get("error") and c.get("temperature") is not None}
    if not got:
        got = {float(s["temperature"]) for s in map(sampling, runs) if s.get("temperature") is not None}
    return sorted(got)


def models(runs: list[Any]) -> list[str]:
    """The backbone models the runs' answered calls named (calls.jsonl), else config.yaml's backbone.model."""
    got = {str(c["model"]) for r in runs for c in r.calls() if not c.get("error") and c.get("model")}
    if not got:
        got = {str((r.config().get("backbone") or {}).get("model") or (r.config().get("backbone") or {}).get("name"))
               for r in runs if r.config().get("backbone")}
    return sorted(got)


def samples(run: Any) -> bool:
    """Whether the run's method draws n > 1 samples of one prompt: its config.yaml states ``method.sampling``
    (the methods that sample record their n_mode), or an answered call has a sample index above 0 (calls.jsonl)."""
    if ((run.config().get("method") or {}).get("sampling") or {}).get("n_mode"):
        return True
    return any(int(c.get("sample_index") or 0) > 0 for c in run.calls() if not c.get("error"))


def n_modes(runs: list[Any]) -> str | None:
    """How the runs' n samples of one prompt reached the provider (config.yaml's ``method.sampling.n_mode``,
    harness/n_mode.py): ``n_mode separate`` (n requests, the bill's prompt n times) or ``request`` (one request with
    n choices); a run recorded before the option existed sent one request, and says so. None where no run samples
    (n = 1: the choice does not arise)."""
    sampled = [r for r in runs if samples(r)]
    if not sampled:
        return None
    got = sorted({str(((r.config().get("method") or {}).get("sampling") or {}).get("n_mode")
                       or "request (not recorded)") for r in sampled})
    return f"n_mode {'/'.join(got)}"


def split_of(run: Any) -> tuple[str, int, int | None]:
    """(split name, problems selected, problems in the split) from meta.json, config.yaml as the fallback."""
    data = run_meta(run).get("data") or {}
    bc = run.config().get("benchmark") or {}
    split = str(data.get("split") or bc.get("split") or "not recorded")
    total = data.get("total")
    return split, int(data.get("selected") or run.selected), None if total is None else int(total)


def judge_of(run: Any) -> str | None:
    """The judge model that scored the run's answers, when one did (a prediction with a ``judge`` record)."""
    if not any(isinstance(p.get("judge"), dict) for p in run.predictions()):
        return None
    jr = (run.config().get("roles") or {}).get("judge") or {}
    return str(jr.get("model") or jr.get("name") or "unnamed")
