"""Tests for harness.embedded.server.

Fast tests replace the llama.cpp server by a tiny stdlib HTTP server (or a
process that dies / hangs). Slow tests start the real server (llama-server by
default, llama-cpp-python's with impl=python) on the default 0.5B model, or use
``AGENTIC_REPRO_LOCAL_URL`` if it is set.
"""
from __future__ import annotations

import asyncio
import importlib.util
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from unittest import mock

import pytest

from agentic_repro.harness.embedded import server as ls
from agentic_repro.harness.embedded.server import LocalServer, LocalServerError, ServerPool

FAKE_SERVER = textwrap.dedent(
    """
    import json, sys
    from http.server import BaseHTTPRequestHandler, HTTPServer
    port, alias = int(sys.argv[1]), sys.argv[2]
    class H(BaseHTTPRequestHandler):
        def do_GET(self):
            body = json.dumps({"object": "list", "data": [{"id": alias}]}).encode()
            self.send_response(200 if self.path in ("/v1/models", "/health") else 404)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body)
        def log_message(self, *a):
            print("fake:", *a, flush=True)
    print("fake server up", flush=True)
    HTTPServer(("127.0.0.1", port), H).serve_forever()
    """
)


@pytest.fixture
def model_file(tmp_path: Path) -> Path:
    p = tmp_path / "m.gguf"
    p.write_bytes(b"GGUF" + b"\x00" * 16)
    return p


