"""Plan and execute many runs in one process (so the embedded server starts once), skipping finished ones.

A run is "finished" when its ``metrics.json`` says ``complete`` and its predictions cover every selected
problem: such a run is not even opened (no backbone, no server). Anything else goes through
:func:`agentic_repro.harness.runner.run_spec`, which itself resumes problem by problem.
"""
from __future__ import annotations

import functools

import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from collections.abc import Callable

import yaml

from agentic_repro.harness.compose import compose

REPO = Path(__file__).resolve().parents[1]
CONFIGS = REPO / "configs"
EXPERIMENTS = Path(__file__).resolve().parent / "experiments"


def load_experiment(name: str) -> dict[str, Any]:
    path = EXPERIMENTS / f"{name}.yaml"
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def benchmark_overrides(proto: dict[str, Any], benchmark: str) -> list[str]:
    """A size protocol's Hydra overrides for one benchmark: ``overrides_by_benchmark`` plus the per-benchmark
    ``max_tokens`` set it names (``max_tokens: <set>`` -> ``max_tokens.<set>`` in table1.yaml, chosen from
    measured answer lengths so that answers are not cut; shared by Table 1, the ablation and the sweeps)."""
    out = list((proto.get("overrides_by_benchmark") or {}).get(benchmark, []))
    if proto.get("max_tokens"):
        sets = load_experiment("table1").get("max_tokens") or {}
        name = proto["max_tokens"]
        if name not in sets:
            raise SystemExit(f"max_tokens set {name!r} is not in scripts/experiments/table1.yaml max_tokens "
                             f"(have: {sorted(k for k in sets if k != 'measured')})")
        if benchmark in sets[name]:
            out.append(f"backbone.sampling.max_tokens={int(sets[name][benchmark])}")
    return out


def method_config(name: str) -> dict[str, Any] | None:
    """``configs/method/<name>.yaml`` if it exists (the test for "this method is implemented")."""
    path = CONFIGS / "method" / f"{name}.yaml"
    return yaml.safe_load(path.read_text(encoding="utf-8")) if path.exists() else None


def method_folder(name: str) -> str:
    """The result-folder name of method config ``name`` (its resolved ``method.name``). A table is rendered after
    every finished run, each row asking this: the answer is kept per config file's text, so a render composes
    nothing new (a compose is ~1 s; 22 rows x 69 runs took ~25 min of the main job's CPU)."""
    path = CONFIGS / "method" / f"{name}.yaml"
    return _method_folder(name, path.read_text(encoding="utf-8") if path.exists() else None)


@functools.cache
def _method_folder(name: str, text: str | None) -> str:
    try:
        return str(compose([f"method={name}"])["method"]["name"])
    except Exception:  # noqa: BLE001 - a config that does not compose still has a row
        return name


def root_defaults_have(group: str) -> bool:
    doc = yaml.safe_load((CONFIGS / "config.yaml").read_text(encoding="utf-8"))
    for d in doc.get("defaults", []):
        if isinstance(d, dict) and group in d:
            return True
    return False


def logger_override(logger: str | None) -> list[str]:
    """``logger=wandb`` if the root config has a logger group default, else ``+logger=wandb``."""
    if not logger or logger == "none":
        return []
    return [f"logger={logger}" if root_defaults_have("logger") else f"+logger={logger}"]


