"""Small, well-formed adapter files for tests: a GGUF LoRA and a peft folder (stdlib only, no torch/gguf)."""
from __future__ import annotations

import json
import struct
from pathlib import Path


def _string(s: str) -> bytes:
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def write_gguf_lora(path: Path, *, rows: int = 2, cols: int = 4) -> Path:
    """A GGUF v3 file with ``general.type = adapter`` and two F32 tensors (lora_a, lora_b), 32-byte aligned."""
    kv = _string("general.type") + struct.pack("<I", 8) + _string("adapter")
    names = ("blk.0.attn_q.weight.lora_a", "blk.0.attn_q.weight.lora_b")
    nbytes = rows * cols * 4
    infos = b"".join(_string(n) + struct.pack("<I", 2) + struct.pack("<QQ", cols, rows) + struct.pack("<I", 0)
                     + struct.pack("<Q", i * nbytes) for i, n in enumerate(names))
    head = b"GGUF" + struct.pack("<I", 3) + struct.pack("<QQ", len(names), 1) + kv + infos
    head += b"\0" * (-len(head) % 32)
    path.write_bytes(head + struct.pack(f"<{rows * cols * len(names)}f", *([0.5] * rows * cols * len(names))))
    return path


def write_peft_dir(path: Path, base: str = "Qwen/Qwen2.5-7B-Instruct") -> Path:
    """A peft adapter folder: adapter_config.json and a one-tensor adapter_model.safetensors."""
    path.mkdir(parents=True, exist_ok=True)
    (path / "adapter_config.json").write_text(json.dumps({"base_model_name_or_path": base, "r": 8, "lora_alpha": 16}))
    data = struct.pack("<4f", 1, 2, 3, 4)
    header = json.dumps({"w.lora_A.weight": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, len(data)]}}).encode()
    (path / "adapter_model.safetensors").write_bytes(struct.pack("<Q", len(header)) + header + data)
    return path
