"""Build llama.cpp's own ``llama-server`` from the pinned llama-cpp-python sdist, once per (sdist, flags).

Why: llama-cpp-python's Python server serves one request at a time; llama.cpp's C++ server has
parallel slots (continuous batching) and per-request LoRA. Its source is vendored in the sdist we
already pin (``vendor/llama.cpp``), so the binary is built from bytes whose sha256 is checked here,
with the same portable flags as the wheel (no OpenMP, no -march=native: AMX faults on this VM).

    python -m agentic_repro.harness.embedded.build            # build (or reuse) and print the binary's path
    python -m agentic_repro.harness.embedded.build --print    # print the cached path or exit 1 (no build)

The binary lives at ``~/.cache/agentic-repro/llama-server/<key>/llama-server`` (``key`` = sha256 of
the sdist sha256 and the flags) with llama.cpp's shared libraries and a ``build.json`` beside it; a later install
finds it and is instant. The build runs under an inter-process lock and the binary appears last (rename).

The same build serves llama-cpp-python's bindings (``server.impl=python``; training's tests load LoRAs with
``llama_cpp.Llama``): ``make install-python-server`` installs the bindings without their own compile of llama.cpp
(``LLAMA_BUILD=OFF``, ~10 min on 2 cores saved) and ``--bind-python`` copies these libraries into their
``llama_cpp/lib``, where they load them from. One compile of one source for both.
"""
from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

from agentic_repro.harness.hashing import sha256_file

SDIST_NAME = "llama-cpp-python"
SDIST_VERSION = "0.3.36"
#: sha256 of llama_cpp_python-0.3.36.tar.gz as served by PyPI (checked before anything is extracted).
SDIST_SHA256 = "832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e"
SDIST_FILE = f"llama_cpp_python-{SDIST_VERSION}.tar.gz"

#: Portable CPU flags (no OpenMP, no -march=native), what the server build needs offline (no curl, no web UI
#: download: LLAMA_USE_PREBUILT_UI fetches it at configure time), and shared libraries found beside the binary
#: ($ORIGIN), so that llama-cpp-python's bindings load the very libraries the server runs on (``bind_python``).
CMAKE_FLAGS: tuple[str, ...] = (
    "-DCMAKE_BUILD_TYPE=Release",
    "-DBUILD_SHARED_LIBS=ON", "-DCMAKE_INSTALL_RPATH=$ORIGIN", "-DCMAKE_BUILD_WITH_INSTALL_RPATH=ON",
    "-DGGML_OPENMP=OFF", "-DGGML_NATIVE=OFF",
    "-DGGML_AVX=ON", "-DGGML_AVX2=ON", "-DGGML_FMA=ON", "-DGGML_F16C=ON",
    "-DLLAMA_CURL=OFF", "-DLLAMA_USE_PREBUILT_UI=OFF", "-DLLAMA_BUILD_UI=OFF",
    "-DLLAMA_BUILD_TESTS=OFF", "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DLLAMA_BUILD_TOOLS=ON", "-DLLAMA_BUILD_SERVER=ON",
)

BINARY_ENV = "AGENTIC_REPRO_LLAMA_SERVER"
MISSING_HINT = "llama-server is not built: run `make install-server` (one-time, ~5-13 min on 2 cores)"


class BuildError(RuntimeError):
    """The sdist could not be obtained/verified or the build failed."""


def cache_root() -> Path:
    """``$AGENTIC_REPRO_CACHE/llama-server`` (default ``~/.cache/agentic-repro/llama-server``), like the models."""
    env = os.environ.get("AGENTIC_REPRO_CACHE")
    base = Path(env).expanduser() if env else Path.home() / ".cache" / "agentic-repro"
    return base / "llama-server"


def build_key(sdist_sha256: str = SDIST_SHA256, flags: tuple[str, ...] = CMAKE_FLAGS) -> str:
    """Cache key: the sdist's bytes and the flags decide the binary."""
    h = hashlib.sha256()
    h.update(sdist_sha256.encode())
    for f in flags:
        h.update(b"\0" + f.encode())
    return h.hexdigest()[:16]


def binary_path(key: str | None = None) -> Path:
    return cache_root() / (key or build_key()) / "llama-server"


