"""Fill the data directory (``make data``).

From ``../shared/datasets`` when it is there (a copy, sha256-checked), otherwise
from each file's public source (GitHub raw files at pinned commits), applying
the documented transformation and checking the sha256 of the result against the
table in ``../shared/datasets/README.md`` (copied into :data:`MANIFEST`).
"""
from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import shutil
import sys
import urllib.request
from pathlib import Path

RAW = "https://raw.githubusercontent.com/{repo}/{commit}/{path}"
MASARENA = ("zhhhhhhhy/add_swebench_to_MASArena", "af2702e0eef21b7965f9f6201aaaf333dc1386f9")

# file -> (sha256 of the placed file, source repo, commit, source path, transformation)
MANIFEST: dict[str, tuple[str, str, str, str, str]] = {
    "gsm8k/test.jsonl": ("3730d312f6e3440559ace48831e51066acaca737f6eabec99bccb9e4b3c39d14",
                         "openai/grade-school-math", "3101c7d5072418e28b9008a6636bde82a006892c",
                         "grade_school_math/data/test.jsonl", "copy"),
    "hotpotqa/hotpot_dev_v1_simplified.jsonl": ("67acbf9028efdeeac751bc6b9dd7648199b90df3eaa888a948a1ccce003dc9f0",
                                                "ysymyth/ReAct", "6bdb3a1fd38b8188fc7ba4102969fe483df8fdc9",
                                                "data/hotpot_dev_v1_simplified.json", "json-array"),
    "humaneval/HumanEval.jsonl": ("1d49078ba3e2b196b9344535bef34a43021f038fad9561d6ee7c53450609a6a2",
                                  "openai/human-eval", "6d43fb980f9fee3c892a914eda09951f772ad10d",
                                  "data/HumanEval.jsonl.gz", "gunzip"),
    "math/math500_test.jsonl": ("35dc41080a3680858b27fa7e0533d2d547825316fc5dafe5d316f4ccc5a06132",
                                "wulei20/AML_HW4_Infer", "1460fcce590211503876311be7fdb1103117afd4",
                                "data/math500/test1.jsonl", "copy"),
    "math/math_test_full.jsonl": ("e8f8bdaa204df54d5bf0977dd44dd4f74daec4c96b152560fb193657e1c176d6",
                                  "wulei20/AML_HW4_Infer", "1460fcce590211503876311be7fdb1103117afd4",
                                  "data/math/test/", "assembled"),
    # third batch: MATH's training split (7,496 of the 7,500 train problems: the 4 that are also test problems
    # removed), the only MATH data a planner/critic may be trained on; never scored
    "math/math_train.jsonl": ("fe0b2f6be7a39f18747701dabcf11b9df1af9ab53fbb07dd6fdde783d0baada1",
                              "wulei20/AML_HW4_Infer", "1460fcce590211503876311be7fdb1103117afd4",
                              "data/math/train/", "assembled"),
    "mbpp/mbpp.jsonl": ("ccf64ceae9c5403bf50a044cb6d505bfd2a2963ee58338ba268fd65beab92a9f",
                        "patdfb/TPC-EES", "30c8c572bfcd0fc5fa537210710d7fde134e4868", "mbpp/mbpp.jsonl", "copy"),
    "mbpp/sanitized-mbpp.jsonl": ("502db01bcc1e911d691d5212bd3d9c60ee52bbc2bd29457a520ace424bb2709d",
                                  "patdfb/TPC-EES", "30c8c572bfcd0fc5fa537210710d7fde134e4868",
                                  "mbpp/sanitized-mbpp.json", "json-array"),
}
# second batch (DyFlow / DynaGraph / AUQ benchmarks), provenance in ../shared/datasets/README.md
MANIFEST.update({
    "pubmedqa/pqa_labeled.jsonl": ("ec22fbeefab3eeeb925c457129d8ba2324b1bbc27a1ca2ac92a402e49b73531e",
                                   "pubmedqa/pubmedqa", "1cbae8e92f72f20c8d3747cbb3bf5bc53554d997",
                                   "data/ori_pqal.json", "pubmedqa"),
    "strategyqa/strategyqa_train.jsonl": ("dbc65326171dce7ed0446a8c96b44e5fd88f6195aa05ec51a76c8a5e8bc07095",
                                          "Ashok080/AOS-100-Agents", "18fb83121cf9a4bd0e786fa88963632e3dd4f55a",
                                          "strategyqa_train.json", "json-array"),
    "strategyqa/strategyqa_dev_eladsegal.jsonl": ("b49019f879d78251a249001e1669e3dff66e6ad16a60afadac81128418dbceb0",
                                                  "eladsegal/strategyqa", "1ba1e97452e189569357876f2854b01357ffbe37",
                                                  "data/strategyqa/dev.json", "json-array"),
    "strategyqa/strategyqa_train_eladsegal.jsonl": ("25fd11090401e288a8388679fffeeed19348a9eea5d90573da465b0573e12cf4",
                                                    "eladsegal/strategyqa", "1ba1e97452e189569357876f2854b01357ffbe37",
                                                    "data/strategyqa/train.json", "json-array"),
    "livebench/reasoning_spatial.jsonl": ("dee517361a762c045de84ea11df8a080c91390238a897017489b29fcf1bb9113",
                                          "LiveBench/LiveBench", "4fcc7aa5733f67a7ca5b86f70ab49d653967a465",
                                          "livebench/data/live_bench/reasoning/spatial/question.jsonl", "reconstructed"),
    "livebench/reasoning_web_of_lies_v2.jsonl": ("f4f22a565bbd477cf64cf7b50a10bae479e41cd223360452ff13d36c95af50f3",
                                                 "LiveBench/LiveBench", "b71ef926fe4f5b72d77020d586dab0fbea908f55",
                                                 "livebench/data/live_bench/reasoning/web_of_lies_v2/question.jsonl",
                                                 "reconstructed"),
    "livebench/reasoning_zebra_puzzle.jsonl": ("cd3a829ba2526c0af181a6072cce0aef3fa519b84d532d0bf92dbb48de3d7b9e",
                                               "LiveBench/LiveBench", "68863a2a1242e97f07c966b4f164bdf6dc827499",
                                               "livebench/data/live_bench/reasoning/zebra_puzzle/question.jsonl",
                                               "reconstructed"),
    "socialmaze/blood_6_all_hf.jsonl": ("471d92a18b472050690a77a33d64d7ee5c7a74c9fad1f5d6bf0900ef82ad5e64",
                                        "xzx34/SocialMaze", "dc7f1411683b0cfe4e4daf7069bdee79bfb76264",
                                        "blood/huggingface_data/blood_6_all_hf.jsonl", "copy"),
    "socialmaze/hf_10pct.jsonl": ("bde424e9b895dde420d015d26514de467fa3da4b686f2bd962cb3f55eddca0f2",
                                  "xzx34/SocialMaze", "dc7f1411683b0cfe4e4daf7069bdee79bfb76264",
                                  "blood/huggingface_data/10%25.jsonl", "copy"),
    "socialmaze/blood_6_all_hf_ae8de50.jsonl": ("cacd4e80d2c77d8681f0271f1a31cab2364272591c605f4991336aeebdd4bbc8",
                                                "xzx34/SocialMaze", "ae8de5098d0d763bfedde9567498aeca3776233b",
                                                "blood/huggingface_data/blood_6_all_hf.jsonl", "copy"),
    "deepresearch_bench/query.jsonl": ("62b197a264a027fd4e2e795ff322a82dd6d566f5e350596ccc7572539ec987d1",
                                       "Ayanami0730/deep_research_bench", "214741e474a5347ea7f869ab79d27e7c8734ede7",
                                       "data/prompt_data/query.jsonl", "copy"),
    "deepresearch_bench/criteria.jsonl": ("4dbd2451bc487647b3588193e52b00be1fbe5540174da3b3707db57197697edb",
                                          "Ayanami0730/deep_research_bench", "214741e474a5347ea7f869ab79d27e7c8734ede7",
                                          "data/criteria_data/criteria.jsonl", "copy"),
})

