"""Program building: what the official harness would ``exec``, split into trusted and untrusted parts.

``humaneval_program`` / ``mbpp_program`` return a :class:`Program`: a ``str`` (the concatenation the
official harness runs) that also carries the split the sandbox enforces: ``prelude`` and ``test``
are benchmark code for the trusted runner, ``solution`` is generated code for the untrusted
process, ``entry_points`` the names the test needs from the solution.
"""
from __future__ import annotations

import ast
import builtins as _builtins
import json
import symtable
from functools import lru_cache
from typing import Any
from collections.abc import Iterable, Sequence

__all__ = ["Program", "humaneval_program", "mbpp_program"]


class Program(str):
    """Program text (what the official harness would ``exec``) plus its trust split.

    ``prelude`` and ``test`` are benchmark code run by the trusted process (prelude first, then
    the solution's ``entry_points`` are bound to proxies, then ``test``); ``solution`` is the
    generated code, run only in the untrusted process. ``str(program)`` is the concatenation.
    """

    prelude: str
    solution: str
    test: str
    entry_points: tuple[str, ...]

    def __new__(cls, text: str, *, prelude: str, solution: str, test: str,
                entry_points: Iterable[str]) -> Program:
        obj = super().__new__(cls, text)
        obj.prelude, obj.solution, obj.test = prelude, solution, test
        obj.entry_points = tuple(entry_points)
        return obj

    def __reduce__(self) -> tuple[Any, ...]:
        return (_make_program, (str(self), self.prelude, self.solution, self.test, self.entry_points))


def _make_program(text: str, prelude: str, solution: str, test: str, entry_points: tuple[str, ...]) -> Program:
    return Program(text, prelude=prelude, solution=solution, test=test, entry_points=entry_points)


@lru_cache(maxsize=2048)
def _globals_read_and_bound(src: str) -> tuple[frozenset[str], frozenset[str]]:
    """Names ``src`` reads as globals (at any depth) and names it binds at module level.

    Cached: a benchmark's test and prompt are the same for every candidate of a problem (CoT-SC,
    debate rounds, refinement steps), and building the symbol table costs about a compile."""
    top = symtable.symtable(src, "<test>", "exec")
    read: set[str] = set()
    bound = {s.get_name() for s in top.get_symbols() if s.is_assigned() or s.is_imported()
             or s.is_namespace()}
    stack = [top]
    while stack:
        table = stack.pop()
        for sym in table.get_symbols():
            if sym.is_referenced() and (table.get_type() == "module" or sym.is_global()):
                read.add(sym.get_name())
        stack.extend(table.get_children())
    return frozenset(read), frozenset(bound)


def _entry_points(test: str, prelude: str, explicit: Sequence[str] = (), solution: str | None = None) -> tuple[str, ...]:
    """The names the trusted test needs from the solution.

    Global names the test reads but neither it nor the prelude binds (nor builtins), plus
    ``explicit``. If that is empty (MBPP task 126 calls its function ``sum``), builtin names
    the test reads that the solution itself defines with ``def``/``class``.
    """
    try:
        read, bound = _globals_read_and_bound(test)
    except SyntaxError:
        return tuple(dict.fromkeys(explicit))
    builtin_names = set(dir(_builtins))
    pre_bound: frozenset[str] | set[str] = set()
    # the prelude's bindings matter only for a name the test reads beyond the explicit ones (HumanEval's helpers such
    # as `poly`), or when there are no explicit ones: else its symbol table (~0.3 ms a prompt) is not built at all
    if prelude.strip() and ((read - bound - builtin_names) - set(explicit) or not explicit):
        try:
            _, pre_bound = _globals_read_and_bound(prelude)
        except SyntaxError:
            pre_bound = set()
    names = (read - bound - pre_bound - builtin_names) | set(explicit)
    if not names and solution:
        try:
            defined = {n.name for n in ast.parse(solution).body
                       if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            defined = set()
        names = (read - bound - pre_bound) & builtin_names & defined
    return tuple(sorted(names))


def _test_modules(names: tuple[str, ...], explicit: Sequence[str] = ()) -> tuple[tuple[str, ...], str]:
    """(entry points, trusted imports): a test's free name that is a standard-library module (MBPP/596's
    asserts use ``sys`` without importing it) is the trusted side's own import, never the solution's binding
    (a solution's ``class sys`` with a ``getsizeof`` returning 0 must not pass); only the other names, and
    those the benchmark's protocol names (HumanEval's entry point), come from the solution."""
    modules = [n for n in names if n not in explicit and n in _STDLIB]
    return tuple(n for n in names if n not in modules), "".join(f"import {m}\n" for m in modules)


_STDLIB = frozenset(getattr(__import__("sys"), "stdlib_module_names", ()))


def humaneval_program(prompt: str, completion: str, test: str, entry_point: str) -> str:
    """HumanEval's ``prompt + completion + test + check(entry_point)``, split for the sandbox.

    The completion continues the prompt (or restates the whole function): the untrusted side
    runs ``prompt + completion``; the trusted side runs the prompt (for helpers like ``poly``),
    binds ``entry_point`` to the solution's function, then the test and ``check(entry_point)``.
    """
    solution = prompt + completion
    test_code = f"{test}\n\ncheck({entry_point})\n"
    entries, imports = _test_modules(_entry_points(test_code, prompt, [entry_point]), [entry_point])
    return Program(f"{solution}\n{test_code}", prelude=imports + prompt, solution=solution, test=test_code,
                   entry_points=entries)


def _import_lines(test_imports: Sequence[str] | str | None) -> list[str]:
    if test_imports is None:
        return []
    if isinstance(test_imports, str):
        s = test_imports.strip()
        if not s:
            return []
        if s.startswith("["):
            try:
                value = json.loads(s)
            except ValueError:
                value = ast.literal_eval(s)
            return [str(v) for v in value]
        return [s]
    return [str(v) for v in test_imports]


def mbpp_program(code: str, test_imports: Sequence[str] | str | None, test_list: Sequence[str] | str,
                 test_setup_code: str = "") -> str:
    """MBPP's ``test_imports + code + test_setup_code + asserts``, split for the sandbox.

    ``test_imports`` may be a list of import lines or that list as JSON / Python literal.
    The solution runs with the imports too (as in the official layout, code may rely on them).
    """
    prelude = "\n".join(_import_lines(test_imports))
    tests = [test_list] if isinstance(test_list, str) else list(test_list)
    solution = f"{prelude}\n{code}" if prelude else code
    test_code = f"{test_setup_code or ''}\n" + "\n".join(tests) + "\n"
    entries, imports = _test_modules(_entry_points(test_code, prelude, (), code))
    return Program(f"{solution}\n{test_code}", prelude=imports + prelude, solution=solution, test=test_code,
                   entry_points=entries)
