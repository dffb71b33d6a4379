"""LoRA adapters as backbones: config parsing, identity, and grouping calls by adapter.

A backbone config may carry ``adapters: {<name>: {path: <gguf file | peft dir>, scale: 1.0}}``; a call
chooses one by name (``adapter=`` reaches ``Backbone.complete``; None = the base model). What answered
a call must be recorded, so each adapter has an identity: the sha256 of its bytes, the base model it was
trained on and the hash of its training data when its metadata or a sidecar says so.

Serving facts that shape the API (llama.cpp ``llama-server``, measured on this project's machine):
switching a slot's adapter discards its prompt cache, and requests on different adapters are never
batched together, so :func:`gather_by_adapter` runs calls adapter by adapter.
"""
from __future__ import annotations

import asyncio
import json
import math
import os
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from agentic_repro.harness.hashing import sha256_tree

__all__ = ["AdapterSpec", "adapter_identity", "gather_by_adapter", "group_by_adapter", "parse_adapters",
           "path_sha256"]

T = TypeVar("T")

#: Sidecar names searched beside a GGUF adapter (``<file>.json``) or inside a peft directory.
SIDECARS = ("provenance.json", "agentic_repro.json", "training.json")
_DATA_KEYS = ("training_data_sha256", "data_sha256", "dataset_sha256")


@dataclass(frozen=True)
class AdapterSpec:
    name: str
    path: str
    scale: float = 1.0


def parse_adapters(cfg: Mapping[str, Any] | None, backbone_name: str = "backbone") -> dict[str, AdapterSpec]:
    """``adapters:`` of a backbone config → specs (the path must exist; scale defaults to 1.0)."""
    from agentic_repro.harness.backbone import BackboneError

    out: dict[str, AdapterSpec] = {}
    for name, entry in (cfg or {}).items():
        if isinstance(entry, str):
            entry = {"path": entry}
        if not isinstance(entry, Mapping) or not entry.get("path"):
            raise BackboneError(f"backbone '{backbone_name}': adapters.{name} needs a `path`", kind="config", attempts=0)
        p = Path(str(entry["path"])).expanduser()
        if not p.exists():
            raise BackboneError(f"backbone '{backbone_name}': adapters.{name}.path {p} does not exist",
                                kind="config", attempts=0)
        unknown = set(entry) - {"path", "scale"}
        if unknown:
            raise BackboneError(f"backbone '{backbone_name}': adapters.{name} has unknown keys {sorted(unknown)} "
                                "(allowed: path, scale)", kind="config", attempts=0)
        scale = entry.get("scale", 1.0)
        try:
            scale = float(scale) if not isinstance(scale, bool) else math.nan
        except (TypeError, ValueError):
            scale = math.nan
        if not math.isfinite(scale):
            raise BackboneError(f"backbone '{backbone_name}': adapters.{name}.scale={entry.get('scale')!r} is not "
                                "allowed: a finite number (1.0 = the adapter as trained, 0 = off)",
                                kind="config", attempts=0)
        problem = adapter_file_problem(p)
        if problem:
            raise BackboneError(f"backbone '{backbone_name}': adapters.{name}.path {p}: {problem}; fix: point it "
                                "at a complete adapter (re-export or re-copy it)", kind="config", attempts=0)
        out[str(name)] = AdapterSpec(str(name), str(p.resolve()), scale)
    return out


#: The weight files a peft adapter folder may hold (peft writes one of them).
PEFT_WEIGHTS = ("adapter_model.safetensors", "adapter_model.bin")


