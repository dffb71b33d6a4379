"""The import graph between our top-level packages: no cycles, and production code never imports ``tests``.

Walked with ``ast`` (every ``import`` / ``from ... import`` anywhere in a file, lazy ones inside functions too), so
a cycle hidden in a function body still counts: it is what makes a package unreadable without the other.
"""
from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx

ROOT = Path(__file__).resolve().parent.parent
SKIP = {".venv", ".git", "results", "data", ".cache", "node_modules", "build", "dist"}  # build/, dist/: a wheel build's output (a test builds one in place, files come and go)
# Subpackages that are components of their own: a node of the graph apart from their top-level package.
# evaluators/sandbox imports nothing of evaluators/ or harness/ (the harness configures it and records its isolation;
# the code benchmarks run programs in it), so it sits below both although it lives in the evaluators folder.
COMPONENTS = ("evaluators.sandbox",)


#: the one import name our folders are imported under (agentic_repro/__init__.py; tests/test_import_name.py)
ONE_NAME = "agentic_repro"


def packages(root: Path) -> set[str]:
    """Top-level folders of ``root`` that hold Python code (``tests`` and ``bench`` included)."""
    return {p.name for p in root.iterdir() if p.is_dir() and p.name not in SKIP and not p.name.startswith(".")
            and p.name != ONE_NAME and any(p.rglob("*.py"))}


def imported_modules(path: Path) -> set[str]:
    """Absolute module names ``path`` imports (relative imports resolve inside their own package)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: stays inside the file's own top-level package
                continue
            if node.module:
                out.add(node.module)
    return out


def node_of(module: str, pkgs: set[str], components: tuple[str, ...]) -> str | None:
    """The graph node a module belongs to: its component, else its top-level package (None: not ours). Our
    modules are imported as ``agentic_repro.<folder>...``: the node is the folder."""
    module = module.removeprefix(f"{ONE_NAME}.")
    for c in components:
        if module == c or module.startswith(c + "."):
            return c
    top = module.split(".")[0]
    return top if top in pkgs else None


def package_graph(root: Path, components: tuple[str, ...] = COMPONENTS) -> nx.DiGraph:
    """Edge A -> B when a file of A imports a module of B (A != B), labelled with one file that does."""
    pkgs = packages(root)
    g = nx.DiGraph()
    g.add_nodes_from(pkgs)
    for pkg in sorted(pkgs):
        for f in sorted((root / pkg).rglob("*.py")):
            rel = f.relative_to(root)
            if any(part in SKIP for part in rel.parts):
                continue
            here = node_of(".".join(rel.with_suffix("").parts), pkgs, components)
            for mod in imported_modules(f):
                there = node_of(mod, pkgs, components)
                if there is not None and there != here and not g.has_edge(here, there):
                    g.add_edge(here, there, file=str(rel), module=mod)
    return g


def cycles(g: nx.DiGraph) -> list[list[str]]:
    return sorted(sorted(c) for c in nx.simple_cycles(g))


def describe(g: nx.DiGraph, cycle: list[str]) -> str:
    sub = g.subgraph(cycle)
    return "; ".join(f"{a} -> {b} ({d['file']}: {d['module']})" for a, b, d in sub.edges(data=True))


def test_no_cycle_between_top_level_packages():
    g = package_graph(ROOT)
    found = cycles(g)
    assert not found, "import cycles between top-level packages: " + " | ".join(describe(g, c) for c in found)


#: what the core may import of ours: only the sandbox leaf (it configures it and records its isolation)
HARNESS_MAY_IMPORT = {"evaluators.sandbox"}


def test_the_harness_is_the_floor():
    # the core reads without the methods, benchmarks, training or scripts built on it
    g = package_graph(ROOT)
    above = {b: d for _, b, d in g.out_edges("harness", data=True) if b not in HARNESS_MAY_IMPORT}
    assert not above, "harness/ imports packages built on it: " + "; ".join(
        f"{b} ({d['file']}: {d['module']})" for b, d in sorted(above.items()))


def imports_of_tests(root: Path) -> list[str]:
    """Every ``file: module`` outside tests/ that imports the ``tests`` package."""
    out = []
    for pkg in sorted(packages(root) - {"tests"}):
        for f in sorted((root / pkg).rglob("*.py")):
            rel = f.relative_to(root)
            if not any(part in SKIP for part in rel.parts):
                out += [f"{rel}: {m}" for m in sorted(imported_modules(f)) if m.split(".")[0] == "tests"]
    return out


def test_production_code_never_imports_tests():
    offenders = imports_of_tests(ROOT)
    assert not offenders, "production code imports tests/ (move what it needs into the harness): " + "; ".join(
        offenders)


def _plant(tmp_path: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        p = tmp_path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")
    return tmp_path


def test_a_planted_cycle_is_found_even_in_a_function_body(tmp_path):
    root = _plant(tmp_path, {
        "alpha/__init__.py": "",
        "alpha/a.py": "from beta.b import thing\n",
        "beta/__init__.py": "",
        "beta/b.py": "def f():\n    import alpha.a\n    return alpha.a\nthing = 1\n",
        "gamma/__init__.py": "",
        "gamma/c.py": "from alpha import a\nfrom . import sibling\n",
    })
    g = package_graph(root)
    assert cycles(g) == [["alpha", "beta"]]
    assert "beta/b.py" in describe(g, ["alpha", "beta"])


def test_a_component_is_its_own_node_and_its_cycles_count(tmp_path):
    files = {"alpha/__init__.py": "", "alpha/core.py": "import beta.run\n", "alpha/leaf/__init__.py": "",
             "alpha/leaf/x.py": "import os\n", "beta/__init__.py": "", "beta/run.py": "from alpha.leaf import x\n"}
    root = _plant(tmp_path, files)
    assert cycles(package_graph(root, ())) == [["alpha", "beta"]]       # as top-level packages: a cycle
    assert cycles(package_graph(root, ("alpha.leaf",))) == []           # beta needs only the leaf
    (root / "alpha/leaf/x.py").write_text("from beta import run\n")     # the leaf reaches back up: a cycle again
    assert cycles(package_graph(root, ("alpha.leaf",))) == [["alpha.leaf", "beta"]]


def test_a_planted_import_of_tests_is_found(tmp_path):
    root = _plant(tmp_path, {
        "tests/__init__.py": "",
        "tests/doubles.py": "class ScriptedBackbone: ...\n",
        "tests/test_x.py": "from alpha.a import x\n",
        "alpha/__init__.py": "",
        "alpha/a.py": "x = 1\nif x:\n    from tests.doubles import ScriptedBackbone\n",
    })
    assert imports_of_tests(root) == ["alpha/a.py: tests.doubles"]
