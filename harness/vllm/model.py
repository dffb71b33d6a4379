"""The vLLM venv and the model folder it serves: the embedded GGUF converted to bf16, cached by the GGUF's sha256.

    python -m agentic_repro.harness.vllm.model prepare [base=local]   # convert once (make install-vllm), print the folder
    python -m agentic_repro.harness.vllm.model check [base=local]     # re-hash the folder against its record

The folder lives under ``~/.cache/agentic-repro/vllm-models/<gguf sha256[:16]>-bf16-v<N>/model/``; beside it,
``conversion.json`` records the GGUF's sha256, the conversion's own sha256 (:func:`files_sha256` over the files
it wrote in ``model/``), the converter's package versions and time. A folder whose bytes no longer hash to its record is
refused (re-run ``make install-vllm``), as a GGUF whose bytes do not match its pin is.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentic_repro.harness.hashing import sha256_file

__all__ = ["CONVERSION_VERSION", "VENV_ENV", "ConvertedModel", "VLLMNotInstalled", "converted_model",
           "prepare", "vllm_python", "vllm_version"]

VENV_ENV = "AGENTIC_REPRO_VLLM_VENV"
ROOT = Path(__file__).resolve().parents[2]
DEFAULT_VENV = ROOT / ".venv-vllm"
CONVERTER = Path(__file__).resolve().parent / "convert.py"
CONVERSION_VERSION = 1  # bump when convert.py writes something else
INSTALL_HINT = "run `make install-vllm` (vLLM's own venv and the converted model, ~5 min once)"


class VLLMNotInstalled(RuntimeError):
    """The vLLM venv or the converted model is missing or does not match its record."""


def vllm_venv() -> Path:
    return Path(os.environ.get(VENV_ENV) or DEFAULT_VENV).expanduser()


def vllm_python() -> Path:
    """The vLLM venv's interpreter (``$AGENTIC_REPRO_VLLM_VENV`` or ``.venv-vllm/``)."""
    py = vllm_venv() / "bin" / "python"
    if not py.is_file():
        raise VLLMNotInstalled(f"no vLLM venv at {vllm_venv()}: {INSTALL_HINT}")
    return py


def vllm_version() -> str:
    """The installed vLLM's version, read from its package metadata (no import: importing vLLM takes seconds)."""
    for meta in sorted(vllm_venv().glob("lib/python*/site-packages/vllm*.dist-info/METADATA")):
        m = re.search(r"^Version: (\S+)$", meta.read_text(encoding="utf-8", errors="replace"), re.MULTILINE)
        if m:
            return f"{meta.parent.name.split('-')[0]}=={m.group(1)}"
    raise VLLMNotInstalled(f"vLLM is not installed in {vllm_venv()}: {INSTALL_HINT}")


@dataclass(frozen=True)
class ConvertedModel:
    folder: Path               # what `--model` gets
    record: dict[str, Any]     # conversion.json

    @property
    def sha256(self) -> str:
        return str(self.record["sha256"])

    @property
    def gguf_sha256(self) -> str:
        return str(self.record["gguf_sha256"])


def _cache_root() -> Path:
    from agentic_repro.harness.embedded.gguf import default_cache_dir

    return default_cache_dir().parent / "vllm-models"


def _entry(gguf_sha256: str) -> Path:
    return _cache_root() / f"{gguf_sha256[:16]}-bf16-v{CONVERSION_VERSION}"


def _resolve(base: str) -> tuple[Path, str]:
    from agentic_repro.harness.embedded.base_model import resolve_base
    from agentic_repro.harness.embedded.gguf import file_sha256

    b = resolve_base(base)
    if not b.is_gguf:
        raise VLLMNotInstalled(f"base={base}: not a GGUF; a Hugging Face folder or id is served as it is "
                               "(set the backbone's `model_dir`)")
    return Path(b.ref), file_sha256(b.ref)


# the folder's hash is checked once per process and folder state (a 1.3 GB re-hash takes seconds)
_verified: dict[tuple[str, int], str] = {}


