"""Run the embedded model's OpenAI-compatible server on 127.0.0.1 as a child process.

The embedded backbone talks to this server exactly as it would to a remote
OpenAI-compatible endpoint (``f"{base_url}/v1"``), so local and remote runs go
through the same client code. Two implementations (``impl``):

* ``llama-server`` (default): llama.cpp's own C++ server, built from the pinned
  sdist by :mod:`agentic_repro.harness.embedded.build`. Parallel slots (``--parallel``, continuous
  batching: several requests decode in one batch), ``n > 1`` per request, and
  GGUF LoRA adapters loaded at start (``--lora``) and chosen per request. Batched
  decoding is not bitwise reproducible, hence ``parallel`` is part of the key and
  of the backbone's cache identity (``parallel: 1`` for bitwise-deterministic runs).
  Adapters: this llama.cpp applies every loaded adapter at scale 1.0 to a request
  without a ``lora`` field (``--lora-init-without-apply`` has no effect), so after
  start every adapter's global scale is set to 0 (``POST /lora-adapters``) and
  checked; the backbone also sends the full ``lora`` list on every request.
* ``python``: llama-cpp-python's server (one request at a time), kept for the
  bench comparison and for machines where the binary cannot be built.

Threads: ``n_threads: auto`` (the default: one core left for the harness) or ``free``
(every idle core: one harness process driving one server) is chosen at start for
the cores that are actually free, see :func:`choose_threads`.

Facts about ``llama_cpp.server`` (0.3.36) this module relies on:

* it serves one request at a time; ``--interrupt_requests False`` is required,
  the default cuts a running completion short (to 0 tokens) as soon as a
  second request arrives;
* its settings are pydantic ``BaseSettings``: any environment variable named
  like a setting (``PORT``, ``HOST``, ``N_GPU_LAYERS``, ``API_KEY``, ``SEED``,
  ...) silently changes the server. The child's environment is scrubbed of
  those names so that the command line alone decides the configuration.

Reuse: a :class:`ServerPool` (owned by the run context) starts at most one
server per (model, settings) key and hands back its URL; all pool servers are
stopped at interpreter exit. If ``AGENTIC_REPRO_LOCAL_URL`` is set, no server
is started: that URL is used (after checking it answers and serves the model).
"""
from __future__ import annotations

import asyncio
import atexit
import contextlib
import importlib.util
import json
import os
import shlex
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentic_repro.harness.process_group import stop_process_group

if TYPE_CHECKING:  # typing.Self is Python 3.11+
    from typing_extensions import Self

__all__ = [
    "LOCAL_URL_ENV",
    "LocalServer",
    "LocalServerError",
    "ServerKey",
    "ServerPool",
    "aget_or_start",
    "build_command",
    "choose_threads",
    "default_pool",
    "external_url",
    "get_or_start",
    "lora_adapters",
    "served_models",
    "stop_all",
]

LOCAL_URL_ENV = "AGENTIC_REPRO_LOCAL_URL"
HOST = "127.0.0.1"
DEFAULT_STARTUP_TIMEOUT = 180.0
MISSING_EXTRA = ("server.impl=python needs llama-cpp-python's server: run `make install-python-server` "
                 "(or use the default server.impl=llama-server)")
IMPLS = ("llama-server", "python")

# Setting names of llama_cpp.server 0.3.36 (ModelSettings + ServerSettings), used
# when the installed package cannot be introspected; plus the two variables its
# __main__ reads directly.
_SETTINGS_FALLBACK = frozenset(
    ["model", "model_alias", "n_gpu_layers", "split_mode", "main_gpu", "tensor_split", "vocab_only", "use_mmap",
     "use_mlock", "kv_overrides", "rpc_servers", "seed", "n_ctx", "n_batch", "n_ubatch", "n_threads",
     "n_threads_batch", "rope_scaling_type", "rope_freq_base", "rope_freq_scale", "yarn_ext_factor",
     "yarn_attn_factor", "yarn_beta_fast", "yarn_beta_slow", "yarn_orig_ctx", "mul_mat_q", "logits_all", "embedding",
     "offload_kqv", "flash_attn", "last_n_tokens_size", "lora_base", "lora_path", "numa", "chat_format",
     "chat_template_kwargs", "clip_model_path", "cache", "cache_type", "cache_size", "hf_tokenizer_config_path",
     "hf_pretrained_model_name_or_path", "hf_model_repo_id", "draft_model", "draft_model_num_pred_tokens", "type_k",
     "type_v", "verbose", "host", "port", "ssl_keyfile", "ssl_certfile", "api_key", "interrupt_requests",
     "disable_ping_events", "root_path", "models", "config_file"]
)


