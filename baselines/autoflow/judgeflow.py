"""JudgeFlow (Ma et al., 2026, arXiv 2601.07477): Evaluation → Judge → Optimization → Update over logic blocks.

What the paper states (abstract and method overview, read through public summaries; the authors' repo
ma-zihan/JudgeFlow and the full text were not reachable here): workflows are ordered logic blocks (``seq``,
``for``, ``cond``; :mod:`agentic_repro.baselines.autoflow.blocks`); the workflow is evaluated; a Judge inspects the
execution traces of *failed* runs and assigns rank-based responsibility scores to blocks; an LLM optimiser
modifies the most problematic block; the workflow is updated.

Everything else is a **candidate reconstruction**, each a named option (``configs/method/judgeflow.yaml``):
the judge prompt and its ranking output; the responsibility score of rank k among M blocks, ``(M − k + 1)/M``
(``blame: linear``; ``reciprocal``: 1/k), summed over the judged failures; the parent of each round chosen
as in AFlow (round 1 + best rounds, mixed probability; JudgeFlow is compared against AFlow at its sizes);
the optimiser prompt; the round-1 workflow (one ``seq`` block, AFlow's round-1 operator).
"""
from __future__ import annotations

import json
import random
from typing import Any

from agentic_repro.baselines.autoflow import operators as ops_mod
from agentic_repro.baselines.autoflow.aflow import select_parent, top_rounds
from agentic_repro.baselines.autoflow.blocks import STEP_OPS, BlockError, validate_blocks
from agentic_repro.baselines.autoflow.search import SearchContext, SearchResult

WORKFLOW_SOLVER = "agentic_repro.baselines.autoflow.blocks:BlockWorkflow"
#: recorded in the artifact, footnoted under the row: the method itself cannot be checked against its paper
NOT_AS_PAPER = ["JudgeFlow's full text and code were not reachable here: its judge prompt, blame aggregation, "
                "parent selection, optimiser prompt and round-1 workflow are documented candidate reconstructions "
                "(configs/method/judgeflow.yaml), not the paper's"]

JUDGE_PROMPT = """You are the judge of an agentic workflow made of logic blocks that run in order; each block receives the question and the previous block's output and produces a new solution.
The workflow answered the question below WRONGLY. Decide which blocks are responsible for the failure.

# Question
{question}

# Correct answer
{gold}

# Final answer of the workflow
{answer}

# Blocks and what they did
{blocks}

Rank ALL blocks from the most responsible for the wrong final answer to the least responsible.
Reply with a JSON object: {{"ranking": ["B<i>", ...], "reason": "<one or two sentences on the most responsible block>"}}"""

OPTIMIZE_PROMPT = """You are optimising an agentic workflow for {type} problems. The workflow is a list of logic blocks that run in order (JSON below). Block types:
- "seq": {{"type": "seq", "description": str, "operators": [step, ...]}} runs its steps in order, each on the previous output;
- "for": {{"type": "for", "description": str, "operators": [step, ...], "max_iters": 1-5, "stop": "review" | "unchanged" | "none"}} repeats its steps ("review": until a Review step approves);
- "cond": {{"type": "cond", "description": str, "condition": {{"op": "Review" | "Test"}}, "success": [step, ...], "failure": [step, ...]}}.
A step is {{"op": <operator>, "instruction": <text, for Custom/CustomCodeGenerate/ScEnsemble>, "n": <2-5, ScEnsemble only>}}.
Operators: {operators}

# Current workflow (validation score {score})
{workflow}

# Judge's diagnosis over {n_failed} failed validation questions
Responsibility per block (higher = more to blame): {blame}
The most responsible block is {target}. The judge's reasons:
{reasons}

{experience}
Rewrite ONLY block {target} to fix what the judge found; keep every other block unchanged. You may replace it by one or two blocks.
Reply with a JSON object: {{"modification": "<one sentence>", "blocks": [<the new block(s) replacing {target}>]}}"""

STEP_TEXT = {"math": ("Custom", "ScEnsemble", "Programmer", "Review", "Revise", "SelfRefine", "Format"),
             "code": ("CustomCodeGenerate", "Custom", "ScEnsemble", "Test", "Review", "Revise", "SelfRefine"),
             "qa": ("Custom", "AnswerGenerate", "ScEnsemble", "Review", "Revise", "Format")}


def seed_blocks(domain: str) -> list[dict[str, Any]]:
    """Round 1: one ``seq`` block with AFlow's round-1 operator (Custom / CustomCodeGenerate, empty instruction)."""
    op = "CustomCodeGenerate" if domain == "code" else "Custom"
    return validate_blocks([{"type": "seq", "description": "generate a solution", "operators": [{"op": op,
                                                                                                   "instruction": ""}]}])


