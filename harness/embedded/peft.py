"""A base model and its LoRA adapters in this process, switched per call with peft's ``set_adapter``.

For users with a GPU (or a small model on CPU) who want adapters without a server, and for checking a freshly
trained adapter with the exact weights it was trained with (the GGUF export is a conversion). ``adapter=None`` runs
the base with every adapter disabled. Calls run one at a time (one model, one lock); sampling follows the OpenAI
parameters (temperature, top_p, max_tokens, stop, seed; ``n`` samples in one ``generate``). Needs the ``train``
extra (torch, transformers, peft).

Config (``configs/backbone/peft-local.yaml``): ``model`` is the base (``local`` = the embedded GGUF, dequantised by
transformers; a ``.gguf`` path; a Hugging Face id or folder); ``adapters: {name: {path}}`` where ``path`` is a peft
adapter folder, or a GGUF LoRA exported by ``agentic_repro.training.train`` / ``agentic_repro.training.fixtures`` whose peft folder sits beside
it (``X.gguf`` -> ``X/``), so one ``adapters:`` block serves both this backbone and the embedded server.
"""
from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any

from agentic_repro.harness.adapters import AdapterSpec, adapter_identity, parse_adapters
from agentic_repro.harness.backbone import BackboneError, BackboneResult, check_adapter
from agentic_repro.harness.ledger import Price
from agentic_repro.harness.types import Completion, Message

__all__ = ["PeftBackbone", "build_peft_backbone", "peft_dir_for"]

INSTALL_HINT = "backbone kind=peft needs the `train` extra: `make install-train` (or pip install -e '.[train]')"


def peft_dir_for(path: str | Path) -> Path:
    """The peft folder behind an ``adapters:`` path: the folder itself, or ``X/`` beside a GGUF ``X.gguf``."""
    from agentic_repro.harness.adapters import adapter_file_problem

    p = Path(path)
    if p.is_dir() or (p.suffix == ".gguf" and (p.with_suffix("") / "adapter_config.json").is_file()):
        d = p if p.is_dir() else p.with_suffix("")
        problem = adapter_file_problem(d)  # a damaged folder is refused by name now, not when peft loads it
        if problem:
            raise BackboneError(f"{d} is not a usable peft adapter folder: {problem}", kind="config", attempts=0)
        return d
    raise BackboneError(f"{p}: peft cannot load a GGUF LoRA; give the peft adapter folder (training.train writes "
                        "adapter/ beside adapter.gguf)", kind="config", attempts=0)


