"""LoRA adapters as backbones: the request each server gets, identity, and the guards against the measured hazards.

A stub llama-server / vLLM server (stdlib, loopback) records every request, so the tests assert what reaches
the server: the full ``lora`` field on every llama-server request (a base call sends every adapter at scale 0),
``model: <adapter>`` for vLLM, and no request at all for an unknown adapter.
"""
from __future__ import annotations

import asyncio
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from agentic_repro.harness.adapters import AdapterSpec, adapter_identity, gather_by_adapter, parse_adapters, path_sha256
from tests.adapter_files import write_gguf_lora, write_peft_dir
from agentic_repro.harness.backbone import BackboneError, LlamaServerBackbone, RetryPolicy
from agentic_repro.harness.ledger import Price


class Stub(BaseHTTPRequestHandler):
    """llama-server's endpoints the harness uses; ``n`` choices echo the request's adapter scales."""

    chat: list[dict] = []
    posted_lora: list[list] = []
    adapters: list[dict] = []

    def log_message(self, *a):
        pass

    def _send(self, obj, code=200):
        data = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        if self.path == "/lora-adapters":
            self._send(type(self).adapters)
        elif self.path in ("/v1/models", "/health"):
            self._send({"data": [{"id": "base"}], "status": "ok"})
        else:
            self._send({}, 404)

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if self.path == "/lora-adapters":
            type(self).posted_lora.append(body)
            for entry in body:
                type(self).adapters[entry["id"]]["scale"] = entry["scale"]
            self._send({"success": True})
        elif self.path == "/tokenize":
            self._send({"tokens": list(range(len(body["content"].split())))})
        elif self.path == "/v1/chat/completions":
            type(self).chat.append(body)
            n = body.get("n", 1)
            text = "model=%s lora=%s" % (body["model"], json.dumps(body.get("lora")))
            self._send({"choices": [{"index": i, "finish_reason": "stop",
                                     "message": {"role": "assistant", "content": f"{text} choice {i}"}}
                                    for i in range(n)],
                        "usage": {"prompt_tokens": 7, "completion_tokens": 9}})
        else:
            self._send({}, 404)


@pytest.fixture
def stub(tmp_path: Path):
    files = []
    for name in ("planner", "expert"):
        f = tmp_path / f"{name}.gguf"
        f.write_bytes(b"GGUF" + name.encode() * 8)
        files.append(f)
    Stub.chat, Stub.posted_lora = [], []
    Stub.adapters = [{"id": i, "path": str(f), "scale": 1.0} for i, f in enumerate(files)]
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Stub)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{srv.server_address[1]}", files
    srv.shutdown()


def llama_backbone(url: str, files: list[Path], scale: float = 0.5) -> LlamaServerBackbone:
    specs = {"planner": AdapterSpec("planner", str(files[0]), scale), "expert": AdapterSpec("expert", str(files[1]))}
    from agentic_repro.harness.backbones import _match_lora_ids

    ids = _match_lora_ids(url, specs, "local")
    return LlamaServerBackbone(name="local", model="base", base_url=f"{url}/v1", server_url=url, api_key="x",
                               price=Price(0, 0), max_n=4, retry=RetryPolicy(max_attempts=1),
                               adapters={n: adapter_identity(a) for n, a in specs.items()}, lora_ids=ids)


MSG = [{"role": "user", "content": "hi"}]


def test_base_call_sends_every_adapter_at_scale_zero(stub):
    """A request without `lora` (or `lora: []`) would run through EVERY loaded adapter at 1.0."""
    url, files = stub
    asyncio.run(llama_backbone(url, files).complete(MSG, {"temperature": 0}, 1))
    assert Stub.chat[-1]["lora"] == [{"id": 0, "scale": 0.0}, {"id": 1, "scale": 0.0}]
    assert Stub.chat[-1]["model"] == "base"


def test_chosen_adapter_at_its_scale_others_zero(stub):
    url, files = stub
    b = llama_backbone(url, files, scale=0.5)
    asyncio.run(b.complete(MSG, {}, 1, adapter="planner"))
    asyncio.run(b.complete(MSG, {}, 1, adapter="expert"))
    assert Stub.chat[0]["lora"] == [{"id": 0, "scale": 0.5}, {"id": 1, "scale": 0.0}]
    assert Stub.chat[1]["lora"] == [{"id": 0, "scale": 0.0}, {"id": 1, "scale": 1.0}]


