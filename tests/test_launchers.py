"""Sweeps on the cluster launchers, for real (docs/cluster.md): Hydra multiruns of ``agentic_repro.scripts.run_point`` on the
basic launcher, on ``submitit_local`` (submitit's local executor: the SLURM launcher's code path, one process per
job) and on the Ray launcher against a real local Ray cluster (``ray start --head`` on 127.0.0.1, stopped by the
fixture), each against a loopback OpenAI-compatible server (tests/fault_server.py) that counts the requests of
every point.

Two invocations of one sweep: the first runs points 1 and 2, and point 1's second problem fails (the server
answers it 500 every time), so that point is incomplete and the sweep fails, but point 2 still completes; the
second invocation adds point 3. The server then sees exactly 1 request for point 1 (the failed problem only),
0 for point 2 (skipped: complete) and 2 for point 3. A third sweep gives two workers the same point at once: one
runs it, the other is refused by the folder's lock (or skips it, finished), and nothing is written twice.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from agentic_repro.harness.llm import request_seed
from agentic_repro.harness.results import read_jsonl_tolerant
from tests.fault_server import FaultServer

REPO = Path(__file__).resolve().parents[1]
LIMIT = 2  # problems per point; cot makes one call per problem


class CountingServer(FaultServer):
    """The fault server, counting chat requests by their request seed (one run seed → one request seed at
    sample 0), and failing with 500 every request for the problems in ``broken`` (run seed, question prefix)."""

    def __init__(self, **kw) -> None:
        super().__init__(max_seconds=600, **kw)
        self.by_seed: Counter[int] = Counter()
        self.broken: set[tuple[int, str]] = set()

    async def _handle(self, method, path, raw, writer):
        if method == "POST" and path.rstrip("/").endswith("/chat/completions"):
            body = json.loads(raw or b"{}")
            seed = int(body.get("seed") or 0)
            self.by_seed[seed] += 1
            text = str((body.get("messages") or [{}])[-1].get("content", ""))
            # decided here, before the base class's first await: one event loop, so no other request interleaves
            self.fail_all = "500" if any(seed == request_seed(s, 0) and q in text for s, q in self.broken) else None
        return await super()._handle(method, path, raw, writer)

    def requests_of(self, run_seed: int) -> int:
        return self.by_seed[request_seed(run_seed, 0)]


def _free_ports(n: int) -> list[int]:
    """n distinct free ports (all held open until chosen)."""
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _sweep(tmp: Path, url: str, seeds: str, sweep_dir: Path, launcher: list[str],
           env: dict[str, str] | None = None, cache: str | None = None) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "agentic_repro.scripts.run_point", "-m", "method=cot", "benchmark=gsm8k", f"limit={LIMIT}",
           "experiment=launchers", f"seed={seeds}", "backbone=vllm", "backbone.name=fault",
           "backbone.model=fault-model", f"backbone.base_url={url}", "backbone.max_concurrency=1",
           "runner.max_concurrent_problems=1", "backbone.retry.max_attempts=2", "+backbone.retry.base_delay_s=0.01",
           "+backbone.retry.max_delay_s=0.05", "backbone.retry.timeout_s=20", "runner.progress=false",
           f"results_root={tmp / 'results'}", f"cache.path={cache or tmp / 'cache.sqlite'}",
           f"hydra.sweep.dir={sweep_dir}", *launcher]
    return subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300, check=False,
                          env=env or os.environ.copy())


def _points(sweep_dir: Path) -> dict[str, dict]:
    """point.json of every job of one sweep, by the point's seed folder name ("seed=1")."""
    out: dict[str, list[dict]] = {}
    for f in sorted(sweep_dir.glob("*/point.json")):
        line = json.loads(f.read_text(encoding="utf-8"))
        out.setdefault(Path(line["run"]).name, []).append(line)
    return out  # type: ignore[return-value]


