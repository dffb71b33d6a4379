"""Content hashes: one streaming sha256 of a file, and of a folder's files, for every identity we record.

Model files, adapters (a GGUF file or a peft folder), datasets, the llama.cpp sdist and its binary are all
named by these hashes in meta.json, the ledger and the cache; one implementation keeps them comparable.
"""
from __future__ import annotations

import hashlib
import os
from pathlib import Path
from collections.abc import Callable

CHUNK = 1 << 20  # 1 MiB streaming block


def sha256_file(path: str | os.PathLike[str]) -> str:
    """sha256 of a file's bytes, streamed (model files are hundreds of MB)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(CHUNK):
            h.update(block)
    return h.hexdigest()


def sha256_tree(folder: str | os.PathLike[str], file_hash: Callable[[Path], str] = sha256_file) -> str:
    """sha256 over a folder's files: each relative path and its file hash, in sorted order."""
    root = Path(folder)
    h = hashlib.sha256()
    for f in sorted(q for q in root.rglob("*") if q.is_file()):
        h.update(f.relative_to(root).as_posix().encode() + b"\0" + file_hash(f).encode() + b"\n")
    return h.hexdigest()
