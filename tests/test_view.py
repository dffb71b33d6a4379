"""A method cannot reach the gold answer, the hidden fields or the scorer through ``ctx``; tools work
through the view and every tool call is recorded."""
from __future__ import annotations

import functools
import json
import types
from typing import Any

import pytest

from agentic_repro.harness.results import read_jsonl_tolerant
from agentic_repro.harness.tools import Tool
from agentic_repro.harness.types import Problem, Score
from agentic_repro.harness.view import GoldHidden
from tests.conftest import EchoBenchmark, make_spec, run
from tests.doubles import ScriptedBackbone

GOLD_MARK = "GOLD-7f3a"      # in every gold answer
SECRET_MARK = "SECRET-91c2"  # in every hidden field


class SecretBenchmark(EchoBenchmark):
    """The echo benchmark with a marked gold answer and a hidden field the prompt uses."""

    hidden_fields = ("secret_tests",)

    def make_problem(self, row: dict[str, Any], row_index: int) -> Problem:
        return Problem(id=row["id"], index=row_index,
                       fields={"q": row["q"], "secret_tests": [f"assert f() == {row['a']}  # {SECRET_MARK}"]},
                       gold=f"{row['a']} {GOLD_MARK}", benchmark=self.name)

    def render(self, problem: Problem) -> str:  # the prompt may show what the view hides (MBPP's shown test)
        return problem.fields["q"] + " (first test: " + problem.fields["secret_tests"][0].split("#")[0] + ")"

    async def score(self, text: str, problem: Problem) -> Score:
        pred, rule = self.extract(text, problem)
        return Score(float(pred == problem.gold.split()[0]), pred, {"rule": rule})

    def tools(self, problem: Problem) -> list[Tool]:
        def lookup(key: str) -> str:
            return f"looked up {key}"

        def broken() -> None:
            raise RuntimeError("index offline")

        async def run_public_tests(text: str) -> dict:
            ok = "4" in text
            return {"passed": int(ok), "total": 1, "results": [{"test": "assert f() == 4", "passed": ok}]}

        return [Tool("lookup", lookup, "look a key up", {"key": "what to look up"}), Tool("broken", broken),
                Tool("run_public_tests", run_public_tests, "the shown test")]


def _is_secret(obj: Any) -> bool:
    if isinstance(obj, str):
        return GOLD_MARK in obj or SECRET_MARK in obj
    if isinstance(obj, Problem):
        return True
    from agentic_repro.harness.benchmark import Benchmark

    return isinstance(obj, Benchmark)


def reachable_secrets(root: Any, limit: int = 200_000, is_target: Any = None) -> list[str]:
    """Walk every route from ``root``: instance attributes (private too, via __dict__ and slots),
    properties, container items, bound methods, partials, closures and defaults. Modules, classes and
    interpreter internals (frames, coroutines, the event loop) are what a method reaches by importing
    or introspecting the interpreter, not through ctx."""
    seen: set[int] = set()
    found: list[str] = []
    stack: list[tuple[Any, str]] = [(root, "ctx")]
    skip = (types.ModuleType, type, types.FrameType, types.CodeType, types.CoroutineType, types.GeneratorType,
            types.BuiltinFunctionType)
    is_target = is_target or _is_secret
    while stack:
        assert len(seen) < limit, "the walk did not finish: raise the limit"
        obj, path = stack.pop()
        if id(obj) in seen or isinstance(obj, skip) or obj is None or isinstance(obj, (int, float, bool, bytes)):
            continue
        seen.add(id(obj))
        if is_target(obj):
            found.append(path)
            continue
        if isinstance(obj, str):
            continue
        if isinstance(obj, dict):
            stack += [(v, f"{path}[{k!r}]") for k, v in obj.items()] + [(k, f"{path}.key") for k in obj]
            continue
        if isinstance(obj, (list, tuple, set, frozenset)):
            stack += [(v, f"{path}[{i}]") for i, v in enumerate(obj)]
            continue
        if isinstance(obj, types.MethodType):
            stack += [(obj.__self__, f"{path}.__self__"), (obj.__func__, f"{path}.__func__")]
            continue
        if isinstance(obj, functools.partial):
            stack += [(obj.func, f"{path}.func"), (obj.args, f"{path}.args"), (obj.keywords, f"{path}.keywords")]
            continue
        if isinstance(obj, types.FunctionType):
            cells = [c.cell_contents for c in (obj.__closure__ or ()) if _cell_ok(c)]
            stack += [(cells, f"{path}.__closure__"), (obj.__defaults__, f"{path}.__defaults__"),
                      (obj.__kwdefaults__, f"{path}.__kwdefaults__")]
            continue
        if hasattr(obj, "__dict__"):
            stack.append((vars(obj), f"{path}.__dict__"))
        for cls in type(obj).__mro__:
            for name in getattr(cls, "__slots__", ()):
                if hasattr(obj, name):
                    stack.append((getattr(obj, name), f"{path}.{name}"))
            for name, attr in vars(cls).items():
                if isinstance(attr, property):
                    try:
                        stack.append((getattr(obj, name), f"{path}.{name}"))
                    except Exception:  # noqa: BLE001 - a property that refuses (gold) is the point
                        pass
    return found