def _run_dir(tmp: Path, seed: int) -> Path:
    return tmp / "results" / "launchers" / "gsm8k" / "cot" / "fault@fault-model" / f"seed={seed}"


def _first_questions(n: int) -> list[str]:
    """The first n GSM8K test questions as the run selects them (limit=n), for the server's fault rule."""
    from agentic_repro.evaluators.base import build_benchmark
    from agentic_repro.harness.runner import spec_from_config
    from agentic_repro.scripts.runs import compose

    spec = spec_from_config(compose(["method=cot", "benchmark=gsm8k", f"limit={n}"]))
    problems, _ = build_benchmark(spec.benchmark_cfg).load()
    assert len(problems) == n
    return [p.fields["question"][:60] for p in problems]


def resume_scenario(tmp: Path, launcher: list[str], env: dict[str, str] | None = None,
                    cache: str | None = None) -> None:
    q2 = _first_questions(LIMIT)[1]
    with CountingServer() as srv:
        srv.broken = {(1, q2)}  # point 1's second problem: 500 on every attempt
        first = _sweep(tmp, srv.url, "1,2", tmp / "sweep1", launcher, env, cache)
        pass1 = {s: srv.requests_of(s) for s in (1, 2, 3)}
        srv.broken = set()
        srv.by_seed.clear()
        second = _sweep(tmp, srv.url, "1,2,3", tmp / "sweep2", launcher, env, cache)
        pass2 = {s: srv.requests_of(s) for s in (1, 2, 3)}
        total2 = srv.received
    # 1st invocation: point 1 incomplete (its problem 2 failed twice, max_attempts=2): the sweep fails, but only
    # after point 2 ran to completion (every launcher runs or collects all points before reporting)
    assert first.returncode != 0, first.stdout[-3000:]
    assert pass1 == {1: 1 + 2, 2: LIMIT, 3: 0}, (pass1, first.stderr[-3000:])
    p1 = _points(tmp / "sweep1")
    assert set(p1) == {"seed=1", "seed=2"}, (p1, first.stderr[-3000:])
    assert p1["seed=1"][0]["complete"] is False and p1["seed=1"][0]["n_errors"] == 1
    assert p1["seed=1"][0]["error"].startswith("RunIncomplete: run incomplete: 1 of 2 problems failed")
    assert p1["seed=2"][0]["skipped"] is False and p1["seed=2"][0]["backbone_calls"] == LIMIT
    assert json.loads((_run_dir(tmp, 2) / "metrics.json").read_text())["complete"] is True
    # 2nd invocation: exact requests per point: the failed problem only, nothing for the complete point
    assert second.returncode == 0, second.stderr[-3000:]
    assert pass2 == {1: 1, 2: 0, 3: LIMIT} and total2 - pass1[1] - pass1[2] == 1 + LIMIT, (pass2, total2)
    p2 = {k: v[0] for k, v in _points(tmp / "sweep2").items()}
    assert {k: (v["skipped"], v["backbone_calls"]) for k, v in p2.items()} == {
        "seed=1": (False, 1), "seed=2": (True, 0), "seed=3": (False, LIMIT)}, p2
    for s in (1, 2, 3):
        preds = read_jsonl_tolerant(_run_dir(tmp, s) / "predictions.jsonl")
        done = {p["id"] for p in preds if p.get("status") != "error"}
        assert len(done) == LIMIT and json.loads((_run_dir(tmp, s) / "metrics.json").read_text())["complete"]


