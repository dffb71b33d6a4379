"""Small real models for fast end-to-end tests of serving, adapters and training.

``tiny_base_gguf`` builds a randomly initialised model of the embedded base's architecture (Qwen2: hidden 64,
2 layers) with the **real** 151,936-token vocabulary and tokenizer (chat template included) taken from the
embedded GGUF, saves it as a Hugging Face folder and converts it to GGUF with llama.cpp's own converter (~45 MB,
served at hundreds of tokens/s). ``lora_gguf`` makes a peft LoRA on such a base — random with a non-zero B (so it
changes generations), or trained for a few steps on given texts — and exports it as a GGUF LoRA with its identity
file. Both are cached by content (architecture, seed, tokenizer bytes, converter version, texts) under the given
folder, by default ``~/.cache/agentic-repro/fixtures``, so a second test session reuses them in milliseconds.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from collections.abc import Sequence

from agentic_repro.harness.embedded.gguf import _locked, default_cache_dir, file_sha256
from agentic_repro.harness.embedded.base_model import BaseModel, _gguf_hf_dir, base_identity, resolve_base
from agentic_repro.training.identity import write_identity
from agentic_repro.training.llama_cpp import LLAMA_CPP_PYTHON_VERSION, convert_hf_to_gguf, convert_lora_to_gguf

__all__ = ["TINY_CONFIG", "TinyBase", "default_fixture_dir", "lora_gguf", "tiny_base", "tiny_base_gguf"]

FIXTURE_VERSION = 1
#: The tiny model's architecture: the embedded base's (Qwen2) at toy size, with the real vocabulary.
TINY_CONFIG: dict[str, Any] = dict(vocab_size=151936, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=4096,
                                   tie_word_embeddings=True, rms_norm_eps=1e-6)


def default_fixture_dir() -> Path:
    return default_cache_dir().parent / "fixtures"


def _key(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:16]


@dataclass(frozen=True)
class TinyBase:
    root: Path
    hf_dir: Path      # config.json, model.safetensors, tokenizer files
    gguf: Path        # the same weights as GGUF (f32)


def _tokenizer_dir() -> tuple[Path, str]:
    """The real tokenizer (from the embedded GGUF, which `make install-local` provides) and that GGUF's sha256."""
    base = resolve_base("local")
    return _gguf_hf_dir(base), file_sha256(base.ref)


def tiny_base(dir: str | os.PathLike[str] | None = None, *, seed: int = 0) -> TinyBase:
    """Build (or reuse) the tiny random Qwen2 model; see the module docstring."""
    tok_dir, tok_sha = _tokenizer_dir()
    key = _key({"v": FIXTURE_VERSION, "config": TINY_CONFIG, "seed": seed, "tokenizer": tok_sha,
                "llama_cpp": LLAMA_CPP_PYTHON_VERSION})
    root = Path(dir or default_fixture_dir()) / f"tiny-qwen2-{key}"
    result = TinyBase(root, root / "hf", root / "tiny-qwen2.gguf")
    if (root / ".complete").is_file():
        return result
    root.parent.mkdir(parents=True, exist_ok=True)
    with _locked(root.parent / f".{root.name}.lock"):
        if (root / ".complete").is_file():
            return result
        import torch
        from transformers import AutoTokenizer, Qwen2Config, Qwen2ForCausalLM

        if root.exists():
            shutil.rmtree(root)
        tok = AutoTokenizer.from_pretrained(tok_dir)
        cfg = Qwen2Config(**TINY_CONFIG, bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id)
        torch.manual_seed(seed)
        model = Qwen2ForCausalLM(cfg)
        model.save_pretrained(result.hf_dir)
        tok.save_pretrained(result.hf_dir)
        convert_hf_to_gguf(result.hf_dir, result.gguf, outtype="f32")
        (root / ".complete").write_text(key + "\n")
    return result


def tiny_base_gguf(dir: str | os.PathLike[str] | None = None) -> Path:
    """The tiny base as a GGUF file (its Hugging Face folder is ``<gguf>/../hf``)."""
    return tiny_base(dir).gguf


def _base_for(base: str | os.PathLike[str]) -> tuple[BaseModel, Path | None]:
    """(the base, its Hugging Face folder with weights when it has one: a folder, or a tiny fixture's ``hf/``)."""
    p = Path(base)
    if p.is_dir():
        return BaseModel("hf", str(p.resolve()), p.name), p.resolve()
    if p.suffix == ".gguf" and (p.parent / "hf" / "config.json").is_file():
        return BaseModel("gguf", str(p.resolve()), p.stem), (p.parent / "hf").resolve()
    return resolve_base(base), None


