"""Reference scores (issue 23): the Qwen EvalPlus protocol's prompt, extraction and solution program, and the
reference-scores table rendered from runs made by the real runner (scripted double, real sandbox)."""
from __future__ import annotations

import asyncio
import csv
import json
from pathlib import Path

import yaml

from agentic_repro.evaluators.code_tasks import HumanEval, evalplus_chat_code
from tests.conftest import compose, make_spec, run
from tests.doubles import ScriptedBackbone

PREFILL = "```python\n"


def _bench(*overrides: str) -> tuple[HumanEval, dict]:
    cfg = compose(["benchmark=humaneval_evalplus", *overrides])["benchmark"]
    bench = HumanEval(cfg)
    problems, _ = bench.load()
    return bench, {p.id: p for p in problems}


# ---- the protocol's pieces -------------------------------------------------------------------------------

def test_evalplus_extraction_keeps_what_the_entry_point_reaches():
    reply = ("import math\nfrom typing import List\n\nLIMIT = 3\n\ndef helper(x):\n    return x * LIMIT\n\n"
             "def unused():\n    return 0\n\ndef f(xs: List[int]) -> int:\n    return helper(len(xs))\n\n"
             "result = f([1, 2])\nassert f([]) == 0\n```\n\nThis function ...")
    code = evalplus_chat_code(reply, "f")
    assert "def f(" in code and "def helper(" in code and "LIMIT = 3" in code and "import math" in code
    assert "unused" not in code and "result =" not in code and "assert" not in code and "This function" not in code
    # an unparsable tail: the longest run of lines that parses is kept
    assert evalplus_chat_code("def f():\n    return 1\nthis is prose (\n", "f") == "def f():\n    return 1\n"


def test_qwen_protocol_renders_the_stripped_prompt_and_other_humaneval_configs_are_unchanged():
    bench, problems = _bench()
    p = problems["HumanEval/0"]
    assert bench.render(p) == p.fields["prompt"].strip() != p.fields["prompt"]
    plain = HumanEval(compose(["benchmark=humaneval"])["benchmark"])
    assert plain.render(p) == p.fields["prompt"]
    assert plain.extract("```python\ndef has_close_elements(a, b):\n    return 1\n```", p)[1] == "fence_entry_point"


def test_solution_runs_alone_under_evalplus_and_after_the_prompt_by_default():
    """EvalPlus runs a chat model's sample file alone: a solution that uses the prompt's ``List`` import without
    restating it fails there, and passes when appended to the prompt (the project's protocol)."""
    bench, problems = _bench()
    p = problems["HumanEval/0"]
    body = ("def has_close_elements(numbers: List[float], threshold: float) -> bool:\n"
            "    return any(abs(a - b) < threshold for i, a in enumerate(numbers) for b in numbers[i + 1:])\n")
    alone = asyncio.run(bench.score(body, p))
    appended = asyncio.run(HumanEval({**bench.cfg, "solution_program": "prompt_plus_completion"}).score(body, p))
    assert alone.value == 0.0 and "NameError" in alone.details["stderr_tail"]
    assert appended.value == 1.0
    assert asyncio.run(bench.score("from typing import List\n" + body, p)).value == 1.0


# ---- the table from recorded runs ----------------------------------------------------------------------------

GOOD = {"HumanEval/0", "HumanEval/1", "HumanEval/2"}   # of the first four: three canonical, one wrong


def _script(problems: dict):
    def script(messages, sampling):
        user = next(m["content"] for m in messages if m["role"] == "user")
        pid = next(i for i, p in problems.items() if p.fields["prompt"].strip() in user)
        p = problems[pid]
        code = p.fields["prompt"] + (p.gold if pid in GOOD else "    return None\n")
        if messages[-1]["role"] == "assistant":          # the Qwen protocol: llama-server echoes the prefill
            return messages[-1]["content"] + code
        return "```python\n" + p.fields["prompt"] + "    return None\n```"   # IO: wrong everywhere
    return script


