"""make data (bench2 part): the second-batch files are in the manifest with the README's sha256; FinQA and
DeepResearch Bench's reference.jsonl are downloaded and checked by git blob id, else one clear error."""
from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

import pytest

from agentic_repro.scripts import fetch_data as fd

SHARED = Path(__file__).resolve().parents[2] / "shared" / "datasets"
BENCH2 = ["pubmedqa/pqa_labeled.jsonl", "strategyqa/strategyqa_train.jsonl", "strategyqa/strategyqa_dev_eladsegal.jsonl",
          "strategyqa/strategyqa_train_eladsegal.jsonl", "livebench/reasoning_spatial.jsonl",
          "livebench/reasoning_web_of_lies_v2.jsonl", "livebench/reasoning_zebra_puzzle.jsonl",
          "socialmaze/blood_6_all_hf.jsonl", "socialmaze/hf_10pct.jsonl", "socialmaze/blood_6_all_hf_ae8de50.jsonl",
          "deepresearch_bench/query.jsonl", "deepresearch_bench/criteria.jsonl"]


def test_second_batch_files_are_in_the_manifest_with_their_sha256():
    assert set(BENCH2) <= set(fd.MANIFEST)
    if not SHARED.is_dir():
        # the copies are checked against their source, which only exists beside a checkout (CI has it); a user
        # without it fetched the files from their public sources, checked by the manifest's sha256 in make data
        pytest.skip("../shared/datasets (the copies' source) is not beside this checkout")
    for rel in BENCH2:
        assert hashlib.sha256((SHARED / rel).read_bytes()).hexdigest() == fd.MANIFEST[rel][0], rel


def test_git_blob_id_is_gits(tmp_path):
    f = tmp_path / "x"
    f.write_bytes(b"hello\n")
    try:
        want = subprocess.run(["git", "hash-object", str(f)], capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        want = "ce013625030ba8dba906f756967f9e9ca394464a"
    assert fd.git_blob_id(b"hello\n") == want


def test_fetch_blob_places_only_the_right_bytes(tmp_path, monkeypatch):
    data = b'[{"id": "x"}]'
    monkeypatch.setitem(fd.BLOB_DOWNLOADS, "finqa/test.json", (fd.git_blob_id(data), "czyssrs/FinQA", "c", "p"))
    assert "git blob checked" in fd.fetch_blob(tmp_path, "finqa/test.json", download=lambda url: data)
    assert (tmp_path / "finqa/test.json").read_bytes() == data
    assert "present" in fd.fetch_blob(tmp_path, "finqa/test.json", download=lambda url: 1 / 0)
    (tmp_path / "finqa/test.json").unlink()
    with pytest.raises(RuntimeError, match="expected"):
        fd.fetch_blob(tmp_path, "finqa/test.json", download=lambda url: b"tampered")
    assert not (tmp_path / "finqa/test.json").exists()


def test_fetch_blob_offline_is_one_clear_line(tmp_path):
    def offline(url):
        raise OSError("Name or service not known")

    with pytest.raises(RuntimeError) as err:
        fd.fetch_blob(tmp_path, "finqa/test.json", download=offline)
    msg = str(err.value)
    assert "\n" not in msg and "make data" in msg and "59958c7c3bb3b21f4dff6bc912a0fe0ae710aee0" in msg


def test_training_splits_are_in_make_data():
    """MATH train (third batch, sha256 of the README) is copied like the test files; FinQA train/dev download like
    test.json, from the same pinned commit, checked by the blob ids `git ls-tree` gives for dataset/*.json there."""
    sha, repo, commit, path, how = fd.MANIFEST["math/math_train.jsonl"]
    assert sha == "fe0b2f6be7a39f18747701dabcf11b9df1af9ab53fbb07dd6fdde783d0baada1" and how == "assembled"
    assert (repo, commit) == ("wulei20/AML_HW4_Infer", "1460fcce590211503876311be7fdb1103117afd4")
    _, frepo, fcommit, _ = fd.BLOB_DOWNLOADS["finqa/test.json"]
    assert fd.BLOB_DOWNLOADS["finqa/train.json"] == ("a6c2c5a60f9abe3fba5a793cc4d9e1dee2e09209", frepo, fcommit,
                                                     "dataset/train.json")
    assert fd.BLOB_DOWNLOADS["finqa/dev.json"] == ("970f239f591c782b17df420c0d343b780737f3da", frepo, fcommit,
                                                   "dataset/dev.json")
    if SHARED.is_dir():
        assert hashlib.sha256((SHARED / "math/math_train.jsonl").read_bytes()).hexdigest() == sha


def test_make_data_places_math_train_from_shared(tmp_path):
    if not (SHARED / "math/math_train.jsonl").is_file():
        pytest.skip("../shared/datasets (the copy's source) is not beside this checkout")
    out = subprocess.run([sys.executable, "-c", "import sys; from agentic_repro.scripts import fetch_data as fd; "
                          "fd.BLOB_DOWNLOADS.clear(); "
                          "fd.MANIFEST = {'math/math_train.jsonl': fd.MANIFEST['math/math_train.jsonl']}; "
                          "import agentic_repro.envs.data as e; e.fetch_alfworld = lambda *a: 'skip'; "
                          "e.fetch_webshop = e.fetch_agent_prompts = lambda *a: []; "
                          f"sys.exit(fd.main(['--dest', {str(tmp_path)!r}, '--shared', {str(SHARED)!r}]))"],
                         capture_output=True, text=True, cwd=Path(__file__).resolve().parents[1])
    assert out.returncode == 0, out.stderr
    got = hashlib.sha256((tmp_path / "math/math_train.jsonl").read_bytes()).hexdigest()
    assert got == fd.MANIFEST["math/math_train.jsonl"][0]
