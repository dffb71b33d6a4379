"""The harness is checkout-only: `pip install .` / `pip wheel .` refuse in one line (scripts/build_backend), the
editable wheel carries the `agentic-repro` console command. Real pip and the real hook, on a small copy of the tree
(never installing into the shared venv)."""
from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
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


def test_the_editable_wheel_gives_the_console_command(tree, tmp_path):
    # the PEP 660 hook pip calls for `pip install -e .`, called directly: installing into a prefix with pip would
    # uninstall the shared venv's own editable install of this project
    out = tmp_path / "wheels"
    out.mkdir()
    code = ("import sys; sys.path.insert(0, 'scripts/build_backend'); import checkout_backend as b; "
            f"print(b.build_editable({str(out)!r}))")
    r = subprocess.run([sys.executable, "-c", code], cwd=tree, check=False, capture_output=True, text=True,
                       timeout=240)
    assert r.returncode == 0, r.stderr
    wheel = out / r.stdout.strip().splitlines()[-1]
    site = tmp_path / "site"
    with zipfile.ZipFile(wheel) as z:
        z.extractall(site)
        entry_points = next(n for n in z.namelist() if n.endswith(".dist-info/entry_points.txt"))
        assert "[console_scripts]\nagentic-repro = harness.cli:main" in z.read(entry_points).decode()
    # the editable finder resolves `harness` to the checkout (the copy), from any working directory
    code = f"import site; site.addsitedir({str(site)!r}); import harness.cli as c; print(c.__file__); c.main(['--help'])"
    r = subprocess.run([sys.executable, "-S", "-c", code], cwd="/", check=False, capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[0] == str(tree / "harness" / "cli.py") and "reference-scores" in r.stdout