class LocalServerError(RuntimeError):
    """The local server could not be started, reached, or is serving the wrong model."""


# --------------------------------------------------------------------------- helpers


def _require_llama_cpp() -> None:
    if importlib.util.find_spec("llama_cpp") is None:
        raise LocalServerError(MISSING_EXTRA)


def _require_impl(key: ServerKey) -> None:
    """The server implementation is installed (the binary is built / the Python package is present)."""
    if key.impl == "python":
        _require_llama_cpp()
        return
    from agentic_repro.harness.embedded.build import MISSING_HINT, find_binary

    if find_binary() is None:
        raise LocalServerError(MISSING_HINT)


THREAD_MODES = ("auto", "free")


def choose_threads(requested: int | str | None = "auto", *, cores: int | None = None,
                   load: float | None = None, busy: float | None = None) -> int:
    """llama.cpp threads for the cores actually free.

    Measured on this project's 2-core machine: with 2 threads llama.cpp collapses to 1-2 tok/s as soon
    as another process uses a core (its threads wait for each other at every layer), while 1 thread
    keeps its speed under the same load. Two rules:

    * ``auto``: the cores this process may use, minus the 1-minute load average (rounded up), minus one core
      left for the harness itself; at least 1. So 1 thread on 2 cores, 15 on an idle 16-core machine, 11 when
      4 cores are busy. For several processes sharing a machine (the test suite's workers, each with a server).
    * ``free``: every core that is idle now (``busy``: the cores in use, sampled from ``/proc/stat`` over
      ~0.5 s; the load average lags a minute behind the install steps that precede a table). For one harness
      process driving one server: it waits on the server almost all the time. Measured 2026-12-06 on the idle
      2-core machine (bench/table_runner.py, 8 cells of Table 1's smoke, runs one at a time): 97.8 s with 2
      threads, 178.2 s with 1 (0.55x); a busy loop beside 2 threads cut them to 6.2 tok/s (16.9 idle).

    An integer is used as given.
    """
    if requested not in (None, *THREAD_MODES):
        return max(1, int(requested))  # type: ignore[arg-type]
    if cores is None:
        try:
            cores = len(os.sched_getaffinity(0))
        except (AttributeError, OSError):
            cores = os.cpu_count() or 1
    import math

    if requested == "free":
        if busy is None:
            busy = busy_cores()
        if busy is not None:
            return max(1, cores - max(0, round(busy)))
    if load is None:
        try:
            load = os.getloadavg()[0]
        except OSError:
            load = 0.0
    reserve = 0 if requested == "free" else 1  # free without /proc/stat: the load average instead
    return max(1, cores - reserve - max(0, math.ceil(load - 0.25)))  # 0.25: a blip of load is not a busy core


def busy_cores(window_s: float = 0.5) -> float | None:
    """Cores in use over ``window_s`` seconds, from the machine's ``/proc/stat`` (None where it cannot be read)."""
    def sample() -> tuple[int, int]:
        with open("/proc/stat", encoding="ascii") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
        idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
        return sum(fields[:8]), idle

    try:
        total0, idle0 = sample()
        time.sleep(window_s)
        total1, idle1 = sample()
    except (OSError, ValueError, IndexError):
        return None
    total = total1 - total0
    if total <= 0:
        return None
    cores = os.cpu_count() or 1
    return cores * (1.0 - (idle1 - idle0) / total)


def lora_adapters(base_url: str, timeout: float = 10.0) -> list[dict[str, Any]]:
    """``GET {base_url}/lora-adapters`` of a llama-server: ``[{"id", "path", "scale"}, ...]``."""
    with urllib.request.urlopen(f"{_normalise_url(base_url)}/lora-adapters", timeout=timeout) as r:
        body = json.loads(r.read().decode())
    return list(body) if isinstance(body, list) else []


