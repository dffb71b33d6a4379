"""AFlow's operator vocabulary (shared with MaAS, GPTSwarm and MermaidFlow here), as async calls on a problem.

Each operator is ``async def <op>(ctx, ...) -> dict`` with the released prompt and the released output keys
(AFlow ``scripts/operators.py`` + ``scripts/prompts/prompt.py`` + ``scripts/operator_an.py``, FoundationAgents/AFlow
@364399e; MaAS ``maas/ext/maas/scripts/optimized/*/train/template/{operator,op_prompt}.py``, bingreeky/MaAS). The
XML response-format suffix is MetaGPT's ``ActionNode.xml_compile`` (the version AFlow's maintainers point to, AFlow
issue #27; MaAS ships the same); ``code_fill`` takes the code out of the answer (here ``agentic_repro.evaluators.extract.
extract_code``, AFlow uses evalplus' sanitizer); ``single_fill`` is the raw text. Prompts are one user message.

Per dataset (:func:`describe`, :func:`operator_for`): AFlow and MaAS ship one template folder per dataset, and the
texts an optimiser or controller reads of an operator, and some operators' code, differ between them (AFlow's
DROP/HotpotQA ``ScEnsemble(solutions)`` votes without the question, with its own prompt; MaAS's HumanEval
operator.json describes code operators); ``prompts/operator_templates.json`` holds the released operator.json files.

Signatures follow AFlow's (``mode`` is accepted and ignored where AFlow has it). Where we differ from the released
code, on purpose (``baselines/README.md``, AFlow/MaAS rows):
- **Programmer** runs the generated ``solve()`` in the harness sandbox (``evaluators/sandbox``: separate process,
  rlimits, no network, wall-clock kill), never ``exec`` in a process pool with an import blacklist.
- **Test** runs only the benchmark's *visible* tests (``ctx.benchmark.run_public_tests``: the tests the prompt
  shows), in the sandbox, never the scored ones; AFlow ``exec``s its public-test file in ``globals()``.
- A letter an ensemble cannot map (AFlow: ``KeyError`` -> the whole problem retried, then scored 0) falls back to
  the first candidate and says so in the trace (``fallback``).
- Identical prompts repeated within one problem (a workflow sampling ``custom`` three times, MultiGenerateCoT)
  get distinct sample indices, so they are distinct samples as in the released code at T=1 (our cache would
  otherwise replay one answer): :class:`Ops` counts them per (role, prompt), across stages.

:class:`Ops` binds a problem context to a role, sampling defaults and a call trace; the module functions accept
an ``Ops`` or a bare :class:`~harness.context.ProblemContext` (then one ``Ops`` per context is kept for the
context's lifetime, so the counting and the trace still hold across calls).
"""
from __future__ import annotations

import asyncio
import hashlib
import json
import random
import re
import weakref
from collections import Counter
from pathlib import Path
from typing import Any

from agentic_repro.evaluators.extract import extract_code
from agentic_repro.harness.context import ProblemContext

# ---- released prompts (AFlow scripts/prompts/prompt.py; MaAS op_prompt.py for SelfRefine / GenerateCoT) ----------

ANSWER_GENERATION_PROMPT = """
Think step by step and solve the problem.
1. In the "thought" field, explain your thinking process in detail.
2. In the "answer" field, provide the final answer concisely and clearly. The answer should be a direct response to the question, without including explanations or reasoning.
Your task: {input}
"""

FORMAT_PROMPT = """
For the question described as {problem_description},
please extract a short and concise answer contains only one word/few words from the following solution: {solution}.
Make sure there are no additional comments or explanations in your response.
"""

SC_ENSEMBLE_PROMPT = """
Given the question described as follows: {question}
Several solutions have been generated to address the given question. They are as follows:
{solutions}

Carefully evaluate these solutions and identify the answer that appears most frequently across them. This consistency in answers is crucial for determining the most reliable solution.

In the "thought" field, provide a detailed explanation of your thought process. In the "solution_letter" field, output only the single letter ID (A, B, C, etc.) corresponding to the most consistent solution. Do not include any additional text or explanation in the "solution_letter" field.
"""

# AFlow workspace/{DROP,HotpotQA}/workflows/template/op_prompt.py: the QA datasets' own ensemble, without the question
SC_ENSEMBLE_QA_PROMPT = """
Several answers have been generated to a same question. They are as follows:
{solutions}

Identify the concise answer that appears most frequently across them. This consistency in answers is crucial for determining the most reliable solution.

In the "thought" field, provide a detailed explanation of your thought process. In the "solution_letter" field, output only the single letter ID (A, B, C, etc.) corresponding to the most consistent solution. Do not include any additional text or explanation in the "solution_letter" field.
"""

