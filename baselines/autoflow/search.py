"""Workflow search on a benchmark's validate split → a frozen artifact.

``python -m agentic_repro.baselines.autoflow.search method=aflow benchmark=gsm8k backbone=local [backbone@roles.optimizer=...]``

The method config's ``search:`` block names the optimiser (``optimiser: module:Class``, ``params``); the
class is built with those params and ``await optimiser.search(sctx)`` gets a :class:`SearchContext`:

- ``await sctx.evaluate(method_cfg, tag=..., seed=...)`` scores a candidate (any method config) on the
  validate split through the ordinary :class:`~harness.runner.Runner`: its calls go to that run's
  ``calls.jsonl`` and the response cache, it resumes by finished problem ids, it scores with the real
  benchmark. Results live under ``<search dir>/evals/<tag>/``.
- ``await sctx.optimize(messages, stage=...)`` one optimiser call (role ``optimizer``) through the normal
  :class:`~harness.llm.LLMClient`: cached, in ``<search dir>/optimizer/calls.jsonl``.
- ``sctx.checkpoint(state)`` / ``sctx.resume()`` persist the optimiser's own state after each round, so a
  killed search resumes at the next unfinished round (and every call before it replays from the cache).

The optimiser returns a :class:`SearchResult`; the artifact (``agentic_repro.baselines.autoflow.artifact``) gets the
workflow, its validate score, the per-round history, both roles' identities and the search cost per role
summed from every ledger under the search folder.
"""
from __future__ import annotations

import asyncio
import copy
import json
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentic_repro.harness.cache import ResponseCache
from agentic_repro.harness.identity import backbone_identity, check_run_identity
from agentic_repro.harness.ledger import CallLog, CallSummary, LedgerFile
from agentic_repro.harness.llm import BudgetStop, DollarCap, LLMClient
from agentic_repro.harness.method import resolve
from agentic_repro.harness.lock import LOCK_NAME, FolderLock
from agentic_repro.harness.results import RunPaths, read_json, read_jsonl_tolerant, write_json_atomic
from agentic_repro.harness.roles import build_role_backbones, resolve_roles, role_identities
from agentic_repro.harness.runner import RunSpec, Runner, _budgets, spec_from_config
from agentic_repro.harness.spec import backbone_dir
from agentic_repro.harness.types import Completion, Message

from agentic_repro.baselines.autoflow.artifact import write_artifact

SEARCH_ROLES = ("optimizer", "executor")


class SearchSplitError(ValueError):
    """The configured search split is missing or shares problems with the benchmark's test split."""


def task_key(bench: Any, problem: Any) -> str:
    """What a problem *is* for leak checks: the task text the method sees (question, passage, prompt), with
    whitespace runs collapsed and case folded. Two files can hold one problem under two ids (DROP's AFlow
    validate and test files share 5 passages+questions), and its gold may be written differently in each
    (``75.81|85.53`` vs ``75.81``): the same text to solve is the same problem."""
    return " ".join(str(bench.render(problem)).split()).casefold()


