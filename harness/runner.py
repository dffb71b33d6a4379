"""Run one (method, benchmark, backbones, seed): solve, score, append, summarise.

Problems run concurrently up to ``runner.max_concurrent_problems``; each one's
prediction and calls are appended as it completes. Finished ids are skipped on
a re-run, so an interrupted run resumes where it stopped.

The method sees each problem through its gold-free view (:mod:`agentic_repro.harness.view`); the runner scores
with the real problem, from the method's answer or, for an environment, from what the environment
reported (:mod:`agentic_repro.harness.env`). Backbones are built once per run for every role (:mod:`agentic_repro.harness.roles`).
"""
from __future__ import annotations

import asyncio
import dataclasses
import sys
import time
import traceback
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentic_repro.harness.backbones import build_backbone
from agentic_repro.harness.batch import BatchingBackbone, check_batch
from agentic_repro.harness.benchmark import Benchmark, build_benchmark
from agentic_repro.harness.cache import CacheError, ResponseCache
from agentic_repro.harness.calibration import calibration_metrics, reliability_diagram
from agentic_repro.harness.context import Budgets, ProblemContext, RunContext
from agentic_repro.harness.env import Engines, EnvHost, TrajectoryLog
from agentic_repro.harness.meta import run_metadata
from agentic_repro.harness.n_mode import n_mode_of
from agentic_repro.harness.method import Method, build_method, check_requirements, resolve
from agentic_repro.harness.identity import backbone_identity, check_run_identity
from agentic_repro.harness.extra_scorers import build_scorers
from agentic_repro.harness.llm import BudgetStop, DollarCap, LLMClient, RunAborted
from agentic_repro.harness.lock import FolderLock
from agentic_repro.harness.spec import backbone_dir
from agentic_repro.harness.validate import validate_run_config
from agentic_repro.harness.results import (ResultsWriteError, ResultWriter, RunPaths, compute_metrics, pass_at_k,
                             pending_exception, read_json, read_jsonl_tolerant, resume_report, sample_seed)
from agentic_repro.harness.roles import Role, build_role_backbones, resolve_roles, role_identities
from agentic_repro.harness.types import Problem, Score, Solution
from agentic_repro.harness.view import Backstage, BenchmarkInfo, ProblemView, enter, leave


#: Failures of the run, not of one problem: they stop the run (one line naming the file or cause) instead of
#: erroring every remaining problem after paying for it.
RUN_LEVEL: tuple[type[BaseException], ...] = (KeyboardInterrupt, asyncio.CancelledError, RunAborted, CacheError,
                                              ResultsWriteError)


@dataclass
class RunSpec:
    """The resolved pieces of one run (built from the Hydra config by :func:`spec_from_config`)."""

    experiment: str
    seed: int
    method_cfg: dict[str, Any]
    benchmark_cfg: dict[str, Any]
    backbone_cfg: dict[str, Any]
    sampling: dict[str, Any]
    cache_cfg: dict[str, Any]
    runner_cfg: dict[str, Any]
    results_root: Path
    full_config: dict[str, Any]
    roles_cfg: dict[str, Any] = field(default_factory=dict)  # roles.<name>: a backbone config and/or adapter
    samples_per_task: int = 1  # k independent samples per problem (distinct recorded seeds) -> pass@1..k

    @property
    def out_dir(self) -> Path:
        return (self.results_root / self.experiment / self.benchmark_cfg["name"] / self.method_cfg["name"]
                / backbone_dir(self.backbone_cfg) / f"seed={self.seed}")  # the folder names the model


def spec_from_config(cfg: dict[str, Any]) -> RunSpec:
    validate_run_config(cfg)  # every option checked (key, bad value, what is allowed) before any work
    bench = dict(cfg["benchmark"])
    for key in ("limit", "sample"):
        if cfg.get(key) is not None:
            bench[key] = cfg[key]
    return RunSpec(experiment=str(cfg.get("experiment", "default")), seed=int(cfg["seed"]),
                   method_cfg=dict(cfg["method"]), benchmark_cfg=bench, backbone_cfg=dict(cfg["backbone"]),
                   sampling=dict(cfg.get("sampling") or {}), cache_cfg=dict(cfg.get("cache") or {}),
                   runner_cfg=dict(cfg.get("runner") or {}), results_root=Path(cfg.get("results_root", "results")),
                   full_config=cfg, roles_cfg=dict(cfg.get("roles") or {}),
                   samples_per_task=int(cfg.get("samples_per_task") or 1))


