"""GPTSwarm (Zhuge et al., ICML 2024, "Language Agents as Optimizable Graphs"): agents are graphs of LLM nodes
composed into one swarm graph with a final decision node; the edge distribution (one Bernoulli logit per potential
edge) is optimised with REINFORCE on the validate split; the frozen swarm keeps the edges whose probability > 0.5.

Facts taken from metauto-ai/GPTSwarm (``swarm/graph/{swarm,graph,node}.py``, ``swarm/optimizer/edge_optimizer/
parameterization.py``, ``experiments/evaluator/evaluator.py``, ``experiments/run_mmlu.py``, ``experiments/README.md``,
``swarm/environment/agents/{io,cot}.py``, ``agents/humaneval/code_react.py``, ``operations/{direct_answer,cot_step,
final_decision}.py``, ``operations/humaneval/code_writing.py``, ``prompt/{mmlu,humaneval}_prompt_set.py``):

- potential edges: every node of an agent to every node of every *other* agent (both directions), then every
  agent node to the final decision node (``connect_output_nodes_to_final_node=False``); logits start at
  logit(0.5) (``init_connection_probability``);
- realize: in that order, an edge that would close a cycle is skipped; otherwise it is kept with probability
  sigmoid(logit); the log-prob sums log p / log(1-p) of the decisions taken;
- execution: nodes that reach the final node run in topological order; an agent's input node answers the task
  itself (it ignores its predecessors); any other node makes one call per predecessor output; FinalDecision
  with ``MajorityVote`` (run_mmlu.py) votes over its predecessors' outputs, ties broken at random;
- training (``Evaluator.optimize_swarm``): ``num_iters`` iterations (run_mmlu.py: **200**), batch **4** records,
  each with its own sampled graph; Adam (lr **0.1**) on ``-mean(log_prob * utility)``, utility = the score;
- test (``evaluate_swarm(mode='external_edge_probs')``): one graph with the edges of probability > 0.5.

Per-domain swarms (``SWARMS``): QA and math run the released MMLU swarm's truthful part (``--num-truthful-agents=3``:
3 IO agents, MajorityVote) without its adversarial agents (a robustness experiment, not a baseline); code runs
3 CodeReact agents (the released HumanEval agent: CodeWriting then one rewrite from execution feedback on the
task's visible tests). Deviations: see ``configs/method/gptswarm.yaml`` and baselines/README.md.
"""
from __future__ import annotations

import hashlib
import math
import random
from collections import Counter
from pathlib import Path
from typing import Any

from agentic_repro.harness.types import Solution

from agentic_repro.baselines.autoflow import operators as O
from agentic_repro.harness.context import ProblemContext
from agentic_repro.harness.view import ProblemView

#: what the paper optimises that this search does not (recorded in the artifact, footnoted under the row)
NOT_AS_PAPER = ["only the edge distribution is optimised; the paper also optimises node prompts (its node "
                "optimisation of prompts and demonstrations), here every node keeps the released agents' fixed prompt"]

ROLE = "a knowlegable expert in question answering"   # mmlu_prompt_set.get_role (sic)

COT_STEP_SYSTEM = ("You are {role}. "
                   "Given the question, solve it step by step. "
                   "Answer your thoughts about the next step of the solution given "
                   "everything that has been provided to you so far. "
                   "Expand on the next step. "
                   "Do not try to provide the answer straight away, instead expand "
                   "on your thoughts about the next step of the solution."
                   "Aswer in maximum 30 words. "
                   "Do not expect additional input. Make best use of whatever "
                   "knowledge you have been already provided.")
COT_LAST_SYSTEM = ("You are {role}. {constraint}. "
                   "Answer taking into consideration the provided sequence "
                   "of thoughts on the question at hand.")
CODE_WRITING_SYSTEM = ("You are an AI that only responds with only Python code. "
                       "You will be given a function signature and its docstring by the user. "
                       "Write your full implementation (restate the function signature). "
                       "Use a Python code block to write your response. For example:\n```python\nprint('Hello world!')\n```")
