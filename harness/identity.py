"""A results folder belongs to exactly one resolved configuration.

``identity.json`` holds a hash of the resolved config (without the keys that cannot change an answer:
progress bar, concurrency, fsync, logger, cache location, problem selection, ...) and of every role's
backbone identity (model, model file hash, adapters). A resumed run must match it; otherwise answers of two
configurations would be mixed in one folder while ``config.yaml`` claims the newer one. On a mismatch the
run is refused with the differing keys and the two fixes: a new ``experiment=...`` or ``restart=true``.

Both edges matter. The benchmark block (split, extraction rule, version, ...) is part of the identity, and so
is the sha256 of the data file the problems were read from: a file changed under the same problem ids is
refused, naming the file, rather than mixed into the resumed answers. The endpoint is not: ``base_url`` (and
so a server restarted on another port, or ``localhost`` vs ``127.0.0.1``) never changes the identity.
"""
from __future__ import annotations

import hashlib
import json
import time
from typing import Any

from agentic_repro.harness.refs import canonical_config, upgrade_recorded
from agentic_repro.harness.results import RunPaths, read_json, write_json_atomic

#: Dotted keys that never change what a run answers (or whose effect is recomputed from the files each run).
NEUTRAL_KEYS = (
    "experiment", "results_root", "logger", "cache", "restart", "limit", "sample", "dry_run",
    "benchmark.limit", "benchmark.sample",
    "runner.progress", "runner.max_concurrent_problems", "runner.fsync", "runner.fail_fast_after",
    "runner.correct_threshold", "runner.score_retries", "method.label", "method.deviations",
    "method.run_counts",  # which counters metrics.json sums, not how problems are answered
    "sandbox",  # how untrusted code is contained: recorded in meta.json and footnoted, not an answer-changing setting
    "runner.budgets.max_usd",  # a dollar cap stops a run, never changes an answer (a re-run with a higher cap resumes)
    "runner.batch", "runner.batch_poll_s", "runner.batch_flush_s",  # the Batch API answers the same requests
)
#: Keys of a backbone config (the run's and each role's) that do not change its outputs.
#: ``server.cache_ram_mib``: llama-server's host-RAM prompt cache restores a prompt's saved KV state instead of
#: reading it again, as its slots already do for the prompt they hold (measured: the same answers, table1.yaml).
NEUTRAL_BACKBONE_KEYS = ("max_concurrency", "http_library", "retry", "api_key_env", "server.n_threads",
                         "server.cache_ram_mib", "base_url",
                         "rate_limit", "price", "service_tier")  # price, tier: what a reply costs, not what it says

#: Files that make up a run's results (removed by ``restart=true``; server.log is kept).
RUN_FILES = ("predictions.jsonl", "calls.jsonl", "requests.jsonl", "metrics.json", "method_state.json",
             "identity.json", "meta.json", "config.yaml", "reliability.png")


class IdentityMismatch(ValueError):
    """The folder holds results of another configuration."""


def _drop(d: dict[str, Any], dotted: str) -> None:
    head, _, rest = dotted.partition(".")
    if head not in d:
        return
    if not rest:
        d.pop(head)
    elif isinstance(d[head], dict):
        _drop(d[head], rest)


def output_config(resolved: dict[str, Any]) -> dict[str, Any]:
    """The part of a resolved config that can change outputs (code paths in the one ``module:attr`` spelling)."""
    cfg = canonical_config(resolved)
    for k in NEUTRAL_KEYS:
        _drop(cfg, k)
    if ((cfg.get("method") or {}).get("sampling") or {}).get("n_mode") == "request":  # the default (harness/n_mode.py)
        _drop(cfg, "method.sampling.n_mode")
    _drop_unset_roles(cfg)
    backbones = [cfg.get("backbone")] + list((cfg.get("roles") or {}).values())
    for bb in backbones:
        if isinstance(bb, dict):
            for k in NEUTRAL_BACKBONE_KEYS:
                _drop(bb, k)
    return _prune(cfg)


def _drop_unset_roles(cfg: dict[str, Any]) -> dict[str, Any]:
    """Drop role slots left unset (``{adapter: null}``, configs/roles/slot.yaml): a slot only says that a role may be
    set, so a run is the same configuration whichever configs declared it (until issue 32 configs/config.yaml
    declared 11 for every run; identity records of then hold them)."""
    roles = cfg.get("roles")
    if isinstance(roles, dict):
        for name in [n for n, node in roles.items()
                     if isinstance(node, dict) and set(node) <= {"adapter"} and node.get("adapter") is None]:
            roles.pop(name)
    return cfg