# Files too large for ../shared/datasets: downloaded for users with internet, checked by their git blob id.
# file -> (git blob id, repo, commit, path)
BLOB_DOWNLOADS: dict[str, tuple[str, str, str, str]] = {
    "finqa/test.json": ("59958c7c3bb3b21f4dff6bc912a0fe0ae710aee0", "czyssrs/FinQA",
                        "0f16e2867befa6840783e58be38c9efb9229d742", "dataset/test.json"),
    # FinQA's training splits (blob ids from `git ls-tree` of the same commit): DynaGraph's planner/critic data
    "finqa/train.json": ("a6c2c5a60f9abe3fba5a793cc4d9e1dee2e09209", "czyssrs/FinQA",
                         "0f16e2867befa6840783e58be38c9efb9229d742", "dataset/train.json"),
    "finqa/dev.json": ("970f239f591c782b17df420c0d343b780737f3da", "czyssrs/FinQA",
                       "0f16e2867befa6840783e58be38c9efb9229d742", "dataset/dev.json"),
    "deepresearch_bench/reference.jsonl": ("2b0f090208527f0bf518516458de91b1d5a8fe75", "Ayanami0730/deep_research_bench",
                                           "214741e474a5347ea7f869ab79d27e7c8734ede7",
                                           "data/test_data/cleaned_data/reference.jsonl"),
}


