"""Convert a GGUF (the embedded model) into a bf16 Hugging Face folder that vLLM's CPU build can serve.

Run by the vLLM venv's interpreter as a script (it imports only the standard library, torch and transformers, none
of the harness):

    .venv-vllm/bin/python harness/vllm/convert.py GGUF_PATH OUT_DIR

vLLM on CPU serves bf16/fp32 checkpoints, not llama.cpp's Q4_K_M; transformers dequantises the GGUF (``gguf_file=``)
and the weights are copied into a fresh model of the same config without the GGUF quantizer (transformers refuses to
save a model that still carries it), then saved as safetensors with the GGUF's tokenizer and chat template. The
generation config written is the one transformers derives from the GGUF (token ids only: a GGUF carries no sampling
defaults), so vLLM has no model sampling defaults to apply. Writes into ``OUT_DIR`` (created, must not exist).
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path


def convert(gguf: Path, out: Path) -> dict:
    import torch  # pyright: ignore[reportMissingImports]  (runs in .venv-vllm, `make install-vllm`)
    import transformers  # pyright: ignore[reportMissingImports]  (runs in .venv-vllm)
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer  # pyright: ignore[reportMissingImports]

    t0 = time.monotonic()
    folder, name = str(gguf.parent), gguf.name
    loaded = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.bfloat16)
    cfg = AutoConfig.from_pretrained(folder, gguf_file=name)
    if "quantization_config" in cfg.__dict__:
        delattr(cfg, "quantization_config")
    cfg.dtype = torch.bfloat16
    fresh = type(loaded)(cfg).to(torch.bfloat16)
    missing, unexpected = fresh.load_state_dict(loaded.state_dict(), strict=False)
    # a tied lm_head is not in the state dict of either model: nothing else may be missing
    missing = [k for k in missing if not (k == "lm_head.weight" and cfg.tie_word_embeddings)]
    if missing or unexpected:
        raise SystemExit(f"convert: the state dict does not fit the fresh model: missing {missing}, "
                         f"unexpected {unexpected}")
    fresh.generation_config = loaded.generation_config
    out.mkdir(parents=True)
    fresh.save_pretrained(out, safe_serialization=True)
    AutoTokenizer.from_pretrained(folder, gguf_file=name).save_pretrained(out)
    return {"gguf_file": name, "architecture": type(fresh).__name__, "dtype": "bfloat16",
            "transformers": transformers.__version__, "torch": torch.__version__,
            "seconds": round(time.monotonic() - t0, 1)}


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        raise SystemExit("usage: convert.py GGUF_PATH OUT_DIR")
    info = convert(Path(argv[0]), Path(argv[1]))
    print(json.dumps(info))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
