"""One import name: every package of the checkout is imported as ``agentic_repro.<folder>``, the environment has no
generic top-level module of ours (``harness``, ``scripts``, ``training``...)."""
from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OURS = sorted(p.name for p in ROOT.iterdir() if p.is_dir() and (p / "__init__.py").is_file()
              and p.name not in ("tests", "agentic_repro"))
SKIP = ("evaluators/sandbox/child/",)  # run by path inside the pod, they import nothing of ours


def generic_imports(path: Path, root: Path = ROOT) -> list[str]:
    """``file:line module`` for each import of one of our folders under its bare (generic) name."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        found += [f"{path.relative_to(root)}:{node.lineno} {n}" for n in names if n.split(".")[0] in OURS]
    return found


PRUNE = {"results", "build", "dist", "node_modules", "__pycache__", "agentic_repro"}  # agentic_repro/: links


def python_files() -> list[Path]:
    """Our .py files; the walk never enters a virtual environment, .git, data/ or the links under agentic_repro/
    (an rglob that filters afterwards walks every installed package: minutes once torch and vLLM are in)."""
    files = []
    for top, dirs, names in os.walk(ROOT):
        dirs[:] = [d for d in dirs if d not in PRUNE and not d.startswith(".") and not (Path(top) == ROOT and d == "data")]
        files += [Path(top) / n for n in names if n.endswith(".py")]
    return [p for p in files if not any(str(p.relative_to(ROOT)).startswith(s) for s in SKIP)]


def test_our_packages_are_found():
    assert {"harness", "scripts", "training", "dyflow", "evaluators"} <= set(OURS), OURS


def test_every_package_folder_has_its_link_under_the_import_name():
    """``agentic_repro/<folder>`` is a link to ``../<folder>`` for each package folder and for ``configs`` (what an
    editor, pyright and jedi follow; agentic_repro/__init__.py): a new folder without its link would import only
    through setup.py's mapping in a wheel, never in the checkout."""
    links = {p.name: os.readlink(p) for p in (ROOT / "agentic_repro").iterdir() if p.is_symlink()}
    expected = {name: f"../{name}" for name in [*OURS, "configs"]}
    assert links == expected


def test_no_module_imports_a_package_of_ours_by_its_generic_name():
    bad = [hit for p in python_files() for hit in generic_imports(p)]
    assert bad == [], "import these as agentic_repro.<name>:\n" + "\n".join(bad[:40])


def test_the_walk_finds_a_planted_generic_import(tmp_path):
    planted = tmp_path / "scripts" / "planted.py"
    planted.parent.mkdir()
    generic = "harness" + ".results"  # spelled apart so no rewrite of the tree's imports ever touches it
    planted.write_text(f"import os\nfrom {generic} import read_json\nfrom agentic_repro.{generic} import x\n",
                       encoding="utf-8")
    assert generic_imports(planted, tmp_path) == [f"scripts/planted.py:2 {generic}"]


def test_the_environment_has_no_generic_top_level_module_of_ours(tmp_path):
    """Outside the checkout (no cwd on sys.path), only ``agentic_repro`` is importable: the install put no
    ``harness``/``scripts``/``training``... into site-packages or its editable finder."""
    code = ("import importlib.util, json, sys; names = json.loads(sys.argv[1]); "
            "print(json.dumps({n: importlib.util.find_spec(n) is not None for n in names + ['agentic_repro']}))")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out = subprocess.run([sys.executable, "-c", code, __import__("json").dumps(OURS)], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=60, check=True)
    found = __import__("json").loads(out.stdout)
    assert found.pop("agentic_repro") is True
    assert [n for n, present in found.items() if present] == []
