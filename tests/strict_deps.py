"""A pytest plugin: in CI a missing optional dependency fails the tests that need it instead of skipping them.

``pytest.importorskip("torch")`` (module or test level) skips quietly, so a broken install would drop whole
files from a green CI run. With ``CI`` set (``.ci/run`` sets it; also GitHub Actions), such a skip is reported
as a failure naming the module. A module that fails to import at collection (``from thefuzz import fuzz``)
is an error of that file only: pyproject's ``--continue-on-collection-errors`` keeps the rest of the session.
"""
from __future__ import annotations

import os

import pytest


def strict() -> bool:
    """Whether skips for missing modules fail (``CI`` set to anything but empty/0/false)."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def _missing_module(text: str) -> bool:
    return "could not import" in text  # pytest.importorskip's reason: "could not import 'x': No module named 'x'"


def _fail(rep: pytest.CollectReport | pytest.TestReport, reason: str) -> None:
    rep.outcome = "failed"
    rep.longrepr = f"CI: a required optional dependency is missing, so this is a failure, not a skip: {reason}"


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    outcome = yield
    rep = outcome.get_result()
    if strict() and rep.skipped:
        reason = rep.longrepr[2] if isinstance(rep.longrepr, tuple) else str(rep.longrepr)
        if _missing_module(str(reason)):
            _fail(rep, str(reason))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    if strict() and rep.skipped and call.excinfo is not None and _missing_module(str(call.excinfo.value)):
        _fail(rep, str(call.excinfo.value))
