"""The public core (``agentic_repro.harness``): every name in ``__all__`` is the object its home module defines, and
importing the package stays cheap (the names resolve on first use, not by importing the HTTP client)."""
from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

import agentic_repro.harness as core

AUTHOR_NEEDS = {"Solution", "ProblemView", "ProblemContext", "Benchmark", "Problem", "Score", "ScorerFailure",
                "has_final_answer"}


def test_the_public_core_exports_what_an_author_needs():
    assert AUTHOR_NEEDS <= set(core.__all__) and sorted(core.__all__) == sorted(core._HOME)
    for name in core.__all__:
        home = importlib.import_module(f"agentic_repro.harness.{core._HOME[name]}")
        assert getattr(core, name) is getattr(home, name), name


def test_an_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="NoSuchThing"):
        core.NoSuchThing


def test_the_scorer_failure_of_the_file_backed_benchmarks_is_the_core_one():
    from agentic_repro.evaluators.base import ScorerFailure
    assert ScorerFailure is core.ScorerFailure


def test_importing_the_core_does_not_import_the_context():
    code = ("import sys, agentic_repro.harness, agentic_repro.harness.types; "
            "print('agentic_repro.harness.context' in sys.modules, 'openai' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.split() == ["False", "False"]
