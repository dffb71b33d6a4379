"""UAR's control flow on a scripted proposer (auq/reflection.py): N and D limits, refinement stops once
confident, S_cons selection, memory expansion only when limited and still uncertain."""
from __future__ import annotations

import asyncio

import pytest

from agentic_repro.auq.reflection import Candidate, UARConfig, resolve, select


def cand(action, c, path=0):
    return Candidate(action=action, key=None if action is None else action.lower(), confidence=c,
                     confidence_status="ok" if c is not None else "missing", explanation=f"why {action}", path=path)


def test_select_is_consistency_weighted_not_max_confidence():
    # a: 0.6 + 0.6 = 1.2/3 beats b: 0.95/3 although b is the single most confident
    cs = [cand("go to a", 0.6), cand("go to b", 0.95), cand("Go to A", 0.6)]
    sel = select(cs, cand("x", 0.1))
    assert sel.chosen.key == "go to a" and sel.votes == {"go to a": 2, "go to b": 1}
    assert sel.scores["go to a"] == pytest.approx(0.4) and sel.scores["go to b"] == pytest.approx(0.95 / 3)
    assert sel.chosen.confidence == 0.6


def test_select_ties_missing_confidence_and_no_votes():
    # equal S_cons and votes: the higher single confidence wins
    assert select([cand("a", 0.5), cand("b", 0.25), cand("b", 0.25)], cand("x", 0)).chosen.key == "b"
    assert select([cand("a", 0.4), cand("b", 0.4)], cand("x", 0)).chosen.key == "a"   # then the earlier path
    # a missing confidence votes with weight 0, an unparsable reply does not vote
    sel = select([cand("a", None), cand(None, 0.9), cand("b", 0.1)], cand("x", 0))
    assert sel.chosen.key == "b" and sel.votes == {"a": 1, "b": 1}
    fb = cand("seed", 0.2)
    assert select([cand(None, 0.9), cand(None, None)], fb).chosen is fb


class Proposer:
    """Scripted System 2: replies by (phase, path, turn) from ``plan``; records every call."""

    def __init__(self, plan):
        self.plan, self.calls = plan, []

    async def __call__(self, messages, temperature, offset, stage):
        self.calls.append((stage, offset, temperature, messages[-1]["content"]))
        return self.plan(stage, offset, messages)


def run(cfg, proposer, *, limited):
    seed = cand("go to x", 0.5)
    msgs = lambda c, full: [{"role": "user", "content": f"{'FULL' if full else 'WINDOW'} reflect on {c.action}"}]
    step = lambda full: [{"role": "user", "content": "step"}]
    return asyncio.run(resolve(cfg, seed, proposer, msgs, step, limited_memory=limited))


def test_paths_refine_at_most_d_turns_while_below_tau():
    cfg = UARConfig(tau=0.85, n_paths=3, max_refinements=3)
    # path 0 confident at once; path 1 after one refinement; path 2 never
    def plan(stage, offset, msgs):
        k, d = offset % 3, (offset // 3) % 4
        c = {0: 0.9, 1: 0.5 if d == 0 else 0.88, 2: 0.3}[k]
        return cand(f"go to p{k}", c, k)
    p = Proposer(plan)
    chosen, rounds = run(cfg, p, limited=False)
    lens = [len(path) for path in rounds[0].paths]
    assert lens == [1, 2, 4]                  # 1 sample + up to D=3 refinements
    assert len(p.calls) == 7 and rounds[0].calls == 7 and len(rounds) == 1
    assert all(t == 0.7 for _, _, t, _ in p.calls)
    assert len({o for _, o, _, _ in p.calls}) == 7          # distinct sample indices (seeds)
    assert chosen.key == "go to p0"            # S_cons: 0.9/3 > 0.88/3 > 0.3/3
    # the refinement feeds the path's own latest action back (the rational cue)
    assert any("reflect on go to p2" in m for _, _, _, m in p.calls)


def test_memory_expansion_only_when_limited_and_still_below_tau():
    cfg = UARConfig(tau=0.85, n_paths=3, max_refinements=1)
    def plan(stage, offset, msgs):
        full = "FULL" in msgs[-1]["content"]
        return cand("go to far" if full else "go to near", 0.95 if full else 0.4)
    p = Proposer(plan)
    chosen, rounds = run(cfg, p, limited=True)
    assert [r.phase for r in rounds] == ["reflect", "expand"]
    assert chosen.key == "go to far" and chosen.phase == "expand"
    assert len(p.calls) == 6 + 3 and all("FULL" in m for s, _, _, m in p.calls if s == "uar_expand")
    # the same uncertainty with full memory: no expansion
    p2 = Proposer(plan)
    chosen2, rounds2 = run(cfg, p2, limited=False)
    assert len(rounds2) == 1 and chosen2.key == "go to near" and len(p2.calls) == 6
    # confident after reflection: no expansion even when limited
    p3 = Proposer(lambda s, o, m: cand("go to near", 0.9))
    _, rounds3 = run(cfg, p3, limited=True)
    assert len(rounds3) == 1 and len(p3.calls) == 3
    # expansion switched off
    p4 = Proposer(plan)
    _, rounds4 = run(UARConfig(tau=0.85, n_paths=3, max_refinements=1, memory_expansion=False), p4, limited=True)
    assert len(rounds4) == 1


def test_missing_confidence_keeps_refining_and_n_1_d_0_is_one_call():
    p = Proposer(lambda s, o, m: cand("a", None))
    _, rounds = run(UARConfig(n_paths=2, max_refinements=2), p, limited=False)
    assert [len(x) for x in rounds[0].paths] == [3, 3]
    p1 = Proposer(lambda s, o, m: cand("a", 0.1))
    _, r1 = run(UARConfig(n_paths=1, max_refinements=0, memory_expansion=False), p1, limited=True)
    assert len(p1.calls) == 1 and r1[0].calls == 1
    with pytest.raises(ValueError):
        UARConfig(tau=1.5)