def files_sha256(folder: Path, names: list[str]) -> str:
    """sha256 over the named files of ``folder`` (name and file hash, sorted), as harness.hashing.sha256_tree does
    for a whole folder. Only the conversion's own files count: tools that hash the folder leave sidecars in it
    (``<file>.sha256``, e.g. training's base identity), which do not change what vLLM loads."""
    import hashlib

    h = hashlib.sha256()
    for name in sorted(names):
        h.update(name.encode() + b"\0" + sha256_file(folder / name).encode() + b"\n")
    return h.hexdigest()


def _folder_state(folder: Path, names: list[str]) -> int:
    return hash(tuple((n, (folder / n).stat().st_size, (folder / n).stat().st_mtime_ns) for n in sorted(names)))


def converted_model(base: str = "local", *, verify: bool = True) -> ConvertedModel:
    """The converted folder of ``base`` (refused when missing or when its bytes differ from its record)."""
    _, sha = _resolve(base)
    entry = _entry(sha)
    rec_path = entry / "conversion.json"
    if not rec_path.is_file():
        raise VLLMNotInstalled(f"the {base} model is not converted for vLLM ({entry}): {INSTALL_HINT}")
    record = json.loads(rec_path.read_text(encoding="utf-8"))
    folder = entry / "model"
    if record.get("gguf_sha256") != sha:
        raise VLLMNotInstalled(f"{rec_path} belongs to GGUF {record.get('gguf_sha256')}, not {sha}: {INSTALL_HINT}")
    if verify:
        names = list(record.get("files") or [])
        missing = [n for n in names if not (folder / n).is_file()]
        if not names or missing:
            raise VLLMNotInstalled(f"{folder} lacks {missing or 'its file list'} (see {rec_path}): {INSTALL_HINT}")
        state = (str(folder), _folder_state(folder, names))
        got = _verified.get(state) or files_sha256(folder, names)
        if got != record.get("sha256"):
            raise VLLMNotInstalled(f"{folder} hashes to {got}, its record says {record.get('sha256')} "
                                   f"(changed or truncated since the conversion): {INSTALL_HINT}")
        _verified[state] = got
    return ConvertedModel(folder, record)


def prepare(base: str = "local", *, python: Path | None = None) -> ConvertedModel:
    """Convert ``base``'s GGUF with the vLLM venv's transformers unless it is converted already; record it."""
    from agentic_repro.harness.embedded.gguf import _locked

    gguf, sha = _resolve(base)
    entry = _entry(sha)
    entry.parent.mkdir(parents=True, exist_ok=True)
    with _locked(entry.parent / f".{entry.name}.lock"):
        if (entry / "conversion.json").is_file():
            return converted_model(base)
        tmp = entry.with_name(f".{entry.name}.{os.getpid()}.partial")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        py = python or vllm_python()
        t0 = time.monotonic()
        proc = subprocess.run([str(py), str(CONVERTER), str(gguf), str(tmp / "model")], capture_output=True,
                              text=True, check=False)
        if proc.returncode != 0:
            shutil.rmtree(tmp, ignore_errors=True)
            raise VLLMNotInstalled(f"converting {gguf} failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
        info = json.loads(proc.stdout.strip().splitlines()[-1])
        names = sorted(f.name for f in (tmp / "model").iterdir() if f.is_file())
        record = {"gguf_sha256": sha, "gguf": str(gguf), "sha256": files_sha256(tmp / "model", names), "files": names,
                  "conversion_version": CONVERSION_VERSION, **info,
                  "wall_seconds": round(time.monotonic() - t0, 1)}
        (tmp / "conversion.json").write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
        shutil.rmtree(entry, ignore_errors=True)
        os.replace(tmp, entry)
    return converted_model(base)


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] not in ("prepare", "check"):
        raise SystemExit("usage: python -m agentic_repro.harness.vllm.model prepare|check [base=local]")
    base = next((a.split("=", 1)[1] for a in args[1:] if a.startswith("base=")), "local")
    try:
        m = prepare(base) if args[0] == "prepare" else converted_model(base)
    except VLLMNotInstalled as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(json.dumps({"folder": str(m.folder), **m.record}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