def _cell_ok(cell: Any) -> bool:
    try:
        cell.cell_contents
        return True
    except ValueError:
        return False


async def snoop(problem, ctx):
    from agentic_repro.harness.types import Solution

    report: dict[str, Any] = {}
    try:
        report["gold"] = problem.gold
    except GoldHidden as exc:
        report["gold_error"] = str(exc)
    report["ctx_problem_is_problem"] = ctx.problem is problem
    report["fields"] = sorted(problem.fields)
    for name in ("score", "load", "cfg", "make_problem", "split_file", "_real", "benchmark"):
        report[f"bench.{name}"] = hasattr(ctx.benchmark, name)
    report["run_benchmark_score"] = hasattr(ctx.run.benchmark, "score")
    report["reachable"] = reachable_secrets(ctx)
    report["reachable_from_problem"] = reachable_secrets(problem)
    # the walk goes deep: it finds the backbone behind ctx.run.llms (so finding nothing above means something)
    report["walk_reaches_backbone"] = reachable_secrets(ctx, is_target=lambda o: isinstance(o, ScriptedBackbone))
    # what the view offers still works (render needs the hidden field, on the scorer side)
    report["render"] = ctx.benchmark.render(problem)
    report["extract"] = ctx.benchmark.extract("x ANSWER: 4", problem)
    report["key"] = ctx.benchmark.answer_key(" 4 ")
    text = await ctx.ask(ctx.benchmark.prompt(problem, "{task} {answer_instruction}"), stage="answer")
    return Solution(text, trace=report)


def secret_spec(tmp_path, solver: str, **kw):
    spec = make_spec(tmp_path, {"name": "m", "solver": solver, "params": {}}, **kw)
    spec.benchmark_cfg["kind"] = "tests.test_view.SecretBenchmark"
    return spec


def test_a_method_cannot_reach_the_gold_through_ctx(tmp_path, tiny_data):
    def script(messages, sampling):
        assert GOLD_MARK not in messages[-1]["content"]
        return "ANSWER: " + messages[-1]["content"].split("What is ")[1].split("+")[0] * 2

    spec = secret_spec(tmp_path, "tests.test_view:snoop", limit=3)
    metrics = run(spec, ScriptedBackbone(script))
    preds = read_jsonl_tolerant(spec.out_dir / "predictions.jsonl")
    assert len(preds) == 3 and all(p["status"] == "ok" for p in preds), [p.get("error") for p in preds]
    for p in preds:
        r = p["trace"]
        assert "gold" not in r and "never sees the gold" in r["gold_error"]
        assert r["ctx_problem_is_problem"] and r["fields"] == ["q"]
        assert not any(r[f"bench.{n}"] for n in ("score", "load", "cfg", "make_problem", "split_file", "_real",
                                                  "benchmark"))
        assert r["run_benchmark_score"] is False
        assert r["reachable"] == [] and r["reachable_from_problem"] == []
        assert [p.endswith("['backbone']") for p in r["walk_reaches_backbone"]] == [True]
        assert "(first test: assert f() ==" in r["render"]       # the prompt still shows what it shows
        assert r["extract"] == ["4", "after-marker"] and r["key"] == "4"
        assert GOLD_MARK in p["gold"]                              # the runner scored with the real problem
    assert metrics["n"] == 3


def test_the_walker_finds_a_leak_when_there_is_one():
    """The walk above is not vacuous: a gold answer one private attribute or closure away is found."""
    class Leaky:
        def __init__(self, problem):
            self._p = problem

    real = Problem("p", 0, {}, f"1 {GOLD_MARK}", "b")
    assert reachable_secrets(Leaky(real)) == ["ctx.__dict__['_p']"]

    def make():
        gold = real.gold
        return lambda: gold

    assert reachable_secrets({"f": make()}) == ["ctx['f'].__closure__[0]"]


def test_stateful_methods_get_views_at_window_end(tmp_path, tiny_data):
    seen: list[str] = []

    class W:
        window_size = 2
        name = "w"

        async def solve(self, problem, ctx):
            from agentic_repro.harness.types import Solution

            return Solution(await ctx.ask(problem.fields["q"], stage="a"))

        def end_window(self, outcomes):
            for problem, _ in outcomes:
                with pytest.raises(GoldHidden):
                    problem.gold
                seen.append(type(problem).__name__)

        def state_dict(self):
            return {}

        def load_state_dict(self, state):
            pass

    import tests.test_view as mod

    mod.WindowSnoop = W
    run(secret_spec(tmp_path, "tests.test_view:WindowSnoop", limit=3), ScriptedBackbone(lambda m, s: "ANSWER: 0"))
    assert seen == ["ProblemView"] * 3


async def use_tools(problem, ctx):
    from agentic_repro.harness.types import Solution

    names = [t.name for t in ctx.tools]
    looked = await ctx.call_tool("lookup", key=problem.fields["q"][:9])
    tests = await ctx.benchmark.run_public_tests("ANSWER: 4", problem)
    errors = []
    for bad in ("nope", "broken"):
        try:
            await ctx.call_tool(bad)
        except Exception as exc:  # noqa: BLE001 - both are reported to the method
            errors.append(type(exc).__name__)
    return Solution(f"ANSWER: {looked}", trace={"tools": names, "tests": tests, "errors": errors})