def check_search_split(spec: RunSpec, split: str, shared_with_test: str = "refuse") -> dict[str, Any]:
    """The search split must exist and must not share a problem with the benchmark's ``test`` split, by id or
    by content (:func:`task_key`): a partitioned benchmark reads every row for a split name it does not know
    (DyFlow's SocialMaze and LiveBench have no validate part, so ``split: validate`` would search on their test
    problems too), and two files may hold the same problem under different ids. Returns what was checked, for
    the artifact. ``shared_with_test``: ``refuse`` (:class:`SearchSplitError`) or ``exclude`` (the record's
    ``excluded`` lists the search-split ids to leave out, :func:`exclude_shared` writes the split without them)."""
    from agentic_repro.harness.benchmark import build_benchmark

    def problems(name: str) -> tuple[Any, list[Any]]:
        bench = build_benchmark({**spec.benchmark_cfg, "split": name, "limit": None, "sample": None})
        return bench, bench.load()[0]

    name = spec.benchmark_cfg["name"]
    if split == "test":
        raise SearchSplitError(f"{name}: method.search.split=test: a search never runs on the test split")
    try:
        bench, mine = problems(split)
    except ValueError as exc:
        raise SearchSplitError(f"{name} has no '{split}' split for the search ({exc}); benchmarks without a validate "
                               "split search on their train split: method.search.split=train") from exc
    try:
        tbench, test = problems("test")
    except ValueError:
        tbench, test = None, []  # no test split (HotpotQA: validate only; the artifact refuses the searched problems)
    test_ids = {p.id for p in test}
    test_keys = {task_key(tbench, p): p.id for p in test}
    shared = [(p.id, p.id if p.id in test_ids else test_keys[task_key(bench, p)]) for p in mine
              if p.id in test_ids or task_key(bench, p) in test_keys]
    if shared_with_test not in ("refuse", "exclude"):
        raise SearchSplitError(f"method.search.shared_with_test={shared_with_test!r}: choose refuse or exclude")
    if shared and shared_with_test == "exclude":
        return {"split": split, "problems": len(mine) - len(shared), "test_problems": len(test),
                "shared_with_test": len(shared), "excluded": [a for a, _ in shared], "same_as_test": [b for _, b in shared],
                "compared": "ids and task text (whitespace and case normalised)"}
    if shared:
        same_id = sum(a == b for a, b in shared)
        pairs = ", ".join(f"{a}={b}" if a != b else a for a, b in shared[:5])
        raise SearchSplitError(f"{name}: the search split '{split}' shares {len(shared)} of its {len(mine)} problems "
                               f"with the test split ({same_id} by id, {len(shared) - same_id} by content under "
                               f"another id; {split}=test: {pairs}{', ...' if len(shared) > 5 else ''}): searching "
                               "on them would leak; use a split disjoint from test (DyFlow's benchmarks: "
                               "method.search.split=train; or method.search.shared_with_test=exclude to search "
                               "without them)")
    return {"split": split, "problems": len(mine), "test_problems": len(test), "shared_with_test": 0,
            "compared": "ids and task text (whitespace and case normalised)"}


def exclude_shared(spec: RunSpec, split: str, check: dict[str, Any], out_dir: Path) -> RunSpec:
    """``shared_with_test: exclude``: the search runs on a copy of the split file without the problems it shares
    with test (``<search dir>/split/<split>.jsonl``, rows in file order, each problem keeping its id); the
    returned spec reads it. Refused when the copy's ids differ from the original's (a benchmark whose ids follow
    the row's position and ignore an ``id`` field)."""
    import dataclasses

    from agentic_repro.evaluators.data import data_dir, read_jsonl
    from agentic_repro.harness.benchmark import build_benchmark

    if not check.get("excluded"):
        return spec
    bench_cfg = {**spec.benchmark_cfg, "split": split, "limit": None, "sample": None}
    bench = build_benchmark(bench_cfg)
    src = bench.split_file(data_dir())
    rows = read_jsonl(src)
    problems = {p.index: p for p in bench.load()[0]}
    drop = set(check["excluded"])
    # a row whose id came from its position (DROP: one row has no ``id``) keeps it as its ``id`` field
    keep = [r if i not in problems or r.get("id") else {**r, "id": problems[i].id}
            for i, r in enumerate(rows) if i not in problems or problems[i].id not in drop]
    target = out_dir / "split" / f"{split}.jsonl"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in keep), encoding="utf-8")
    cfg = {**spec.benchmark_cfg, "splits": {**spec.benchmark_cfg["splits"], split: str(target.resolve())}}
    ids = [p.id for p in build_benchmark({**cfg, "split": split, "limit": None, "sample": None}).load()[0]]
    if ids != [p.id for i, p in sorted(problems.items()) if p.id not in drop]:
        raise SearchSplitError(f"{cfg['name']}: method.search.shared_with_test=exclude needs ids that do not follow "
                               f"the row's position in {src}: give a split file without the shared problems instead")
    check["file"] = str(target)
    return dataclasses.replace(spec, benchmark_cfg=cfg, full_config={**spec.full_config, "benchmark": cfg})


