"""vLLM's harness side without vLLM (fast): the server's command line and key, the converted model's record, the
backbone's explicit sampling and identity, the engine worker's protocol against a double worker, the pool's
ownership of both, and the docs' vLLM snippets against the configs and the Makefile."""
from __future__ import annotations

import asyncio
import json
import re
import sys
import textwrap
from pathlib import Path

import pytest

from agentic_repro.harness.backbone import BackboneError
from agentic_repro.harness.embedded.server import ServerPool
from tests.adapter_files import write_gguf_lora, write_peft_dir

ROOT = Path(__file__).resolve().parents[1]


def _cfg(tmp_path: Path, **kw) -> dict:
    import yaml

    cfg = yaml.safe_load((ROOT / "configs/backbone/vllm-cpu.yaml").read_text())
    model = tmp_path / "model"
    model.mkdir(exist_ok=True)
    (model / "config.json").write_text("{}")
    (model / "generation_config.json").write_text(json.dumps({"temperature": 0.7, "top_k": 20}))
    return {**cfg, "model_dir": str(model), **kw}


def test_command_line_has_the_neutral_generation_config_and_the_lora_modules(tmp_path):
    from agentic_repro.harness.vllm.backbone import server_key
    from agentic_repro.harness.vllm.server import build_command

    a, b = write_peft_dir(tmp_path / "a"), write_peft_dir(tmp_path / "b")
    key = server_key(_cfg(tmp_path, adapters={"a": {"path": str(a)}, "b": {"path": str(b)}}), "/m")
    cmd = build_command("/py", key, 1234)
    line = " ".join(cmd)
    assert cmd[:3] == ["/py", "-m", "vllm.entrypoints.openai.api_server"]  # not the broken `vllm` script
    assert "--host 127.0.0.1 --port 1234" in line and "--generation-config vllm" in line
    assert f"--enable-lora --max-lora-rank 16 --max-loras 4 --lora-modules a={a.resolve()} b={b.resolve()}" in line
    assert "--enable-lora" not in " ".join(build_command("/py", server_key(_cfg(tmp_path), "/m"), 1))


def test_adapters_vllm_cannot_serve_are_refused_by_name(tmp_path):
    from agentic_repro.harness.vllm.backbone import server_key

    gguf = write_gguf_lora(tmp_path / "x.gguf")
    with pytest.raises(BackboneError, match="peft folders"):
        server_key(_cfg(tmp_path, adapters={"x": {"path": str(gguf)}}), "/m")
    peft = write_peft_dir(tmp_path / "p")
    with pytest.raises(BackboneError, match="scale 1.0 only"):
        server_key(_cfg(tmp_path, adapters={"p": {"path": str(peft), "scale": 0.5}}), "/m")


class _FakeServer:
    """What the pool hands back: a started server (no process)."""

    running = True
    version = "0.32.0"
    pid = 4242

    def __init__(self, url: str) -> None:
        self.base_url = url
        self.stopped = 0

    def describe(self) -> dict:
        return {"base_url": self.base_url, "pid": self.pid, "command": "python -m vllm... --generation-config vllm"}

    def stop(self) -> None:
        self.stopped += 1
        self.running = False


def test_every_request_sends_the_sampling_vllm_would_otherwise_default(tmp_path, monkeypatch):
    """The body carries EXPLICIT_SAMPLING, meta.json the defaults and the folder's generation config; the cache key
    names the weights, not the port."""
    from agentic_repro.harness.backbones import build_backbone
    from agentic_repro.harness.vllm.server import EXPLICIT_SAMPLING

    monkeypatch.delenv("AGENTIC_REPRO_VLLM_URL", raising=False)
    pool = ServerPool(use_env=False)
    monkeypatch.setattr("agentic_repro.harness.vllm.model.vllm_python", lambda: Path(sys.executable))
    made = []
    monkeypatch.setattr("agentic_repro.harness.vllm.server.start_or_attach",
                        lambda key, **kw: made.append(_FakeServer("http://127.0.0.1:9")) or made[-1])
    bb = asyncio.run(build_backbone(_cfg(tmp_path), run_dir=tmp_path, seed=0, servers=pool))
    body = bb.request_body([{"role": "user", "content": "hi"}], {"temperature": 0.0, "max_tokens": 5}, 3, None)
    assert {k: body[k] for k in EXPLICIT_SAMPLING} == EXPLICIT_SAMPLING and body["n"] == 3
    assert body["temperature"] == 0.0 and body["model"] == "qwen2.5-coder-0.5b-instruct-bf16"
    ident = bb.identity()
    assert ident["kind"] == "vllm-server" and ident["server"]["pid"] == 4242 and ident["vllm_version"] == "0.32.0"
    assert ident["generation_defaults"]["model_generation_config"] == {"temperature": 0.7, "top_k": 20}
    assert "port" not in json.dumps(bb.cache_identity()) and "9" not in json.dumps(bb.cache_identity()).split(":")[-1]
    assert bb.cache_identity()["weights_sha256"] == ident["weights"]["sha256"]
    # a second backbone of the same config reuses the server; closing the pool stops it
    asyncio.run(build_backbone(_cfg(tmp_path), run_dir=tmp_path, seed=0, servers=pool))
    assert len(made) == 1
    pool.close()
    assert made[0].stopped == 1