@pytest.fixture
def fake_cmd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Make the module launch `script` instead of llama_cpp.server."""
    monkeypatch.delenv(ls.LOCAL_URL_ENV, raising=False)

    def use(script: str) -> None:
        f = tmp_path / "fake_server.py"
        f.write_text(script)
        monkeypatch.setattr(
            ls, "build_command",
            lambda key, port, host=ls.HOST, n_threads=None: [sys.executable, str(f), str(port), key.model_alias],
        )
        monkeypatch.setattr(ls, "_require_impl", lambda key: None)

    return use


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie still answers kill(0); check its state
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


# --------------------------------------------------------------------------- fast


def test_command_line_has_required_flags(model_file: Path) -> None:
    key = ls._make_key(model_file, 4096, 2, None, "alias-x", ["--n_batch", "256"], impl="python")
    cmd = ls.build_command(key, 12345)
    assert cmd[:3] == [sys.executable, "-m", "llama_cpp.server"]
    joined = " ".join(cmd)
    assert "--interrupt_requests False" in joined
    assert "--host 127.0.0.1" in joined and "--port 12345" in joined
    assert "--n_ctx 4096" in joined and "--n_threads 2" in joined
    assert f"--model {model_file.resolve()}" in joined and "--model_alias alias-x" in joined
    assert cmd[-2:] == ["--n_batch", "256"] and "--chat_format" not in cmd
    key2 = ls._make_key(model_file, 4096, None, "chatml", None, None, impl="python")
    assert key2.model_alias == "m.gguf" and key2.n_threads == "auto"
    assert ls.build_command(key2, 1)[-2:] == ["--chat_format", "chatml"]
    assert ls.build_command(key2, 1, n_threads=3)[ls.build_command(key2, 1, n_threads=3).index("--n_threads") + 1] == "3"


def test_llama_server_command_line(model_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_bin = tmp_path / "llama-server"
    fake_bin.write_text("#!/bin/sh\n")
    fake_bin.chmod(0o755)
    monkeypatch.setenv("AGENTIC_REPRO_LLAMA_SERVER", str(fake_bin))
    a, b = tmp_path / "a.gguf", tmp_path / "b.gguf"
    key = ls._make_key(model_file, 4096, 1, None, "alias-x", ["--seed", "1"], parallel=3, lora=[a, b])
    cmd = ls.build_command(key, 12345)
    joined = " ".join(cmd)
    assert cmd[0] == str(fake_bin)
    assert "--ctx-size 12288" in joined and "--parallel 3" in joined  # n_ctx per slot
    assert "--threads 1" in joined and "--threads-batch 1" in joined and "--no-webui" in joined
    assert f"--lora {a} --lora {b}" in joined and cmd[-2:] == ["--seed", "1"]
    assert "--alias alias-x" in joined and "--host 127.0.0.1" in joined and "--port 12345" in joined
    # parallel and adapters are part of what makes two servers interchangeable
    assert ls._make_key(model_file, 4096, 1, None, "alias-x", None, parallel=1) != \
        ls._make_key(model_file, 4096, 1, None, "alias-x", None, parallel=2)
    with pytest.raises(LocalServerError, match="impl=python"):
        ls._make_key(model_file, 4096, 1, None, None, None, impl="python", parallel=2)
    with pytest.raises(LocalServerError, match="not one of"):
        ls._make_key(model_file, 4096, 1, None, None, None, impl="vllm")


def test_threads_rule_leaves_busy_cores_alone() -> None:
    assert ls.choose_threads("auto", cores=2, load=0.0) == 1  # one core for the harness itself
    assert ls.choose_threads("auto", cores=2, load=1.9) == 1
    assert ls.choose_threads("auto", cores=16, load=0.1) == 15
    assert ls.choose_threads("auto", cores=16, load=4.0) == 11
    assert ls.choose_threads(None, cores=1, load=3.0) == 1
    assert ls.choose_threads(6, cores=2, load=5.0) == 6  # an explicit number is used as given


def test_free_threads_take_every_idle_core_and_leave_busy_ones() -> None:
    """``free``: one harness process waiting on its server gives it every idle core (2 of an idle 2-core machine,
    where ``auto`` keeps one for the harness); cores busy now are left alone; without /proc/stat, the load average."""
    assert ls.choose_threads("free", cores=2, busy=0.1) == 2
    assert ls.choose_threads("free", cores=2, busy=0.9) == 1
    assert ls.choose_threads("free", cores=2, busy=2.0) == 1
    assert ls.choose_threads("free", cores=16, busy=3.2) == 13
    assert ls.choose_threads("auto", cores=2, load=0.0, busy=0.0) == 1      # auto ignores the sample
    with mock.patch.object(ls, "busy_cores", return_value=None):
        assert ls.choose_threads("free", cores=2, load=0.1) == 2
        assert ls.choose_threads("free", cores=2, load=1.2) == 1
    assert ls._make_key(Path("/x.gguf"), 512, "free", None, None, None).n_threads == "free"
    assert ls._make_key(Path("/x.gguf"), 512, None, None, None, None).n_threads == "auto"
    with pytest.raises(LocalServerError, match=r"server.n_threads='bogus': give a number, auto or free"):
        ls._make_key(Path("/x.gguf"), 512, "bogus", None, None, None)
    with pytest.raises(LocalServerError, match=r"server.cache_ram_mib='lots': give MiB as a number"):
        ls._make_key(Path("/x.gguf"), 512, 1, None, None, None, cache_ram_mib="lots")


def test_busy_cores_reads_a_busy_loop_from_proc_stat() -> None:
    """The sample sees a core spinning beside it (the load average would show it only a minute later)."""
    idle = ls.busy_cores(0.3)
    assert idle is not None and 0.0 <= idle <= (os.cpu_count() or 1)
    spin = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.3)
        busy = ls.busy_cores(0.5)
    finally:
        spin.kill()
        spin.wait()
    assert busy is not None and busy >= 0.8, (idle, busy)


def test_missing_llama_server_binary_is_explained(model_file: Path, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ls.LOCAL_URL_ENV, raising=False)
    monkeypatch.setenv("AGENTIC_REPRO_LLAMA_SERVER", str(tmp_path / "absent"))
    with pytest.raises(LocalServerError, match="make install-server"):
        LocalServer().start(model_file)
    with pytest.raises(LocalServerError, match="make install-server"):
        ServerPool().get_or_start(model_file)


def test_child_env_drops_server_setting_names(monkeypatch: pytest.MonkeyPatch) -> None:
    for k in ("PORT", "HOST", "N_GPU_LAYERS", "api_key", "SEED", "CONFIG_FILE", "LLAMA_ARG_N_PARALLEL"):
        monkeypatch.setenv(k, "1")
    monkeypatch.setenv("AGENTIC_REPRO_KEEP", "yes")
    env = ls._child_env()
    assert not {"PORT", "HOST", "N_GPU_LAYERS", "api_key", "SEED", "CONFIG_FILE", "LLAMA_ARG_N_PARALLEL"} & set(env)
    assert env["AGENTIC_REPRO_KEEP"] == "yes" and "PATH" in env


def test_external_url_normalised(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ls.LOCAL_URL_ENV, " http://127.0.0.1:9/v1/ ")
    assert ls.external_url() == "http://127.0.0.1:9"
    monkeypatch.delenv(ls.LOCAL_URL_ENV)
    assert ls.external_url() is None


def test_missing_llama_cpp_is_explained(model_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ls.LOCAL_URL_ENV, raising=False)
    monkeypatch.setattr(ls.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(LocalServerError, match="make install-python-server"):
        LocalServer().start(model_file, impl="python")
    with pytest.raises(LocalServerError, match="make install-python-server"):
        ServerPool().get_or_start(model_file, impl="python")


def test_early_exit_reports_log(fake_cmd, model_file: Path, tmp_path: Path) -> None:
    fake_cmd("import sys\nprint('loading model... failed: bad magic', flush=True)\nsys.exit(3)\n")
    log = tmp_path / "run" / "server.log"
    with pytest.raises(LocalServerError) as ei:
        LocalServer().start(model_file, log_path=log)
    msg = str(ei.value)
    assert "exited with code 3" in msg and str(log) in msg and "bad magic" in msg
    assert "starting:" in log.read_text()


def test_startup_timeout_kills_process(fake_cmd, model_file: Path, tmp_path: Path) -> None:
    fake_cmd("import time\nprint('hanging', flush=True)\ntime.sleep(60)\n")
    srv = LocalServer(startup_timeout=1.0)
    with pytest.raises(LocalServerError, match="not ready after 1s"):
        srv.start(model_file, log_path=tmp_path / "s.log")
    assert not srv.running


def test_pool_reuses_and_stops(fake_cmd, model_file: Path, tmp_path: Path) -> None:
    fake_cmd(FAKE_SERVER)
    with ServerPool() as pool:
        u1 = pool.get_or_start(model_file, log_path=tmp_path / "a.log", n_ctx=1024, n_threads=1)
        u2 = pool.get_or_start(model_file, log_path=tmp_path / "b.log", n_ctx=1024, n_threads=1)
        assert u1 == u2 and u1.startswith("http://127.0.0.1:")
        assert ls.served_models(u1) == ["m.gguf"]
        u3 = pool.get_or_start(model_file, log_path=tmp_path / "c.log", n_ctx=2048, n_threads=1)
        assert u3 != u1 and len(pool.servers()) == 2
        pids = [s.pid for s in pool.servers()]
        assert all(_alive(p) for p in pids)
        d = pool.describe()
        assert {x["base_url"] for x in d} == {u1, u3} and not any(x["external"] for x in d)
    assert not any(_alive(p) for p in pids)
    assert pool.servers() == []


def test_pool_concurrent_callers_share_one_start(fake_cmd, model_file: Path, tmp_path: Path) -> None:
    fake_cmd(FAKE_SERVER)

    async def main() -> list[str]:
        async with ServerPool() as pool:
            urls = await asyncio.gather(*[
                pool.aget_or_start(model_file, log_path=tmp_path / "x.log", n_ctx=512, n_threads=1)
                for _ in range(4)
            ])
            assert len(pool.servers()) == 1
            return urls

    urls = asyncio.run(main())
    assert len(set(urls)) == 1


def test_external_url_is_used_and_checked(fake_cmd, model_file: Path, tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    fake_cmd(FAKE_SERVER)
    with LocalServer() as shared:
        url = shared.start(model_file, log_path=tmp_path / "shared.log", model_alias="the-model")
        monkeypatch.setenv(ls.LOCAL_URL_ENV, url + "/v1")
        pool = ServerPool()
        assert pool.get_or_start(model_file, model_alias="the-model") == url
        assert pool.servers() == []  # nothing started
    monkeypatch.setenv(ls.LOCAL_URL_ENV, "http://127.0.0.1:9")
    with pytest.raises(LocalServerError, match="does not answer"):
        ServerPool().get_or_start(model_file)


def test_external_url_wrong_model_refused(fake_cmd, model_file: Path, tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    fake_cmd(FAKE_SERVER)
    with LocalServer() as shared:
        url = shared.start(model_file, log_path=tmp_path / "shared.log", model_alias="other-model")
        monkeypatch.setenv(ls.LOCAL_URL_ENV, url)
        with pytest.raises(LocalServerError, match="not the configured model"):
            ServerPool().get_or_start(model_file, model_alias="wanted")
        # an explicit external URL on the pool wins over the environment
        assert ServerPool(external_url=url, use_env=False).describe() == [
            {"base_url": url, "external": True}
        ]


# --------------------------------------------------------------------------- slow: the real server

DEFAULT_MODEL = "qwen2.5-coder-0.5b-instruct-q4_k_m"
MESSAGES = [
    {"role": "system", "content": "You are a concise assistant."},
    {"role": "user", "content": "Write one sentence about the number 7."},
]


@pytest.fixture(scope="module")
def real_server(tmp_path_factory: pytest.TempPathFactory):
    """llama-server (the default impl, built by `make install-server`) with 1 slot, 1 thread."""
    from agentic_repro.harness.embedded.gguf import KNOWN_MODELS, resolve_gguf

    spec = KNOWN_MODELS[DEFAULT_MODEL]
    path = resolve_gguf(spec)
    log = tmp_path_factory.mktemp("llama") / "server.log"
    with ServerPool() as pool:
        url = pool.get_or_start(path, log_path=log, n_ctx=4096, n_threads=1, model_alias=spec.name)
        servers = pool.servers()
        yield url, spec.name
    for s in servers:  # started by us -> stopped at the end
        assert not s.running


@pytest.fixture
def client(real_server):
    from openai import OpenAI

    url, _ = real_server
    return OpenAI(base_url=f"{url}/v1", api_key="local", max_retries=0, timeout=300)


@pytest.mark.slow
def test_real_list_models(real_server) -> None:
    url, alias = real_server
    assert alias in ls.served_models(url)


@pytest.mark.slow
def test_real_temperature_zero_is_deterministic(client, real_server) -> None:
    _, model = real_server
    outs = [
        client.chat.completions.create(model=model, messages=MESSAGES, temperature=0, max_tokens=32)
        for _ in range(2)
    ]
    texts = [o.choices[0].message.content for o in outs]
    assert texts[0] and texts[0] == texts[1]
    assert outs[0].usage.completion_tokens > 0 and outs[0].usage.prompt_tokens > 10


@pytest.mark.slow
def test_real_seed_reproduces_sample(client, real_server) -> None:
    _, model = real_server

    def sample(seed: int) -> str:
        r = client.chat.completions.create(model=model, messages=MESSAGES, temperature=0.7,
                                           seed=seed, max_tokens=32)
        return r.choices[0].message.content

    a, b = sample(1234), sample(1234)
    assert a and a == b


@pytest.mark.slow
def test_real_logprobs(client, real_server) -> None:
    _, model = real_server
    r = client.chat.completions.create(model=model, messages=MESSAGES, temperature=0, max_tokens=4,
                                       logprobs=True, top_logprobs=2)
    content = r.choices[0].logprobs.content
    assert content and all(t.logprob <= 0.0 for t in content)


@pytest.mark.slow
def test_real_concurrent_requests_are_not_truncated(real_server) -> None:
    """Guards --interrupt_requests False: the default cuts the first request to 0 tokens."""
    from openai import AsyncOpenAI

    url, model = real_server

    async def main():
        c = AsyncOpenAI(base_url=f"{url}/v1", api_key="local", max_retries=0, timeout=300)
        return await asyncio.gather(*[
            c.chat.completions.create(model=model, temperature=0, max_tokens=12,
                                      messages=[{"role": "user", "content": f"Count from {i} to {i + 9}."}])
            for i in range(3)
        ])

    outs = asyncio.run(main())
    assert all(o.usage.completion_tokens >= 5 for o in outs)


@pytest.mark.slow
def test_real_embedded_backbone_through_the_http_client(tmp_path: Path) -> None:
    """The shipped `local` config end to end: llama-server with parallel slots, n>1 counted per choice,
    and parallel: 1 bitwise-deterministic at temperature 0."""
    from agentic_repro.harness.backbones import build_backbone
    from tests.conftest import compose

    cfg = compose(["backbone=local", "backbone.server.n_threads=1", "backbone.server.n_ctx=2048"])["backbone"]
    assert cfg["server"]["impl"] == "llama-server" and cfg["supports_n"]

    async def main():
        async with ServerPool(use_env=False) as pool:
            bb = await build_backbone(cfg, run_dir=tmp_path, seed=0, servers=pool)
            assert bb.identity()["server"] == {"impl": "llama-server", "parallel": cfg["server"]["parallel"]}
            assert bb.cache_identity()["server"]["parallel"] == cfg["server"]["parallel"]
            many = await bb.complete(MESSAGES, {"temperature": 0.8, "max_tokens": 24, "seed": 7}, 3)
            single = await bb.complete(MESSAGES, {"temperature": 0.8, "max_tokens": 24, "seed": 8}, 1)
            await bb.aclose()
            one = await build_backbone({**cfg, "server": {**cfg["server"], "parallel": 1}}, run_dir=tmp_path,
                                       seed=0, servers=pool)
            greedy = [await one.complete(MESSAGES, {"temperature": 0, "max_tokens": 16}, 1) for _ in range(2)]
            await one.aclose()
            return many, single, greedy

    many, single, greedy = asyncio.run(main())
    assert len(many.completions) == 3 and len({c.text for c in many.completions}) >= 2
    # choice 1 of seed 7 is the server's seed 8: same text, and its own count matches the server's usage for it
    assert many.completions[1].text == single.completions[0].text
    assert many.completions[1].completion_tokens == single.completions[0].completion_tokens
    assert greedy[0].completions[0].text == greedy[1].completions[0].text


@pytest.mark.slow
def test_real_python_server_concurrent_requests_are_not_truncated(tmp_path: Path) -> None:
    """server.impl=python (the optional llama-cpp-python server, kept for the bench): guards
    --interrupt_requests False, whose default cuts the first request to 0 tokens."""
    if importlib.util.find_spec("llama_cpp") is None:
        pytest.skip("server.impl=python is optional and not installed here: `make install-python-server`")
    from openai import AsyncOpenAI

    from agentic_repro.harness.embedded.gguf import KNOWN_MODELS, resolve_gguf

    spec = KNOWN_MODELS[DEFAULT_MODEL]
    with ServerPool(use_env=False) as pool:
        url = pool.get_or_start(resolve_gguf(spec), log_path=tmp_path / "py.log", n_ctx=2048, n_threads=1,
                                model_alias=spec.name, impl="python")

        async def main():
            c = AsyncOpenAI(base_url=f"{url}/v1", api_key="local", max_retries=0, timeout=300)
            return await asyncio.gather(*[
                c.chat.completions.create(model=spec.name, temperature=0, max_tokens=8,
                                          messages=[{"role": "user", "content": f"Count from {i} to {i + 9}."}])
                for i in range(2)
            ])

        outs = asyncio.run(main())
    assert all(o.usage.completion_tokens >= 4 for o in outs)


@pytest.mark.slow
def test_real_prompt_cache_restores_an_evicted_prefix_with_the_same_answer(tmp_path: Path) -> None:
    """Table 1's embedded sizes set `cache_ram_mib` (table1.yaml) and keep it out of a run's identity: a task read
    once is restored from host RAM after its slot held another prompt, instead of being read again, and the answer
    is the one a fresh read gives (greedy, one slot)."""
    import httpx

    from agentic_repro.harness.embedded.gguf import KNOWN_MODELS, resolve_gguf

    spec = KNOWN_MODELS[DEFAULT_MODEL]
    task = " ".join(f"Box {i} holds {i * 3} {['red', 'blue', 'green'][i % 3]} marbles." for i in range(30))
    asks = [f"{task}\n\nHow many boxes are there?", "Write one sentence about the sea.",
            f"{task}\n\nWhich colour are the marbles in box 4?"]
    seen = {}
    for mib in (0, 256):
        with ServerPool(use_env=False) as pool:
            url = pool.get_or_start(resolve_gguf(spec), log_path=tmp_path / f"cache{mib}.log", n_ctx=2048,
                                    n_threads=1, model_alias=spec.name, cache_ram_mib=mib)
            replies = [httpx.post(f"{url}/v1/chat/completions", timeout=300, json={
                "model": spec.name, "temperature": 0, "max_tokens": 16,
                "messages": [{"role": "user", "content": ask}]}).json() for ask in asks]
        last = replies[-1]
        seen[mib] = (last["choices"][0]["message"]["content"], last["timings"]["prompt_n"],
                     last["usage"]["prompt_tokens"])
    (fresh, read_fresh, tokens), (cached, read_cached, _) = seen[0], seen[256]
    assert fresh and cached == fresh
    assert tokens > 300 and read_fresh > tokens - 40      # without the cache: all but the chat template's start
    assert read_cached < 40                               # with it: only what follows the task
