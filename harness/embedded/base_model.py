"""The base model a LoRA is trained on and the peft backbone serves: the embedded GGUF (read by transformers) or any
Hugging Face model. It lives with the serving code (not in ``training/``) because the peft backbone needs it and
``training`` builds on the harness, never the other way round.

``base=local`` (or any backbone config name with a ``gguf`` section, or a ``.gguf`` path) loads the GGUF through
``from_pretrained(folder, gguf_file=...)``, which dequantises it to fp32. transformers leaves its GGUF quantizer
attached to such a model, and then ``save_pretrained`` refuses ("not serializable") and the trainers refuse ("do
not support training"): :func:`detach_gguf_quantizer` removes it, since the weights are plain fp32 tensors by then.
Anything else is a Hugging Face model id or folder. The base's identity (GGUF sha256, or the folder's config hash,
or the hub id and commit) is what every adapter records as ``base_model``.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from agentic_repro.harness.embedded.gguf import ModelSpec, default_cache_dir, file_sha256, resolve_gguf

__all__ = ["BaseModel", "base_identity", "detach_gguf_quantizer", "load_base", "resolve_base", "save_base_config"]

_HF_DIR_VERSION = 2  # bump when what _gguf_hf_dir writes changes
_CONFIGS = Path(__file__).resolve().parents[2] / "configs" / "backbone"


@dataclass(frozen=True)
class BaseModel:
    """Where a base comes from: ``gguf`` (a local GGUF file) or ``hf`` (a hub id or a model folder)."""

    kind: str
    ref: str              # the GGUF path, or the hub id / folder
    name: str             # a short name for folders and identities

    @property
    def is_gguf(self) -> bool:
        return self.kind == "gguf"


def resolve_base(base: str | os.PathLike[str]) -> BaseModel:
    """``local`` / a backbone config name with a GGUF / a ``.gguf`` path -> GGUF; otherwise a HF id or folder."""
    ref = str(base)
    cfg_file = _CONFIGS / f"{ref}.yaml"
    if ref.endswith(".gguf"):
        p = Path(ref).expanduser().resolve()
        if not p.is_file():
            raise FileNotFoundError(f"base GGUF not found: {p}")
        return BaseModel("gguf", str(p), p.stem)
    if cfg_file.is_file() and not Path(ref).exists():
        cfg = yaml.safe_load(cfg_file.read_text(encoding="utf-8"))
        parent = (cfg.get("defaults") or [None])[0]
        if isinstance(parent, str) and (_CONFIGS / f"{parent}.yaml").is_file():
            pcfg = yaml.safe_load((_CONFIGS / f"{parent}.yaml").read_text(encoding="utf-8"))
            cfg = {**pcfg, **cfg, "gguf": {**(pcfg.get("gguf") or {}), **(cfg.get("gguf") or {})}}
        if not cfg.get("gguf"):
            raise ValueError(f"base={ref}: configs/backbone/{ref}.yaml has no `gguf` section; give a GGUF path "
                             "or a Hugging Face model id/folder")
        path = resolve_gguf(ModelSpec.from_config(cfg, name=cfg.get("model") or ref))
        return BaseModel("gguf", str(path), str(cfg.get("model") or ref))
    return BaseModel("hf", ref, Path(ref).name if Path(ref).exists() else ref.replace("/", "--"))


def detach_gguf_quantizer(model: Any) -> Any:
    """Drop the GGUF quantizer transformers attaches when it dequantises a GGUF (the weights are fp32 already).

    Uses the quantizer's own ``remove_quantization_config`` (hf_quantizer, config.quantization_config,
    quantization_method, is_quantized), then clears the per-module ``config._is_quantized`` flag it also sets.
    """
    from transformers import PreTrainedModel  # pyright: ignore[reportMissingImports]  (the train extra)

    quantizer = getattr(model, "hf_quantizer", None)
    if quantizer is not None:
        quantizer.remove_quantization_config(model)
    if getattr(model, "hf_quantizer", None) is not None:
        model.hf_quantizer = None
    if getattr(getattr(model, "config", None), "quantization_config", None) is not None:
        del model.config.quantization_config
    for module in model.modules():
        if isinstance(module, PreTrainedModel) and getattr(module.config, "_is_quantized", False):
            module.config._is_quantized = False
    model.is_quantized = False
    return model


def _gguf_parts(path: str) -> tuple[str, str]:
    p = Path(path)
    return str(p.parent), p.name


def load_tokenizer(base: BaseModel) -> Any:
    """The tokenizer (with the chat template); for a GGUF it is rebuilt from the file once and cached by sha256."""
    from transformers import AutoTokenizer  # pyright: ignore[reportMissingImports]  (the train extra)

    if base.is_gguf:
        cached = _gguf_hf_dir(base)
        tok = AutoTokenizer.from_pretrained(cached)
    else:
        tok = AutoTokenizer.from_pretrained(base.ref)
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    return tok


def _gguf_hf_dir(base: BaseModel) -> Path:
    """A folder with the GGUF's config and tokenizer as Hugging Face files (what the LoRA converter reads)."""
    sha = file_sha256(base.ref)
    out = default_cache_dir().parent / "hf-from-gguf" / f"{sha[:16]}-v{_HF_DIR_VERSION}"
    if (out / ".complete").is_file():
        return out
    from transformers import AutoConfig, AutoTokenizer  # pyright: ignore[reportMissingImports]  (the train extra)

    from agentic_repro.harness.embedded.gguf import _locked

    out.parent.mkdir(parents=True, exist_ok=True)
    with _locked(out.parent / f".{out.name}.lock"):
        if (out / ".complete").is_file():
            return out
        folder, name = _gguf_parts(base.ref)
        tmp = out.with_name(f".{out.name}.{os.getpid()}.partial")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        cfg = AutoConfig.from_pretrained(folder, gguf_file=name)
        if "quantization_config" in cfg.__dict__:
            delattr(cfg, "quantization_config")
        if not cfg.architectures:  # the converters pick their model class from it
            from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES  # pyright: ignore[reportMissingImports]

            cfg.architectures = [MODEL_FOR_CAUSAL_LM_MAPPING_NAMES[cfg.model_type]]
        cfg.save_pretrained(tmp)
        AutoTokenizer.from_pretrained(folder, gguf_file=name).save_pretrained(tmp)
        (tmp / ".complete").write_text(sha + "\n")
        shutil.rmtree(out, ignore_errors=True)
        os.replace(tmp, out)
    return out


