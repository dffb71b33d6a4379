"""LLM-judge scoring beside the deterministic scorer (DyFlow scores MATH, LiveBench, SocialMaze this way).

:class:`JudgeScorer` is the scorer a benchmark config's ``judge:`` block names (harness/extra_scorers.py); the runner
calls it as it calls any scorer there, knowing no judge.

A benchmark config opts in with ``judge: {enabled: true, prompt: "...{question}...{ground_truth}...{solution}...",
max_tokens, temperature}``; the judge runs only when the run configures the ``judge`` role
(``backbone@roles.judge=<config>`` or ``roles.judge.adapter=<name>``), so a plain run never pays for it.
The judge is then asked once per answered prediction (role ``judge``, stage ``judge`` in the
ledger), records ``judge`` (verdict, score, rule) beside the deterministic ``score``, and metrics.json
gets ``judge_score`` and ``judge_agreement`` (the fraction of judged predictions where both agree).

The verdict is the last ``[[True]]``/``[[False]]`` of the judge's reply (DyFlow's prompts ask for
exactly that). A reply with neither is *unparsed*: recorded, left out of ``judge_score`` and counted
(``n_unparsed``) — it is the judge model's answer, not an infrastructure failure. A judge call that
fails (no reply, dead server) raises, and the runner makes the problem an error: never a 0.

``kind: benchmark`` lets the benchmark write the judge's messages and read its reply
(``judge_messages(problem, answer)``, ``judge_parse(text, problem) -> {"score": ...} | None``), e.g.
DeepResearch Bench's RACE; an unusable reply is asked again up to ``max_attempts`` times (distinct
samples). ``headline: true`` makes the judge's score the prediction's score (a benchmark with no
deterministic scorer): the run then refuses to start without the judge role, and a reply still
unusable after ``max_attempts`` is the problem's error.
"""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from agentic_repro.harness.results import pass_at_k
from agentic_repro.harness.types import Score

if TYPE_CHECKING:
    from agentic_repro.harness.context import ProblemContext, RunContext
    from agentic_repro.harness.types import Problem, Solution

JUDGE_ROLE = "judge"
JUDGE_STAGE = "judge"
JUDGE_VERSION = "1"
_VERDICT = re.compile(r"\[\[\s*(true|false)\s*\]\]", re.IGNORECASE)


class JudgeUnparsed(RuntimeError):
    """A headline judge gave no usable reply within ``max_attempts``."""


@dataclass(frozen=True)
class JudgeSpec:
    prompt: str | None
    max_tokens: int | None = None
    temperature: float = 0.0
    kind: str = "verdict"       # verdict ([[True]]/[[False]] from `prompt`) | benchmark (its own messages/parser)
    headline: bool = False      # the judge's score is the prediction's score
    max_attempts: int = 1

    @classmethod
    def from_config(cls, cfg: dict[str, Any] | None) -> JudgeSpec | None:
        """The benchmark's ``judge:`` block, or None when absent or ``enabled: false``."""
        if not cfg or not cfg.get("enabled", False):
            return None
        kind = str(cfg.get("kind", "verdict"))
        if kind not in ("verdict", "benchmark"):
            raise ValueError(f"benchmark.judge.kind={kind!r}: choose verdict or benchmark")
        prompt = cfg.get("prompt")
        if kind == "verdict" and (not isinstance(prompt, str) or "{solution}" not in prompt):
            raise ValueError("benchmark.judge.prompt must be a template with a {solution} slot "
                             "(and optionally {question} / {problem} and {ground_truth})")
        mt = cfg.get("max_tokens")
        return cls(prompt=prompt if kind == "verdict" else None, max_tokens=None if mt is None else int(mt),
                   temperature=float(cfg.get("temperature", 0.0)), kind=kind,
                   headline=bool(cfg.get("headline", False)), max_attempts=max(1, int(cfg.get("max_attempts", 1))))

    @property
    def prompt_sha256(self) -> str | None:
        return None if self.prompt is None else hashlib.sha256(self.prompt.encode()).hexdigest()