def _config(tmp_path: Path) -> Path:
    cfg = yaml.safe_load(Path("configs/reference_scores.yaml").read_text())
    cfg["backbones"] = {"local": {"model": "scripted", "cells": [
        {"name": "he", "label": "HumanEval (EvalPlus base)", "benchmark": "humaneval_evalplus",
         "method": "qwen_evalplus", "published": 61.6, "source": "a report", "protocol": "Qwen"},
        {"name": "he_io", "label": "HumanEval, IO", "benchmark": "humaneval", "method": "io",
         "overrides": ["benchmark.split=full"], "published": 61.6, "source": "a report", "protocol": "ours"},
        {"name": "he_plus", "label": "HumanEval+", "published": 57.3, "source": "a report",
         "missing": "missing: no data here"}]}}
    path = tmp_path / "reference.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def test_table_from_recorded_runs_marks_inside_and_outside_the_interval(tmp_path, monkeypatch, capsys):
    from agentic_repro.scripts import reference_scores

    _, problems = _bench()
    backbones: list[ScriptedBackbone] = []

    async def fake_build(cfg, *, run_dir, seed, **kw):
        backbones.append(ScriptedBackbone(_script(problems), name=cfg["name"]))
        return backbones[-1]

    monkeypatch.setattr("agentic_repro.harness.runner.build_backbone", fake_build)
    root = tmp_path / "results"
    argv = ["backbone=local", f"config={_config(tmp_path)}", f"results_root={root}", "limit=4",
            f"cache.path={tmp_path / 'cache.sqlite'}", "runner.progress=false"]
    assert reference_scores.main(argv) == 0
    rows = {r["cell"]: r for r in csv.DictReader(open(root / "reference_scores" / "local.csv"))}
    he, io, plus = rows["he"], rows["he_io"], rows["he_plus"]
    # 3/4 = 75.0%, Wilson [30.1, 95.4]: 61.6 inside; 0/4, Wilson [0, 49.0]: 61.6 outside by 12.6 points
    assert (he["status"], he["score_pct"], he["verdict"], he["gap"]) == ("ok", "75.0", "inside", "13.4")
    assert (float(he["ci_low"]), float(he["ci_high"])) == (30.06, 95.44)
    assert (io["score_pct"], io["verdict"], io["gap"], io["gap_outside_interval"]) == ("0.0", "OUTSIDE", "-61.6", "12.61")
    assert plus["status"] == "missing" and "no data here" in plus["verdict"]
    for r in (he, io):                                     # each cell traces to its run folder
        metrics = json.loads((root / r["run"] / "metrics.json").read_text())
        assert metrics["complete"] and metrics["n"] == 4 and r["n"] == "4"
    md = (root / "reference_scores" / "local.md").read_text()
    assert "| HumanEval (EvalPlus base) | qwen_evalplus × humaneval_evalplus (1) | 4/4 | 75.0 [30.1, 95.4] | 61.6 (2) | inside |" in md
    assert "OUTSIDE" in md and (root / "reference_scores" / "local.png").stat().st_size > 0
    # what the Qwen cell sent: system line, user template, the prefill, its stop list and max tokens
    qwen = [r for b in backbones for r in b.requests if r[0][-1]["role"] == "assistant"]
    assert len(qwen) == 4
    messages, sampling, _ = qwen[0]
    assert [m["role"] for m in messages] == ["system", "user", "assistant"] and messages[2]["content"] == PREFILL
    assert messages[1]["content"].startswith("Can you complete the following Python function?\n```python\n")
    assert messages[1]["content"].endswith("\n```\n")
    assert sampling["max_tokens"] == 2048 and sampling["temperature"] == 0.0 and "\n```" in sampling["stop"]
    # re-rendering without running reads the same runs
    capsys.readouterr()
    assert reference_scores.main([*argv, "run=false"]) == 0
    assert "75.0 [30.1, 95.4]" in capsys.readouterr().out