def _set_lora_scales(base_url: str, scales: list[dict[str, Any]], timeout: float = 10.0) -> None:
    req = urllib.request.Request(f"{_normalise_url(base_url)}/lora-adapters", data=json.dumps(scales).encode(),
                                 headers={"Content-Type": "application/json"}, method="POST")
    with urllib.request.urlopen(req, timeout=timeout) as r:
        r.read()


def zero_lora_defaults(base_url: str, expected_paths: Sequence[str]) -> list[dict[str, Any]]:
    """Set every loaded adapter's server-wide scale to 0 and check it took (and that all are loaded)."""
    loaded = lora_adapters(base_url)
    if len(loaded) != len(expected_paths):
        raise LocalServerError(f"{base_url} loaded {len(loaded)} LoRA adapters, expected {len(expected_paths)}")
    _set_lora_scales(base_url, [{"id": a["id"], "scale": 0.0} for a in loaded])
    after = lora_adapters(base_url)
    if any(float(a.get("scale", 1.0)) != 0.0 for a in after):
        raise LocalServerError(f"{base_url}: could not set the adapters' default scale to 0: {after}")
    return after


def _free_port(host: str = HOST) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def _normalise_url(url: str) -> str:
    url = url.strip().rstrip("/")
    url = url.removesuffix("/v1")
    return url


def external_url() -> str | None:
    """The shared server URL from ``AGENTIC_REPRO_LOCAL_URL`` (without ``/v1``), if set."""
    url = os.environ.get(LOCAL_URL_ENV, "").strip()
    return _normalise_url(url) if url else None


def served_models(base_url: str, timeout: float = 5.0) -> list[str]:
    """Model ids listed by ``GET {base_url}/v1/models``."""
    with urllib.request.urlopen(f"{_normalise_url(base_url)}/v1/models", timeout=timeout) as r:
        body = json.loads(r.read().decode())
    return [str(m.get("id")) for m in body.get("data", [])]


def _tail(path: Path | None, n: int = 40) -> str:
    if path is None:
        return ""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - 64 * 1024))
            lines = f.read().decode("utf-8", errors="replace").splitlines()
    except OSError:
        return ""
    return "\n".join(lines[-n:])


_settings_names: frozenset[str] | None = None


def _server_setting_names() -> frozenset[str]:
    """Environment names pydantic-settings would read into the server's settings."""
    global _settings_names
    if _settings_names is None:
        names = set(_SETTINGS_FALLBACK)
        with contextlib.suppress(Exception):
            from llama_cpp.server.settings import ModelSettings, ServerSettings  # pyright: ignore[reportMissingImports]

            names |= set(ModelSettings.model_fields) | set(ServerSettings.model_fields)
        _settings_names = frozenset(names)
    return _settings_names


def _child_env() -> dict[str, str]:
    """The parent's environment without the names either server reads as settings
    (llama_cpp.server's pydantic settings, llama-server's ``LLAMA_ARG_*``)."""
    names = _server_setting_names()
    return {k: v for k, v in os.environ.items()
            if k.lower() not in names and not k.upper().startswith("LLAMA_ARG_")}


@dataclass(frozen=True)
class ServerKey:
    """What makes two servers interchangeable.

    ``n_ctx`` is the context one request may use (llama-server gets ``n_ctx x parallel`` in all, one
    ``n_ctx`` per slot); ``n_threads`` may be ``"auto"`` (chosen at start); ``lora`` the adapter files
    loaded at start, in id order.
    """

    model_path: str
    n_ctx: int
    n_threads: int | str
    chat_format: str | None
    model_alias: str
    extra_args: tuple[str, ...]
    impl: str = "llama-server"
    parallel: int = 1
    lora: tuple[str, ...] = ()
    cache_ram_mib: int = 0


