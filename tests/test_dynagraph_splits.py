"""DynaGraph trains its planner/critic only on splits that are never scored (issue 21): every benchmark of its
tables has a training split whose file is not the scored one, and MATH's shares no problem with any MATH test file."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from agentic_repro.evaluators.data import data_dir
from agentic_repro.harness.benchmark import build_benchmark
from agentic_repro.scripts.runs import load_experiment
from tests.conftest import compose
from agentic_repro.training.splits import TRAIN_SPLITS, run_split

ROOT = Path(__file__).resolve().parents[1]


def _bench(overrides: list[str]) -> dict:
    return compose(overrides)["benchmark"]


def _scored(exp: dict, b: str) -> dict:
    return _bench([f"benchmark={b}", *(exp.get("benchmark_overrides") or {}).get(b, [])])


def _files(cfg: dict) -> set[str]:
    return {str(v) for v in (cfg.get("splits") or cfg.get("files") or {}).values() if v}


@pytest.mark.parametrize("table", ["dynagraph_table1", "dynagraph_table2"])
def test_every_table_benchmark_has_a_never_scored_training_split(table):
    exp, train = load_experiment(table), load_experiment("dynagraph_table1")["training"]
    for b in exp["benchmarks"]:
        scored, tr = _scored(exp, b), _bench(train[b])
        assert tr["split"] in TRAIN_SPLITS and tr["kind"] == scored["kind"], b
        assert tr["split"] != scored["split"], b
        tr_file = (tr.get("splits") or {}).get(tr["split"])
        if tr_file is not None:        # benchmarks with one file per split: the training file is its own
            assert tr_file != (scored.get("splits") or {}).get(scored["split"]), b


def _norm(text: str) -> str:
    """The data README's normalisation (b): lowercase, no whitespace, $ { } or LaTeX spacing commands."""
    return re.sub(r"\\[,;!: ]|[\s${}]", "", text.lower())


def test_math_train_shares_no_problem_with_any_scored_math_split():
    cfg = _bench(["benchmark=math", "benchmark.split=train"])
    # make test runs make data first: a missing file is a failure, not a skip (as for every data file)
    assert (data_dir() / cfg["splits"]["train"]).is_file(), "math/math_train.jsonl is not placed: run `make data`"
    train, info = build_benchmark(cfg).load()
    assert info.split == "train" and len(train) == 7496
    # the source's only rows without an answer (their solutions end in an empty \boxed{}); `\boxed 2` reads as 2
    assert sorted(p.id for p in train if not p.gold) == ["train/number_theory/7115.json",
                                                         "train/number_theory/7117.json"]
    train_text = {_norm(p.fields["problem"]) for p in train}
    for split in sorted(set(cfg["splits"]) - {"train"}):
        try:
            probs, _ = build_benchmark({**cfg, "split": split}).load()
        except Exception as exc:  # noqa: BLE001 - a split whose file is not placed (aflow_splits): say which
            pytest.fail(f"MATH split {split} cannot be loaded to check it: {exc}")
        assert not train_text & {_norm(p.fields["problem"]) for p in probs}, split
        assert not {p.id for p in train} & {p.id for p in probs}, split


def test_finqa_train_split_loads_and_is_recorded_as_train(tmp_path, monkeypatch):
    (tmp_path / "finqa").mkdir()
    (tmp_path / "finqa" / "train.json").write_bytes((ROOT / "tests/fixtures/finqa_test.json").read_bytes())
    monkeypatch.setenv("AGENTIC_REPRO_DATA", str(tmp_path))
    cfg = _bench(["benchmark=finqa", *load_experiment("dynagraph_table1")["training"]["finqa"][1:]])
    probs, info = build_benchmark(cfg).load()
    assert info.split == "train" and probs and info.file.endswith("finqa/train.json")

    class R:  # a run folder as training.splits reads it: meta.json's data block
        run_id, root, meta = "r", tmp_path, {"data": info.to_dict()}

    assert run_split(R()) == "train"
