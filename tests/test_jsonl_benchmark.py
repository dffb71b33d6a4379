"""The YAML-declared benchmark (evaluators/jsonl.py): GSM8K and DROP, once classes, are now configs.

The golden file (tests/fixtures/jsonl_benchmark_golden.json) was computed by the *classes* (evaluators.math_tasks.GSM8K,
evaluators.qa_tasks.DROP at 08a4d41, before this change) with :func:`digest` below, run in a checkout of that commit:
every shipped problem of every split (id, index, fields, gold, rendered prompt) and the scores and voting keys of
problem-dependent and adversarial outputs. The YAML declarations must reproduce them byte for byte.
"""
from __future__ import annotations

import asyncio
import hashlib
import json
import random
from pathlib import Path
from typing import Any

import pytest

GOLDEN = Path(__file__).parent / "fixtures" / "jsonl_benchmark_golden.json"
SPLITS = {"gsm8k": ["test", "validate", "full"], "drop": ["test", "validate"]}

NASTY = ["", " ", "9" * 5000, "\\boxed{" * 3000, "}" * 3000, "{" * 3000 + "1" + "}" * 3000, "\\frac{" * 2000,
         "\u0663\u0664", "1/0", "#### 1/0", "Answer: 1e999", "<answer></answer>", "<answer> x </answer>", "**" * 1000,
         "***x***", "\x00\x01", "\u202e", "Answer: " + "-" * 1000, "1,000,000,000,000,000,000,000.5", "$-$-$",
         "answer is: \u221e", "Answer: nan", "Answer: inf%", "0." * 1000, "She owes \u22125 dollars", "3/4",
         "The answer is 18. Check: 18 - 2 = 16", "\\boxed{7} and then 9", "Final answer:\n\n  twelve.  "]
_rng = random.Random(0)
RANDOM = ["".join(_rng.choice("0123456789.,-+/%$#(){}[]\\*_<>abcx^ \n") for _ in range(_rng.randint(1, 80)))
          for _ in range(60)]


def _outputs(problem: Any) -> list[str]:
    gold = str(problem.gold)
    first = gold.split("|")[0]
    return [gold, first, f"The answer is {first}.", f"Answer: {first}", f"\\boxed{{{first}}}", f"#### {first}",
            f"<answer>{first}</answer>\nthen 3", f"{first} \u2212{first} 1,234.50", str(problem.fields)[-60:]]


def _sha(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, ensure_ascii=False, default=str).encode()).hexdigest()


def digest(bench_name: str, split: str, n_adversarial: int = 15) -> dict[str, Any]:
    """What a benchmark makes of one split: its problems and rendered prompts, and its scores (value, extracted,
    details -- key order included, as predictions.jsonl writes them) and voting keys, as sha256 digests."""
    from agentic_repro.harness.benchmark import build_benchmark
    from agentic_repro.harness.compose import compose

    bench = build_benchmark(compose([f"benchmark={bench_name}", f"benchmark.split={split}"])["benchmark"])
    problems, info = bench.load()
    shown = [[p.id, p.index, p.fields, p.gold, bench.render(p)] for p in problems]

    async def scores() -> list[Any]:
        out = []
        for i, p in enumerate(problems):
            texts = _outputs(p) + (NASTY + RANDOM if i < n_adversarial else [])
            for t in texts:
                s = await bench.score(t, p)
                out.append([p.id, s.value, s.extracted, s.details, bench.answer_key(s.extracted),
                            list(bench.extract(t, p))])
        return out

    scored = asyncio.run(scores())
    return {"n": len(problems), "data_sha256": info.sha256, "domain": bench.domain,
            "problems_sha256": _sha(shown), "scores": len(scored), "scores_sha256": _sha(scored),
            "first_problem": shown[0][:4], "first_score": scored[0]}


def _golden() -> dict[str, Any]:
    return json.loads(GOLDEN.read_text(encoding="utf-8"))


@pytest.mark.parametrize("bench_name,split", [(b, s) for b, splits in SPLITS.items() for s in splits])
def test_the_yaml_benchmark_reproduces_the_class_it_replaced(bench_name: str, split: str) -> None:
    want = _golden()[f"{bench_name}/{split}"]
    got = json.loads(json.dumps(digest(bench_name, split), ensure_ascii=False, default=str))
    assert got["data_sha256"] == want["data_sha256"], "the data file changed: the golden file no longer applies"
    assert got["first_problem"] == want["first_problem"]
    assert got["first_score"] == want["first_score"]
    assert got == want


