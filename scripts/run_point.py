"""One sweep point: ``python -m harness.run`` plus "skip if already complete" and optional ``logger=wandb``.

Used by ``make sweeps`` as the Hydra multirun app, so any Hydra launcher can execute the points:

    python -m scripts.run_point -m method=denoiseflow benchmark=gsm8k,mbpp method.params.k_max=3,5,7 \
        'method.name=denoiseflow-k_max_${method.params.k_max}' experiment=sens_k_max sample=30 \
        hydra/launcher=joblib            # or submitit_slurm / submitit_local / ray

A point whose ``metrics.json`` is complete returns its stored score without building a backbone.
"""
from __future__ import annotations

import json
import os
import sys

import hydra
from omegaconf import DictConfig


_POOL = None


def _pool():
    """One embedded-server pool per process: Hydra's basic launcher runs every point in this process, so the
    llama.cpp server starts once (its servers stop at interpreter exit)."""
    global _POOL
    if _POOL is None:
        from harness.embedded.server import ServerPool

        _POOL = ServerPool()
    return _POOL


def run_point(container: dict) -> dict:
    from harness.runner import run_spec, spec_from_config
    from scripts.runs import run_state

    spec = spec_from_config(container)
    state = run_state(spec)
    if state == "done":
        metrics = json.loads((spec.out_dir / "metrics.json").read_text(encoding="utf-8"))
        metrics.setdefault("this_invocation", {})["backbone_calls"] = 0
        skipped = True
    else:
        metrics = run_spec(spec, servers=_pool())
        skipped = False
    line = {"run": str(spec.out_dir), "skipped": skipped, "score_pct": round(metrics["score_pct"], 2),
            "n": metrics["n"], "cost_usd": round(metrics["totals"]["cost_usd"], 6),
            "backbone_calls": 0 if skipped else metrics["this_invocation"]["backbone_calls"]}
    # one write() of < PIPE_BUF bytes: lines from parallel workers (joblib) never interleave
    text = json.dumps(line) + "\n"
    sys.stdout.flush()
    try:
        os.write(sys.stdout.fileno(), text.encode())
    except (AttributeError, OSError, ValueError):  # stdout replaced (e.g. captured in tests)
        sys.stdout.write(text)
        sys.stdout.flush()
    from harness.logging_wandb import WandbLogger

    wb = WandbLogger.from_config(container, run_name=f"{spec.experiment}/{spec.benchmark_cfg['name']}/"
                                                     f"{spec.method_cfg['name']}/seed={spec.seed}", job_type="run")
    if wb is not None:
        wb.log_run(spec, metrics)
        if (spec.out_dir / "reliability.png").exists():
            wb.log_image("reliability", spec.out_dir / "reliability.png")
        wb.finish()
    return metrics


@hydra.main(config_path="../configs", config_name="config", version_base="1.3")
def main(cfg: DictConfig) -> float:
    from harness.run import guarded

    return guarded(run_point, cfg)


if __name__ == "__main__":
    main()
