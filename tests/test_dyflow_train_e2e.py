"""DyFlow's designer training end to end on the tiny Qwen2 fixture (slow, CPU): hand-written DyFlow runs ->
collect -> SFT -> KTO (continuing the SFT adapter) through ``agentic_repro.dyflow.train.pipeline``; both losses fall; the KTO
adapter is then the designer role of a real harness run on the embedded llama-server (``roles.designer.adapter=``,
no code change), where it changes the designer's generations and its identity (sha256, training-data sha256) is
recorded; peft in process loads the same adapter. What training.train's own tests prove (resume, export format,
DPO) is not repeated here."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentic_repro.harness.types import Solution
from tests.conftest import run_e2e
from tests.test_dyflow_train import make_run

pytestmark = pytest.mark.slow

PROBE = [{"role": "user", "content": "Design stage 0: math-q0"}]


async def probe(problem, ctx, **_params) -> Solution:
    """The designer's call and the same call on the run's base, greedy (a stand-in for DyFlow's design step)."""
    designer = await ctx.generate(PROBE, stage="design", role="designer", max_tokens=16, temperature=0.0)
    base = await ctx.generate(PROBE, stage="base", max_tokens=16, temperature=0.0)
    return Solution(designer[0].text, trace={"designer": designer[0].text, "base": base[0].text})


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    from agentic_repro.dyflow.train.pipeline import run_pipeline
    from agentic_repro.training.fixtures import tiny_base

    tiny = tiny_base()
    tmp = tmp_path_factory.mktemp("dyflow_train")
    runs = tmp / "results" / "dyflow_selfplay"
    make_run(runs, "math", [1.0, 0.0, 1.0, 0.0], plan=[["GENERATE_ANSWER"]])   # short rows: ~100 tokens each
    common = ["threads=2", "grad_accum=1", "warmup_ratio=0", "val_fraction=0", "max_length=256"]
    # batch = the whole dataset so successive losses are comparable; lr/beta far above D.2's so that a few steps
    # on a random toy model move the loss visibly (D.2's values are the configs' defaults, tested in the unit tests)
    res = run_pipeline([runs], tmp / "adapters", base=str(tiny.hf_dir),
                       sft_overrides=[*common, "max_steps=2", "lr=3e-2", "batch_size=2", "export_gguf=false"],
                       kto_overrides=[*common, "max_steps=2", "lr=1e-2", "beta=1.0", "batch_size=4"])
    return tiny, tmp, res


def test_sft_then_kto_losses_fall_and_kto_continues_sft(trained):
    _, tmp, res = trained
    sft, kto = res["sft"]["losses"], res["kto"]["losses"]
    assert sft[-1] < sft[0] - 0.05, sft
    assert kto[0] == pytest.approx(0.5, abs=1e-3) and kto[-1] < kto[0] - 0.005, kto  # starts at its reference
    assert kto_init(res) == res["sft"]["adapter"]
    serve = json.loads((tmp / "adapters" / "serve.json").read_text())["serve"]
    assert serve["local"][-1] == "roles.designer.adapter=dyplanner" and "--lora-modules dyplanner=" in serve["vllm"][-1]


def kto_init(res) -> str:
    return str(res["kto"]["init_adapter"])


def test_trained_adapter_is_the_designer_role_of_a_real_run(trained, tmp_path: Path):
    from agentic_repro.training.datasets import read_dataset
    from agentic_repro.training.identity import read_adapter_identity

    tiny, tmp, res = trained
    gguf = Path(res["kto"]["gguf"])
    spec, metrics = run_e2e(tmp_path, [
        "method=io", "method.name=designer_probe", "method.solver=tests.test_dyflow_train_e2e:probe",
        "+method.roles=[designer]", "benchmark=gsm8k", "limit=1", "backbone=local", f"backbone.gguf.path={tiny.gguf}",
        "backbone.model=tiny-qwen2", "backbone.server.parallel=1", "backbone.max_concurrency=1",
        "backbone.server.n_ctx=1024", f"+backbone.adapters.dyplanner.path={gguf}",
        "+roles@roles.designer=slot", "roles.designer.adapter=dyplanner"])  # io declares no slot: the probe adds one
    assert metrics["n"] == 1 and metrics["n_errors"] == 0
    pred = json.loads((spec.out_dir / "predictions.jsonl").read_text().splitlines()[-1])
    assert pred["trace"]["designer"] != pred["trace"]["base"], pred["trace"]
    calls = [json.loads(x) for x in (spec.out_dir / "calls.jsonl").read_text().splitlines()]
    by_role = {c["role"]: c for c in calls}
    ident = read_adapter_identity(gguf)
    assert by_role["designer"]["adapter"] == "dyplanner" and by_role["designer"]["adapter_sha256"] == ident["sha256"]
    assert by_role["default"]["adapter"] is None
    meta = json.loads((spec.out_dir / "meta.json").read_text())
    kto_sha = read_dataset(tmp / "adapters" / "data" / "designer-kto.jsonl").sha256
    assert json.dumps(meta["roles"]["designer"]).count(kto_sha) >= 1      # the training data's hash is in the meta
    assert set(metrics["by_role"]) >= {"designer", "default"}


def test_peft_in_process_loads_the_same_adapter(trained):
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tiny, _, res = trained
    tok = AutoTokenizer.from_pretrained(tiny.hf_dir)
    ids = tok.apply_chat_template(PROBE, add_generation_prompt=True, return_tensors="pt", return_dict=True)
    base = AutoModelForCausalLM.from_pretrained(tiny.hf_dir, dtype=torch.float32)
    with torch.no_grad():
        before = base(**ids).logits[0, -1].clone()
        tuned = PeftModel.from_pretrained(base, res["kto"]["adapter"])
        after = tuned(**ids).logits[0, -1]
    assert (after - before).abs().max() > 1e-3