def parse_args(argv: list[str], known: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """``key=value`` arguments: keys in ``known`` are options of the script, the rest are Hydra overrides."""
    opts = dict(known)
    hydra_overrides: list[str] = []
    for arg in argv:
        if arg in ("-h", "--help"):
            raise SystemExit(None)
        key, sep, value = arg.partition("=")
        if not sep:
            raise SystemExit(f"argument {arg!r} is not key=value")
        key = key.lstrip("-")
        if key in known:
            opts[key] = value
        else:
            hydra_overrides.append(arg)
    return opts, hydra_overrides


def csv_list(value: Any) -> list[str] | None:
    if value is None or value == "" or value == "all":
        return None
    if isinstance(value, (list, tuple)):
        return [str(v) for v in value]
    return [v.strip() for v in str(value).split(",") if v.strip()]


# ---- completeness -------------------------------------------------------------------------------------------

def run_state(spec) -> str:
    """'done' (nothing to do), 'partial' (resume) or 'new'. Raises IdentityMismatch if the folder holds another
    configuration: the runner's own identity check (harness.identity.check_folder_config, on identity.json's
    configuration hash), so a launcher never calls another configuration's complete run "done"."""
    from agentic_repro.evaluators.base import build_benchmark
    from agentic_repro.harness.identity import check_folder_config
    from agentic_repro.harness.results import RunPaths, latest_by_id, read_jsonl_tolerant

    paths = RunPaths(spec.out_dir)
    if spec.full_config.get("restart"):
        return "new"  # the runner discards the folder's results first
    check_folder_config(paths, spec.full_config)
    if not paths.metrics.exists():
        return "partial" if paths.predictions.exists() else "new"
    metrics = json.loads(paths.metrics.read_text(encoding="utf-8"))
    problems, data_info = build_benchmark(spec.benchmark_cfg).load()
    check_folder_config(paths, spec.full_config, data=data_info.to_dict())  # answers made from this data file
    done = {k for k, v in latest_by_id(read_jsonl_tolerant(paths.predictions)).items() if v.get("status") != "error"}
    if metrics.get("complete") and {p.id for p in problems} <= done and metrics.get("selected") == len(problems):
        return "done"
    return "partial"


# ---- execution ----------------------------------------------------------------------------------------------

@dataclass
class Planned:
    label: str
    overrides: list[str]
    spec: Any = None
    state: str = ""
    error: str | None = None
    metrics: dict[str, Any] | None = None
    wall_s: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)


def plan(items: list[Planned], base_overrides: list[str]) -> list[Planned]:
    from agentic_repro.harness.runner import spec_from_config

    for it in items:
        try:
            it.spec = spec_from_config(compose([*base_overrides, *it.overrides]))
            it.state = run_state(it.spec)
        except Exception as exc:  # noqa: BLE001 - a bad item is reported, the others still run
            it.state, it.error = "invalid", f"{type(exc).__name__}: {exc}"
    return items


def execute(items: list[Planned], *, log: Callable[[str], None] = print,
            on_done: Callable[[Planned], None] | None = None, keep_going: bool = True) -> list[Planned]:
    """Run every planned item that is not done, one after another, in this process, sharing one server pool
    (the embedded llama.cpp server starts once for all runs and stops at the end)."""
    from agentic_repro.harness.embedded.server import ServerPool

    with ServerPool() as pool:
        return _execute(items, pool, log, on_done, keep_going)


def announce_plan(items: list[Planned], log: Callable[[str], None], side_by_side: int | None = None) -> list[Planned]:
    """Log what a plan holds (complete, to run, invalid with why) and return the runs to execute, in plan order."""
    todo = [it for it in items if it.state in ("new", "partial")]
    together = f" ({side_by_side} side by side)" if side_by_side is not None else ""
    log(f"{len(items)} runs: {sum(it.state == 'done' for it in items)} already complete (skipped), "
        f"{len(todo)} to run{together}, {sum(it.state == 'invalid' for it in items)} invalid")
    for it in items:
        if it.state == "invalid":
            log(f"  ! {it.label}: {it.error}")
    return todo


def _execute(items: list[Planned], pool: Any, log: Callable[[str], None],
             on_done: Callable[[Planned], None] | None, keep_going: bool) -> list[Planned]:
    from agentic_repro.harness.runner import run_spec

    todo = announce_plan(items, log)
    for i, it in enumerate(todo, 1):
        log(f"[{i}/{len(todo)}] {it.label} ({it.state})")
        t0 = time.time()
        try:
            _ensure_artifact(it, pool, log)
            it.metrics = run_spec(it.spec, servers=pool)
            it.state = "done" if it.metrics.get("complete") else "partial"
        except KeyboardInterrupt:
            log("interrupted: finished problems are saved; re-run the same command to resume")
            raise
        except Exception as exc:
            it.state, it.error = "failed", f"{type(exc).__name__}: {exc}"
            log(f"  ! {it.label} failed: {it.error}")
            if not keep_going:
                raise
        it.wall_s = time.time() - t0
        if it.metrics:
            log(f"  score={it.metrics['score_pct']:.1f} n={it.metrics['n']} "
                f"calls={it.metrics['totals']['calls']} wall={it.wall_s:.0f}s")
        if on_done:
            on_done(it)
    return items


