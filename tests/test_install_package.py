"""The harness is checkout-only: `pip install .` / `pip wheel .` refuse in one line (scripts/build_backend), the
editable install works and installs the `agentic-repro` console command. Real pip, on a small copy of the tree."""
from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FILES = ["pyproject.toml", "README.md", "scripts/build_backend/checkout_backend.py", "harness/__init__.py",
         "harness/cli.py"]
REFUSAL = "agentic-repro is checkout-only"


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    src = tmp_path / "src"
    for f in FILES:
        (src / f).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / f, src / f)
    return src


def pip(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    # no build isolation: the venv's setuptools (pyproject requires >=77), no index needed
    return subprocess.run([sys.executable, "-m", "pip", *args, "--no-deps", "--no-build-isolation",
                           "--disable-pip-version-check"], cwd=cwd, check=False, capture_output=True, text=True, timeout=240)


@pytest.mark.parametrize("cmd", [["wheel", ".", "-w", "wheels"], ["install", ".", "--target", "target"]])
def test_a_regular_install_or_wheel_is_refused_in_one_line(tree, cmd):
    r = pip(*cmd, cwd=tree)
    assert r.returncode != 0
    out = r.stdout + r.stderr
    assert REFUSAL in out and "pip install -e ." in out
    lines = [ln for ln in out.splitlines() if REFUSAL in ln]
    assert len(lines) == 1                                       # the backend's whole output is that line
    assert not list(tree.rglob("*.whl")) and not (tree / "target" / "harness").exists()


def test_the_editable_install_gives_the_console_command(tree, tmp_path):
    prefix = tmp_path / "prefix"
    r = pip("install", "--quiet", "--prefix", str(prefix), "-e", ".", cwd=tree)
    assert r.returncode == 0, r.stdout + r.stderr
    script = prefix / "bin" / "agentic-repro"
    assert "from harness.cli import main" in script.read_text()
    site = Path(sysconfig.get_path("purelib", vars={"base": str(prefix), "platbase": str(prefix)}))
    # the editable finder resolves `harness` to the copy, from any working directory
    code = f"import site; site.addsitedir({str(site)!r}); import harness.cli as c; print(c.__file__); c.main(['--help'])"
    r = subprocess.run([sys.executable, "-c", code], cwd="/", check=False, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[0] == str(tree / "harness" / "cli.py") and "reference-scores" in r.stdout