def role_configured(roles_cfg: dict[str, Any] | None) -> bool:
    """Whether the run's ``roles:`` block sets the judge role (a backbone or an adapter)."""
    node = dict((roles_cfg or {}).get(JUDGE_ROLE) or {})
    adapter = node.pop("adapter", None)
    return bool(node) or adapter is not None


def parse_verdict(text: str | None) -> bool | None:
    found = _VERDICT.findall(text or "")
    return None if not found else found[-1].lower() == "true"


def judge_fields(benchmark: Any, problem: Any) -> dict[str, str]:
    """What the judge reads of the problem: ``benchmark.judge_fields(problem)`` when it defines one,
    else the rendered task and ``str(gold)``."""
    custom = getattr(benchmark, "judge_fields", None)
    if callable(custom):
        return dict(custom(problem))
    return {"question": benchmark.render(problem), "ground_truth": str(problem.gold)}


async def judge_answer(llm: Any, spec: JudgeSpec, benchmark: Any, problem: Any, answer: str, *, seed: int,
                       sink: Callable[[Any], None], adapter: str | None = None) -> dict[str, Any]:
    """Judge one answer; ``{"score": float|None, "verdict": "true"|"false"|"scored"|"unparsed", ...}``.

    Backbone failures propagate (the runner turns them into the problem's error)."""
    sampling: dict[str, Any] = {"temperature": spec.temperature}
    if spec.max_tokens is not None:
        sampling["max_tokens"] = spec.max_tokens
    if spec.kind == "benchmark":
        messages = benchmark.judge_messages(problem, answer)
    else:
        fields = judge_fields(benchmark, problem)
        question = fields.get("question", "")
        messages = [{"role": "user", "content": spec.prompt.format_map(  # type: ignore[union-attr]
            {"question": question, "problem": question, "ground_truth": fields.get("ground_truth", ""),
             "solution": answer or ""})}]
    text = ""
    rejected: list[str] = []   # why each reply asked again was unusable (``benchmark.judge_unusable``)
    for attempt in range(spec.max_attempts):
        comps = await llm.generate(messages, stage=JUDGE_STAGE, problem_id=problem.id, seed=seed, sink=sink,
                                   role=JUDGE_ROLE, adapter=adapter, sample_offset=attempt, **sampling)
        text = comps[0].text
        base = {"output": text[-1500:], "version": JUDGE_VERSION, "prompt_sha256": spec.prompt_sha256,
                "attempts": attempt + 1, "rejected": list(rejected)}
        if spec.kind == "benchmark":
            parsed = benchmark.judge_parse(text, problem)
            if parsed is not None:
                return {**base, **parsed, "verdict": "scored", "score": float(parsed["score"])}
            why = getattr(benchmark, "judge_unusable", None)
            rejected.append((why(text, problem) if why else None) or "unparsed")
        else:
            verdict = parse_verdict(text)
            if verdict is not None:
                return {**base, "score": float(verdict), "verdict": "true" if verdict else "false"}
            rejected.append("unparsed")
    return {"output": text[-1500:], "version": JUDGE_VERSION, "prompt_sha256": spec.prompt_sha256,
            "attempts": spec.max_attempts, "rejected": rejected, "score": None, "verdict": "unparsed"}


def reasks_of(judged: list[dict[str, Any]]) -> dict[str, Any]:
    """The judge replies asked again over ``judged`` records: ``reasks`` (in all) and ``rejected`` (by why)."""
    by_why: dict[str, int] = {}
    for j in judged:
        for why in j.get("rejected") or []:
            by_why[why] = by_why.get(why, 0) + 1
    return {"reasks": sum(by_why.values()), "rejected": dict(sorted(by_why.items()))}