PYTHON_CODE_VERIFIER_PROMPT = """
You are a professional Python programmer. Your task is to write complete, self-contained code based on a given mathematical problem and output the answer. The code should include all necessary imports and dependencies, and be ready to run without additional setup or environment configuration.

Problem description: {problem}
Other analysis: {analysis}
{feedback}

Your code should:
1. Implement the calculation steps described in the problem.
2. Define a function named `solve` that performs the calculation and returns the result. The `solve` function should not require any input parameters; instead, it should obtain all necessary inputs from within the function or from globally defined variables.
3. `solve` function return the final calculation result.

Please ensure your code is efficient, well-commented, and follows Python best practices. The output should be limited to basic data types such as strings, integers, and floats. It is prohibited to transmit images or other file formats. The code output is intended for a text-based language model.
"""

REFLECTION_ON_PUBLIC_TEST_PROMPT = """
Given a code problem and a python code solution which failed to pass test or execute, you need to analyze the reason for the failure and propose a better code solution.: 
### problem
{problem}

### Code Solution
{solution}

### Execution Result
{exec_pass}

#### Failed Test Case
{test_fail}

Please provide a reflection on the failed test cases and code solution, followed by a better code solution without any additional text or test cases.
"""

MD_ENSEMBLE_PROMPT = """
Given the question described as follows: {question}
Several solutions have been generated to address the given question. They are as follows:
{solutions}

Carefully evaluate these solutions and identify the solution that is more capable of solving the problem compared to other solutions, as this is crucial for problem-solving.

In the "thought" field, provide a detailed explanation of your thought process. In the "solution_letter" field, output only the single letter ID (A, B, C, etc.) corresponding to the solution. Do not include any additional text or explanation in the "solution_letter" field.
"""

REVIEW_PROMPT = """
Given a problem and a thoughtful solution, your task is to using critical thinking (questioning) to review the solution's correctness and provide a review result in boolean format.

problem: {problem}
solution: {solution}

If you are more than 95 percent confident that the final answer is incorrect, please return False and give a feedback for the error. Otherwise, please return True and give a explanation for the correctness.
"""

REVISE_PROMPT = """
Given a problem and a thoughtful solution which is just reviewed as incorrect, your task is to revise the solution to solve the question and ensure the final code solution is wrapped with ```python```.

problem: {problem}
solution: {solution}
feedback: {feedback}

Ensure the output code is self-contained, and without any additional text or test cases.
"""

# MaAS (op_prompt.py, identical for GSM8K / MATH / HumanEval)
SELFREFINE_PROMPT = """
You are an assistant specialized in refining solutions to problems.

Problem:
{problem}

Solution:
{solution}

Instruction:
Analyze the above solution for any errors or suboptimal aspects. Make iterative improvements to enhance its correctness and efficiency. Provide the refined solution below.
"""

# MaAS MATH/GSM8K op_prompt.py (HumanEval's GenerateCoT is instruction + problem, code_fill)
GENERATE_COT_PROMPT = """
Mathematical Reasoning Instruction
{instruction}

Current Problem:
{input}

Demonstration Examples (GSM8K/MATH style):

1. Problem: Find all real solutions to $x^4 - 3x^2 - 4 = 0$
   Analysis: 
   Let $y = x^2$, transforming to quadratic equation:  
   $y^2 - 3y - 4 = 0$  
   Factorization: $(y-4)(y+1)=0$ → $y=4$ or $y=-1$  
   Since $y=x^2 \\geq 0$, discard $y=-1$  
   Solve $x^2=4$ → $x=\\pm 2$  
   \\boxed{{-2}}, \\boxed{{2}}

2. Problem: Cone with height 12cm, radius 6cm. Find volume.
   Analysis:
   Volume formula: $V = \\frac{{1}}{{3}}\\pi r^2 h$  
   Substitute values: $V = \\frac{{1}}{{3}}\\pi(6)^2(12)$  
   Calculate: $6^2=36$ → $36\\times12=432$  
   Final volume: $\\frac{{432}}{{3}}\\pi = 144\\pi$  
   \\boxed{{144\\pi}}


Solution Protocol:
1. Parse problem statement carefully
2. Identify relevant mathematical concepts
3. Perform stepwise symbolic derivation
4. Verify intermediate results
5. Present final answer in boxed notation

"""

# MetaGPT ActionNode.xml_compile: the suffix an xml_fill prompt gets
XML_FORMAT_SUFFIX = ("\n### Response format (must be strictly followed): All content must be enclosed in the given XML "
                     "tags, ensuring each opening <tag> has a corresponding closing </tag>, with no incomplete or "
                     "self-closing tags allowed.\n\n{example}\n")

