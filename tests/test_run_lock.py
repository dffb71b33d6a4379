"""One process per results folder (harness/lock.py), with real processes: the second copy of a command is
refused with one line naming the holder's pid and the folder; a killed holder leaves no stale lock."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agentic_repro.harness.lock import FolderBusy, FolderLock
from agentic_repro.harness.results import read_jsonl_tolerant
from tests.fault_server import FaultServer
from tests.test_faults import tiny_rows

ROOT = Path(__file__).resolve().parents[1]

# The same command line, twice: a Hydra-resolved config with a tiny benchmark, through the CLI's `guarded`.
COMMAND = """
import sys
from omegaconf import OmegaConf
from agentic_repro.harness.run import guarded, run_from_config
from tests.conftest import compose
cfg = compose(["backbone=vllm", "backbone.name=fault", "backbone.model=fault-model", "backbone.base_url=" + sys.argv[1],
               "backbone.max_concurrency=1", "backbone.supports_n=false", "runner.max_concurrent_problems=1",
               "runner.progress=false", "results_root=" + sys.argv[2] + "/results", "cache.path=" + sys.argv[2] + "/c.sqlite"])
cfg["method"] = {"name": "once", "solver": "tests.fake_methods:ask_once", "params": {}}
cfg["benchmark"] = {"name": "tiny", "kind": "tests.conftest.EchoBenchmark", "split": "test",
                    "splits": {"test": "tiny/test.jsonl"}, "metric": "accuracy", "answer_instruction": "ANSWER: <n>."}
guarded(run_from_config, OmegaConf.create(cfg))
"""


def launch(url: str, tmp: Path) -> subprocess.Popen:
    env = {**os.environ, "AGENTIC_REPRO_DATA": str(tmp / "data")}
    return subprocess.Popen([sys.executable, "-c", COMMAND, url, str(tmp)], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_a_second_copy_of_the_command_is_refused_naming_the_pid_and_the_folder(tmp_path):
    tiny_rows(tmp_path / "data", 4)
    with FaultServer(delay_s=3.0, max_seconds=200) as srv:
        first = launch(srv.url, tmp_path)
        deadline = time.time() + 120
        while srv.received < 1 and time.time() < deadline and first.poll() is None:
            time.sleep(0.05)
        assert srv.received >= 1, first.communicate()[1][-2000:]  # the first copy is mid-run
        second = launch(srv.url, tmp_path)
        _, err2 = second.communicate(timeout=120)
        srv.delay_s = 0.0  # let the first finish quickly
        out1, err1 = first.communicate(timeout=120)
        received = srv.received
    assert first.returncode == 0, err1[-2000:]
    assert second.returncode != 0, "the second copy ran too: every overlapping call was paid twice"
    lines = [ln for ln in err2.strip().splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in err2, err2[-2000:]
    run_dir = Path(json.loads(out1.strip().splitlines()[-1])["run"])
    assert f"pid {first.pid}" in lines[0] and str(run_dir) in lines[0] and "in use by another process" in lines[0]
    preds = read_jsonl_tolerant(run_dir / "predictions.jsonl")
    assert sorted(p["id"] for p in preds) == ["p0", "p1", "p2", "p3"]  # no duplicated prediction
    assert received == 4 and len(read_jsonl_tolerant(run_dir / "calls.jsonl")) == 4  # each call paid once


def test_a_killed_holder_leaves_no_stale_lock(tmp_path):
    folder = tmp_path / "run"
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time\nfrom agentic_repro.harness.lock import FolderLock\n"
                               f"FolderLock({str(folder)!r}).acquire()\nprint('held', flush=True)\ntime.sleep(120)"],
                              cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(FolderBusy, match=f"pid {holder.pid} on "):
            FolderLock(folder).acquire()
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=30)
    with FolderLock(folder) as lock:  # the kernel released it with the process
        assert json.loads(lock.path.read_text())["pid"] == os.getpid()


def test_the_lock_is_released_after_a_run_and_clear_keeps_it(tmp_path):
    folder = tmp_path / "search"
    with FolderLock(folder, what="search folder") as lock:
        (folder / "artifact.json").write_text("{}")
        (folder / "evals").mkdir()
        with pytest.raises(FolderBusy, match="search folder"):  # a second holder, even in this process
            FolderLock(folder, what="search folder").acquire()
        lock.clear()
        assert [p.name for p in folder.iterdir()] == [".lock"]
    FolderLock(folder).acquire().release()  # released on exit


def test_the_refusal_says_when_and_where_and_copes_with_an_unwritten_record(tmp_path):
    import fcntl
    import socket
    import stat

    folder = tmp_path / "run"
    with FolderLock(folder) as lock:
        assert stat.S_IMODE(os.stat(lock.path).st_mode) == 0o644  # others may read who holds it
        with pytest.raises(FolderBusy) as info:
            FolderLock(folder).acquire()
        today = time.strftime("%Y-%m-%d", time.gmtime())
        assert f"pid {os.getpid()} on {socket.gethostname()}, since {today} " in str(info.value)
    assert lock.path.read_text() == ""  # released: no stale pid left to mislead
    for record in ("", "not json", "[1, 2]", '{"host": "h"}'):
        fd = os.open(folder / ".lock", os.O_RDWR)
        fcntl.flock(fd, fcntl.LOCK_EX)  # a holder that has not written its record (yet)
        os.ftruncate(fd, 0)
        os.write(fd, record.encode())
        try:
            with pytest.raises(FolderBusy, match=r"\(pid not yet recorded\)"):
                FolderLock(folder).acquire()
        finally:
            os.close(fd)


def test_clear_needs_the_lock_and_removes_links_not_their_targets(tmp_path):
    from agentic_repro.harness.results import ResultsWriteError

    folder, outside = tmp_path / "search", tmp_path / "outside"
    (outside / "keep").mkdir(parents=True)
    lock = FolderLock(folder)
    with pytest.raises(RuntimeError, match="not held"):
        lock.clear()
    with lock:
        (folder / "a.json").write_text("{}")
        (folder / "evals" / "x").mkdir(parents=True)
        os.symlink(outside, folder / "link")
        lock.clear()
        assert [p.name for p in folder.iterdir()] == [".lock"] and (outside / "keep").is_dir()
    (tmp_path / "file").write_text("")
    with pytest.raises(ResultsWriteError, match="file/run/.lock"):  # the folder cannot be made: named
        FolderLock(tmp_path / "file" / "run").acquire()
