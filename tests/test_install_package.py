"""`pip install .` gives a working install under the one import name, and `pip install -e .` carries the
`agentic-repro` console command: real pip and the real build hooks, never installing into the shared venv."""
from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def clean_env(**extra: str) -> dict[str, str]:
    return {**{k: v for k, v in os.environ.items() if k != "PYTHONPATH"}, **extra}


def build(kind: str, out: Path) -> Path:
    """The wheel a PEP 517 hook (``build_wheel`` / ``build_editable``) makes from the checkout."""
    out.mkdir(parents=True, exist_ok=True)
    code = f"import setuptools.build_meta as b; print(b.{kind}({str(out)!r}))"
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=False, capture_output=True, text=True,
                       timeout=500)
    assert r.returncode == 0, r.stderr[-3000:]
    return out / r.stdout.strip().splitlines()[-1]


@pytest.mark.timeout(900)
def test_a_wheel_holds_one_import_name_and_runs_outside_the_checkout(tmp_path):
    """The wheel holds only ``agentic_repro/`` (its configs, templates and prompts as package data); installed
    into a bare folder, the Hydra app composes a run's config from a working directory that is not the checkout."""
    whl = build("build_wheel", tmp_path / "wheels")
    names = zipfile.ZipFile(whl).namelist()
    assert {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")} == {"agentic_repro"}
    for data in ("agentic_repro/configs/config.yaml", "agentic_repro/configs/method/io.yaml",
                 "agentic_repro/scripts/experiments/table1.yaml", "agentic_repro/viewer/templates/base.html",
                 "agentic_repro/evaluators/deepresearch_prompts/race_en.txt"):
        assert data in names, data
    assert not [n for n in names if n.startswith("agentic_repro/tests/") or n.startswith("agentic_repro/bench/")]
    target = tmp_path / "site"
    with zipfile.ZipFile(whl) as z:
        z.extractall(target)
    code = ("import sys, agentic_repro.harness.run as r; print(r.__file__); "
            "sys.argv = ['run', '--cfg', 'job', 'method=io', 'benchmark=gsm8k']; r.main()")
    run = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=clean_env(PYTHONPATH=str(target)),
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.splitlines()[0] == str(target / "agentic_repro" / "harness" / "run.py")  # the wheel's code
    assert "solver: agentic_repro.baselines.simple:io" in run.stdout


@pytest.mark.timeout(600)
def test_the_editable_wheel_maps_only_agentic_repro_and_gives_the_console_command(tmp_path):
    """What ``pip install -e .`` puts in site-packages: an entry point and a finder whose names all start with
    ``agentic_repro`` (no generic ``harness``/``scripts``/``training``...), resolving to the checkout."""
    wheel = build("build_editable", tmp_path / "wheels")
    site = tmp_path / "site"
    with zipfile.ZipFile(wheel) as z:
        z.extractall(site)
        entry_points = next(n for n in z.namelist() if n.endswith(".dist-info/entry_points.txt"))
        assert "[console_scripts]\nagentic-repro = agentic_repro.harness.cli:main" in z.read(entry_points).decode()
        finder = next((n for n in z.namelist() if n.endswith("_finder.py")), None)
        if finder:
            mapping = z.read(finder).decode().split("MAPPING", 1)[1].split("\n", 1)[0]
            tops = {k.split(".")[0] for k in __import__("re").findall(r"'([\w.]+)': '", mapping)}
            assert tops == {"agentic_repro"}, mapping
        # no path entry (a .pth line naming a folder) that would put the checkout root, and so its bare
        # harness/scripts/training... folders, on sys.path
        pth_lines = [line for n in z.namelist() if n.endswith(".pth") for line in z.read(n).decode().splitlines()]
        assert not [line for line in pth_lines if line.strip() and not line.startswith("import ")], pth_lines
    code = (f"import site; site.addsitedir({str(site)!r}); import agentic_repro.harness.cli as c; "
            "print(c.__file__); c.main(['--help'])")
    r = subprocess.run([sys.executable, "-S", "-c", code], cwd="/", env=clean_env(), check=False,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    # through the checkout's link agentic_repro/harness -> ../harness: the checkout's own file
    assert r.stdout.splitlines()[0] == str(ROOT / "agentic_repro" / "harness" / "cli.py") and "reference-scores" in r.stdout
    assert Path(r.stdout.splitlines()[0]).resolve() == ROOT / "harness" / "cli.py"
