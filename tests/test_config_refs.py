"""One spelling for code in configs (``module:attr``), and run folders recorded in the older one still read as the
same configuration -- never a different configuration, and never the same as a different one (harness/refs.py,
harness/identity.py).

tests/fixtures/benchmark_blocks_08a4d41.json holds the benchmark blocks as composed at 08a4d41, before GSM8K and DROP
became YAML benchmarks and before the kinds were respelled (``agentic_repro.evaluators.math_tasks.GSM8K``).
"""
from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
import yaml

from agentic_repro.harness.identity import (IdentityMismatch, check_folder_config, identity_document,
                                            recorded_differences)
from agentic_repro.harness.refs import canonical_ref, declaration_sha256, resolve_ref
from agentic_repro.harness.results import RunPaths, write_json_atomic

ROOT = Path(__file__).resolve().parents[1]
OLD_BLOCKS = json.loads((ROOT / "tests" / "fixtures" / "benchmark_blocks_08a4d41.json").read_text(encoding="utf-8"))


def _resolved(bench: str, *overrides: str) -> dict[str, Any]:
    from agentic_repro.harness.compose import compose

    return compose([f"benchmark={bench}", "method=cot", "backbone=scripted", *overrides])


def _folder(tmp_path: Path, recorded: dict[str, Any], *, legacy: bool = False) -> RunPaths:
    """A run folder as an older checkout wrote it: identity.json (or, older still, config.yaml alone)."""
    paths = RunPaths(tmp_path / "run")
    paths.root.mkdir(parents=True)
    if legacy:
        paths.config.write_text(yaml.safe_dump(recorded), encoding="utf-8")
        paths.predictions.write_text("", encoding="utf-8")
    else:  # written as the older code did: the recorded spelling kept (no canonical_config)
        with mock.patch("agentic_repro.harness.identity.canonical_config", copy.deepcopy):
            doc = identity_document(recorded, {})
        assert doc["config"]["benchmark"]["kind"] == recorded["benchmark"]["kind"]
        write_json_atomic(paths.identity, doc)
    return paths


def _dotted_paths(path: Path) -> list[str]:
    """Lines of ``path`` that name code (kind:, solver:, ...) in the older pkg.mod.Attr spelling."""
    keys = ("kind", "solver", "run_counts", "optimiser", "engine", "script")
    out = []
    for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        key, _, value = line.split("#")[0].strip().partition(":")
        value = value.strip()
        if key in keys and "." in value and ":" not in value and " " not in value:
            out.append(f"{path.relative_to(ROOT)}:{lineno}: {line.strip()}")
    return out


def test_every_shipped_config_and_doc_spells_code_module_colon_attr() -> None:
    files = [*sorted((ROOT / "configs").rglob("*.yaml")), ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    assert [d for f in files for d in _dotted_paths(f)] == []


def test_canonical_ref_reads_the_old_spelling_as_the_loader_did() -> None:
    assert canonical_ref("agentic_repro.evaluators.math_tasks.MATH") == "agentic_repro.evaluators.math_tasks:MATH"
    assert canonical_ref("agentic_repro.evaluators.math_tasks:MATH") == "agentic_repro.evaluators.math_tasks:MATH"
    assert canonical_ref("scripted") == "scripted"  # a backbone kind is a name, not a path
    from agentic_repro.evaluators.math_tasks import MATH

    assert resolve_ref("agentic_repro.evaluators.math_tasks.MATH", "benchmark.kind") is MATH
    assert resolve_ref("agentic_repro.evaluators.math_tasks:MATH", "benchmark.kind") is MATH
    with pytest.raises(ValueError, match="benchmark.kind='agentic_repro.evaluators.math_tasks:MATHS' cannot be"):
        resolve_ref("agentic_repro.evaluators.math_tasks:MATHS", "benchmark.kind")


@pytest.mark.parametrize("legacy", [False, True], ids=["identity.json", "config.yaml"])
@pytest.mark.parametrize("bench", ["gsm8k", "drop", "math"])
def test_an_old_run_folder_is_the_same_configuration(tmp_path: Path, bench: str, legacy: bool) -> None:
    """gsm8k/drop: recorded with the class the YAML replaced, dotted kind; math: the dotted kind only."""
    new = _resolved(bench)
    old = {**new, "benchmark": OLD_BLOCKS[bench]}
    assert old["benchmark"]["kind"].count(":") == 0 and new["benchmark"]["kind"].count(":") == 1
    paths = _folder(tmp_path, old, legacy=legacy)
    check_folder_config(paths, new)  # no IdentityMismatch


@pytest.mark.parametrize("legacy", [False, True], ids=["identity.json", "config.yaml"])
@pytest.mark.parametrize("override,named", [
    ("benchmark.prompt='Q: {question}'", "benchmark.prompt"),          # the declaration changed: not the old class
    ("benchmark.readings.flexible=last_boxed", "benchmark.readings"),
    ("benchmark.extract=flexible", "benchmark.extract"),               # a key the old class read too
    ("benchmark.version=3", "benchmark.version"),
])
def test_a_changed_declaration_is_never_the_old_class(tmp_path: Path, override: str, named: str, legacy: bool) -> None:
    paths = _folder(tmp_path, {**_resolved("gsm8k"), "benchmark": OLD_BLOCKS["gsm8k"]}, legacy=legacy)
    new = _resolved("gsm8k", override)
    with pytest.raises(IdentityMismatch):
        check_folder_config(paths, new)
    assert any(d.startswith(named) for d in _differences(paths, new))


def _differences(paths: RunPaths, new: dict[str, Any]) -> list[str]:
    return recorded_differences(paths, identity_document(new, {}), backbones=False)[1]


def test_replaces_applies_only_to_the_class_it_names_and_only_while_its_pin_holds(tmp_path: Path) -> None:
    new = _resolved("gsm8k")
    # a folder of another class (DROP) is not GSM8K's, whatever the replaces block says
    paths = _folder(tmp_path / "a", {**new, "benchmark": {**OLD_BLOCKS["drop"], "name": "gsm8k"}})
    with pytest.raises(IdentityMismatch):
        check_folder_config(paths, new)
    assert "benchmark.kind: agentic_repro.evaluators.qa_tasks:DROP -> agentic_repro.evaluators.jsonl:JSONLBenchmark" \
        in _differences(paths, new)
    # a pin that does not match the declaration (edited without re-pinning) upgrades nothing
    repinned = {**new, "benchmark": {**new["benchmark"], "replaces": {**new["benchmark"]["replaces"], "sha256": "0" * 64}}}
    paths = _folder(tmp_path / "b", {**new, "benchmark": OLD_BLOCKS["gsm8k"]})
    with pytest.raises(IdentityMismatch):
        check_folder_config(paths, repinned)
    assert any(d.startswith("benchmark.fields.question: <absent> -> question") for d in _differences(paths, repinned))


@pytest.mark.parametrize("bench", ["gsm8k", "drop"])
def test_the_shipped_pin_matches_the_shipped_declaration(bench: str) -> None:
    """Edit a declaration that replaced a class and this fails: then either restore it, or drop `replaces:` (old
    folders are another configuration) after checking the old class's output is still reproduced."""
    block = _resolved(bench)["benchmark"]
    replaces = block["replaces"]
    assert replaces["sha256"] == declaration_sha256(block, replaces["added"])
    assert set(replaces["added"]) == set(block) - set(OLD_BLOCKS[bench]) - {"replaces"}
