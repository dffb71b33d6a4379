"""Run metadata: what produced these numbers (code, packages, data, model)."""
from __future__ import annotations

import importlib.metadata as md
import platform
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

PACKAGES = ("agentic-repro", "openai", "hydra-core", "omegaconf", "sympy", "numpy", "pandas", "matplotlib",
            "llama_cpp_python", "sentence-transformers", "torch", "vllm", "datasets")


def git_state(root: Path | None = None) -> dict[str, Any]:
    root = root or Path(__file__).resolve().parent.parent

    def git(*args: str) -> str:
        try:
            return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, timeout=10,
                                  check=False).stdout.strip()  # not a repository / no git: "" (recorded as such)
        except (OSError, subprocess.SubprocessError):
            return ""

    return {"sha": git("rev-parse", "HEAD") or None, "dirty": bool(git("status", "--porcelain", "--untracked-files=no"))}


def package_versions() -> dict[str, str]:
    out = {}
    for name in PACKAGES:
        try:
            out[name] = md.version(name)
        except md.PackageNotFoundError:
            continue
    return out


def run_metadata(spec: Any, data_info: dict[str, Any], backbone: Any, *, started: float,
                 roles: dict[str, dict[str, Any]] | None = None) -> dict[str, Any]:
    """``backbone`` is the run's default; ``roles`` every role's backbone config, model identity and adapter
    (:func:`agentic_repro.harness.roles.role_identities`)."""
    from agentic_repro.evaluators.sandbox import isolation_record

    model = backbone.identity()
    return {
        "run_id": f"{spec.experiment}/{spec.benchmark_cfg['name']}/{spec.method_cfg['name']}/"
                  f"{spec.backbone_cfg['name']}/{spec.seed}",
        "started": started,
        "ended": None,
        "git": git_state(),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "host": socket.gethostname(),
        "argv": sys.argv,
        "packages": package_versions(),
        "data": data_info,
        "benchmark": {"name": spec.benchmark_cfg["name"], "version": str(spec.benchmark_cfg.get("version", "1"))},
        "model": model,
        "roles": roles if roles is not None else {"default": {"backbone": spec.backbone_cfg.get("name"),
                                                              "own_backbone": False, "model": model,
                                                              "adapter": None}},
        # how untrusted code was contained: the mode, the pod's view; under `process` the note tables footnote
        "sandbox": isolation_record(),
    }
