"""The sandboxed workflow channel: a generated workflow reaches the harness only through operator requests;
whatever it does wrong is a failed workflow, never a harness crash (baselines/autoflow/channel.py)."""
from __future__ import annotations

import asyncio
import os
import time

import pytest

from agentic_repro.baselines.autoflow.channel import Limits, OperatorCallError, OperatorRefused, run_workflow
from agentic_repro.harness.backbone import BackboneError

GATHER = '''
import asyncio
import workspace.GSM8K.workflows.template.operator as operator
import workspace.GSM8K.workflows.round_3.prompt as prompt_custom
from scripts.async_llm import create_llm_instance
from scripts.evaluator import DatasetType

class Workflow:
    def __init__(self, name: str, llm_config, dataset: DatasetType) -> None:
        self.llm = create_llm_instance(llm_config)
        self.custom = operator.Custom(self.llm)
        self.sc = operator.ScEnsemble(self.llm)

    async def __call__(self, problem: str):
        sols = await asyncio.gather(*[self.custom(input=problem, instruction=prompt_custom.P + str(i)) for i in range(3)])
        best = await self.sc(solutions=[s["response"] for s in sols], problem=problem)
        return best["response"], self.llm.get_usage_summary()["total_cost"]
'''


def simple(body: str, imports: str = "") -> str:
    return f"{imports}\nclass Workflow:\n    def __init__(self, *a):\n        pass\n\n    async def __call__(self, problem):\n" + \
        "".join(f"        {line}\n" for line in body.splitlines())


def run(graph: str, handler=None, prompt: str = "", **limits) -> tuple:
    seen: list[tuple[str, dict]] = []

    async def default(op, args):
        seen.append((op, args))
        if op == "Custom":
            return {"response": args["instruction"] + "|" + args["input"]}
        if op == "ScEnsemble":
            return {"response": sorted(args["solutions"])[-1]}
        return {"response": "?"}

    lim = Limits(**{"idle_timeout_s": 5, "cpu_s": 5, **limits})
    return asyncio.run(run_workflow(graph, prompt, {"problem": "2+2"}, handler or default, lim)), seen


def test_a_benign_workflow_batches_concurrent_requests_and_answers():
    out, seen = run(GATHER, prompt='P = "solve "')
    assert out.ok and out.failure is None
    assert out.answer == "solve 2|2+2"
    assert [op for op, _ in seen] == ["Custom"] * 3 + ["ScEnsemble"]
    assert out.calls == 4 and len(out.requests) == 4


@pytest.mark.parametrize("name, body, imports, expect", [
    ("read a file", 'return open("/etc/hostname").read()', "", "open is not allowed"),
    ("list a directory", 'return str(os.listdir("/"))', "import os", "os.listdir is not allowed"),
    ("run a shell", 'os.system("touch /tmp/agentic-wf-pwned")\nreturn "x"', "import os", "os.system"),
    ("spawn a process", 'import subprocess\nreturn subprocess.check_output(["id"]).decode()', "", "importing subprocess"),
    ("signal the harness", "os.kill(os.getppid(), 9)", "import os", "os.kill"),
    ("load ctypes", "import ctypes\nreturn 'x'", "", "ctypes"),
    ("open a socket", "import socket\nsocket.socket()\nreturn 'x'", "", "socket"),
    ("exit the interpreter", "raise SystemExit(0)", "", "SystemExit"),
])
def test_hostile_workflows_fail_and_the_harness_goes_on(name, body, imports, expect):
    out, seen = run(simple(body, imports))
    assert not out.ok and out.answer is None, name
    assert out.failure in ("crash", "refused"), (name, out.failure, out.detail)
    assert expect in out.detail, (name, out.detail)
    assert seen == []
    assert not os.path.exists("/tmp/agentic-wf-pwned")


def test_a_workflow_that_runs_forever_or_sleeps_is_killed_at_the_idle_timeout():
    for body in ("while True:\n    pass", "import time\ntime.sleep(1000)"):
        t0 = time.monotonic()
        out, _ = run(simple(body), idle_timeout_s=1, cpu_s=30)
        assert not out.ok and out.failure == "timeout", out.detail
        assert time.monotonic() - t0 < 10