def find_binary() -> Path | None:
    """The server binary to use: ``$AGENTIC_REPRO_LLAMA_SERVER`` if set, else the cached build."""
    env = os.environ.get(BINARY_ENV, "").strip()
    if env:
        p = Path(env).expanduser()
        return p if p.is_file() and os.access(p, os.X_OK) else None
    p = binary_path()
    return p if p.is_file() and os.access(p, os.X_OK) else None


def build_info(binary: Path) -> dict:
    """``build.json`` of a cached build (empty for a user-supplied binary)."""
    with contextlib.suppress(OSError, ValueError):
        return json.loads((binary.parent / "build.json").read_text())
    return {}


def fetch_sdist(dest: Path) -> Path:
    """Download the pinned sdist with pip (its HTTP cache makes repeats local) and check its sha256."""
    dest.mkdir(parents=True, exist_ok=True)
    target = dest / SDIST_FILE
    if not target.is_file():
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", ":all:",
             f"{SDIST_NAME}=={SDIST_VERSION}", "-d", str(dest)],
            check=True,
        )
    if not target.is_file():
        raise BuildError(f"pip download did not produce {target}")
    sha = sha256_file(target)
    if sha != SDIST_SHA256:
        raise BuildError(f"{target} has sha256 {sha}, pinned {SDIST_SHA256}; refusing to build from it")
    return target


def _extract_llama_cpp(sdist: Path, into: Path) -> Path:
    prefix = f"llama_cpp_python-{SDIST_VERSION}/vendor/llama.cpp/"
    with tarfile.open(sdist) as tf:
        members = [m for m in tf.getmembers() if m.name.startswith(prefix)]
        if not members:
            raise BuildError(f"{sdist} has no {prefix}")
        tf.extractall(into, members=members, filter="data")
    return into / prefix


