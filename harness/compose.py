"""The resolved root config for a list of overrides, exactly as ``python -m agentic_repro.harness.run`` would see them.

For code that runs the harness from Python rather than from the command line: the cost estimates, the table
scripts' plans, the benchmarks under bench/ and the tests.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["CONFIG_DIR", "compose"]

CONFIG_DIR = Path(__file__).resolve().parents[1] / "configs"


def compose(overrides: list[str]) -> dict[str, Any]:
    """The root config (``configs/config.yaml``) with ``overrides`` applied, interpolations resolved, as plain dicts."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from omegaconf import OmegaConf

    GlobalHydra.instance().clear()  # a Hydra app (or an earlier compose) may hold the global instance
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        cfg = hydra_compose(config_name="config", overrides=overrides)
    return OmegaConf.to_container(cfg, resolve=True)  # type: ignore[return-value]
