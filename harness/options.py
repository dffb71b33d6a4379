"""Method options as a dataclass built from ``method.params``, for methods with named ablation variants.

A method with variants (DenoiseFlow's Table 2, DynaGraph's w/o patching, ...) keeps its options in a dataclass:
unknown keys are refused by name (a typo never falls back to a default), then the variant's switches are
applied over the given values, then the dataclass checks itself (``validate()``)."""
from __future__ import annotations

from dataclasses import fields
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


def build_variant_options(cls: type[T], params: dict[str, Any], variants: dict[str, dict[str, Any]],
                          canonical: Callable[[str], str], method: str) -> T:
    """``cls(**params)`` with ``variant`` (default ``full``, resolved by ``canonical``) and its overrides set."""
    params = dict(params)
    variant = canonical(params.pop("variant", "full"))
    unknown = sorted(set(params) - {f.name for f in fields(cls)})  # type: ignore[arg-type]
    if unknown:
        raise ValueError(f"unknown {method} option(s) {unknown}")
    opts = cls(**params)
    opts.variant = variant  # type: ignore[attr-defined]
    for k, v in variants[variant].items():
        setattr(opts, k, v)
    opts.validate()  # type: ignore[attr-defined]
    return opts
