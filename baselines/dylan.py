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


async def dylan(problem: ProblemView, ctx: ProblemContext, *, roles: list[str] | dict[str, list[str]] | None = None,
                layers: int = 3, top_m: int = 2, temperature: float | dict[str, float] | None = None,
                system: str = SYSTEM, first_template: str = FIRST_TEMPLATE,
                message_template: str = MESSAGE_TEMPLATE, rank_template: str = RANK_TEMPLATE,
                code_choice: str = "majority") -> Solution:
    domain = ctx.benchmark.domain
    if roles is None:
        roles = DEFAULT_ROLES
    team = list(roles.get(domain, roles.get("qa", [])) if isinstance(roles, dict) else roles)
    if not team:
        raise ValueError(f"dylan: no roles for domain {domain!r}")
    if temperature is None:
        temperature = DEFAULT_TEMPERATURE
    temp = float(temperature.get(domain, 1.0)) if isinstance(temperature, dict) else float(temperature)
    n = len(team)
    rng = ctx.rng
    nodes: list[list[_Node]] = []
    active = list(range(n))      # agents active in the current layer
    senders = list(range(n))     # agents whose previous-layer replies are passed on
    ranked: list[dict[str, Any]] = []
    stop: dict[str, Any] = {"reason": "last-layer"}
    final_nodes: list[_Node] = []

    async def activate(node: _Node, prev: list[_Node] | None) -> None:
        sys_prompt = f"{ROLES.get(team[node.agent], team[node.agent])}\n{system}"
        if not prev:
            content = fill(ctx, first_template)
        else:
            order = list(range(len(prev)))
            rng.shuffle(order)                       # DyLAN shuffles the incoming messages
            shown = [prev[i] for i in order]
            node.inputs = [p.agent for p in shown]
            content = fill(ctx, message_template, solutions=quote_solutions([p.reply or "" for p in shown]),
                           n=len(shown))
        node.messages = user(content, sys_prompt)
        node.reply = (await ctx.generate(node.messages, stage=f"layer_{node.layer + 1}", sample_offset=node.agent,
                                         temperature=temp))[0].text
        node.key = answer_key(ctx, node.reply)
        if node.inputs:
            scores = last_int_list(node.reply, double=True) or []
            if len(scores) != len(node.inputs):
                scores = [0] * len(node.inputs)
            w = [s / 5 if 0 < s <= 5 else (1.0 if s > 5 else 0.0) for s in scores]
            total = sum(w)
            w = [x / total for x in w] if total > 0 else [1 / len(w)] * len(w)
            node.weights = dict(zip(node.inputs, w))

    for layer in range(layers):
        if layer >= 2 and len(senders) > top_m:
            prev_layer = {nd.agent: nd for nd in nodes[-1] if nd.reply is not None}
            cand = [a for a in senders if a in prev_layer]
            order = list(range(len(cand)))
            rng.shuffle(order)
            shuffled = [cand[i] for i in order]
            rank_msgs = user(fill(ctx, rank_template,
                                  solutions=quote_solutions([prev_layer[a].reply or "" for a in shuffled])))
            out = (await ctx.generate(rank_msgs, stage="rank"))[0].text
            picks = last_int_list(out) or []
            picks = [min(max(p - 1, 0), len(shuffled) - 1) for p in picks[:top_m]]
            if len(set(picks)) < min(top_m, len(shuffled)):
                picks = rng.sample(range(len(shuffled)), min(top_m, len(shuffled)))
                parsed = False
            else:
                parsed = True
            chosen = [shuffled[p] for p in picks]
            ranked.append({"layer": layer + 1, "candidates": shuffled, "chosen": chosen, "parsed": parsed,
                           "messages": rank_msgs, "output": out})
            active = senders = chosen
            # the selected agents' previous answers may already agree (MATH script of the paper)
            if _consensus([prev_layer[a].key for a in chosen], len(chosen))[0]:
                final_nodes = [prev_layer[a] for a in chosen]
                stop = {"reason": "consensus-after-ranking", "layer": layer}
                break
        prev = None if layer == 0 else [nd for nd in nodes[-1] if nd.agent in senders and nd.reply is not None]
        order = list(active)
        rng.shuffle(order)
        this: list[_Node] = []
        nodes.append(this)
        reached = False
        for pos, agent in enumerate(order):
            node = _Node(layer, agent)
            this.append(node)
            await activate(node, prev)
            if pos >= math.floor(2 / 3 * len(active)):
                reached = _consensus([nd.key for nd in this], len(active))[0]
                if reached:
                    break
        final_nodes = this
        if reached:
            stop = {"reason": "consensus", "layer": layer + 1, "activated": len(this)}
            break
        senders = [nd.agent for nd in this]

    # final answer: majority of the last activated layer (for code over programs; public_tests: option)
    vote = await choose(ctx, [nd.reply or "" for nd in final_nodes], code_choice)
    winner_key = vote.keys[vote.index]

    # ---- agent importance scores (backward pass) ----------------------------------------------
    last = final_nodes
    agreeing = [nd for nd in last if nd.key is not None and nd.key == winner_key] or [last[vote.index]]
    for nd in agreeing:
        nd.importance = 1 / len(agreeing)
    for li in range(len(nodes) - 2, -1, -1):  # the final nodes always belong to the last built layer
        receivers = [nd for nd in nodes[li + 1] if nd.reply is not None]
        for nd in nodes[li]:
            nd.importance = sum(r.weights.get(nd.agent, 0.0) * r.importance for r in receivers)
    per_agent = [0.0] * n
    for layer_nodes in nodes:
        for nd in layer_nodes:
            per_agent[nd.agent] += nd.importance
    trace = {
        "roles": team, "temperature": temp, "stop": stop, "ranker": ranked, "vote": vote_trace(vote),
        "agent_importance": {f"{i}:{team[i]}": round(v, 6) for i, v in enumerate(per_agent)},
        "layers": [[{"agent": nd.agent, "role": team[nd.agent], "inputs": nd.inputs,
                     "weights": {str(k): round(v, 4) for k, v in nd.weights.items()},
                     "importance": round(nd.importance, 6), "key": None if nd.key is None else str(nd.key)[:200],
                     "messages": nd.messages, "reply": nd.reply} for nd in layer_nodes] for layer_nodes in nodes],
    }
    return Solution(final_nodes[vote.index].reply or "", confidence=vote.share, trace=trace)
