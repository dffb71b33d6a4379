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
    "mbpp/mbpp.jsonl": ("ccf64ceae9c5403bf50a044cb6d505bfd2a2963ee58338ba268fd65beab92a9f",
                        "patdfb/TPC-EES", "30c8c572bfcd0fc5fa537210710d7fde134e4868", "mbpp/mbpp.jsonl", "copy"),
    "mbpp/sanitized-mbpp.jsonl": ("502db01bcc1e911d691d5212bd3d9c60ee52bbc2bd29457a520ace424bb2709d",
                                  "patdfb/TPC-EES", "30c8c572bfcd0fc5fa537210710d7fde134e4868",
                                  "mbpp/sanitized-mbpp.json", "json-array"),
}
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
    with urllib.request.urlopen(url, timeout=60) as resp:  # noqa: S310 - fixed https URLs
        return resp.read()


def fetch_public(rel: str) -> bytes:
    sha, repo, commit, path, how = MANIFEST[rel]
    if how == "assembled":
        raise RuntimeError(f"{rel} is assembled from 5,000 per-problem files; copy it from a machine that has "
                           "../shared/datasets, or use split=math500 / split=test instead")
    raw = _download(RAW.format(repo=repo, commit=commit, path=path))
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
    from envs.data import fetch_alfworld, fetch_webshop

    try:
        print(fetch_alfworld(dest, shared))
    except Exception as exc:  # noqa: BLE001 - reported like the other files; the benchmark refuses to run without them
        print(f"ERR alfworld: {exc}", file=sys.stderr)
    for line in fetch_webshop(dest, shared):
        print(line, file=sys.stderr if line.startswith("ERR") else sys.stdout)  # missing WebShop files: not fatal
    from envs.data import fetch_agent_prompts  # ReAct/Reflexion few-shot prompts for the agents

    for line in fetch_agent_prompts(dest, shared):
        print(line, file=sys.stderr if line.startswith("ERR") else sys.stdout)
    if failures:
        print(f"{len(failures)} file(s) missing; the benchmarks that need them will say so", file=sys.stderr)
    print(f"data directory: {dest.resolve()}")
    return 1 if len(failures) == len(MANIFEST) else 0


if __name__ == "__main__":
    raise SystemExit(main())