def same_point_scenario(tmp: Path, launcher: list[str], env: dict[str, str] | None = None) -> None:
    """Two jobs of one sweep given the same point (seed=5,5), run in parallel by the launcher."""
    with CountingServer(delay_s=1.0) as srv:  # the holder keeps the folder >= 2 s: the two jobs overlap
        out = _sweep(tmp, srv.url, "5,5", tmp / "sweep_same", launcher, env)
        seen = srv.requests_of(5)
    jobs = _points(tmp / "sweep_same").get("seed=5", [])
    assert len(jobs) == 2, (jobs, out.stderr[-3000:])
    ran = [j for j in jobs if j.get("backbone_calls") == LIMIT and not j["skipped"]]
    other = [j for j in jobs if j not in ran]
    assert len(ran) == 1 and len(other) == 1, jobs
    # the other one was refused naming the holder (the usual case: they overlap) or found the point done
    assert other[0]["skipped"] is True or (other[0]["busy"] is True and "in use by another process (pid "
                                           in other[0]["error"]), other
    assert (out.returncode != 0) == bool(other[0].get("busy")), out.stderr[-3000:]
    run = _run_dir(tmp, 5)
    preds = read_jsonl_tolerant(run / "predictions.jsonl")
    calls = read_jsonl_tolerant(run / "calls.jsonl")
    assert seen == LIMIT and len(calls) == LIMIT, (seen, len(calls))  # every call paid once
    assert sorted(p["id"] for p in preds) == sorted({p["id"] for p in preds}) and len(preds) == LIMIT


# ---- scripts.run_point and scripts.sweep, in process ------------------------------------------------------------

def test_a_point_held_by_another_worker_is_refused_before_its_files_are_read(tmp_path, capsys):
    """The done-check holds the folder's lock: a holder's half-written config.yaml is never read (it would be
    refused as 'a run with different settings'), the point is refused naming the holder."""
    from agentic_repro.harness.lock import FolderBusy, FolderLock
    from agentic_repro.harness.runner import spec_from_config
    from agentic_repro.scripts.run_point import run_point
    from agentic_repro.scripts.runs import compose

    cfg = compose(["method=cot", "benchmark=gsm8k", "limit=2", "experiment=busy", "backbone=vllm",
                   "backbone.base_url=http://127.0.0.1:9/v1", f"results_root={tmp_path / 'results'}",
                   f"cache.path={tmp_path / 'cache.sqlite'}", "runner.progress=false"])
    folder = spec_from_config(cfg).out_dir
    with FolderLock(folder):  # another worker, mid-write (flock: a second descriptor conflicts in-process too)
        (folder / "config.yaml").write_text("method:\n  name: co", encoding="utf-8")
        with pytest.raises(FolderBusy, match=f"in use by another process \\(pid {os.getpid()} on "):
            run_point(cfg)
    line = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert line["busy"] is True and line["run"] == str(folder) and line["error"].startswith("FolderBusy: ")


def test_sweep_on_ray_nulls_the_launchers_object_store_memory():
    from agentic_repro.scripts.runs import load_experiment
    from agentic_repro.scripts.sweep import commands

    exp = load_experiment("sensitivity")
    ray = commands(exp, {"backbone": "gpt-4o-mini", "launcher": "ray", "params": "tau_sim"},
                   ["hydra.launcher.ray.init.address=auto"])
    assert all("hydra/launcher=ray" in c and "++hydra.launcher.ray.init.object_store_memory=null" in c for c in ray)
    joblib = commands(exp, {"backbone": "gpt-4o-mini", "launcher": "joblib", "params": "tau_sim"}, [])
    assert not any("object_store_memory" in a for c in joblib for a in c)


# ---- basic launcher (one process, points in order) ------------------------------------------------------------

def test_basic_launcher_runs_every_point_and_resumes(tmp_path):
    """On the basic launcher point 1 fails first: point 2 still runs (a failed point no longer ends the sweep)."""
    resume_scenario(tmp_path, [])


# ---- submitit (the SLURM launcher's code path, local executor) -------------------------------------------------

SUBMITIT = ["hydra/launcher=submitit_local", "hydra.launcher.timeout_min=5"]


@pytest.mark.slow
def test_submitit_local_resumes_and_skips_completed_points(tmp_path):
    resume_scenario(tmp_path, SUBMITIT)


@pytest.mark.slow
def test_submitit_local_same_point_in_two_jobs_is_run_once(tmp_path):
    same_point_scenario(tmp_path, SUBMITIT)


