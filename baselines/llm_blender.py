"""LLM-Blender (Jiang et al., 2023): PairRanker + GenFuser over N candidates.

N candidates are ranked by pairwise comparison: every ordered pair (i, j), i != j, is judged
("is candidate i better than candidate j?"), and candidates are ordered by wins over both
positions (the paper's MaxWins aggregation of the comparison matrix). The top K are fused by a
generator conditioned on the input and the K candidates. Paper defaults: K = 3; full O(N^2)
comparison matrix.

The paper ensembles N = 11 different open LLMs with a trained PairRanker (DeBERTa) and GenFuser
(Flan-T5). With one backbone, the N "systems" are N distinct (system prompt, temperature) configs
(``candidates: systems``, the default; ``SYSTEMS`` below): each candidate is one greedy or sampled
answer of a differently instructed system, so the ensemble is not CoT-SC's samples replayed from the
cache. ``candidates: samples`` is the earlier reading (one prompt sampled N times at ``temperature``).
By default the backbone itself is the pairwise judge and the fuser (``ranker: llm``, ``fuser: llm``),
so the row is labelled "LLM-Blender (backbone ranker/fuser)". Users who have the trained models can
select them (``ranker: pairrm``, ``fuser: genfuser``; needs the ``llm-blender`` package and the
checkpoints): which one ran is recorded in every trace (``ranker_used``, ``fuser_used``).
"""
from __future__ import annotations

import asyncio
import itertools
import re
from typing import Any

from agentic_repro.harness.context import ProblemContext
from agentic_repro.harness.types import Solution

from agentic_repro.baselines.common import fill, user
from agentic_repro.baselines.prompting import task_messages
from agentic_repro.harness.view import ProblemView

JUDGE_TEMPLATE = (
    "{task}\n\nTwo candidate responses to the task above follow.\n\n"
    "### Candidate A\n{a}\n\n### Candidate B\n{b}\n\n"
    "Which candidate is better (correct, complete and following the required answer format)? "
    "Think briefly, then end with a final line of the form \"Better: A\" or \"Better: B\"."
)
FUSE_TEMPLATE = (
    "{task}\n\nHere are the {k} best candidate responses, best first:{candidates}\n\n"
    "Fuse them into one final response that keeps their strengths and fixes their mistakes. {answer_instruction}"
)
# N distinct "systems" standing in for the paper's N LLMs: a system prompt and a sampling temperature each
SYSTEMS: list[dict[str, Any]] = [
    {"name": "careful-solver", "temperature": 0.0,
     "system": "You are a careful problem solver. Work through the task step by step and double-check each step."},
    {"name": "concise-expert", "temperature": 0.3,
     "system": "You are a domain expert who answers precisely and concisely, giving only the reasoning that matters."},
    {"name": "planner", "temperature": 0.5,
     "system": "You first write a short plan for the task, then carry it out, then state the result."},
    {"name": "skeptic", "temperature": 0.7,
     "system": "You are a skeptical reviewer solving the task yourself: consider alternative readings and edge "
               "cases before committing to an answer."},
    {"name": "teacher", "temperature": 1.0,
     "system": "You are a patient teacher who explains the solution as a worked example for a student."},
]
_VERDICT = re.compile(r"better\s*[:\-]?\s*\**\s*(?:candidate\s*)?([AB])\b", re.IGNORECASE)


def parse_verdict(text: str) -> str | None:
    """'A', 'B' or None from a judge's output (the last explicit verdict wins)."""
    found = _VERDICT.findall(text or "")
    if found:
        return found[-1].upper()
    tail = (text or "").strip().splitlines()[-1:] or [""]
    m = re.fullmatch(r"\W*([AB])\W*", tail[0].strip())
    return m.group(1).upper() if m else None


def _pairrm(model: str) -> Any:  # pragma: no cover - needs the optional package and checkpoint
    try:
        import llm_blender  # type: ignore[import-not-found]
    except ImportError as exc:
        raise RuntimeError("ranker: pairrm needs the llm-blender package (pip install "
                           "git+https://github.com/yuchenlin/LLM-Blender.git) and the checkpoint "
                           f"{model}; use ranker: llm to rank with the backbone") from exc
    blender = llm_blender.Blender()
    blender.loadranker(model)
    return blender


def _genfuser(model: str) -> Any:  # pragma: no cover - needs the optional package and checkpoint
    try:
        import llm_blender  # type: ignore[import-not-found]
    except ImportError as exc:
        raise RuntimeError("fuser: genfuser needs the llm-blender package and the checkpoint "
                           f"{model}; use fuser: llm to fuse with the backbone") from exc
    blender = llm_blender.Blender()
    blender.loadfuser(model)
    return blender


