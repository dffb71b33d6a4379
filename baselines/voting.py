"""Choosing one answer among candidates: majority over extracted answers (programs included), or, as a
named option for code, the visible example tests."""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from agentic_repro.harness.context import ProblemContext


@dataclass
class Vote:
    index: int                 # the chosen candidate
    share: float               # fraction of candidates agreeing with it (a confidence)
    keys: list[Any]            # each candidate's answer key (None = no answer extracted)
    counts: dict[str, int]
    rule: str


def majority_vote(ctx: ProblemContext, texts: list[str]) -> Vote:
    """Most frequent answer key; ties go to the key seen first; unextractable answers never win
    unless every candidate is unextractable."""
    bench, problem = ctx.benchmark, ctx.problem
    keys = [bench.answer_key(bench.extract(t, problem)[0]) for t in texts]
    counts = Counter(k for k in keys if k is not None)
    if not counts:
        return Vote(0, 0.0, keys, {}, "no-extractable-answer")
    best = max(counts.values())
    winner = next(k for k in keys if k is not None and counts[k] == best)
    return Vote(keys.index(winner), best / len(texts), keys, {str(k)[:80]: v for k, v in counts.items()},
                "majority")


async def select_code(ctx: ProblemContext, texts: list[str]) -> Vote:
    """Code candidates cannot be voted on by string: rank by the number of *public* tests passed,
    then by how many candidates are the same program (AST-equal), then by sample order."""
    bench, problem = ctx.benchmark, ctx.problem
    keys = [bench.answer_key(bench.extract(t, problem)[0]) for t in texts]
    counts = Counter(k for k in keys if k is not None)
    passed: list[int] = []
    for t in texts:
        res = await bench.run_public_tests(t, problem)
        passed.append(-1 if res is None else int(res["passed"]))
    order = sorted(range(len(texts)), key=lambda i: (-passed[i], -counts.get(keys[i], 0), i))
    best = order[0]
    agree = sum(1 for i in range(len(texts)) if passed[i] == passed[best] and keys[i] == keys[best])
    rule = "public-tests" if max(passed) >= 0 else "program-majority"
    return Vote(best, agree / len(texts), keys, {"public_tests_passed": passed}, rule)  # type: ignore[dict-item]


CODE_CHOICES = ("majority", "public_tests")


def program_majority(ctx: ProblemContext, texts: list[str]) -> Vote:
    """Code by the papers' rule: majority over programs (the benchmark's answer key of code is its
    normalised AST, so equal programs vote together); ties go to the program seen first."""
    vote = majority_vote(ctx, texts)
    vote.rule = "program-majority" if vote.rule == "majority" else vote.rule
    return vote


async def choose_code(ctx: ProblemContext, texts: list[str], rule: str = "majority") -> Vote:
    """``majority`` (default: the CoT-SC / debate / DyLAN papers' rule) or ``public_tests`` (most visible
    example tests passed, then program majority: a design choice of this harness, a named option)."""
    if rule not in CODE_CHOICES:
        raise ValueError(f"code_choice must be one of {CODE_CHOICES}")
    return await select_code(ctx, texts) if rule == "public_tests" else program_majority(ctx, texts)
