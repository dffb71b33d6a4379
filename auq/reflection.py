"""System 2 of AUQ: Uncertainty-Aware Reflection (UAR) -- Best-of-N critique-and-refine with consistency-weighted
selection, and Adaptive Memory Expansion (supplement §3; paper App. A.3.3).

On a trigger (S = 1[c_t < tau]) at step t with the System-1 proposal (a_t, c_t, e_t):

1. **Parallel sampling**: N paths (default 3) at temperature 0.7. Each path's first response answers the
   reflection prompt whose rational cue is e_t (``first_sample: reflect``, default), or re-answers the step
   prompt (``first_sample: resample``).
2. **Iterative refinement**: while a path's confidence is < tau (or missing), it is asked to critique and refine
   its latest action with its latest explanation fed back, at most D (default 3) more turns.
3. **Selection**: S_cons(a) = (1/N) sum_k c^(k) * 1[a^(k) == a] over the N paths' final candidates, ``==`` after
   the agents' action normalisation; the executed action is argmax S_cons (ties: more votes, then the higher
   single confidence, then the earlier path). A candidate without a parsed action gets no vote; one with a
   missing confidence votes with weight 0 (it stated none) and is recorded as such.
4. **Adaptive Memory Expansion** (limited memory only, h not None): if the selected candidate's confidence is
   still < tau (or missing), the loop of 1-3 runs once more with the full trajectory and the expansion prompt,
   seeded with the selected candidate; its selection is final.

Everything is recorded (every path's candidates, S_cons, whether expansion ran) for the run's trajectory.
"""
from __future__ import annotations

import asyncio
from dataclasses import asdict, dataclass, field
from typing import Any
from collections.abc import Awaitable, Callable


@dataclass
class Candidate:
    """One response of the agent: its parsed action and the confidence it stated."""

    action: str | None           # the parsed action (None: unparsable)
    key: str | None              # normalised action for equivalence (None: no vote)
    confidence: float | None
    confidence_status: str
    explanation: str | None
    raw: str = ""
    think: str | None = None
    phase: str = "system1"       # system1 | reflect | expand
    path: int = -1
    depth: int = 0               # 0: the path's first sample; 1..D: refinements

    def below(self, tau: float) -> bool:
        return self.confidence is None or self.confidence < tau

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# (messages, temperature, sample_offset, stage) -> Candidate
Propose = Callable[[list[dict[str, str]], float, int, str], Awaitable[Candidate]]
# (seed candidate, full_history) -> messages of a reflection turn
ReflectMessages = Callable[[Candidate, bool], list[dict[str, str]]]


@dataclass(frozen=True)
class UARConfig:
    tau: float = 0.85
    n_paths: int = 3
    max_refinements: int = 3
    temperature: float = 0.7
    first_sample: str = "reflect"        # reflect | resample
    memory_expansion: bool = True

    def __post_init__(self) -> None:
        if not 0.0 <= self.tau <= 1.0:
            raise ValueError(f"tau={self.tau}: must be in [0, 1]")
        if self.n_paths < 1 or self.max_refinements < 0:
            raise ValueError("n_paths >= 1 and max_refinements >= 0")
        if self.first_sample not in ("reflect", "resample"):
            raise ValueError(f"first_sample={self.first_sample!r}: reflect | resample")

    def trigger(self, c: Candidate, missing_confidence: str) -> str | None:
        """Why System 2 runs for this proposal (None: it does not): S = 1[c < tau]; a missing confidence reflects
        under ``missing_confidence: reflect`` (the agent loop's and the research planner's switch alike)."""
        if c.confidence is None:
            return "missing_confidence" if missing_confidence == "reflect" else None
        return "low_confidence" if c.confidence < self.tau else None


@dataclass
class Selection:
    chosen: Candidate
    scores: dict[str, float]
    votes: dict[str, int]

    def to_dict(self) -> dict[str, Any]:
        return {"chosen": self.chosen.to_dict(), "s_cons": self.scores, "votes": self.votes}