def lora_gguf(base: str | os.PathLike[str], out_dir: str | os.PathLike[str], *, seed: int, name: str,
              train_texts: Sequence[str] | None = None, r: int = 8, alpha: int = 16,
              target_modules: Sequence[str] = ("q_proj", "v_proj"), steps: int = 10, lr: float = 1e-2,
              cache: str | os.PathLike[str] | None = None) -> Path:
    """A LoRA on ``base`` (a GGUF file or a HF folder) as ``<out_dir>/<name>.gguf`` (+ ``<name>/`` peft folder and
    identity files). Random (non-zero B, seeded) without ``train_texts``; else ``steps`` AdamW steps on them."""
    bm, hf_dir = _base_for(base)
    ident = base_identity(bm)
    texts = list(train_texts) if train_texts is not None else None
    data_sha = hashlib.sha256(json.dumps(texts).encode()).hexdigest() if texts is not None else None
    spec = {"v": FIXTURE_VERSION, "base": ident.get("sha256") or ident, "seed": seed, "texts": data_sha, "r": r,
            "alpha": alpha, "targets": list(target_modules), "steps": steps if texts else 0, "lr": lr}
    key = _key(spec)
    cached = Path(cache or default_fixture_dir()) / f"lora-{key}"
    losses = _build_lora(bm, hf_dir, cached, key, seed=seed, texts=texts, r=r, alpha=alpha,
                         target_modules=list(target_modules), steps=steps, lr=lr)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    gguf, peft_dir = out / f"{name}.gguf", out / name
    shutil.copyfile(cached / "adapter.gguf", gguf)
    if peft_dir.exists():
        shutil.rmtree(peft_dir)
    shutil.copytree(cached / "adapter", peft_dir)
    record = {"name": name, "kind": "fixture-trained" if texts else "fixture-random", "base_model": ident,
              "training_data_sha256": data_sha, "config": spec, "losses": losses}
    write_identity(gguf, record)
    write_identity(peft_dir, record)
    return gguf


def _build_lora(bm: BaseModel, hf_dir: Path | None, cached: Path, key: str, *, seed: int, texts: list[str] | None,
                r: int, alpha: int, target_modules: list[str], steps: int, lr: float) -> list[float]:
    done = cached / ".complete"
    if done.is_file():
        return json.loads(done.read_text())["losses"]
    cached.parent.mkdir(parents=True, exist_ok=True)
    with _locked(cached.parent / f".{cached.name}.lock"):
        if done.is_file():
            return json.loads(done.read_text())["losses"]
        import torch
        from peft import LoraConfig, get_peft_model
        from transformers import AutoModelForCausalLM, AutoTokenizer

        from agentic_repro.harness.embedded.base_model import load_base, save_base_config

        if cached.exists():
            shutil.rmtree(cached)
        if hf_dir is not None:
            model = AutoModelForCausalLM.from_pretrained(hf_dir, dtype=torch.float32)
            tok = AutoTokenizer.from_pretrained(hf_dir)
            config_dir = hf_dir
        else:
            model, tok = load_base(bm)
            config_dir = save_base_config(bm, model, tok, cached / "base-config")
        torch.manual_seed(seed)
        pm = get_peft_model(model, LoraConfig(r=r, lora_alpha=alpha, lora_dropout=0.0, target_modules=target_modules,
                                              init_lora_weights=texts is not None))
        losses: list[float] = []
        if texts:
            losses = _few_steps(pm, tok, texts, steps=steps, lr=lr)
        pm.save_pretrained(cached / "adapter")
        convert_lora_to_gguf(cached / "adapter", config_dir, cached / "adapter.gguf", outtype="f32")
        done.write_text(json.dumps({"key": key, "losses": losses}) + "\n")
    return losses


def _few_steps(model: Any, tok: Any, texts: list[str], *, steps: int, lr: float) -> list[float]:
    """Plain causal-LM steps on ``texts`` (the fixture needs no trainer; training.train tests the trainers)."""
    import torch

    batch = tok(texts, return_tensors="pt", padding=True)
    labels = batch["input_ids"].clone()
    labels[batch["attention_mask"] == 0] = -100
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=lr)
    model.train()
    losses = []
    for _ in range(steps):
        out = model(**batch, labels=labels)
        out.loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(out.loss.item())
    model.eval()
    return losses
