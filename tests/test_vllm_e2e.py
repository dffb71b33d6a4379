"""vLLM for real (slow): one vLLM server from the vLLM venv (``make install-vllm``) serving the embedded model (bf16)
with two LoRA adapters trained here by ``training/`` (a DynaGraph expert and DyFlow's designer, which DynaGraph's
planner uses too), shared by every test of this file through the session's server pool (``xdist_group``: one worker,
one server). Under xdist (``pytest -n 2``: the other worker has a one-thread llama-server) the vLLM server is bound
to one core (``server.threads=1``), so the other worker keeps the other.

What each test shows: CoT-SC's n samples are one request to the server (its own request counter); DynaGraph's two
experts are two adapters of one vLLM process, each call's adapter in the ledger; a run stopped by Ctrl-C stops the
server it started, and resumes with calls only for what was left (then none); a server that dies mid-run leaves
errors, never answers.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from tests.conftest import _SERVERS, check_run_files, run_e2e

# the first test trains the adapters and starts the server (minutes on 2 shared cores): a longer limit than slow's
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("vllm"), pytest.mark.timeout(1800)]

ROOT = Path(__file__).resolve().parents[1]
ADAPTERS = {"expert_logic": "ZEBRA", "designer": "MAPLE"}  # name -> the word it is taught
# one core for vLLM when another xdist worker runs other tests beside it (pytest -n 2); vLLM's own choice alone
THREADS = ["backbone.server.threads=1"] if os.environ.get("PYTEST_XDIST_WORKER") else []


def _dataset(folder: Path, word: str):
    from agentic_repro.training.datasets import build_sft, find_runs, trace_examples

    run = folder / "run"
    run.mkdir(parents=True)
    preds = [{"id": f"p{i}", "status": "ok", "attempt": f"a{i}", "score": 1.0,
              "trace": {"training_examples": [{"prompt": f"Give the code word, example {i}.",
                                               "completion": f"{word}-{i}"}]}} for i in range(4)]
    (run / "predictions.jsonl").write_text("".join(json.dumps(p) + "\n" for p in preds))
    return build_sft(find_runs([run]), trace_examples(), folder / "sft.jsonl")


def train_adapters(root: Path) -> dict[str, Path]:
    """Two LoRAs trained by training/ (8 SFT steps each at a constant 3e-3: the loss reached 0.0 by step 7 on the
    idle machine, ~9 s a step; 2 steps at 5e-3 changed answers but taught no word, so a test could not tell which
    adapter served a call, and 1e-2 diverged) on the weights vLLM serves: the
    embedded GGUF as ``make install-vllm`` converted it (bf16 safetensors, read in seconds; dequantising the GGUF
    again takes minutes per load on 2 shared cores). Cached by content under ``root`` (the words, the options, the
    weights' sha256) like training.fixtures."""
    import hashlib

    from agentic_repro.harness.embedded.gguf import _locked
    from agentic_repro.harness.vllm.model import converted_model

    weights = converted_model("local")
    out = {}
    for name, word in ADAPTERS.items():
        opts = [f"base={weights.folder}", "max_steps=8", "lr=3e-3", "scheduler=constant", "batch_size=4", "grad_accum=1",
                "warmup_ratio=0",
                "val_fraction=0", "max_length=128", f"name={name}", "export_gguf=false"]
        key = hashlib.sha256(json.dumps([word, opts, weights.sha256]).encode()).hexdigest()
        d = root / f"vllm-lora-{name}-{key[:16]}"
        # one trainer per adapter across processes (seen: two xdist workers training into one folder)
        with _locked(root / f".{d.name}.lock"):
            if not (d / "out" / "adapter" / "adapter_config.json").is_file():
                shutil.rmtree(d, ignore_errors=True)
                data = _dataset(d, word)
                # a process of its own: torch keeps the ~5 GB a training took for the life of its process, and this
                # one (a test worker) then runs beside a vLLM server and the other worker (seen: a worker OOM-killed)
                done = subprocess.run([sys.executable, "-m", "agentic_repro.training.train", "kind=sft",
                                       f"data={data.path}", f"out={d / 'out'}", *opts], capture_output=True, text=True)
                assert done.returncode == 0, done.stderr[-3000:]
        out[name] = d / "out" / "adapter"
    return out


@pytest.fixture(scope="session")
def adapters() -> dict[str, Path]:
    from agentic_repro.training.fixtures import default_fixture_dir

    return train_adapters(default_fixture_dir())


@pytest.fixture(scope="session")
def vllm_overrides(adapters) -> list[str]:
    return ["backbone=vllm-cpu", "backbone.sampling.max_tokens=32", *THREADS,
            *(f"+backbone.adapters.{n}.path={p}" for n, p in adapters.items())]


def _server():
    """The session's one vLLM server (harness.vllm.server.VLLMServer in the session pool)."""
    servers = [s for s in _SERVERS[0]._others.values() if type(s).__name__ == "VLLMServer"]
    assert len(servers) == 1, servers
    return servers[0]


def _chat_requests(srv) -> int:
    """Chat requests the server answered, from its own access log (uvicorn: one line per HTTP request)."""
    return srv.log_path.read_text(errors="replace").count('"POST /v1/chat/completions HTTP/1.1" 200')


def test_cot_sc_n_samples_are_one_request(tmp_path, vllm_overrides):
    # cot_sc's config follows its release (n_mode: separate, issue 30); n as one request is the other recorded mode
    one_request = ["method=cot_sc", "benchmark=gsm8k", "limit=2", "method.sampling.n_mode=request"]
    spec, metrics = run_e2e(tmp_path, [*one_request, *vllm_overrides])
    srv = _server()
    preds = check_run_files(spec, metrics, 2)
    calls = [json.loads(x) for x in (spec.out_dir / "calls.jsonl").read_text().splitlines()]
    assert all(p["status"] == "ok" for p in preds) and len(calls) == 10  # the ledger: one line per chain
    meta = json.loads((spec.out_dir / "meta.json").read_text())
    model = meta["model"]
    assert model["kind"] == "vllm-server" and model["vllm_version"] == "0.32.0"
    assert "--generation-config vllm" in model["server"]["command"] and model["server"]["pid"] == srv.pid
    assert model["generation_defaults"]["sent_with_every_request"]["repetition_penalty"] == 1.0
    assert len(model["weights"]["sha256"]) == 64 and model["weights"]["conversion"]["dtype"] == "bfloat16"
    # the server's own log: a re-run with a fresh cache sends exactly 2 HTTP requests for 10 samples
    before = _chat_requests(srv)
    run_e2e(tmp_path / "again", [*one_request, *vllm_overrides])
    assert _chat_requests(srv) - before == 2


def test_dynagraph_two_lora_experts_in_one_vllm_process(tmp_path, vllm_overrides, adapters):
    from agentic_repro.harness.adapters import path_sha256

    # the planner (always called first) and E_logic (in every plan, the fallback's included); one plan answer and no
    # patches: a bounded run (measured at load 12-17: ~2 min per planner answer of ~325 tokens, re-asks and patches
    # took 20+ min)
    spec, metrics = run_e2e(tmp_path, ["method=dynagraph", "benchmark=gsm8k", "limit=1", *vllm_overrides,
                                       "method.params.max_plan_attempts=1", "method.params.max_patches=0",
                                       "method.params.max_reconstructions=0",
                                       "roles.planner.adapter=designer", "roles.expert2.adapter=expert_logic"])
    srv = _server()
    preds = check_run_files(spec, metrics, 1)
    assert preds[0]["status"] == "ok", preds[0]
    calls = [json.loads(x) for x in (spec.out_dir / "calls.jsonl").read_text().splitlines()]
    used = {(c["role"], c["adapter"], c["adapter_sha256"]) for c in calls}
    print("dynagraph ledger (role, adapter, sha256[:12]):",
          sorted((r, a, (s or "")[:12]) for r, a, s in used), "vLLM pid", srv.pid)
    for role, name in (("planner", "designer"), ("expert2", "expert_logic")):
        assert any(r == role and a == name and s == path_sha256(adapters[name]) for r, a, s in used), used
    assert any(r == "expert3" and a is None for r, a, _ in used)  # E_expr: the base model
    meta = json.loads((spec.out_dir / "meta.json").read_text())
    pids = {json.dumps(r["model"].get("server", {}).get("pid")) for r in meta["roles"].values()}
    assert pids == {json.dumps(srv.pid)}  # every role's backbone is the one vLLM process
    # the same process serves both modules over one base
    served = {m["id"]: m for m in json.loads(urllib.request.urlopen(f"{srv.base_url}/v1/models").read())["data"]}
    assert served["designer"]["parent"] == served["expert_logic"]["parent"] == "qwen2.5-coder-0.5b-instruct-bf16"


def test_adapters_change_answers_chosen_per_call(vllm_overrides):
    """Through one backbone, each call is answered by the adapter it names: each adapter says the word it was taught
    (on a prompt of its training), which neither the base model nor the other adapters say."""
    import asyncio

    from agentic_repro.harness.backbones import build_backbone
    from tests.conftest import compose

    cfg = compose([*vllm_overrides, "results_root=/tmp/unused"])["backbone"]

    async def main():
        bb = await build_backbone(cfg, run_dir=Path("/tmp"), seed=0, servers=_SERVERS[0])
        msg = [{"role": "user", "content": "Give the code word, example 1."}]
        try:
            return {a: (await bb.complete(msg, {"temperature": 0.0, "max_tokens": 8}, 1, adapter=a)).completions[0].text
                    for a in (None, *ADAPTERS)}
        finally:
            await bb.aclose()

    out = asyncio.run(main())
    assert all(w in out[a] for a, w in ADAPTERS.items()), out
    assert not any(w in out[b] for a, w in ADAPTERS.items() for b in (None, *ADAPTERS) if b != a), out


def test_ctrl_c_stops_the_managed_server_and_the_rerun_resumes(tmp_path):
    """The harness starts its own vLLM server; Ctrl-C ends the run and that server; the same command resumes
    with calls only for the problems left, and once finished re-runs with none."""
    cmd = [sys.executable, "-m", "agentic_repro.harness.run", "method=cot", "benchmark=gsm8k", "limit=3",
           "backbone=vllm-cpu", "backbone.sampling.max_tokens=48", f"results_root={tmp_path}/results",
           f"cache.path={tmp_path}/c.sqlite", "runner.progress=false", "runner.max_concurrent_problems=1", *THREADS]
    env = {k: v for k, v in os.environ.items() if k != "AGENTIC_REPRO_VLLM_URL"}
    out = tmp_path / "results/default/gsm8k/cot/vllm-cpu/seed=42"
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 600
    while time.time() < deadline and not ((out / "predictions.jsonl").exists()
                                          and (out / "predictions.jsonl").read_text().count("\n") >= 1):
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.5)
    pid = json.loads((out / "meta.json").read_text())["model"]["server"]["pid"]
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err[-2000:]
    done = (out / "predictions.jsonl").read_text().count("\n")
    assert 1 <= done < 3
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # the server's process (group) is gone with the run
    assert "Application startup complete" in (out / "vllm-server.log").read_text()
    # resumed through the session's server (same weights and settings: the cache key does not name a port)
    env["AGENTIC_REPRO_VLLM_URL"] = _server().base_url
    again = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert again.returncode == 0, again.stderr[-2000:]
    line = json.loads(again.stdout.strip().splitlines()[-1])
    # the finished problems cost nothing; the rest at most one call each (one may have been answered, and cached,
    # just before the signal)
    assert line["n"] == 3 and line["complete"] and 3 - done - 1 <= line["backbone_calls"] <= 3 - done
    third = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert json.loads(third.stdout.strip().splitlines()[-1])["backbone_calls"] == 0