def test_a_graph_that_does_not_compile_fails():
    out, _ = run("class Workflow(:\n")
    assert not out.ok and "SyntaxError" in out.detail


def test_refused_operator_ends_the_workflow():
    async def refuse(op, args):
        raise OperatorRefused(f"operator {op!r} is not allowed")

    out, _ = run(GATHER, handler=refuse, prompt='P = ""')
    assert not out.ok and out.failure == "refused" and "not allowed" in out.detail


def test_budget_and_size_limits_are_refusals():
    out, seen = run(simple("for i in range(10):\n    await operator.Custom(None)(input='x', instruction=str(i))\n"
                           "return 'done'"), max_calls=3)
    assert not out.ok and out.failure == "refused" and "more than 3" in out.detail and len(seen) == 3
    out, seen = run(simple("return (await operator.Custom(None)(input='x' * 5000, instruction=''))['response']"),
                    max_arg_chars=1000)
    assert not out.ok and out.failure == "refused" and seen == []


def test_an_operator_error_reaches_the_workflow_as_an_exception():
    async def bad_args(op, args):
        raise OperatorCallError("Custom: missing instruction")

    graph = simple("try:\n    await operator.Custom(None)(input='x')\nexcept operator.OperatorError as e:\n"
                   "    return 'caught ' + str(e)")
    out, _ = run(graph, handler=bad_args)
    assert out.ok and out.answer == "caught Custom: missing instruction"


def test_an_infrastructure_error_propagates_instead_of_failing_the_workflow():
    async def dead(op, args):
        raise BackboneError("connection refused", kind="connection", attempts=3)

    with pytest.raises(BackboneError):
        run(GATHER, handler=dead, prompt='P = ""')


def test_an_adas_agent_that_hangs_or_reads_files_fails():
    async def handler(op, args):
        return [[f, "x"] for f in args["output_fields"]]

    async def go(code):
        return await run_workflow(code, "", {"problem": "2+2", "seed": 1}, handler, Limits(idle_timeout_s=1, cpu_s=30),
                                  kind="adas")

    spin = "def forward(self, taskInfo):\n    while True:\n        pass\n"
    out = asyncio.run(go(spin))
    assert not out.ok and out.failure == "timeout"
    peek = "def forward(self, taskInfo):\n    a = LLMAgentBase(['answer'], 'A')\n    a([taskInfo], 'go')\n" \
           "    return open('/etc/hostname').read()\n"
    out = asyncio.run(go(peek))
    assert not out.ok and "open is not allowed" in out.detail and out.calls == 1


# ---- every call a workflow starts ends with its run (issue 19) -------------------------------------------------

FLOOD = simple("first = await asyncio.gather(*[operator.Custom(None)(input=problem, instruction=str(i)) "
               "for i in range(10)])\n"
               "more = await asyncio.gather(*[operator.Custom(None)(input=problem, instruction=str(i)) "
               "for i in range(100)])\n"
               "return 'ANSWER: ' + more[0]['response']", "import asyncio")


def test_a_flooding_workflow_is_refused_before_its_calls_start_and_none_outlives_solve(tmp_path, tiny_data):
    from agentic_repro.harness.results import read_jsonl_tolerant
    from agentic_repro.harness.runner import Runner
    from tests.conftest import make_spec
    from tests.doubles import ScriptedBackbone

    method = {"name": "flood", "solver": "agentic_repro.baselines.autoflow.workflow:SandboxedWorkflow", "roles": ["executor"],
              "params": {"graph": FLOOD, "limits": {"idle_timeout_s": 10, "max_calls": 64}}}
    spec = make_spec(tmp_path, method, limit=1)
    bb = ScriptedBackbone(lambda m, s: "ANSWER: 0", delay_s=0.1, max_concurrency=4)

    async def go():
        metrics = await Runner(spec, backbone=bb).run()
        at_return = len(bb.requests)
        await asyncio.sleep(1.5)  # the old channel's 54 admitted calls of the refused batch went on here
        return metrics, at_return

    metrics, at_return = asyncio.run(go())
    assert at_return == 10 and len(bb.requests) == 10  # the first batch only; nothing after solve() returned
    ledger = [r for r in read_jsonl_tolerant(spec.out_dir / "calls.jsonl") if "stage" in r]
    assert len(ledger) == 10 == metrics["totals"]["calls"]
    pred = read_jsonl_tolerant(spec.out_dir / "predictions.jsonl")[0]
    wf = pred["trace"]["workflow"]
    assert not wf["ok"] and wf["failure"] == "refused" and "100 more asked at once" in wf["detail"], wf


