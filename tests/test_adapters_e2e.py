"""Two real GGUF LoRA adapters loaded by the real llama-server and chosen per request (slow).

The base is the train helper's tiny random Qwen2 with the real vocabulary (``agentic_repro.training.fixtures``, ~45 MB, hundreds
of tokens/s), the adapters random LoRAs on it. Checks the measured hazards end to end: the adapters change the
generation, a base call through a server with adapters loaded equals a server started without any, and an unknown
adapter never reaches the server.
"""
from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from agentic_repro.harness.backbone import BackboneError
from agentic_repro.harness.backbones import build_backbone
from agentic_repro.harness.embedded.server import ServerPool, lora_adapters

pytestmark = pytest.mark.slow

MSG = [{"role": "user", "content": "Write a short sentence about rivers."}]
GREEDY = {"temperature": 0.0, "max_tokens": 24, "seed": 1}


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory):
    from agentic_repro.training.fixtures import lora_gguf, tiny_base_gguf

    base = tiny_base_gguf()
    out = tmp_path_factory.mktemp("adapters")
    return base, {name: lora_gguf(base, out, seed=seed, name=name) for name, seed in (("planner", 1), ("expert", 2))}


def cfg(base: Path, adapters: dict[str, Path] | None, parallel: int = 1) -> dict:
    return {"name": "tiny", "kind": "embedded", "model": "tiny-qwen2", "params": 1e7, "price": 0,
            "max_concurrency": parallel, "gguf": {"path": str(base)},
            "server": {"impl": "llama-server", "parallel": parallel, "n_ctx": 1024, "n_threads": 1},
            "adapters": {n: {"path": str(p)} for n, p in (adapters or {}).items()},
            "retry": {"max_attempts": 2, "timeout_s": 60}}


async def texts(bb, adapters) -> dict:
    out = {}
    for a in adapters:
        res = await bb.complete(MSG, GREEDY, 1, adapter=a)
        out[a] = res.completions[0].text
    return out


def test_two_adapters_chosen_per_request_and_base_equals_a_server_without_adapters(tiny, tmp_path):
    base, adapters = tiny
    with ServerPool(use_env=False) as pool:
        async def main():
            with_adapters = await build_backbone(cfg(base, adapters), run_dir=tmp_path / "a", seed=0, servers=pool)
            plain = await build_backbone(cfg(base, None), run_dir=tmp_path / "b", seed=0, servers=pool)
            assert len(pool.servers()) == 2  # the adapter list is part of the server's key
            url = with_adapters.server_url
            # every adapter's server-wide default scale was set to 0 at start
            assert [a["scale"] for a in lora_adapters(url)] == [0.0, 0.0]
            got = await texts(with_adapters, [None, "planner", "expert", None])
            ref = (await plain.complete(MSG, GREEDY, 1)).completions[0].text
            with pytest.raises(BackboneError, match="unknown adapter"):
                await with_adapters.complete(MSG, GREEDY, 1, adapter="critic")
            ident = with_adapters.adapter_identity("planner")
            await with_adapters.aclose()
            await plain.aclose()
            return got, ref, ident

        got, ref, ident = asyncio.run(main())
    assert got[None] == ref, "a base call through a server with adapters loaded must equal the plain server"
    assert got["planner"] != got[None] and got["expert"] != got[None] and got["planner"] != got["expert"]
    assert ident["sha256"] and ident["training_data_sha256"] is None  # random fixture: no training data
    assert ident["base_model"] is not None


def test_parallel_slots_batch_adapters_and_n(tiny, tmp_path):
    """4 slots: concurrent requests on different adapters all answer, n>1 gives n choices each counted."""
    base, adapters = tiny
    with ServerPool(use_env=False) as pool:
        async def main():
            bb = await build_backbone(cfg(base, adapters, parallel=4), run_dir=tmp_path, seed=0, servers=pool)
            outs = await asyncio.gather(*(bb.complete(MSG, GREEDY, 1, adapter=a)
                                          for a in ("planner", "expert", None, "planner")))
            many = await bb.complete(MSG, {"temperature": 1.0, "max_tokens": 12, "seed": 3}, 3, adapter="expert")
            await bb.aclose()
            return outs, many

        outs, many = asyncio.run(main())
    assert all(o.completions[0].completion_tokens > 0 for o in outs)
    assert len(many.completions) == 3 and all(c.completion_tokens > 0 for c in many.completions)
    assert sum(c.prompt_tokens for c in many.completions) > 0
