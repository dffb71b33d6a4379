"""DyLAN, the Dynamic LLM-Agent Network (Liu et al., 2023): inference procedure.

A feed-forward network of agents over L layers (time steps). Layer 1: every agent answers the
task alone. Layer l >= 2: every active agent receives the replies of the previous layer's active
agents (message passing), answers again and rates each received reply from 1 to 5. From layer 3
on, an LLM listwise ranker first picks the top 2 replies of the previous layer (inference-time
agent selection): only those agents stay active, and only their replies are passed on. Agents are
activated one at a time in random order; as soon as more than floor(2/3 * n_active) of the activated
agents agree, the network stops early and returns the consensus (early stop on consensus). Otherwise
the answer is the majority of the last layer. Agent-importance scores are then propagated backward:
the last layer's agents that gave the final answer share importance 1; an earlier agent's importance
is the rating-weighted sum of the importance of the agents it sent messages to.

Defaults follow the authors' code (SALT-NLP/DyLAN): 4 agents, 3 layers, listwise top-2 ranker,
consensus threshold 2/3, math roles ["Assistant", "Mathematician", "Mathematician", "Assistant"]
(``code/MMLU/llmlp_listwise_math.py``), code roles ["PythonAssistant", "AlgorithmDeveloper",
"ComputerScientist", "Programmer"] (``code/HumanEval/exp_human_eval.sh``); temperatures 0.2 (MATH,
``llmlp_gen_math_listwise_deeper_markov.py``), 0.8 (HumanEval runs, ``..._t0.8``), 1.0 (MMLU,
``prompt_lib.py``).

Left out (documented in baselines/README.md): the team-optimisation pre-run (averaging importance
scores over a set of problems to pick the best agents from a larger pool; the per-problem scores it
needs are recorded in every trace), and the code task's dedicated judge agents (unit-test writer,
reflector, ranker): for code the same reasoning network is used, consensus is program identity and
the final choice is the majority over programs (``code_choice: public_tests`` ranks by the visible
example tests first). The row is labelled "DyLAN (reasoning network; code judges not run)".
"""
from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from agentic_repro.harness.context import ProblemContext
from agentic_repro.harness.types import Solution

from agentic_repro.baselines.common import answer_key, choose, fill, last_int_list, quote_solutions, user, vote_trace
from agentic_repro.harness.view import ProblemView

ROLES = {
    "Assistant": "You are a super-intelligent AI assistant capable of performing tasks more effectively "
                 "than humans.",
    "Mathematician": "You are a mathematician. You are good at math games, arithmetic calculation, and "
                     "long-term planning.",
    "Historian": "You are a historian. You research and analyze cultural, economic, political, and social events, "
                 "collect evidence from primary sources and reason carefully about what happened.",
    "Lawyer": "You are a lawyer. You are good at law, politics, and history, and you read texts precisely.",
    "Economist": "You are an economist. You are good at economics, finance, and business, and at reading "
                 "numbers and charts.",
    "PythonAssistant": "You are an AI assistant who writes correct, clean and efficient Python code.",
    "AlgorithmDeveloper": "You are an algorithm developer. You design correct algorithms, think about edge cases "
                          "and complexity, and implement them in Python.",
    "ComputerScientist": "You are a computer scientist. You are good at data structures, algorithms and reasoning "
                         "about program correctness.",
    "Programmer": "You are a programmer. You are good at computer science and engineering, and you write "
                  "working Python code.",
}
DEFAULT_ROLES = {
    "math": ["Assistant", "Mathematician", "Mathematician", "Assistant"],
    "code": ["PythonAssistant", "AlgorithmDeveloper", "ComputerScientist", "Programmer"],
    "qa": ["Assistant", "Historian", "Lawyer", "Economist"],
}
DEFAULT_TEMPERATURE = {"math": 0.2, "code": 0.8, "qa": 1.0}
SYSTEM = "It's a debate. Explain your reasons at each round thoroughly."
FIRST_TEMPLATE = "{task}\n\n{answer_instruction}"
MESSAGE_TEMPLATE = (
    "{task}\n\nThese are the solutions to the problem from other agents:{solutions}\n\n"
    "Using the reasoning from other agents as additional advice with critical thinking, can you give an updated "
    "answer? Examine your solution and that of the other agents step by step. Notice that their answers might all be "
    "wrong. Also give each of the {n} solutions above a score from 1 to 5, written as a list like [[1, 5, 2, ...]], "
    "before your final answer. {answer_instruction}"
)
RANK_TEMPLATE = (
    "{task}\n\nThese are the solutions to the problem from other agents:{solutions}\n\n"
    "Please choose the best 2 solutions and think step by step. Put your answer in the form like [1,2] or [3,4] "
    "at the end of your response."
)


