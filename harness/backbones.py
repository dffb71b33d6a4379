"""Build a backbone from its config (``configs/backbone/*.yaml``).

Kinds:
- ``openai``: any OpenAI-compatible endpoint (OpenAI itself, a ``vllm serve`` URL, ...)
- ``embedded``: the local default — a GGUF model from PyPI served by llama.cpp on 127.0.0.1
  (``server.impl``: ``llama-server``, llama.cpp's C++ server with parallel slots and per-request LoRA,
  or ``python``, llama-cpp-python's one-request-at-a-time server)
- ``vllm-server``: a vLLM server the harness starts from the vLLM venv (:mod:`agentic_repro.harness.vllm.backbone`)
- ``vllm-inprocess``: ``vllm.LLM`` in a process of its own (:mod:`agentic_repro.harness.vllm.engine`)
- ``peft``: transformers + peft in this process (a base and its LoRA adapters)
- ``scripted``: no model, replies from a script (:mod:`agentic_repro.harness.scripted`): dry runs and cost estimates

Any kind may carry ``adapters: {name: {path, scale}}`` (see :mod:`agentic_repro.harness.adapters`): the embedded
server loads GGUF LoRA files at start; an ``openai`` backbone pointed at ``vllm serve --enable-lora
--lora-modules name=path`` selects one per request by sending ``model: <name>``.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from agentic_repro.harness.adapters import adapter_identity, parse_adapters
from agentic_repro.harness.backbone import (BackboneError, LlamaServerBackbone, OpenAICompatibleBackbone, RetryPolicy,
                              api_key_from_env)
from agentic_repro.harness.ledger import Price
from agentic_repro.harness.rate_limit import parse_rate_limit

KINDS = ("openai", "anthropic", "gemini", "embedded", "vllm-server", "vllm-inprocess", "peft", "scripted")


async def build_backbone(cfg: dict[str, Any], *, run_dir: Path, seed: int, servers: Any = None) -> Any:
    """``servers`` is the :class:`agentic_repro.harness.embedded.server.ServerPool` that owns embedded servers
    (one per model and settings, reused by every run that shares the pool)."""
    name = cfg["name"]
    kind = cfg.get("kind")
    # `price: table` prices the model from the dated table (configs/prices.yaml): a model it lacks is refused here,
    # before any call; a user-set price is recorded as such (harness.pricing)
    price = Price.from_config(cfg.get("price"), name, model=cfg.get("model"))
    common = {"name": name, "price": price, "params": cfg.get("params"),
              "max_concurrency": int(cfg.get("max_concurrency", 4))}
    # harness.rate_limit: adaptive concurrency and pacing (default for kind openai), or fixed as before
    rate_limit = parse_rate_limit(cfg.get("rate_limit"), kind=kind)
    if kind == "openai":
        if not cfg.get("base_url") and price.free:
            raise BackboneError(f"backbone '{name}': api.openai.com bills every call, but the price is 0: set "
                                "`price: table` (or the price you pay)", kind="config", attempts=0)
        # vLLM serves each --lora-modules entry under its name: the adapter is chosen by `model`
        adapters = {n: adapter_identity(a) for n, a in parse_adapters(cfg.get("adapters"), name).items()}
        return OpenAICompatibleBackbone(model=cfg["model"], base_url=cfg.get("base_url"),
                                        api_key=api_key_from_env(cfg.get("api_key_env"), name),
                                        supports_n=bool(cfg.get("supports_n", True)),
                                        retry=RetryPolicy(**(cfg.get("retry") or {})), seed=seed,
                                        extra_identity={"base_url": cfg.get("base_url")}, adapters=adapters,
                                        cache_identity={},  # the endpoint is not the model: keyed by model name
                                        http_library=str(cfg.get("http_library", "auto")), rate_limit=rate_limit,
                                        reasoning_effort=cfg.get("reasoning_effort"),
                                        service_tier=cfg.get("service_tier"), **common)
    if kind in ("anthropic", "gemini"):  # their native APIs (harness/native_api.py says why not the compat endpoints)
        from agentic_repro.harness.native_api import build_native_backbone
        return build_native_backbone(cfg, seed=seed, rate_limit=rate_limit, common=common)
    if kind == "embedded":
        if servers is None:
            raise BackboneError("an embedded backbone needs a server pool (harness.embedded.server.ServerPool)")
        return await _embedded(cfg, run_dir, seed, {**common, "rate_limit": rate_limit}, servers)
    if kind == "vllm-server":  # a managed vLLM server from the vLLM venv (harness/vllm/, backbone=vllm-cpu)
        from agentic_repro.harness.vllm.backbone import build_vllm_server_backbone
        return await build_vllm_server_backbone(cfg, run_dir=run_dir, seed=seed, servers=servers,
                                                common={**common, "rate_limit": rate_limit})
    if kind == "vllm-inprocess":  # vllm.LLM in a worker process of the vLLM venv (harness/vllm/engine.py says why)
        from agentic_repro.harness.vllm.engine import build_vllm_engine_backbone
        return await build_vllm_engine_backbone(cfg, run_dir=run_dir, servers=servers,
                                                common={**common, "rate_limit": rate_limit})
    if kind == "peft":  # transformers + peft in this process (harness/embedded/peft.py; extra `train`)
        from agentic_repro.harness.embedded.peft import build_peft_backbone
        return await build_peft_backbone(cfg, **common)
    if kind == "scripted":  # no model: replies from a script (harness/scripted.py), for dry runs and estimates
        from agentic_repro.harness.scripted import build_scripted_backbone
        return build_scripted_backbone(cfg, **common)
    raise BackboneError(f"backbone '{name}': kind={kind!r} is not one of {KINDS}; fix configs/backbone/{name}.yaml")


async def _embedded(cfg: dict[str, Any], run_dir: Path, seed: int, common: dict[str, Any],
                    servers: Any) -> OpenAICompatibleBackbone:
    import asyncio

    from agentic_repro.harness.embedded.gguf import ModelSpec, model_identity, resolve_gguf
    name = cfg["name"]
    spec = ModelSpec.from_config(cfg, name=cfg["model"])
    path = await asyncio.to_thread(resolve_gguf, spec)
    server_cfg = dict(cfg.get("server") or {})
    impl = server_cfg.get("impl", "llama-server")
    parallel = int(server_cfg.get("parallel", 1))
    specs = parse_adapters(cfg.get("adapters"), name)
    if specs and impl != "llama-server":
        raise BackboneError(f"backbone '{name}': adapters need server.impl=llama-server (per-request LoRA)",
                            kind="config", attempts=0)
    lora = [a.path for a in specs.values()]
    base_url = await servers.aget_or_start(path, log_path=run_dir / "server.log", model_alias=cfg["model"],
                                           **({**server_cfg, "lora": lora} if lora else server_cfg))
    identity = model_identity(spec, path)
    retry = RetryPolicy(**(cfg.get("retry") or {}))
    if impl == "python":
        # llama-cpp-python's server: one request at a time, n > 1 ignored (samples are separate requests).
        # Its cache identity is the one used before llama-server existed, so old caches stay valid.
        return OpenAICompatibleBackbone(model=cfg["model"], base_url=f"{base_url}/v1", api_key="local",
                                        supports_n=False, retry=retry, seed=seed,
                                        extra_identity={"gguf": identity, "server": {"impl": "python"}},
                                        cache_identity={"gguf_sha256": identity.get("sha256")},
                                        http_library=str(cfg.get("http_library", "auto")),
                                        **{**common, "max_concurrency": 1})  # more would only queue there
    adapters = {n: adapter_identity(a, served_base_sha256=identity.get("sha256")) for n, a in specs.items()}
    lora_ids = await asyncio.to_thread(_match_lora_ids, base_url, specs, name) if specs else {}
    server_id = {"impl": "llama-server", "parallel": parallel}
    return LlamaServerBackbone(model=cfg["model"], base_url=f"{base_url}/v1", server_url=base_url, api_key="local",
                               supports_n=bool(cfg.get("supports_n", True)), max_n=parallel, retry=retry, seed=seed,
                               extra_identity={"gguf": identity, "server": server_id},
                               # batched decoding is not bitwise reproducible: parallel is part of the key
                               cache_identity={"gguf_sha256": identity.get("sha256"), "server": server_id},
                               adapters=adapters, lora_ids=lora_ids,
                               http_library=str(cfg.get("http_library", "auto")), **common)


def _match_lora_ids(base_url: str, specs: dict[str, Any], name: str) -> dict[str, int]:
    """Adapter name -> the server's id, checked against ``GET /lora-adapters`` (by resolved path)."""
    from agentic_repro.harness.embedded.server import lora_adapters

    loaded = lora_adapters(base_url)
    by_path = {str(Path(a.get("path", "")).resolve()): int(a["id"]) for a in loaded}
    ids = {}
    for n, a in specs.items():
        if a.path not in by_path:
            raise BackboneError(f"backbone '{name}': adapter {n!r} ({a.path}) is not loaded by the server at "
                                f"{base_url} (it has {[x.get('path') for x in loaded]})",
                                kind="unknown_adapter", attempts=0)
        ids[n] = by_path[a.path]
    return ids