def test_a_failing_call_cancels_its_siblings_before_the_error_propagates():
    finished: list[str] = []

    async def handler(op, args):
        if args["instruction"] == "P0":
            raise BackboneError("connection refused", kind="connection", attempts=3)
        await asyncio.sleep(0.6)
        finished.append(args["instruction"])
        return {"response": "x"}

    async def go():
        with pytest.raises(BackboneError):
            await run_workflow(GATHER, 'P = "P"', {"problem": "2+2"}, handler, Limits(idle_timeout_s=5, cpu_s=5))
        await asyncio.sleep(1.0)

    asyncio.run(go())
    assert finished == []


def test_a_run_that_ends_while_calls_are_in_flight_cancels_them():
    started, finished = [], []

    async def slow(op, args):
        started.append(op)
        await asyncio.sleep(2.5)
        finished.append(op)
        return {"response": "late"}

    async def go():
        out = await run_workflow(GATHER, 'P = ""', {"problem": "2+2"}, slow,
                                 Limits(idle_timeout_s=10, cpu_s=5, wall_timeout_s=1.0))
        await asyncio.sleep(2.5)
        return out

    out = asyncio.run(go())
    assert not out.ok and out.failure == "timeout", out
    assert started == ["Custom"] * 3 and finished == []


# ---- a sandbox that cannot judge is an error, never a 0 -------------------------------------------------------

def test_an_infrastructure_result_of_the_sandbox_raises_sandbox_failure(monkeypatch):
    from agentic_repro.baselines.autoflow import channel
    from agentic_repro.evaluators.sandbox import ExecResult, SandboxFailure

    async def broken(program, **kw):
        return ExecResult(False, "error", 0.0, "", "", "runner: the benchmark test side crashed", infrastructure=True)

    monkeypatch.setattr(channel, "run_program_async", broken)
    with pytest.raises(SandboxFailure, match="could not run the workflow"):
        run(GATHER, prompt='P = ""')


def _fork_server_children() -> list[int]:
    """The sandbox's persistent trusted runners: the children of this process's fork server."""
    kids: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as fh:
                    ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
                with open(f"/proc/{d}/cmdline", "rb") as fh:
                    cmd = fh.read()
            except (OSError, ValueError, IndexError):
                continue
            kids.setdefault(ppid, []).append(int(d)) if b"python" in cmd else None
    return [r for server in kids.get(os.getpid(), []) for r in kids.get(server, [])]


def test_a_runner_killed_mid_run_is_a_sandbox_failure_not_a_killed_workflow():
    import signal

    from agentic_repro.evaluators.sandbox import SandboxFailure

    killed: list[int] = []

    async def kill_runners(op, args):
        if not killed:
            killed.extend(_fork_server_children())
            for pid in killed:
                os.kill(pid, signal.SIGKILL)
        await asyncio.sleep(1.0)
        return {"response": "x"}

    with pytest.raises(SandboxFailure, match="runner"):
        run(GATHER, handler=kill_runners, prompt='P = ""')
    assert killed, "no sandbox runner found to kill"
    out, _ = run(GATHER, prompt='P = "after "')  # the sandbox recovers: the next workflow runs
    assert out.ok, out


# ---- the workflow cannot switch its audit hook off by reflection ----------------------------------------------

REFLECT = '''
import sys
class Workflow:
    def __init__(self, *a):
        pass

    async def __call__(self, problem):
        notes = []
        try:
            import gc
        except BaseException as e:
            notes.append("import gc: %r" % e)
            imp = [c for c in object.__subclasses__() if c.__name__ == "BuiltinImporter"][0]
            gc = imp.create_module(imp.find_spec("gc"))  # no audit event on this path
        try:
            off = (lambda event, args, *a, **k: None).__code__
            for f in gc.get_objects():
                if getattr(f, "__code__", None) is not None and f.__code__.co_name == "guard":
                    try:
                        f.__code__ = off
                        notes.append("rewrote a hook")
                    except BaseException as e:
                        notes.append("code: %r" % e)
                        f.__defaults__ = tuple(frozenset() if isinstance(d, frozenset) else d for d in f.__defaults__)
        except BaseException as e:
            notes.append("reflection: %r" % e)
        try:
            return "SECRET " + open(PATH).read()
        except BaseException as e:
            return " | ".join(notes + ["open: %r" % e])
'''