def judge_metrics(answered: list[dict[str, Any]], threshold: float) -> dict[str, Any]:
    """``judge_score`` (mean over parsed verdicts), ``judge_agreement`` with the deterministic score
    (``score >= threshold`` counts as correct) and the counts, over answered predictions."""
    judged = [p for p in answered if isinstance(p.get("judge"), dict)]
    parsed = [p for p in judged if p["judge"].get("score") is not None]
    n = len(parsed)
    agree = sum(1 for p in parsed if (float(p["score"]) >= threshold) == (p["judge"]["score"] >= 0.5))
    dims: dict[str, list[float]] = {}
    for p in parsed:  # RACE-style judges: the mean per dimension too
        for dim, v in ((p["judge"].get("race") or {}).get("dims") or {}).items():
            dims.setdefault(dim, []).append(float(v["relative"]))
    extra = {"dimensions": {d: sum(v) / len(v) for d, v in dims.items()}} if dims else {}
    return {"judge_score": sum(p["judge"]["score"] for p in parsed) / n if n else None,
            "judge_agreement": agree / n if n else None,
            "judge": {"n_judged": len(judged), "n_parsed": n, "n_unparsed": len(judged) - n,
                      **reasks_of([p["judge"] for p in judged]),
                      "agree": agree, "correct_threshold": threshold,
                      "prompt_sha256": sorted({p["judge"].get("prompt_sha256") for p in judged} - {None}), **extra}}


@dataclass(frozen=True)
class JudgeScorer:
    """The LLM judge as a scorer (harness/extra_scorers.py): records ``judge`` beside the prediction, its numbers in
    metrics.json; when ``headline``, its score is the prediction's. A failed call, or a headline reply still
    unusable after ``max_attempts``, raises: the problem's error (``JudgeError: ...``), never a 0."""

    spec: JudgeSpec
    key: str = "judge"
    role: str | None = JUDGE_ROLE
    error_label: str = "JudgeError"

    @classmethod
    def from_config(cls, cfg: dict[str, Any] | None, *, benchmark: str,
                    roles_cfg: dict[str, Any]) -> JudgeScorer | None:
        """None unless the block is enabled and the run configures the judge role; a headline judge without
        the role refuses the run (its predictions would have no score)."""
        spec = JudgeSpec.from_config(cfg)
        if spec is None:
            return None
        if not role_configured(roles_cfg):
            if spec.headline:
                raise ValueError(f"benchmark {benchmark} is scored by an LLM judge only: set the "
                                 "judge role, e.g. backbone@roles.judge=gpt-4o-mini (docs: harness/judge.py)")
            return None
        return cls(spec)

    def stand_in(self, benchmark: Any, answer: str, problem: Problem) -> Score | None:
        if not self.spec.headline:
            return None
        _, rule = benchmark.extract(answer, problem)
        return Score(0.0, None, {"rule": rule, "scored_by": "judge"})

    async def score(self, ctx: RunContext, pctx: ProblemContext, benchmark: Any, problem: Problem,
                    solution: Solution, value: float, record: dict[str, Any]) -> float:
        judged = await judge_answer(ctx.llms[JUDGE_ROLE], self.spec, benchmark, problem, solution.answer,
                                    seed=ctx.seed, sink=pctx.calls.append, adapter=ctx.adapters.get(JUDGE_ROLE))
        record[self.key] = judged
        if not self.spec.headline:
            return value
        if judged["score"] is None:
            why = ", ".join(f"{k} x{v}" for k, v in reasks_of([judged])["rejected"].items())
            raise JudgeUnparsed(f"no usable judge reply in {self.spec.max_attempts} attempt(s) ({why}): "
                                f"{judged['output'][-200:]!r}")
        return judged["score"]

    def add_metrics(self, metrics: dict[str, Any], answered: list[dict[str, Any]], latest: list[dict[str, Any]],
                    samples_per_task: int, threshold: float) -> None:
        metrics.update(judge_metrics(answered, threshold))
        # replies asked again, errored problems' too (a judge unusable 10 times is the problem's error)
        metrics["judge"].update(reasks_of([r["judge"] for r in latest if isinstance(r.get("judge"), dict)]))
        metrics["judge"]["by_role"] = metrics["by_role"].get(JUDGE_ROLE)
        if samples_per_task > 1:
            judged = [{**r, "score": r["judge"]["score"]} for r in answered
                      if isinstance(r.get("judge"), dict) and r["judge"].get("score") is not None]
            metrics["judge"]["pass_at_k"] = pass_at_k(judged, samples_per_task, 0.5)["pass_at_k"]