def _ensure_artifact(it: Planned, pool: Any, log: Callable[[str], None]) -> None:
    """A searched method (config with ``search:``, baselines/autoflow) runs on test from the artifact its search
    wrote; when that artifact is missing, its search runs first (on the validate split, at the seed the artifact
    path names, with this run's overrides), so its cost stays in the artifact, apart from the test run's."""
    import asyncio
    import dataclasses
    import re

    m = it.spec.method_cfg
    if not m.get("search"):
        return
    path = Path(str((m.get("params") or {}).get("artifact") or "").replace("{benchmark}", it.spec.benchmark_cfg["name"]))
    if not str(path):
        return
    stale, in_place = _stale_artifact(it, path) if path.exists() else ("", False)
    if path.exists() and not stale:
        return
    from agentic_repro.baselines.autoflow.search import run_search, search_dir

    found = re.search(r"seed=(\d+)", str(path))
    seed = int(found.group(1)) if found else it.spec.seed
    spec = dataclasses.replace(it.spec, seed=seed, full_config={**it.spec.full_config, "seed": seed})
    target = search_dir(spec, m["search"]) / "artifact.json"
    if target.resolve() != path.resolve():
        raise ValueError(f"{it.label}: the search would write {target}, the method reads {path}")
    if stale and in_place:
        log(f"  rewriting {it.label}'s artifact ({stale}): its search resumes in place, the cost from its own ledgers")
    elif stale:
        aside = path.parent.with_name(f"{path.parent.name}.stale-{time.strftime('%Y%m%d-%H%M%S')}")
        path.parent.rename(aside)
        log(f"  searching again: {it.label}'s artifact was searched at another setting ({stale}); the old search "
            f"is kept in {aside}")
    else:
        log(f"  searching first: {it.label} has no artifact at {path}")
    asyncio.run(run_search(spec, servers=pool))


def _stale_artifact(it: Planned, path: Path) -> tuple[str, bool]:
    """An existing artifact is reused only when its recorded ``search_config`` is this run's ``method.search``
    (a tiny search must not feed a paper-size row). Otherwise ``method.search.stale_artifact``: ``refuse``
    (default: one line naming the differing keys) or ``search`` (returns the differences: the caller moves the
    old search folder aside, kept, and searches again at this run's setting). An artifact of another format
    version searched at this setting is rewritten by its own search, resumed in place (no call is repeated).
    Returns (differences, in place); ("", False) when it matches."""

    from agentic_repro.baselines.autoflow.artifact import ARTIFACT_VERSION, search_config_diff

    search = it.spec.method_cfg["search"]
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ValueError(f"{it.label}: the artifact {path} is unreadable ({exc}): delete it to search again") from None
    diffs = search_config_diff(doc.get("search_config") if isinstance(doc, dict) else None, search)
    version = doc.get("version") if isinstance(doc, dict) else None
    if not diffs and version != ARTIFACT_VERSION:
        return f"version {version} (artifact) != {ARTIFACT_VERSION} (this code)", True
    if not diffs:
        return "", False
    policy = str(search.get("stale_artifact", "refuse"))
    if policy not in ("refuse", "search"):
        raise ValueError(f"{it.label}: method.search.stale_artifact={policy!r}: choose refuse or search")
    if policy == "refuse":
        raise ValueError(f"{it.label}: the artifact {path} was searched at another setting ({'; '.join(diffs)}): "
                         "run at the setting it was searched at, or set method.search.stale_artifact=search to "
                         "search again")
    return "; ".join(diffs), False


def require_backbone_key(backbone: str) -> None:
    """Fail before planning anything when the backbone needs an API key that is not set."""
    import os

    path = CONFIGS / "backbone" / f"{backbone}.yaml"
    if not path.exists():
        raise SystemExit(f"backbone={backbone!r}: no configs/backbone/{backbone}.yaml "
                         f"(have: {', '.join(sorted(p.stem for p in (CONFIGS / 'backbone').glob('*.yaml')))})")
    env = (yaml.safe_load(path.read_text(encoding="utf-8")) or {}).get("api_key_env")
    if env and not os.environ.get(env):
        raise SystemExit(f"backbone={backbone} needs the environment variable {env}: `export {env}=...` "
                         "(or pick backbone=local, which needs no key)")


def eprint(*a: Any) -> None:
    print(*a, file=sys.stderr, flush=True)


def run_cli(main: Callable[[], int]) -> None:
    """Entry point of a reporting script: SIGINT/SIGTERM stop it cleanly (finished problems stay on disk)."""
    from agentic_repro.harness.run import install_signal_handlers

    install_signal_handlers()
    try:
        raise SystemExit(main())
    except KeyboardInterrupt:
        eprint("interrupted: finished problems are saved; re-run the same command to resume")
        raise SystemExit(130)