def test_every_tool_call_is_recorded(tmp_path, tiny_data):
    spec = secret_spec(tmp_path, "tests.test_view:use_tools", limit=1)
    run(spec, ScriptedBackbone(lambda m, s: "unused"))
    p = read_jsonl_tolerant(spec.out_dir / "predictions.jsonl")[0]
    assert p["status"] == "ok"
    assert p["trace"]["tools"] == ["lookup", "broken", "run_public_tests"]
    assert p["trace"]["tests"]["passed"] == 1 and p["trace"]["errors"] == ["UnknownTool", "RuntimeError"]
    calls = p["tool_calls"]
    assert [c["name"] for c in calls] == ["lookup", "run_public_tests", "broken"]  # the unknown one never ran
    assert json.loads(calls[0]["args"]) == {"key": "What is 0"} and calls[0]["result"] == '"looked up What is 0"'
    assert json.loads(calls[1]["args"]) == {"text": "ANSWER: 4"} and '"passed": 1' in calls[1]["result"]
    assert calls[2]["result"] is None and calls[2]["error"] == "RuntimeError: index offline"
    assert all(c["latency_s"] >= 0 for c in calls)


def test_tool_summaries_are_bounded():
    from agentic_repro.harness.tools import SUMMARY_CHARS, summarize

    assert len(summarize("x" * 10_000)) == SUMMARY_CHARS
    assert summarize({"b": 1, "a": [1, 2]}) == '{"a": [1, 2], "b": 1}'


def test_ctx_used_outside_its_problem_is_an_error(tmp_path, tiny_data):
    kept = []

    async def keep(problem, ctx):
        from agentic_repro.harness.types import Solution

        kept.append(ctx)
        if len(kept) == 2:
            kept[0].benchmark.render(problem)  # problem 1's ctx inside problem 2's solve
        return Solution("ANSWER: 0")

    import tests.test_view as mod

    mod.keep = keep
    spec = secret_spec(tmp_path, "tests.test_view:keep", limit=2, runner={"max_concurrent_problems": 1})
    run(spec, ScriptedBackbone(lambda m, s: "x"))
    preds = {p["id"]: p for p in read_jsonl_tolerant(spec.out_dir / "predictions.jsonl")}
    assert preds["p1"]["status"] == "error" and "belongs to another problem" in preds["p1"]["error"]
    with pytest.raises(RuntimeError, match="outside the runner's task"):
        kept[0].benchmark.render(kept[0].problem)


# ---- every benchmark: no visible field gives its gold away ------------------------------------------------------
BENCHMARK_CONFIGS = sorted(p.stem for p in (__import__("pathlib").Path(__file__).resolve().parents[1]
                                            / "configs" / "benchmark").glob("*.yaml"))


def _visible_strings(view: Any) -> dict[str, str]:
    """Every string a method reaches from a problem's view (the walk above), by its path."""
    paths: list[str] = []

    def target(obj: Any) -> bool:
        if isinstance(obj, str) and obj.strip():
            paths.append(obj)
            return True
        return False

    hits = reachable_secrets(view.fields, is_target=target)
    return dict(zip(hits, paths))


@pytest.mark.parametrize("name", BENCHMARK_CONFIGS)
def test_no_visible_field_of_any_benchmark_scores_as_the_answer(name):
    """Submitting any string a method can reach from a problem's view (every field, nested items too) as the
    answer must not score right on every sampled problem: such a field is the gold in disguise (SocialMaze's
    ``answer_text`` was one). Scored by the benchmark's own scorer, problems as the runner loads them."""
    import asyncio

    from agentic_repro.evaluators.base import build_benchmark
    from agentic_repro.evaluators.data import DataMissingError
    from agentic_repro.harness.view import ProblemView
    from agentic_repro.scripts.runs import compose

    bench = build_benchmark(compose([f"benchmark={name}"])["benchmark"])
    if bench.is_environment:
        pytest.skip(f"{name} is scored by running its environment, not by a text answer")
    k = 3 if bench.domain == "code" else 6   # code answers run in the sandbox: fewer problems
    bench.cfg["limit"] = k
    try:
        problems, _ = bench.load()
    except DataMissingError as exc:   # offline here (FinQA, DeepResearch Bench download in make data)
        pytest.skip(f"{name}: {exc}")
    assert len(problems) == k
    right: dict[str, int] = {}
    for problem in problems:
        view = ProblemView.of(problem, bench.hidden())
        assert reachable_secrets(view, is_target=lambda o: isinstance(o, Problem)) == []
        for path, text in _visible_strings(view).items():
            score = asyncio.run(bench.score(text, problem))
            right[path] = right.get(path, 0) + int(score.value >= 1.0)
    assert right, f"{name}: the walk found no visible string"
    leaks = sorted(path for path, n in right.items() if n == k)
    assert leaks == [], f"{name}: visible fields that score as the answer on all {k} problems: {leaks}"
