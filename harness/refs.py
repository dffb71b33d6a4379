"""Code named in a config: one spelling, ``package.module:attr`` (``benchmark.kind``, ``method.solver``,
``method.run_counts``, a search's ``optimiser``, ``env.engine``, a scripted backbone's ``script``).

Shipped configs and docs spell every path so. Run folders recorded before this convention hold
``benchmark.kind: package.module.Class``: :func:`canonical_ref` reads that spelling as the same path (the part
after the last dot is the attribute, as the loader always read it), so a folder's identity check and a loader
given an old ``config.yaml`` treat both spellings as one configuration; nothing here writes the dotted one.

A benchmark a YAML declaration replaced (``replaces:`` in its config: the old class and the sha256 of the keys the
declaration added) is the same configuration as a folder recorded with that class, as long as those keys still
hash to the recorded value: :func:`upgrade_recorded`. Change the declaration and the old folders differ again.
"""
from __future__ import annotations

import copy
import hashlib
import importlib
import json
from typing import Any

#: Dotted config keys whose value names code.
PATH_KEYS = ("benchmark.kind", "benchmark.env.engine", "method.solver", "method.run_counts",
             "method.search.optimiser", "backbone.script")


def canonical_ref(ref: str) -> str:
    """``pkg.mod:attr`` unchanged; the older ``pkg.mod.Attr`` as ``pkg.mod:Attr``."""
    if ":" in ref or "." not in ref:
        return ref
    module, _, attr = ref.rpartition(".")
    return f"{module}:{attr}"


def resolve_ref(ref: str, what: str) -> Any:
    """The object ``ref`` names; a ValueError naming ``what`` (the config key) when it cannot be imported."""
    module, sep, attr = canonical_ref(ref).partition(":")
    if not sep or not module or not attr:
        raise ValueError(f"{what}={ref!r} must look like 'package.module:name'")
    try:
        obj: Any = importlib.import_module(module)
        for part in attr.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"{what}={ref!r} cannot be imported ({exc})") from exc
    return obj


def _get(cfg: dict[str, Any], dotted: str) -> tuple[dict[str, Any] | None, str]:
    *heads, last = dotted.split(".")
    node: Any = cfg
    for head in heads:
        node = node.get(head) if isinstance(node, dict) else None
    return (node if isinstance(node, dict) else None), last


def canonical_config(cfg: dict[str, Any]) -> dict[str, Any]:
    """A copy of a resolved (or recorded) config with every :data:`PATH_KEYS` value in the one spelling."""
    out = copy.deepcopy(cfg)
    for dotted in PATH_KEYS:
        node, key = _get(out, dotted)
        if node is not None and isinstance(node.get(key), str):
            node[key] = canonical_ref(node[key])
    return out


def declaration_sha256(benchmark: dict[str, Any], added: list[str]) -> str:
    """The sha256 a ``replaces:`` block pins: the declaration's ``kind`` and the keys it added, with their values."""
    pinned = {"kind": canonical_ref(str(benchmark.get("kind"))), **{k: benchmark.get(k) for k in sorted(added)}}
    return hashlib.sha256(json.dumps(pinned, sort_keys=True, default=str).encode()).hexdigest()


def upgrade_recorded(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """A recorded config as this code spells it: paths canonical, and a benchmark block recorded with the class a
    YAML declaration replaced (``new``'s ``benchmark.replaces``) given the declaration's kind and added keys --
    only while those keys still hash to the pinned ``sha256``. Anything else is left to differ."""
    old = canonical_config(old)
    nb, ob = new.get("benchmark"), old.get("benchmark")
    replaces = nb.get("replaces") if isinstance(nb, dict) else None
    if not (isinstance(ob, dict) and isinstance(replaces, dict) and "replaces" not in ob):
        return old
    added = [str(k) for k in replaces.get("added") or ()]
    if (canonical_ref(str(ob.get("kind"))) != canonical_ref(str(replaces.get("kind")))
            or any(k in ob for k in added) or replaces.get("sha256") != declaration_sha256(nb, added)):
        return old
    old["benchmark"] = {**ob, **{k: nb[k] for k in added if k in nb}, "kind": canonical_ref(str(nb["kind"])),
                        "replaces": copy.deepcopy(replaces)}
    return old