class SearchIncomplete(RuntimeError):
    """A validate evaluation had infrastructure errors: its score is no result. Re-run to resume."""


@dataclass
class Evaluation:
    """One candidate's validate run: the mean score over answered problems and the per-problem records
    (with gold: the validate split is the optimiser's training signal, never the test split)."""

    score: float
    n: int
    predictions: list[dict[str, Any]]
    cost: dict[str, Any]
    run_dir: str
    questions: dict[str, str] = field(default_factory=dict)  # id -> the task text the workflow saw


@dataclass
class SearchResult:
    workflow: dict[str, Any]            # a method config {solver, params} that runs the found workflow
    validate_score: float
    history: list[dict[str, Any]]       # one entry per round
    extra: dict[str, Any] = field(default_factory=dict)


class SearchContext:
    """What an optimiser sees: validate evaluations, optimiser calls, a checkpoint (module docstring)."""

    def __init__(self, spec: RunSpec, search_cfg: dict[str, Any], out_dir: Path, *, backbone: Any = None,
                 servers: Any = None) -> None:
        self.spec = spec
        self.cfg = dict(search_cfg.get("params") or {})
        self.search_cfg = search_cfg
        self.out_dir = out_dir
        self.method_name = spec.method_cfg["name"]
        self.benchmark_name = spec.benchmark_cfg["name"]
        self.seed = spec.seed
        self._backbone = backbone
        self._servers = servers
        self._llm: LLMClient | None = None
        self._cap: DollarCap | None = None  # runner.budgets.max_usd: one cap for the whole search (optimiser + runs)
        self._cache: ResponseCache | None = None
        self._ledger: LedgerFile | None = None
        self._calls: CallLog | None = None
        from agentic_repro.harness.benchmark import build_benchmark

        self.domain = build_benchmark(spec.benchmark_cfg).domain  # math | code | qa | ...
        self.roles = resolve_roles(spec.backbone_cfg, spec.roles_cfg, list(SEARCH_ROLES))
        self.role_info: dict[str, Any] = {}
        self._backbones: dict[str, Any] = {}
        self.evaluated_ids: set[str] = set()  # every validate problem a candidate was scored on

    # ---- lifecycle -----------------------------------------------------------------------------
    async def open(self) -> None:
        if self.spec.full_config.get("restart") and self.out_dir.exists():
            # restart=true: the whole search starts over (the response cache still replays); the folder's
            # lock, held by run_search, stays
            import shutil

            for child in self.out_dir.iterdir():
                if child.name == LOCK_NAME:
                    continue
                shutil.rmtree(child) if child.is_dir() and not child.is_symlink() else child.unlink()
        self.out_dir.mkdir(parents=True, exist_ok=True)

        async def build(cfg: dict[str, Any]) -> Any:
            from agentic_repro.harness.backbones import build_backbone
            return await build_backbone(cfg, run_dir=self.out_dir, seed=self.seed, servers=self._servers)

        self._backbones = await build_role_backbones(self.roles, build, given=self._backbone)
        check_run_identity(RunPaths(self.out_dir), self.spec.full_config,
                           {n: backbone_identity(b) for n, b in self._backbones.items()},
                           restart=bool(self.spec.full_config.get("restart", False)))
        self.role_info = role_identities(self.roles, self._backbones)
        self._cache = ResponseCache(Path(self.spec.cache_cfg.get("path", ".cache/responses.sqlite")),
                                    self.spec.cache_cfg.get("mode", "read-write"))
        opt_dir = self.out_dir / "optimizer"
        opt_dir.mkdir(exist_ok=True)
        self._ledger = LedgerFile(opt_dir / "calls.jsonl")
        self._calls = CallLog(self._ledger, uuid.uuid4().hex[:12])
        role = self.roles["optimizer"]
        sampling = {**self.spec.sampling, **(role.backbone_cfg.get("sampling") or {})}
        self._llm = LLMClient(self._backbones["optimizer"], self._cache, run_id=f"search/{self.method_name}",
                              method=self.method_name, defaults=sampling, role="optimizer",
                              fail_fast_after=int(self.spec.runner_cfg.get("fail_fast_after", 3) or 0))
        max_usd = (self.spec.runner_cfg.get("budgets") or {}).get("max_usd")
        if max_usd is not None:  # what earlier invocations of this search billed counts (every ledger under it)
            spent = sum(float(c.get("cost_usd") or 0) for f in self.out_dir.rglob("calls.jsonl")
                        for c in read_jsonl_tolerant(f) if not c.get("cache_hit"))
            self._cap = DollarCap(float(max_usd), scope="search", spent=spent)
            self._llm.cap = self._cap

    async def close(self) -> None:
        if self._backbone is None:
            for bb in {id(b): b for b in self._backbones.values()}.values():
                await bb.aclose()
        if self._cache is not None:
            self._cache.close()
        if self._ledger is not None:
            self._ledger.close()

    # ---- what an optimiser calls ---------------------------------------------------------------
    async def optimize(self, messages: list[Message], *, stage: str, n: int = 1, sample_offset: int = 0,
                       **sampling: Any) -> list[Completion]:
        """Optimiser-role completions, cached and in ``optimizer/calls.jsonl`` (problem_id = ``stage``)."""
        assert self._llm is not None and self._calls is not None, "SearchContext.open() first"
        return await self._llm.generate(messages, stage=stage, problem_id=stage, seed=self.seed,
                                        sink=self._calls.append, n=n, sample_offset=sample_offset,
                                        role="optimizer", adapter=self.roles["optimizer"].adapter, **sampling)

    async def ask_optimizer(self, prompt: str, *, stage: str, **sampling: Any) -> str:
        return (await self.optimize([{"role": "user", "content": prompt}], stage=stage, **sampling))[0].text

    async def evaluate(self, method_cfg: dict[str, Any], *, tag: str, seed: int | None = None,
                       limit: int | None = None) -> Evaluation:
        """Run ``method_cfg`` on the validate split as an ordinary harness run under ``evals/<tag>``."""
        spec = self._eval_spec(method_cfg, tag, self.seed if seed is None else seed, limit)
        runner = Runner(spec, backbone=self._backbone, servers=self._servers, dollar_cap=self._cap)
        metrics = await runner.run()
        if metrics.get("budget_stop"):  # the search's dollar cap: the search stops here (resumable), one line
            raise BudgetStop(f"{metrics['budget_stop']} (in validate run {spec.out_dir}); raise "
                             "runner.budgets.max_usd and re-run the same search command to resume")
        problems = getattr(runner, "_problems", {}) or {}
        questions = {pid: runner.benchmark.render(p) for pid, p in problems.items()}
        preds = list({r["id"]: r for r in read_jsonl_tolerant(spec.out_dir / "predictions.jsonl")}.values())
        preds.sort(key=_problem_order)  # file order is completion order: two identical searches would diverge
        self.evaluated_ids.update(r["id"] for r in preds)
        if not metrics.get("complete"):
            first = metrics.get("first_error") or {}
            raise SearchIncomplete(f"validate run {spec.out_dir} is incomplete ({metrics.get('n_errors', 0)} "
                                   f"errors; first: {first.get('error')}); re-run the same search command to resume")
        return Evaluation(score=float(metrics["score"]), n=int(metrics["n"]), predictions=preds,
                          cost=metrics.get("by_role") or {}, run_dir=str(spec.out_dir), questions=questions)

    def _eval_spec(self, method_cfg: dict[str, Any], tag: str, seed: int, limit: int | None) -> RunSpec:
        s = self.spec
        bench = dict(s.benchmark_cfg)
        bench["split"] = self.search_cfg.get("split", "validate")
        if limit is not None:
            bench["limit"] = limit
        declared = list(method_cfg.get("roles") or [])
        roles_cfg = {k: v for k, v in s.roles_cfg.items() if k in declared}
        # the search's per-problem call budget (runner.budgets, else the searched method's own finite default) bounds
        # every validate run of a candidate too: a candidate's config is the optimiser's and carries none (issue 28)
        budgets = _budgets(s)
        full = copy.deepcopy(s.full_config)
        full.update(method=method_cfg, benchmark=bench, roles=roles_cfg, seed=seed, restart=False)
        full["runner"] = {**(full.get("runner") or {}), "budgets": budgets}  # recorded in the run's config.yaml
        return RunSpec(experiment=tag, seed=seed, method_cfg=method_cfg, benchmark_cfg=bench,
                       backbone_cfg=s.backbone_cfg, sampling=s.sampling, cache_cfg=s.cache_cfg,
                       runner_cfg={**s.runner_cfg, "progress": False, "budgets": budgets},
                       results_root=self.out_dir / "evals", full_config=full, roles_cfg=roles_cfg)

    def example_problem(self) -> tuple[str, Any]:
        """(task text, gold) of the first validate problem: ADAS shows the meta agent one example question."""
        from agentic_repro.harness.benchmark import build_benchmark

        bench = build_benchmark({**self.spec.benchmark_cfg, "split": self.search_cfg.get("split", "validate"),
                                 "limit": 1, "sample": None})
        problem = bench.load()[0][0]
        return bench.render(problem), problem.gold

    # ---- resumption ----------------------------------------------------------------------------
    @property
    def state_path(self) -> Path:
        return self.out_dir / "search_state.json"

    def checkpoint(self, state: dict[str, Any]) -> None:
        write_json_atomic(self.state_path, state)

    def resume(self) -> dict[str, Any] | None:
        return read_json(self.state_path, what="search checkpoint",
                         fix="delete it to redo the search's unfinished rounds (finished runs replay from the "
                             "cache), or re-run with restart=true")

    def log(self, message: str) -> None:
        with open(self.out_dir / "search.log", "a", encoding="utf-8") as fh:
            fh.write(f"{time.strftime('%H:%M:%S')} {message}\n")

    # ---- cost ----------------------------------------------------------------------------------
    def cost(self) -> dict[str, Any]:
        """Search cost per role from every ledger under the search folder (optimiser + validate runs): each call
        once. A resumed search replays its earlier calls from the response cache and its ledgers record them
        again (``cache_hit``): a replay of a call this search paid for (the same run, role, stage, problem,
        sample, seed and token counts as a fresh call in these ledgers) is shown apart (``replayed``), never
        added. A cache hit with no such call here was paid by another run (another search, or this one before
        ``restart=true``): it is part of what this search used, so it counts (``answered_by_cache_of_other_runs``)."""
        rows: list[dict[str, Any]] = []
        for path in sorted(self.out_dir.rglob("calls.jsonl")):
            rows.extend(r for r in read_jsonl_tolerant(path) if "stage" in r)
        fresh = [r for r in rows if not r.get("cache_hit")]
        paid = {_call_key(r) for r in fresh if not r.get("error")}
        replayed = [r for r in rows if r.get("cache_hit") and _call_key(r) in paid]
        borrowed = [r for r in rows if r.get("cache_hit") and _call_key(r) not in paid]
        s = CallSummary.of(fresh + borrowed)
        again = CallSummary.of(replayed)
        return {"by_role": s.by_role, "total": {"calls": s.calls, "backbone_calls": s.backbone_calls,
                                                "prompt_tokens": s.prompt_tokens,
                                                "completion_tokens": s.completion_tokens,
                                                "cost_usd": s.cost_usd, "billed_usd": s.billed_usd,
                                                "errors": s.errors,
                                                "answered_by_cache_of_other_runs": len(borrowed)},
                "replayed": {"calls": again.calls, "prompt_tokens": again.prompt_tokens,
                             "completion_tokens": again.completion_tokens, "cost_usd": again.cost_usd}}