def _make_key(
    model_path: str | os.PathLike[str],
    n_ctx: int,
    n_threads: int | str | None,
    chat_format: str | None,
    model_alias: str | None,
    extra_args: Sequence[str] | None,
    *,
    impl: str = "llama-server",
    parallel: int = 1,
    lora: Sequence[str | os.PathLike[str]] | None = None,
    cache_ram_mib: int = 0,
) -> ServerKey:
    p = Path(model_path).expanduser().resolve()
    if impl not in IMPLS:
        raise LocalServerError(f"server.impl={impl!r} is not one of {IMPLS}")
    if int(parallel) < 1:
        raise LocalServerError(f"server.parallel must be >= 1, got {parallel}")
    if impl == "python" and (int(parallel) != 1 or lora):
        raise LocalServerError("server.impl=python serves one request at a time without per-request LoRA: "
                               "use server.impl=llama-server for parallel > 1 or adapters")
    try:
        threads: int | str = ("auto" if n_threads is None else n_threads if n_threads in THREAD_MODES
                              else int(n_threads))  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise LocalServerError(f"server.n_threads={n_threads!r}: give a number, auto or free") from None
    try:
        cache_mib = int(cache_ram_mib)
    except (TypeError, ValueError):
        raise LocalServerError(f"server.cache_ram_mib={cache_ram_mib!r}: give MiB as a number (0 = no prompt cache)") from None
    return ServerKey(
        model_path=str(p),
        n_ctx=int(n_ctx),
        n_threads=threads,
        chat_format=chat_format or None,
        model_alias=model_alias or p.name,
        extra_args=tuple(str(a) for a in (extra_args or ())),
        impl=impl,
        parallel=int(parallel),
        lora=tuple(str(Path(x).expanduser().resolve()) for x in (lora or ())),
        cache_ram_mib=cache_mib,
    )


def build_command(key: ServerKey, port: int, host: str = HOST, n_threads: int | None = None) -> list[str]:
    """The exact server command line (recorded in the log and in ``LocalServer.command``)."""
    threads = n_threads if n_threads is not None else choose_threads(key.n_threads)
    if key.impl == "llama-server":
        return _llama_server_command(key, port, host, threads)
    cmd = [
        sys.executable, "-m", "llama_cpp.server",
        "--model", key.model_path,
        "--model_alias", key.model_alias,
        "--host", host,
        "--port", str(port),
        "--interrupt_requests", "False",
        "--n_ctx", str(key.n_ctx),
        "--n_threads", str(threads),
        "--n_threads_batch", str(threads),
    ]
    if key.chat_format:
        cmd += ["--chat_format", key.chat_format]
    cmd += list(key.extra_args)
    return cmd


def _llama_server_command(key: ServerKey, port: int, host: str, threads: int) -> list[str]:
    from agentic_repro.harness.embedded.build import MISSING_HINT, find_binary

    binary = find_binary()
    cmd = [
        str(binary) if binary else MISSING_HINT,
        "--model", key.model_path,
        "--alias", key.model_alias,
        "--host", host,
        "--port", str(port),
        "--ctx-size", str(key.n_ctx * key.parallel),  # one n_ctx per slot
        "--parallel", str(key.parallel),
        "--no-kv-unified",
        "--threads", str(threads),
        "--threads-batch", str(threads),
        "--cache-ram", str(key.cache_ram_mib),
        "--no-webui",
    ]
    for path in key.lora:
        cmd += ["--lora", path]
    if key.chat_format:
        cmd += ["--chat-template", key.chat_format]
    cmd += list(key.extra_args)
    return cmd


# --------------------------------------------------------------------------- one server

_live: weakref.WeakSet[LocalServer] = weakref.WeakSet()
_live_lock = threading.Lock()


def _stop_all_live() -> None:
    with _live_lock:
        servers = list(_live)
    for s in servers:
        with contextlib.suppress(Exception):
            s.stop()


atexit.register(_stop_all_live)


