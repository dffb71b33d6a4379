"""A few real SFT and DPO steps on the embedded base (Qwen2.5-Coder-0.5B, read from its GGUF by transformers), the
adapters exported to GGUF and served by the embedded llama-server, where they change generations.

Slow: ~2 min on an idle 2-core machine (two base loads of ~30 s, four steps of ~7 s). Training on the GGUF-loaded
base at all is the real-file check of the quantizer detach: with the quantizer attached, the trainers and
save_pretrained refuse the model."""
from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
import yaml

from agentic_repro.training.datasets import Example, build_dpo, build_sft, find_runs, trace_examples
from agentic_repro.training.train import compose_config, train

pytestmark = pytest.mark.slow

CONFIGS = Path(__file__).resolve().parents[1] / "configs"
# one prompt shaped like the training data, one open-ended (a few steps move an open answer more than a one-word one)
QUESTIONS = [[{"role": "user", "content": "Name a colour, example 7."}],
             [{"role": "user", "content": "Write one sentence about rivers."}]]
GREEDY = {"temperature": 0.0, "max_tokens": 16, "seed": 1}


@pytest.fixture(scope="module")
def datasets(tmp_path_factory):
    root = tmp_path_factory.mktemp("run") / "r"
    root.mkdir()
    colours = ["teal", "amber", "violet", "crimson"]
    preds = [{"id": f"p{i}", "status": "ok", "attempt": f"a{i}", "score": 1.0,
              "trace": {"training_examples": [{"prompt": f"Name a colour, example {i}.",
                                               "completion": f"ZEBRA-{c.upper()}"}],
                        "plans": [{"plan": f"ZEBRA-{c.upper()}", "reward": 1.0}, {"plan": c, "reward": 0.0}]}}
             for i, c in enumerate(colours)]
    (root / "predictions.jsonl").write_text("".join(json.dumps(p) + "\n" for p in preds))
    runs = find_runs([root])
    d = tmp_path_factory.mktemp("data")
    sft = build_sft(runs, trace_examples(), d / "sft.jsonl")
    dpo = build_dpo(runs, lambda t: [Example(t.trace["training_examples"][0]["prompt"], p["plan"], p["reward"])
                                     for p in t.trace["plans"]], d / "dpo.jsonl")
    return sft, dpo


def _train(kind: str, data: Path, out: Path, steps: int) -> object:
    cfg = compose_config(kind, [f"data={data}", "base=local", f"out={out}", f"max_steps={steps}", "lr=5e-3",
                                "batch_size=4", "grad_accum=1", "warmup_ratio=0", "val_fraction=0", "max_length=128",
                                f"name={kind}-adapter"])  # batch 4: every step sees the same 4 rows, losses comparable
    return train(cfg)


def test_real_sft_and_dpo_steps_served_by_the_embedded_server(datasets, tmp_path: Path):
    from agentic_repro.harness.backbones import build_backbone
    from agentic_repro.harness.embedded.gguf import file_sha256
    from agentic_repro.harness.embedded.server import ServerPool
    from agentic_repro.harness.embedded.base_model import resolve_base

    sft_data, dpo_data = datasets
    sft = _train("sft", sft_data.path, tmp_path / "sft", steps=3)
    dpo = _train("dpo", dpo_data.path, tmp_path / "dpo", steps=2)
    assert sft.losses[-1] < sft.losses[0], sft.losses
    assert dpo.losses[0] == pytest.approx(0.6931, abs=1e-3) and dpo.losses[-1] < dpo.losses[0], dpo.losses
    base_sha = file_sha256(resolve_base("local").ref)
    assert sft.identity["base_model"]["sha256"] == base_sha == dpo.identity["base_model"]["sha256"]

    cfg = yaml.safe_load((CONFIGS / "backbone" / "local.yaml").read_text())
    cfg["server"].update({"parallel": 1, "n_threads": 1})
    cfg["max_concurrency"] = 1
    cfg["adapters"] = {"sft": {"path": str(sft.gguf)}, "dpo": {"path": str(dpo.gguf)}}
    with ServerPool(use_env=False) as pool:
        async def main():
            bb = await build_backbone(cfg, run_dir=tmp_path, seed=0, servers=pool)
            try:
                out = {a: [(await bb.complete(q, GREEDY, 1, adapter=a)).completions[0].text for q in QUESTIONS]
                       for a in (None, "sft", "dpo")}
                return out, bb.adapter_identity("sft"), bb.adapter_identity("dpo")
            finally:
                await bb.aclose()

        out, id_sft, id_dpo = asyncio.run(main())
    assert out["sft"] != out[None] and out["dpo"] != out[None], out  # each adapter changes at least one answer
    assert id_sft["sha256"] == file_sha256(sft.gguf) and id_sft["training_data_sha256"] == sft_data.sha256
    assert id_dpo["training_data_sha256"] == dpo_data.sha256
    assert id_sft["base_model"]["sha256"] == base_sha