def test_unknown_adapter_is_an_error_before_any_request(stub):
    url, files = stub
    b = llama_backbone(url, files)
    with pytest.raises(BackboneError, match="unknown adapter 'planer'") as ei:
        asyncio.run(b.complete(MSG, {}, 1, adapter="planer"))
    assert ei.value.kind == "unknown_adapter" and ei.value.attempts == 0 and Stub.chat == []
    with pytest.raises(BackboneError, match="unknown adapter"):
        b.adapter_identity("planer")


def test_adapter_not_loaded_by_the_server_is_refused(stub, tmp_path):
    from agentic_repro.harness.backbones import _match_lora_ids

    url, _ = stub
    other = tmp_path / "other.gguf"
    other.write_bytes(b"GGUF")
    with pytest.raises(BackboneError, match="not loaded by the server") as ei:
        _match_lora_ids(url, {"other": AdapterSpec("other", str(other))}, "local")
    assert ei.value.kind == "unknown_adapter"


def test_server_start_zeroes_every_default_scale(stub):
    """POST /lora-adapters sets the server-wide default: at start every adapter goes to 0, and it is checked."""
    from agentic_repro.harness.embedded.server import zero_lora_defaults

    url, files = stub
    after = zero_lora_defaults(url, [str(f) for f in files])
    assert Stub.posted_lora == [[{"id": 0, "scale": 0.0}, {"id": 1, "scale": 0.0}]]
    assert [a["scale"] for a in after] == [0.0, 0.0]


def test_n_choices_each_counted_and_split_at_parallel(stub):
    """llama-server's usage counts only the first choice: the others are counted (re-tokenised + EOS)."""
    url, files = stub
    res = asyncio.run(llama_backbone(url, files).complete(MSG, {"seed": 10, "max_tokens": 50}, 6, adapter="expert"))
    assert len(res.completions) == 6
    sent = sorted(Stub.chat, key=lambda b: b["seed"])  # the two requests go out concurrently
    assert [b.get("n", 1) for b in sent] == [4, 2] and [b["seed"] for b in sent] == [10, 14]
    assert all(b["lora"] == [{"id": 0, "scale": 0.0}, {"id": 1, "scale": 1.0}] for b in Stub.chat)
    first, second = res.completions[0], res.completions[1]
    assert first.completion_tokens == 9 and first.prompt_tokens == 7
    assert second.completion_tokens == len(second.text.split()) + 1 and second.prompt_tokens == 0


def test_vllm_adapter_is_the_requests_model(stub, tmp_path):
    """vLLM (`--enable-lora --lora-modules planner=/path`) selects the adapter by the request's model."""
    url, _ = stub
    peft_dir = write_peft_dir(tmp_path / "planner", base="Qwen/Qwen2.5-7B-Instruct")
    from agentic_repro.harness.backbones import build_backbone

    cfg = {"name": "vllm", "kind": "openai", "model": "Qwen/Qwen2.5-7B-Instruct", "base_url": f"{url}/v1",
           "api_key_env": None, "price": 0, "adapters": {"planner": {"path": str(peft_dir)}},
           "retry": {"max_attempts": 1, "timeout_s": 5}}
    b = asyncio.run(build_backbone(cfg, run_dir=tmp_path, seed=0))
    asyncio.run(b.complete(MSG, {}, 1, adapter="planner"))
    asyncio.run(b.complete(MSG, {}, 1))
    assert [c["model"] for c in Stub.chat] == ["planner", "Qwen/Qwen2.5-7B-Instruct"]
    assert "lora" not in Stub.chat[0]
    ident = b.adapter_identity("planner")
    assert ident["base_model"] == "Qwen/Qwen2.5-7B-Instruct" and ident["format"] == "peft"
    assert ident["sha256"] == path_sha256(peft_dir) and len(ident["sha256"]) == 64
    with pytest.raises(BackboneError, match="unknown adapter"):
        asyncio.run(b.complete(MSG, {}, 1, adapter="executor"))
    assert len(Stub.chat) == 2