class LocalServer:
    """One ``llama_cpp.server`` child process on a free loopback port.

    >>> srv = LocalServer()
    >>> url = srv.start(model_path, log_path=run_dir / "llama_server.log", n_ctx=8192)
    >>> # ... OpenAI(base_url=f"{url}/v1", api_key="local") ...
    >>> srv.stop()

    Also a context manager (``with LocalServer() as srv: srv.start(...)``).
    The process runs in its own process group; :meth:`stop` sends SIGTERM to
    the group, then SIGKILL after ``stop_timeout`` seconds. Every started server
    is also stopped at interpreter exit.
    """

    def __init__(self, *, host: str = HOST, startup_timeout: float = DEFAULT_STARTUP_TIMEOUT,
                 stop_timeout: float = 10.0) -> None:
        self.host = host
        self.startup_timeout = float(startup_timeout)
        self.stop_timeout = float(stop_timeout)
        self.key: ServerKey | None = None
        self.port: int | None = None
        self.base_url: str | None = None
        self.log_path: Path | None = None
        self.command: list[str] | None = None
        self.startup_seconds: float | None = None
        self.n_threads: int | None = None
        self.lora: list[dict[str, Any]] = []
        self._proc: subprocess.Popen[bytes] | None = None
        self._log_fh: Any = None

    # -- state
    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def describe(self) -> dict[str, Any]:
        """JSON-serialisable record of this server for a run's meta.json."""
        return {
            "base_url": self.base_url,
            "pid": self.pid,
            "command": shlex.join(self.command) if self.command else None,
            "log_path": str(self.log_path) if self.log_path else None,
            "startup_seconds": self.startup_seconds,
            "external": False,
            "impl": self.key.impl if self.key else None,
            "parallel": self.key.parallel if self.key else None,
            "n_threads": self.n_threads,
            "lora": self.lora,
            **({"build": _build_info()} if self.key and self.key.impl == "llama-server" else {}),
        }

    # -- lifecycle
    def start(
        self,
        model_path: str | os.PathLike[str],
        *,
        log_path: str | os.PathLike[str] | None = None,
        n_ctx: int = 8192,
        n_threads: int | None = None,
        chat_format: str | None = None,
        model_alias: str | None = None,
        extra_args: Sequence[str] | None = None,
        startup_timeout: float | None = None,
        impl: str = "llama-server",
        parallel: int = 1,
        lora: Sequence[str | os.PathLike[str]] | None = None,
        cache_ram_mib: int = 0,
    ) -> str:
        """Start the server and block until it answers; return the base URL.

        ``base_url`` has no ``/v1`` suffix. ``model_alias`` (default: the file
        name) is the id the server lists and accepts as ``model``. Raises
        :class:`LocalServerError` if llama_cpp is missing, the process exits
        early (with the log path and its last lines), or it is not ready
        within ``startup_timeout`` seconds.
        """
        if self.running:
            raise LocalServerError(f"server already running at {self.base_url}")
        key = _make_key(model_path, n_ctx, n_threads, chat_format, model_alias, extra_args,
                        impl=impl, parallel=parallel, lora=lora, cache_ram_mib=cache_ram_mib)
        _require_impl(key)
        if not Path(key.model_path).is_file():
            raise LocalServerError(f"model file not found: {key.model_path}")
        return self._start_key(key, log_path, startup_timeout)

    def _start_key(self, key: ServerKey, log_path: str | os.PathLike[str] | None,
                   startup_timeout: float | None) -> str:
        timeout = self.startup_timeout if startup_timeout is None else float(startup_timeout)
        if log_path is None:
            import tempfile

            fd, name = tempfile.mkstemp(prefix="agentic-repro-llama-server-", suffix=".log")
            os.close(fd)
            log_path = name
        self.log_path = Path(log_path)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        last_error: LocalServerError | None = None
        for _attempt in range(3):  # a free port can be taken between probe and bind
            try:
                return self._spawn_and_wait(key, timeout)
            except _PortTaken as e:
                last_error = LocalServerError(str(e))
        assert last_error is not None
        raise last_error

    def _spawn_and_wait(self, key: ServerKey, timeout: float) -> str:
        assert self.log_path is not None
        port = _free_port(self.host)
        self.n_threads = choose_threads(key.n_threads)
        cmd = build_command(key, port, self.host, n_threads=self.n_threads)
        log = open(self.log_path, "ab", buffering=0)  # kept open for the child
        log.write(f"\n# {time.strftime('%Y-%m-%d %H:%M:%S')} starting: {shlex.join(cmd)}\n".encode())
        log_offset = log.tell()
        t0 = time.monotonic()
        try:
            # Launched through harness.embedded.parent_watch so the server exits if this process is killed.
            if cmd[0] == sys.executable:
                watched = [sys.executable, "-m", "agentic_repro.harness.embedded.parent_watch", str(os.getpid()), *cmd[1:]]
            else:  # a binary (llama-server): the watcher runs it as its child
                watched = [sys.executable, "-m", "agentic_repro.harness.embedded.parent_watch", str(os.getpid()), "--exec", *cmd]
            proc = subprocess.Popen(
                watched, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                env=_child_env(), start_new_session=True, close_fds=True,
            )
        except BaseException:
            log.close()
            raise
        self._proc, self._log_fh = proc, log
        self.key, self.port, self.command = key, port, cmd
        self.base_url = f"http://{self.host}:{port}"
        with _live_lock:
            _live.add(self)
        try:
            self._wait_ready(timeout, log_offset)
            if key.lora:
                self.lora = zero_lora_defaults(self.base_url, key.lora)
        except BaseException:
            self.stop()
            raise
        self.startup_seconds = round(time.monotonic() - t0, 3)
        return self.base_url

    def _wait_ready(self, timeout: float, log_offset: int) -> None:
        assert self._proc is not None and self.base_url is not None
        deadline = time.monotonic() + timeout
        delay = 0.1
        while True:
            rc = self._proc.poll()
            if rc is not None:
                tail = _tail(self.log_path)
                new_output = self._log_since(log_offset)
                if "address already in use" in new_output.lower():
                    raise _PortTaken(f"port {self.port} was taken; log: {self.log_path}")
                raise LocalServerError(
                    f"{self._impl_name()} exited with code {rc} during startup; "
                    f"log: {self.log_path}\n--- last lines ---\n{tail}"
                )
            try:
                if self.key is not None and self.key.impl == "llama-server":
                    # /v1/models answers while the model is still loading; /health only once it is ready
                    with urllib.request.urlopen(f"{self.base_url}/health", timeout=2.0) as r:
                        r.read()
                served_models(self.base_url, timeout=2.0)
                return
            except (urllib.error.URLError, ConnectionError, OSError, ValueError):
                pass
            if time.monotonic() >= deadline:
                raise LocalServerError(
                    f"{self._impl_name()} not ready after {timeout:.0f}s at {self.base_url}; "
                    f"log: {self.log_path}\n--- last lines ---\n{_tail(self.log_path)}"
                )
            time.sleep(delay)
            delay = min(delay * 1.5, 1.0)

    def _impl_name(self) -> str:
        return "llama-server" if self.key is not None and self.key.impl == "llama-server" else "llama_cpp.server"

    def _log_since(self, offset: int) -> str:
        try:
            with open(self.log_path, "rb") as f:  # type: ignore[arg-type]
                f.seek(offset)
                return f.read().decode("utf-8", errors="replace")
        except OSError:
            return ""

    def stop(self, timeout: float | None = None) -> int | None:
        """Terminate the process group (SIGTERM, then SIGKILL); return the exit code."""
        proc, self._proc = self._proc, None
        with _live_lock:
            _live.discard(self)
        rc: int | None = None
        if proc is not None:
            wait = self.stop_timeout if timeout is None else float(timeout)
            rc = stop_process_group(proc, timeout=wait, kill_wait=5)
        if self._log_fh is not None:
            with contextlib.suppress(OSError):
                self._log_fh.close()
            self._log_fh = None
        return rc

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        return f"LocalServer({self.base_url or '-'}, {state}, pid={self.pid})"