def select(candidates: list[Candidate], fallback: Candidate) -> Selection:
    """argmax_a S_cons(a) over the paths' final candidates (module docstring); ``fallback`` when none votes."""
    n = len(candidates)
    scores: dict[str, float] = {}
    votes: dict[str, int] = {}
    best_single: dict[str, tuple[float, int]] = {}
    for i, c in enumerate(candidates):
        if c.key is None:
            continue
        w = c.confidence if c.confidence is not None else 0.0
        scores[c.key] = scores.get(c.key, 0.0) + w / n
        votes[c.key] = votes.get(c.key, 0) + 1
        prev = best_single.get(c.key)
        if prev is None or w > prev[0]:
            best_single[c.key] = (w, i)
    if not scores:
        return Selection(fallback, {}, {})
    key = max(scores, key=lambda k: (round(scores[k], 12), votes[k], best_single[k][0], -best_single[k][1]))
    return Selection(candidates[best_single[key][1]], scores, votes)


@dataclass
class Round:
    phase: str
    paths: list[list[Candidate]] = field(default_factory=list)
    selection: Selection | None = None

    @property
    def calls(self) -> int:
        return sum(len(p) for p in self.paths)

    def to_dict(self) -> dict[str, Any]:
        return {"phase": self.phase, "paths": [[c.to_dict() for c in p] for p in self.paths],
                "selection": self.selection.to_dict() if self.selection else None}


async def reflection_round(cfg: UARConfig, seed: Candidate, propose: Propose, messages_for: ReflectMessages,
                           step_messages: Callable[[bool], list[dict[str, str]]], *, full_history: bool,
                           phase: str) -> Round:
    """Steps 1-3 of the module docstring: N paths in parallel, each refined while below tau, then S_cons."""
    phase_idx = 0 if phase == "reflect" else 1

    def offset(k: int, d: int) -> int:  # a distinct sample index (so seed) per (round, path, turn)
        return k + cfg.n_paths * (d + (cfg.max_refinements + 1) * phase_idx)

    async def one_path(k: int) -> list[Candidate]:
        if cfg.first_sample == "resample" and phase == "reflect":
            first = step_messages(full_history)
        else:
            first = messages_for(seed, full_history)
        cur = await propose(first, cfg.temperature, offset(k, 0), f"uar_{phase}")
        cur.phase, cur.path, cur.depth = phase, k, 0
        out = [cur]
        for d in range(1, cfg.max_refinements + 1):
            if not cur.below(cfg.tau):
                break
            base = cur if cur.key is not None else seed     # an unparsable reply is refined from the seed
            nxt = await propose(messages_for(base, full_history), cfg.temperature, offset(k, d), f"uar_{phase}")
            nxt.phase, nxt.path, nxt.depth = phase, k, d
            out.append(nxt)
            cur = nxt
        return out

    paths = list(await asyncio.gather(*(one_path(k) for k in range(cfg.n_paths))))
    rnd = Round(phase, paths)
    rnd.selection = select([p[-1] for p in paths], seed)
    return rnd


async def resolve(cfg: UARConfig, proposal: Candidate, propose: Propose, messages_for: ReflectMessages,
                  step_messages: Callable[[bool], list[dict[str, str]]], *, limited_memory: bool
                  ) -> tuple[Candidate, list[Round]]:
    """The whole of System 2 for one step: a reflection round, then memory expansion when it is allowed and
    still needed. Returns the executed candidate and the rounds (for the record)."""
    rounds = [await reflection_round(cfg, proposal, propose, messages_for, step_messages, full_history=False,
                                     phase="reflect")]
    chosen = rounds[0].selection.chosen  # type: ignore[union-attr]
    if cfg.memory_expansion and limited_memory and chosen.below(cfg.tau):
        rounds.append(await reflection_round(cfg, chosen, propose, messages_for, step_messages, full_history=True,
                                             phase="expand"))
        chosen = rounds[-1].selection.chosen  # type: ignore[union-attr]
    return chosen, rounds