def _declared(**over: Any) -> dict[str, Any]:
    cfg = {"name": "tiny", "split": "test", "splits": {"test": "tiny.jsonl"}, "domain": "qa",
           "kind": "agentic_repro.evaluators.jsonl:JSONLBenchmark", "fields": {"question": "q"},
           "gold": {"field": "a"}, "prompt": "Q: {question}", "extract": "extract_short_answer", "scorer": "exact"}
    return {**cfg, **over}


def test_only_the_declared_fields_reach_the_problem_and_the_gold_stays_out_of_the_view(tmp_path: Path) -> None:
    from agentic_repro.harness.benchmark import build_benchmark
    from agentic_repro.harness.view import GoldHidden, ProblemView

    (tmp_path / "tiny.jsonl").write_text(json.dumps({"q": "Capital of France?", "a": "Paris|paris city",
                                                     "secret": "the hidden column"}) + "\n", encoding="utf-8")
    bench = build_benchmark(_declared())
    (p,), info = bench.load(tmp_path)
    assert p.id == "tiny-0" and p.fields == {"question": "Capital of France?"} and info.total == 1
    assert bench.render(p) == "Q: Capital of France?"
    view = ProblemView.of(p, bench.hidden())
    assert "Paris" not in repr(view) and "hidden column" not in repr(view)
    with pytest.raises(GoldHidden):
        _ = view.gold
    right, wrong, empty = (asyncio.run(bench.score(t, p)) for t in ("Answer: the Paris.", "Answer: Lyon", ""))
    assert (right.value, right.extracted, right.details["rule"]) == (1.0, "the Paris", "answer_marker")
    assert wrong.value == 0.0 and empty.value == 0.0 and empty.details["rule"] == "empty"
    assert bench.answer_key("The PARIS") == bench.answer_key("paris")


@pytest.mark.parametrize("over,match", [
    ({"extract": "last_nubmer"}, r"benchmark.extract='last_nubmer': choose one of"),
    ({"scorer": "bleu"}, r"benchmark.scorer='bleu': choose one of \['code', 'exact', 'f1', 'math', 'numeric'\]"),
    ({"scorer": "code", "extract": "fences", "code": {"shape": "humaneval"}}, r"code.entry_point: names the field"),
    ({"scorer": "code", "extract": "fences", "code": {"entry_point": "fn"}}, r"code.entry_point='fn' is not a declared"),
    ({"scorer": "code", "extract": "last_number", "code": {"shape": "asserts"}}, r"benchmark.extract='last_number'"),
    ({"scorer": "code", "extract": "fences", "code": {"shape": "doctest"}}, r"benchmark.code.shape='doctest'"),
    ({"prompt": "{question} {context}"}, r"prompt .* is not a template over fields \['question'\]"),
    ({"gold": {"field": "a", "read": "gsm8k"}}, r"benchmark.gold.read='gsm8k'"),
    ({"fields": {"question": {"key": "q"}}}, r"fields.question must be a row key"),
    ({"scorer": "f1", "f1_mode": "squad"}, r"benchmark.f1_mode='squad'"),
    ({"readings": {"a": "last_number"}}, r"readings: is for scorer: numeric"),
    ({"prompt": None}, r"needs `prompt:`"),
])
def test_a_config_error_names_the_key_before_any_call(over: dict[str, Any], match: str) -> None:
    from agentic_repro.harness.benchmark import build_benchmark

    with pytest.raises(ValueError, match=match):
        build_benchmark(_declared(**over))


def test_numeric_and_math_scorers_through_yaml() -> None:
    from agentic_repro.evaluators.jsonl import JSONLBenchmark
    from agentic_repro.harness.types import Problem

    num = JSONLBenchmark(_declared(scorer="numeric", extract="last_number", domain="math"))
    p = Problem(id="x", index=0, fields={"question": "q"}, gold="1,000", benchmark="tiny")
    s = asyncio.run(num.score("so \\boxed{1000.0}", p))
    assert s.value == 1.0 and s.details["readings"]["last_number"]["rule"] == "boxed" and num.domain == "math"
    math = JSONLBenchmark(_declared(scorer="math", extract="last_boxed", equivalence="aflow", domain="math"))
    p = Problem(id="x", index=0, fields={"question": "q"}, gold="\\frac{1}{2}", benchmark="tiny")
    assert asyncio.run(math.score("\\boxed{0.5}", p)).value == 1.0
    assert asyncio.run(math.score("\\boxed{2}", p)).value == 0.0