class PeftBackbone:
    """transformers + peft in process: one base, named adapters, ``set_adapter`` per call."""

    supports_n = True

    def __init__(self, *, name: str, model: str, price: Price, params: float | None = None,
                 max_concurrency: int = 1, adapters: dict[str, AdapterSpec] | None = None, dtype: str = "auto",
                 threads: int | None = None) -> None:
        try:
            import peft  # noqa: F401
            import torch  # pyright: ignore[reportMissingImports]  (the embed/train extra)
        except ImportError as exc:  # pragma: no cover - depends on the extra
            raise BackboneError(INSTALL_HINT, kind="config", attempts=0) from exc
        from agentic_repro.harness.embedded.base_model import base_identity, load_base, resolve_base

        self.name, self.model, self.price, self.params = name, model, price, params
        self.max_concurrency = max_concurrency
        if threads:
            torch.set_num_threads(int(threads))
        self._base = resolve_base(model)
        if dtype == "auto":
            dtype = "bfloat16" if torch.cuda.is_available() and torch.cuda.is_bf16_supported() else "float32"
        self.dtype = dtype
        net, self._tok = load_base(self._base, dtype=dtype)
        self._base_identity = base_identity(self._base, net)
        self._device = "cuda" if torch.cuda.is_available() else "cpu"
        net.to(self._device)
        specs = dict(adapters or {})
        self.adapters: dict[str, dict[str, Any]] = {}
        if specs:
            from peft import PeftModel

            first = True
            for a_name, spec in specs.items():
                if spec.scale != 1.0:
                    raise BackboneError(f"backbone '{name}': adapters.{a_name}.scale={spec.scale}: the peft backbone "
                                        "applies an adapter at its trained scale only (1.0)", kind="config", attempts=0)
                folder = peft_dir_for(spec.path)
                if first:
                    net = PeftModel.from_pretrained(net, str(folder), adapter_name=a_name)
                    first = False
                else:
                    net.load_adapter(str(folder), adapter_name=a_name)
                self.adapters[a_name] = {**adapter_identity(AdapterSpec(a_name, str(folder), spec.scale)),
                                         "served_base_sha256": self._base_identity.get("sha256")}
        net.eval()
        self._net = net
        self._lock = threading.Lock()
        self._eos = sorted({t for t in (self._tok.eos_token_id, self._tok.convert_tokens_to_ids("<|im_end|>"),
                                        self._tok.convert_tokens_to_ids("<|endoftext|>")) if isinstance(t, int)
                            and t >= 0 and t != self._tok.unk_token_id})

    def identity(self) -> dict[str, Any]:
        out = {"kind": "peft", "model": self.model, "base": self._base_identity, "dtype": self.dtype,
               "versions": _versions()}
        if self.adapters:
            out["adapters"] = self.adapters
        return out

    def cache_identity(self) -> dict[str, Any]:
        return {"kind": "peft", "base": self._base_identity.get("sha256") or self._base_identity, "dtype": self.dtype}

    def adapter_identity(self, name: str) -> dict[str, Any]:
        check_adapter(self.name, self.adapters, name)
        return self.adapters[name]

    async def complete(self, messages: list[Message], sampling: dict[str, Any], n: int, *,
                       adapter: str | None = None) -> BackboneResult:
        check_adapter(self.name, self.adapters, adapter)
        start = time.perf_counter()
        comps = await asyncio.to_thread(self._generate, messages, dict(sampling), int(n), adapter)
        return BackboneResult(comps, 0, time.perf_counter() - start)

    def _generate(self, messages: list[Message], sampling: dict[str, Any], n: int,
                  adapter: str | None) -> list[Completion]:
        import contextlib

        import torch  # pyright: ignore[reportMissingImports]  (the embed/train extra)

        ids = self._tok.apply_chat_template(messages, add_generation_prompt=True, return_tensors="pt",
                                            return_dict=True).to(self._device)
        prompt_len = int(ids["input_ids"].shape[1])
        temperature = float(sampling.get("temperature") or 0.0)
        stop = sampling.get("stop")
        stop = [stop] if isinstance(stop, str) else list(stop or [])
        kw: dict[str, Any] = {"max_new_tokens": int(sampling.get("max_tokens") or 256), "num_return_sequences": n,
                              "eos_token_id": self._eos, "pad_token_id": self._tok.pad_token_id or self._eos[0],
                              "return_dict_in_generate": True, "output_logits": bool(sampling.get("logprobs"))}
        if temperature > 0:
            kw.update(do_sample=True, temperature=temperature, top_p=float(sampling.get("top_p") or 1.0))
        else:
            kw.update(do_sample=False, temperature=None, top_p=None, top_k=None)
        if stop:
            kw.update(stop_strings=stop, tokenizer=self._tok)
        with self._lock:
            if sampling.get("seed") is not None:
                torch.manual_seed(int(sampling["seed"]))  # under the lock: one generate at a time
            if adapter is not None:
                self._net.set_adapter(adapter)
                ctx = contextlib.nullcontext()
            else:
                ctx = self._net.disable_adapter() if self.adapters else contextlib.nullcontext()
            with ctx, torch.inference_mode():
                out = self._net.generate(**ids, **kw)
        comps = []
        for i in range(n):
            toks = out.sequences[i, prompt_len:].tolist()
            finish = "length"
            cut = len(toks)
            for j, t in enumerate(toks):
                if t in self._eos:
                    cut, finish = j, "stop"
                    break
            text = self._tok.decode(toks[:cut], skip_special_tokens=True)
            for s in stop:
                if s in text:
                    text, finish = text[: text.index(s)], "stop"
            lp = None
            if sampling.get("logprobs") and out.logits:
                lp = []
                for j in range(cut):
                    dist = torch.log_softmax(out.logits[j][i].float(), dim=-1)
                    lp.append({"token": self._tok.decode([toks[j]]), "logprob": float(dist[toks[j]])})
            comps.append(Completion(text=text, prompt_tokens=prompt_len if i == 0 else 0, completion_tokens=cut,
                                    finish_reason=finish, logprobs=lp))
        return comps

    async def aclose(self) -> None:
        self._net = None


def _versions() -> dict[str, str]:
    import importlib.metadata as md

    out = {}
    for p in ("torch", "transformers", "peft"):
        try:
            out[p] = md.version(p)
        except md.PackageNotFoundError:
            continue
    return out


async def build_peft_backbone(cfg: dict[str, Any], *, name: str, price: Price, params: float | None,
                              max_concurrency: int) -> PeftBackbone:
    """From a ``kind: peft`` backbone config (loading takes seconds to a minute: done in a thread)."""
    specs = parse_adapters(cfg.get("adapters"), name)
    return await asyncio.to_thread(PeftBackbone, name=name, model=str(cfg["model"]), price=price, params=params,
                                   max_concurrency=max_concurrency, adapters=specs,
                                   dtype=str(cfg.get("dtype") or "auto"), threads=cfg.get("threads"))