def test_a_workflow_cannot_switch_the_audit_hook_off_by_reflection_and_read_a_planted_file(tmp_path):
    secret = tmp_path / "planted.txt"
    secret.write_text("s3cr3t-7f1c")
    secret.chmod(0o644)
    os.chmod(tmp_path, 0o755)
    out, seen = run(REFLECT.replace("PATH", repr(str(secret))))
    assert "s3cr3t-7f1c" not in (out.answer or "") + out.detail, out
    assert out.ok and "workflow sandbox: open is not allowed" in out.answer, out  # the hook itself still refused
    assert "gc.get_objects is not allowed" in out.answer and "rewrote a hook" not in out.answer, out.answer


def test_the_hook_function_reads_no_global_and_closes_over_nothing():
    import dis
    import types

    from agentic_repro.baselines.autoflow.channel import RUNTIME_SOURCE

    seal = next(c for c in compile(RUNTIME_SOURCE, "<runtime>", "exec").co_consts
                if isinstance(c, types.CodeType) and c.co_name == "_seal")
    guard = next(c for c in seal.co_consts if isinstance(c, types.CodeType) and c.co_name == "guard")
    ops = {i.opname for i in dis.get_instructions(guard)}
    assert not ops & {"LOAD_GLOBAL", "LOAD_NAME", "LOAD_DEREF", "LOAD_CLASSDEREF"}, ops
    assert not guard.co_freevars and not guard.co_cellvars


HUGE_N = simple("r = await operator.MultiGenerateCoT(None)(input=problem, instruction='x', n=20000)\n"
                "return 'ANSWER: ' + r['response'][0]")


@pytest.mark.parametrize("graph, refused, calls", [
    (HUGE_N, "n=20000 is not an integer from 0 to 5", 0),  # one request once made 20,000 calls against max_calls=64
    (simple("for i in range(3):\n    r = await operator.MultiGenerateCoT(None)(input=problem, instruction=str(i), n=3)\n"
            "return 'ANSWER: ' + r['response'][0]"), "more than 8 model calls (6 made, 3 more", 6),
    (simple("r = await operator.MdEnsemble(None)(solutions=['a', 'b'], problem=problem, vote_count=999)\n"
            "return 'ANSWER: ' + r['solution']"), "vote_count=999", 0),
    (simple("r = await operator.Programmer(None)(problem=problem, attempts=50)\nreturn 'ANSWER: ' + r['output']"),
     "attempts=50", 0),
    (simple("r = await operator.Test(None)(problem, 'x', 'f', 10 ** 6)\nreturn 'ANSWER: ' + str(r)"), "test_loop=", 0),
])
def test_a_workflows_counts_are_capped_and_max_calls_counts_model_calls(tmp_path, tiny_data, graph, refused, calls):
    """Through the real runner, channel and backbone double: a count argument over limits.max_count, or a batch
    whose model calls (n=3 counts 3) would pass max_calls, is refused before any of its calls starts."""
    from agentic_repro.harness.results import read_jsonl_tolerant
    from agentic_repro.harness.runner import Runner
    from tests.conftest import make_spec
    from tests.doubles import ScriptedBackbone

    method = {"name": "counts", "solver": "agentic_repro.baselines.autoflow.workflow:SandboxedWorkflow",
              "roles": ["executor"], "params": {"graph": graph, "limits": {"idle_timeout_s": 10, "max_calls": 8}}}
    spec = make_spec(tmp_path, method, limit=1)
    bb = ScriptedBackbone(lambda m, s: "ANSWER: 0", max_concurrency=4)
    metrics = asyncio.run(Runner(spec, backbone=bb).run())
    ledger = [r for r in read_jsonl_tolerant(spec.out_dir / "calls.jsonl") if "stage" in r]
    assert len(ledger) == calls == metrics["totals"]["calls"] == len(bb.requests)
    wf = read_jsonl_tolerant(spec.out_dir / "predictions.jsonl")[0]["trace"]["workflow"]
    assert not wf["ok"] and wf["failure"] == "refused" and refused in wf["detail"], wf