def test_identity_records_sha256_and_training_data_hash(tmp_path):
    f = tmp_path / "a.gguf"
    f.write_bytes(b"not really gguf")
    (tmp_path / "a.gguf.json").write_text(json.dumps({"base_model": "qwen2.5-coder-0.5b",
                                                      "training_data_sha256": "ab" * 32}))
    ident = adapter_identity(AdapterSpec("a", str(f), 0.7), served_base_sha256="cd" * 32)
    import hashlib

    assert ident["sha256"] == hashlib.sha256(b"not really gguf").hexdigest()
    assert ident["training_data_sha256"] == "ab" * 32 and ident["base_model"] == "qwen2.5-coder-0.5b"
    assert ident["scale"] == 0.7 and ident["served_base_sha256"] == "cd" * 32 and ident["name"] == "a"
    # a directory's hash does not change when it is hashed again (no sidecar written into it)
    d = tmp_path / "peft"
    d.mkdir()
    (d / "w.bin").write_bytes(b"w")
    assert path_sha256(d) == path_sha256(d) and sorted(p.name for p in d.iterdir()) == ["w.bin"]


def test_parse_adapters_validates(tmp_path):
    f = write_gguf_lora(tmp_path / "x.gguf")
    assert parse_adapters({"x": {"path": str(f)}})["x"].scale == 1.0
    assert parse_adapters({"x": str(f)})["x"].path == str(f.resolve())
    with pytest.raises(BackboneError, match="does not exist"):
        parse_adapters({"y": {"path": str(tmp_path / "missing.gguf")}})
    with pytest.raises(BackboneError, match="unknown keys"):
        parse_adapters({"x": {"path": str(f), "scal": 2}})


@pytest.mark.parametrize("scale", ["abc", None, True, float("nan"), float("inf")])
def test_a_bad_adapter_scale_names_the_key(tmp_path, scale):
    f = write_gguf_lora(tmp_path / "x.gguf")
    # before: "could not convert string to float: 'abc'", naming no key
    with pytest.raises(BackboneError, match=r"backbone 'local': adapters\.x\.scale=.* is not allowed: a finite number"):
        parse_adapters({"x": {"path": str(f), "scale": scale}}, "local")
    assert parse_adapters({"x": {"path": str(f), "scale": "0.5"}})["x"].scale == 0.5


def _cut(path: Path, n: int) -> Path:
    path.write_bytes(path.read_bytes()[:n])
    return path


@pytest.mark.parametrize("damage,why", [
    (lambda p: p.write_bytes(b""), "empty"),
    (lambda p: p.write_bytes(b"GGUF"), "truncated GGUF header"),
    (lambda p: p.write_bytes(b"PK\x03\x04" + b"\0" * 64), "bad magic"),
    (lambda p: _cut(p, len(p.read_bytes()) - 4), "truncated"),
])
def test_an_empty_or_corrupt_gguf_adapter_is_refused_naming_the_file(tmp_path, damage, why):
    f = write_gguf_lora(tmp_path / "planner.gguf")
    damage(f)
    with pytest.raises(BackboneError, match="adapters.planner.path") as info:  # before: accepted, failed at load
        parse_adapters({"planner": {"path": str(f)}}, "local")
    assert str(f) in str(info.value) and why in str(info.value) and "fix:" in str(info.value)


@pytest.mark.parametrize("damage,why", [
    (lambda d: (d / "adapter_config.json").write_text("{"), "adapter_config.json is damaged"),
    (lambda d: (d / "adapter_config.json").unlink(), "no adapter_config.json"),
    (lambda d: (d / "adapter_model.safetensors").write_bytes(b""), "adapter_model.safetensors is empty"),
    (lambda d: (d / "adapter_model.safetensors").unlink(), "no weights file"),
    (lambda d: _cut(d / "adapter_model.safetensors", 40), "truncated"),
    (lambda d: _cut(d / "adapter_model.safetensors", (d / "adapter_model.safetensors").stat().st_size - 2),
     "truncated"),
])
def test_an_empty_or_corrupt_peft_adapter_is_refused_naming_the_folder(tmp_path, damage, why):
    d = write_peft_dir(tmp_path / "planner")
    damage(d)
    with pytest.raises(BackboneError, match="adapters.planner.path") as info:
        parse_adapters({"planner": {"path": str(d)}}, "vllm")
    assert str(d) in str(info.value) and why in str(info.value)


