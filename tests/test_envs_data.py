"""``make data`` for the environments: ALFWorld games copied and checked as a whole, WebShop files kept only
when size and sha256 match (downloads simulated: no network in tests)."""
from __future__ import annotations

import hashlib
import io
from pathlib import Path

import pytest

import envs.data as envdata

SHARED = Path(__file__).resolve().parents[2] / "shared" / "datasets"
FIX = Path(__file__).parent / "fixtures" / "webshop"


class _Resp(io.BytesIO):
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False


def test_alfworld_games_are_copied_and_checked(tmp_path, monkeypatch):
    import zipfile

    line = envdata.fetch_alfworld(tmp_path, SHARED)
    assert line.startswith("ok") and "274 games" in line
    games = envdata.alfworld_games(tmp_path / envdata.ALFWORLD_DIR)
    assert len(games) == 274 and envdata.tree_sha256(games) == envdata.ALFWORLD_SHA256
    assert "already there" in envdata.fetch_alfworld(tmp_path, SHARED)
    games[0].write_text(games[0].read_text() + " ")  # a changed game is noticed
    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w") as z:  # a release archive whose games differ
        z.writestr("json_2.1.1/valid_seen/t/trial/game.tw-pddl", "{}")
    monkeypatch.setattr(envdata.urllib.request, "urlopen", lambda *a, **k: _Resp(archive.getvalue()))
    with pytest.raises(RuntimeError, match="sha256"):
        envdata.fetch_alfworld(tmp_path, tmp_path / "no-shared")


def _fake_manifest(monkeypatch, data: bytes):
    fake = {"items_shuffle_1000.json": (len(data), hashlib.sha256(data).hexdigest(), "-", "ID1")}
    monkeypatch.setattr(envdata, "WEBSHOP_FILES", fake)


def test_webshop_download_kept_only_when_size_and_sha_match(tmp_path, monkeypatch):
    good = (FIX / "items_shuffle_1000.json").read_bytes()
    _fake_manifest(monkeypatch, good)
    calls = []

    def urlopen(url, timeout):
        calls.append(url)
        return _Resp(payload)

    monkeypatch.setattr(envdata.urllib.request, "urlopen", urlopen)
    payload = good[:-1]  # truncated download
    lines = envdata.fetch_webshop(tmp_path, tmp_path / "no-shared")
    assert lines[0].startswith("ERR") and "expected" in lines[0]
    assert not (tmp_path / "webshop" / "items_shuffle_1000.json").exists()
    payload = good
    lines = envdata.fetch_webshop(tmp_path, tmp_path / "no-shared")
    assert lines[0].startswith("ok") and "ID1" in calls[-1]
    assert (tmp_path / "webshop" / "items_shuffle_1000.json").read_bytes() == good
    assert "already there" in envdata.fetch_webshop(tmp_path, tmp_path / "no-shared")[0]


def test_webshop_offline_reports_each_missing_file(tmp_path):
    lines = envdata.fetch_webshop(tmp_path, SHARED, download=False)
    by_name = {ln.split()[1].rstrip(":"): ln for ln in lines}
    assert by_name["webshop/items_ins_v2_1000.json"].startswith("ok")  # from ../shared/datasets
    assert by_name["webshop/items_shuffle_1000.json"].startswith("ERR")
    assert by_name["webshop/items_human_ins.json"].startswith("ERR")
