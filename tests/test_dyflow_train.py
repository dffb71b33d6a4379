"""agentic_repro.dyflow.train.collect on hand-written DyFlow run folders (the trace layout of dyflow/schema.py): stages become
(prompt -> G_t) examples labelled by the trajectory's outcome, SFT keeps the preferred, KTO balances 1:1, and
the files carry their provenance (run ids, designer identity, sha256)."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from agentic_repro.dyflow.schema import StageGraph
from agentic_repro.dyflow.train.collect import CollectOptions, collect, main, stage_examples
from agentic_repro.training.datasets import find_runs, read_dataset, trajectories

DESIGNER = {"backbone": "local", "own_backbone": False, "model": {"name": "local", "sha256": "ab12"},
            "adapter": {"name": "dyplanner", "sha256": "cd34", "training_data_sha256": "ef56"}}


def stage(t: int, templates: list[str], problem: str) -> dict:
    ops = [{"operator_id": f"op_{t}_{i}", "template": tpl, "instruction": f"{tpl.lower()} {problem}",
            "input_keys": ["original_problem"] if i == 1 else [f"act_{t}_{i - 1}"], "output_key": f"act_{t}_{i}"}
           for i, tpl in enumerate(templates, 1)]
    return StageGraph.model_validate({"stage_id": f"stage_{t}", "description": f"stage {t} of {problem}",
                                      "operators": ops}).model_dump(mode="json")


def stage_record(t: int, templates: list[str] | None, problem: str, status: str = "executed") -> dict:
    g = stage(t, templates, problem) if templates else None
    return {"index": t, "summary": f"z_{t} of {problem}",
            "designer_messages": [{"role": "user", "content": f"Design stage {t}: {problem}"}],
            "designer_output": "```json\n" + json.dumps(g) + "\n```" if g else "not json", "stage": g,
            "outputs": {f"act_{t}_1": "..."}, "status": status if g else "design_failed"}


PLAN = [["GENERATE_PLAN", "GENERATE_ANSWER", "REVIEW_SOLUTION"], ["ORGANIZE_SOLUTION"]]


def make_run(root: Path, bench: str, outcomes: list[float | None], *, run_id: str | None = None,
             errors: int = 0, designer: dict | None = None, judge: list[float] | None = None,
             plan: list[list[str]] = PLAN, split: str | None = "train") -> Path:
    """A DyFlow run folder as the runner writes it. ``outcomes``: each problem's score; each problem's stages use
    ``plan``'s templates (default: plan+answer+review, then organize); ``errors`` problems ended in an
    infrastructure error."""
    d = root / bench / "dyflow" / "local" / "seed=42"
    d.mkdir(parents=True, exist_ok=True)
    preds = []
    for i, score in enumerate(outcomes):
        p = f"{bench}-q{i}"
        stages = [stage_record(t, tpls, p) for t, tpls in enumerate(plan)]
        rec = {"id": p, "index": i, "status": "ok", "attempt": f"a{i}", "score": score,
               "trace": {"method": "dyflow", "variant": "full", "options": {}, "stages": stages,
                         "terminated_by": "organize", "final_key": "act_1_1", "memory": {}, "n_stages": 2,
                         "designer_calls": 2}}
        if judge is not None:
            rec["judge_score"] = judge[i]
        preds.append(rec)
    for j in range(errors):
        preds.append({"id": f"{bench}-e{j}", "index": len(outcomes) + j, "status": "error", "attempt": f"e{j}",
                      "score": 0.0, "error": "BackboneError: connection refused",
                      "trace": {"stages": [stage_record(0, ["GENERATE_ANSWER"], "err")]}})
    (d / "predictions.jsonl").write_text("".join(json.dumps(p) + "\n" for p in preds))
    (d / "meta.json").write_text(json.dumps({"run_id": run_id or f"selfplay/{bench}/dyflow/local/42",
                                             "benchmark": {"name": bench, "version": "1"},
                                             **({"data": {"split": split}} if split else {}),
                                             "roles": {"designer": designer or DESIGNER,
                                                       "executor": {"backbone": "local"}}}))
    (d / "config.yaml").write_text(f"method: {{name: dyflow}}\nbenchmark: {{name: {bench}"
                                   + (f", split: {split}" if split else "") + "}\nseed: 42\n")
    return d


@pytest.fixture
def runs(tmp_path: Path) -> Path:
    root = tmp_path / "results" / "dyflow_selfplay"
    make_run(root, "math", [1.0, 0.0, 0.0, 0.0, 1.0], errors=1)      # 2 right, 3 wrong, 1 error
    make_run(root, "pubmedqa", [0.0, 0.0, 1.0, 0.0], run_id="selfplay/pubmedqa/dyflow/local/42")
    return root


def test_stages_are_labelled_by_the_trajectory_outcome(runs: Path):
    ex = stage_examples()
    by_problem = {t.id: ex(t) for t in trajectories(find_runs([runs]))}
    assert "math-e0" not in by_problem                       # an errored problem is never training data
    assert len(by_problem) == 9 and all(len(v) == 2 for v in by_problem.values())
    assert [e.label for e in by_problem["math-q0"]] == [True, True]
    assert [e.label for e in by_problem["math-q1"]] == [False, False]
    e = by_problem["math-q0"][0]
    # the prompt is exactly what the designer saw; the completion is G_t in the released designer JSON
    assert e.prompt == [{"role": "user", "content": "Design stage 0: math-q0"}]
    g = json.loads(e.completion)
    assert [o["params"]["instruction_type"] for o in g["operators"]] == ["GENERATE_PLAN", "GENERATE_ANSWER",
                                                                          "REVIEW_SOLUTION"]
    assert StageGraph.from_designer(g).model_dump(mode="json") == stage(0, ["GENERATE_PLAN", "GENERATE_ANSWER",
                                                                           "REVIEW_SOLUTION"], "math-q0")
    assert e.role == "designer" and e.meta["designer"] == DESIGNER and e.meta["benchmark"] == "math"
    summ = stage_examples(CollectOptions(prompt="summary", completion="raw"))
    e2 = summ(next(t for t in trajectories(find_runs([runs])) if t.id == "math-q0"))[1]
    assert e2.prompt == "z_1 of math-q0" and e2.completion.startswith("```json")


def test_failed_and_fallback_stages_and_missing_judge_are_skipped(tmp_path: Path):
    root = tmp_path / "r"
    d = make_run(root, "livebench", [1.0, 0.0], judge=[1.0, None])
    recs = [json.loads(x) for x in (d / "predictions.jsonl").read_text().splitlines()]
    recs[0]["trace"]["stages"].insert(1, stage_record(1, None, "x"))                       # design failed
    recs[0]["trace"]["stages"].append(stage_record(2, ["ORGANIZE_SOLUTION"], "x", status="fallback"))
    (d / "predictions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    res = collect([root], tmp_path / "data", CollectOptions(label_source="judge_score"))
    assert res.summary["skipped"] == {"design_failed": 1, "fallback_stage": 1, "no_judge_score": 1}
    assert len(res.sft.rows) == 2 and res.kto.provenance["counts"]["before_balancing"] == {"desirable": 2,
                                                                                          "undesirable": 0}
    with pytest.raises(ValueError, match="label_source"):
        stage_examples(CollectOptions(label_source="gold"))


def test_sft_keeps_preferred_and_kto_is_one_to_one_with_provenance(runs: Path, tmp_path: Path):
    res = collect([runs], tmp_path / "data", CollectOptions(seed=3))
    # 3 right trajectories x 2 stages preferred; 6 wrong x 2 discarded -> KTO subsamples discarded to 6
    assert len(res.sft.rows) == 6 and all(r["source"]["score"] == 1.0 for r in res.sft.rows)
    c = res.kto.provenance["counts"]
    assert c["before_balancing"] == {"desirable": 6, "undesirable": 12} and c["desirable"] == c["undesirable"] == 6
    assert sum(r["label"] for r in res.kto.rows) == 6 and len(res.kto.rows) == 12
    # reproducible for a seed, another seed draws another subset
    again = collect([runs], tmp_path / "again", CollectOptions(seed=3))
    other = collect([runs], tmp_path / "other", CollectOptions(seed=4))
    assert again.kto.sha256 == res.kto.sha256 and other.kto.rows != res.kto.rows
    # provenance: run ids, designer identity, file hashes, counts; the summary names both datasets' sha256
    prov = read_dataset(res.kto.path).provenance
    assert {s["run_id"] for s in prov["sources"]} == {"selfplay/math/dyflow/local/42",
                                                      "selfplay/pubmedqa/dyflow/local/42"}
    assert all(len(s["files"]["predictions.jsonl"]) == 64 for s in prov["sources"])
    assert prov["rules"]["ratio"] == 1.0 and "agentic_repro.dyflow.train.collect.stage_examples" in prov["extractor"]
    assert res.kto.rows[0]["source"]["meta"]["designer"]["adapter"]["sha256"] == "cd34"
    summary = json.loads(res.summary_path.read_text())
    assert summary["sft"]["sha256"] == read_dataset(res.sft.path).sha256 and summary["designers"] == [DESIGNER]
    assert summary["kto"]["counts"]["desirable"] == 6 and summary["options"]["ratio"] == 1.0


def test_cross_task_collection_keeps_only_the_training_domains(runs: Path, tmp_path: Path, capsys):
    res = collect([runs], tmp_path / "d", CollectOptions(benchmarks=("pubmedqa",), ratio=None))
    assert {r["source"]["run"] for r in res.kto.rows} == {"selfplay/pubmedqa/dyflow/local/42"}
    assert len(res.kto.rows) == 8 and res.summary["skipped"]["other_benchmark"] == 5
    assert main([f"runs={runs}", f"out={tmp_path / 'cli'}", "ratio=1"]) == 0
    assert "KTO 6:6 preferred:discarded" in capsys.readouterr().out
    assert main([f"runs={tmp_path / 'nothing'}", f"out={tmp_path / 'x'}"]) == 2


def test_dyflow_training_configs_are_d2():
    from agentic_repro.dyflow.train.pipeline import compose_stage

    sft = compose_stage("sft", ["data=x", "out=y"])
    kto = compose_stage("kto", ["data=x", "out=y"])
    assert (sft["kind"], sft["lr"], sft["epochs"], sft["max_length"], sft["batch_size"], sft["grad_accum"],
            sft["scheduler"], sft["warmup_ratio"], sft["val_fraction"]) == ("sft", 5e-6, 3, 2048, 1, 4, "cosine",
                                                                          0.1, 0.1)
    assert (kto["kind"], kto["lr"], kto["beta"], kto["max_length"], kto["batch_size"] * kto["grad_accum"],
            kto["epochs"], kto["scheduler"], kto["eval_steps"]) == ("kto", 2e-4, 0.1, 4096, 8, 3, "cosine", 500)


def test_collect_from_a_real_dyflow_run(tmp_path: Path, tiny_data):
    """The DyFlow method itself (scripted double) writes the traces; collection reads them back: one example per
    designed stage, the designer's real prompt, G_t that parses back to the executed stage, labels by the score."""
    from tests.test_dyflow import ORGANIZE, SOLVE, Script, executor_answer, run_dyflow

    class WrongOnOdd(Script):
        def __call__(self, messages, sampling):
            p = messages[-1]["content"]
            if "workflow stage designer" not in messages[0]["content"] and "summarizing" not in p \
                    and re.search(r"What is ([13579])\+", p):
                return "Reasoning... ANSWER: 999"          # the executor errs on odd problems
            return super().__call__(messages, sampling)

    metrics, preds, _ = run_dyflow(tmp_path / "run", WrongOnOdd([[SOLVE], [ORGANIZE]]), limit=4, split="train")
    assert [p["score"] for p in preds] == [1.0, 0.0, 1.0, 0.0] and executor_answer("What is 1+1?").endswith("2")
    res = collect([tmp_path / "run" / "results"], tmp_path / "data")
    assert len(res.sft.rows) == 4 and res.kto.provenance["counts"]["before_balancing"] == {"desirable": 4,
                                                                                          "undesirable": 4}
    row = next(r for r in res.kto.rows if r["source"]["problem_id"] == preds[1]["id"])
    assert row["label"] is False and "workflow stage designer" in row["prompt"][0]["content"]
    assert row["prompt"] == preds[1]["trace"]["stages"][0]["designer_messages"]
    assert StageGraph.from_designer(json.loads(row["completion"])).templates == ["GENERATE_ANSWER", "REVIEW_SOLUTION"]
    assert res.summary["designers"] and all(r["designer"] for r in res.summary["runs"])