def _consensus(keys: list[Any], n_members: int) -> tuple[bool, Any, int]:  # (reached, answer, votes)
    """Reached when the most frequent (extractable) answer has more than floor(2/3 * n_members) votes."""
    counts = Counter(k for k in keys if k is not None)
    if not counts:
        return False, None, 0
    best = max(counts.values())
    winner = next(k for k in keys if k is not None and counts[k] == best)
    return best > math.floor(2 / 3 * n_members), winner, best


class _Node:
    def __init__(self, layer: int, agent: int) -> None:
        self.layer, self.agent = layer, agent
        self.reply: str | None = None
        self.key: Any = None
        self.inputs: list[int] = []           # agents whose previous-layer replies this node received
        self.weights: dict[int, float] = {}   # normalised rating of each received reply
        self.importance = 0.0
        self.messages: list[dict[str, str]] | None = None


def _team(domain: str, roles: list[str] | dict[str, list[str]] | None,
          temperature: float | dict[str, float] | None) -> tuple[list[str], float]:
    """The agents' roles for ``domain`` (a dict per domain, QA's as the fallback) and their temperature."""
    if roles is None:
        roles = DEFAULT_ROLES
    team = list(roles.get(domain, roles.get("qa", [])) if isinstance(roles, dict) else roles)
    if not team:
        raise ValueError(f"dylan: no roles for domain {domain!r}")
    if temperature is None:
        temperature = DEFAULT_TEMPERATURE
    temp = float(temperature.get(domain, 1.0)) if isinstance(temperature, dict) else float(temperature)
    return team, temp


def _rating_weights(reply: str, n_inputs: int) -> list[float]:
    """The 1-5 ratings a reply gives the replies it received, normalised to sum to 1 (uniform when unusable)."""
    scores = last_int_list(reply, double=True) or []
    if len(scores) != n_inputs:
        scores = [0] * n_inputs
    w = [s / 5 if 0 < s <= 5 else (1.0 if s > 5 else 0.0) for s in scores]
    total = sum(w)
    return [x / total for x in w] if total > 0 else [1 / len(w)] * len(w)