def test_adapters_need_llama_server(tmp_path, monkeypatch):
    from agentic_repro.harness import backbones

    f = write_gguf_lora(tmp_path / "x.gguf")
    monkeypatch.setattr("agentic_repro.harness.embedded.gguf.resolve_gguf", lambda spec: f)
    cfg = {"name": "local", "kind": "embedded", "model": "m", "price": 0, "gguf": {"path": str(f)},
           "server": {"impl": "python"}, "adapters": {"x": {"path": str(f)}}}
    with pytest.raises(BackboneError, match="impl=llama-server"):
        asyncio.run(backbones.build_backbone(cfg, run_dir=tmp_path, seed=0, servers=object()))


def test_gather_by_adapter_runs_one_adapter_at_a_time_in_input_order():
    active: list[str | None] = []
    log: list[tuple[str | None, set]] = []

    def call(adapter, i):
        async def run():
            active.append(adapter)
            log.append((adapter, set(active)))
            await asyncio.sleep(0.01)
            active.remove(adapter)
            return f"{adapter}:{i}"
        return run

    calls = [("a", 0), ("b", 1), ("a", 2), (None, 3), ("b", 4)]
    out = asyncio.run(gather_by_adapter([(a, call(a, i)) for a, i in calls]))
    assert out == ["a:0", "b:1", "a:2", "None:3", "b:4"]
    assert all(len(s) == 1 for _, s in log)  # never two adapters in flight together
    assert [a for a, _ in log] == ["a", "a", "b", "b", None]


def test_through_the_llm_client_adapter_reaches_server_ledger_and_cache(stub, tmp_path):
    """ctx.generate(adapter=...) -> LLMClient -> the backbone: the lora field reaches the server, the ledger line
    carries the adapter and its sha256, and an adapter's answer is never replayed for the base (or vice versa)."""
    from agentic_repro.harness.cache import ResponseCache
    from agentic_repro.harness.llm import LLMClient

    url, files = stub
    bb = llama_backbone(url, files)
    records = []
    cache = ResponseCache(tmp_path / "c.sqlite", mode="read-write")
    llm = LLMClient(bb, cache, run_id="r", method="m", defaults={"temperature": 0.0, "max_tokens": 8})

    async def go(adapter):
        out = await llm.generate(MSG, stage="s", problem_id="p", seed=1, sink=records.append, adapter=adapter)
        return out[0].text

    planner = asyncio.run(go("planner"))
    base = asyncio.run(go(None))
    again = asyncio.run(go("planner"))
    assert '"scale": 0.5' in planner and '"scale": 0.5' not in base and again == planner
    assert len(Stub.chat) == 2  # the third call was a cache hit of the planner's own answer
    assert Stub.chat[0]["lora"] == [{"id": 0, "scale": 0.5}, {"id": 1, "scale": 0.0}]
    by_adapter = {r.adapter: r for r in records if not r.cache_hit}
    assert by_adapter["planner"].adapter_sha256 == bb.adapter_identity("planner")["sha256"]
    assert by_adapter[None].adapter_sha256 is None
    with pytest.raises(BackboneError, match="unknown adapter"):
        asyncio.run(go("critic"))
    assert len(Stub.chat) == 2


def test_a_changed_adapter_scale_is_not_served_from_the_cache(stub, tmp_path):
    """The LoRA scale changes the output: an answer cached at scale 1.0 must not replay at 0.5."""
    from agentic_repro.harness.cache import ResponseCache
    from agentic_repro.harness.llm import LLMClient

    url, files = stub
    cache = ResponseCache(tmp_path / "c.sqlite", mode="read-write")
    texts = []
    for scale in (1.0, 0.5, 1.0):
        llm = LLMClient(llama_backbone(url, files, scale=scale), cache, run_id="r", method="m",
                        defaults={"temperature": 0.0})
        out = asyncio.run(llm.generate(MSG, stage="s", problem_id="p", seed=1, sink=lambda r: None,
                                       adapter="planner"))
        texts.append(out[0].text)
    assert len(Stub.chat) == 2 and texts[0] == texts[2] != texts[1]