def _fake_conversion(tmp_path: Path, monkeypatch) -> tuple[str, Path]:
    monkeypatch.setenv("AGENTIC_REPRO_CACHE", str(tmp_path / "cache" / "models"))
    gguf = write_gguf_lora(tmp_path / "base.gguf")
    from agentic_repro.harness.embedded.gguf import file_sha256
    from agentic_repro.harness.vllm import model as vm

    sha = file_sha256(gguf)
    entry = vm._entry(sha)
    (entry / "model").mkdir(parents=True)
    (entry / "model" / "model.safetensors").write_bytes(b"weights")
    (entry / "conversion.json").write_text(json.dumps({"gguf_sha256": sha, "files": ["model.safetensors"],
                                                       "sha256": vm.files_sha256(entry / "model",
                                                                                 ["model.safetensors"])}))
    return str(gguf), entry


def test_a_converted_folder_that_changed_since_its_record_is_refused(tmp_path, monkeypatch):
    from agentic_repro.harness.vllm.model import VLLMNotInstalled, converted_model

    gguf, entry = _fake_conversion(tmp_path, monkeypatch)
    assert converted_model(gguf).folder == entry / "model"
    (entry / "model" / "model.safetensors.sha256").write_text("a sidecar another tool left")  # not the weights
    assert converted_model(gguf).folder == entry / "model"
    (entry / "model" / "model.safetensors").write_bytes(b"weightz")  # same size, other bytes
    with pytest.raises(VLLMNotInstalled, match="hashes to"):
        converted_model(gguf)


def test_a_missing_conversion_names_the_install_step(tmp_path, monkeypatch):
    from agentic_repro.harness.vllm.model import VLLMNotInstalled, converted_model

    monkeypatch.setenv("AGENTIC_REPRO_CACHE", str(tmp_path / "cache" / "models"))
    with pytest.raises(VLLMNotInstalled, match="make install-vllm"):
        converted_model(str(write_gguf_lora(tmp_path / "other.gguf")))


# A double of harness/vllm/worker.py: the same protocol; "die" in a message makes it exit mid-request.
DOUBLE = textwrap.dedent('''
    import json, os, sys
    out = os.fdopen(os.dup(1), "w", buffering=1)
    out.write(json.dumps({"ready": True, "vllm_version": "double"}) + "\\n")
    for line in sys.stdin:
        r = json.loads(line)
        text = r["messages"][-1]["content"]
        if text == "die":
            os._exit(3)
        if text == "bad":
            out.write(json.dumps({"id": r["id"], "error": "ValueError: bad"}) + "\\n")
            continue
        out.write(json.dumps({"id": r["id"], "prompt_tokens": 7, "outputs": [
            {"text": f"{text}|{r['lora']}|{json.dumps(r['sampling'], sort_keys=True)}", "completion_tokens": 2,
             "finish_reason": "stop"} for _ in range(r["n"])]}) + "\\n")
''')


def _engine(tmp_path: Path, adapters: dict | None = None):
    from agentic_repro.harness.ledger import Price
    from agentic_repro.harness.vllm.engine import EngineWorker, VLLMEngineBackbone

    script = tmp_path / "double.py"
    script.write_text(DOUBLE)
    worker = EngineWorker(sys.executable, {}, tmp_path / "engine.log", {}, script=script).start(30)
    paths = {n: str(p) for n, p in (adapters or {}).items()}
    return worker, VLLMEngineBackbone(name="e", model="m", price=Price.from_config(0, "e"), worker=worker,
                                      adapters={n: {"name": n} for n in paths}, adapter_paths=paths)