def adapter_file_problem(path: str | os.PathLike[str]) -> str | None:
    """Why ``path`` is not a loadable adapter (empty, truncated or corrupt), or None. Checked when the config is
    read, so a broken file is refused by name before any server starts or any call is paid.

    A file must be a GGUF whose header and tensor table are whole (:func:`agentic_repro.harness.embedded.gguf.check_gguf_file`);
    a folder a peft adapter: ``adapter_config.json`` a JSON object, and a non-empty weights file (a
    safetensors file with a readable header)."""
    from agentic_repro.harness.embedded.gguf import GGUFError, check_gguf_file

    p = Path(path)
    if p.is_file():
        try:
            check_gguf_file(p)
        except GGUFError as exc:
            return f"not a usable GGUF LoRA ({str(exc).removeprefix(str(p) + ': ')})"
        except OSError as exc:
            return f"cannot be read ({exc.strerror or exc})"
        return None
    if not p.is_dir():
        return "neither a file nor a folder"
    cfg = p / "adapter_config.json"
    if not cfg.is_file():
        return "no adapter_config.json (not a peft adapter folder)"
    try:
        doc = json.loads(cfg.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return f"adapter_config.json is damaged ({type(exc).__name__}: {exc})"
    if not isinstance(doc, dict):
        return "adapter_config.json is not a JSON object"
    weights = [p / w for w in PEFT_WEIGHTS if (p / w).is_file()]
    if not weights:
        return f"no weights file ({' or '.join(PEFT_WEIGHTS)})"
    w = weights[0]
    if w.stat().st_size == 0:
        return f"{w.name} is empty"
    if w.suffix == ".safetensors":
        try:
            with open(w, "rb") as fh:
                n = int.from_bytes(fh.read(8), "little")
                if n <= 0 or 8 + n > w.stat().st_size:
                    return f"{w.name} is truncated (header of {n} bytes in a {w.stat().st_size}-byte file)"
                header = json.loads(fh.read(n).decode("utf-8"))
            ends = [int(v["data_offsets"][1]) for k, v in header.items() if k != "__metadata__"]
            if ends and 8 + n + max(ends) > w.stat().st_size:
                return f"{w.name} is truncated ({w.stat().st_size} bytes, its tensors need {8 + n + max(ends)})"
        except (OSError, ValueError, KeyError, TypeError, IndexError) as exc:
            return f"{w.name} is not a readable safetensors file ({type(exc).__name__}: {exc})"
    return None


def path_sha256(path: str | os.PathLike[str]) -> str:
    """sha256 of a file, or of a directory as sorted (relative path, file sha256) pairs."""
    from agentic_repro.harness.embedded.gguf import default_cache_dir, file_sha256

    p = Path(path)
    cache = default_cache_dir()  # sidecars go to the cache, never into the adapter's own folder
    if p.is_file():
        return file_sha256(p, cache_dir=cache)
    return sha256_tree(p, lambda f: file_sha256(f, cache_dir=cache))


def _sidecar(p: Path) -> dict[str, Any]:
    candidates = [p / n for n in SIDECARS] if p.is_dir() else \
        [p.with_name(p.name + ".json"), p.with_suffix(".json"), *(p.parent / n for n in SIDECARS)]
    for c in candidates:
        if c.is_file():
            try:
                data = json.loads(c.read_text())
            except (OSError, ValueError):
                continue
            if isinstance(data, dict):
                return data
    return {}


def _gguf_kv(p: Path) -> dict[str, Any]:
    from agentic_repro.harness.embedded.gguf import GGUFError, read_gguf_metadata

    try:
        return read_gguf_metadata(p)["kv"]
    except (GGUFError, OSError):
        return {}


def adapter_identity(spec: AdapterSpec, *, served_base_sha256: str | None = None) -> dict[str, Any]:
    """``{"name", "sha256", "base_model", "training_data_sha256", "path", "scale", "format", ...}``.

    ``base_model`` comes from the adapter's own metadata (peft ``adapter_config.json``'s
    ``base_model_name_or_path``, a sidecar's ``base_model``, or the GGUF's ``general.base_model.0.name``);
    ``training_data_sha256`` from a sidecar (``provenance.json`` etc., keys ``training_data_sha256`` /
    ``data_sha256``) or the GGUF key ``training.data_sha256``; None when not recorded.
    """
    p = Path(spec.path)
    side = _sidecar(p)
    base, data, fmt, extra = side.get("base_model"), None, "peft" if p.is_dir() else "gguf", {}
    for k in _DATA_KEYS:
        if side.get(k):
            data = str(side[k])
            break
    if p.is_dir():
        with_cfg = p / "adapter_config.json"
        if with_cfg.is_file():
            try:
                acfg = json.loads(with_cfg.read_text())
                base = base or acfg.get("base_model_name_or_path")
                extra = {"r": acfg.get("r"), "lora_alpha": acfg.get("lora_alpha")}
            except ValueError:
                pass
    else:
        kv = _gguf_kv(p)
        base = base or kv.get("general.base_model.0.name") or kv.get("general.base_model.0.repo_url")
        data = data or kv.get("training.data_sha256")
        if kv.get("adapter.lora.alpha") is not None:
            extra = {"lora_alpha": kv.get("adapter.lora.alpha"), "adapter_type": kv.get("adapter.type")}
    sha = path_sha256(p)
    if side.get("sha256") and p.is_file() and side["sha256"] != sha:
        # the sidecar describes other bytes (the file was replaced): its provenance does not apply
        base, data, side = None, None, {}
    out = {"name": spec.name, "sha256": sha, "base_model": base, "training_data_sha256": data,
           "path": str(p), "scale": spec.scale, "format": fmt, **{k: v for k, v in extra.items() if v is not None}}
    if served_base_sha256:
        out["served_base_sha256"] = served_base_sha256
    if side.get("run_ids") or side.get("provenance"):
        out["provenance"] = side.get("provenance") or {"run_ids": side.get("run_ids")}
    return out


def group_by_adapter(items: Iterable[T], adapter_of: Callable[[T], str | None]) -> list[tuple[str | None, list[T]]]:
    """Items grouped by adapter, groups in first-appearance order, order kept within a group."""
    groups: dict[str | None, list[T]] = {}
    for it in items:
        groups.setdefault(adapter_of(it), []).append(it)
    return list(groups.items())


async def gather_by_adapter(calls: Iterable[tuple[str | None, Callable[[], Awaitable[T]]]]) -> list[T]:
    """Run ``(adapter, make_call)`` pairs one adapter at a time, concurrently within an adapter.

    Results come back in the input order. Use it where a method's calls do not depend on each other
    (e.g. three experts answering the same question): the server never mixes adapters in one batch and
    each slot keeps its prompt cache, instead of paying an adapter switch (a prompt re-read) per call.
    """
    indexed = list(enumerate(calls))
    results: dict[int, T] = {}
    for _adapter, group in group_by_adapter(indexed, lambda ic: ic[1][0]):
        outs = await asyncio.gather(*(make() for _, (_, make) in group))
        for (i, _), out in zip(group, outs):
            results[i] = out
    return [results[i] for i in range(len(indexed))]
