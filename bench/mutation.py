"""Mutation score of the guard modules (cosmic-ray): are the tests able to fail where the guards live?

    nice -n 19 .venv/bin/python bench/mutation.py [--only lock,cache] [--out bench/results/mutation.json]

Not CI (CPU-heavy: one pytest run per mutant). cosmic-ray mutates files in place, so every target runs in a
throw-away copy of the working tree (tracked and untracked-not-ignored files) under a temporary folder: the
shared tree is never touched. Each target names the module, optionally the functions whose lines are mutated
(``Class.method`` or ``function``; the line-filter keeps the rest), and the tests that guard it. A mutant is
*killed* when those tests fail (or time out), *survived* when they pass. Prints a table and the survivors
(file:line, operator, occurrence) and writes them as JSON. Mutants inside type annotations are equivalent
(never evaluated) and counted apart. Needs ``pip install -e '.[mutation]'``.
"""
from __future__ import annotations

import argparse
import ast
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Target:
    name: str
    module: str
    tests: tuple[str, ...]
    functions: tuple[str, ...] = ()  # empty: the whole module


TARGETS = (
    Target("lock", "harness/lock.py", ("tests/test_run_lock.py",)),
    Target("cache", "harness/cache.py", ("tests/test_cache.py", "tests/test_core_guards.py")),
    Target("ledger", "harness/ledger.py", ("tests/test_core_guards.py", "tests/test_runner.py", "tests/test_cache.py")),
    Target("identity", "harness/identity.py", ("tests/test_reliability.py", "tests/test_core_guards.py",
                                               "tests/test_roles.py")),
    Target("validate", "harness/validate.py", ("tests/test_reliability.py", "tests/test_core_guards.py")),
    Target("retry", "harness/backbone.py", ("tests/test_retry_policy.py",), ("RetryPolicy.delay",)),
    Target("resume", "harness/runner.py", ("tests/test_runner.py", "tests/test_core_guards.py"),
           ("Runner._run", "Runner._tasks")),
    Target("results", "harness/results.py", ("tests/test_runner.py", "tests/test_core_guards.py"),
           ("read_jsonl_tolerant", "latest_by_id", "ResultWriter.finished", "ResultWriter._repair", "ledger_gaps")),
)


def function_lines(path: Path, names: tuple[str, ...]) -> list[str]:
    """``start-end`` line ranges of the named functions (``Class.method`` or ``function``)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: dict[str, str] = {}
    for node in tree.body:
        scopes = [(node.name + ".", n) for n in node.body] if isinstance(node, ast.ClassDef) else [("", node)]
        for prefix, fn in scopes:
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) and prefix + fn.name in names:
                found[prefix + fn.name] = f"{fn.lineno}-{fn.end_lineno}"
    missing = set(names) - set(found)
    if missing:
        raise SystemExit(f"{path}: no function(s) {sorted(missing)} (edit TARGETS in bench/mutation.py)")
    return [found[n] for n in names]


def annotation_spans(path: Path) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    """(start, end) positions of every type annotation: with ``from __future__ import annotations`` they are
    strings never evaluated, so a mutant inside one is equivalent (left out of the score, counted apart)."""
    spans = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        anns = []
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            a = node.args
            anns = [x.annotation for x in (*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg) if x] + [node.returns]
        elif isinstance(node, ast.AnnAssign):
            anns = [node.annotation]
        for ann in anns:
            if ann is not None:
                spans.append(((ann.lineno, ann.col_offset), (ann.end_lineno, ann.end_col_offset)))
    return spans


def copy_tree(dest: Path) -> None:
    """The working tree's tracked and untracked-not-ignored files (what a checkout would have), plus data/."""
    out = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                         capture_output=True, check=True).stdout.decode()
    for rel in filter(None, out.split("\0")):
        src = ROOT / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)
    if (ROOT / "data").exists():
        os.symlink(ROOT / "data", dest / "data")


