"""An adapter's identity: what the serving side records per call (sha256, base model, training-data hash).

Written by the trainer (and the fixtures) beside every adapter it exports: ``<name>.identity.json`` next to a GGUF
LoRA ``<name>.gguf``, and ``identity.json`` inside a peft adapter folder. :func:`read_adapter_identity` is what a
backbone calls for an ``adapters: {name: {path}}`` entry; it needs neither torch nor the ``train`` extra. An
adapter made elsewhere (no identity file) still gets its own sha256; its base and training data are ``None``.
"""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

__all__ = ["IDENTITY_FORMAT", "adapter_sha256", "identity_path", "read_adapter_identity", "write_identity"]

IDENTITY_FORMAT = "agentic-repro/adapter-identity/1"


def identity_path(adapter: str | os.PathLike[str]) -> Path:
    """``X.gguf`` -> ``X.identity.json``; a peft folder -> ``folder/identity.json``."""
    p = Path(adapter)
    if p.is_dir():
        return p / "identity.json"
    return p.with_name(p.name[: -len(".gguf")] + ".identity.json" if p.name.endswith(".gguf")
                       else p.name + ".identity.json")


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(1 << 20):
            h.update(block)
    return h.hexdigest()


def adapter_sha256(adapter: str | os.PathLike[str]) -> str:
    """sha256 of a GGUF LoRA file, or of a peft folder's weights + adapter_config.json (names and bytes)."""
    p = Path(adapter)
    if p.is_file():
        return _sha256(p)
    if not p.is_dir():
        raise FileNotFoundError(f"adapter not found: {p}")
    files = sorted(f for f in p.iterdir() if f.name.startswith("adapter_") and f.is_file())
    if not files:
        raise FileNotFoundError(f"{p} is not a peft adapter folder (no adapter_config.json / adapter_model.*)")
    h = hashlib.sha256()
    for f in files:
        h.update(f.name.encode() + b"\0" + _sha256(f).encode() + b"\n")
    return h.hexdigest()


def write_identity(adapter: str | os.PathLike[str], record: dict[str, Any]) -> Path:
    """Write ``record`` (plus the adapter's own sha256 and the format tag) beside ``adapter``; returns the file."""
    p = Path(adapter)
    out = identity_path(p)
    full = {"format": IDENTITY_FORMAT, "file": p.name, "sha256": adapter_sha256(p), **record}
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(full, indent=2, sort_keys=True, default=str) + "\n", encoding="utf-8")
    os.replace(tmp, out)
    return out


def read_adapter_identity(adapter: str | os.PathLike[str], name: str | None = None) -> dict[str, Any]:
    """``{"name", "sha256", "base_model", "training_data_sha256", "path", ...}`` for a GGUF file or a peft folder.

    ``sha256`` is always computed from the bytes (a stale identity file whose sha256 differs is refused);
    ``base_model`` and ``training_data_sha256`` come from the identity file when there is one, else ``None``.
    """
    p = Path(adapter).expanduser()
    sha = adapter_sha256(p)
    rec: dict[str, Any] = {}
    ident = identity_path(p)
    if ident.is_file():
        rec = json.loads(ident.read_text(encoding="utf-8"))
        if rec.get("sha256") not in (None, sha):
            raise ValueError(f"{ident} describes an adapter with sha256 {rec.get('sha256')}, but {p} has {sha}: "
                             "the adapter was changed after it was exported; re-export it or delete the identity file")
    return {
        "name": name or rec.get("name") or p.stem,
        "sha256": sha,
        "base_model": rec.get("base_model"),
        "training_data_sha256": rec.get("training_data_sha256"),
        "path": str(p.resolve()),
        **({"kind": rec["kind"]} if "kind" in rec else {}),
    }
