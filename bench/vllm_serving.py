"""vLLM on this machine's CPU (issue 31), three comparisons, each side by side in one run:

* **overhead**: the harness through vLLM (a real run: method=io on GSM8K, cache off) against a bare ``openai``
  client sending the same messages with the same sampling and concurrency to the same server. Timed
  harness, bare, bare, harness (ABBA) after a warm-up run, so a change of machine load hits both sides.
  ``harness_over_bare`` = the bare wall over the harness wall (goal >= 0.9).
* **engines**: vLLM against llama-server on the same model (bf16 vs its Q4_K_M GGUF) and prompts: CoT-SC(5) on the
  first N GSM8K problems (``--problems``, the issue's 20 take too long on 2 shared cores: say how many), cache off,
  each backbone's shipped settings; wall and completion tokens per second of each, and their ratio.
* **memory**: peak resident memory (``VmHWM``, summed over vLLM's processes: the API server and its engine core,
  not the Python watcher) of a server with 4 LoRA adapters against one with 1, after start and one greedy request
  on the base and on every adapter. Goal: <= 1.1x. Both servers have the same ``--max-loras 4`` (the config's):
  vLLM reserves the LoRA slots by that setting, so the ratio is what loading 4 adapters instead of 1 adds.
  The adapters are random peft LoRAs (r 8, alpha 16, q/v, as training's default) on the embedded base.

    flock /tmp/model-server.lock python bench/vllm_serving.py [--parts overhead,engines,memory] [--problems 5]
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


def overhead(tmp: Path, problems: int) -> dict[str, Any]:
    from agentic_repro.harness.embedded.server import ServerPool

    srv = _server(tmp)
    os.environ["AGENTIC_REPRO_VLLM_URL"] = srv.base_url
    try:
        with ServerPool(use_env=False) as pool:
            common = ["method=io", "benchmark=gsm8k", f"backbone={CONFIG}", "backbone.sampling.max_tokens=48"]
            _run(tmp, [*common, "limit=2"], "warm", pool)
            walls_h, walls_b = [], []
            m, w, out = _run(tmp, [*common, f"limit={problems}"], "h1", pool)
            walls_h.append(w)
            preds = [json.loads(x) for x in (out / "predictions.jsonl").read_text().splitlines()]
            bodies = [p["trace"]["messages"] for p in preds]
            sampling = {"temperature": 0.0, "top_p": 1.0, "max_tokens": 48}
            conc = 4  # the config's max_concurrency
            for _ in range(2):
                walls_b.append(asyncio.run(_bare(srv.base_url, _key().served_name, bodies, sampling, conc)))
            walls_h.append(_run(tmp, [*common, f"limit={problems}"], "h2", pool)[1])
    finally:
        os.environ.pop("AGENTIC_REPRO_VLLM_URL", None)
        srv.stop()
    h, b = sum(walls_h) / 2, sum(walls_b) / 2
    return {"requests": len(bodies), "concurrency": conc, "harness_wall_s": [round(x, 2) for x in walls_h],
            "bare_wall_s": [round(x, 2) for x in walls_b], "harness_over_bare": round(b / h, 3),
            "completion_tokens": m["totals"]["completion_tokens"]}


def engines(tmp: Path, problems: int) -> dict[str, Any]:
    from agentic_repro.harness.embedded.server import ServerPool

    out: dict[str, Any] = {"problems": problems, "method": "cot_sc (k=5, T=0.7)", "max_tokens": 256}
    for backbone in ("local", CONFIG):
        with ServerPool(use_env=False) as pool:
            os.environ.pop("AGENTIC_REPRO_VLLM_URL", None)
            common = ["method=cot_sc", "benchmark=gsm8k", f"backbone={backbone}", "backbone.sampling.max_tokens=256"]
            _run(tmp, [*common, "limit=1", "sample=1"], f"warm-{backbone}", pool)  # the server's start, apart
            m, wall, _ = _run(tmp, [*common, f"limit={problems}"], backbone, pool)
        toks = m["totals"]["completion_tokens"]
        out[backbone] = {"wall_s": round(wall, 1), "completion_tokens": toks, "tokens_per_s": round(toks / wall, 2),
                         "score_pct": round(m["score_pct"], 1), "n": m["n"], "errors": m.get("n_errors", 0)}
    out["vllm_over_llama_server_tokens_per_s"] = round(out[CONFIG]["tokens_per_s"] / out["local"]["tokens_per_s"], 3)
    out["vllm_over_llama_server_wall"] = round(out[CONFIG]["wall_s"] / out["local"]["wall_s"], 3)
    return out


def _random_adapters(folder: Path, k: int) -> dict[str, Path]:
    """k random peft LoRAs (non-zero B, seeded) on the embedded base, from one load of the base."""
    done = {f"a{i}": folder / f"a{i}" for i in range(k)}
    if all((p / "adapter_config.json").is_file() for p in done.values()):
        return done
    import torch
    from peft import LoraConfig, get_peft_model

    from agentic_repro.harness.embedded.base_model import load_base, resolve_base

    model, _ = load_base(resolve_base("local"))
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


def memory(tmp: Path) -> dict[str, Any]:
    from openai import OpenAI

    from agentic_repro.harness.vllm.server import EXPLICIT_SAMPLING

    adapters = _random_adapters(Path(tempfile.gettempdir()) / "agentic-repro-bench-vllm-loras", 4)
    out: dict[str, Any] = {}
    for k in (1, 4):
        chosen = dict(list(adapters.items())[:k])
        srv = _server(tmp, chosen, tag=f"mem{k}")
        try:
            c = OpenAI(base_url=f"{srv.base_url}/v1", api_key="local", timeout=600)
            for model in (srv.key.served_name, *chosen):
                c.chat.completions.create(model=model, messages=[{"role": "user", "content": "Say hello."}],
                                          temperature=0, max_tokens=8, extra_body=EXPLICIT_SAMPLING)
            out[f"{k}_adapters_hwm_mib"] = _tree_hwm_mib(srv.pid)
        finally:
            srv.stop()
    out["four_over_one"] = round(out["4_adapters_hwm_mib"] / out["1_adapters_hwm_mib"], 3)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--parts", default="overhead,engines,memory")
    ap.add_argument("--problems", type=int, default=5)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    result: dict[str, Any] = {"load_before": os.getloadavg()}
    with tempfile.TemporaryDirectory(prefix="bench-vllm-") as d:
        for part in args.parts.split(","):
            t0 = time.perf_counter()
            result[part] = {"overhead": lambda: overhead(Path(d), args.problems),
                            "engines": lambda: engines(Path(d), args.problems),
                            "memory": lambda: memory(Path(d))}[part]()
            result[part]["seconds"] = round(time.perf_counter() - t0, 1)
            result[part]["load_after"] = os.getloadavg()
            print(json.dumps({part: result[part]}), flush=True)
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
