"""An adapter's identity: what the serving side records per call (sha256, base model, training-data hash).

Written by the trainer (and the fixtures) beside every adapter it exports, where the backbones' adapter reader
(:func:`agentic_repro.harness.adapters.adapter_identity`) looks: ``<name>.gguf.json`` next to a GGUF LoRA, ``provenance.json``
inside a peft adapter folder. Keys: ``base_model`` (the base's identity), ``training_data_sha256``, ``config``,
``kind``; a GGUF's sidecar also carries the file's ``sha256`` so a changed file is detected. A peft folder's hash
covers every file in it (the sidecar included), as the backbones compute it.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from agentic_repro.harness.hashing import sha256_file, sha256_tree

__all__ = ["IDENTITY_FORMAT", "adapter_sha256", "identity_path", "read_adapter_identity", "write_identity"]

IDENTITY_FORMAT = "agentic-repro/adapter-identity/1"


def identity_path(adapter: str | os.PathLike[str]) -> Path:
    """``X.gguf`` -> ``X.gguf.json``; a peft folder -> ``folder/provenance.json``."""
    p = Path(adapter)
    return p / "provenance.json" if p.is_dir() else p.with_name(p.name + ".json")


def adapter_sha256(adapter: str | os.PathLike[str]) -> str:
    """sha256 of a GGUF file, or of a folder as sorted (relative path, file sha256) lines (as the backbones do)."""
    p = Path(adapter)
    if p.is_file():
        return sha256_file(p)
    if not p.is_dir():
        raise FileNotFoundError(f"adapter not found: {p}")
    return sha256_tree(p)


def write_identity(adapter: str | os.PathLike[str], record: dict[str, Any]) -> Path:
    """Write ``record`` (plus the format tag, and a GGUF's own sha256) where the backbones read it."""
    p = Path(adapter)
    out = identity_path(p)
    full = {"format": IDENTITY_FORMAT, **record}
    if p.is_file():
        full["file"], full["sha256"] = p.name, sha256_file(p)
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(full, indent=2, sort_keys=True, default=str) + "\n", encoding="utf-8")
    os.replace(tmp, out)
    return out


def read_adapter_identity(adapter: str | os.PathLike[str], name: str | None = None) -> dict[str, Any]:
    """``{"name", "sha256", "base_model", "training_data_sha256", "path", ...}`` for a GGUF file or a peft folder.

    ``sha256`` is computed from the bytes; a GGUF whose sidecar names another sha256 is refused (the file was
    changed after export). Without a sidecar, ``base_model`` and ``training_data_sha256`` are ``None``.
    """
    p = Path(adapter).expanduser()
    sha = adapter_sha256(p)
    rec: dict[str, Any] = {}
    ident = identity_path(p)
    if ident.is_file():
        rec = json.loads(ident.read_text(encoding="utf-8"))
        if p.is_file() and rec.get("sha256") not in (None, sha):
            raise ValueError(f"{ident} describes an adapter with sha256 {rec.get('sha256')}, but {p} has {sha}: "
                             "the adapter was changed after it was exported; re-export it or delete the identity file")
    out = {"name": name or rec.get("name") or p.stem, "sha256": sha, "base_model": rec.get("base_model"),
           "training_data_sha256": rec.get("training_data_sha256"), "path": str(p.resolve())}
    if "kind" in rec:
        out["kind"] = rec["kind"]
    return out