async def _candidates(ctx: ProblemContext, template: str, mode: str, systems: list[dict[str, Any]] | None,
                      n_candidates: int, temperature: float, system: str | None) -> tuple[list[str], list[Any]]:
    if mode == "samples":
        messages = task_messages(ctx, template, system)
        outs = await ctx.generate(messages, stage="candidate", n=n_candidates, temperature=temperature)
        return [c.text for c in outs], [messages]
    pool = list(systems or SYSTEMS)
    if n_candidates > len(pool):
        raise ValueError(f"candidates: systems needs at least n_candidates={n_candidates} systems (have {len(pool)})")
    pool = pool[:n_candidates]
    msgs = [task_messages(ctx, template, s["system"]) for s in pool]
    outs = await asyncio.gather(*(ctx.generate(m, stage="candidate", temperature=float(s.get("temperature", 0.0)))
                                  for m, s in zip(msgs, pool)))
    return [o[0].text for o in outs], [{"system": s.get("name", i), "temperature": s.get("temperature", 0.0),
                                       "messages": m} for i, (s, m) in enumerate(zip(pool, msgs))]


async def llm_blender(problem: ProblemView, ctx: ProblemContext, *, template: str, n_candidates: int = 5,
                      top_k: int = 3, temperature: float = 0.7, ranker: str = "llm", fuser: str = "llm",
                      candidates: str = "systems", systems: list[dict[str, Any]] | None = None,
                      ranker_model: str = "llm-blender/PairRM", fuser_model: str = "llm-blender/gen_fuser_3b",
                      judge_template: str = JUDGE_TEMPLATE, fuse_template: str = FUSE_TEMPLATE,
                      system: str | None = None) -> Solution:
    """Calls with ``ranker: llm, fuser: llm``: N ``candidate`` + N(N-1) ``rank`` + 1 ``fuse``.

    ``candidates``: ``systems`` (N distinct system prompts and temperatures, the default) or ``samples``
    (one prompt sampled N times at ``temperature``)."""
    if ranker not in ("llm", "pairrm") or fuser not in ("llm", "genfuser"):
        raise ValueError("ranker must be 'llm' or 'pairrm'; fuser must be 'llm' or 'genfuser'")
    if candidates not in ("systems", "samples"):
        raise ValueError("candidates must be 'systems' or 'samples'")
    cands, messages = await _candidates(ctx, template, candidates, systems, n_candidates, temperature, system)
    n = len(cands)
    k = max(1, min(top_k, n))
    task = ctx.benchmark.render(problem)

    # ---- PairRanker -------------------------------------------------------------------------
    wins = [0.0] * n
    comparisons: list[dict[str, Any]] = []
    if ranker == "llm":
        pairs = list(itertools.permutations(range(n), 2))
        judge_msgs = [user(fill(ctx, judge_template, a=cands[i], b=cands[j]), system) for i, j in pairs]
        outs = await asyncio.gather(*(ctx.generate(m, stage="rank") for m in judge_msgs))
        for (i, j), out in zip(pairs, outs):
            verdict = parse_verdict(out[0].text)
            if verdict == "A":
                wins[i] += 1
            elif verdict == "B":
                wins[j] += 1
            else:  # an unreadable verdict counts as a tie
                wins[i] += 0.5
                wins[j] += 0.5
            comparisons.append({"a": i, "b": j, "verdict": verdict, "judge": out[0].text})
        ranker_used = "backbone-judge"
    else:  # pragma: no cover - optional trained model
        blender = ctx.resource(f"llm_blender.ranker:{ranker_model}", lambda: _pairrm(ranker_model))
        ranks = await asyncio.to_thread(lambda: blender.rank([task], [cands], return_scores=False, batch_size=1))
        wins = [float(n - int(r)) for r in list(ranks[0])]  # rank 1 = best
        ranker_used = f"PairRanker:{ranker_model}"
    order = sorted(range(n), key=lambda i: (-wins[i], i))
    top = order[:k]

    # ---- GenFuser ---------------------------------------------------------------------------
    if fuser == "llm":
        shown = "".join(f"\n\n### Candidate {r}\n{cands[i]}" for r, i in enumerate(top, 1))
        fuse_msgs = user(fill(ctx, fuse_template, k=k, candidates=shown), system)
        answer = (await ctx.generate(fuse_msgs, stage="fuse"))[0].text
        fuser_used = "backbone"
    else:  # pragma: no cover - optional trained model
        blender = ctx.resource(f"llm_blender.fuser:{fuser_model}", lambda: _genfuser(fuser_model))
        fused = await asyncio.to_thread(lambda: blender.fuse([task], [[cands[i] for i in top]], batch_size=1))
        answer = fused[0]
        fuse_msgs = None
        fuser_used = f"GenFuser:{fuser_model}"
    return Solution(answer, trace={"ranker_used": ranker_used, "fuser_used": fuser_used, "candidates_from": candidates,
                                   "messages": messages,
                                   "candidates": cands, "wins": wins, "order": order, "top_k": top,
                                   "comparisons": comparisons, "fuse_messages": fuse_msgs})
