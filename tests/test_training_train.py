"""trl SFT / KTO / DPO on a peft LoRA over the tiny Qwen2 fixture: loss falls, resume, GGUF export, identity."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentic_repro.training.datasets import Example, build_dpo, build_kto, build_sft, find_runs, read_dataset, trace_examples
from agentic_repro.training.fixtures import tiny_base
from agentic_repro.training.train import TrainError, compose_config, main, train


@pytest.fixture(scope="module")
def tiny():
    return tiny_base()


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    """A hand-made run: even problems answered right (their stage is desirable), odd ones wrong; 2 plans each."""
    root = tmp_path_factory.mktemp("run") / "r"
    root.mkdir()
    preds = []
    for i in range(8):
        ok = i % 2 == 0
        preds.append({"id": f"p{i}", "status": "ok", "attempt": f"a{i}", "score": float(ok),
                      "trace": {"training_examples": [{"prompt": f"What is {i} plus {i}?",
                                                       "completion": f"{i} plus {i} is {2 * i}." if ok
                                                       else "I am not sure."}],
                                "plans": [{"plan": f"Step 1: add {i} and {i}. Step 2: answer.", "reward": 1.0},
                                          {"plan": "Answer at once.", "reward": 0.2}]}})
    (root / "predictions.jsonl").write_text("".join(json.dumps(p) + "\n" for p in preds))
    (root / "meta.json").write_text(json.dumps({"run_id": "t/tiny/m/b/1", "benchmark": {"name": "tiny"}}))
    return root


def _plans(t):
    return [Example(f"Plan for problem {t.id}", p["plan"], p["reward"], "planner") for p in t.trace["plans"]]


def _cfg(kind: str, data: Path, tiny, out: Path, *extra: str) -> dict:
    return compose_config(kind, [f"data={data}", f"base={tiny.hf_dir}", f"out={out}", "threads=2", "lr=3e-2",
                                 "grad_accum=1", "warmup_ratio=0", "val_fraction=0", *extra])


class _Killed(RuntimeError):
    pass


def _kill_after_checkpoint(step: int):
    from transformers import TrainerCallback

    class Kill(TrainerCallback):
        def on_save(self, args, state, control, **kw):
            if state.global_step == step:
                raise _Killed(f"killed after checkpoint-{step}")

    return Kill()


def test_config_defaults_are_dyflow_d2():
    sft = compose_config("sft", ["data=x", "out=y"])
    kto = compose_config("kto", ["data=x", "out=y"])
    dpo = compose_config("dpo", ["data=x", "out=y"])
    assert (sft["lr"], sft["epochs"], sft["max_length"], sft["batch_size"] * sft["grad_accum"], sft["scheduler"],
            sft["warmup_ratio"], sft["val_fraction"]) == (5e-6, 3, 2048, 4, "cosine", 0.1, 0.1)
    assert (kto["lr"], kto["beta"], kto["max_length"], kto["batch_size"] * kto["grad_accum"], kto["epochs"],
            kto["scheduler"]) == (2e-4, 0.1, 4096, 8, 3, "cosine")
    assert dpo["kind"] == "dpo" and dpo["beta"] == 0.1 and dpo["lora"] == sft["lora"] == \
        {"r": 8, "alpha": 16, "dropout": 0.05, "target_modules": ["q_proj", "v_proj"]}
    with pytest.raises(TrainError, match="data=...") as e:
        compose_config("sft", ["out=y"])
    assert "kind=sft" in str(e.value)
    with pytest.raises(TrainError, match="choose one of"):
        compose_config("ppo", [])


@pytest.fixture(scope="module")
def sft_run(tiny, run_dir: Path, tmp_path_factory):
    """An SFT run killed right after its step-2 checkpoint, then re-run with the same config (resumes)."""
    tmp = tmp_path_factory.mktemp("sft")
    ds = build_sft(find_runs([run_dir]), trace_examples(), tmp / "sft.jsonl")
    out = tmp / "sft"
    cfg = _cfg("sft", ds.path, tiny, out, "max_steps=4", "save_steps=2", "name=designer", "lr=1e-1")
    with pytest.raises(_Killed):
        train(cfg, callbacks=[_kill_after_checkpoint(2)])
    killed = {"checkpoint": (out / "checkpoints" / "checkpoint-2").is_dir(), "adapter": (out / "adapter").exists(),
              "png": (out / "loss.png").is_file()}
    return {"ds": ds, "out": out, "cfg": cfg, "killed": killed, "res": train(cfg), "tmp": tmp}


def test_sft_killed_run_resumes_from_its_last_checkpoint(tiny, sft_run):
    res, out = sft_run["res"], sft_run["out"]
    assert sft_run["killed"] == {"checkpoint": True, "adapter": False, "png": True}  # a killed run keeps its curve
    assert res.resumed_from and res.resumed_from.endswith("checkpoint-2") and res.steps == 4
    steps = [h["step"] for h in map(json.loads, (out / "log.jsonl").read_text().splitlines()) if "loss" in h]
    assert steps[-1] == 4 and 3 in steps
    assert res.losses[-1] < res.losses[0] - 0.05, res.losses
    # the same run never killed ends with the same adapter (optimiser, scheduler and data order were restored)
    whole = train({**sft_run["cfg"], "out": str(sft_run["tmp"] / "whole"), "export_gguf": False})
    from safetensors.torch import load_file

    a = load_file(res.adapter_dir / "adapter_model.safetensors")
    b = load_file(whole.adapter_dir / "adapter_model.safetensors")
    assert a.keys() == b.keys() and all((a[k] - b[k]).abs().max() < 1e-5 for k in a)
    # a resume that would mix two runs is refused
    with pytest.raises(TrainError, match="different lr"):
        train({**sft_run["cfg"], "lr": 1e-3})


def test_sft_exports_peft_and_gguf_with_identity(tiny, sft_run):
    from agentic_repro.harness.embedded.gguf import file_sha256, read_gguf_metadata
    from agentic_repro.harness.embedded.base_model import base_identity, resolve_base
    from agentic_repro.training.identity import read_adapter_identity

    res = sft_run["res"]
    assert read_gguf_metadata(res.gguf)["kv"]["general.type"] == "adapter"
    ident = read_adapter_identity(res.gguf)
    assert ident["name"] == "designer" and ident["sha256"] == file_sha256(res.gguf)
    assert ident["training_data_sha256"] == read_dataset(sft_run["ds"].path).sha256
    assert ident["base_model"] == base_identity(resolve_base(str(tiny.hf_dir)))
    assert json.loads((sft_run["out"] / "adapter.gguf.json").read_text())["config"]["lr"] == 1e-1
    assert read_adapter_identity(res.adapter_dir)["training_data_sha256"] == ident["training_data_sha256"]
    assert (res.adapter_dir / "adapter_config.json").is_file() and (sft_run["out"] / "loss.png").stat().st_size > 1000


def test_trained_adapter_changes_llama_cpp_generations(tiny, sft_run):
    """The exported GGUF LoRA loads in llama.cpp over the tiny GGUF base and changes a greedy answer."""
    from llama_cpp import Llama

    outs = []
    for kw in ({}, {"lora_path": str(sft_run["res"].gguf)}):
        llm = Llama(str(tiny.gguf), n_ctx=256, n_threads=1, verbose=False, seed=0, **kw)
        r = llm.create_chat_completion([{"role": "user", "content": "What is 2 plus 2?"}], max_tokens=6,
                                       temperature=0)
        outs.append(r["choices"][0]["message"]["content"])
        llm.close()
    assert outs[0] != outs[1], outs


def test_dpo_loss_falls_and_logs_to_wandb(tiny, run_dir: Path, tmp_path: Path, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path / "wb"))
    (tmp_path / "wb").mkdir()
    ds = build_dpo(find_runs([run_dir]), _plans, tmp_path / "dpo.jsonl")
    assert len(ds.rows) == 8
    res = train(_cfg("dpo", ds.path, tiny, tmp_path / "dpo", "max_steps=2", "export_gguf=false",
                     "val_fraction=0.25", "eval_steps=2", "lr=1e-1", "logger=wandb"))
    assert list((tmp_path / "wb").rglob("*.wandb")), "logger=wandb wrote no offline wandb run"
    assert res.losses[0] == pytest.approx(0.6931, abs=1e-3)  # log 2: the adapter starts as the reference
    assert res.losses[-1] < res.losses[0] - 0.01, res.losses
    assert res.eval_losses and res.gguf is None and (tmp_path / "dpo" / "loss.png").stat().st_size > 1000


def test_kto_continues_the_sft_adapter_and_its_loss_falls(tiny, run_dir: Path, sft_run, tmp_path: Path):
    """DyFlow's chain: KTO refines the SFT'd designer (init_adapter), which is also KTO's reference."""
    from safetensors.torch import load_file

    ds = build_kto(find_runs([run_dir]), trace_examples(), tmp_path / "kto.jsonl", ratio=1.0)
    assert ds.provenance["counts"]["desirable"] == ds.provenance["counts"]["undesirable"] == 4
    # beta=1 (not D.2's 0.1) so that two steps on a random toy model move the loss visibly
    # batch 8 = the whole dataset: both steps see the same rows, so their losses are comparable
    res = train(_cfg("kto", ds.path, tiny, tmp_path / "kto", "max_steps=2", "export_gguf=false", "lr=2e-1", "beta=1.0",
                     "batch_size=8", f"init_adapter={sft_run['res'].adapter_dir}"))
    assert res.losses[0] == pytest.approx(0.5, abs=1e-3)  # the policy starts equal to its reference (the SFT adapter)
    assert res.losses[-1] < res.losses[0] - 0.005, res.losses
    assert res.identity["init_adapter"]["sha256"] and not (res.adapter_dir / "ref").exists()
    sft_w, kto_w = load_file(sft_run["res"].adapter_dir / "adapter_model.safetensors"), \
        load_file(res.adapter_dir / "adapter_model.safetensors")
    assert sft_w.keys() == kto_w.keys() and any((sft_w[k] - kto_w[k]).abs().max() > 0 for k in sft_w)