# operator descriptions and interfaces (AFlow workspace/*/workflows/template/operator.json, MaAS operator.json):
# MaAS embeds "<id>. <name>: <description>, with interface <interface>." with MiniLM for its controller.
DESCRIPTIONS: dict[str, dict[str, str]] = {
    "Custom": {"description": "Generates anything based on customized input and instruction.",
               "interface": "custom(input: str, instruction: str) -> dict with key 'response' of type str"},
    "Generate": {"description": "Generates anything based on customized input and instruction.",
                 "interface": "generate(input: str, instruction: str) -> dict with key 'response' of type str"},
    "GenerateCoT": {"description": "Generates anything using a chain-of-thought approach, providing step-by-step "
                                   "reasoning before producing the final solution.If you need to solve mathematical "
                                   "or difficult reasoning problems, you can use this operator.",
                    "interface": "generate_cot(input: str, instruction: str) -> dict with key 'response' of type str"},
    "MultiGenerateCoT": {"description": "Generates multiple solutions using diverse chain-of-thought reasoning "
                                        "processes to increase solution variety and robustness.",
                         "interface": "multi_generate_cot(input: str, instruction: str) -> dict with key 'response' "
                                      "of type List[str]"},
    "AnswerGenerate": {"description": "Generate step by step based on the input. The step by step thought process is "
                                      "in the field of 'thought', and the final answer is in the field of 'answer'.",
                       "interface": "answer_generate(input: str) -> dict with key 'thought' of type str, 'answer' of "
                                    "type str"},
    "CustomCodeGenerate": {"description": "Generates code based on customized input and instruction.",
                           "interface": "custom_code_generate(problem: str, entry_point: str, instruction: str) -> "
                                        "dict with key 'response' of type str"},
    "ScEnsemble": {"description": "Uses self-consistency to select the solution that appears most frequently in the "
                                  "solution list, improve the selection to enhance the choice of the best solution.",
                   "interface": "sc_ensemble(solutions: List[str], problem: str) -> dict with key 'response' of type "
                                "str"},
    "Programmer": {"description": "Automatically writes, executes Python code, and returns the solution based on the "
                                  "provided problem description and analysis. The `output` only contains the final "
                                  "answer. If you want to see the detailed solution process, it's recommended to "
                                  "retrieve the `code`.",
                   "interface": "programmer(problem: str, analysis: str = 'None') -> dict with keys 'code' and "
                                "'output' of type str"},
    # every released operator.json with Test (AFlow HumanEval/MBPP, MaAS HumanEval, MermaidFlow) says this; the
    # text we had before came from Test.__call__'s docstring, which no optimiser or controller ever read
    "Test": {"description": "Tests the solution using public test cases. If the solution fails, it reflects on the "
                            "errors and attempts to modify the solution. Returns True and the solution if all tests "
                            "pass after modifications. Returns False and the current solution if it still fails "
                            "after modifications.",
             "interface": "test(problem: str, solution: str, entry_point: str) -> dict with key 'result' of type "
                          "bool and key 'solution' of type str"},
    "Review": {"description": "Review the solution's correctness and give feedback.",
               "interface": "review(problem: str, solution: str) -> dict with key 'review_result' of type bool and "
                            "'feedback' of type str"},
    "Revise": {"description": "Revise the solution based on the review feedback.",
               "interface": "revise(problem: str, solution: str, feedback: str) -> dict with key 'solution' of type "
                            "str"},
    "Format": {"description": "Extract a short and concise final answer from a solution.",
               "interface": "format(problem: str, solution: str) -> dict with key 'solution' of type str"},
    "MdEnsemble": {"description": "Uses majority voting over several shuffled rounds to select the best solution.",
                   "interface": "md_ensemble(solutions: List[str], problem: str) -> dict with key 'solution' of type "
                                "str"},
    "SelfRefine": {"description": "Refines the generated solution by analyzing errors or suboptimal aspects and "
                                  "making iterative improvements to enhance correctness and efficiency.",
                   "interface": "self_refine(problem: str, solution: str) -> dict with key 'response' of type str"},
    "EarlyStop": {"description": "This issue has been correctly and effectively resolved. In order to prevent further "
                                 "activation of operators from wasting resources, we will immediately stop answering "
                                 "this question.Immediately terminates the workflow when selected, preventing any "
                                 "further operators from being invoked.",
                  "interface": "early_stop() -> dict with key 'terminate' of type bool"},
}


