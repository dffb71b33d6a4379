"""The viewer's site: static HTML pages written from run folders.

One code path for both uses: ``agentic-repro view`` writes the site into a temporary folder and serves it on
127.0.0.1, ``--export DIR`` writes the same pages into DIR (relative links only, data as ``<script>`` files,
not fetched JSON, so the copy opens from ``file://`` in any browser without the harness).
"""
from __future__ import annotations

import json
import math
import shutil
import sys
from pathlib import Path
from typing import Any

from jinja2 import Environment, PackageLoader, select_autoescape

from agentic_repro.viewer import data, methods

STATIC = Path(__file__).with_name("static")


class ExportError(ValueError):
    """The export folder is unsafe: inside a results tree (the viewer never writes there) or not ours."""


def environment() -> Environment:
    env = Environment(loader=PackageLoader(__package__, "templates"), autoescape=select_autoescape(["html"]),
                      trim_blocks=True, lstrip_blocks=True)
    env.filters["money"] = lambda v: "—" if v is None else f"${v:.4f}" if v < 1 else f"${v:.2f}"
    env.filters["num"] = lambda v, d=1: ("—" if v is None or (isinstance(v, float) and not math.isfinite(v))
                                         else f"{v:.{d}f}" if isinstance(v, float) else str(v))
    env.filters["pretty"] = lambda v: json.dumps(v, indent=1, ensure_ascii=False, default=str)
    env.filters["compact"] = lambda v: json.dumps(v, ensure_ascii=False, default=str, separators=(", ", ": "))
    env.filters["dash"] = lambda v: "—" if v is None or v == "" else v
    return env


def _js(var: str, key: str, value: Any) -> str:
    blob = json.dumps(value, ensure_ascii=False, default=str).replace("</", "<\\/")
    return f"window.{var} = window.{var} || {{}};\nwindow.{var}[{json.dumps(key)}] = {blob};\n"


def check_target(out: Path, roots: list[Path]) -> None:
    out = out.resolve()
    for r in roots:
        r = r.resolve()
        if out == r or r in out.parents or out in r.parents:
            raise ExportError(f"--export {out} overlaps the results tree {r}: the viewer never writes under "
                              "results/; pick a folder outside it")
    if out.exists() and any(out.iterdir()) and not (out / "viewer.json").exists():
        raise ExportError(f"--export {out} is a non-empty folder the viewer did not write; pick an empty one")


def build(roots: list[Path], out: Path, *, cache: Path | None = None, quiet: bool = False) -> dict[str, Any]:
    """Write the site for every run under ``roots`` into ``out``; returns what was written (counts)."""
    check_target(out, roots)
    env = environment()
    runs: list[data.Run] = []
    for root in roots:
        runs.extend(data.find_runs(root))
    out.mkdir(parents=True, exist_ok=True)
    for old in ("runs", "searches"):
        if (out / old).exists():
            shutil.rmtree(out / old)
    shutil.copytree(STATIC, out / "static", dirs_exist_ok=True)
    searches = [s for root in roots for s in data.find_searches(root)]
    summaries = []
    pages = 0
    for i, run in enumerate(runs):
        if not quiet:
            print(f"\r[viewer] {i + 1}/{len(runs)} runs: {run.rel}"[:100].ljust(100), end="", file=sys.stderr)
        summaries.append(run.summary())
        pages += _write_run(env, run, out / "runs" / run.id, cache)
    if not quiet and runs:
        print(file=sys.stderr)
    (out / "searches").mkdir(exist_ok=True)
    for s in searches:
        evals = [r for r, run in zip(summaries, runs) if s.path in run.path.parents]
        (out / "searches" / f"{s.id}.html").write_text(env.get_template("search.html").render(
            search=s.summary(), artifact=s.artifact, history=data.history_table(s.artifact.get("history")),
            evals=evals, root=".."), encoding="utf-8")
    (out / "index.html").write_text(env.get_template("index.html").render(
        runs=summaries, searches=[s.summary() for s in searches], roots=[str(r) for r in roots], root="."),
        encoding="utf-8")
    (out / "runs.js").write_text(_js("VIEWER_INDEX", "runs", summaries), encoding="utf-8")
    (out / "compare.html").write_text(env.get_template("compare.html").render(runs=summaries, root="."),
                                      encoding="utf-8")
    info = {"runs": len(runs), "searches": len(searches), "problem_pages": pages, "roots": [str(r) for r in roots]}
    (out / "viewer.json").write_text(json.dumps(info), encoding="utf-8")
    return info


def _write_run(env: Environment, run: data.Run, folder: Path, cache: Path | None) -> int:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "p").mkdir(exist_ok=True)
    calls = data.read_jsonl_tolerant(run.path / "calls.jsonl")
    rows = data.problem_rows(run, calls)
    summary = run.summary()
    store = data.ReplyStore(data.cache_path(run, cache))
    requests = data.request_keys(run)
    problems = data.problems_of(run)
    calls_of = data.by_problem(calls)
    events_of = data.by_problem(data.read_jsonl_tolerant(run.path / "trajectories.jsonl"))
    try:
        for row in rows:
            p = problems[row["id"]]
            mine = calls_of.get(p.get("id"), [])
            pcalls = data.problem_calls(run, p, mine, requests, store)
            events = data.trajectory(run, p, events_of.get(p.get("id"), []))
            other = sum(1 for c in mine if c.get("attempt") != p.get("attempt"))
            (folder / "p" / row["page"]).write_text(env.get_template("problem.html").render(
                run=summary, p=p, row=row, calls=pcalls, groups=data.stage_groups(pcalls), events=events,
                other_attempt_calls=other,
                views=methods.views(p.get("trace"), events), cache_error=store.error, root="../../.."),
                encoding="utf-8")
    finally:
        store.close()
    artifact = data.artifact_of(run)
    (folder / "index.html").write_text(env.get_template("run.html").render(
        run=summary, rows=rows, config=run.config, meta=run.meta, metrics=run.metrics or {}, notes=run.notes,
        artifact=artifact, history=data.history_table((artifact or {}).get("history")), root="../.."),
        encoding="utf-8")
    # the comparison reads the problems the run's numbers cover (another selection's records are not its result)
    covered = [r for r in rows if r["covered"]]
    (folder / "problems.js").write_text(_js("VIEWER_RUNS", run.id, {"run": summary, "rows": covered}), encoding="utf-8")
    return len(rows)