def test_wrong_dataset_kind_is_refused(tiny, run_dir: Path, tmp_path: Path, capsys):
    ds = build_sft(find_runs([run_dir]), trace_examples(), tmp_path / "sft.jsonl")
    with pytest.raises(TrainError, match="is a 'sft' dataset, but kind=dpo"):
        train(_cfg("dpo", ds.path, tiny, tmp_path / "x"))
    assert main(["kind=dpo", f"data={ds.path}", f"out={tmp_path / 'y'}", f"base={tiny.hf_dir}"]) == 2
    assert "kind=dpo" in capsys.readouterr().err


def test_gguf_quantizer_is_detached(tiny, tmp_path: Path):
    """transformers attaches its GGUF quantizer to a model read from a GGUF (the quantizer calls below are the ones
    ``from_pretrained(gguf_file=...)`` makes around loading the weights); save_pretrained and the Trainer refuse
    such a model until :func:`agentic_repro.harness.embedded.base_model.detach_gguf_quantizer` removes it. The slow test loads a real GGUF."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, Trainer, TrainingArguments
    from transformers.quantizers.quantizer_gguf import GgufHfQuantizer
    from transformers.utils.quantization_config import GgufConfig

    from agentic_repro.harness.embedded.base_model import detach_gguf_quantizer

    def quantized():
        model = AutoModelForCausalLM.from_pretrained(tiny.hf_dir)
        quantizer = GgufHfQuantizer(GgufConfig())
        quantizer.preprocess_model(model)
        model.hf_quantizer = quantizer
        quantizer.postprocess_model(model)
        return model

    args = TrainingArguments(output_dir=str(tmp_path / "t"), use_cpu=True, report_to=[])
    m = quantized()
    with pytest.raises(ValueError, match="not serializable"):
        m.save_pretrained(tmp_path / "refused")
    with pytest.raises(ValueError, match="do not support training"):
        Trainer(model=get_peft_model(quantized(), LoraConfig(r=2, target_modules=["q_proj"])), args=args)
    detach_gguf_quantizer(m)
    assert getattr(m, "hf_quantizer", None) is None and getattr(m.config, "quantization_config", None) is None
    m.save_pretrained(tmp_path / "saved")
    assert "quantization_config" not in json.loads((tmp_path / "saved" / "config.json").read_text())
    Trainer(model=get_peft_model(detach_gguf_quantizer(quantized()), LoraConfig(r=2, target_modules=["q_proj"])),
            args=args)