def test_a_reply_without_the_prefill_is_an_error_not_a_score(tmp_path, monkeypatch):
    from agentic_repro.scripts import reference_scores

    _, problems = _bench()

    async def fake_build(cfg, *, run_dir, seed, **kw):          # a server that answers a new turn
        return ScriptedBackbone(lambda m, s: "def f():\n    return 1\n", name=cfg["name"])

    monkeypatch.setattr("agentic_repro.harness.runner.build_backbone", fake_build)
    root = tmp_path / "results"
    argv = ["backbone=local", f"config={_config(tmp_path)}", f"results_root={root}", "limit=1",
            f"cache.path={tmp_path / 'cache.sqlite'}", "runner.progress=false", "runner.fail_fast_after=0"]
    assert reference_scores.main(argv) == 3
    rows = {r["cell"]: r for r in csv.DictReader(open(root / "reference_scores" / "local.csv"))}
    assert rows["he"]["status"] == "incomplete" and rows["he"]["score_pct"] == ""
    assert "1 error" in rows["he"]["verdict"]


# ---- priced backbones: estimate, ask, then spend -------------------------------------------------------------

def _api_config(tmp_path: Path) -> Path:
    cfg = yaml.safe_load(Path("configs/reference_scores.yaml").read_text())
    cfg["api"].update(benchmarks=["gsm8k"], methods=["io"], sample=3, papers={"notes": ["a note"]})
    path = tmp_path / "reference.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def test_priced_backbone_prints_the_estimate_and_spends_nothing_unconfirmed(tmp_path, monkeypatch, capsys):
    from agentic_repro.scripts import reference_scores

    built = []

    async def fake_build(cfg, *, run_dir, seed, **kw):
        built.append(cfg["name"])
        return ScriptedBackbone(lambda m, s: "ANSWER: 1", name=cfg["name"])

    monkeypatch.setattr("agentic_repro.harness.runner.build_backbone", fake_build)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    root = tmp_path / "results"
    argv = ["backbone=gpt-4o-mini", f"config={_api_config(tmp_path)}", f"results_root={root}",
            f"cache.path={tmp_path / 'cache.sqlite'}", "runner.progress=false"]
    monkeypatch.setattr("sys.stdin.isatty", lambda: False)
    assert reference_scores.main(argv) == 1
    err = capsys.readouterr().err
    # 3 problems x (150 x $0.15/M + 130 x $0.60/M) = $0.000302
    assert "Estimated cost on gpt-4o-mini: $0.00" in err and "3 problems x ~150+130 tokens = $0.000" in err
    assert "yes=true" in err and built == []
    assert reference_scores.main([*argv, "yes=true"]) == 0 and built == ["gpt-4o-mini"]
    rows = list(csv.DictReader(open(root / "reference_scores" / "gpt-4o-mini.csv")))
    assert [(r["cell"], r["status"], r["n"]) for r in rows] == [("gsm8k_io", "ok", "3")]


def test_a_cell_with_graded_scores_says_its_interval_is_t_not_wilson(tmp_path, tiny_data):
    """Issue 29 item 8: the note said "Wilson over problems" for every cell, also one whose scores are graded (F1),
    whose interval is Student t. Now each row carries its method (CSV ci_method; "(t)" after a t interval)."""
    from agentic_repro.scripts.collect import RunIndex
    from agentic_repro.scripts.reference_scores import Cell, cell_record, table
    from tests.test_viewer import f1_run, right_on_1

    f1_run(tmp_path / "graded", lambda m, s: "ANSWER: 2 apples x y" if "1+1" in m[-1]["content"] else "ANSWER: 0", 42)
    io = tmp_path / "binary"
    run(make_spec(io, {"name": "io", "solver": "agentic_repro.baselines.simple:io",
                       "params": {"template": "{task}\n\n{answer_instruction}"}}, limit=2), ScriptedBackbone(right_on_1))
    recs = []
    for root in (tmp_path / "graded" / "results", io / "results"):
        agg = RunIndex.scan(root, "t").agg("tiny", "io", "scripted", [42])
        recs.append(cell_record(Cell(name=root.parent.name, label=root.parent.name, benchmark="tiny", method="io",
                                     published=50.0), agg, root))
    assert [r["ci_method"] for r in recs] == ["t", "wilson"]
    md = table("scripted", recs, []).to_markdown()
    graded, binary = (next(line for line in md.splitlines() if line.startswith(f"| {n} |")) for n in ("graded", "binary"))
    assert "] (t) |" in graded and "(t)" not in binary
    assert "Wilson over problems" not in md and "Wilson for 0/1 scores; (t): Student t" in md
