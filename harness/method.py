"""What the core knows about a method: an async ``solve(problem, ctx) -> Solution``.

Methods are named in ``configs/method/*.yaml`` by ``solver: module:attr``. A
function is called as ``fn(problem, ctx, **params)``; a class is built as
``cls(**params)`` and must have ``async solve(problem, ctx)``. ``problem`` is the
gold-free :class:`~harness.view.ProblemView`; ``roles: [...]`` in the config lists
the backbone roles the method calls (:mod:`agentic_repro.harness.roles`).

Methods that carry state across problems (e.g. online calibration) may set
``window_size`` and implement ``end_window(outcomes)``, ``state_dict()`` and
``load_state_dict(state)``: the runner then processes problems in fixed
windows, in problem order, and hands each window's solutions back in id order,
so the result does not depend on timing and a resumed run continues exactly.

Before any problem the runner checks the config's ``requires`` (``environment``: the benchmark must be an
interactive environment, as agents need) and awaits the method's ``preflight(run_ctx)`` when it has one
(e.g. "the search artifact exists", "the designer's adapter is served"): a method that cannot run stops
the run with one line instead of failing every problem.
"""
from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import Any, Protocol, runtime_checkable

from agentic_repro.harness.context import ProblemContext
from agentic_repro.harness.refs import resolve_ref
from agentic_repro.harness.types import Solution
from agentic_repro.harness.view import ProblemView


@runtime_checkable
class Method(Protocol):
    name: str

    async def solve(self, problem: ProblemView, ctx: ProblemContext) -> Solution: ...


class FunctionMethod:
    """Adapts ``async def fn(problem, ctx, **params)`` to :class:`Method`."""

    def __init__(self, name: str, fn: Callable[..., Awaitable[Solution]], params: dict[str, Any]) -> None:
        self.name, self._fn, self._params = name, fn, params

    async def solve(self, problem: ProblemView, ctx: ProblemContext) -> Solution:
        return await self._fn(problem, ctx, **self._params)


def resolve(target: str, what: str = "method.solver") -> Any:
    """The code a config names (``package.module:name``; :func:`agentic_repro.harness.refs.resolve_ref`)."""
    return resolve_ref(target, what)


def build_method(cfg: dict[str, Any]) -> Method:
    target = resolve(cfg["solver"])
    params = dict(cfg.get("params") or {})
    if inspect.isclass(target):
        method = target(**params)
        if not getattr(method, "name", None):
            method.name = cfg["name"]
        return method
    if inspect.iscoroutinefunction(target):
        return FunctionMethod(cfg["name"], target, params)
    raise TypeError(f"solver '{cfg['solver']}' is neither a class nor an async function")


#: Values of a method config's ``requires: [...]`` the core checks before any problem.
REQUIREMENTS = ("environment",)


def check_requirements(cfg: dict[str, Any], benchmark: Any) -> None:
    """Raise ``ValueError`` naming the method, the benchmark and the fix when ``requires`` is not met."""
    requires = cfg.get("requires") or []
    unknown = [r for r in requires if r not in REQUIREMENTS]
    if unknown:
        raise ValueError(f"method {cfg.get('name')}: requires={unknown} is not one of {list(REQUIREMENTS)}")
    if "environment" in requires and not getattr(benchmark, "is_environment", False):
        raise ValueError(f"method {cfg.get('name')} acts in an interactive environment, but benchmark "
                         f"{benchmark.name} is not one: use benchmark=alfworld or benchmark=webshop")
