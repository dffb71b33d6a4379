"""vLLM on this machine's CPU (issue 31), three comparisons, each side by side in one run:

* **overhead**: the harness through vLLM (a real run: method=io on GSM8K, cache off) against a bare ``openai``
  client sending the same messages with the same sampling and concurrency to the same server. Timed
  harness, bare, bare, harness (ABBA) after a warm-up run, so a change of machine load hits both sides.
  ``harness_over_bare`` = the bare wall over the harness wall (goal >= 0.9).
* **engines**: vLLM against llama-server on the same model (bf16 vs its Q4_K_M GGUF) and prompts: CoT-SC(5) on the
  first N GSM8K problems (``--engine-problems``; the issue's 20 take over an hour through vLLM on this CPU: say how
  many), cache off, each backbone's shipped settings (vLLM reserves one of the 2 cores for its API server and
  computes on the other; llama-server's ``n_threads: auto`` is 1 here), vLLM without LoRA (its own server, started
  first); wall and completion tokens per second of each, and their ratio.
* **memory**: peak resident memory (``VmHWM``, summed over vLLM's processes: the API server and its engine core,
  not the Python watcher) of a server with 4 LoRA adapters against one with 1, after start and one greedy request
  on the base and on every adapter. Goal: <= 1.1x. Both servers have the same ``--max-loras 4`` (the config's):
  vLLM reserves the LoRA slots by that setting, so the ratio is what loading 4 adapters instead of 1 adds.
  The adapters are random peft LoRAs (r 8, alpha 16, q/v, as training's default) on the converted base.

    flock /tmp/model-server.lock python bench/vllm_serving.py [--parts memory,overhead,engines] [--problems 5]

vLLM starts: the engines part's base-only server, the 1-adapter server (memory), then the 4-adapter server the
memory and overhead parts use (overhead sends base-model requests to it); and one llama-server (engines).
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _common import compose

CONFIG = "vllm-cpu"


def _key(adapters: dict[str, Path] | None = None):
    import yaml

    from agentic_repro.harness.vllm.backbone import server_key
    from agentic_repro.harness.vllm.model import converted_model

    cfg = yaml.safe_load((Path(__file__).resolve().parents[1] / f"configs/backbone/{CONFIG}.yaml").read_text())
    cfg["adapters"] = {n: {"path": str(p)} for n, p in (adapters or {}).items()}
    return server_key(cfg, str(converted_model("local").folder))


def _server(tmp: Path, adapters: dict[str, Path] | None = None, tag: str = "s"):
    from agentic_repro.harness.vllm.model import vllm_python
    from agentic_repro.harness.vllm.server import VLLMServer

    return VLLMServer(key=_key(adapters), python=str(vllm_python()), log_path=tmp / f"vllm-{tag}.log").start()


def _run(tmp: Path, overrides: list[str], tag: str, servers: Any) -> tuple[dict, float, Path]:
    from agentic_repro.harness.runner import run_spec, spec_from_config

    cfg = compose([*overrides, f"results_root={tmp / tag}", "cache.mode=off", "runner.progress=false"])
    spec = spec_from_config(cfg)
    t0 = time.perf_counter()
    metrics = run_spec(spec, servers=servers)
    return metrics, time.perf_counter() - t0, spec.out_dir


async def _bare(base_url: str, model: str, bodies: list[list[dict]], sampling: dict, concurrency: int) -> float:
    from openai import AsyncOpenAI

    from agentic_repro.harness.vllm.server import EXPLICIT_SAMPLING

    client = AsyncOpenAI(base_url=f"{base_url}/v1", api_key="local", max_retries=0, timeout=600)
    sem = asyncio.Semaphore(concurrency)

    async def one(messages):
        async with sem:
            r = await client.chat.completions.create(model=model, messages=messages, **sampling,
                                                     extra_body=EXPLICIT_SAMPLING)
            assert r.choices[0].message.content is not None

    t0 = time.perf_counter()
    await asyncio.gather(*(one(m) for m in bodies))
    wall = time.perf_counter() - t0
    await client.close()
    return wall


def overhead(tmp: Path, srv: Any, problems: int) -> dict[str, Any]:
    from agentic_repro.harness.embedded.server import ServerPool

    os.environ["AGENTIC_REPRO_VLLM_URL"] = srv.base_url
    try:
        with ServerPool(use_env=False) as pool:
            common = ["method=io", "benchmark=gsm8k", f"backbone={CONFIG}", "backbone.sampling.max_tokens=32"]
            _run(tmp, [*common, "limit=1"], "warm", pool)
            walls_h, walls_b = [], []
            m, w, out = _run(tmp, [*common, f"limit={problems}"], "h1", pool)
            walls_h.append(w)
            preds = [json.loads(x) for x in (out / "predictions.jsonl").read_text().splitlines()]
            bodies = [p["trace"]["messages"] for p in preds]
            sampling = {"temperature": 0.0, "top_p": 1.0, "max_tokens": 32}
            conc = 4  # the config's max_concurrency
            for _ in range(2):
                walls_b.append(asyncio.run(_bare(srv.base_url, srv.key.served_name, bodies, sampling, conc)))
            walls_h.append(_run(tmp, [*common, f"limit={problems}"], "h2", pool)[1])
    finally:
        os.environ.pop("AGENTIC_REPRO_VLLM_URL", None)
    h, b = sum(walls_h) / 2, sum(walls_b) / 2
    return {"requests": len(bodies), "concurrency": conc, "max_tokens": 32,
            "harness_wall_s": [round(x, 2) for x in walls_h], "bare_wall_s": [round(x, 2) for x in walls_b],
            "harness_over_bare": round(b / h, 3), "completion_tokens_per_run": m["totals"]["completion_tokens"]}


def engines(tmp: Path, problems: int, max_tokens: int) -> dict[str, Any]:
    """CoT-SC(5) through a vLLM server of the base model alone (no LoRA: ``--enable-lora`` slows every request,
    base ones included), stopped before llama-server (started here) runs the same problems, cache off."""
    from agentic_repro.harness.embedded.server import ServerPool

    out: dict[str, Any] = {"problems": problems, "method": "cot_sc (k=5, T=0.7)", "max_tokens": max_tokens}
    for backbone in (CONFIG, "local"):
        srv = None
        if backbone == CONFIG:
            t0 = time.perf_counter()
            srv = _server(tmp, None, tag="engines")
            out["vllm_startup_s"] = round(time.perf_counter() - t0, 1)
            os.environ["AGENTIC_REPRO_VLLM_URL"] = srv.base_url
        try:
            with ServerPool(use_env=False) as pool:
                common = ["method=cot_sc", "benchmark=gsm8k", f"backbone={backbone}",
                          f"backbone.sampling.max_tokens={max_tokens}"]
                if backbone == "local":  # the server's start, apart from the timing
                    _run(tmp, [*common, "limit=1", "backbone.sampling.max_tokens=1"], "warm-local", pool)
                m, wall, _ = _run(tmp, [*common, f"limit={problems}"], backbone, pool)
        finally:
            os.environ.pop("AGENTIC_REPRO_VLLM_URL", None)
            if srv is not None:
                srv.stop()
        toks = m["totals"]["completion_tokens"]
        out[backbone] = {"wall_s": round(wall, 1), "completion_tokens": toks, "tokens_per_s": round(toks / wall, 2),
                         "score_pct": round(m["score_pct"], 1), "n": m["n"], "errors": m.get("n_errors", 0),
                         "load_after": os.getloadavg()}
        print(json.dumps({backbone: out[backbone]}), flush=True)
    out["vllm_over_llama_server_tokens_per_s"] = round(out[CONFIG]["tokens_per_s"] / out["local"]["tokens_per_s"], 3)
    out["vllm_over_llama_server_wall"] = round(out[CONFIG]["wall_s"] / out["local"]["wall_s"], 3)
    return out


def _random_adapters(folder: Path, k: int) -> dict[str, Path]:
    """k random peft LoRAs (non-zero B, seeded) on the weights vLLM serves (the converted folder), one load."""
    done = {f"a{i}": folder / f"a{i}" for i in range(k)}
    if all((p / "adapter_config.json").is_file() for p in done.values()):
        return done
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    from agentic_repro.harness.vllm.model import converted_model

    model = AutoModelForCausalLM.from_pretrained(converted_model("local").folder, dtype=torch.float32)
    for i, (_, path) in enumerate(done.items()):
        torch.manual_seed(i + 1)
        pm = get_peft_model(model, LoraConfig(r=8, lora_alpha=16, lora_dropout=0.0, target_modules=["q_proj", "v_proj"],
                                              init_lora_weights=False))
        pm.save_pretrained(path)
        model = pm.unload()
    return done


def _tree_hwm_mib(watcher: int) -> float:
    """Peak RSS summed over the watcher's descendants (vLLM's API server and engine core processes)."""
    def kids(pid: int) -> list[int]:
        out = []
        for t in Path(f"/proc/{pid}/task").iterdir():
            out += [int(x) for x in (t / "children").read_text().split()]
        return out

    todo, total = kids(watcher), 0.0
    while todo:
        pid = todo.pop()
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                total += int(line.split()[1]) / 1024
        todo += kids(pid)
    return round(total, 1)


def _exercise_hwm(srv: Any, adapters: list[str]) -> float:
    from openai import OpenAI

    from agentic_repro.harness.vllm.server import EXPLICIT_SAMPLING

    c = OpenAI(base_url=f"{srv.base_url}/v1", api_key="local", timeout=600)
    for model in (srv.key.served_name, *adapters):
        c.chat.completions.create(model=model, messages=[{"role": "user", "content": "Say hello."}], temperature=0,
                                  max_tokens=8, extra_body=EXPLICIT_SAMPLING)
    return _tree_hwm_mib(srv.pid)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--parts", default="memory,overhead,engines")
    ap.add_argument("--problems", type=int, default=8, help="GSM8K problems of the overhead part")
    ap.add_argument("--engine-problems", type=int, default=20, help="GSM8K problems of CoT-SC(5) in the engines part")
    ap.add_argument("--max-tokens", type=int, default=256, help="CoT-SC's max_tokens in the engines part")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    parts = args.parts.split(",")
    result: dict[str, Any] = {"load_before": os.getloadavg()}
    adapters = _random_adapters(Path(tempfile.gettempdir()) / "agentic-repro-bench-vllm-loras", 4)
    with tempfile.TemporaryDirectory(prefix="bench-vllm-") as d:
        tmp = Path(d)
        if "memory" in parts:  # a server with 1 adapter first, then the 4-adapter server every part uses
            one = _server(tmp, dict(list(adapters.items())[:1]), tag="mem1")
            try:
                result["memory"] = {"1_adapter_hwm_mib": _exercise_hwm(one, ["a0"])}
            finally:
                one.stop()
        if "engines" in parts:  # its own server, before the 4-adapter one
            result["engines"] = engines(tmp, args.engine_problems, args.max_tokens)
            print(json.dumps({"engines": result["engines"]}), flush=True)
        if not {"memory", "overhead"} & set(parts):
            srv = None
        else:
            t0 = time.perf_counter()
            srv = _server(tmp, adapters, tag="main")
            result["startup_s"] = round(time.perf_counter() - t0, 1)
        try:
            if "memory" in parts and srv is not None:
                mem = result["memory"]
                mem["4_adapters_hwm_mib"] = _exercise_hwm(srv, list(adapters))
                mem["four_over_one"] = round(mem["4_adapters_hwm_mib"] / mem["1_adapter_hwm_mib"], 3)
                mem["max_loras"] = srv.key.max_loras
                print(json.dumps({"memory": mem}), flush=True)
            if "overhead" in parts and srv is not None:
                result["overhead"] = overhead(tmp, srv, args.problems)
                print(json.dumps({"overhead": result["overhead"]}), flush=True)
        finally:
            if srv is not None:
                srv.stop()
    result["load_after"] = os.getloadavg()
    print(json.dumps({"load_before": result["load_before"], "load_after": result["load_after"]}))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
