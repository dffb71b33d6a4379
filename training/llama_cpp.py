"""llama.cpp's Python converters (``convert_hf_to_gguf.py``, ``convert_lora_to_gguf.py``), from the pinned sdist.

The converters are vendored in the ``llama-cpp-python`` sdist the embedded backbone is built from, so the GGUF files
we write match the llama.cpp that serves them. The sdist is fetched with pip (its cache makes later calls instant),
checked against its pinned sha256, and only the converter files are extracted into the model cache
(``~/.cache/agentic-repro/llama-cpp-python-<version>/``); nothing is copied into this repository. Each conversion runs
in a child process with this interpreter, so the converters' own ``gguf-py`` (not the ``gguf`` package transformers
uses) is what writes the file.
"""
from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

from agentic_repro.harness.embedded.gguf import _locked, default_cache_dir
from agentic_repro.harness.hashing import sha256_file

__all__ = ["LLAMA_CPP_PYTHON_VERSION", "SDIST_SHA256", "ConversionError", "convert_hf_to_gguf",
           "convert_lora_to_gguf", "converters_dir"]

#: The same pin as the ``local`` extra in pyproject.toml (a test checks they agree).
LLAMA_CPP_PYTHON_VERSION = "0.3.36"
SDIST_SHA256 = "832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e"
_MEMBERS = ("vendor/llama.cpp/convert_hf_to_gguf.py", "vendor/llama.cpp/convert_lora_to_gguf.py",
            "vendor/llama.cpp/conversion/", "vendor/llama.cpp/gguf-py/")


class ConversionError(RuntimeError):
    """A converter could not be obtained or failed; the message carries its output's tail."""


def _src_root(cache_dir: Path | None) -> Path:
    base = Path(cache_dir) if cache_dir is not None else default_cache_dir().parent
    return base / f"llama-cpp-python-{LLAMA_CPP_PYTHON_VERSION}"


def converters_dir(cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """The folder holding the converter scripts (``vendor/llama.cpp`` of the pinned sdist), fetched once."""
    root = _src_root(Path(cache_dir) if cache_dir is not None else None)
    target = root / "vendor" / "llama.cpp"
    done = root / ".extracted"
    if done.is_file():
        return target
    root.parent.mkdir(parents=True, exist_ok=True)
    with _locked(root.parent / f".{root.name}.lock"):
        if done.is_file():
            return target
        with tempfile.TemporaryDirectory(dir=root.parent, prefix=".sdist-") as tmp:
            proc = subprocess.run(
                [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", ":all:",
                 f"llama-cpp-python=={LLAMA_CPP_PYTHON_VERSION}", "-d", tmp],
                capture_output=True, text=True)
            sdists = list(Path(tmp).glob("llama_cpp_python-*.tar.gz"))
            if proc.returncode != 0 or not sdists:
                raise ConversionError(
                    f"could not fetch the llama-cpp-python=={LLAMA_CPP_PYTHON_VERSION} sdist with pip (needed for "
                    f"llama.cpp's GGUF converters): {(proc.stderr or proc.stdout)[-800:]}")
            sha = sha256_file(sdists[0])
            if sha != SDIST_SHA256:
                raise ConversionError(f"{sdists[0].name} has sha256 {sha}, pinned {SDIST_SHA256}; refusing it")
            stage = Path(tmp) / "x"
            with tarfile.open(sdists[0]) as tf:
                prefix = tf.getmembers()[0].name.split("/")[0] + "/"
                wanted = [m for m in tf.getmembers()
                          if any(m.name[len(prefix):].startswith(w) for w in _MEMBERS) and (m.isfile() or m.isdir())]
                tf.extractall(stage, members=wanted, filter="data")
            if root.exists():
                shutil.rmtree(root)
            os.replace(stage / prefix.rstrip("/"), root)
        done.write_text(f"{SDIST_SHA256}\n")
    return target


def _run(script: str, args: list[str], cache_dir: str | os.PathLike[str] | None) -> float:
    tools = converters_dir(cache_dir)
    env = {k: v for k, v in os.environ.items() if k != "NO_LOCAL_GGUF"}  # use the sdist's own gguf-py
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, str(tools / script), *args], capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise ConversionError(f"{script} {' '.join(args)} failed (exit {proc.returncode}):\n"
                              f"{(proc.stderr or proc.stdout)[-2000:]}")
    return time.perf_counter() - start


def _atomic_out(out: Path):
    out.parent.mkdir(parents=True, exist_ok=True)
    return out.with_name(f".{out.name}.{os.getpid()}.partial")


def convert_hf_to_gguf(model_dir: str | os.PathLike[str], out: str | os.PathLike[str], *, outtype: str = "f32",
                       cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """A Hugging Face model folder (config, weights, tokenizer) -> one GGUF file, written atomically."""
    out = Path(out)
    tmp = _atomic_out(out)
    try:
        _run("convert_hf_to_gguf.py", [str(model_dir), "--outfile", str(tmp), "--outtype", outtype], cache_dir)
        os.replace(tmp, out)
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink()
    return out


def convert_lora_to_gguf(adapter_dir: str | os.PathLike[str], base_dir: str | os.PathLike[str],
                         out: str | os.PathLike[str], *, outtype: str = "f32",
                         cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """A peft LoRA folder -> a GGUF LoRA for llama.cpp. ``base_dir`` needs only the base's config and tokenizer."""
    out = Path(out)
    tmp = _atomic_out(out)
    try:
        _run("convert_lora_to_gguf.py", [str(adapter_dir), "--base", str(base_dir), "--outfile", str(tmp),
                                         "--outtype", outtype], cache_dir)
        os.replace(tmp, out)
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink()
    return out
