"""Where a run's results go: the folder path names the model, not only the backbone config.

``backbone=vllm`` (or any OpenAI-compatible endpoint) can serve any model, so its folder carries a slug of
the model: ``vllm@qwen--qwen2.5-7b-instruct``. The embedded backbones pin their model file by sha256 in the
config, and their folder stays the readable config name (``local``); every model's full identity is in the
folder's ``identity.json`` either way.
"""
from __future__ import annotations

import re
from typing import Any

#: Backbone kinds whose config name alone does not fix the model.
NAMED_BY_MODEL = ("openai", "vllm-inprocess")


def model_slug(model: str) -> str:
    slug = re.sub(r"[^a-z0-9._-]+", "_", str(model).replace("/", "--").lower()).strip("._-")
    return slug or "model"


def backbone_dir(backbone_cfg: dict[str, Any]) -> str:
    """The results-path component of a backbone: ``<name>`` or ``<name>@<model slug>``."""
    name = str(backbone_cfg["name"])
    model = backbone_cfg.get("model")
    if backbone_cfg.get("kind") not in NAMED_BY_MODEL or not model:
        return name
    slug = model_slug(model)
    return name if slug == name.lower() else f"{name}@{slug}"