class Ops:
    """One problem's operator context: the role the operators call, their sampling defaults, a per-(stage,
    prompt) sample counter and the trace of every operator call (JSON-serialisable, for ``Solution.trace``)."""

    def __init__(self, ctx: ProblemContext, *, role: str | None = None, stage_prefix: str = "", programmer_timeout_s: float = 30.0,
                 max_chars: int = 400, **sampling: Any) -> None:
        self.ctx = ctx
        self.role = role
        self.stage_prefix = stage_prefix
        self.sampling = {k: v for k, v in sampling.items() if v is not None}
        self.programmer_timeout_s = programmer_timeout_s
        self.max_chars = max_chars
        self._seen: Counter[str] = Counter()
        self.trace: list[dict[str, Any]] = []

    @classmethod
    def of(cls, ctx: OpsContext) -> Ops:
        if isinstance(ctx, Ops):
            return ctx
        ops = _DEFAULT_OPS.get(ctx)
        if ops is None:
            ops = _DEFAULT_OPS[ctx] = cls(ctx)
        return ops

    def _offset(self, stage: str, prompt: str) -> int:
        """The next sample index of ``prompt`` in this problem, whatever the stage (the cache key has no stage:
        GenerateCoT and MultiGenerateCoT on one prompt must not share a sample)."""
        key = f"{self.role}\0" + hashlib.sha256(prompt.encode("utf-8")).hexdigest()
        i = self._seen[key]
        self._seen[key] += 1
        return i

    async def ask(self, prompt: str, *, stage: str, **sampling: Any) -> str:
        """One completion of ``prompt`` (one user message) at this context's role and sampling."""
        stage = self.stage_prefix + stage
        kw = {**self.sampling, **{k: v for k, v in sampling.items() if v is not None}}
        out = await self.ctx.generate([{"role": "user", "content": prompt}], stage=stage, role=self.role,
                                      sample_offset=self._offset(stage, prompt), **kw)
        return out[0].text

    def record(self, op: str, **fields: Any) -> None:
        def short(v: Any) -> Any:
            if isinstance(v, str):
                return v if len(v) <= self.max_chars else v[: self.max_chars - 3] + "..."
            if isinstance(v, (list, tuple)):
                return [short(x) for x in v]
            if isinstance(v, dict):
                return {k: short(x) for k, x in v.items()}
            return v
        self.trace.append({"op": op, **{k: short(v) for k, v in fields.items()}})

    @property
    def rng(self) -> random.Random:
        return self.ctx.rng


#: what an operator takes: a method's ProblemContext (its Ops kept per context) or an Ops it built itself
OpsContext = ProblemContext | Ops

# one Ops per bare ProblemContext, for the context's lifetime only (weak keys: it dies with the context)
_DEFAULT_OPS: weakref.WeakKeyDictionary[ProblemContext, Ops] = weakref.WeakKeyDictionary()


# ---- response parsing (the fill modes) ------------------------------------------------------------------------

def xml_prompt(prompt: str, fields: list[str]) -> str:
    """``prompt`` with MetaGPT's XML response-format suffix for ``fields``."""
    return prompt + XML_FORMAT_SUFFIX.format(example="\n".join(f"<{f}>content</{f}>" for f in fields))


def parse_xml(text: str, fields: dict[str, type]) -> dict[str, Any]:
    """MetaGPT ``xml_fill``: the first ``<f>...</f>`` of each field; bool fields read true/yes/1/on; a missing
    field is absent (the caller decides)."""
    out: dict[str, Any] = {}
    for name, typ in fields.items():
        m = re.search(rf"<{name}>(.*?)</{name}>", text or "", re.DOTALL)
        if not m:
            continue
        raw = m.group(1).strip()
        out[name] = raw.lower() in ("true", "yes", "1", "on") if typ is bool else raw
    return out


def code_fill(text: str, entry_point: str | None = None) -> str:
    """The program in an answer (``code_fill``)."""
    return extract_code(text or "", entry_point)[0]


def letter_index(letter: str, n: int) -> int | None:
    """Index of the solution letter ('A' -> 0) or None when it names no candidate."""
    m = re.search(r"[A-Za-z]", (letter or "").strip())
    if not m:
        return None
    i = ord(m.group(0).upper()) - 65
    return i if 0 <= i < n else None


def lettered(solutions: list[str]) -> str:
    return "".join(f"{chr(65 + i)}: \n{s}\n\n\n" for i, s in enumerate(solutions))


# ---- the operators -------------------------------------------------------------------------------------------

async def custom(ctx: OpsContext, input: str, instruction: str, *, stage: str = "Custom") -> dict[str, Any]:
    """AFlow Custom / MaAS Generate: ``instruction + input``, the raw answer as ``response``."""
    ops = Ops.of(ctx)
    text = await ops.ask(instruction + input, stage=stage)
    ops.record("Custom", instruction=instruction, response=text)
    return {"response": text}


generate = custom


