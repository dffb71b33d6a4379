"""The suite's own guards, through real pytest sessions: a hang fails one test (pytest-timeout), a missing
optional dependency fails only the tests that need it (and in CI fails instead of skipping)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

FILES = {
    "test_hang.py": "import time\n\ndef test_hangs():\n    time.sleep(60)\n\ndef test_after():\n    assert True\n",
    "test_needs_missing.py": "import no_such_module_for_the_test  # noqa: F401\n\ndef test_x():\n    pass\n",
    "test_skips.py": "import pytest\n\ndef test_optional():\n    pytest.importorskip('no_such_module_for_the_test')\n",
    "test_module_skip.py": "import pytest\n\nnp = pytest.importorskip('no_such_module_for_the_test')\n\n"
                           "def test_y():\n    pass\n",
    "test_fine.py": "def test_fine():\n    assert True\n",
    "test_limits.py": "import pytest\n\n@pytest.mark.slow\ndef test_slow_gets_900(request):\n"
                      "    assert request.node.get_closest_marker('timeout').args[0] == 900\n\n"
                      "def test_default_is_300(request):\n    assert request.config.getini('timeout') == '300'\n",
}


def session(tmp_path: Path, *, ci: bool, limits: bool = False) -> subprocess.CompletedProcess:
    d = tmp_path / ("ci" if ci else "local") / ("limits" if limits else "all")
    d.mkdir(parents=True)
    for name, text in FILES.items():
        if limits != (name == "test_limits.py"):
            continue
        (d / name).write_text(text)
    # the project's own [tool.pytest.ini_options] (timeout, addopts) and its strict_deps plugin
    (d / "conftest.py").write_text("from tests.strict_deps import pytest_make_collect_report, "
                                   "pytest_runtest_makereport  # noqa: F401\n"
                                   "from tests.conftest import pytest_collection_modifyitems  # noqa: F401\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "CI": "1" if ci else ""}
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-rA", "-p", "no:cacheprovider", "-c",
                           str(ROOT / "pyproject.toml"), "--rootdir", str(d), str(d)] + ([] if limits else ["-o", "timeout=3"]),
                          cwd=d, env=env, capture_output=True, text=True, timeout=240)


def outcomes(out: str) -> dict[str, str]:
    res = {}
    for line in out.splitlines():
        for word in ("PASSED", "FAILED", "SKIPPED", "ERROR"):
            if line.startswith(word + " "):
                res[line.split()[1].split("::")[0].rsplit("/", 1)[-1] + "::" + (line.split()[1].split("::") + [""])[1]] = word
    return res


def test_a_hang_fails_one_test_and_a_missing_module_fails_only_its_file(tmp_path):
    r = session(tmp_path, ci=False)
    got = outcomes(r.stdout)
    assert r.returncode != 0
    assert got.get("test_hang.py::test_hangs") == "FAILED" and "Timeout" in r.stdout  # not the end of the run
    assert got.get("test_hang.py::test_after") == "PASSED" and got.get("test_fine.py::test_fine") == "PASSED"
    assert got.get("test_needs_missing.py::") == "ERROR"  # before: "Interrupted: 1 error during collection"
    assert "SKIPPED [1] test_skips.py" in r.stdout  # locally a skip stays a skip


def test_in_ci_a_missing_optional_dependency_fails_instead_of_skipping(tmp_path):
    r = session(tmp_path, ci=True)
    got = outcomes(r.stdout)
    assert got.get("test_skips.py::test_optional") == "FAILED", r.stdout[-3000:]
    assert any(k.startswith("test_module_skip.py") and v in ("FAILED", "ERROR") for k, v in got.items()), got
    assert "a required optional dependency is missing" in r.stdout
    assert got.get("test_fine.py::test_fine") == "PASSED" and r.returncode != 0


def test_the_configured_timeouts_300_by_default_900_for_slow(tmp_path):
    r = session(tmp_path, ci=False, limits=True)
    assert r.returncode == 0 and "2 passed" in r.stdout, r.stdout[-3000:]  # before: no timeout at all


def test_an_xdist_group_runs_on_one_worker_and_first(tmp_path):
    """`make test`'s `-n 2 --dist loadgroup`: the tests of one xdist_group (tests/test_vllm_e2e.py's, which share one
    vLLM server and its adapters' training) run on one worker, and the group is handed out before the rest
    (conftest's schedule_rank). pytest 9.2 with pytest-xdist 3.8 silently dropped the group (pytest-xdist#1386):
    the vLLM tests ran on both workers, each training the same adapters into one folder."""
    d = tmp_path / "s"
    d.mkdir()
    log = tmp_path / "log.txt"
    record = (f"import os\n\ndef rec(name):\n    with open({str(log)!r}, 'a') as f:\n"
              "        f.write(name + ' ' + os.environ['PYTEST_XDIST_WORKER'] + '\\n')\n")
    (d / "test_a_other.py").write_text(record + "import pytest\n\n@pytest.mark.parametrize('i', range(6))\n"
                                       "def test_other(i):\n    rec(f'other{i}')\n")
    (d / "test_z_group.py").write_text(record + "import pytest, time\n\npytestmark = pytest.mark.xdist_group('g')\n\n"
                                       "@pytest.mark.parametrize('i', range(4))\ndef test_grouped(i):\n"
                                       "    rec(f'group{i}')\n    time.sleep(0.2)\n")
    (d / "conftest.py").write_text("from tests.conftest import pytest_collection_modifyitems  # noqa: F401\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2", "--dist", "loadgroup",
                        "-c", str(ROOT / "pyproject.toml"), "--rootdir", str(d), str(d)],
                       cwd=d, env=env, capture_output=True, text=True, timeout=240)
    assert r.returncode == 0 and "10 passed" in r.stdout, r.stdout[-3000:]
    lines = [x.split() for x in log.read_text().splitlines()]
    group_workers = {w for name, w in lines if name.startswith("group")}
    assert len(group_workers) == 1, lines  # before (pytest 9.2): both workers
    (w,) = group_workers
    assert [name for name, wk in lines if wk == w][0] == "group0", lines  # its worker starts with the group


def test_the_schedule_puts_the_group_then_the_slow_tests_first(tmp_path):
    """conftest's schedule_rank: longest first, so that no long test is the tail of an xdist run (collection order is
    the order xdist hands single tests out in)."""
    d = tmp_path / "s"
    d.mkdir()
    (d / "test_a_fast.py").write_text("def test_fast():\n    pass\n")
    (d / "test_b_slow.py").write_text("import pytest\n\n@pytest.mark.slow\ndef test_slow():\n    pass\n")
    (d / "test_c_group.py").write_text("import pytest\n\n@pytest.mark.xdist_group('g')\ndef test_grouped():\n    pass\n")
    (d / "conftest.py").write_text("from tests.conftest import pytest_collection_modifyitems  # noqa: F401\n")
    r = subprocess.run([sys.executable, "-m", "pytest", "--co", "-q", "-p", "no:cacheprovider",
                        "-c", str(ROOT / "pyproject.toml"), "--rootdir", str(d), str(d)],
                       cwd=d, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=120)
    order = [x.split("::")[1] for x in r.stdout.splitlines() if "::" in x]
    assert order == ["test_grouped", "test_slow", "test_fast"], r.stdout[-2000:]
