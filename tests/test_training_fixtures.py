"""The tiny model and LoRA fixtures (training/fixtures.py) are real llama.cpp-loadable files with real identities."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentic_repro.harness.embedded.gguf import file_sha256, read_gguf_metadata
from agentic_repro.training.fixtures import TINY_CONFIG, lora_gguf, tiny_base, tiny_base_gguf
from agentic_repro.training.identity import identity_path, read_adapter_identity


@pytest.fixture(scope="module")
def tiny():
    return tiny_base()


def test_tiny_base_is_a_qwen2_gguf_with_the_real_vocabulary(tiny):
    meta = read_gguf_metadata(tiny.gguf)
    assert meta["architecture"] == "qwen2"
    assert meta["kv"]["tokenizer.ggml.tokens"]["length"] == TINY_CONFIG["vocab_size"] == 151936
    assert "im_start" in meta["kv"]["tokenizer.chat_template"]
    assert meta["kv"]["qwen2.embedding_length"] == 64 and meta["kv"]["qwen2.block_count"] == 2
    assert (tiny.hf_dir / "config.json").is_file() and (tiny.hf_dir / "tokenizer.json").is_file()
    assert tiny_base_gguf() == tiny.gguf  # cached by content: same file again


def test_lora_fixture_identity_and_cache(tiny, tmp_path: Path):
    a = lora_gguf(tiny.gguf, tmp_path, seed=1, name="a")
    a_again = lora_gguf(tiny.gguf, tmp_path / "again", seed=1, name="a")
    b = lora_gguf(tiny.gguf, tmp_path, seed=2, name="b")
    assert file_sha256(a) == file_sha256(a_again) != file_sha256(b)
    assert read_gguf_metadata(a)["kv"]["general.type"] == "adapter"
    ident = read_adapter_identity(a, "planner")
    assert ident["name"] == "planner" and ident["sha256"] == file_sha256(a)
    assert ident["base_model"]["sha256"] == file_sha256(tiny.gguf)
    assert ident["training_data_sha256"] is None
    peft = read_adapter_identity(tmp_path / "a")
    assert peft["sha256"] != ident["sha256"] and peft["base_model"] == ident["base_model"]


def test_identity_file_of_a_changed_adapter_is_refused(tiny, tmp_path: Path):
    a = lora_gguf(tiny.gguf, tmp_path, seed=3, name="a")
    rec = json.loads(identity_path(a).read_text())
    assert rec["sha256"] == file_sha256(a)
    rec["sha256"] = "0" * 64
    identity_path(a).write_text(json.dumps(rec))
    with pytest.raises(ValueError, match="changed after it was exported"):
        read_adapter_identity(a)


def test_identity_is_what_the_backbones_read(tiny, tmp_path: Path):
    """agentic_repro.harness.adapters (serve's reader, used by every backbone) finds the same base and data hash."""
    from agentic_repro.harness.adapters import AdapterSpec, adapter_identity

    g = lora_gguf(tiny.gguf, tmp_path, seed=5, name="x", train_texts=["one two three"])
    for path in (g, tmp_path / "x"):
        ours, theirs = read_adapter_identity(path, "x"), adapter_identity(AdapterSpec("x", str(path)))
        assert (theirs["sha256"], theirs["base_model"], theirs["training_data_sha256"]) == \
            (ours["sha256"], ours["base_model"], ours["training_data_sha256"])
        assert ours["training_data_sha256"]


def test_trained_lora_fixture_loss_falls(tiny, tmp_path: Path):
    g = lora_gguf(tiny.gguf, tmp_path, seed=4, name="t", train_texts=["The answer is 42.", "Paris is in France."])
    rec = json.loads(identity_path(g).read_text())
    assert rec["kind"] == "fixture-trained" and rec["training_data_sha256"]
    assert rec["losses"][-1] < rec["losses"][0] - 0.1


def test_adapter_changes_llama_cpp_generations(tiny, tmp_path: Path):
    """The GGUF LoRA loads in llama.cpp on the tiny GGUF base and changes a greedy generation."""
    from llama_cpp import Llama

    adapter = lora_gguf(tiny.gguf, tmp_path, seed=1, name="a")
    outs = []
    for kw in ({}, {"lora_path": str(adapter)}):
        llm = Llama(str(tiny.gguf), n_ctx=256, n_threads=1, verbose=False, seed=0, **kw)
        r = llm.create_chat_completion([{"role": "user", "content": "Hello"}], max_tokens=8, temperature=0)
        outs.append(r["choices"][0]["message"]["content"])
        llm.close()
    assert outs[0] != outs[1]