REACT_PROMPT = """Here is an unsuccessful attempt for solving the folloing question:
Question:
{question}
Attempted Solution:
{solution}
Feedback:\n{feedback}
Rewrite the code based on the feedback and the following question:
{question}"""

AGENTS = {"IO": ["DirectAnswer"], "COT": ["CoTStep", "CoTStep", "CoTStep"], "CodeReact": ["CodeWriting", "CodeWriting"]}
SWARMS = {"math": ["IO", "IO", "IO"], "qa": ["IO", "IO", "IO"], "code": ["CodeReact", "CodeReact", "CodeReact"]}


# ---- the swarm's structure ----------------------------------------------------------------------------------

def build_swarm(agents: list[str]) -> dict[str, Any]:
    """Nodes (id, agent, kind, input/output/last flags), the agents' own edges, the potential edges in the
    released order, and the final node ``final``."""
    nodes: list[dict[str, Any]] = []
    fixed: list[tuple[str, str]] = []
    by_agent: list[list[str]] = []
    for a, name in enumerate(agents):
        if name not in AGENTS:
            raise ValueError(f"unknown GPTSwarm agent {name!r} (known: {sorted(AGENTS)})")
        kinds = AGENTS[name]
        ids = [f"a{a}n{k}" for k in range(len(kinds))]
        for k, (nid, kind) in enumerate(zip(ids, kinds)):
            nodes.append({"id": nid, "agent": a, "agent_name": name, "kind": kind, "input": k == 0,
                          "output": k == len(kinds) - 1, "last_step": k == len(kinds) - 1})
        fixed.extend(zip(ids, ids[1:]))
        by_agent.append(ids)
    potential: list[tuple[str, str]] = []
    for i, a1 in enumerate(by_agent):
        for j, a2 in enumerate(by_agent):
            if i != j:
                potential.extend((n1, n2) for n1 in a1 for n2 in a2)
    potential.extend((n, "final") for ids in by_agent for n in ids)
    return {"agents": list(agents), "nodes": nodes, "fixed": fixed, "potential": potential}


def _reaches(edges: dict[str, set[str]], src: str, dst: str) -> bool:
    seen, todo = set(), [src]
    while todo:
        n = todo.pop()
        if n == dst:
            return True
        if n in seen:
            continue
        seen.add(n)
        todo.extend(edges.get(n, ()))
    return False


def sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x))


def realize(swarm: dict[str, Any], logits: list[float], *, rng: random.Random | None = None,
            mask: bool = False) -> dict[str, Any]:
    """``EdgeWiseDistribution.realize`` (sampling, ``rng``) or ``realize_mask`` (``mask``: edges with p > 0.5):
    the kept edges and, per considered potential edge, (index, kept)."""
    if len(logits) != len(swarm["potential"]):
        raise ValueError(f"{len(logits)} edge logits for {len(swarm['potential'])} potential edges")
    succ: dict[str, set[str]] = {}
    for a, b in swarm["fixed"]:
        succ.setdefault(a, set()).add(b)
    decisions: list[list[Any]] = []
    for i, (a, b) in enumerate(swarm["potential"]):
        if _reaches(succ, b, a):          # a -> b would close a cycle: not considered
            continue
        p = sigmoid(float(logits[i]))
        keep = p > 0.5 if mask else (rng.random() < p)   # type: ignore[union-attr]
        decisions.append([i, bool(keep)])
        if keep:
            succ.setdefault(a, set()).add(b)
    edges = sorted([a, b] for a, bs in succ.items() for b in bs)
    return {"edges": edges, "decisions": decisions}


def graph_log_prob(logits: Any, decisions: list[list[Any]]) -> Any:
    """Differentiable log-prob of a realized graph (torch tensor ``logits``)."""
    import torch  # pyright: ignore[reportMissingImports]  (the embed/train extra)

    if not decisions:
        return torch.zeros(())
    idx = torch.tensor([d[0] for d in decisions])
    kept = torch.tensor([1.0 if d[1] else 0.0 for d in decisions])
    lp = torch.nn.functional.logsigmoid(logits[idx])
    lq = torch.nn.functional.logsigmoid(-logits[idx])
    return (kept * lp + (1 - kept) * lq).sum()


