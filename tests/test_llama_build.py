"""The llama-server build: cache key, pinned sdist check, binary lookup (no compiler run here)."""
from __future__ import annotations

import os

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
            "-DLLAMA_CURL=OFF", "-DLLAMA_USE_PREBUILT_UI=OFF", "-DBUILD_SHARED_LIBS=OFF"} <= flags


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