@dataclass
class _Network:
    """One problem's agent network: its settings, the layers built so far and the ranker's records."""

    ctx: ProblemContext
    team: list[str]
    temp: float
    system: str
    first_template: str
    message_template: str
    rank_template: str
    top_m: int
    nodes: list[list[_Node]] = field(default_factory=list)
    ranked: list[dict[str, Any]] = field(default_factory=list)

    async def activate(self, node: _Node, prev: list[_Node] | None) -> None:
        """One agent's reply: alone in layer 1, else to the previous layer's replies (shuffled), rating them."""
        ctx, team = self.ctx, self.team
        sys_prompt = f"{ROLES.get(team[node.agent], team[node.agent])}\n{self.system}"
        if not prev:
            content = fill(ctx, self.first_template)
        else:
            order = list(range(len(prev)))
            ctx.rng.shuffle(order)                   # DyLAN shuffles the incoming messages
            shown = [prev[i] for i in order]
            node.inputs = [p.agent for p in shown]
            content = fill(ctx, self.message_template, solutions=quote_solutions([p.reply or "" for p in shown]),
                           n=len(shown))
        node.messages = user(content, sys_prompt)
        node.reply = (await ctx.generate(node.messages, stage=f"layer_{node.layer + 1}", sample_offset=node.agent,
                                         temperature=self.temp))[0].text
        node.key = answer_key(ctx, node.reply)
        if node.inputs:
            node.weights = dict(zip(node.inputs, _rating_weights(node.reply, len(node.inputs))))

    async def select(self, layer: int, senders: list[int]) -> tuple[list[int], dict[int, _Node]]:
        """The listwise ranker's top ``top_m`` of the previous layer's replies (a seeded pick when its answer is
        unusable): (the chosen agents, the previous layer's answered nodes by agent)."""
        ctx = self.ctx
        prev_layer = {nd.agent: nd for nd in self.nodes[-1] if nd.reply is not None}
        cand = [a for a in senders if a in prev_layer]
        order = list(range(len(cand)))
        ctx.rng.shuffle(order)
        shuffled = [cand[i] for i in order]
        rank_msgs = user(fill(ctx, self.rank_template,
                              solutions=quote_solutions([prev_layer[a].reply or "" for a in shuffled])))
        out = (await ctx.generate(rank_msgs, stage="rank"))[0].text
        picks = last_int_list(out) or []
        picks = [min(max(p - 1, 0), len(shuffled) - 1) for p in picks[:self.top_m]]
        if len(set(picks)) < min(self.top_m, len(shuffled)):
            picks = ctx.rng.sample(range(len(shuffled)), min(self.top_m, len(shuffled)))
            parsed = False
        else:
            parsed = True
        chosen = [shuffled[p] for p in picks]
        self.ranked.append({"layer": layer + 1, "candidates": shuffled, "chosen": chosen, "parsed": parsed,
                            "messages": rank_msgs, "output": out})
        return chosen, prev_layer

    async def run_layer(self, layer: int, active: list[int], prev: list[_Node] | None) -> tuple[list[_Node], bool]:
        """Activate the layer's agents one at a time in random order until more than floor(2/3) of them agree:
        (its nodes, whether they reached consensus)."""
        order = list(active)
        self.ctx.rng.shuffle(order)
        this: list[_Node] = []
        self.nodes.append(this)
        for pos, agent in enumerate(order):
            node = _Node(layer, agent)
            this.append(node)
            await self.activate(node, prev)
            if pos >= math.floor(2 / 3 * len(active)) and _consensus([nd.key for nd in this], len(active))[0]:
                return this, True
        return this, False

    async def forward(self, layers: int) -> tuple[list[_Node], dict[str, Any]]:
        """The layers in turn, with agent selection from layer 3 on: (the final nodes, why it stopped)."""
        n = len(self.team)
        active = list(range(n))      # agents active in the current layer
        senders = list(range(n))     # agents whose previous-layer replies are passed on
        final_nodes: list[_Node] = []
        for layer in range(layers):
            if layer >= 2 and len(senders) > self.top_m:
                chosen, prev_layer = await self.select(layer, senders)
                active = senders = chosen
                # the selected agents' previous answers may already agree (MATH script of the paper)
                if _consensus([prev_layer[a].key for a in chosen], len(chosen))[0]:
                    return [prev_layer[a] for a in chosen], {"reason": "consensus-after-ranking", "layer": layer}
            prev = None if layer == 0 else [nd for nd in self.nodes[-1] if nd.agent in senders and nd.reply is not None]
            final_nodes, reached = await self.run_layer(layer, active, prev)
            if reached:
                return final_nodes, {"reason": "consensus", "layer": layer + 1, "activated": len(final_nodes)}
            senders = [nd.agent for nd in final_nodes]
        return final_nodes, {"reason": "last-layer"}

    def importance(self, final_nodes: list[_Node], winner_key: Any, winner_index: int) -> list[float]:
        """Agent importance (backward pass): the final answer's agents share 1; an earlier agent's is the
        rating-weighted sum of its receivers' importance. Per agent, summed over layers."""
        agreeing = ([nd for nd in final_nodes if nd.key is not None and nd.key == winner_key]
                    or [final_nodes[winner_index]])
        for nd in agreeing:
            nd.importance = 1 / len(agreeing)
        for li in range(len(self.nodes) - 2, -1, -1):  # the final nodes always belong to the last built layer
            receivers = [nd for nd in self.nodes[li + 1] if nd.reply is not None]
            for nd in self.nodes[li]:
                nd.importance = sum(r.weights.get(nd.agent, 0.0) * r.importance for r in receivers)
        per_agent = [0.0] * len(self.team)
        for layer_nodes in self.nodes:
            for nd in layer_nodes:
                per_agent[nd.agent] += nd.importance
        return per_agent

    def trace(self, stop: dict[str, Any], vote: Any, per_agent: list[float]) -> dict[str, Any]:
        team = self.team
        return {
            "roles": team, "temperature": self.temp, "stop": stop, "ranker": self.ranked, "vote": vote_trace(vote),
            "agent_importance": {f"{i}:{team[i]}": round(v, 6) for i, v in enumerate(per_agent)},
            "layers": [[{"agent": nd.agent, "role": team[nd.agent], "inputs": nd.inputs,
                         "weights": {str(k): round(v, 4) for k, v in nd.weights.items()},
                         "importance": round(nd.importance, 6), "key": None if nd.key is None else str(nd.key)[:200],
                         "messages": nd.messages, "reply": nd.reply} for nd in layer_nodes]
                       for layer_nodes in self.nodes],
        }


async def dylan(problem: ProblemView, ctx: ProblemContext, *, roles: list[str] | dict[str, list[str]] | None = None,
                layers: int = 3, top_m: int = 2, temperature: float | dict[str, float] | None = None,
                system: str = SYSTEM, first_template: str = FIRST_TEMPLATE,
                message_template: str = MESSAGE_TEMPLATE, rank_template: str = RANK_TEMPLATE,
                code_choice: str = "majority") -> Solution:
    team, temp = _team(ctx.benchmark.domain, roles, temperature)
    net = _Network(ctx, team, temp, system, first_template, message_template, rank_template, top_m)
    final_nodes, stop = await net.forward(layers)
    # final answer: majority of the last activated layer (for code over programs; public_tests: option)
    vote = await choose(ctx, [nd.reply or "" for nd in final_nodes], code_choice)
    per_agent = net.importance(final_nodes, vote.keys[vote.index], vote.index)
    return Solution(final_nodes[vote.index].reply or "", confidence=vote.share, trace=net.trace(stop, vote, per_agent))
