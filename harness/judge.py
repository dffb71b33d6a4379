"""LLM-judge scoring beside the deterministic scorer (interface 4; DyFlow scores MATH, LiveBench, SocialMaze this way).

A benchmark config opts in with ``judge: {enabled: true, prompt: "...{question}...{ground_truth}...{solution}...",
max_tokens, temperature}``; the judge runs only when the run configures the ``judge`` role
(``backbone@roles.judge=<config>`` or ``roles.judge.adapter=<name>``), so a plain run never pays for it.
The runner then asks the judge once per answered prediction (role ``judge``, stage ``judge`` in the
ledger), records ``judge`` (verdict, score, rule) beside the deterministic ``score``, and metrics.json
gets ``judge_score`` and ``judge_agreement`` (the fraction of judged predictions where both agree).

The verdict is the last ``[[True]]``/``[[False]]`` of the judge's reply (DyFlow's prompts ask for
exactly that). A reply with neither is *unparsed*: recorded, left out of ``judge_score`` and counted
(``n_unparsed``) — it is the judge model's answer, not an infrastructure failure. A judge call that
fails (no reply, dead server) raises, and the runner makes the problem an error: never a 0.
"""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Any, Callable

JUDGE_ROLE = "judge"
JUDGE_STAGE = "judge"
JUDGE_VERSION = "1"
_VERDICT = re.compile(r"\[\[\s*(true|false)\s*\]\]", re.IGNORECASE)


@dataclass(frozen=True)
class JudgeSpec:
    prompt: str
    max_tokens: int | None = None
    temperature: float = 0.0

    @classmethod
    def from_config(cls, cfg: dict[str, Any] | None) -> "JudgeSpec | None":
        """The benchmark's ``judge:`` block, or None when absent or ``enabled: false``."""
        if not cfg or not cfg.get("enabled", False):
            return None
        prompt = cfg.get("prompt")
        if not isinstance(prompt, str) or "{solution}" not in prompt:
            raise ValueError("benchmark.judge.prompt must be a template with a {solution} slot "
                             "(and optionally {question} / {problem} and {ground_truth})")
        mt = cfg.get("max_tokens")
        return cls(prompt=prompt, max_tokens=None if mt is None else int(mt),
                   temperature=float(cfg.get("temperature", 0.0)))

    @property
    def prompt_sha256(self) -> str:
        return hashlib.sha256(self.prompt.encode()).hexdigest()


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


async def judge_answer(llm: Any, spec: JudgeSpec, fields: dict[str, str], answer: str, *, problem_id: str,
                       seed: int, sink: Callable[[Any], None], adapter: str | None = None) -> dict[str, Any]:
    """One judge call; ``{"score": 1.0|0.0|None, "verdict": "true"|"false"|"unparsed", ...}``.

    Backbone failures propagate (the runner turns them into the problem's error)."""
    question = fields.get("question", "")
    prompt = spec.prompt.format_map({"question": question, "problem": question,
                                     "ground_truth": fields.get("ground_truth", ""), "solution": answer or ""})
    sampling: dict[str, Any] = {"temperature": spec.temperature}
    if spec.max_tokens is not None:
        sampling["max_tokens"] = spec.max_tokens
    comps = await llm.generate([{"role": "user", "content": prompt}], stage=JUDGE_STAGE, problem_id=problem_id,
                               seed=seed, sink=sink, role=JUDGE_ROLE, adapter=adapter, **sampling)
    text = comps[0].text
    verdict = parse_verdict(text)
    return {"score": None if verdict is None else float(verdict),
            "verdict": "unparsed" if verdict is None else ("true" if verdict else "false"),
            "output": text[-1500:], "version": JUDGE_VERSION, "prompt_sha256": spec.prompt_sha256}


def judge_metrics(answered: list[dict[str, Any]], threshold: float) -> dict[str, Any]:
    """``judge_score`` (mean over parsed verdicts), ``judge_agreement`` with the deterministic score
    (``score >= threshold`` counts as correct) and the counts, over answered predictions."""
    judged = [p for p in answered if isinstance(p.get("judge"), dict)]
    parsed = [p for p in judged if p["judge"].get("score") is not None]
    n = len(parsed)
    agree = sum(1 for p in parsed if (float(p["score"]) >= threshold) == (p["judge"]["score"] >= 0.5))
    return {"judge_score": sum(p["judge"]["score"] for p in parsed) / n if n else None,
            "judge_agreement": agree / n if n else None,
            "judge": {"n_judged": len(judged), "n_parsed": n, "n_unparsed": len(judged) - n,
                      "agree": agree, "correct_threshold": threshold,
                      "prompt_sha256": sorted({p["judge"].get("prompt_sha256") for p in judged} - {None})}}