async def answer_generate(ctx: OpsContext, input: str, *, stage: str = "AnswerGenerate") -> dict[str, Any]:
    """AFlow AnswerGenerate: XML ``thought`` and ``answer`` (a missing tag gives ''; ``raw`` keeps the text)."""
    ops = Ops.of(ctx)
    text = await ops.ask(xml_prompt(ANSWER_GENERATION_PROMPT.format(input=input), ["thought", "answer"]), stage=stage)
    got = parse_xml(text, {"thought": str, "answer": str})
    out = {"thought": got.get("thought", ""), "answer": got.get("answer", ""), "raw": text}
    ops.record("AnswerGenerate", answer=out["answer"], parsed="answer" in got)
    return out


async def custom_code_generate(ctx: OpsContext, problem: str, entry_point: str, instruction: str, *,
                               stage: str = "CustomCodeGenerate") -> dict[str, Any]:
    """AFlow CustomCodeGenerate: ``instruction + problem``, the program (code_fill for ``entry_point``)."""
    ops = Ops.of(ctx)
    text = await ops.ask(instruction + problem, stage=stage)
    code = code_fill(text, entry_point)
    ops.record("CustomCodeGenerate", instruction=instruction, code=code)
    return {"response": code, "raw": text}


async def generate_cot(ctx: OpsContext, input: str, instruction: str, *, stage: str = "GenerateCoT") -> dict[str, Any]:
    """MaAS GenerateCoT: math/QA: the CoT template with two demonstrations; code: ``instruction + input``
    with code_fill (MaAS HumanEval)."""
    ops = Ops.of(ctx)
    if ctx_domain(ops) == "code":
        entry = ops.ctx.problem.fields.get("entry_point")
        text = await ops.ask(instruction + input, stage=stage)
        resp = code_fill(text, entry)
    else:
        resp = await ops.ask(GENERATE_COT_PROMPT.format(instruction=instruction, input=input), stage=stage)
    ops.record("GenerateCoT", response=resp)
    return {"response": resp}


async def multi_generate_cot(ctx: OpsContext, input: str, instruction: str, *, n: int = 3,
                             stage: str = "MultiGenerateCoT") -> dict[str, Any]:
    """MaAS MultiGenerateCoT: three GenerateCoT samples (distinct sample indices)."""
    outs = await asyncio.gather(*[generate_cot(ctx, input, instruction, stage=stage) for _ in range(n)])
    return {"response": [o["response"] for o in outs]}


async def sc_ensemble(ctx: OpsContext, solutions: list[str], problem: str, *, stage: str = "ScEnsemble",
                      prompt: str = SC_ENSEMBLE_PROMPT) -> dict[str, Any]:
    """AFlow ScEnsemble (universal self-consistency): lettered candidates, the LLM names the most consistent."""
    ops = Ops.of(ctx)
    sols = [str(s) for s in solutions]
    if not sols:
        raise ValueError("ScEnsemble needs at least one solution")
    fmt = prompt.replace("{problem}", "{question}")   # MaAS names the field {problem}
    text = await ops.ask(xml_prompt(fmt.format(question=problem, solutions=lettered(sols)),
                                    ["thought", "solution_letter"]), stage=stage)
    letter = parse_xml(text, {"solution_letter": str}).get("solution_letter", "")
    i = letter_index(letter, len(sols))
    ops.record("ScEnsemble", n=len(sols), letter=letter, chosen=i, fallback=i is None)
    return {"response": sols[0 if i is None else i], "index": 0 if i is None else i, "fallback": i is None}


async def sc_ensemble_qa(ctx: OpsContext, solutions: list[str], *, stage: str = "ScEnsemble") -> dict[str, Any]:
    """AFlow's DROP/HotpotQA ScEnsemble: the same vote without the question (``sc_ensemble(solutions)``; a
    ``problem`` argument is a TypeError in the release, an operator error here)."""
    return await sc_ensemble(ctx, solutions, "", stage=stage, prompt=SC_ENSEMBLE_QA_PROMPT)


async def md_ensemble(ctx: OpsContext, solutions: list[str], problem: str, mode: str | None = None, *, vote_count: int = 5,
                      stage: str = "MdEnsemble") -> dict[str, Any]:
    """AFlow MdEnsemble (Medprompt): ``vote_count`` rounds over shuffled candidates, majority of the picks."""
    ops = Ops.of(ctx)
    sols = [str(s) for s in solutions]
    if not sols:
        raise ValueError("MdEnsemble needs at least one solution")
    picks: list[int] = []
    for _ in range(vote_count):
        order = list(range(len(sols)))
        ops.rng.shuffle(order)
        text = await ops.ask(xml_prompt(MD_ENSEMBLE_PROMPT.format(question=problem,
                                                                  solutions=lettered([sols[j] for j in order])),
                                        ["thought", "solution_letter"]), stage=stage)
        i = letter_index(parse_xml(text, {"solution_letter": str}).get("solution_letter", "A"), len(sols))
        if i is not None:
            picks.append(order[i])
    best = Counter(picks).most_common(1)[0][0] if picks else 0
    ops.record("MdEnsemble", n=len(sols), picks=picks, chosen=best, fallback=not picks)
    return {"solution": sols[best], "index": best, "fallback": not picks}