# ---- executing a realized swarm ------------------------------------------------------------------------------

async def run_swarm(ops: O.Ops, swarm: dict[str, Any], edges: list[list[str]], task: str, ctx: ProblemContext, *,
                    constraint: str, rng: random.Random, direct_max_tokens: int | None = None,
                    cot_max_tokens: int | None = None) -> dict[str, Any]:
    """Run the useful nodes in topological order (``Graph.run``); returns the final answer and per-node outputs."""
    nodes = {n["id"]: n for n in swarm["nodes"]}
    succ: dict[str, list[str]] = {}
    pred: dict[str, list[str]] = {}
    for a, b in edges:
        succ.setdefault(a, []).append(b)
        pred.setdefault(b, []).append(a)
    useful = {n for n in nodes if _reaches({k: set(v) for k, v in succ.items()}, n, "final")}
    indeg = {n: sum(1 for p in pred.get(n, []) if p in useful) for n in useful}
    queue = [n for n in nodes if n in useful and indeg[n] == 0]
    outputs: dict[str, list[dict[str, Any]]] = {}
    order: list[str] = []
    while queue:
        nid = queue.pop(0)
        order.append(nid)
        node = nodes[nid]
        if node["input"]:
            inputs = [{"task": task}]
        else:
            inputs = [o for p in pred.get(nid, []) for o in outputs.get(p, [])]
        outs = []
        for inp in inputs:
            outs.append(await _run_node(ops, node, inp, task, ctx, constraint, direct_max_tokens, cot_max_tokens))
        outputs[nid] = outs
        for s in succ.get(nid, []):
            if s in useful:
                indeg[s] -= 1
                if indeg[s] == 0:
                    queue.append(s)
    voted = [o for p in pred.get("final", []) for o in outputs.get(p, [])]
    answer, vote = final_decision(ctx, [o["output"] for o in voted], rng)
    return {"answer": answer, "order": order, "vote": vote,
            "outputs": {k: [o["output"][:300] for o in v] for k, v in outputs.items()}}


async def _run_node(ops: O.Ops, node: dict[str, Any], inp: dict[str, Any], task: str, ctx: ProblemContext,
                    constraint: str,
                    direct_max_tokens: int | None, cot_max_tokens: int | None) -> dict[str, Any]:
    kind = node["kind"]
    stage = f"{kind}"
    if kind == "DirectAnswer":
        msgs = [{"role": "system", "content": f"You are a {ROLE}. {constraint}"}, {"role": "user", "content": task}]
        return {"output": await _chat(ops, msgs, stage, direct_max_tokens)}
    if kind == "CoTStep":
        q = inp.get("output", inp["task"])
        system = (COT_LAST_SYSTEM if node["last_step"] else COT_STEP_SYSTEM).format(role=ROLE, constraint=constraint)
        resp = await _chat(ops, [{"role": "system", "content": system}, {"role": "user", "content": q}], stage,
                           cot_max_tokens)
        return {"output": resp if node["last_step"] else f"{q}. Here is the next thought. {resp}. ", "task": task}
    if kind == "CodeWriting":
        if inp.get("is_solved"):
            return dict(inp)
        user = REACT_PROMPT.format(question=task, solution=inp["output"], feedback=inp["feedback"]) \
            if "feedback" in inp else task
        code = await _chat(ops, [{"role": "system", "content": CODE_WRITING_SYSTEM}, {"role": "user", "content": user}],
                           stage, None)
        res = await ctx.benchmark.run_public_tests(code, ctx.problem) if ctx.benchmark.domain == "code" else None
        solved = res is not None and res["passed"] == res["total"]
        fb = "" if res is None else "\n".join(
            f"Tested passed:\n{r['test']}" if r["passed"] else f"Tests failed:\n{r['test']} # {r.get('error', '').strip()[-200:]}"
            for r in res["results"])
        return {"output": code, "feedback": fb, "is_solved": solved, "task": task}
    raise ValueError(f"unknown GPTSwarm node kind {kind!r}")


