"""``make sweeps``: the §4.4 sensitivity sweeps as Hydra multiruns, on any Hydra launcher.

    python -m agentic_repro.scripts.sweep backbone=gpt-4o-mini launcher=joblib           # local processes in parallel
    python -m agentic_repro.scripts.sweep backbone=gpt-4o-mini launcher=submitit_slurm \
        hydra.launcher.partition=gpu hydra.launcher.timeout_min=240         # one SLURM job per point
    python -m agentic_repro.scripts.sweep launcher=ray hydra.launcher.ray.init.address=auto   # an existing Ray cluster
    python -m agentic_repro.scripts.sweep params=k_max dry_run=true                       # print the commands only

Options: backbone, params (comma list of scripts/experiments/sensitivity.yaml params; default all), launcher
(basic|joblib|submitit_local|submitit_slurm|ray; default basic = sequential in one process, which reuses the
embedded server), n_jobs (joblib), sample, seeds, benchmarks, logger, dry_run. Other ``key=value`` arguments are
passed to Hydra unchanged (e.g. ``hydra.launcher.partition=...``).

Completed points are skipped (scripts.run_point checks metrics.json), so a sweep can be re-run to resume; each
job's ``point.json`` (under the sweep folder, ``hydra.sweep.dir``) says what it did; on a cluster see
docs/cluster.md. At the end the tables and Figure 2 are written (``agentic_repro.scripts.sensitivity``, from results/ only) and
the command exits non-zero when a point failed or is incomplete (errors are shown as such, never averaged),
naming the runs.
"""
from __future__ import annotations

import shlex
import subprocess
import sys
from typing import Any

from agentic_repro.scripts.runs import REPO, benchmark_overrides, csv_list, load_experiment, logger_override, parse_args

OPTIONS = {"backbone": "local", "params": None, "launcher": "basic", "n_jobs": None, "sample": None, "seeds": None,
           "benchmarks": None, "logger": "none", "dry_run": "false", "protocol": None}


def commands(exp: dict[str, Any], opts: dict[str, Any], extra: list[str]) -> list[list[str]]:
    backbone = opts["backbone"]
    pname = opts.get("protocol") or exp.get("protocol_by_backbone", {}).get(backbone, "paper")
    proto = exp["protocols"][pname]
    sample = int(opts["sample"]) if opts.get("sample") else int(proto.get("sample", exp["sample"]))
    seeds = csv_list(opts.get("seeds")) or [str(s) for s in exp["seeds"]]
    benches = csv_list(opts.get("benchmarks")) or exp["benchmarks"]
    wanted = csv_list(opts.get("params")) or list(exp["params"])
    unknown = [p for p in wanted if p not in exp["params"]]
    if unknown:
        raise SystemExit(f"unknown sweep params {unknown}; choose from {list(exp['params'])}")
    launcher: list[str] = []
    if opts.get("launcher") and opts["launcher"] != "basic":
        launcher.append(f"hydra/launcher={opts['launcher']}")
    if opts.get("n_jobs"):
        launcher.append(f"hydra.launcher.n_jobs={int(opts['n_jobs'])}")
    if opts.get("launcher") == "ray":
        # hydra-ray-launcher 1.2.2 always passes object_store_memory to ray.init, which Ray refuses when joining
        # an existing cluster (hydra.launcher.ray.init.address=...): leave it to the cluster (docs/cluster.md)
        launcher.append("++hydra.launcher.ray.init.object_store_memory=null")
    cmds = []
    by_bench = {b: benchmark_overrides(proto, b) for b in benches}
    # per-benchmark overrides (e.g. max_tokens from measured answer lengths) need one multirun per benchmark
    groups = [[b] for b in benches] if any(by_bench.values()) else [benches]
    for p in wanted:
        spec = exp["params"][p]
        values = ",".join(str(v) for v in spec["values"])
        for group in groups:
            cmds.append([sys.executable, "-m", "agentic_repro.scripts.run_point", "-m",
                         f"experiment={exp['experiment_prefix']}_{p}", f"method={exp['method']}",
                         f"method.name={exp['method']}-{p}_${{{spec['key']}}}",
                         f"{spec['key']}={values}", f"benchmark={','.join(group)}", f"backbone={backbone}",
                         f"seed={','.join(seeds)}", f"sample={sample}", *proto.get("overrides", []),
                         *(by_bench.get(group[0], []) if len(group) == 1 else []),
                         *logger_override(opts.get("logger")), *launcher, *extra])
    return cmds


def main(argv: list[str] | None = None) -> int:
    opts, extra = parse_args(list(sys.argv[1:] if argv is None else argv), OPTIONS)
    exp = load_experiment("sensitivity")
    from agentic_repro.scripts.runs import method_config

    dry = str(opts["dry_run"]).lower() in ("1", "true", "yes")
    if method_config(exp["method"]) is None and not dry:
        print(f"sweeps need configs/method/{exp['method']}.yaml (DenoiseFlow); it does not exist yet", file=sys.stderr)
        return 2
    rc = 0
    for cmd in commands(exp, opts, extra):
        print("$ " + " ".join(shlex.quote(c) for c in cmd), flush=True)
        if dry:
            continue
        code = subprocess.call(cmd, cwd=REPO)
        if code:
            print(f"sweep command exited {code}: {' '.join(cmd[4:7])} ...", file=sys.stderr)
        rc = code or rc
    if dry:
        return 0
    from pathlib import Path

    from agentic_repro.scripts import sensitivity

    root = next((a.split("=", 1)[1] for a in extra if a.startswith("results_root=")), None)
    res = sensitivity.write_all(Path(root) if root else Path(_results_root()), exp, backbone=opts["backbone"])
    return sensitivity.report(res) or (1 if rc else 0)


def _results_root() -> str:
    from agentic_repro.scripts.runs import compose

    return str(compose([]).get("results_root", "results"))


if __name__ == "__main__":
    raise SystemExit(main())