def test_engine_worker_answers_with_explicit_sampling_and_the_adapter(tmp_path):
    worker, bb = _engine(tmp_path, {"x": tmp_path / "x"})
    try:
        async def main():
            return await asyncio.gather(bb.complete([{"role": "user", "content": "a"}], {"temperature": 0.5}, 2),
                                        bb.complete([{"role": "user", "content": "b"}], {}, 1, adapter="x"))

        r1, r2 = asyncio.run(main())
        assert [c.completion_tokens for c in r1.completions] == [2, 2] and r1.completions[0].prompt_tokens == 7
        text, lora, sampling = r1.completions[0].text.split("|")
        assert lora == "None" and json.loads(sampling)["repetition_penalty"] == 1.0
        assert json.loads(sampling)["temperature"] == 0.5
        assert r2.completions[0].text.split("|")[1] == f"['x', '{tmp_path / 'x'}']"
        with pytest.raises(BackboneError, match="refused"):
            asyncio.run(bb.complete([{"role": "user", "content": "bad"}], {}, 1))
    finally:
        worker.stop()


def test_engine_worker_that_dies_mid_request_is_an_error_never_an_answer(tmp_path):
    worker, bb = _engine(tmp_path)
    with pytest.raises(BackboneError, match="worker exited") as err:
        asyncio.run(bb.complete([{"role": "user", "content": "die"}], {}, 1))
    assert err.value.kind == "connection"
    with pytest.raises(BackboneError, match="not running"):
        asyncio.run(bb.complete([{"role": "user", "content": "a"}], {}, 1))
    worker.stop()


def test_pool_starts_another_engine_once_per_key_and_again_after_it_died():
    pool = ServerPool(use_env=False)
    made = []
    start = lambda: made.append(_FakeServer("u")) or made[-1]
    a = pool.get_or_start_other("k", start)
    assert pool.get_or_start_other("k", start) is a and len(made) == 1
    a.running = False
    assert pool.get_or_start_other("k", start) is not a and len(made) == 2
    pool.close()
    assert made[1].stopped == 1


def test_docs_vllm_snippets_name_real_configs_and_targets():
    """docs/backbones.md's vLLM commands: each backbone= is a config, make install-vllm a target, each override a key
    of that config (so the section cannot drift from them)."""
    import yaml

    doc = (ROOT / "docs/backbones.md").read_text()
    section = doc[doc.index("## vLLM on this machine"):]
    assert "install-vllm:" in (ROOT / "Makefile").read_text() and "make install-vllm" in section
    for name in set(re.findall(r"backbone=([\w.-]+)", section)):
        assert (ROOT / f"configs/backbone/{name}.yaml").is_file(), name
    for name, key in re.findall(r"backbone=([\w-]+) ((?:backbone\.[\w.]+=\S+ ?)+)", section):
        cfg = yaml.safe_load((ROOT / f"configs/backbone/{name}.yaml").read_text())
        for k in re.findall(r"backbone\.([\w.]+)=", key):
            node = cfg
            for part in k.split("."):
                assert isinstance(node, dict) and part in node, (name, k)
                node = node[part]


def test_docs_vllm_bench_rows_name_the_benchs_parts_and_options():
    """The measured table in docs/backbones.md names bench/vllm_serving.py's parts and options as the bench spells
    them (a renamed option fails here, not in a reader's shell)."""
    doc = (ROOT / "docs/backbones.md").read_text()
    section = doc[doc.index("## vLLM on this machine"):]
    src = (ROOT / "bench/vllm_serving.py").read_text()
    rows = re.findall(r"^\| `(\w+)((?: --[\w-]+ \d+)*)`", section, flags=re.MULTILINE)
    assert {part for part, _ in rows} == {"memory", "overhead", "engines"}, rows
    for part, opts in rows:
        assert f'"{part}" in parts' in src, part
        for opt in re.findall(r"--[\w-]+", opts):
            assert f'ap.add_argument("{opt}"' in src, opt


@pytest.mark.parametrize("bad", ["abc", 0, "1.5", True])
def test_a_bad_thread_count_is_a_config_error_naming_the_key(tmp_path, bad):
    """`backbone.server.threads=abc` was a bare TypeError from inside the server's start (seen as a new user)."""
    import asyncio

    from agentic_repro.harness.vllm.backbone import build_vllm_server_backbone

    cfg = {"name": "vllm-cpu", "server": {"threads": bad}}
    with pytest.raises(BackboneError, match="server.threads=") as err:
        asyncio.run(build_vllm_server_backbone(cfg, run_dir=tmp_path, seed=0, servers=None, common={}))
    assert err.value.kind == "config"