def _call_key(r: dict[str, Any]) -> tuple[Any, ...]:
    """What identifies one call across its fresh ledger line and the lines of its replays."""
    return tuple(r.get(k) for k in ("run_id", "role", "stage", "problem_id", "sample_index", "seed", "temperature",
                                    "model", "prompt_tokens", "completion_tokens"))


def _problem_order(pred: dict[str, Any]) -> tuple[int, str]:
    """A prediction's place in its split (the problem's index), whatever order the problems finished in."""
    idx = pred.get("index")
    return (idx if isinstance(idx, int) else 1 << 62, str(pred.get("id")))


def search_dir(spec: RunSpec, search_cfg: dict[str, Any]) -> Path:
    """``results/<search experiment>/<benchmark>/<method>/<backbone>/seed=<s>/``."""
    exp = search_cfg.get("experiment") or "search"
    return (spec.results_root / exp / spec.benchmark_cfg["name"] / spec.method_cfg["name"]
            / backbone_dir(spec.backbone_cfg) / f"seed={spec.seed}")


async def run_search(spec: RunSpec, *, backbone: Any = None, servers: Any = None) -> dict[str, Any]:
    """Run the configured optimiser and write the artifact; returns the artifact document."""
    search_cfg = dict(spec.method_cfg.get("search") or {})
    if not search_cfg.get("optimiser"):
        raise ValueError(f"method {spec.method_cfg['name']} has no search.optimiser: it is not a searched method")
    split = str(search_cfg.get("split", "validate"))
    split_check = check_search_split(spec, split, str(search_cfg.get("shared_with_test", "refuse")))
    out = search_dir(spec, search_cfg)
    sctx = SearchContext(spec, search_cfg, out, backbone=backbone, servers=servers)
    optimiser = resolve(search_cfg["optimiser"], "method.search.optimiser")(**dict(search_cfg.get("params") or {}))
    started = time.time()
    with FolderLock(out, what="search folder"):  # one process per search folder (harness.lock)
        return await _search_locked(spec, search_cfg, split_check, out, sctx, optimiser, started)