@pytest.mark.parametrize("method", ["aflow", "adas", "maas", "gptswarm", "mermaidflow", "judgeflow"])
def test_a_searchs_validate_runs_carry_its_per_problem_call_budget(method, tmp_path):
    """A candidate's config is the optimiser's (no max_calls_per_problem of its own): each validate run of it gets the
    search's budget (the searched method's default, or runner.budgets' when set) and records it in its config."""
    from agentic_repro.baselines.autoflow.search import SearchContext
    from agentic_repro.harness.compose import compose
    from agentic_repro.harness.runner import _budgets, spec_from_config

    for overrides, want in (([], 320), (["runner.budgets.max_calls_per_problem=11"], 11)):
        spec = spec_from_config(compose([f"method={method}", "benchmark=gsm8k", "backbone=local", *overrides]))
        sctx = SearchContext(spec, dict(spec.method_cfg["search"]), tmp_path / "search")
        inner = sctx._eval_spec({"name": "io", "label": "a candidate"}, "round_1", 0, None)
        assert "max_calls_per_problem" not in inner.method_cfg
        assert _budgets(inner)["max_calls_per_problem"] == want
        assert inner.full_config["runner"]["budgets"]["max_calls_per_problem"] == want


@pytest.mark.parametrize("method", ["aflow", "adas", "maas", "gptswarm", "mermaidflow", "judgeflow"])
def test_searched_methods_get_a_finite_per_problem_call_budget(method):
    """runner.budgets.max_calls_per_problem is null by default; a searched method's own default fills it (and the
    run's config.yaml records the method config that carries it)."""
    from agentic_repro.harness.compose import compose
    from agentic_repro.harness.runner import _budgets, spec_from_config

    spec = spec_from_config(compose([f"method={method}", "benchmark=gsm8k", "backbone=local"]))
    assert spec.runner_cfg["budgets"]["max_calls_per_problem"] is None
    assert _budgets(spec)["max_calls_per_problem"] == spec.method_cfg["max_calls_per_problem"] == 320
    io = spec_from_config(compose(["method=io", "benchmark=gsm8k", "backbone=local",
                                   "runner.budgets.max_calls_per_problem=7"]))
    assert _budgets(io)["max_calls_per_problem"] == 7


def test_waiting_for_a_runner_is_not_the_workflows_idle_time(monkeypatch: pytest.MonkeyPatch):
    """The idle clock starts when a runner took the run: with one runner busy for ~3 s, a workflow queued behind it
    (idle timeout 1 s) still answers. Counted from the request, it was killed as a hang before it ran: on a loaded
    CI machine, where pods start slowly, that turned correct workflows into failures (re-run, or scored 0)."""
    import types

    from agentic_repro.evaluators.sandbox import child, launch, run_program_async

    source = child.source().replace("MAX_RUNNERS = 64", "MAX_RUNNERS = 1")
    assert "MAX_RUNNERS = 1 " in source
    monkeypatch.setattr(launch, "runner_program", types.SimpleNamespace(source=lambda: source))
    monkeypatch.setattr(launch, "SPARE_RUNNERS", 1)
    launch._stop_fork_server()
    monkeypatch.setattr(launch, "_SERVER", None)

    async def answer(op, args):
        return {"response": args["instruction"] + "|" + args["input"] if op == "Custom" else args["solutions"][0]}

    async def main():
        busy = asyncio.ensure_future(run_program_async("import time\ntime.sleep(3)\n", timeout_s=20))
        await asyncio.sleep(0.3)  # the one runner has the sleeper
        out = await run_workflow(GATHER, 'P = "solve "', {"problem": "2+2"}, answer, Limits(idle_timeout_s=1, cpu_s=10))
        return out, await busy

    try:
        out, busy = asyncio.run(main())
    finally:
        launch._stop_fork_server()
    assert busy.passed, busy
    assert out.ok, (out.failure, out.detail)