def _prune(d: dict[str, Any]) -> dict[str, Any]:
    """Drop blocks left empty (an absent ``runner:`` and one holding only neutral keys are the same)."""
    out = {}
    for k, v in d.items():
        if isinstance(v, dict):
            v = _prune(v)
            if not v:
                continue
        out[k] = v
    return out


def backbone_identity(backbone: Any) -> dict[str, Any]:
    """What distinguishes a backbone's outputs: its cache identity, its model name and its adapters
    (content hashes; paths differ between machines and are left out)."""
    from agentic_repro.harness.llm import model_identity

    adapters = {}
    for name, ident in sorted((getattr(backbone, "adapters", None) or {}).items()):
        adapters[name] = {k: v for k, v in dict(ident).items() if k != "path"}
    return {"model": backbone.model, "model_identity": model_identity(backbone),
            "cache_identity": backbone.cache_identity(), "adapters": adapters}


def _sha(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()


def identity_document(resolved_config: dict[str, Any], backbone_identities: dict[str, dict[str, Any]]) -> dict[str, Any]:
    cfg = json.loads(json.dumps(output_config(resolved_config), default=str))
    bbs = json.loads(json.dumps(backbone_identities, default=str))
    return {"version": 1, "identity_sha256": _sha({"config": cfg, "backbones": bbs}), "config_sha256": _sha(cfg),
            "backbones_sha256": _sha(bbs), "config": cfg, "backbones": bbs, "created": time.time()}


def _flatten(obj: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(obj, dict):
        out: dict[str, Any] = {}
        for k, v in obj.items():
            out.update(_flatten(v, f"{prefix}{k}."))
        return out or {prefix.rstrip("."): {}}
    return {prefix.rstrip("."): obj}


def differing_keys(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """``key: old → new`` for every dotted key whose value differs."""
    a, b = _flatten(old), _flatten(new)
    out = []
    for k in sorted(set(a) | set(b)):
        if a.get(k, "<absent>") != b.get(k, "<absent>"):
            out.append(f"{k}: {_short(a.get(k, '<absent>'))} -> {_short(b.get(k, '<absent>'))}")
    return out


def _short(v: Any) -> str:
    s = json.dumps(v, default=str) if not isinstance(v, str) else v
    return s if len(s) <= 60 else s[:57] + "..."


def check_run_identity(paths: RunPaths, resolved_config: dict[str, Any],
                       backbone_identities: dict[str, dict[str, Any]], restart: bool = False,
                       data: dict[str, Any] | None = None) -> dict[str, Any]:
    """Refuse to resume a folder written by another configuration; record the identity of a new one.

    ``backbone_identities`` maps each role ("default" = the run's backbone) to :func:`backbone_identity`.
    ``restart=True`` removes the folder's run files first (the response cache still replays their calls).
    Folders written before identity.json existed are checked against their config.yaml. ``data`` (the
    benchmark's :class:`~harness.benchmark.DataInfo` as a dict: ``file``, ``sha256``) is recorded and must
    match too; a folder recorded without it adopts it.
    """
    doc = identity_document(resolved_config, backbone_identities)
    if data is not None:
        doc["data"] = {"file": str(data.get("file")), "sha256": data.get("sha256")}
    root = paths.root
    if restart:
        for name in RUN_FILES:
            try:
                (root / name).unlink()
            except FileNotFoundError:
                pass
    old, diffs = recorded_differences(paths, doc, backbones=True)
    if old is not None and not diffs:
        _check_data(paths, old.get("data"), doc.get("data"))
        if doc.get("data") and old.get("data") != doc["data"]:  # adopt the data record (same sha256)
            write_json_atomic(paths.identity, {**old, "data": doc["data"]})
        return old
    if diffs:
        raise IdentityMismatch(mismatch_message(root, diffs))
    root.mkdir(parents=True, exist_ok=True)
    write_json_atomic(paths.identity, doc)
    return doc


def recorded_differences(paths: RunPaths, doc: dict[str, Any], *,
                         backbones: bool) -> tuple[dict[str, Any] | None, list[str]]:
    """The folder's identity record and how ``doc`` (an :func:`identity_document`) differs from it: the one
    comparison behind both the runner's check and a launcher's "done" (:func:`check_folder_config`).

    ``backbones=False`` compares the configuration hash only (``config_sha256``: every answer-changing key,
    the backbone's and each role's config blocks included); ``True`` adds the built backbones' identities.
    A folder written before identity.json existed is compared through its config.yaml. Returns
    (record or None, ``key: old -> new`` lines; empty when it is this configuration or a fresh folder)."""
    old = read_json(paths.identity, what="this run folder's identity record",
                    fix="restart=true discards the folder's results and starts over (the response cache replays "
                        "their calls), or give this configuration its own folder with experiment=<new name>")
    if old is not None and not isinstance(old, dict):
        raise IdentityMismatch(f"{paths.identity} is not an identity record; fix: restart=true, or experiment=<new name>")
    if old is not None:
        key = "identity_sha256" if backbones else "config_sha256"
        if old.get(key) == doc[key]:
            return old, []
        # recorded in an older spelling (benchmark.kind: pkg.mod.Class), with the class a YAML benchmark replaced or
        # with the unset role slots the root config declared:
        # the same configuration when the record is this hashing's (its hashes are of what it holds) and the
        # upgraded record hashes to this one; a record whose hash we cannot reproduce stays another configuration
        recorded = old.get("config") or {}
        old_config = _prune(_drop_unset_roles(upgrade_recorded(recorded, doc["config"])))
        if (old_config != recorded and _sha(recorded) == old.get("config_sha256")
                and _sha(old_config) == doc["config_sha256"]
                and (not backbones or _sha(old.get("backbones") or {}) == old.get("backbones_sha256")
                     == doc["backbones_sha256"])):
            return old, []
        diffs = differing_keys(old_config, doc["config"])
        if backbones:
            diffs += [f"backbone identity {d}" for d in differing_keys(old.get("backbones") or {}, doc["backbones"])]
        return old, diffs or [f"{key}: {str(old.get(key))[:12]}... -> {doc[key][:12]}..."]  # never a silent pass
    if paths.config.exists() and (paths.predictions.exists() or paths.calls.exists()):
        import yaml

        legacy = json.loads(json.dumps(output_config(yaml.safe_load(paths.config.read_text(encoding="utf-8")) or {}),
                                       default=str))
        return None, differing_keys(upgrade_recorded(legacy, doc["config"]), doc["config"])
    return None, []


def mismatch_message(root: Any, diffs: list[str]) -> str:
    shown = "; ".join(diffs[:8]) + (f"; ... ({len(diffs) - 8} more)" if len(diffs) > 8 else "")
    return (f"{root} holds results of another configuration (differs: {shown}); resuming would mix answers of "
            "both. Either give this configuration its own folder with experiment=<new name>, or discard that "
            "folder's results and start over with restart=true")


def check_folder_config(paths: RunPaths, resolved_config: dict[str, Any],
                        data: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """A launcher's half of :func:`check_run_identity`, made before any backbone is built: raise
    :class:`IdentityMismatch` (naming the differing keys) unless the folder is empty or was written by this
    configuration (its ``config_sha256``) from this data. A launcher calls a folder "done" only after this
    passes, so it never reports another configuration's complete run as this one's. What needs the backbone
    built (a model file's hash under an unchanged path) is checked by the runner when the run opens.
    Returns the folder's identity record (None: none yet)."""
    old, diffs = recorded_differences(paths, identity_document(resolved_config, {}), backbones=False)
    if diffs:
        raise IdentityMismatch(mismatch_message(paths.root, diffs))
    if old is not None and data is not None:
        _check_data(paths, old.get("data"), {"file": str(data.get("file")), "sha256": data.get("sha256")})
    return old


def _check_data(paths: RunPaths, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
    """Refuse a resume on data whose bytes changed since the folder's answers were made (same ids or not)."""
    if not old or not new or not old.get("sha256") or old.get("sha256") == new.get("sha256"):
        return
    raise IdentityMismatch(
        f"{paths.root} holds results made from other data: {new.get('file')} has sha256 {str(new.get('sha256'))[:16]}... "
        f"but the folder's answers were made from {old.get('file')} with sha256 {str(old.get('sha256'))[:16]}...; "
        "resuming would mix answers to two versions of the problems under the same ids. Either restore that "
        "file, give this data its own folder with experiment=<new name>, or start over with restart=true")