def _solve_program(code: str, marker: str) -> str:
    """The generated code followed by a call of ``solve()`` whose result is printed after ``marker``."""
    return (f"{code}\n\n"
            "if 'solve' not in globals() or not callable(globals()['solve']):\n"
            "    raise NameError(\"Function 'solve' not found\")\n"
            f"print({marker!r} + repr(str(solve())))\n")


SOLVE_MARKER = "<<SOLVE-RESULT>>"


async def run_solve(code: str, *, timeout_s: float = 30.0, memory_mb: int = 1024) -> tuple[str, str]:
    """Run ``code``'s ``solve()`` in the sandbox: ("Success", str(result)) or ("Error", reason). The result is
    what the program printed last after the marker (information for the method, not a verdict)."""
    from agentic_repro.evaluators.sandbox import SandboxFailure, run_program_async

    res = await run_program_async(_solve_program(code, SOLVE_MARKER), timeout_s=timeout_s, memory_mb=memory_mb)
    if res.infrastructure:  # the sandbox failed, not the code: an error for the problem, never "Error" to the workflow
        raise SandboxFailure(res.detail)
    out = res.stdout_tail
    k = out.rfind(SOLVE_MARKER)
    if res.passed and k >= 0:
        line = (out[k + len(SOLVE_MARKER):].splitlines() or [""])[0]
        try:
            import ast
            return "Success", str(ast.literal_eval(line))
        except (ValueError, SyntaxError):
            return "Success", line
    if res.status == "timeout":
        return "Error", "Code execution timed out"
    err = (res.stderr_tail or res.detail or res.status).strip()
    return "Error", f"Execution error: {err[-1500:]}"


async def programmer(ctx: OpsContext, problem: str, analysis: str = "None", *, attempts: int = 3,
                     stage: str = "Programmer") -> dict[str, Any]:
    """AFlow Programmer: write ``solve()``, run it (sandbox), up to ``attempts`` tries with the error fed back."""
    ops = Ops.of(ctx)
    code, output, feedback = "", "", ""
    tries: list[dict[str, Any]] = []
    for i in range(attempts):
        text = await ops.ask(PYTHON_CODE_VERIFIER_PROMPT.format(problem=problem, analysis=analysis, feedback=feedback),
                             stage=stage)
        code = code_fill(text, "solve")
        if not code.strip():
            ops.record("Programmer", tries=tries, output="No code generated")
            return {"code": code, "output": "No code generated"}
        status, output = await run_solve(code, timeout_s=ops.programmer_timeout_s)
        tries.append({"status": status, "output": output})
        if status == "Success":
            break
        feedback = (f"\nThe result of the error from the code you wrote in the previous round:\n"
                    f"Code: {code}\n\nStatus: {status}, {output}")
    ops.record("Programmer", tries=tries, code=code, output=output)
    return {"code": code, "output": output}


async def _visible_tests(ops: Ops, solution: str) -> dict[str, Any] | None:
    if ctx_domain(ops) != "code":
        return None
    code = code_fill(solution, ops.ctx.problem.fields.get("entry_point"))
    return await ops.ctx.benchmark.run_public_tests(f"```python\n{code}\n```", ops.ctx.problem)