async def _chat(ops: O.Ops, messages: list[dict[str, str]], stage: str, max_tokens: int | None) -> str:
    key = "\n".join(m["content"] for m in messages)
    kw = {**ops.sampling, **({"max_tokens": max_tokens} if max_tokens else {})}
    out = await ops.ctx.generate(messages, stage=stage, role=ops.role, sample_offset=ops._offset(stage, key), **kw)
    return out[0].text


def final_decision(ctx: ProblemContext, answers: list[str], rng: random.Random) -> tuple[str, dict[str, Any]]:
    """MajorityVote over the answers' canonical keys (the benchmark's ``answer_key``; code: the program), ties
    at random (seeded); no answers -> '' (the released node raises and the swarm answers nothing)."""
    if not answers:
        return "", {"n": 0, "rule": "no-input"}
    bench = ctx.benchmark
    keys = [bench.answer_key(bench.extract(a or "", ctx.problem)[0]) for a in answers]
    keys = [k if k is not None else ("raw", a) for k, a in zip(keys, answers)]
    counts = Counter(keys)
    best = max(counts.values())
    tied = [k for k in dict.fromkeys(keys) if counts[k] == best]
    pick = tied[rng.randrange(len(tied))] if len(tied) > 1 else tied[0]
    i = keys.index(pick)
    return answers[i], {"n": len(answers), "chosen": i, "share": best / len(answers), "ties": len(tied)}


# ---- the method (validate-time sampled, test-time masked) ---------------------------------------------------

class GPTSwarm:
    """Runs a realized swarm per problem: ``mode: sample`` draws edges from the distribution (training),
    ``mode: mask`` keeps the edges with probability > 0.5 (the released test)."""

    def __init__(self, agents: list[str] | None = None, edge_logits: list[float] | None = None,
                 edge_logits_file: str | None = None, edge_logits_sha256: str | None = None, mode: str = "mask",
                 init_probability: float = 0.5, role: str | None = "executor", temperature: float | None = None,
                 max_tokens: int | None = None, direct_max_tokens: int | None = None,
                 cot_max_tokens: int | None = None, sample_salt: str = "test", name: str | None = None) -> None:
        if mode not in ("sample", "mask"):
            raise ValueError("GPTSwarm mode must be sample or mask")
        self.name = name or "gptswarm"
        self.agents = list(agents) if agents else None
        self.edge_logits = edge_logits
        self.edge_logits_file = edge_logits_file
        self.edge_logits_sha256 = edge_logits_sha256
        self.mode = mode
        self.init_probability = float(init_probability)
        self.role = role
        self.sampling = {"temperature": temperature, "max_tokens": max_tokens}
        self.direct_max_tokens = direct_max_tokens
        self.cot_max_tokens = cot_max_tokens
        self.salt = str(sample_salt)

    def _logits(self, swarm: dict[str, Any]) -> tuple[list[float], str]:
        if self.edge_logits_file:
            data = Path(self.edge_logits_file).read_bytes()
            sha = hashlib.sha256(data).hexdigest()
            if self.edge_logits_sha256 and sha != self.edge_logits_sha256:
                raise ValueError(f"GPTSwarm edge logits {self.edge_logits_file} have sha256 {sha[:12]}, "
                                 f"expected {self.edge_logits_sha256[:12]}")
            import json
            return [float(x) for x in json.loads(data)["logits"]], sha
        if self.edge_logits is not None:
            vals = [float(x) for x in self.edge_logits]
        else:
            p = self.init_probability
            vals = [math.log(p / (1 - p))] * len(swarm["potential"])
        return vals, hashlib.sha256(repr(vals).encode()).hexdigest()

    async def solve(self, problem: ProblemView, ctx: ProblemContext) -> Solution:
        agents = self.agents or SWARMS.get(ctx.benchmark.domain, SWARMS["qa"])
        swarm = build_swarm(agents)
        logits, sha = self._logits(swarm)
        seed = int.from_bytes(hashlib.sha256(f"{ctx.seed}:{problem.id}:{self.salt}".encode()).digest()[:8], "big")
        rng = random.Random(seed)
        real = realize(swarm, logits, rng=rng, mask=self.mode == "mask")
        ops = O.Ops(ctx, role=self.role, **self.sampling)
        task = ctx.benchmark.render(problem)
        out = await run_swarm(ops, swarm, real["edges"], task, ctx, constraint=ctx.benchmark.answer_instruction,
                              rng=rng, direct_max_tokens=self.direct_max_tokens, cot_max_tokens=self.cot_max_tokens)
        trace = {"gptswarm": {"agents": agents, "mode": self.mode, "logits_sha256": sha, "salt": self.salt,
                              "edges": real["edges"], "decisions": real["decisions"], "order": out["order"],
                              "vote": out["vote"], "outputs": out["outputs"]}}
        return Solution(answer=out["answer"], trace=trace)