def git_blob_id(data: bytes) -> str:
    """The id ``git hash-object`` gives these bytes (sha1 of "blob <size>\\0" + data)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()  # git's id, not security


def fetch_blob(dest: Path, rel: str, download=None) -> str:
    """Place ``rel`` (downloaded unless already there with the right git blob id); one line saying what happened.

    Raises RuntimeError with one line naming the file, where it comes from and what to do."""
    blob, repo, commit, path = BLOB_DOWNLOADS[rel]
    target = dest / rel
    if target.is_file() and git_blob_id(target.read_bytes()) == blob:
        return f"ok  {rel}  (present, git blob {blob[:12]})"
    url = RAW.format(repo=repo, commit=commit, path=path)
    try:
        data = (download or _download)(url)
    except Exception as exc:  # no network, HTTP error: one clear line
        raise RuntimeError(f"{rel} is not in ../shared/datasets and could not be downloaded from {url} ({exc}); "
                           f"with internet access re-run `make data` (or place the file at {target}; its git blob id "
                           f"must be {blob})") from exc
    got = git_blob_id(data)
    if got != blob:
        raise RuntimeError(f"{rel}: downloaded bytes have git blob {got}, expected {blob}; not placed")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data)
    return f"ok  {rel}  ({url}, git blob checked)"


for _name, _sha in {
    "drop_raw": "4ce095eb24b93548a8a58c84b94e953e5339e0aa48ceb61e13bcde60acb9d4bb",
    "drop_validate": "55f979d3016a55cfff423af8fc5dabc8902c4d8c862463d58f90d6acfe12d19b",
    "gsm8k_test": "e9af9179f93aaad1afdbc54d65d001e3ad2f75d2b4bcda65252aae7520892b58",
    "gsm8k_validate": "8f11a2fd8103b3e0f8243b6dc72a7bd1abd9e5b02c62a32efb716cf00f32630f",
    "hotpotqa_validate": "473138cb06e76e57af753932eb20394b2847e19ecbfdb139727206ec339af295",
    "humaneval_public_test": "3002d16f4d270682ba8a2afc5c5e6b58020d643ede085604e7bbafd66854b5f9",
    "humaneval_test": "b7e2cdfe0bc1b94fbd3ada1bf6af715b50ad8b32a0975c7ba4ba36b683805677",
    "humaneval_validate": "cfba73ac96fc7237fb4d7f7815e6a00ddea0d2b331c0d909a1b2e488daa6fa03",
    "math_test": "1a6cdf28f63e8f72ef2cc47ced4310f5d68260e27318b1abb147db342331871c",
    "math_validate": "d9afff4ae187975348bcc711c556ff98e0c2f46db60576d7e793371391cf7654",
    "mbpp_public_test": "7bfaf10323dc50e32897e267169b9e3d68edc2b3b7d881e9dd142c64db12055d",
    "mbpp_test": "b9281237e30d18094eea50afbcfb97524c8cee1d491870d48474ec49abf7e1ce",
    "mbpp_validate": "c1fd42fbcfad0b6c4f20d7a9fa5d4b3ea8c0eead76b4bd9cf764a0bc0b6a3bef",
}.items():
    MANIFEST[f"aflow_splits/{_name}.jsonl"] = (_sha, *MASARENA, f"data/{_name}.jsonl", "copy")


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _download(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=60) as resp:  # fixed https URLs
        return resp.read()


def fetch_public(rel: str) -> bytes:
    sha, repo, commit, path, how = MANIFEST[rel]
    if how == "assembled":
        raise RuntimeError(f"{rel} is assembled from thousands of per-problem files ({path} of {repo}); copy it from "
                           "a machine that has ../shared/datasets" + ("" if "train" in rel else
                                                                      ", or use split=math500 / split=test instead"))
    raw = _download(RAW.format(repo=repo, commit=commit, path=path))
    if how == "reconstructed":
        raise RuntimeError(f"{rel} was re-typed from a stored copy of LiveBench's question.jsonl (see "
                           "../shared/datasets/README.md); upstream serves it from the Hugging Face dataset "
                           "livebench/reasoning: copy it from a machine that has ../shared/datasets")
    if how == "pubmedqa":  # JSON object keyed by PMID -> JSONL with pubid and split (test = test_ground_truth.json)
        test_ids = json.loads(_download(RAW.format(repo=repo, commit=commit, path="data/test_ground_truth.json")))
        return "".join(json.dumps({"pubid": k, "split": "test" if k in test_ids else "trainval", **v}) + "\n"
                       for k, v in json.loads(raw).items()).encode("utf-8")
    if how == "gunzip":
        return gzip.decompress(raw)
    if how == "json-array":
        return "".join(json.dumps(r) + "\n" for r in json.loads(raw)).encode("utf-8")
    return raw


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dest", default=None, help="data directory (default: $AGENTIC_REPRO_DATA or data/)")
    ap.add_argument("--shared", default=str(Path(__file__).resolve().parents[1].parent / "shared" / "datasets"))
    ap.add_argument("--link", action="store_true", help="symlink instead of copying from --shared")
    args = ap.parse_args(argv)
    import os

    dest = Path(args.dest or os.environ.get("AGENTIC_REPRO_DATA") or "data")
    shared = Path(args.shared)
    failures = []
    for rel, (sha, *_rest) in MANIFEST.items():
        target = dest / rel
        if target.is_file() and sha256_bytes(target.read_bytes()) == sha:
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            source = shared / rel
            if source.is_file():
                if args.link:
                    if target.exists() or target.is_symlink():
                        target.unlink()
                    target.symlink_to(source.resolve())
                else:
                    shutil.copyfile(source, target)
                origin = str(source)
            else:
                target.write_bytes(fetch_public(rel))
                origin = "public source"
            got = sha256_bytes(target.read_bytes())
            if got != sha:
                target.unlink()
                raise RuntimeError(f"sha256 mismatch ({got} != {sha}); file removed")
            print(f"ok  {rel}  ({origin})")
        except Exception as exc:  # noqa: BLE001 - report every file, then fail
            failures.append(f"{rel}: {exc}")
            print(f"ERR {rel}: {exc}", file=sys.stderr)
    # envs helper: the agent environments' files (ALFWorld games, WebShop products), see envs/data.py
    from agentic_repro.envs.data import fetch_alfworld, fetch_webshop

    try:
        print(fetch_alfworld(dest, shared))
    except Exception as exc:  # noqa: BLE001 - reported like the other files; the benchmark refuses to run without them
        print(f"ERR alfworld: {exc}", file=sys.stderr)
    for line in fetch_webshop(dest, shared):
        print(line, file=sys.stderr if line.startswith("ERR") else sys.stdout)  # missing WebShop files: not fatal
    from agentic_repro.envs.data import fetch_agent_prompts  # ReAct/Reflexion few-shot prompts for the agents

    for line in fetch_agent_prompts(dest, shared):
        print(line, file=sys.stderr if line.startswith("ERR") else sys.stdout)
    for rel in BLOB_DOWNLOADS:  # not fatal: the benchmark that needs the file fails with this same line
        try:
            print(fetch_blob(dest, rel))
        except RuntimeError as exc:
            print(f"ERR {exc}", file=sys.stderr)
    if failures:
        print(f"{len(failures)} file(s) missing; the benchmarks that need them will say so", file=sys.stderr)
    print(f"data directory: {dest.resolve()}")
    return 1 if len(failures) == len(MANIFEST) else 0


if __name__ == "__main__":
    raise SystemExit(main())