async def test(ctx: OpsContext, problem: str, solution: str, entry_point: str, test_loop: int = 3, *,
               stage: str = "Test") -> dict[str, Any]:
    """AFlow Test: run the *visible* tests; on failure reflect and rewrite, ``test_loop`` times; then a last
    check. No visible tests (or not a code task): ``result`` True with the solution unchanged, as AFlow's
    empty test list gives."""
    ops = Ops.of(ctx)
    history: list[dict[str, Any]] = []
    for _ in range(test_loop):
        res = await _visible_tests(ops, solution)
        if res is None or res["passed"] == res["total"]:
            history.append({"passed": None if res is None else res["passed"], "total": None if res is None else res["total"]})
            ops.record("Test", history=history, result=True)
            return {"result": True, "solution": solution}
        failed = [r for r in res["results"] if not r["passed"]]
        history.append({"passed": res["passed"], "total": res["total"]})
        load_errors = [r for r in failed if r.get("status") == "error"]
        if load_errors:
            exec_pass = f"executed unsuccessfully, error: \n {load_errors[0].get('error', '').strip()}"
            test_fail = "executed unsucessfully"
        else:
            exec_pass = "executed successfully"
            test_fail = json.dumps([{"test_fail_case": {"test_case": r["test"], "error_type": r.get("status"),
                                                        "error_message": (r.get("error") or "").strip()[-300:]}}
                                    for r in failed], ensure_ascii=False)
        text = await ops.ask(REFLECTION_ON_PUBLIC_TEST_PROMPT.format(problem=problem, solution=solution,
                                                                    exec_pass=exec_pass, test_fail=test_fail),
                             stage=stage)
        solution = code_fill(text, entry_point)
    res = await _visible_tests(ops, solution)
    ok = res is None or res["passed"] == res["total"]
    history.append({"passed": None if res is None else res["passed"], "total": None if res is None else res["total"]})
    ops.record("Test", history=history, result=ok)
    return {"result": ok, "solution": solution}


async def review(ctx: OpsContext, problem: str, solution: str, mode: str | None = None, *,
                 stage: str = "Review") -> dict[str, Any]:
    """AFlow Review: XML ``review_result`` (bool; a missing tag reads False, MetaGPT's default) and ``feedback``."""
    ops = Ops.of(ctx)
    text = await ops.ask(xml_prompt(REVIEW_PROMPT.format(problem=problem, solution=solution),
                                    ["review_result", "feedback"]), stage=stage)
    got = parse_xml(text, {"review_result": bool, "feedback": str})
    out = {"review_result": bool(got.get("review_result", False)), "feedback": got.get("feedback", "")}
    ops.record("Review", **out)
    return out


async def revise(ctx: OpsContext, problem: str, solution: str, feedback: str, mode: str | None = None, *,
                 stage: str = "Revise") -> dict[str, Any]:
    """AFlow Revise: XML ``solution`` (a missing tag keeps the raw text)."""
    ops = Ops.of(ctx)
    text = await ops.ask(xml_prompt(REVISE_PROMPT.format(problem=problem, solution=solution, feedback=feedback),
                                    ["solution"]), stage=stage)
    got = parse_xml(text, {"solution": str})
    out = {"solution": got.get("solution", text)}
    ops.record("Revise", solution=out["solution"], parsed="solution" in got)
    return out


async def format_answer(ctx: OpsContext, problem: str, solution: str, mode: str | None = None, *,
                        stage: str = "Format") -> dict[str, Any]:
    """AFlow Format: a short answer extracted from ``solution`` (single_fill -> ``solution``)."""
    ops = Ops.of(ctx)
    text = await ops.ask(FORMAT_PROMPT.format(problem_description=problem, solution=solution), stage=stage)
    ops.record("Format", solution=text)
    return {"solution": text}


format = format_answer  # AFlow's name for the operator


async def self_refine(ctx: OpsContext, problem: str, solution: str, *, stage: str = "SelfRefine") -> dict[str, Any]:
    """MaAS SelfRefine: one refinement of ``solution``; single_fill (the raw text) on math/QA as MaAS's GSM8K and
    MATH templates, code_fill (the program) on code as its HumanEval template (``operator.py`` SelfRefine)."""
    ops = Ops.of(ctx)
    text = await ops.ask(SELFREFINE_PROMPT.format(problem=problem, solution=solution), stage=stage)
    if ctx_domain(ops) == "code":
        text = code_fill(text, ops.ctx.problem.fields.get("entry_point"))
    ops.record("SelfRefine", response=text)
    return {"response": text}


async def early_stop(ctx: OpsContext) -> dict[str, Any]:
    """MaAS EarlyStop: no call; tells the workflow to stop activating operators."""
    Ops.of(ctx).record("EarlyStop")
    return {"terminate": True}


def ctx_domain(ops: Ops) -> str:
    bench = getattr(ops.ctx, "benchmark", None)
    return getattr(bench, "domain", "") or ""


# name -> function, in AFlow's spelling (the search machinery's workflows call these by name)
#: The count arguments a workflow may pass (the operator's own default): each is capped by the channel's
#: ``Limits.max_count`` and costs that many model calls against ``Limits.max_calls`` (issue 28: one
#: ``MultiGenerateCoT(n=20000)`` request made 20,000 calls against max_calls=64).
COUNT_ARGS: dict[str, tuple[str, int]] = {"MultiGenerateCoT": ("n", 3), "Programmer": ("attempts", 3),
                                          "Test": ("test_loop", 3), "MdEnsemble": ("vote_count", 5)}