class GPTSwarmOptimiser:
    """``search(sctx)``: REINFORCE on the edge logits over the validate split (module docstring)."""

    def __init__(self, num_iters: int = 200, batch_size: int = 4, lr: float = 0.1, init_probability: float = 0.5,
                 agents: list[str] | None = None, validate_limit: int | None = None, role: str | None = "executor",
                 temperature: float | None = None, max_tokens: int | None = None,
                 direct_max_tokens: int | None = None, cot_max_tokens: int | None = None,
                 node_optimize: bool = False) -> None:
        if node_optimize:
            raise NotImplementedError("GPTSwarm node (prompt/demonstration) optimisation is not implemented here "
                                      "(baselines/README.md, GPTSwarm row): set node_optimize=false")
        self.p = dict(num_iters=int(num_iters), batch_size=int(batch_size), lr=float(lr),
                      init_probability=float(init_probability), agents=agents, validate_limit=validate_limit,
                      role=role, temperature=temperature, max_tokens=max_tokens,
                      direct_max_tokens=direct_max_tokens, cot_max_tokens=cot_max_tokens)

    def workflow(self, *, mode: str, salt: str, logits_file: str | None = None, sha: str | None = None,
                 logits: list[float] | None = None, agents: list[str]) -> dict[str, Any]:
        p = self.p
        params = {"agents": agents, "edge_logits": logits, "edge_logits_file": logits_file,
                  "edge_logits_sha256": sha, "mode": mode, "init_probability": p["init_probability"],
                  "role": p["role"], "temperature": p["temperature"], "max_tokens": p["max_tokens"],
                  "direct_max_tokens": p["direct_max_tokens"], "cot_max_tokens": p["cot_max_tokens"],
                  "sample_salt": salt}
        return {"name": "gptswarm", "solver": "agentic_repro.baselines.autoflow.gptswarm:GPTSwarm", "params": params,
                "roles": [p["role"]] if p["role"] else [], "label": "GPTSwarm", "deviations": []}

    async def search(self, sctx: Any) -> Any:
        import json

        import torch  # pyright: ignore[reportMissingImports]  (the embed/train extra)

        from agentic_repro.baselines.autoflow.maas import _domain_of
        from agentic_repro.baselines.autoflow.search import SearchResult

        p = self.p
        agents = list(p["agents"] or SWARMS.get(_domain_of(sctx), SWARMS["qa"]))
        swarm = build_swarm(agents)
        init = math.log(p["init_probability"] / (1 - p["init_probability"]))
        logits = torch.nn.Parameter(torch.full((len(swarm["potential"]),), init))
        adam = torch.optim.Adam([logits], lr=p["lr"])
        work = Path(sctx.out_dir) / "gptswarm"
        work.mkdir(parents=True, exist_ok=True)
        live = work / "edge_logits_live.json"
        state = sctx.resume() or {"iter": 0, "epoch": 1, "batch": 0, "history": []}
        if state.get("logits") is not None:
            with torch.no_grad():
                logits.copy_(torch.tensor(state["logits"]))
            adam.load_state_dict(_adam_from_json(state["adam"]))
        cap = p["validate_limit"] if p["validate_limit"] is not None else sctx.spec.benchmark_cfg.get("limit")
        cap = None if cap is None else int(cap)
        bs = p["batch_size"]
        history = state["history"]
        while state["iter"] < p["num_iters"]:
            e, b = state["epoch"], state["batch"]
            data = json.dumps({"logits": [float(x) for x in logits.detach().tolist()]}).encode()
            live.write_bytes(data)
            sha = hashlib.sha256(data).hexdigest()
            end = (b + 1) * bs if cap is None else min((b + 1) * bs, cap)
            ev = await sctx.evaluate(self.workflow(mode="sample", salt=f"epoch{e}", logits_file=str(live),
                                                   agents=agents), tag=f"gptswarm_epoch{e}", limit=end)
            batch = sorted([r for r in ev.predictions if b * bs <= int(r["index"]) < end], key=lambda r: r["index"])
            stale = [r["id"] for r in batch if r["trace"]["gptswarm"]["logits_sha256"] != sha]
            if stale:
                raise RuntimeError(f"GPTSwarm: validate problems {stale} (epoch {e}) were sampled with other edge "
                                   f"logits than iteration {state['iter']}'s; remove {ev.run_dir} and "
                                   "search_state.json to restart")
            if batch:
                utils = [float(r["score"]) for r in batch]
                lps = [graph_log_prob(logits, r["trace"]["gptswarm"]["decisions"]) for r in batch]
                loss = -(torch.stack(lps) * torch.tensor(utils)).mean()
                adam.zero_grad()
                loss.backward()
                adam.step()
                state["iter"] += 1
                history.append({"round": state["iter"], "epoch": e, "batch": b, "ids": [r["id"] for r in batch],
                                "utilities": utils, "score": sum(utils) / len(utils), "loss": float(loss.item()),
                                "logits_sha256": sha,
                                "edge_probs": [round(sigmoid(float(x)), 4) for x in logits.detach().tolist()]})
            if len(batch) < bs or (cap is not None and end >= cap):
                state.update(epoch=e + 1, batch=0)
                if not batch and b == 0:
                    raise RuntimeError("GPTSwarm: the validate split has no problems")
            else:
                state["batch"] = b + 1
            state.update(history=history, logits=[float(x) for x in logits.detach().tolist()],
                         adam=_adam_to_json(adam.state_dict()))
            sctx.checkpoint(state)
            sctx.log(f"iteration {state['iter']}: utility {history[-1]['score'] if history else None}")
        final = [float(x) for x in logits.detach().tolist()]
        kept = [swarm["potential"][i] for i, x in enumerate(final) if sigmoid(x) > 0.5]
        scores = [s for h in history for s in h["utilities"]]
        last = history[-max(1, min(len(history), 5)):]
        return SearchResult(workflow={k: v for k, v in self.workflow(mode="mask", salt="test", logits=final,
                                                                     agents=agents).items()
                                      if k in ("solver", "params", "roles")},
                            validate_score=(sum(s for h in last for s in h["utilities"])
                                            / max(1, sum(len(h["utilities"]) for h in last))),
                            history=history,
                            extra={"not_as_paper": NOT_AS_PAPER,
                                   "agents": agents, "potential_edges": swarm["potential"], "edge_logits": final,
                                   "edge_probs": [sigmoid(x) for x in final], "kept_edges": kept,
                                   "mean_training_utility": (sum(scores) / len(scores)) if scores else None,
                                   "hyperparameters": dict(p)})


def _adam_to_json(sd: dict[str, Any]) -> dict[str, Any]:
    out = {"param_groups": sd["param_groups"], "state": {}}
    for k, v in sd["state"].items():
        out["state"][str(k)] = {n: (t.tolist() if hasattr(t, "tolist") else t) for n, t in v.items()}
    return out


def _adam_from_json(doc: dict[str, Any]) -> dict[str, Any]:
    import torch  # pyright: ignore[reportMissingImports]  (the embed/train extra)

    state = {}
    for k, v in doc["state"].items():
        state[int(k)] = {n: torch.tensor(t, dtype=torch.float32) for n, t in v.items()}
    return {"param_groups": doc["param_groups"], "state": state}


__all__ = ["SWARMS", "GPTSwarm", "GPTSwarmOptimiser", "build_swarm", "graph_log_prob", "realize", "run_swarm"]
