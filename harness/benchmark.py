"""The benchmark interface the core runs against (loading, prompting, scoring, tools, environments).

It lives in the core so that ``harness/`` imports no evaluator: ``evaluators/base.py`` adds the
file and hub loaders on top of it, and any package may provide a benchmark by naming its class in
``benchmark.kind``. The runner scores with the real :class:`Problem`; methods only ever see the
gold-free view built from it (:mod:`agentic_repro.harness.view`).
"""
from __future__ import annotations

from dataclasses import dataclass
from collections.abc import Hashable
from typing import TYPE_CHECKING, Any

from agentic_repro.harness.refs import resolve_ref
from agentic_repro.harness.types import Problem, Score

if TYPE_CHECKING:
    from agentic_repro.harness.env import Engine, EnvSpec, Episode
    from agentic_repro.harness.tools import Tool


class ScorerFailure(RuntimeError):
    """Our scorer could not judge an answer (its message names the checker and what failed): an infrastructure
    failure, so the runner retries and then records the problem as an error, never a 0 (malformed *model output* is
    a wrong answer instead: 0, extracted None)."""


class NoEpisode(RuntimeError):
    """An environment benchmark's problem ended without any episode: the method never played."""


@dataclass(frozen=True)
class DataInfo:
    """Which data a run read (recorded in meta.json)."""

    file: str
    sha256: str
    total: int
    selected: int
    split: str

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


class Benchmark:
    """A loader + a prompt format + a scorer; optionally tools and an interactive environment.

    ``hidden_fields`` names the fields of ``Problem.fields`` a method must not see (the scored tests,
    say); the config may add more with ``hidden_fields: [...]``. ``gold`` is always hidden.
    """

    domain: str = "generic"  # "math" | "code" | "qa" | "env" | ...
    hidden_fields: tuple[str, ...] = ()

    def __init__(self, cfg: dict[str, Any]) -> None:
        self.cfg = cfg
        self.name: str = cfg["name"]
        self.version = str(cfg.get("version", "1"))
        self.answer_instruction: str = cfg.get("answer_instruction", "")

    def hidden(self) -> frozenset[str]:
        """Every field name withheld from methods (class declaration + config)."""
        return frozenset(self.hidden_fields) | frozenset(self.cfg.get("hidden_fields") or ())

    # ---- loading -------------------------------------------------------------------------------
    def load(self) -> tuple[list[Problem], DataInfo]:
        """The selected problems, in processing order, and what was read."""
        raise NotImplementedError

    # ---- prompting -----------------------------------------------------------------------------
    def render(self, problem: Problem) -> str:
        """The task as the model reads it (question, context, signature...)."""
        raise NotImplementedError

    def prompt(self, problem: Problem, template: str) -> str:
        """Fill a method's template; ``{task}`` and ``{answer_instruction}`` are available."""
        return template.format(task=self.render(problem), answer_instruction=self.answer_instruction)

    # ---- scoring -------------------------------------------------------------------------------
    def extract(self, text: str, problem: Problem) -> tuple[Any, str]:
        """(extracted answer, name of the extraction rule that fired)."""
        raise NotImplementedError

    def answer_key(self, extracted: Any) -> Hashable | None:
        """A canonical form for voting: equal keys mean 'the same answer'."""
        return None if extracted is None else str(extracted).strip()

    async def score(self, text: str, problem: Problem) -> Score:
        raise NotImplementedError

    # ---- tools offered to methods --------------------------------------------------------------
    def public_tests(self, problem: Problem) -> list[str]:
        """Tests a method may run (never the hidden ones the score uses)."""
        return []

    async def run_public_tests(self, text: str, problem: Problem) -> dict[str, Any] | None:
        """Run the public tests on a candidate; ``None`` when the benchmark has none."""
        return None

    def tools(self, problem: Problem) -> list[Tool]:
        """The tools a method may call on ``problem`` (``ctx.tools`` / ``ctx.call_tool``).

        Called by the runner with the real problem; a tool's function runs on the scorer side and
        only its result reaches the method. By default: ``run_public_tests`` when the problem has public
        tests (or, for a class that overrides ``run_public_tests`` but not ``public_tests``, always).
        """
        from agentic_repro.harness.tools import Tool

        cls = type(self)
        if cls.public_tests is not Benchmark.public_tests:
            offered = bool(self.public_tests(problem))
        else:
            offered = cls.run_public_tests is not Benchmark.run_public_tests
        if not offered:
            return []

        async def run_public_tests(text: str) -> dict[str, Any] | None:
            return await self.run_public_tests(text, problem)

        return [Tool("run_public_tests", run_public_tests,
                     "Run the public tests (the ones the prompt may show, never the scored ones) on a candidate "
                     "solution; returns {passed, total, results}.", {"text": "the candidate's full text"})]

    # ---- interactive environments --------------------------------------------------------------
    def env_spec(self) -> EnvSpec | None:
        """The ``env:`` block of the config (engine, params, process, max_steps, ...), if any."""
        from agentic_repro.harness.env import EnvSpec

        return EnvSpec.from_config(self.cfg.get("env"))

    def engine(self, problem: Problem) -> Engine | None:
        """A custom in-process engine for ``problem`` (async ``reset``/``step``/``close``), or ``None``
        to build the one ``env.engine`` names (see :mod:`agentic_repro.harness.env`)."""
        return None

    @property
    def is_environment(self) -> bool:
        return bool(self.cfg.get("env")) or type(self).engine is not Benchmark.engine

    @property
    def max_steps(self) -> int | None:
        spec = self.env_spec()
        return None if spec is None or spec.max_steps is None else int(spec.max_steps)

    async def score_episodes(self, episodes: list[Episode], problem: Problem) -> Score:
        """The problem's score from what the environment reported, never from the method's answer.

        Default: the last episode; its success flag when the environment reports one, else its
        total reward. A method that never reset the environment raises :class:`NoEpisode`: the
        problem is an error (a method that cannot play this benchmark), never a score of 0.
        """
        if not episodes:
            raise NoEpisode(f"benchmark {self.name} is an environment, but the method played no episode "
                            "(it never called `await ctx.env()` / `reset()`): use a method that acts in "
                            "environments")
        last = episodes[-1]
        value = float(last.success) if last.success is not None else float(last.total_reward)
        return Score(value, None, {"rule": "environment", "episode": last.index, "steps": last.steps,
                                   "success": last.success, "total_reward": last.total_reward,
                                   "done": last.done, "truncated": last.truncated,
                                   "episodes": len(episodes)})


def build_benchmark(cfg: dict[str, Any]) -> Benchmark:
    """Instantiate the class named by ``cfg['kind']``, ``module:Class`` like every config path (a run folder's
    older ``module.Class`` is read as the same path: :mod:`agentic_repro.harness.refs`)."""
    cls = resolve_ref(str(cfg["kind"]), f"benchmark {cfg.get('name')}: kind")
    if not (isinstance(cls, type) and issubclass(cls, Benchmark)):
        msg = f"benchmark {cfg.get('name')}: kind={cfg['kind']!r} is not a harness.benchmark.Benchmark"
        raise ValueError(msg)  # a config error: harness.run prints a ValueError in one line
    return cls(cfg)
