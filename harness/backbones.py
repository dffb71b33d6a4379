"""Build a backbone from its config (``configs/backbone/*.yaml``).

Kinds:
- ``openai``: any OpenAI-compatible endpoint (OpenAI itself, a ``vllm serve`` URL, ...)
- ``embedded``: the local default — a GGUF model from PyPI served by llama.cpp on 127.0.0.1
- ``vllm-inprocess``: ``vllm.LLM`` in this process (GPU users)
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.backbone import (BackboneError, OpenAICompatibleBackbone, RetryPolicy, VLLMInProcessBackbone,
                              api_key_from_env)
from harness.ledger import Price

KINDS = ("openai", "embedded", "vllm-inprocess")


async def build_backbone(cfg: dict[str, Any], *, run_dir: Path, seed: int, servers: Any = None) -> Any:
    """``servers`` is the :class:`harness.local_server.ServerPool` that owns embedded servers
    (one per model and settings, reused by every run that shares the pool)."""
    name = cfg["name"]
    kind = cfg.get("kind")
    price = Price.from_config(cfg.get("price"), name)
    common = dict(name=name, price=price, params=cfg.get("params"),
                  max_concurrency=int(cfg.get("max_concurrency", 4)))
    if kind == "openai":
        return OpenAICompatibleBackbone(model=cfg["model"], base_url=cfg.get("base_url"),
                                        api_key=api_key_from_env(cfg.get("api_key_env"), name),
                                        supports_n=bool(cfg.get("supports_n", True)),
                                        retry=RetryPolicy(**(cfg.get("retry") or {})), seed=seed,
                                        extra_identity={"base_url": cfg.get("base_url")}, **common)
    if kind == "embedded":
        if servers is None:
            raise BackboneError("an embedded backbone needs a server pool (harness.local_server.ServerPool)")
        return await _embedded(cfg, run_dir, seed, common, servers)
    if kind == "vllm-inprocess":
        return VLLMInProcessBackbone(model=cfg["model"], engine_args=cfg.get("engine_args"), **common)
    raise BackboneError(f"backbone '{name}': kind={kind!r} is not one of {KINDS}; fix configs/backbone/{name}.yaml")


async def _embedded(cfg: dict[str, Any], run_dir: Path, seed: int, common: dict[str, Any],
                    servers: Any) -> OpenAICompatibleBackbone:
    import asyncio

    from harness.gguf_model import ModelSpec, model_identity, resolve_gguf

    spec = ModelSpec.from_config(cfg, name=cfg["model"])
    path = await asyncio.to_thread(resolve_gguf, spec)
    server_cfg = dict(cfg.get("server") or {})
    base_url = await servers.aget_or_start(path, log_path=run_dir / "server.log", model_alias=cfg["model"],
                                           **server_cfg)
    identity = model_identity(spec, path)
    return OpenAICompatibleBackbone(model=cfg["model"], base_url=f"{base_url}/v1", api_key="local",
                                    supports_n=False, retry=RetryPolicy(**(cfg.get("retry") or {})), seed=seed,
                                    extra_identity={"gguf": identity},
                                    cache_identity={"gguf_sha256": identity.get("sha256")},
                                    **common)
