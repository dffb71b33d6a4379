"""Optional Weights & Biases logging (``logger=wandb``); results/ stays the source of truth.

Import-guarded: ``wandb`` is only imported when the logger is switched on, and a missing package gives one
clear error naming the extra. Without ``WANDB_API_KEY`` the run is logged offline (``wandb sync`` later).
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

INSTALL_HINT = "logger=wandb needs the `wandb` package: pip install -e '.[wandb]'"


def _import_wandb():
    try:
        import wandb  # type: ignore[import-not-found]
    except ImportError as exc:
        raise RuntimeError(INSTALL_HINT) from exc
    return wandb


def resolve_mode(mode: str | None) -> str:
    if mode:
        return str(mode)
    return "online" if os.environ.get("WANDB_API_KEY") else "offline"


class WandbLogger:
    """One wandb run. Methods never raise on logging problems after init (a tracker must not end a run)."""

    def __init__(self, cfg: dict[str, Any], *, full_config: dict[str, Any] | None = None,
                 run_name: str | None = None, job_type: str | None = None) -> None:
        self.wandb = _import_wandb()
        self.cfg = cfg
        kwargs = {"project": cfg.get("project") or "agentic-repro", "entity": cfg.get("entity"),
                  "mode": resolve_mode(cfg.get("mode")), "group": cfg.get("group"),
                  "tags": list(cfg.get("tags") or []), "name": run_name, "job_type": job_type,
                  "config": full_config or {}, "reinit": True}
        if cfg.get("dir"):
            kwargs["dir"] = str(cfg["dir"])
        self.run = self.wandb.init(**{k: v for k, v in kwargs.items() if v is not None})

    @classmethod
    def from_config(cls, full_config: dict[str, Any], **kw: Any) -> WandbLogger | None:
        """A logger if ``full_config['logger']['name'] == 'wandb'``, else None."""
        lc = full_config.get("logger") or {}
        if (lc.get("name") if isinstance(lc, dict) else lc) != "wandb":
            return None
        return cls(dict(lc), full_config=full_config, **kw)

    def log_metrics(self, metrics: dict[str, Any], prefix: str = "") -> None:
        flat = {f"{prefix}{k}": v for k, v in _flatten(metrics).items() if isinstance(v, (int, float, bool))}
        self._safe(lambda: self.run.log(flat))

    def log_run(self, spec: Any, metrics: dict[str, Any] | None) -> None:
        """One harness run (a RunSpec and its metrics.json) as a step, keyed by its result path."""
        if not metrics:
            return
        key = f"{spec.benchmark_cfg['name']}/{spec.method_cfg['name']}/seed={spec.seed}/"
        self.log_metrics({k: metrics.get(k) for k in ("score_pct", "n", "stderr", "totals", "per_problem",
                                                      "calibration") if k in metrics}, prefix=key)

    def log_table(self, name: str, csv_path: Path) -> None:
        def do() -> None:
            import csv

            with open(csv_path, encoding="utf-8") as fh:
                rows = list(csv.reader(fh))
            if rows:
                self.run.log({name: self.wandb.Table(columns=rows[0], data=rows[1:])})
        self._safe(do)

    def log_image(self, name: str, path: Path) -> None:
        self._safe(lambda: self.run.log({name: self.wandb.Image(str(path))}))

    def log_file(self, path: Path) -> None:
        self._safe(lambda: self.run.save(str(path), base_path=str(Path(path).parent), policy="now"))

    def finish(self) -> None:
        self._safe(self.run.finish)

    @staticmethod
    def _safe(fn) -> None:
        try:
            fn()
        except Exception as exc:  # noqa: BLE001 - logging is best effort once the run exists
            import sys

            print(f"wandb: logging failed ({type(exc).__name__}: {exc}); results/ is unaffected", file=sys.stderr)


def _flatten(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(_flatten(v, f"{prefix}{k}/"))
        elif not isinstance(v, list):
            out[f"{prefix}{k}"] = v
    return out
