"""The llama-server build: cache key, pinned sdist check, binary lookup, the Python bindings bound to its libraries
(no compiler run here)."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from agentic_repro.harness.embedded import build as lb


def test_key_changes_with_the_sdist_or_any_flag():
    k = lb.build_key()
    assert k == lb.build_key(lb.SDIST_SHA256, lb.CMAKE_FLAGS) and len(k) == 16
    assert lb.build_key("0" * 64) != k
    assert lb.build_key(flags=(*lb.CMAKE_FLAGS, "-DGGML_NATIVE=ON")) != k


def test_portable_offline_flags():
    flags = set(lb.CMAKE_FLAGS)
    assert {"-DGGML_OPENMP=OFF", "-DGGML_NATIVE=OFF", "-DGGML_AVX2=ON", "-DGGML_FMA=ON", "-DGGML_F16C=ON",
            "-DLLAMA_CURL=OFF", "-DLLAMA_USE_PREBUILT_UI=OFF"} <= flags
    # shared libraries found beside the binary: the one build the Python bindings load too (bind_python)
    assert {"-DBUILD_SHARED_LIBS=ON", "-DCMAKE_INSTALL_RPATH=$ORIGIN", "-DCMAKE_BUILD_WITH_INSTALL_RPATH=ON"} <= flags


def test_cache_location_follows_the_project_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("AGENTIC_REPRO_CACHE", str(tmp_path))
    monkeypatch.delenv(lb.BINARY_ENV, raising=False)
    assert lb.binary_path() == tmp_path / "llama-server" / lb.build_key() / "llama-server"
    assert lb.find_binary() is None
    b = lb.binary_path()
    b.parent.mkdir(parents=True)
    b.write_text("#!/bin/sh\n")
    b.chmod(0o755)
    assert lb.find_binary() == b
    assert lb.build(sdist=tmp_path / "never-read.tar.gz") == b  # cached: no build, the sdist is not even opened


def test_env_binary_wins(tmp_path, monkeypatch):
    exe = tmp_path / "my-llama-server"
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    monkeypatch.setenv(lb.BINARY_ENV, str(exe))
    assert lb.find_binary() == exe
    monkeypatch.setenv(lb.BINARY_ENV, str(tmp_path / "absent"))
    assert lb.find_binary() is None


def test_a_wrong_sdist_is_refused_before_extraction(tmp_path, monkeypatch):
    monkeypatch.setenv("AGENTIC_REPRO_CACHE", str(tmp_path / "cache"))
    fake = tmp_path / lb.SDIST_FILE
    fake.write_bytes(b"not the pinned sdist")
    with pytest.raises(lb.BuildError, match="pinned sha256"):
        lb.build(sdist=fake)
    d = tmp_path / "dl"
    d.mkdir()
    (d / lb.SDIST_FILE).write_bytes(b"tampered")
    with pytest.raises(lb.BuildError, match="refusing to build"):
        lb.fetch_sdist(d)  # already present: checked, not downloaded
    assert not lb.binary_path().exists()


def test_print_mode_exit_codes(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("AGENTIC_REPRO_CACHE", str(tmp_path))
    monkeypatch.delenv(lb.BINARY_ENV, raising=False)
    assert lb.main(["--print"]) == 1 and "make install-server" in capsys.readouterr().err
    b = lb.binary_path()
    b.parent.mkdir(parents=True)
    b.write_text("")
    os.chmod(b, 0o755)
    assert lb.main(["--print"]) == 0 and capsys.readouterr().out.strip() == str(b)


def _fake_build(tmp_path, monkeypatch, libs: dict[str, bytes], links: dict[str, str]):
    """A cached build (binary, libraries, build.json) and an installed llama-cpp-python without libraries, both
    under tmp_path: the fake distribution comes first on sys.path."""
    import hashlib
    import json

    monkeypatch.setenv("AGENTIC_REPRO_CACHE", str(tmp_path / "cache"))
    b = lb.binary_path()
    b.parent.mkdir(parents=True)
    b.write_text("#!/bin/sh\n")
    for name, data in libs.items():
        (b.parent / name).write_bytes(data)
    for name, target in links.items():
        (b.parent / name).symlink_to(target)
    (b.parent / "build.json").write_text(json.dumps(
        {"libraries_sha256": {n: hashlib.sha256(d).hexdigest() for n, d in libs.items()}, "library_links": links}))
    site = tmp_path / "site"
    (site / "llama_cpp").mkdir(parents=True)
    (site / "llama_cpp" / "__init__.py").write_text("raise ImportError('the bindings must not be imported')\n")
    dist = site / f"llama_cpp_python-{lb.SDIST_VERSION}.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: llama_cpp_python\nVersion: {lb.SDIST_VERSION}\n")
    monkeypatch.syspath_prepend(str(site))
    # find_spec answers from sys.modules first: a worker that imported the real bindings would bind into the venv's
    monkeypatch.delitem(sys.modules, "llama_cpp", raising=False)
    return site / "llama_cpp" / "lib", dist


def test_place_libraries_keeps_files_and_links(tmp_path):
    bin_dir, dest = tmp_path / "bin", tmp_path / "dest"
    bin_dir.mkdir()
    dest.mkdir()
    (bin_dir / "libllama.so.0.5.0").write_bytes(b"llama")
    (bin_dir / "libllama.so.0").symlink_to("libllama.so.0.5.0")
    (bin_dir / "libllama.so").symlink_to("libllama.so.0")
    (bin_dir / "llama-server").write_text("not a library")
    libs, links = lb.place_libraries(bin_dir, dest)
    assert set(libs) == {"libllama.so.0.5.0"} and links == {"libllama.so": "libllama.so.0",
                                                           "libllama.so.0": "libllama.so.0.5.0"}
    assert (dest / "libllama.so").read_bytes() == b"llama" and (dest / "libllama.so").is_symlink()
    assert sorted(p.name for p in dest.iterdir()) == ["libllama.so", "libllama.so.0", "libllama.so.0.5.0"]
    (tmp_path / "empty").mkdir()
    with pytest.raises(lb.BuildError, match="without libllama.so"):
        lb.place_libraries(tmp_path / "empty", dest)


def test_bind_python_copies_the_builds_libraries_into_the_bindings(tmp_path, monkeypatch):
    libs = {"libllama.so.0.5.0": b"llama", "libggml.so.0.25.3": b"ggml"}
    links = {"libllama.so": "libllama.so.0.5.0", "libggml.so": "libggml.so.0.25.3"}
    lib, _ = _fake_build(tmp_path, monkeypatch, libs, links)
    assert lb.bind_python() == lib
    assert {p.name: p.read_bytes() for p in lib.iterdir()} == {**libs, "libllama.so": b"llama", "libggml.so": b"ggml"}
    assert {p.name for p in lib.iterdir() if p.is_symlink()} == set(links)
    # a library that differs from the build's (an older wheel's own) is replaced; an identical one is left as is
    (lib / "libggml.so").unlink()
    (lib / "libggml.so").write_bytes(b"the wheel's own")
    (lib / "libggml.so.0.25.3").write_bytes(b"the wheel's own")
    before = (lib / "libllama.so.0.5.0").stat().st_mtime_ns
    assert lb.main(["--bind-python"]) == 0
    assert (lib / "libggml.so").is_symlink() and (lib / "libggml.so").read_bytes() == b"ggml"
    assert (lib / "libllama.so.0.5.0").stat().st_mtime_ns == before


def test_bind_python_refuses_other_bindings_or_a_build_without_libraries(tmp_path, monkeypatch, capsys):
    lib, dist = _fake_build(tmp_path, monkeypatch, {"libggml.so": b"ggml"}, {})
    with pytest.raises(lb.BuildError, match="names no shared libraries"):
        lb.bind_python()  # a static build's build.json: nothing to bind
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: llama_cpp_python\nVersion: 0.3.1\n")
    assert lb.main(["--bind-python"]) == 1 and "one source" in capsys.readouterr().err
    assert not lib.exists()


def test_the_installed_bindings_load_the_server_builds_libraries():
    """`make install-python-server`: llama_cpp (no compile of its own) runs on the cached llama-server build's
    libllama.so, byte for byte, and calls into it (training's tests then load a model and a LoRA through it)."""
    import hashlib

    pytest.importorskip("llama_cpp")
    from llama_cpp import llama_cpp as ll

    binary = lb.find_binary()
    assert binary is not None, lb.MISSING_HINT
    loaded = Path(ll._lib._name)
    assert loaded.parent.name == "lib" and loaded.parent.parent.name == "llama_cpp"
    real = loaded.resolve()
    assert hashlib.sha256(real.read_bytes()).hexdigest() == lb.build_info(binary)["libraries_sha256"][real.name]
    ll.llama_backend_init()
    assert ll.llama_max_devices() >= 1