def run_target(t: Target, work: Path, timeout_s: float) -> dict:
    copy_tree(work)
    py = sys.executable
    test_cmd = f"{py} -m pytest -x -q -p no:cacheprovider -m 'not slow' {' '.join(t.tests)}"
    lines = function_lines(work / t.module, t.functions) if t.functions else None
    cfg = ["[cosmic-ray]", f'module-path = "{t.module}"', f"timeout = {timeout_s}", "excluded-modules = []",
           f"test-command = {json.dumps(test_cmd)}", "", "[cosmic-ray.distributor]", 'name = "local"']
    if lines:
        cfg += ["", "[cosmic-ray.filters.line-filter]", f"lines = {{ {json.dumps(t.module)} = {json.dumps(lines)} }}"]
    (work / "cr.toml").write_text("\n".join(cfg) + "\n")
    bin_dir = Path(py).parent
    env = {**os.environ, "PYTHONPATH": str(work), "CI": ""}

    def cr(*args: str) -> str:
        return subprocess.run([str(bin_dir / args[0]), *args[1:]], cwd=work, env=env, capture_output=True,
                              text=True, check=True).stdout

    cr("cosmic-ray", "init", "cr.toml", "session.sqlite")
    if lines:
        cr("cr-filter-lines", "--config", "cr.toml", "session.sqlite")
    base = subprocess.run(test_cmd, shell=True, cwd=work, env=env, capture_output=True, text=True)
    if base.returncode != 0:
        return {"target": t.name, "error": "the tests fail without any mutation", "output": base.stdout[-2000:]}
    started = time.time()
    cr("cosmic-ray", "exec", "cr.toml", "session.sqlite")
    killed, survived, skipped, equivalent, survivors = 0, 0, 0, 0, []
    spans = annotation_spans(work / t.module)
    for line in cr("cosmic-ray", "dump", "session.sqlite").splitlines():
        item, result = json.loads(line)
        if not result or result.get("worker_outcome") == "skipped":
            skipped += 1
            continue
        mut = item["mutations"][0]
        if any(a <= tuple(mut["start_pos"]) < b for a, b in spans):
            equivalent += 1  # inside a type annotation: never evaluated (from __future__ import annotations)
            continue
        if result.get("test_outcome") == "survived":
            survived += 1
            survivors.append(f"{mut['module_path']}:{mut['start_pos'][0]} {mut['operator_name']} "
                             f"#{mut['occurrence']}")
        else:
            killed += 1
    total = killed + survived
    return {"target": t.name, "module": t.module, "functions": list(t.functions), "tests": list(t.tests),
            "mutants": total, "killed": killed, "survived": survived, "skipped": skipped,
            "equivalent_annotations": equivalent,
            "score": round(killed / total, 4) if total else None, "survivors": survivors,
            "wall_s": round(time.time() - started, 1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", default="", help="comma-separated target names (default: all): "
                    + ", ".join(t.name for t in TARGETS))
    ap.add_argument("--timeout", type=float, default=180.0, help="seconds per mutant's test run (killed beyond)")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "mutation.json"))
    args = ap.parse_args()
    chosen = [t for t in TARGETS if not args.only or t.name in args.only.split(",")]
    results = []
    for t in chosen:
        with tempfile.TemporaryDirectory(prefix=f"mutation-{t.name}-") as d:
            res = run_target(t, Path(d), args.timeout)
        results.append(res)
        print(json.dumps({k: v for k, v in res.items() if k != "survivors"}), flush=True)
        for s in res.get("survivors", []):
            print("  survived:", s, flush=True)
        killed = sum(r.get("killed", 0) for r in results)
        total = sum(r.get("mutants", 0) for r in results)
        summary = {"killed": killed, "mutants": total, "score": round(killed / total, 4) if total else None,
                   "targets": results}
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(summary, indent=2))  # after each target: a stopped run keeps them
    print(f"\nmutation score: {killed}/{total} killed ({100 * killed / max(1, total):.1f}%)")


if __name__ == "__main__":
    main()