def build(jobs: int | None = None, sdist: Path | None = None, log=sys.stderr, progress: bool = False) -> Path:
    """Return the cached binary, building it first if needed (``progress``: cmake's output, ninja's ``[n/N]``, on
    stdout for scripts/install_step.py's heartbeat; otherwise discarded)."""
    out = binary_path()
    if out.is_file():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    import fcntl

    with open(out.parent / ".lock", "a+b") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
        if out.is_file():  # another process built it while we waited
            return out
        t0 = time.monotonic()
        with tempfile.TemporaryDirectory(prefix="agentic-repro-llama-build-") as tmp:
            tmpd = Path(tmp)
            if sdist is None:
                sdist = fetch_sdist(tmpd / "sdist")
            elif sha256_file(sdist) != SDIST_SHA256:
                raise BuildError(f"{sdist} does not match the pinned sha256 {SDIST_SHA256}")
            src = _extract_llama_cpp(sdist, tmpd / "src")
            bdir = tmpd / "build"
            gen = ["-G", "Ninja"] if shutil.which("ninja") else []
            j = str(jobs or os.cpu_count() or 1)
            print(f"building llama-server from {sdist.name} (-j{j}) ...", file=log, flush=True)
            try:
                subprocess.run(["cmake", "-S", str(src), "-B", str(bdir), *gen, *CMAKE_FLAGS],
                               check=True, stdout=None if progress else subprocess.DEVNULL)
                subprocess.run(["cmake", "--build", str(bdir), "--target", "llama-server", "-j", j],
                               check=True, stdout=None if progress else subprocess.DEVNULL)
            except (subprocess.CalledProcessError, FileNotFoundError) as e:
                raise BuildError(f"llama-server build failed: {e}") from e
            built = bdir / "bin" / "llama-server"
            if not built.is_file():
                raise BuildError(f"build finished without {built}")
            libs, links = place_libraries(bdir / "bin", out.parent)
            staged = out.parent / ".llama-server.partial"
            shutil.copy2(built, staged)
            info = {
                "sdist": SDIST_FILE, "sdist_sha256": SDIST_SHA256, "flags": list(CMAKE_FLAGS),
                "binary_sha256": sha256_file(staged), "libraries_sha256": libs, "library_links": links,
                "build_seconds": round(time.monotonic() - t0, 1),
                "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            }
            (out.parent / "build.json").write_text(json.dumps(info, indent=1) + "\n")
            os.replace(staged, out)
        print(f"llama-server built in {info['build_seconds']} s: {out}", file=log, flush=True)
    return out


def _place(src: Path, folder: Path, link: str | None) -> None:
    """``src`` into ``folder`` under its name, atomically: a symlink to ``link``, else a copy of the file."""
    tmp = folder / f".{src.name}.partial"
    with contextlib.suppress(FileNotFoundError):
        tmp.unlink()
    if link is not None:
        os.symlink(link, tmp)
    else:
        shutil.copy2(src, tmp)
    os.replace(tmp, folder / src.name)


def place_libraries(bin_dir: Path, dest: Path) -> tuple[dict[str, str], dict[str, str]]:
    """Copy a build's shared libraries (llama, ggml*, mtmd, ...) into ``dest``, links as links; returns
    ({file: sha256}, {link: target}) for ``build.json``."""
    libs, links = {}, {}
    for lib in sorted(bin_dir.glob("lib*.so*")):
        if lib.is_symlink():
            links[lib.name] = os.readlink(lib)
            _place(lib, dest, links[lib.name])
        else:
            _place(lib, dest, None)
            libs[lib.name] = sha256_file(dest / lib.name)
    if "libllama.so" not in libs and "libllama.so" not in links:
        raise BuildError(f"build finished without libllama.so in {bin_dir}")
    return libs, links


def bind_python() -> Path:
    """Copy the cached build's shared libraries into the installed ``llama_cpp`` package's ``lib/``, where its
    bindings load them (``llama_cpp/llama_cpp.py``, ``_ggml.py``); returns that folder. The package must be the
    pinned llama-cpp-python installed without its own build (``make install-python-server``)."""
    import importlib.metadata
    import importlib.util

    binary = binary_path()
    if not binary.is_file():
        raise BuildError(MISSING_HINT)
    try:
        version = importlib.metadata.version(SDIST_NAME)
    except importlib.metadata.PackageNotFoundError:
        raise BuildError(f"{SDIST_NAME} is not installed: run `make install-python-server`") from None
    if version != SDIST_VERSION:
        raise BuildError(f"{SDIST_NAME} {version} is installed, the build is from {SDIST_VERSION}: the bindings "
                         "and the libraries must come from one source")
    spec = importlib.util.find_spec("llama_cpp")  # found, not imported (importing loads the libraries)
    if spec is None or not spec.submodule_search_locations:
        raise BuildError(f"{SDIST_NAME} {version} has no llama_cpp package")
    info = build_info(binary)
    libs, links = info.get("libraries_sha256") or {}, info.get("library_links") or {}
    if "libllama.so" not in libs and "libllama.so" not in links:
        raise BuildError(f"{binary.parent}/build.json names no shared libraries: a build from before they were kept; "
                         "remove that folder and run `make install-server`")
    lib = Path(next(iter(spec.submodule_search_locations))) / "lib"
    lib.mkdir(exist_ok=True)
    for name, sha in libs.items():
        if not (lib / name).is_symlink() and (lib / name).is_file() and sha256_file(lib / name) == sha:
            continue
        _place(binary.parent / name, lib, None)
    for name, target in links.items():
        if not ((lib / name).is_symlink() and os.readlink(lib / name) == target):
            _place(binary.parent / name, lib, target)
    return lib


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--print", action="store_true", help="print the cached binary's path; exit 1 if absent")
    ap.add_argument("--jobs", type=int, default=None)
    ap.add_argument("--sdist", type=Path, default=None, help="a local copy of the pinned sdist")
    ap.add_argument("--progress", action="store_true", help="show cmake's and the compiler's [n/N] output")
    ap.add_argument("--bind-python", action="store_true",
                    help="copy the build's shared libraries into the installed llama_cpp package (no compile)")
    a = ap.parse_args(argv)
    if a.print:
        p = find_binary()
        if p is None:
            print(MISSING_HINT, file=sys.stderr)
            return 1
        print(p)
        return 0
    try:
        print(bind_python() if a.bind_python else build(jobs=a.jobs, sdist=a.sdist, progress=a.progress))
    except BuildError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
