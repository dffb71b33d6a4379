"""The sandboxed workflow channel: a generated workflow reaches the harness only through operator requests;
whatever it does wrong is a failed workflow, never a harness crash (baselines/autoflow/channel.py)."""
from __future__ import annotations

import asyncio
import os
import time

import pytest

from baselines.autoflow.channel import Limits, OperatorCallError, OperatorRefused, run_workflow
from harness.backbone import BackboneError

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