def test_the_guides_yaml_benchmark_runs_as_written(tmp_path: Path) -> None:
    """docs/writing-a-benchmark.md's GSM8K-shaped benchmark (its YAML and its data snippet, as written) runs with
    backbone=scripted through the real CLI, its config found by Hydra as configs/benchmark/mybench.yaml would be."""
    import os
    import re
    import subprocess
    import sys

    guide = (Path(__file__).resolve().parents[1] / "docs" / "writing-a-benchmark.md").read_text(encoding="utf-8")
    blocks = re.findall(r"^```(\w*)\n(.*?)^```", guide, re.DOTALL | re.MULTILINE)
    rows = next(body for lang, body in blocks if lang == "jsonl")
    declared = next(yaml_doc for lang, body in blocks if lang == "yaml"
                    for yaml_doc in [__import__("yaml").safe_load(body)]
                    if str(yaml_doc.get("kind", "")).endswith("jsonl:JSONLBenchmark"))
    name = declared["name"]
    (tmp_path / "cfg" / "benchmark").mkdir(parents=True)
    (tmp_path / "cfg" / "benchmark" / f"{name}.yaml").write_text(
        __import__("yaml").safe_dump(declared), encoding="utf-8")
    data = tmp_path / "data" / Path(declared["splits"]["test"]).parent
    data.mkdir(parents=True)
    (tmp_path / "data" / declared["splits"]["test"]).write_text(rows, encoding="utf-8")
    r = subprocess.run([sys.executable, "-m", "agentic_repro.harness.cli", "run", "method=cot", f"benchmark={name}",
                        "backbone=scripted", "backbone.reply=So the answer is 60.",
                        f"results_root={tmp_path}/results", f"hydra.searchpath=[file://{tmp_path}/cfg]",
                        f"hydra.run.dir={tmp_path}/h"], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                       env={**os.environ, "AGENTIC_REPRO_DATA": str(tmp_path / "data")})
    assert r.returncode == 0, r.stderr[-2000:]
    summary = json.loads(r.stdout.strip().splitlines()[-1])
    assert summary["complete"] is True and summary["n"] == 2 and summary["n_errors"] == 0
    assert summary["score_pct"] == 50.0  # the scripted reply is right on q2 (60) only


def _guide_yaml(kind_suffix: str, name: str) -> dict[str, Any]:
    """A YAML declaration shown in docs/writing-a-benchmark.md, as written."""
    import re

    import yaml

    guide = (Path(__file__).resolve().parents[1] / "docs" / "writing-a-benchmark.md").read_text(encoding="utf-8")
    docs = [yaml.safe_load(body) for lang, body in re.findall(r"^```(\w*)\n(.*?)^```", guide, re.DOTALL | re.MULTILINE)
            if lang == "yaml"]
    return next(d for d in docs if isinstance(d, dict) and str(d.get("kind", "")).endswith(kind_suffix)
                and d.get("name") == name)


HUMANEVAL_YAML = _guide_yaml("jsonl:JSONLBenchmark", "humaneval_yaml")


def _both(yaml_bench: Any, cls_bench: Any, pairs: list[tuple[Any, Any, str]]) -> list[tuple[Any, Any]]:
    async def main() -> list[tuple[Any, Any]]:
        gate = asyncio.Semaphore(4)

        async def one(a: Any, b: Any, text: str) -> tuple[Any, Any]:
            async with gate:
                return await yaml_bench.score(text, a), await cls_bench.score(text, b)
        return list(await asyncio.gather(*(one(a, b, t) for a, b, t in pairs)))
    return asyncio.run(main())