# ---- Ray (a real local cluster) ---------------------------------------------------------------------------------

@pytest.fixture
def ray_cluster():
    """``ray start --head --block`` on 127.0.0.1 (1-2 CPUs, small object store) in its own process group, so
    teardown stops exactly its processes (never ``ray stop``, which stops every Ray on the machine)."""
    pytest.importorskip("ray")
    pytest.importorskip("hydra_plugins.hydra_ray_launcher")
    temp = Path(tempfile.mkdtemp(prefix="ray", dir="/tmp"))  # short: Ray's socket paths must fit in 107 bytes
    node_cache = Path(tempfile.mkdtemp(prefix="node-cache"))  # the nodes' local cache folder (docs/cluster.md)
    port, client_port, agent_port = _free_ports(3)
    ray_bin = Path(sys.executable).with_name("ray")
    cmd = [str(ray_bin), "start", "--head", "--block", "--node-ip-address=127.0.0.1", f"--port={port}",
           f"--ray-client-server-port={client_port}", f"--dashboard-agent-listen-port={agent_port}",
           "--num-cpus=2", "--object-store-memory=100000000", "--include-dashboard=false",
           "--disable-usage-stats", f"--temp-dir={temp}"]
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", "LAUNCHERS_NODE_CACHE": str(node_cache)}
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    lines: list[str] = []
    started = threading.Event()

    def read() -> None:
        for ln in proc.stdout:  # type: ignore[union-attr]
            lines.append(ln)
            if "Ray runtime started" in ln:
                started.set()

    threading.Thread(target=read, daemon=True).start()
    try:
        if not started.wait(120) or proc.poll() is not None:
            raise RuntimeError("ray start --head did not come up in 120 s:\n" + "".join(lines[-40:]))
        yield {"address": f"127.0.0.1:{port}", "env": env, "node_cache": node_cache}
    finally:
        _stop_group(proc)
        shutil.rmtree(temp, ignore_errors=True)
        shutil.rmtree(node_cache, ignore_errors=True)


def _stop_group(proc: subprocess.Popen) -> None:
    """SIGTERM (Ray drains for up to 30 s), then SIGKILL whatever of the group is left; assert none is."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(45)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        pass
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            return  # no process of the group is left
        proc.poll()  # reap the head itself (its zombie would keep the group alive)
        time.sleep(0.5)
    raise AssertionError(f"processes of the Ray head's group {proc.pid} survived SIGKILL")


def _ray(cluster) -> list[str]:
    # hydra-ray-launcher 1.2.2 always passes object_store_memory to ray.init, which Ray refuses when joining an
    # existing cluster: null it (scripts.sweep adds this for launcher=ray)
    return ["hydra/launcher=ray", f"hydra.launcher.ray.init.address={cluster['address']}",
            "++hydra.launcher.ray.init.object_store_memory=null"]


@pytest.mark.slow
def test_ray_launcher_resumes_skips_completed_points_and_runs_a_shared_point_once(tmp_path, ray_cluster):
    """One test, so one Ray cluster even under pytest-xdist. cache.path from an environment variable resolves on
    the worker: the nodes' value, not the driver's."""
    driver_env = {**ray_cluster["env"], "LAUNCHERS_NODE_CACHE": str(tmp_path / "driver-cache")}
    resume_scenario(tmp_path / "resume", _ray(ray_cluster), driver_env,
                    cache="${oc.env:LAUNCHERS_NODE_CACHE}/cache.sqlite")
    node_cache = ray_cluster["node_cache"] / "cache.sqlite"
    assert node_cache.exists() and not (tmp_path / "driver-cache").exists()
    with sqlite3.connect(node_cache) as db:  # every answered call of the two sweeps: (1 + 2) + (1 + 2)
        assert db.execute("SELECT COUNT(*) FROM responses").fetchone()[0] == 6
    same_point_scenario(tmp_path / "same", _ray(ray_cluster), ray_cluster["env"])