def blame_scores(rankings: list[list[str]], block_ids: list[str], form: str = "linear") -> dict[str, float]:
    """Sum over judged failures of each block's rank-based responsibility (unranked blocks get 0)."""
    m = len(block_ids)
    total = {b: 0.0 for b in block_ids}
    for ranking in rankings:
        seen = [b for i, b in enumerate(ranking) if b in total and b not in ranking[:i]]
        for k, b in enumerate(seen, 1):
            total[b] += (m - k + 1) / m if form == "linear" else 1.0 / k
    return total


def _json(text: str) -> Any:
    import json_repair

    try:
        return json_repair.loads(text or "")
    except Exception:  # noqa: BLE001
        return None


class JudgeFlow:
    """The optimiser (``method.search.optimiser``)."""

    def __init__(self, rounds: int = 20, validate_runs: int = 1, sample: int = 4, alpha: float = 0.2,
                 lambda_: float = 0.3, judge_samples: int = 10, judge_reasons: int = 3, blame: str = "linear",
                 max_regenerations: int = 3, optimizer_temperature: float | None = 1.0,
                 optimizer_max_tokens: int | None = None, judge_temperature: float | None = 0.0,
                 mismatch_f1: float = 0.3, validate_limit: int | None = None,
                 executor_sampling: dict[str, Any] | None = None) -> None:
        if blame not in ("linear", "reciprocal"):
            raise ValueError("judgeflow: blame is linear | reciprocal")
        self.rounds, self.validate_runs, self.sample = int(rounds), int(validate_runs), int(sample)
        self.alpha, self.lam = float(alpha), float(lambda_)
        self.judge_samples, self.judge_reasons, self.blame = int(judge_samples), int(judge_reasons), blame
        self.max_regenerations = int(max_regenerations)
        self.opt_sampling = {k: v for k, v in {"temperature": optimizer_temperature,
                                               "max_tokens": optimizer_max_tokens}.items() if v is not None}
        self.judge_sampling = {k: v for k, v in {"temperature": judge_temperature,
                                                 "max_tokens": optimizer_max_tokens}.items() if v is not None}
        self.mismatch_f1 = float(mismatch_f1)
        self.validate_limit = validate_limit
        self.executor_sampling = dict(executor_sampling or {})

    def workflow_config(self, blocks: list[dict[str, Any]]) -> dict[str, Any]:
        return {"solver": WORKFLOW_SOLVER, "params": {"blocks": blocks, "role": "executor",
                                                      "sampling": self.executor_sampling}}

    def _failed(self, p: dict[str, Any], domain: str) -> bool:
        score = float(p.get("score") or 0.0)
        return p.get("status") == "ok" and (score < self.mismatch_f1 if domain == "qa" else score <= 0.0)

    async def evaluate(self, sctx: SearchContext, r: int, blocks: list[dict[str, Any]],
                       domain: str) -> dict[str, Any]:
        scores, failed = [], []
        for k in range(self.validate_runs):
            ev = await sctx.evaluate({"name": f"judgeflow-round{r}", **self.workflow_config(blocks),
                                      "roles": ["executor"]}, tag=f"round_{r}/run_{k}", seed=sctx.seed + k,
                                     limit=self.validate_limit)
            scores.append(ev.score)
            for p in sorted(ev.predictions, key=lambda p: p.get("index", 0)):
                if self._failed(p, domain):
                    failed.append({"id": p["id"], "question": ev.questions.get(p["id"], ""), "gold": p.get("gold"),
                                   "answer": p.get("raw_output"), "blocks": (p.get("trace") or {}).get("blocks")})
        return {"scores": scores, "mean": sum(scores) / len(scores), "failed": failed}

    async def judge(self, sctx: SearchContext, r: int, blocks: list[dict[str, Any]],
                    failed: list[dict[str, Any]]) -> dict[str, Any]:
        ids = [b["id"] for b in blocks]
        picked = random.Random(f"{sctx.seed}:judge:{r}").sample(failed, min(self.judge_samples, len(failed)))
        rankings, reasons = [], []
        for i, f in enumerate(picked):
            desc = "\n\n".join(f"## {t['block']} ({t['type']}; {next(b['description'] for b in blocks if b['id'] == t['block'])})"
                               f"\nInput: {t['input'] or '(the question only)'}\nOutput: {t['output']}"
                               for t in (f["blocks"] or []))
            text = JUDGE_PROMPT.format(question=f["question"], gold=f["gold"], answer=f["answer"], blocks=desc)
            out = await sctx.optimize([{"role": "user", "content": text}], stage=f"judge_round_{r}",
                                      sample_offset=i, **self.judge_sampling)
            obj = _json(out[0].text)
            ranking = [str(x) for x in (obj.get("ranking") or [])] if isinstance(obj, dict) else []
            ranking = [x if x.startswith("B") else f"B{x}" for x in ranking]
            if any(x in ids for x in ranking):
                rankings.append(ranking)
                if isinstance(obj.get("reason"), str):
                    reasons.append(obj["reason"])
        scores = blame_scores(rankings, ids, self.blame)
        target = max(ids, key=lambda b: (scores[b], -ids.index(b))) if rankings else ids[-1]
        return {"scores": scores, "target": target, "reasons": reasons[: self.judge_reasons],
                "judged": len(picked), "parsed": len(rankings)}

    async def propose(self, sctx: SearchContext, r: int, parent: dict[str, Any], diagnosis: dict[str, Any],
                      domain: str, tried: list[str]) -> dict[str, Any]:
        ops = STEP_TEXT.get(domain, STEP_TEXT["qa"])
        experience = ("Modifications already tried on this workflow (do not repeat them): "
                      + "; ".join(tried) + "\n") if tried else ""
        text = OPTIMIZE_PROMPT.format(
            type=domain, operators=", ".join(f"{o} ({ops_mod.DESCRIPTIONS[o]['description']})" for o in ops),
            score=parent["mean"], workflow=json.dumps(parent["blocks"], indent=1), n_failed=diagnosis["judged"],
            blame=json.dumps(diagnosis["scores"]), target=diagnosis["target"],
            reasons="\n".join(f"- {x}" for x in diagnosis["reasons"]) or "- (none given)", experience=experience)
        attempts = []
        for attempt in range(self.max_regenerations):
            out = await sctx.optimize([{"role": "user", "content": text}], stage=f"optimize_round_{r}",
                                      sample_offset=attempt, **self.opt_sampling)
            obj = _json(out[0].text)
            why = None
            if not isinstance(obj, dict) or not isinstance(obj.get("blocks"), list):
                why = "no JSON with blocks"
            elif str(obj.get("modification", "")) in tried:
                why = "duplicate modification"
            else:
                i = [b["id"] for b in parent["blocks"]].index(diagnosis["target"])
                merged = parent["blocks"][:i] + list(obj["blocks"]) + parent["blocks"][i + 1:]
                try:
                    blocks = validate_blocks(merged, STEP_OPS)
                except BlockError as exc:
                    why = f"invalid blocks: {exc}"
                else:
                    attempts.append({"attempt": attempt, "ok": True})
                    return {"blocks": blocks, "modification": str(obj.get("modification", ""))[:500],
                            "attempts": attempts}
            attempts.append({"attempt": attempt, "ok": False, "why": why})
        return {"attempts": attempts}

    async def search(self, sctx: SearchContext) -> SearchResult:
        domain = sctx.domain
        st = sctx.resume() or {"rounds": {}, "next_round": 1, "tried": {}}
        while st["next_round"] <= self.rounds:
            r = st["next_round"]
            if r == 1:
                row: dict[str, Any] = {"round": 1, "parent": None, "modification": "seed", "blocks": seed_blocks(domain)}
            else:
                means = {int(k): v["mean"] for k, v in st["rounds"].items() if v.get("mean") is not None}
                pick, probs = select_parent(top_rounds(means, self.sample), random.Random(f"{sctx.seed}:select:{r}"),
                                            self.alpha, self.lam)
                parent = st["rounds"][str(pick["round"])]
                diagnosis = parent.get("diagnosis")
                if diagnosis is None:  # judge the parent's failures once (Judge stage)
                    diagnosis = await self.judge(sctx, pick["round"], parent["blocks"], parent["failed"])
                    parent["diagnosis"] = diagnosis
                tried = st["tried"].setdefault(str(pick["round"]), [])
                proposal = await self.propose(sctx, r, parent, diagnosis, domain, tried)
                row = {"round": r, "parent": pick["round"], "parent_score": parent["mean"], "selection_probs": probs,
                       "target_block": diagnosis["target"], "blame": diagnosis["scores"],
                       "attempts": proposal["attempts"]}
                if "blocks" not in proposal:
                    row.update(status="no_candidate", mean=None, scores=[], failed=[])
                    st["rounds"][str(r)] = row
                    st["next_round"] = r + 1
                    sctx.checkpoint(st)
                    continue
                tried.append(proposal["modification"])
                row.update(blocks=proposal["blocks"], modification=proposal["modification"])
            row.update(await self.evaluate(sctx, r, row["blocks"], domain))
            row["status"] = "ok"
            st["rounds"][str(r)] = row
            st["next_round"] = r + 1
            sctx.checkpoint(st)
            sctx.log(f"round {r}: mean {row['mean']:.4f} target {row.get('target_block')}")
        best = max((v for v in st["rounds"].values() if v.get("mean") is not None),
                   key=lambda v: (v["mean"], -v["round"]))
        history = [{k: v.get(k) for k in ("round", "parent", "parent_score", "modification", "target_block", "blame",
                                          "scores", "mean", "status", "selection_probs", "attempts", "blocks")}
                   | {"failed": len(v.get("failed") or [])}
                   for _, v in sorted(st["rounds"].items(), key=lambda kv: int(kv[0]))]
        return SearchResult(workflow=self.workflow_config(best["blocks"]), validate_score=best["mean"], history=history,
                            extra={"best_round": best["round"], "not_as_paper": NOT_AS_PAPER})

