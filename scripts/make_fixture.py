"""Copy a few real runs into ``tests/fixtures/results`` (the reporting tests' fixture), trimmed to a few KB.

    python -m agentic_repro.scripts.make_fixture SRC_RESULTS_ROOT table1/gsm8k/cot/local/seed=42 table1/gsm8k/cot_sc/local/seed=42

metrics.json, config.yaml, meta.json and calls.jsonl are copied verbatim. predictions.jsonl keeps every
record and every scored field; only the bulky trace text is trimmed (``trace.messages`` dropped, long strings
in the trace cut to 200 characters), which no report reads. server.log and reliability.png are not copied.
"""
from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

DEST = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "results"
VERBATIM = ("metrics.json", "config.yaml", "meta.json", "identity.json", "calls.jsonl", "method_state.json")


def _trim(x, depth: int = 0):
    if isinstance(x, str):
        return x if len(x) <= 200 else x[:200] + "…"
    if isinstance(x, list):
        return [_trim(v, depth + 1) for v in x[:20]]
    if isinstance(x, dict):
        return {k: _trim(v, depth + 1) for k, v in x.items() if k != "messages"}
    return x


def copy_run(src_root: Path, rel: str, dest_root: Path = DEST) -> Path:
    src, dst = src_root / rel, dest_root / rel
    if not (src / "metrics.json").exists():
        raise SystemExit(f"{src} has no metrics.json")
    dst.mkdir(parents=True, exist_ok=True)
    for name in VERBATIM:
        if (src / name).exists():
            shutil.copyfile(src / name, dst / name)
    with open(src / "predictions.jsonl", encoding="utf-8") as fh, \
            open(dst / "predictions.jsonl", "w", encoding="utf-8") as out:
        for line in fh:
            if line.strip():
                rec = json.loads(line)
                rec["trace"] = _trim(rec.get("trace") or {})
                out.write(json.dumps(rec, ensure_ascii=False) + "\n")
    return dst


def main(argv: list[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) < 2:
        raise SystemExit(__doc__)
    for rel in args[1:]:
        print(copy_run(Path(args[0]), rel))


if __name__ == "__main__":
    main()
