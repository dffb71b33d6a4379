"""The in-process peft backbone (harness/embedded/peft.py) over the tiny Qwen2 fixture and real LoRA adapters."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from agentic_repro.harness.adapters import AdapterSpec
from agentic_repro.harness.backbone import BackboneError
from agentic_repro.harness.ledger import Price
from agentic_repro.harness.embedded.peft import PeftBackbone
from agentic_repro.training.fixtures import lora_gguf, tiny_base

MSG = [{"role": "user", "content": "Name a colour."}]
GREEDY = {"temperature": 0.0, "max_tokens": 8}


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    tiny = tiny_base()
    d = tmp_path_factory.mktemp("adapters")
    a = lora_gguf(tiny.gguf, d, seed=1, name="a")
    b = lora_gguf(tiny.gguf, d, seed=7, name="b", train_texts=["Blue is a colour.", "Red is a colour."])
    both = PeftBackbone(name="peft-test", model=str(tiny.hf_dir), price=Price(0, 0), threads=2,
                        adapters={"a": AdapterSpec("a", str(a)), "b": AdapterSpec("b", str(d / "b"))})
    plain = PeftBackbone(name="peft-plain", model=str(tiny.hf_dir), price=Price(0, 0), threads=2)
    return {"tiny": tiny, "dir": d, "a": a, "b": b, "both": both, "plain": plain}


async def _text(bb, adapter=None, sampling=GREEDY, n=1):
    res = await bb.complete(MSG, sampling, n, adapter=adapter)
    return [c.text for c in res.completions], res


async def test_adapters_change_generations_and_none_is_the_base(setup):
    bb = setup["both"]
    base, _ = await _text(bb)
    with_a, _ = await _text(bb, "a")
    with_b, _ = await _text(bb, "b")
    assert base != with_a and with_a != with_b
    assert base == (await _text(setup["plain"]))[0]  # adapter=None: every adapter disabled = the bare base
    assert (await _text(bb, "a"))[0] == with_a and (await _text(bb))[0] == base  # switching back and forth


async def test_unknown_adapter_is_refused_before_any_generation(setup):
    with pytest.raises(BackboneError) as e:
        await setup["both"].complete(MSG, GREEDY, 1, adapter="nope")
    assert e.value.kind == "unknown_adapter" and e.value.attempts == 0
    with pytest.raises(BackboneError) as e:
        setup["both"].adapter_identity("nope")
    assert e.value.kind == "unknown_adapter"


async def test_adapter_identity_and_backbone_identity(setup):
    from agentic_repro.training.identity import read_adapter_identity

    bb = setup["both"]
    ia, ib = bb.adapter_identity("a"), bb.adapter_identity("b")
    assert ia["sha256"] == read_adapter_identity(setup["dir"] / "a")["sha256"]  # the peft folder beside a.gguf
    assert ia["training_data_sha256"] is None and ib["training_data_sha256"]
    assert ib["base_model"]["sha256"]  # the fixture's base identity, from the sidecar
    ident = bb.identity()
    assert ident["kind"] == "peft" and set(ident["adapters"]) == {"a", "b"} and ident["base"]["sha256"]
    assert bb.cache_identity() == setup["plain"].cache_identity()  # the adapter is keyed per call, not here


async def test_sampling_n_seeded_and_token_counts(setup):
    bb = setup["plain"]
    s = {"temperature": 0.9, "top_p": 0.95, "max_tokens": 6, "seed": 5}
    first, res = await _text(bb, sampling=s, n=3)
    again, _ = await _text(bb, sampling=s, n=3)
    assert len(first) == 3 and first == again
    assert res.completions[0].prompt_tokens > 0 and all(c.prompt_tokens == 0 for c in res.completions[1:])
    assert all(0 < c.completion_tokens <= 6 and c.finish_reason in ("stop", "length") for c in res.completions)
    lp = (await bb.complete(MSG, {**GREEDY, "logprobs": True}, 1)).completions[0].logprobs
    assert lp and all(x["logprob"] <= 0 for x in lp)


async def test_built_from_a_backbone_config(setup, tmp_path: Path):
    from agentic_repro.harness.backbones import build_backbone

    cfg = {"name": "peft-local", "kind": "peft", "model": str(setup["tiny"].hf_dir), "price": 0, "threads": 2,
           "max_concurrency": 1, "adapters": {"a": {"path": str(setup["a"])}}}
    bb = await build_backbone(cfg, run_dir=tmp_path, seed=0)
    assert isinstance(bb, PeftBackbone) and (await _text(bb, "a"))[0] == (await _text(setup["both"], "a"))[0]
    lone = tmp_path / "lone.gguf"
    shutil.copyfile(setup["a"], lone)  # a GGUF LoRA without its peft folder: peft cannot load it
    with pytest.raises(BackboneError, match="peft cannot load a GGUF"):
        await build_backbone({**cfg, "adapters": {"x": {"path": str(lone)}}}, run_dir=tmp_path, seed=0)
