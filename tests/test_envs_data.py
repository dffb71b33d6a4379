"""``make data`` for the environments: ALFWorld games copied and checked as a whole, WebShop files kept only
when size and sha256 match (downloads simulated: no network in tests)."""
from __future__ import annotations

import hashlib
import io
from pathlib import Path

import pytest

import agentic_repro.envs.data as envdata

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


def test_agent_prompts_copied_checked_and_rebuilt_from_upstream(tmp_path, monkeypatch):
    import json

    lines = envdata.fetch_agent_prompts(tmp_path, SHARED)
    assert len(lines) == 5 and all(line.startswith("ok") for line in lines), lines
    prov = json.loads((tmp_path / "agent_prompts" / "provenance.json").read_text())
    assert prov["react_alfworld_3prompts.jsonl"]["source"].startswith("https://raw.githubusercontent.com/ysymyth/ReAct/")
    # no shared copy: rebuilt from (simulated) upstream files, kept only when the sha256 matches
    rows = [json.loads(x) for x in (SHARED / "agent_prompts/react_alfworld_3prompts.jsonl").read_text().splitlines()]
    upstream = {"alfworld_3prompts.json": json.dumps({r["key"]: r["prompt"] for r in rows}).encode()}
    for name in ("base_prompt.txt", "reflection_few_shot_examples.txt", "reflexion_few_shot_examples.txt"):
        src = {"base_prompt.txt": "reflexion_webshop_base_prompt", "reflection_few_shot_examples.txt":
               "reflexion_webshop_reflection_few_shot_examples", "reflexion_few_shot_examples.txt":
               "reflexion_alfworld_few_shot_examples"}[name]
        upstream[name] = json.loads((SHARED / f"agent_prompts/{src}.jsonl").read_text())["text"].encode()
    ws = [json.loads(x) for x in (SHARED / "agent_prompts/react_webshop_prompts.jsonl").read_text().splitlines()]
    cells = [{"source": []} for _ in range(6)]
    for r in ws:
        cells[r["cell"]] = {"source": [f"x = 1\n{r['name']} = {r['prompt']!r}\n"]}
    upstream["WebShop.ipynb"] = json.dumps({"cells": cells}).encode()
    upstream["reflexion_few_shot_examples.txt"] += b" "  # one upstream file changed: refused
    monkeypatch.setattr(envdata.urllib.request, "urlopen",
                        lambda url, timeout: _Resp(upstream[url.rsplit("/", 1)[1]]))
    out = tmp_path / "fresh"
    lines = envdata.fetch_agent_prompts(out, tmp_path / "no-shared")
    bad = [line for line in lines if line.startswith("ERR")]
    assert len(bad) == 1 and "reflexion_alfworld_few_shot_examples" in bad[0] and "expected" in bad[0]
    assert not (out / "agent_prompts/reflexion_alfworld_few_shot_examples.jsonl").exists()
    for name in ("react_alfworld_3prompts.jsonl", "react_webshop_prompts.jsonl", "reflexion_webshop_base_prompt.jsonl"):
        assert (out / "agent_prompts" / name).read_bytes() == (SHARED / "agent_prompts" / name).read_bytes()
