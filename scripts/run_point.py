"""One sweep point: ``python -m agentic_repro.harness.run`` plus "skip if already complete" and optional ``logger=wandb``.

Used by ``make sweeps`` as the Hydra multirun app, so any Hydra launcher can execute the points:

    python -m agentic_repro.scripts.run_point -m method=denoiseflow benchmark=gsm8k,mbpp method.params.k_max=3,5,7 \
        'method.name=denoiseflow-k_max_${method.params.k_max}' experiment=sens_k_max sample=30 \
        hydra/launcher=joblib            # or submitit_slurm / submitit_local / ray

A point whose ``metrics.json`` is complete returns its stored score without building a backbone. The check is
made holding the run folder's lock (harness.lock), so a point that another worker is running (a sweep launched
twice, a requeued SLURM job) is refused at once, naming the holder, instead of read half-written; the
runner takes the same lock for the run, so two workers never write one folder.

Each point writes one JSON line to stdout and, under a Hydra multirun, to ``point.json`` in its job folder
(``<hydra.sweep.dir>/<n>/``): run folder, skipped / busy, score, n, cost, calls made. In a multirun a failed point
raises :class:`PointFailed` (an Exception, recorded by Hydra as that job's failure) instead of exiting, so every
launcher (basic, joblib, submitit, Ray) runs or collects all points before the sweep reports the failure;
docs/cluster.md.
"""
from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path

import hydra
from omegaconf import DictConfig

from agentic_repro.harness.results import write_json_atomic
from agentic_repro.harness.run import RunIncomplete, incomplete_message


_POOL = None


def _pool():
    """One embedded-server pool per process: Hydra's basic launcher runs every point in this process, so the
    llama.cpp server starts once (its servers stop at interpreter exit)."""
    global _POOL
    if _POOL is None:
        from agentic_repro.harness.embedded.server import ServerPool

        _POOL = ServerPool()
    return _POOL


class PointFailed(Exception):
    """A sweep point did not complete (its one-line reason is on the job's stderr and in point.json)."""


def _state_locked(spec) -> str:
    """run_state under the folder's lock: never a folder another worker is writing (FolderBusy if held)."""
    from agentic_repro.harness.lock import FolderLock
    from agentic_repro.scripts.runs import run_state

    with FolderLock(spec.out_dir, what="results folder (sweep point)"):
        return run_state(spec)


def run_point(container: dict) -> dict:
    from agentic_repro.harness.lock import FolderBusy
    from agentic_repro.harness.runner import run_spec, spec_from_config
    from agentic_repro.harness.validate import validate_run_config

    validate_run_config(container)  # the checks of python -m agentic_repro.harness.run
    spec = spec_from_config(container)
    try:
        state = _state_locked(spec)
    except FolderBusy as exc:
        _report({"run": str(spec.out_dir), "skipped": False, "busy": True, "error": f"FolderBusy: {exc}"})
        raise
    if state == "done":
        metrics = json.loads((spec.out_dir / "metrics.json").read_text(encoding="utf-8"))
        metrics.setdefault("this_invocation", {})["backbone_calls"] = 0
        skipped = True
    else:
        try:
            metrics = run_spec(spec, servers=_pool())
        except Exception as exc:  # busy: another worker took the folder between the check and the run
            _report({"run": str(spec.out_dir), "skipped": False, "busy": isinstance(exc, FolderBusy),
                     "error": f"{type(exc).__name__}: {exc}"})
            raise
        skipped = False
    score = metrics["score_pct"]  # NaN when nothing was answered: null (strict JSON)
    incomplete = None if metrics.get("complete") else incomplete_message(metrics)
    _report({"run": str(spec.out_dir), "skipped": skipped, "score_pct": None if math.isnan(score) else round(score, 2),
             "n": metrics["n"], "n_errors": metrics.get("n_errors", 0), "complete": incomplete is None,
             "cost_usd": round(metrics["totals"]["cost_usd"], 6),
             "backbone_calls": 0 if skipped else metrics["this_invocation"]["backbone_calls"],
             **({"error": f"RunIncomplete: {incomplete}"} if incomplete else {})})
    _log_wandb(container, spec, metrics)
    if incomplete:  # errored or missing problems: this point failed, exactly as in python -m agentic_repro.harness.run
        raise RunIncomplete(incomplete)
    return metrics


def _job_dir() -> Path | None:
    """This Hydra multirun job's own folder (``hydra.sweep.dir/<n>``); None outside a multirun."""
    try:
        from hydra.core.hydra_config import HydraConfig
        from hydra.types import RunMode

        hc = HydraConfig.get()
        return Path(hc.runtime.output_dir) if hc.mode == RunMode.MULTIRUN else None
    except (ImportError, ValueError, AttributeError):  # not under Hydra (tests call run_point directly)
        return None


def _report(line: dict) -> None:
    job = _job_dir()
    if job is not None:
        write_json_atomic(job / "point.json", line)
    # one write() of < PIPE_BUF bytes: lines from parallel workers (joblib) never interleave
    text = json.dumps(line) + "\n"
    sys.stdout.flush()
    try:
        os.write(sys.stdout.fileno(), text.encode())
    except (AttributeError, OSError, ValueError):  # stdout replaced (e.g. captured in tests)
        sys.stdout.write(text)
        sys.stdout.flush()


def _log_wandb(container: dict, spec, metrics: dict) -> None:
    from agentic_repro.harness.logging_wandb import WandbLogger

    wb = WandbLogger.from_config(container, run_name=f"{spec.experiment}/{spec.benchmark_cfg['name']}/"
                                                     f"{spec.method_cfg['name']}/seed={spec.seed}", job_type="run")
    if wb is not None:
        wb.log_run(spec, metrics)
        if (spec.out_dir / "reliability.png").exists():
            wb.log_image("reliability", spec.out_dir / "reliability.png")
        wb.finish()


@hydra.main(config_path="../configs", config_name="config", version_base="1.3")
def main(cfg: DictConfig) -> float:
    from agentic_repro.harness.run import EXIT_INTERRUPTED, guarded

    if _job_dir() is None:
        return guarded(run_point, cfg)
    try:
        return guarded(run_point, cfg)
    except SystemExit as exc:  # guarded printed the one-line reason; Hydra records the job as failed
        if exc.code == EXIT_INTERRUPTED:
            raise  # Ctrl-C / SIGTERM stops the sweep (the basic launcher would go on to the next point)
        raise PointFailed(f"sweep point failed (exit {exc.code}); its error line is above, on this job's "
                          "stderr") from None


if __name__ == "__main__":
    main()