def test_a_humaneval_shaped_yaml_benchmark_scores_like_the_humaneval_class() -> None:
    """``scorer: code``: HumanEval declared in YAML gives the class's verdict (value, status, extracted program) on
    all 164 problems, for the canonical solutions (the class's protocol: a body continuing the prompt), whole
    functions in a fence, wrong and empty answers; the tests stay out of the method's view."""
    from agentic_repro.harness.benchmark import build_benchmark
    from agentic_repro.harness.compose import compose
    from agentic_repro.harness.view import ProblemView

    mine = build_benchmark(HUMANEVAL_YAML)
    theirs = build_benchmark(compose(["benchmark=humaneval", "benchmark.split=full"])["benchmark"])
    ours, _ = mine.load()
    ref, _ = theirs.load()
    assert [p.id for p in ours] == [p.id for p in ref] and len(ours) == 164
    assert [mine.render(p) for p in ours] == [theirs.render(p) for p in ref]
    view = ProblemView.of(ours[0], mine.hidden())
    assert "def check(" not in repr(view) and "check(" in str(ours[0].gold)
    pairs = []
    for a, b in zip(ours, ref):
        whole = b.fields["prompt"] + b.gold
        pairs += [(a, b, b.gold), (a, b, f"```python\n{whole}```"), (a, b, "```python\n" + whole.replace(
            "return", "return None and", 1) + "```"), (a, b, "no code here")]
    results = _both(mine, theirs, pairs)
    for (a, _, text), (x, y) in zip(pairs, results):
        assert (x.value, x.extracted, x.details["status"], x.details["rule"]) == \
            (y.value, y.extracted, y.details["status"], y.details["rule"]), (a.id, text[:80], x, y)
    values = [x.value for x, _ in results]
    assert sum(values[0::4]) == sum(values[1::4]) == 164 and sum(values[3::4]) == 0  # canonical: all pass
    assert sum(values[2::4]) < 164                                                       # broken: not all pass


def test_an_asserts_shaped_yaml_benchmark_scores_like_the_mbpp_class() -> None:
    """``code.shape: asserts`` (MBPP's layout without setup code): MBPP's rows with no setup code or test imports
    get the class's verdict for their reference code, a wrong program and no program."""
    from agentic_repro.harness.benchmark import build_benchmark
    from agentic_repro.harness.compose import compose

    theirs = build_benchmark(compose(["benchmark=mbpp"])["benchmark"])
    ref, _ = theirs.load()
    plain = [p for p in ref if not p.fields.get("test_setup_code") and not p.fields.get("test_imports")][:40]
    assert len(plain) == 40
    mine = build_benchmark({**HUMANEVAL_YAML, "name": "mbpp_yaml", "fields": {"text": "text", "entry_point": "fn"},
                            "gold": {"field": "tests"}, "prompt": "{text}",
                            "code": {"shape": "asserts", "entry_point": "entry_point"}})
    from agentic_repro.harness.types import Problem

    ours = [Problem(id=p.id, index=p.index, fields={"text": p.fields["prompt"], "entry_point": p.fields["entry_point"]},
                    gold=json.dumps(p.fields["test_list"]), benchmark="mbpp_yaml") for p in plain]
    pairs = []
    for a, b in zip(ours, plain):
        code = str(b.gold)
        pairs += [(a, b, f"```python\n{code}\n```"), (a, b, "```python\n" + code.replace("return", "return None and", 1)
                                                        + "\n```"), (a, b, "")]
    results = _both(mine, theirs, pairs)
    for (a, _, text), (x, y) in zip(pairs, results):
        assert (x.value, x.extracted, x.details["status"]) == (y.value, y.extracted, y.details["status"]), (a.id, x, y)
    assert sum(x.value for x, _ in results[0::3]) >= 38 and sum(x.value for x, _ in results[2::3]) == 0


def test_a_yaml_code_benchmark_runs_no_code_unless_allowed() -> None:
    from agentic_repro.evaluators.scorers import CodeExecutionDisabled
    from agentic_repro.harness.benchmark import build_benchmark
    from agentic_repro.harness.types import Problem

    bench = build_benchmark({**HUMANEVAL_YAML, "execute_code": False})
    p = Problem(id="x", index=0, fields={"prompt": "def f():\n", "entry_point": "f"},
                gold="def check(c):\n    assert c() == 1\n", benchmark="humaneval_yaml")
    with pytest.raises(CodeExecutionDisabled):
        asyncio.run(bench.score("```python\ndef f():\n    return 1\n```", p))