def load_base(base: BaseModel, *, dtype: str = "float32") -> tuple[Any, Any]:
    """(model, tokenizer) ready for peft: a GGUF is dequantised to ``dtype`` with its quantizer detached."""
    import torch  # pyright: ignore[reportMissingImports]  (the embed/train extra)
    from transformers import AutoModelForCausalLM  # pyright: ignore[reportMissingImports]  (the train extra)

    torch_dtype = getattr(torch, dtype)
    if base.is_gguf:
        folder, name = _gguf_parts(base.ref)
        model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch_dtype)
        detach_gguf_quantizer(model)
    else:
        model = AutoModelForCausalLM.from_pretrained(base.ref, dtype=torch_dtype)
    return model, load_tokenizer(base)


def save_base_config(base: BaseModel, model: Any, tokenizer: Any, out: Path) -> Path:
    """Write the base's config and tokenizer (no weights) to ``out``: enough for ``convert_lora_to_gguf.py``."""
    if base.is_gguf:
        return _gguf_hf_dir(base)
    if Path(base.ref).is_dir():
        return Path(base.ref)
    out.mkdir(parents=True, exist_ok=True)
    model.config.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


def base_identity(base: BaseModel, model: Any | None = None) -> dict[str, Any]:
    """What an adapter records as its base: enough to refuse serving it on another model."""
    if base.is_gguf:
        from agentic_repro.harness.embedded.gguf import read_gguf_metadata

        meta = read_gguf_metadata(base.ref)
        return {"kind": "gguf", "name": base.name, "file": Path(base.ref).name, "sha256": file_sha256(base.ref),
                "architecture": meta.get("architecture"), "quantization": meta.get("quantization")}
    if Path(base.ref).is_dir():
        h = hashlib.sha256()
        for f in sorted(Path(base.ref).glob("*.safetensors")) + sorted(Path(base.ref).glob("config.json")):
            h.update(f.name.encode() + b"\0" + file_sha256(f).encode())
        return {"kind": "hf-dir", "name": base.name, "path": str(Path(base.ref).resolve()), "sha256": h.hexdigest()}
    commit = getattr(getattr(model, "config", None), "_commit_hash", None) if model is not None else None
    return {"kind": "hf-hub", "name": base.ref, "revision": commit}


def identity_json(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)