class _PortTaken(Exception):
    pass


def _build_info() -> dict[str, Any]:
    from agentic_repro.harness.embedded.build import build_info, find_binary

    b = find_binary()
    info = build_info(b) if b else {}
    return {"binary": str(b) if b else None, "sdist_sha256": info.get("sdist_sha256"),
            "binary_sha256": info.get("binary_sha256"), "flags": info.get("flags")}


# --------------------------------------------------------------------------- pool


class ServerPool:
    """Starts at most one server per configuration and reuses it.

    Owned by the run context; :meth:`close` (or leaving the ``with`` block, or
    interpreter exit) stops every server it started. With
    ``AGENTIC_REPRO_LOCAL_URL`` set (or ``external_url=`` given), nothing is
    started and that server is used after checking it serves the model.
    """

    def __init__(self, *, startup_timeout: float = DEFAULT_STARTUP_TIMEOUT,
                 external_url: str | None = None, use_env: bool = True) -> None:
        self.startup_timeout = float(startup_timeout)
        self._external = _normalise_url(external_url) if external_url else None
        self._use_env = use_env
        self._servers: dict[ServerKey, LocalServer] = {}
        self._others: dict[Any, Any] = {}  # servers of other engines (harness.vllm.server), by their own key
        self._lock = threading.Lock()

    def _external_url(self) -> str | None:
        if self._external:
            return self._external
        return external_url() if self._use_env else None

    def get_or_start(
        self,
        model_path: str | os.PathLike[str],
        *,
        log_path: str | os.PathLike[str] | None = None,
        n_ctx: int = 8192,
        n_threads: int | None = None,
        chat_format: str | None = None,
        model_alias: str | None = None,
        extra_args: Sequence[str] | None = None,
        startup_timeout: float | None = None,
        impl: str = "llama-server",
        parallel: int = 1,
        lora: Sequence[str | os.PathLike[str]] | None = None,
        cache_ram_mib: int = 0,
    ) -> str:
        """Base URL (no ``/v1``) of a ready server for this model and settings.

        Thread-safe: concurrent callers wait for the same start. When an external
        URL is configured, it must answer ``/v1/models`` and list the model (by
        alias, path or file name), else :class:`LocalServerError`.
        """
        key = _make_key(model_path, n_ctx, n_threads, chat_format, model_alias, extra_args,
                        impl=impl, parallel=parallel, lora=lora, cache_ram_mib=cache_ram_mib)
        ext = self._external_url()
        if ext:
            self._check_external(ext, key)
            return ext
        with self._lock:
            srv = self._servers.get(key)
            if srv is not None and srv.running:
                return srv.base_url  # type: ignore[return-value]
            _require_impl(key)
            if not Path(key.model_path).is_file():
                raise LocalServerError(f"model file not found: {key.model_path}")
            srv = LocalServer(startup_timeout=self.startup_timeout)
            srv._start_key(key, log_path, startup_timeout)
            self._servers[key] = srv
            return srv.base_url  # type: ignore[return-value]

    async def aget_or_start(self, model_path: str | os.PathLike[str], **kwargs: Any) -> str:
        """:meth:`get_or_start` without blocking the event loop."""
        return await asyncio.to_thread(self.get_or_start, model_path, **kwargs)

    @staticmethod
    def _check_external(url: str, key: ServerKey) -> None:
        try:
            ids = served_models(url, timeout=10.0)
        except Exception as e:  # reported with the URL
            raise LocalServerError(f"{LOCAL_URL_ENV}={url} does not answer /v1/models: {e}") from e
        wanted = {key.model_alias, key.model_path, Path(key.model_path).name}
        if not any(i in wanted or Path(i).name in wanted for i in ids):
            raise LocalServerError(
                f"{LOCAL_URL_ENV}={url} serves {ids}, not the configured model "
                f"{key.model_alias} ({key.model_path}); unset it or point it at a matching server"
            )

    def get_or_start_other(self, key: Any, start: Any) -> Any:
        """A server of another engine (e.g. :class:`agentic_repro.harness.vllm.server.VLLMServer`): ``start()``
        makes a started one the first time ``key`` is asked for (or after it died); :meth:`close` stops it."""
        with self._lock:
            srv = self._others.get(key)
            if srv is None or not srv.running:
                srv = self._others[key] = start()
            return srv

    def servers(self) -> list[LocalServer]:
        return list(self._servers.values())

    def describe(self) -> list[dict[str, Any]]:
        """Records of the pool's servers (or the external URL) for meta.json."""
        ext = self._external_url()
        if ext:
            return [{"base_url": ext, "external": True}]
        return [s.describe() for s in self._servers.values()]

    def close(self) -> None:
        with self._lock:
            servers, self._servers = [*self._servers.values(), *self._others.values()], {}
            self._others = {}
        for s in servers:
            s.stop()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await asyncio.to_thread(self.close)


# --------------------------------------------------------------------------- process default pool

_default_pool: ServerPool | None = None
_default_pool_lock = threading.Lock()


def default_pool() -> ServerPool:
    """The process-wide pool behind :func:`get_or_start` (servers stopped at exit)."""
    global _default_pool
    with _default_pool_lock:
        if _default_pool is None:
            _default_pool = ServerPool()
        return _default_pool


def get_or_start(model_path: str | os.PathLike[str], **kwargs: Any) -> str:
    """``default_pool().get_or_start(...)``: one server per model+settings per process."""
    return default_pool().get_or_start(model_path, **kwargs)


async def aget_or_start(model_path: str | os.PathLike[str], **kwargs: Any) -> str:
    return await default_pool().aget_or_start(model_path, **kwargs)


def stop_all() -> None:
    """Stop the default pool's servers now (they are also stopped at exit)."""
    with _default_pool_lock:
        pool = _default_pool
    if pool is not None:
        pool.close()