async def _search_locked(spec: RunSpec, search_cfg: dict[str, Any], split_check: dict[str, Any], out: Path,
                         sctx: SearchContext, optimiser: Any, started: float) -> dict[str, Any]:
    split = str(search_cfg.get("split", "validate"))
    await sctx.open()
    try:
        sctx.spec = exclude_shared(spec, split, split_check, out)  # after open(): restart=true empties the folder
        result: SearchResult = await optimiser.search(sctx)
    finally:
        await sctx.close()
    doc = {
        "method": spec.method_cfg["name"], "label": spec.method_cfg.get("label"),
        "benchmark": spec.benchmark_cfg["name"], "split": search_cfg.get("split", "validate"),
        "seed": spec.seed, "workflow": result.workflow, "validate_score": result.validate_score,
        "history": result.history, "extra": result.extra, "roles": sctx.role_info,
        "optimizer": sctx.role_info.get("optimizer"), "executor": sctx.role_info.get("executor"),
        "search_cost": sctx.cost(), "search_config": search_cfg, "split_check": split_check,
        "validate_ids": sorted(sctx.evaluated_ids),  # the test-time method refuses these (no test-on-search leak)
        "deviations": list(spec.method_cfg.get("deviations") or []), "created": time.time(),
        "search_wall_s": round(time.time() - started, 3),
    }
    return write_artifact(out / "artifact.json", doc)


def search_main(container: dict[str, Any]) -> dict[str, Any]:
    from agentic_repro.harness.embedded.server import ServerPool

    spec = spec_from_config(container)
    with ServerPool() as pool:
        doc = asyncio.run(run_search(spec, servers=pool))
    path = search_dir(spec, dict(spec.method_cfg.get("search") or {})) / "artifact.json"
    print(json.dumps({"artifact": str(path), "validate_score": doc["validate_score"],
                      "rounds": len(doc["history"]), "search_cost": doc["search_cost"]["total"]}))
    return {"score": doc["validate_score"]}


def main() -> None:
    import hydra

    from agentic_repro.harness.run import guarded

    @hydra.main(config_path="../../configs", config_name="config", version_base="1.3")
    def _app(cfg: Any) -> float:
        return guarded(search_main, cfg)

    _app()


if __name__ == "__main__":
    main()
