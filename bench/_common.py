"""Shared bench plumbing: start the fake server, build a run spec against it."""
from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any
from collections.abc import Iterator

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def fake_server(delay: float) -> Iterator[str]:
    port = free_port()
    proc = subprocess.Popen([sys.executable, str(ROOT / "bench" / "fake_openai_server.py"), "--port", str(port),
                             "--delay", str(delay)])
    url = f"http://127.0.0.1:{port}/v1"
    try:
        for _ in range(200):
            try:
                urllib.request.urlopen(f"{url}/models", timeout=1).read()
                break
            except OSError:
                time.sleep(0.05)
        else:
            raise RuntimeError("fake server did not start")
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:  # uvicorn waits for in-flight requests
            proc.kill()
            proc.wait()


def fake_backbone_overrides(url: str, concurrency: int) -> list[str]:
    return ["backbone=vllm", "backbone.name=fake", "backbone.model=fake", f"backbone.base_url={url}",
            f"backbone.max_concurrency={concurrency}", "backbone.supports_n=false", "backbone.params=null"]


def compose(overrides: list[str]) -> dict[str, Any]:
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from omegaconf import OmegaConf

    with initialize_config_dir(config_dir=str(ROOT / "configs"), version_base="1.3"):
        cfg = hydra_compose(config_name="config", overrides=overrides)
    return OmegaConf.to_container(cfg, resolve=True)  # type: ignore[return-value]
