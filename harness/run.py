"""Hydra entry point: ``python -m harness.run method=cot benchmark=gsm8k backbone=local seed=42 limit=20``."""
from __future__ import annotations

import json
import signal
import sys
from typing import Callable

import hydra
from omegaconf import DictConfig, OmegaConf

from harness.runner import run_spec, spec_from_config

# Errors a user can fix from the message alone: print it without a traceback.
USER_ERRORS: tuple[type[BaseException], ...] = (FileNotFoundError, ValueError, KeyError, RuntimeError)


def run_from_config(container: dict) -> dict:
    spec = spec_from_config(container)
    metrics = run_spec(spec)
    from harness.logging_wandb import WandbLogger

    wb = WandbLogger.from_config(container, run_name=spec.out_dir.as_posix(), job_type="run")
    if wb is not None:  # logger=wandb; nothing else changes when it is on
        wb.log_run(spec, metrics)
        wb.finish()
    line = {"run": str(spec.out_dir), "score_pct": round(metrics["score_pct"], 2), "n": metrics["n"],
            "stderr_pct": round(100 * metrics["stderr"], 2), "cost_usd": round(metrics["totals"]["cost_usd"], 6),
            "calls": metrics["totals"]["calls"], "backbone_calls": metrics["this_invocation"]["backbone_calls"]}
    print(json.dumps(line))
    return metrics


def _sigterm_as_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt  # `kill` behaves like Ctrl-C: results stay on disk, servers are stopped


def install_signal_handlers() -> None:
    """SIGTERM and SIGINT both raise KeyboardInterrupt, so a killed run saves what is finished and stops
    its servers. SIGINT is reset too: a shell starts background jobs with it ignored."""
    signal.signal(signal.SIGTERM, _sigterm_as_interrupt)
    signal.signal(signal.SIGINT, signal.default_int_handler)


def guarded(body: Callable[[dict], dict], cfg: DictConfig) -> float:
    """Run ``body`` on the resolved config as a command-line app: signals stop it cleanly, and errors a
    user can fix print one line (exit 2) instead of a traceback. Shared by every Hydra app of the project."""
    install_signal_handlers()
    try:
        metrics = body(OmegaConf.to_container(cfg, resolve=True, throw_on_missing=True))  # type: ignore[arg-type]
    except KeyboardInterrupt:
        print("interrupted: finished problems are saved; re-run the same command to resume", file=sys.stderr)
        raise SystemExit(130)
    except USER_ERRORS as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(2)
    return float(metrics["score"])


@hydra.main(config_path="../configs", config_name="config", version_base="1.3")
def main(cfg: DictConfig) -> float:
    return guarded(run_from_config, cfg)


if __name__ == "__main__":
    main()
