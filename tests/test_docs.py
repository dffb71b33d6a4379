"""Docs that cannot go stale: every command and config snippet in README.md and docs/ names things that exist.

Parsed, never served: a ``make`` target must be in the Makefile, ``python -m`` a module that imports (ours under the
one name ``agentic_repro``), an ``agentic-repro`` subcommand one the CLI has, each ``group=value`` override a config
file of configs/<group>/, a ``python -c`` program's imports ours under the one name, and a YAML snippet's
``module:attr`` paths objects that import. The commands that need no model server (``backbone=scripted``) also run.
"""
from __future__ import annotations

import ast
import importlib
import importlib.util
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from agentic_repro.harness.cli import COMMANDS

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.DOTALL | re.MULTILINE)
INLINE = re.compile(r"`((?:python -m|python -c|agentic-repro|make) [^`]+)`")
SHELL = {"", "bash", "sh", "shell", "console"}
OURS = {p.name for p in ROOT.iterdir() if (p / "__init__.py").is_file() and p.name != "agentic_repro"} | {"configs"}
GUIDES = ("docs/writing-a-method.md", "docs/writing-a-benchmark.md")
MAKE_TARGETS = {t for line in re.findall(r"^([A-Za-z0-9_.\- ]+):(?!=)", (ROOT / "Makefile").read_text(), re.MULTILINE)
                for t in line.split()}
PLACEHOLDER = re.compile(r"<|\.\.\.|…")


def snippets(kinds: set[str]) -> list[tuple[str, str]]:
    """(``file``, text) of each fenced block whose language is in ``kinds``."""
    return [(str(md.relative_to(ROOT)), body) for md in DOCS
            for lang, body in FENCE.findall(md.read_text(encoding="utf-8")) if lang in kinds]


def commands() -> list[tuple[str, str]]:
    """(``file``, command) for each shell line of a fenced block and each inline `python -m`/`make`/... span."""
    out = []
    for md in DOCS:
        text = md.read_text(encoding="utf-8")
        where = str(md.relative_to(ROOT))
        for lang, body in FENCE.findall(text):
            if lang in SHELL:
                for line in body.replace("\\\n", " ").splitlines():
                    line = line.split(" # ")[0].strip()
                    if line and not line.startswith("#"):
                        out.append((where, line))
        out += [(where, span) for span in INLINE.findall(FENCE.sub("", text))]
    return out


def argv_of(command: str) -> list[str]:
    """The command's words without leading ``VAR=value`` assignments and the ``.venv/bin/`` prefix."""
    try:
        words = shlex.split(command)
    except ValueError:
        words = command.split()
    while words and re.fullmatch(r"[A-Z_][A-Z0-9_]*=.*", words[0]):
        words = words[1:]
    if words:
        words[0] = words[0].removeprefix(".venv/bin/")
    return words


def declared_names(where: str) -> set[str]:
    """``name:`` of each YAML snippet in ``where``: a guide's command may run the config the guide declares."""
    names = set()
    for w, text in snippets({"yaml"}):
        try:
            doc = yaml.safe_load(text)
        except yaml.YAMLError:
            continue
        if w == where and isinstance(doc, dict) and isinstance(doc.get("name"), str):
            names.add(doc["name"])
    return names


def override_problems(args: list[str], declared: set[str] = frozenset()) -> list[str]:
    """Each ``group=value`` / ``+group=value`` / ``group@pkg=value`` naming a config file that does not exist."""
    bad = []
    for a in args:
        m = re.fullmatch(r"\+?([a-z_]+)(?:@[\w.]+)?=(.+)", a)
        if not m or PLACEHOLDER.search(a) or not (ROOT / "configs" / m[1]).is_dir():
            continue
        bad += [f"{a}: no configs/{m[1]}/{v}.yaml" for v in m[2].split(",")
                if v not in declared and not (ROOT / "configs" / m[1] / f"{v}.yaml").is_file()]
    return bad


def import_problems(code: str) -> list[str]:
    """Imports of ours under a generic name, or of a module of ours that does not exist."""
    bad = []
    for node in ast.walk(ast.parse(code)):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
            [node.module] if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 else []
        for n in names:
            if n.split(".")[0] in OURS:
                bad.append(f"import {n}: ours are imported as agentic_repro.{n}")
            elif n.startswith("agentic_repro") and importlib.util.find_spec(n) is None:
                bad.append(f"import {n}: no such module")
            elif isinstance(node, ast.ImportFrom) and n.startswith("agentic_repro"):
                mod = importlib.import_module(n)
                bad += [f"from {n} import {a.name}: no such name" for a in node.names
                        if not hasattr(mod, a.name) and importlib.util.find_spec(f"{n}.{a.name}") is None]
    return bad