def solution_from_record(rec: dict[str, Any]) -> Solution:
    return Solution(answer=rec.get("raw_output") or "", confidence=rec.get("confidence"), trace=rec.get("trace") or {})


def _budgets(spec: RunSpec) -> dict[str, Any]:
    """``runner.budgets``; a null ``max_calls_per_problem`` takes the method's own default (searched methods
    declare a finite one, issue 28)."""
    budgets = dict(spec.runner_cfg.get("budgets") or {})
    if budgets.get("max_calls_per_problem") is None and spec.method_cfg.get("max_calls_per_problem") is not None:
        budgets["max_calls_per_problem"] = int(spec.method_cfg["max_calls_per_problem"])
    return budgets


class Runner:
    def __init__(self, spec: RunSpec, backbone: Any | None = None, servers: Any | None = None,
                 dollar_cap: DollarCap | None = None) -> None:
        """``backbone`` overrides the configured ones (tests pass a scripted double here: one object for
        every role, or a dict from backbone config name to object); ``servers`` is the pool of embedded
        model servers shared across runs; ``dollar_cap`` a search's cap, shared by its runs (else
        ``runner.budgets.max_usd`` makes the run's own)."""
        self._dollar_cap = dollar_cap
        self.spec = spec
        self._backbone = backbone
        self._servers = servers
        self.paths = RunPaths(spec.out_dir)
        self.benchmark: Benchmark = build_benchmark(spec.benchmark_cfg)
        self.method: Method = build_method(spec.method_cfg)
        # the scorers the benchmark config names beside its own score (harness/extra_scorers.py: e.g. an LLM judge)
        self._scorers = build_scorers(spec.benchmark_cfg, spec.roles_cfg)
        declared = list(spec.method_cfg.get("roles") or [])  # the roles the method declares (harness/roles.py)
        declared += [s.role for s in self._scorers if s.role is not None and s.role not in declared]  # the run's
        self.roles: dict[str, Role] = resolve_roles(spec.backbone_cfg, spec.roles_cfg, declared)
        self.progress = None
        self._done_scores: list[float] = []
        self._done_cost = 0.0

    async def run(self) -> dict[str, Any]:
        """Solve, score and summarise, holding the folder's lock throughout (harness.lock): a second
        process on the same folder is refused before it reads or writes anything there."""
        with FolderLock(self.paths.root, what="results folder"):
            return await self._run()

    async def _run(self) -> dict[str, Any]:
        """Open the run (sandbox, problems, backbones, identity, metadata, cache, clients), solve what is not
        finished yet, then close everything and summarise: the summary is written whatever stopped the solving."""
        self._configure_sandbox()
        problems, data_info = self._load_problems()
        writer = ResultWriter(self.paths, fsync=bool(self.spec.runner_cfg.get("fsync", False)))
        backbones, distinct = await self._build_backbones()
        tasks = self._tasks(problems)  # the selection this invocation holds: meta.json `ids`, before any answer
        meta, started = await self._claim_folder(backbones, distinct, data_info, writer, [t[0] for t in tasks])
        cache = await self._open_cache(distinct)
        clients, ctx = self._make_clients(backbones, cache)
        await self._preflight(ctx, distinct, cache)
        self._prepare_problems(problems)
        finished = writer.finished()
        self._done_scores = [float(r["score"]) for r in finished.values() if r["id"] in {t[0] for t in tasks}]
        try:
            await self._solve(problems, tasks, finished, ctx, writer)
        except BudgetStop as exc:  # runner.budgets.max_usd: stopped at a call boundary, finished problems kept
            self._budget_stop = str(exc)
        except RunAborted as exc:  # every call failed; stop instead of failing each problem slowly
            self._aborted = str(exc)
        finally:
            if self.progress is not None:
                self.progress.close()
            if self._engines is not None:
                await self._engines.aclose()
            await _close(distinct, cache)
            metrics = self._finish(writer, tasks, meta, started, sum(c.backbone_calls for c in clients.values()))
        return metrics

    def _configure_sandbox(self) -> None:
        cfg = self.spec.full_config.get("sandbox") or {}
        if cfg.get("isolation"):  # how untrusted code is contained (evaluators/sandbox/README.md); meta.json records it
            from agentic_repro.evaluators.sandbox import configure as configure_sandbox

            packages = cfg.get("packages")
            configure_sandbox(isolation=cfg["isolation"], packages=None if packages is None else list(packages),
                              pod_per_run=cfg.get("pod_per_run"))

    def _load_problems(self) -> tuple[list[Problem], Any]:
        problems, data_info = self.benchmark.load()
        if self.benchmark.domain == "code" and not self.spec.benchmark_cfg.get("execute_code"):
            # fail before any backbone call rather than after
            raise ValueError(f"benchmark {self.benchmark.name} needs benchmark.execute_code=true to be scored")
        return problems, data_info

    async def _build_backbones(self) -> tuple[dict[str, Any], list[Any]]:
        """One backbone per distinct backbone config (every role maps to one of them), and the distinct ones."""
        async def build(cfg: dict[str, Any]) -> Any:
            bb = await build_backbone(cfg, run_dir=self.paths.root, seed=self.spec.seed, servers=self._servers)
            rc = self.spec.runner_cfg
            if check_batch(rc, str(self.spec.method_cfg.get("name")), cfg.get("kind")):  # harness/batch.py
                bb = BatchingBackbone(bb, self.paths.root, poll_s=float(rc.get("batch_poll_s", 30)),
                                      flush_s=float(rc.get("batch_flush_s", 1.0)))
            return bb

        backbones = await build_role_backbones(self.roles, build, given=self._backbone)
        return backbones, list({id(b): b for b in backbones.values()}.values())

    async def _claim_folder(self, backbones: dict[str, Any], distinct: list[Any], data_info: Any,
                            writer: ResultWriter, ids: list[str]) -> tuple[dict[str, Any], float]:
        """Check the folder is this configuration's, then write meta.json (with ``ids``, the record ids this
        invocation selects: what the folder's numbers must cover, harness.results.selection) and config.yaml:
        (meta, start time)."""
        spec = self.spec
        try:  # a results folder belongs to one configuration (harness.identity)
            check_run_identity(self.paths, spec.full_config, {n: backbone_identity(b) for n, b in backbones.items()},
                               restart=bool(spec.full_config.get("restart", False)), data=data_info.to_dict())
        except BaseException:
            await _close(distinct)
            raise
        started = time.time()
        roles_meta = role_identities(self.roles, backbones)
        meta = run_metadata(spec, data_info.to_dict(), backbones["default"], started=started, roles=roles_meta)
        meta["ids"] = list(dict.fromkeys(ids))
        earlier = read_json(self.paths.meta, what="the run's metadata", default=None)
        earlier_sandbox = earlier.get("sandbox") if isinstance(earlier, dict) else None
        if isinstance(earlier_sandbox, dict) and earlier_sandbox.get("note") and not meta["sandbox"].get("note"):
            # a folder resumed under bwrap keeps the answers an earlier invocation made without isolation
            meta["sandbox"] = {**meta["sandbox"], "note": earlier_sandbox["note"], "earlier": earlier_sandbox}
        writer.write_json(self.paths.meta, meta)
        _write_yaml(self.paths.config, spec.full_config)
        return meta, started

    async def _open_cache(self, distinct: list[Any]) -> ResponseCache:
        try:
            cache = ResponseCache(Path(self.spec.cache_cfg.get("path", ".cache/responses.sqlite")),
                                  self.spec.cache_cfg.get("mode", "read-write"))
        except BaseException:
            await _close(distinct)
            raise
        self._cache = cache
        return cache

    def _make_clients(self, backbones: dict[str, Any], cache: ResponseCache) -> tuple[dict[int, LLMClient],
                                                                                       RunContext]:
        """One LLM client per distinct backbone (roles on one backbone share it: one concurrency limit), and the
        run context the method sees."""
        spec = self.spec
        clients: dict[int, LLMClient] = {}
        for name, role in self.roles.items():
            bb = backbones[name]
            if id(bb) not in clients:
                sampling = {**spec.sampling, **(role.backbone_cfg.get("sampling") or {})}
                clients[id(bb)] = LLMClient(bb, cache, run_id=self._run_id(), method=self.method.name,
                                            defaults=sampling, role=name,
                                            fail_fast_after=int(spec.runner_cfg.get("fail_fast_after", 3) or 0),
                                            n_mode=n_mode_of(spec.method_cfg))  # harness/n_mode.py
        llms = {name: clients[id(backbones[name])] for name in self.roles}
        self._clients = list(clients.values())  # harness.rate_limit: metrics.json's rate_limit, the progress line
        max_usd = (spec.runner_cfg.get("budgets") or {}).get("max_usd")
        self._cap = self._dollar_cap or (None if max_usd is None else DollarCap(
            float(max_usd), spent=sum(float(r.get("cost_usd") or 0) for r in read_jsonl_tolerant(self.paths.calls)
                                      if not r.get("cache_hit"))))
        for client in self._clients:  # one cap for every client of the run (a search passes its own, shared)
            client.cap = self._cap
        ctx = RunContext(run_id=self._run_id(), seed=spec.seed, method=self.method.name, llms=llms,
                         benchmark=BenchmarkInfo.of(self.benchmark),
                         adapters={name: role.adapter for name, role in self.roles.items()},
                         budgets=Budgets(**_budgets(spec)))
        return clients, ctx

    async def _preflight(self, ctx: RunContext, distinct: list[Any], cache: ResponseCache) -> None:
        """Before any problem: a method that cannot run here fails now, with one line, not once per problem."""
        try:
            check_requirements(self.spec.method_cfg, self.benchmark)
            preflight = getattr(self.method, "preflight", None)
            if preflight is not None:
                await preflight(ctx)
        except BaseException:
            await _close(distinct, cache)
            raise

    def _prepare_problems(self, problems: list[Problem]) -> None:
        """The problems by id, their gold-free views, the environment engines and the trajectory log."""
        self._problems = {p.id: p for p in problems}
        hidden = self.benchmark.hidden()
        self._views = {p.id: ProblemView.of(p, hidden) for p in problems}
        self._engines = Engines(self.benchmark.env_spec()) if self.benchmark.is_environment else None
        self._trajectories = TrajectoryLog(self.paths.root / "trajectories.jsonl",
                                           fsync=bool(self.spec.runner_cfg.get("fsync", False)))

    async def _solve(self, problems: list[Problem], tasks: list[tuple[str, Problem, int | None, int]],
                     finished: dict[str, dict[str, Any]], ctx: RunContext, writer: ResultWriter) -> None:
        """Every task not finished yet: in windows for a stateful method, else all at once (bounded)."""
        self._start_progress(len(tasks), len(self._done_scores))
        window = int(getattr(self.method, "window_size", 0) or 0)
        if window > 0:
            if self.spec.samples_per_task > 1:
                raise ValueError(f"samples_per_task={self.spec.samples_per_task}: method {self.method.name} is "
                                 "stateful (window_size); its samples would not be independent")
            await self._run_windows(problems, finished, ctx, writer, window)
        else:
            todo = [t for t in tasks if t[0] not in finished]
            await self._run_batch(todo, ctx, writer)

    def _tasks(self, problems: list[Problem]) -> list[tuple[str, Problem, int | None, int]]:
        """(record id, problem, sample index or None, run seed of the attempt) for every prediction to make.

        With ``samples_per_task=k > 1`` each problem gets k records ``<id>#<j>``, sample j under the
        seed :func:`agentic_repro.harness.results.sample_seed` (j = 0 is the run seed, so it replays a plain run)."""
        k = self.spec.samples_per_task
        if k <= 1:
            return [(p.id, p, None, self.spec.seed) for p in problems]
        return [(f"{p.id}#{j}", p, j, sample_seed(self.spec.seed, j)) for p in problems for j in range(k)]

    def _run_id(self) -> str:
        s = self.spec
        return f"{s.experiment}/{s.benchmark_cfg['name']}/{s.method_cfg['name']}/{s.backbone_cfg['name']}/{s.seed}"

    async def _run_batch(self, todo: list[Any], ctx: RunContext, writer: ResultWriter) -> list[Solution]:
        """``todo``: tasks of :meth:`_tasks` (or problems, one sample each)."""
        limit = int(self.spec.runner_cfg.get("max_concurrent_problems")
                    or max(2, 2 * int(self.spec.backbone_cfg.get("max_concurrency", 1))))
        sem = asyncio.Semaphore(limit)

        async def one(t: Any) -> Solution:
            async with sem:
                if isinstance(t, Problem):
                    return await self._solve_and_record(t, ctx, writer)
                rid, p, j, seed = t
                return await self._solve_and_record(p, ctx, writer, sample=None if j is None else (rid, j, seed))

        tasks = [asyncio.ensure_future(one(p)) for p in todo]
        try:
            return list(await asyncio.gather(*tasks))
        except BaseException:
            # a run-level failure (every call failing, a full disk, a broken cache, a stop): the other problems
            # stop now, while the run can still record them, not after its files are closed
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise

    async def _run_windows(self, problems: list[Problem], finished: dict[str, dict[str, Any]], ctx: RunContext,
                           writer: ResultWriter, window: int) -> None:
        """Stateful methods: fixed windows in problem order; state saved after each window."""
        state_doc = read_json(self.paths.method_state, what="a stateful method's saved state",
                              fix="restart=true (the response cache replays the finished calls)") or {}
        done_windows = int(state_doc.get("windows_done", 0))
        if state_doc.get("state") is not None:
            self.method.load_state_dict(state_doc["state"])  # type: ignore[attr-defined]
        done_ids = state_doc.get("windows", [])
        for w, start in enumerate(range(0, len(problems), window)):
            members = problems[start:start + window]
            if w < done_windows:
                if done_ids[w] != [p.id for p in members]:
                    raise ValueError(
                        f"{self.paths.method_state} was written for another problem selection (window {w}); "
                        "a stateful method's results depend on it: use a new experiment=... or delete that folder")
                continue
            todo = [(p.id, p, None, self.spec.seed) for p in members if p.id not in finished]
            fresh = dict(zip((t[0] for t in todo), await self._run_batch(todo, ctx, writer)))
            outcomes = [(self._views[p.id], fresh[p.id] if p.id in fresh else solution_from_record(finished[p.id]))
                        for p in members]
            self.method.end_window(outcomes)  # type: ignore[attr-defined]
            done_ids = [*done_ids[:w], [p.id for p in members]]
            writer.write_json(self.paths.method_state, {"windows_done": w + 1, "window_size": window,
                                                        "windows": done_ids,
                                                        "state": self.method.state_dict()})  # type: ignore[attr-defined]

    async def _solve_and_record(self, problem: Problem, ctx: RunContext, writer: ResultWriter,
                                sample: tuple[str, int, int] | None = None) -> Solution:
        """Solve one problem, score it, append its record. ``sample``: (record id, sample index, its run
        seed) when the run makes several samples per problem. A failure of the problem (the method, the environment,
        a scorer) is its ``status: error``, never a score; a failure of the run propagates."""
        attempt = uuid.uuid4().hex[:12]
        if sample is not None:  # an independent sample: its own run seed (request seeds, ctx.rng, env seed)
            ctx = dataclasses.replace(ctx, seed=sample[2])
        view = self._views[problem.id]
        pctx = ctx.for_problem(view, writer.call_log(attempt))  # each call hits calls.jsonl as it returns
        host = None
        if self._engines is not None:
            host = EnvHost(problem, engines=self._engines, custom=self.benchmark.engine(problem),
                           max_steps=self.benchmark.max_steps, run_seed=ctx.seed, attempt=attempt,
                           log=self._trajectories)
        stage = Backstage(pctx.key, self.benchmark, problem, self._problems, host)
        solution, status, error, latency = await self._run_method(view, pctx, stage, host)
        self._raise_run_level(writer)  # a method that swallowed a failed ledger or cache write does not hide it
        if host is not None and host.failure and status == "ok":
            # the method caught the failure and answered anyway: still an error, never a score
            status, error = "error", f"EnvironmentFailure: {host.failure}"
        if status == "error":
            value, extracted, details = 0.0, None, {"not_scored": "the problem errored"}
        else:
            status, error, value, extracted, details = await self._score_or_error(solution, problem, host)
        scored: dict[str, Any] = {}  # what the benchmark's other scorers record beside the prediction
        if self._scorers and status == "ok" and host is None:
            value, status, error = await self._extra_scores_or_error(ctx, pctx, problem, solution, value, scored)
        summary = pctx.summary()
        rec = {
            "id": problem.id if sample is None else sample[0], "index": problem.index, "status": status,
            "error": error, "attempt": attempt,
            "raw_output": solution.answer, "extracted": extracted, "gold": problem.gold, "score": value,
            "score_details": details, "confidence": solution.confidence,
            "calls": summary.calls, "backbone_calls": summary.backbone_calls,
            "prompt_tokens": summary.prompt_tokens, "completion_tokens": summary.completion_tokens,
            "cost_usd": summary.cost_usd, "cost_by_stage": summary.by_stage,
            "latency_s": latency, "trace": solution.trace,
            "tool_calls": [c.to_dict() for c in stage.tool_calls],
        }
        if host is not None:
            rec["episodes"] = [ep.to_dict() for ep in host.episodes]
        rec.update(scored)
        if sample is not None:
            rec.update(problem_id=problem.id, sample=sample[1], sample_seed=sample[2])
        writer.append(rec, pctx.calls)
        if status == "ok":  # the progress bar's score is over answered problems, like metrics.json
            self._done_scores.append(value)
        self._done_cost += summary.cost_usd
        self._tick()
        return solution

    async def _run_method(self, view: ProblemView, pctx: ProblemContext, stage: Backstage,
                          host: EnvHost | None) -> tuple[Solution, str, str | None, float]:
        """The method on one problem: (solution, status, error, the method's seconds). Its exception is the
        problem's error; the environment's episodes are closed and the backstage left whatever happens."""
        token = enter(stage)  # the method's views reach the real problem only through this (harness.view)
        t0 = time.perf_counter()
        status, error = "ok", None
        try:
            solution = await self.method.solve(view, pctx)
            if not isinstance(solution, Solution):
                raise TypeError(f"method {self.method.name} returned {type(solution).__name__}, not Solution")
        except RUN_LEVEL:
            raise
        except Exception as exc:  # noqa: BLE001 - one problem's failure must not end the run
            status, error = "error", f"{type(exc).__name__}: {exc}"
            solution = Solution(answer="", trace={"traceback": traceback.format_exc(limit=8)})
        finally:
            try:
                if host is not None:
                    await host.close_all()
            finally:
                leave(token)
        latency = round(time.perf_counter() - t0, 3)  # the method's time: scoring and judging are not the method's
        return solution, status, error, latency

    async def _score_or_error(self, solution: Solution, problem: Problem,
                              host: EnvHost | None) -> tuple[str, str | None, float, Any, dict[str, Any]]:
        """(status, error, score, extracted, details) of an answered problem; a scorer that raises (after its
        retries) makes it an error, never a 0."""
        try:
            score = await self._score(solution, problem, host)
            return "ok", None, score.value, score.extracted, score.details
        except RUN_LEVEL:
            raise
        except Exception as exc:  # noqa: BLE001 - a scorer crash is an error, never a 0
            # Scorers turn malformed model output into a 0 themselves (extracted None); an exception
            # here (after its retries) is a crash in our code or an evaluator that cannot judge.
            return ("error", f"ScoringError: {type(exc).__name__}: {exc}", 0.0, None,
                    {"not_scored": "the scorer raised", "traceback": traceback.format_exc(limit=8)})

    async def _extra_scores_or_error(self, ctx: RunContext, pctx: ProblemContext, problem: Problem,
                                     solution: Solution, value: float,
                                     scored: dict[str, Any]) -> tuple[float, str, str | None]:
        """The benchmark's other scorers (harness/extra_scorers.py) on an answered prediction, their records into
        ``scored``: (the score — a headline scorer's —, status, error). A failure is the problem's error, never
        a 0."""
        for scorer in self._scorers:
            try:
                value = await scorer.score(ctx, pctx, self.benchmark, problem, solution, value, scored)
            except RUN_LEVEL:
                raise
            except Exception as exc:  # noqa: BLE001 - reported as this problem's error, retried on resume
                return value, "error", f"{scorer.error_label}: {type(exc).__name__}: {exc}"
        return value, "ok", None

    async def _score(self, solution: Solution, problem: Problem, host: EnvHost | None) -> Score:
        """The benchmark's score, retried ``runner.score_retries`` times (default 1) when the scorer raises:
        an evaluator that could not judge (a dead equivalence child, a sandbox that timed out) may judge on
        a second try; one that fails again makes the problem an error."""
        retries = int(self.spec.runner_cfg.get("score_retries", 1) or 0)
        for attempt in range(retries + 1):
            try:
                if host is not None:  # the environment's verdict, never the method's claim
                    return await self.benchmark.score_episodes(host.episodes, problem)
                for scorer in self._scorers:  # a scorer that is the prediction's score (e.g. a headline judge)
                    stand_in = scorer.stand_in(self.benchmark, solution.answer, problem)
                    if stand_in is not None:
                        return stand_in
                return await self.benchmark.score(solution.answer, problem)
            except RUN_LEVEL:
                raise
            except Exception:  # retried, then the caller makes it the problem's error
                if attempt >= retries:
                    raise
        raise AssertionError("unreachable")

    def _raise_run_level(self, writer: ResultWriter) -> None:
        for err in (writer.ledger.error, writer.journal.error, getattr(getattr(self, "_cache", None), "write_error", None)):
            if err is not None:
                raise err
        if getattr(self, "_cap", None) is not None:  # a method that swallowed the cap's stop is not recorded
            self._cap.check()

    # ---- progress and summary ------------------------------------------------------------------
    def _start_progress(self, total: int, done: int) -> None:
        if not self.spec.runner_cfg.get("progress", True):
            return
        from tqdm import tqdm

        s = self.spec
        self.progress = tqdm(total=total, initial=done, file=sys.stderr, dynamic_ncols=True,
                             desc=f"{s.method_cfg['name']}/{s.benchmark_cfg['name']}/seed={s.seed}")
        self._tick(advance=False)

    def _tick(self, advance: bool = True) -> None:
        if self.progress is None:
            return
        if advance:
            self.progress.update(1)
        n = len(self._done_scores)
        score = 100 * sum(self._done_scores) / n if n else 0.0
        rate = " ".join(p for p in (c.progress() for c in getattr(self, "_clients", ())) if p)
        self.progress.set_postfix_str(f"score={score:.1f} $={self._done_cost:.4f}" + (f" {rate}" if rate else ""))

    def _finish(self, writer: ResultWriter, tasks: list[tuple[str, Problem, int | None, int]], meta: dict[str, Any],
                started: float, backbone_calls: int) -> dict[str, Any]:
        """Metrics from the run's files (harness.results). A write error here never masks an
        exception already propagating (the first failure is the one reported)."""
        pending = pending_exception()
        writer.close()
        ids = {t[0] for t in tasks}
        preds = [r for r in read_jsonl_tolerant(self.paths.predictions) if r["id"] in ids]
        calls = read_jsonl_tolerant(self.paths.calls)
        metrics = compute_metrics(preds, calls, self.spec.benchmark_cfg.get("metric", "score"), selected=len(tasks))
        metrics["ids"] = list(dict.fromkeys(t[0] for t in tasks))  # what metrics.json covers (the viewer reads it)
        latest = list({r["id"]: r for r in preds}.values())  # each record's latest prediction
        answered = [r for r in latest if r.get("status") != "error"]
        self._add_answer_metrics(metrics, answered, latest, tasks)
        self._add_invocation(metrics, calls, preds, started, backbone_calls)
        try:
            self._add_calibration(metrics, answered)
            writer.write_json(self.paths.metrics, metrics)
            meta["ended"] = time.time()
            # the snapshots that answered and their fingerprints (harness.pricing: each line is priced by its own)
            meta["served"] = {"snapshots": metrics["totals"].get("served") or {},
                              "fingerprints": metrics["totals"].get("fingerprints") or {}}
            writer.write_json(self.paths.meta, meta)
        except OSError:
            if pending is None:
                raise
        return metrics

    def _add_answer_metrics(self, metrics: dict[str, Any], answered: list[dict[str, Any]],
                            latest: list[dict[str, Any]], tasks: list[tuple[str, Problem, int | None, int]]) -> None:
        """pass@k over samples, the other scorers' numbers (e.g. an LLM judge's), the method's own counters."""
        thr = float(self.spec.runner_cfg.get("correct_threshold", 0.5))
        k = self.spec.samples_per_task
        if k > 1:
            metrics.update(samples_per_task=k, n_problems=len({t[1].id for t in tasks}),
                           **pass_at_k(answered, k, thr))
        for scorer in self._scorers:
            scorer.add_metrics(metrics, answered, latest, k, thr)
        if self.spec.method_cfg.get("run_counts"):  # a method's own counters (fallbacks, re-asks), from its config
            metrics["method_counts"] = resolve(self.spec.method_cfg["run_counts"])(latest)

    def _add_invocation(self, metrics: dict[str, Any], calls: list[dict[str, Any]], preds: list[dict[str, Any]],
                        started: float, backbone_calls: int) -> None:
        """What this invocation did (calls, wall time, what it resumed), the rate controllers, an abort."""
        resumed = resume_report(calls, read_jsonl_tolerant(self.paths.requests), preds, started)
        metrics["this_invocation"] = {"backbone_calls": backbone_calls, "wall_s": round(time.time() - started, 3),
                                      "resumed": resumed}
        metrics["rate_limit"] = {c.role: c.rate_summary() for c in getattr(self, "_clients", ())}
        if getattr(self, "_aborted", None):
            metrics["aborted"] = self._aborted
        if getattr(self, "_cap", None) is not None:
            metrics["budget"] = self._cap.summary()
        if getattr(self, "_budget_stop", None):
            metrics["budget_stop"] = self._budget_stop
        if resumed["lost_in_flight"] or resumed["interrupted_problems"]:
            print(f"resumed: {resumed['interrupted_problems']} problem(s) were interrupted by an earlier stop with "
                  f"{resumed['lost_in_flight']} request(s) in flight; that stop cost {resumed['rebought']} re-sent "
                  f"request(s); {resumed['replayed_from_cache']} of their calls were replayed from the cache",
                  file=sys.stderr)

    def _add_calibration(self, metrics: dict[str, Any], answered: list[dict[str, Any]]) -> None:
        """Calibration of the answers that carry a confidence, and their reliability diagram."""
        conf = [(float(r["confidence"]), float(r["score"])) for r in answered if r.get("confidence") is not None]
        if conf:
            thr = float(self.spec.runner_cfg.get("correct_threshold", 0.5))
            cal = calibration_metrics([c for c, _ in conf], [1.0 if s >= thr else 0.0 for _, s in conf])
            metrics["calibration"] = {k: v for k, v in cal.items() if k != "bins"}
            metrics["calibration"]["bins"] = cal["bins"]
            reliability_diagram(cal, self.paths.reliability, self._run_id())


async def _close(backbones: list[Any], cache: ResponseCache | None = None) -> None:
    """Close the run's backbones (their HTTP clients, in-process models), then its cache."""
    for bb in backbones:
        await bb.aclose()
    if cache is not None:
        cache.close()


def _write_yaml(path: Path, obj: dict[str, Any]) -> None:
    import yaml

    path.write_text(yaml.safe_dump(obj, sort_keys=False), encoding="utf-8")


def run_spec(spec: RunSpec, servers: Any | None = None) -> dict[str, Any]:
    """Run one spec. Pass a shared ``servers`` pool to reuse embedded servers across runs;
    without one, a pool is made for this run and its servers stop when it ends."""
    if servers is not None:
        return asyncio.run(Runner(spec, servers=servers).run())
    from agentic_repro.harness.embedded.server import ServerPool

    with ServerPool() as pool:
        return asyncio.run(Runner(spec, servers=pool).run())