def model_calls(op: str, args: dict[str, Any], max_count: int) -> int:
    """The model calls one request may make (at most), after checking its count argument against ``max_count``."""
    arg, default = COUNT_ARGS.get(op, ("", 1))
    count = args.get(arg, default) if arg else 1
    if type(count) is not int or not 0 <= count <= max_count:
        raise ValueError(f"{op}: {arg}={count!r} is not an integer from 0 to {max_count} (limits.max_count)")
    return max(1, count)


OPERATORS: dict[str, Any] = {
    "Custom": custom, "Generate": generate, "GenerateCoT": generate_cot, "MultiGenerateCoT": multi_generate_cot,
    "AnswerGenerate": answer_generate, "CustomCodeGenerate": custom_code_generate, "ScEnsemble": sc_ensemble,
    "Programmer": programmer, "Test": test, "Review": review, "Revise": revise, "Format": format_answer,
    "MdEnsemble": md_ensemble, "SelfRefine": self_refine, "EarlyStop": early_stop,
}

# per-domain operator sets as released (AFlow run.py; MaAS experiment_configs.py; QA for MaAS: ours, see README)
AFLOW_OPERATORS = {"qa": ["Custom", "AnswerGenerate", "ScEnsemble"],
                   "math": ["Custom", "ScEnsemble", "Programmer"],
                   "code": ["Custom", "CustomCodeGenerate", "ScEnsemble", "Test"]}
MAAS_OPERATORS = {"math": ["Generate", "GenerateCoT", "MultiGenerateCoT", "ScEnsemble", "Programmer", "SelfRefine",
                           "EarlyStop"],
                  "code": ["Generate", "GenerateCoT", "MultiGenerateCoT", "ScEnsemble", "Test", "SelfRefine",
                           "EarlyStop"],
                  "qa": ["Generate", "GenerateCoT", "MultiGenerateCoT", "ScEnsemble", "SelfRefine", "EarlyStop"]}


def description_text(index: int, name: str, dataset: str | None = None, mode: str = "shared") -> str:
    """MaAS's operator text for its embedding: ``"<id>. <name>: <description>, with interface <interface>."``, from
    MaAS's template of ``dataset`` (GSM8K, MATH, HumanEval) under ``mode`` ``dataset``."""
    d = describe(name, dataset, source="maas", mode=mode)
    return f"{index}. {name}: {d['description']}, with interface {d['interface']}."


# ---- per-dataset templates (each released dataset's own operator.json and operators) ------------------------------
# AFlow and MaAS ship one template folder per dataset; what the optimiser reads of an operator (AFlow's
# <operator_description>) and what MaAS's controller embeds come from that dataset's operator.json, and a
# workflow's operators are that folder's operator.py. ``operator_templates``: ``dataset`` (the release) takes each
# dataset's own; ``shared`` (ours, earlier) takes DESCRIPTIONS and OPERATORS for every dataset.
TEMPLATES: dict[str, dict[str, dict[str, dict[str, str]]]] = {
    k: v for k, v in json.loads((Path(__file__).parent / "prompts" / "operator_templates.json")
                                .read_text(encoding="utf-8")).items() if not k.startswith("_")}
#: operators whose released code differs per dataset (AFlow DROP/HotpotQA operator.py: ScEnsemble(solutions))
DATASET_OPERATORS: dict[str, dict[str, Any]] = {"DROP": {"ScEnsemble": sc_ensemble_qa},
                                                "HotpotQA": {"ScEnsemble": sc_ensemble_qa}}
TEMPLATE_MODES = ("dataset", "shared")


def _check_mode(mode: str) -> None:
    if mode not in TEMPLATE_MODES:
        raise ValueError(f"operator_templates={mode!r}: choose dataset (each dataset's released template) or shared")


def describe(name: str, dataset: str | None = None, *, source: str = "aflow", mode: str = "dataset") -> dict[str, str]:
    """``{description, interface}`` of ``name`` as ``source``'s (aflow | maas) template of ``dataset`` writes it;
    DESCRIPTIONS where that template has no such operator (or ``mode`` is ``shared``)."""
    _check_mode(mode)
    if mode == "dataset" and dataset:
        own = TEMPLATES.get(source, {}).get(dataset, {}).get(name)
        if own:
            return {"description": own["description"], "interface": own["interface"]}
    return DESCRIPTIONS[name]


def operator_for(name: str, dataset: str | None = None, mode: str = "dataset") -> Any:
    """The operator function a workflow of ``dataset`` calls for ``name`` (its template's code)."""
    _check_mode(mode)
    if mode == "dataset" and dataset and name in DATASET_OPERATORS.get(dataset, {}):
        return DATASET_OPERATORS[dataset][name]
    return OPERATORS[name]