def command_problems(argv: list[str], declared: set[str] = frozenset()) -> list[str]:
    if not argv:
        return []
    if argv[0] == "make":
        return [f"make {t}: no such target" for t in argv[1:]
                if "=" not in t and not t.startswith("-") and not PLACEHOLDER.search(t) and t not in MAKE_TARGETS]
    if argv[0] == "agentic-repro":
        if len(argv) > 1 and not argv[1].startswith("-") and argv[1] not in COMMANDS:
            return [f"agentic-repro {argv[1]}: no such command"]
        return override_problems(argv[2:], declared) if argv[1:2] == ["run"] else []
    if argv[0] in ("python", "python3") and argv[1:2] == ["-c"]:
        return import_problems(argv[2])
    if argv[0] in ("python", "python3") and argv[1:2] == ["-m"] and len(argv) > 2:
        module = argv[2]
        if module.split(".")[0] in OURS:
            return [f"python -m {module}: ours run as python -m agentic_repro.{module}"]
        if module.startswith("agentic_repro") and importlib.util.find_spec(module) is None:
            return [f"python -m {module}: no such module"]
        return override_problems(argv[3:], declared) if module.startswith("agentic_repro") else []
    return []


def yaml_problems(text: str) -> list[str]:
    """A snippet that does not parse, or a ``module:attr`` value that is not an importable object of ours."""
    try:
        docs = list(yaml.safe_load_all(text))
    except yaml.YAMLError as e:
        return [f"does not parse: {e}"]
    bad: list[str] = []

    def walk(x: object) -> None:
        if isinstance(x, dict):
            for v in x.values():
                walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)
        elif isinstance(x, str) and re.fullmatch(r"[A-Za-z_][\w.]*:[A-Za-z_]\w*", x) and "." in x.split(":")[0]:
            module, attr = x.split(":")
            if module.split(".")[0] in OURS:
                bad.append(f"{x}: ours are named agentic_repro.{x}")
            elif module.startswith("agentic_repro"):
                try:
                    getattr(importlib.import_module(module), attr)
                except (ImportError, AttributeError) as e:
                    bad.append(f"{x}: {e}")
    walk(docs)
    return bad


def test_the_docs_hold_commands_and_snippets():
    """The walk finds the snippets it checks (a docs rewrite that hides them from it would pass vacuously)."""
    cmds = commands()
    assert len(cmds) > 100 and len(snippets({"yaml"})) > 5
    assert any("backbone=scripted" in c for _, c in cmds)


@pytest.mark.parametrize("where,command", commands(), ids=lambda x: x[:70])
def test_a_command_names_what_exists(where, command):
    assert command_problems(argv_of(command), declared_names(where)) == [], f"{where}: {command}"


@pytest.mark.parametrize("where,text", snippets({"yaml"}), ids=lambda x: x[:40])
def test_a_config_snippet_parses_and_names_what_exists(where, text):
    assert yaml_problems(text) == [], f"{where}:\n{text}"


@pytest.mark.parametrize("where,text", snippets({"python"}), ids=lambda x: x[:40])
def test_a_python_snippet_compiles_and_imports_what_exists(where, text):
    bad = import_problems(text)
    if where in GUIDES:  # the guides teach the public core only
        bad += [f"{n.module}: a guide imports from agentic_repro.harness" for n in ast.walk(ast.parse(text))
                if isinstance(n, ast.ImportFrom) and (n.module or "").startswith("agentic_repro")
                and n.module not in ("agentic_repro.harness", "agentic_repro.evaluators.base")]
    assert bad == [], f"{where}:\n{text}"


def test_the_checks_catch_stale_names(tmp_path):
    """Each check fails on a planted stale name (a check that cannot fail proves nothing)."""
    assert command_problems(argv_of("python -m viewer")) != []
    assert command_problems(argv_of("python -m agentic_repro.no_such_module")) != []
    assert command_problems(argv_of(".venv/bin/agentic-repro run method=no_such_method benchmark=gsm8k")) != []
    assert command_problems(argv_of("make no-such-target")) != []
    assert command_problems(argv_of("agentic-repro frobnicate")) != []
    assert command_problems(argv_of('python -c "from harness.lock import FolderLock"')) != []
    assert yaml_problems("solver: baselines.simple:cot_sc") != []
    assert yaml_problems("solver: agentic_repro.baselines.simple:no_such_solver") != []
    assert yaml_problems("a: [unclosed") != []
    assert command_problems(argv_of("agentic-repro run method=cot_sc benchmark=gsm8k backbone=scripted")) == []


def scripted_runs() -> list[tuple[str, str]]:
    return [(w, c) for w, c in commands() if "backbone=scripted" in c and not PLACEHOLDER.search(c)]


@pytest.mark.parametrize("where,command", scripted_runs(), ids=lambda x: x[:70])
def test_a_scripted_command_runs(where, command, tmp_path):
    """A documented run with ``backbone=scripted`` (no model, no server) runs as written, into a scratch folder."""
    argv = argv_of(command)
    data = Path(os.environ.get("AGENTIC_REPRO_DATA", ROOT / "data"))
    bench = next((a.split("=", 1)[1] for a in argv if a.startswith("benchmark=")), "gsm8k")
    if not (data / bench).is_dir():
        pytest.skip(f"no data for {bench} under {data} (`make data`)")
    if argv[0] == "agentic-repro":
        argv = [sys.executable, "-m", "agentic_repro.harness.cli", *argv[1:]]
    r = subprocess.run([*argv, f"hydra.run.dir={tmp_path}/h"], cwd=tmp_path,
                       capture_output=True, text=True, timeout=300, env={**os.environ, "AGENTIC_REPRO_DATA": str(data)})
    assert r.returncode == 0, f"{where}: {command}\n{r.stderr[-2000:]}"
    assert '"complete": true' in r.stdout, r.stdout[-1000:]
