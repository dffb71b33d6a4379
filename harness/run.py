"""Hydra entry point: ``python -m agentic_repro.harness.run method=cot benchmark=gsm8k backbone=local seed=42 limit=20``."""
from __future__ import annotations

import json
import math
import signal
import sys
from collections.abc import Callable

import hydra
from omegaconf import DictConfig, OmegaConf

from agentic_repro.harness.runner import run_spec, spec_from_config

# Errors a user can fix from the message alone: print it without a traceback.
USER_ERRORS: tuple[type[BaseException], ...] = (FileNotFoundError, ValueError, KeyError, RuntimeError)
EXIT_USER_ERROR, EXIT_INCOMPLETE, EXIT_INTERRUPTED = 2, 3, 130

#: What to do about the first error of an incomplete run, by BackboneError kind (None: not a backbone error).
FIXES = {
    "connection": "the backbone server is unreachable: check backbone.base_url and that the server is running",
    "timeout": "the backbone did not answer in time: check the server, or raise backbone.retry.timeout_s",
    "http_429": "the backbone rate-limits this run: lower backbone.max_concurrency or wait",
    "http_4xx": "the backbone refused the request: check the API key, backbone.model and the sampling options",
    "unknown_adapter": "an adapter name is not loaded by its backbone: check roles.<role>.adapter and "
                       "backbone.adapters",
    "aborted": "every backbone call failed: check the backbone (URL, key, server log) before re-running",
}
BROKEN_REPLIES = "the backbone sent broken replies (see its log): fix the server"


class RunIncomplete(RuntimeError):
    """A run ended with errored or missing problems: its metrics are not a result to report."""


def incomplete_message(metrics: dict) -> str:
    """One line: what failed, how many, and the fix."""
    first = metrics.get("first_error") or {}
    kind = first.get("kind")
    if kind in FIXES:
        fix = FIXES[kind]
    elif kind in ("http_5xx", "null_content", "empty_content", "bad_json", "empty_choices", "error_body"):
        fix = BROKEN_REPLIES
    elif str(first.get("error") or "").startswith("ScoringError"):  # the runner keeps a scorer's traceback here
        fix = "see the scorer's traceback in predictions.jsonl (score_details.traceback) of that problem"
    elif str(first.get("error") or "").startswith("JudgeError"):
        fix = ("see the judge's last reply and why each was unusable in predictions.jsonl (judge.output, "
               "judge.rejected) of that problem")
    elif first:
        fix = "see the method's traceback in predictions.jsonl (trace.traceback) of that problem"
    else:
        fix = "re-run to finish the remaining problems"
    n_err, selected = metrics.get("n_errors", 0), metrics.get("selected", 0)
    gap = metrics.get("ledger_gap")
    if n_err:
        what = f"{n_err} of {selected} problems failed (first, {first.get('id')}: {first.get('error')})"
    elif gap and metrics.get("n", 0) >= selected:
        what = (f"calls.jsonl does not cover {gap['n']} answered problem(s) (first, {gap['first']}: {gap['calls']} "
                f"call(s), {gap['on_ledger']} on the ledger), so the run's cost is unknown")
        fix = ("none needed first: a re-run solves those problems again with their calls replayed from the response "
               "cache at no cost, so the bill covers every answer (for a stateful method use restart=true)")
    else:
        what = f"{selected - metrics.get('n', 0)} of {selected} problems have no answer"
    if metrics.get("aborted"):
        what += "; stopped early: every backbone call failed (runner.fail_fast_after)"
    if metrics.get("budget_stop"):
        what += f"; stopped: {metrics['budget_stop']}"
        fix = "raise runner.budgets.max_usd (or set it to null)"
    return (f"run incomplete: {what}; fix: {fix}; then re-run the same command: answered problems are kept "
            "and the failed ones are retried")


def run_from_config(container: dict) -> dict:
    from agentic_repro.harness.validate import validate_run_config

    validate_run_config(container)
    spec = spec_from_config(container)
    metrics = run_spec(spec)
    from agentic_repro.harness.logging_wandb import WandbLogger

    wb = WandbLogger.from_config(container, run_name=spec.out_dir.as_posix(), job_type="run")
    if wb is not None:  # logger=wandb; nothing else changes when it is on
        wb.log_run(spec, metrics)
        wb.finish()
    score = metrics["score_pct"]  # NaN when nothing was answered: printed as null (strict JSON)
    line = {"run": str(spec.out_dir), "score_pct": None if math.isnan(score) else round(score, 2), "n": metrics["n"],
            "stderr_pct": round(100 * metrics["stderr"], 2), "cost_usd": round(metrics["totals"]["cost_usd"], 6),
            "calls": metrics["totals"]["calls"], "backbone_calls": metrics["this_invocation"]["backbone_calls"],
            "n_errors": metrics.get("n_errors", 0), "complete": metrics.get("complete")}
    for key in ("judge_score", "judge_agreement", "pass_at_k"):  # judge / samples_per_task runs
        if key in metrics:
            line[key] = metrics[key]
    print(json.dumps(line))
    if not metrics.get("complete"):
        raise RunIncomplete(incomplete_message(metrics))
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
        raise SystemExit(EXIT_INTERRUPTED)
    except RunIncomplete as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(EXIT_INCOMPLETE)
    except OSError as exc:
        if isinstance(exc, FileNotFoundError) and not exc.errno:
            print(f"error: {exc}", file=sys.stderr)  # our own "missing file, run make data" messages
        else:
            print(f"error: {disk_message(exc)}", file=sys.stderr)
        raise SystemExit(EXIT_USER_ERROR)
    except USER_ERRORS as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(EXIT_USER_ERROR)
    return float(metrics["score"])


def disk_message(exc: OSError) -> str:
    """One line naming the path and errno of a failed read or write (a full or read-only results disk)."""
    from agentic_repro.harness.cache import CacheError
    from agentic_repro.harness.results import ResultsWriteError

    if isinstance(exc, (ResultsWriteError, CacheError)) or not exc.errno:
        return str(exc)
    return f"{exc.filename or '(unknown path)'}: [Errno {exc.errno}] {exc.strerror}"


@hydra.main(config_path="../configs", config_name="config", version_base="1.3")
def main(cfg: DictConfig) -> float:
    return guarded(run_from_config, cfg)


if __name__ == "__main__":
    main()
