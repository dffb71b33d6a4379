"""``kind: vllm-server``: a vLLM server the harness starts (or finds at ``$AGENTIC_REPRO_VLLM_URL``) and talks to
through the same OpenAI client as any endpoint; ``kind: vllm-inprocess`` lives in :mod:`agentic_repro.harness.vllm.engine`.

LoRA adapters (peft folders, e.g. ``training/``'s ``<out>/adapter``) are the server's ``--lora-modules``: one base
in one process, the adapter chosen per request by ``model: <adapter name>`` and recorded per call in the ledger
(``adapter``, ``adapter_sha256``). The server is owned by the run's server pool: started once per configuration,
stopped when the pool closes (end of run, Ctrl-C, SIGTERM) or, through the parent watch, when the harness dies.
"""
from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from agentic_repro.harness.adapters import adapter_identity, parse_adapters
from agentic_repro.harness.backbone import BackboneError, OpenAICompatibleBackbone, RetryPolicy

__all__ = ["build_vllm_server_backbone", "server_key"]


def _model(cfg: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """(the folder vLLM loads, its identity): ``model_dir`` as given, else ``base``'s converted GGUF."""
    from agentic_repro.harness.vllm.model import converted_model

    if cfg.get("model_dir"):
        folder = Path(str(cfg["model_dir"])).expanduser().resolve()
        if not folder.is_dir():
            raise BackboneError(f"backbone '{cfg['name']}': model_dir {folder} is not a folder", kind="config",
                                attempts=0)
        from agentic_repro.harness.hashing import sha256_tree

        return str(folder), {"model_dir": str(folder), "sha256": sha256_tree(folder)}
    m = converted_model(str(cfg.get("base") or "local"))
    return str(m.folder), {"model_dir": str(m.folder), "sha256": m.sha256, "gguf_sha256": m.gguf_sha256,
                           "conversion": m.record}


def server_key(cfg: dict[str, Any], model_dir: str) -> Any:
    """The server's key from the config (``server.*``, ``adapters``): equal keys share one server."""
    from agentic_repro.harness.vllm.server import VLLMServerKey

    name = cfg["name"]
    specs = parse_adapters(cfg.get("adapters"), name)
    for n, a in specs.items():
        if not Path(a.path).is_dir():
            raise BackboneError(f"backbone '{name}': adapters.{n}: vLLM serves peft folders (training's "
                                f"<out>/adapter), not {a.path}", kind="config", attempts=0)
        if a.scale != 1.0:
            raise BackboneError(f"backbone '{name}': adapters.{n}.scale={a.scale}: vLLM applies a LoRA module as "
                                "trained (scale 1.0 only)", kind="config", attempts=0)
    s = dict(cfg.get("server") or {})
    return VLLMServerKey(model_dir=model_dir, served_name=str(cfg["model"]),
                         max_model_len=int(s.get("max_model_len", 4096)), dtype=str(s.get("dtype", "bfloat16")),
                         lora_modules=tuple((n, a.path) for n, a in specs.items()),
                         max_lora_rank=int(s.get("max_lora_rank", 16)), max_loras=int(s.get("max_loras", 4)),
                         kv_cache_gib=int(s.get("kv_cache_gib", 2)), seed=int(s.get("seed", 0)),
                         enforce_eager=bool(s.get("enforce_eager", True)),
                         extra_args=tuple(str(x) for x in s.get("extra_args") or ()))


def _threads(cfg: dict[str, Any]) -> int | None:
    """``server.threads``: the cores vLLM binds, a whole number >= 1, or null for vLLM's own choice."""
    t = (cfg.get("server") or {}).get("threads")
    if t is None:
        return None
    try:
        n = int(t)
        if n >= 1 and str(n) == str(t).strip():
            return n
    except (TypeError, ValueError):
        pass
    raise BackboneError(f"backbone '{cfg['name']}': server.threads={t!r}: give a number of cores (at least 1), or "
                        "null for vLLM's own choice", kind="config", attempts=0)


async def build_vllm_server_backbone(cfg: dict[str, Any], *, run_dir: Path, seed: int, servers: Any,
                                     common: dict[str, Any]) -> OpenAICompatibleBackbone:
    import os

    from agentic_repro.harness.vllm.model import vllm_python
    from agentic_repro.harness.vllm.server import (EXPLICIT_SAMPLING, URL_ENV, generation_config, start_or_attach)

    name = cfg["name"]
    threads = _threads(cfg)
    if servers is None:
        raise BackboneError(f"backbone '{name}': a managed vLLM server needs a server pool", kind="config",
                            attempts=0)
    model_dir, model_id = await asyncio.to_thread(_model, cfg)
    key = server_key(cfg, model_dir)
    s = dict(cfg.get("server") or {})
    url = os.environ.get(URL_ENV, "").strip() or s.get("url") or None
    python = str(vllm_python()) if not url else ""

    def start() -> Any:
        return start_or_attach(key, python=python, log_path=run_dir / "vllm-server.log", url=url,
                               startup_timeout=float(s.get("startup_timeout_s", 600)),
                               threads=threads)

    srv = await asyncio.to_thread(servers.get_or_start_other, ("vllm", key, url), start)
    served_base = model_id.get("gguf_sha256") or model_id["sha256"]
    adapters = {n: adapter_identity(a, served_base_sha256=served_base)
                for n, a in parse_adapters(cfg.get("adapters"), name).items()}
    sampling_record = {"server_flag": "--generation-config vllm (the model folder's file is not applied)",
                       "sent_with_every_request": EXPLICIT_SAMPLING,
                       "model_generation_config": generation_config(model_dir)}
    retry = RetryPolicy(**(cfg.get("retry") or {}))
    return OpenAICompatibleBackbone(
        model=key.served_name, base_url=f"{srv.base_url}/v1", api_key="local",
        supports_n=bool(cfg.get("supports_n", True)), retry=retry, seed=seed,
        extra_identity={"kind": "vllm-server", "engine": "vllm", "vllm_version": srv.version,
                        "served_model": key.served_name, "weights": model_id, "server": srv.describe(),
                        "generation_defaults": sampling_record},
        extra_body=dict(EXPLICIT_SAMPLING),
        # the endpoint is not the model: the weights' hash, the engine and what every request sends
        cache_identity={"engine": "vllm", "weights_sha256": model_id["sha256"], "dtype": key.dtype,
                        "explicit_sampling": EXPLICIT_SAMPLING},
        adapters=adapters, http_library=str(cfg.get("http_library", "auto")), **common)