def test_server_killed_mid_run_gives_errors_never_answers(tmp_path, vllm_overrides):
    """SIGKILL to the vLLM server after the first answer: the problems after it are errors (connection), the run is
    incomplete, nothing is scored from a dead server. Last in the file: it kills the session's server."""
    srv = _server()
    preds_file = tmp_path / "results/default/gsm8k/cot/vllm-cpu/seed=42/predictions.jsonl"

    def kill_after_first():
        while not (preds_file.exists() and preds_file.read_text().count("\n") >= 1):
            time.sleep(0.2)
        os.killpg(srv.pid, signal.SIGKILL)

    threading.Thread(target=kill_after_first, daemon=True).start()
    spec, metrics = run_e2e(tmp_path, ["method=cot", "benchmark=gsm8k", "limit=4", *vllm_overrides,
                                       "runner.max_concurrent_problems=1", "backbone.retry.max_attempts=2"])
    preds = [json.loads(x) for x in (spec.out_dir / "predictions.jsonl").read_text().splitlines()]
    errors = [p for p in preds if p["status"] != "ok"]
    assert metrics["complete"] is False and errors and metrics.get("n_errors", 0) == len(errors)
    assert all(p["status"] == "error" and p.get("score") in (None, 0) for p in errors)
    calls = [json.loads(x) for x in (spec.out_dir / "calls.jsonl").read_text().splitlines()]
    assert any(c.get("error_kind") == "connection" for c in calls)
    assert metrics["n"] == len(preds) - len(errors)  # errors are not averaged in