def test_serve_overrides_declare_every_trained_adapter(tmp_path: Path):
    from agentic_repro.dyflow.train.pipeline import serve_overrides

    for sub in ("kto", "sft"):
        (tmp_path / sub / "adapter").mkdir(parents=True)
        (tmp_path / sub / "adapter.gguf").write_bytes(b"x")
    s = serve_overrides(tmp_path)
    assert s["local"] == [f"+backbone.adapters.dyplanner.path={(tmp_path / 'kto').resolve() / 'adapter.gguf'}",
                          f"+backbone.adapters.dyplanner_sft.path={(tmp_path / 'sft').resolve() / 'adapter.gguf'}",
                          "roles.designer.adapter=dyplanner"]
    assert s["peft-local"][1].endswith("kto/adapter") and "dyplanner_sft=" in s["vllm"][-1]


def test_self_play_collection_refuses_a_run_on_a_scored_split(tmp_path: Path, capsys):
    """Training data never comes from a split that is scored: a test-split run (or one that recorded no split)
    stops the collection before anything is written, in one line naming the run and its split."""
    from agentic_repro.training.splits import ScoredSplitError

    root = tmp_path / "results"
    make_run(root / "ok", "math", [1.0, 0.0])
    bad = make_run(root / "bad", "pubmedqa", [1.0, 0.0], run_id="table1/pubmedqa/dyflow/local/42", split="test")
    with pytest.raises(ScoredSplitError, match=r"run table1/pubmedqa/dyflow/local/42 .* read split 'test'"):
        collect([root], tmp_path / "data")
    assert not (tmp_path / "data").exists()
    assert main([f"runs={root}", f"out={tmp_path / 'data'}"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "read split 'test'" in err and str(bad) in err
    assert len(collect([root], tmp_path / "d2", CollectOptions(train_splits=("train", "test"))).summary["runs"]) == 2
    make_run(root / "bad", "pubmedqa", [1.0, 0.0], split=None)            # no split recorded: refused too
    with pytest.raises(ScoredSplitError, match="records no split"):
        collect([root], tmp_path / "data")
    res = collect([root / "ok"], tmp_path / "data")                        # the train-split run alone is fine
    assert res.summary["runs"][0]["split"] == "train"


def test_sft_cutoff_follows_llamafactory_and_keeps_the_target():
    """LLaMA-Factory's cutoff_len rule, hand-checked in its three cases, against trl's keep_start, which cuts the
    sequence's end (the designer's reply first); DyFlow's SFT recipe defaults to the first (issue 21)."""
    from agentic_repro.dyflow.train.pipeline import compose_stage
    from agentic_repro.training.cutoff import cut, split_lengths

    assert split_lengths(3000, 100, 2048) == (1948, 100)     # a short target is kept whole, the source cut
    assert split_lengths(500, 3000, 2048) == (500, 1548)     # a short source is kept whole, the target cut
    assert split_lengths(3000, 1500, 2048) == (1366, 682)    # both long: 2048 * 1500 / 4500 = 682 target tokens
    p, c = list(range(3000)), list(range(5000, 5100))
    assert cut(p, c, 2048, "keep_start") == (p[:2048], [])   # trl: the prompt fills the cutoff, no target left
    assert cut(p, c, 2048, "llamafactory") == (p[:1948], c)  # the prompt's end goes, the reply stays
    assert cut(p[:10], c, 2048, "llamafactory") == (p[:10], c) == cut(p[:10], c, 2048, "keep_start")
    assert compose_stage("sft", ["data=x", "out=y"])["truncation"] == "llamafactory"
    assert compose_stage("sft", ["data=x", "out=y", "truncation=keep_start"])["truncation"] == "keep_start"


def test_sft_run_counts_the_cut_examples_and_trains_on_the_kept_target(tmp_path: Path, capsys):
    """A real SFT step on the tiny Qwen2 (real tokenizer and chat template): the cut examples are counted, printed
    and recorded (result.json, the adapter's identity); under llamafactory trl trains on every target token, under
    keep_start on the few the prompt leaves."""
    from transformers import TrainerCallback

    from agentic_repro.training.cutoff import encode
    from agentic_repro.training.datasets import build_sft, find_runs, trace_examples
    from agentic_repro.training.fixtures import tiny_base
    from agentic_repro.training.train import _to_trl_rows, compose_config, train

    run = tmp_path / "run"
    run.mkdir()
    long_prompt = "Design the next stage for this task: " + "the quick brown fox jumps over the lazy dog " * 8
    preds = [{"id": f"p{i}", "status": "ok", "attempt": f"a{i}", "score": 1.0,
              "trace": {"training_examples": [{"prompt": f"{long_prompt} (task {i})",
                                               "completion": f"stage {i}: GENERATE_ANSWER then ORGANIZE_SOLUTION"}]}}
             for i in range(3)] + [{"id": "short", "status": "ok", "attempt": "s", "score": 1.0,
                                    "trace": {"training_examples": [{"prompt": "Hi", "completion": "stage"}]}}]
    (run / "predictions.jsonl").write_text("".join(json.dumps(p) + "\n" for p in preds))
    (run / "meta.json").write_text(json.dumps({"run_id": "t/tiny/dyflow/b/1", "benchmark": {"name": "tiny"}}))
    ds = build_sft(find_runs([run]), trace_examples(), tmp_path / "sft.jsonl")
    tiny = tiny_base()
    from agentic_repro.harness.embedded.base_model import load_tokenizer, resolve_base

    tok = load_tokenizer(resolve_base(str(tiny.hf_dir)))
    lens = {r["prompt"][0]["content"]: tuple(map(len, encode(tok, r))) for r in _to_trl_rows("sft", ds.rows)}
    prompt_len, target_len = lens[f"{long_prompt} (task 0)"]
    cutoff = prompt_len + 3                     # the long examples keep 3 target tokens under keep_start
    assert 2 * target_len < cutoff

    class Labels(TrainerCallback):
        seen: list[int] = []

        def on_train_begin(self, args, state, control, train_dataloader=None, **kw):
            Labels.seen = sorted(sum(1 for x in ex["labels"] if x != -100) for ex in train_dataloader.dataset)

    def run_sft(mode: str) -> dict:
        out = tmp_path / mode
        cfg = compose_config("sft", [f"data={ds.path}", f"base={tiny.hf_dir}", f"out={out}", "threads=2",
                                     "max_steps=1", "batch_size=4", "grad_accum=1", "val_fraction=0",
                                     "export_gguf=false", f"max_length={cutoff}", f"truncation={mode}"])
        train(cfg, callbacks=[Labels()])
        return json.loads((out / "result.json").read_text())

    lf = run_sft("llamafactory")
    short_target = lens["Hi"][1]
    assert Labels.seen == sorted([short_target] + [lens[k][1] for k in lens if k != "Hi"])   # every target whole
    rep = lf["cutoff"]
    assert (rep["truncation"], rep["cutoff"], rep["examples"], rep["over_cutoff"]) == ("llamafactory", cutoff, 4, 3)
    assert rep["llamafactory"]["target_cut"] == 0 and rep["keep_start"]["target_cut"] == 3
    err = capsys.readouterr().err
    assert f"SFT cutoff {cutoff} (truncation=llamafactory): 3 of 4 examples are longer" in err
    ident = json.loads((tmp_path / "llamafactory" / "adapter" / "provenance.json").read_text())
    assert ident["cutoff"]["over_cutoff"] == 3
    ks = run_sft("keep_start")
    assert Labels.seen == sorted([short_target] + [3] * 3)                                 # trl cut the replies
    assert ks["cutoff"]["truncation"] == "keep_start" and ks["cutoff"]["keep_start"]["target_cut"] == 3
