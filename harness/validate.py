"""Every run option is checked before any work starts, with a message naming the key, the bad value and
what is allowed (``limit=-1`` must not silently drop a problem, ``limit=abc`` must not fail deep inside).

The schema of known keys is the root config itself: every top-level key of ``configs/config.yaml``, every
config group (a folder of ``configs/``), and every key of its ``runner`` block. Hydra only lets ``+key=...``
add a key the config does not declare, so such a key reaching here is one no part of the harness reads:
an error, not a silently ignored override. Method, benchmark and backbone configs are free-form below their
top level (each part validates its own options).
"""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

CONFIG_DIR = Path(__file__).resolve().parents[1] / "configs"
SAMPLING_LIMITS = {"temperature": (0.0, 2.0), "top_p": (0.0, 1.0)}


class ConfigError(ValueError):
    """A run option has a value the harness cannot use."""


@lru_cache(maxsize=1)
def _declared() -> tuple[frozenset[str], dict[str, frozenset[str]]]:
    """(top-level keys, {block: its keys}) declared by configs/config.yaml and its config groups."""
    import yaml

    root = yaml.safe_load((CONFIG_DIR / "config.yaml").read_text(encoding="utf-8")) or {}
    top = {k for k in root if k not in ("defaults", "hydra")}
    top |= {p.name for p in CONFIG_DIR.iterdir() if p.is_dir()}
    for p in CONFIG_DIR.glob("*/*.yaml"):  # a `# @package _global_` group config declares its own top-level keys
        text = p.read_text(encoding="utf-8")  # (e.g. method=denoiseflow adds `denoiseflow.variant`)
        if text.lstrip().startswith("# @package _global_"):
            top |= {k for k in (yaml.safe_load(text) or {}) if k not in ("defaults", "hydra")}
    blocks = {k: frozenset(v) for k, v in root.items()
              if isinstance(v, dict) and k in ("runner", "cache", "sampling", "sandbox")}
    return frozenset(top), blocks


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _fail(key: str, value: Any, allowed: str) -> None:
    raise ConfigError(f"{key}={value!r} is not allowed: {allowed}")


def _positive_int_or_null(cfg: dict[str, Any], key: str, what: str, prefix: str = "") -> None:
    v = cfg.get(key)
    if v is not None and not (_is_int(v) and v >= 1):
        _fail(prefix + key, v,
              f"{what}: a positive integer, or null for {'all' if key in ('limit', 'sample') else 'the default'}")


def validate_run_config(cfg: dict[str, Any]) -> None:
    """Raise :class:`ConfigError` for the first unusable option of a resolved run config."""
    _check_known(cfg)
    _check_top_level(cfg)
    _check_cache_and_sandbox(cfg)
    _check_runner(cfg.get("runner") or {})
    _check_backbones(cfg)
    _check_sampling("sampling", cfg.get("sampling") or {})


def _check_known(cfg: dict[str, Any]) -> None:
    """Every option is one some part of the harness reads (a typo is refused, not ignored)."""
    top, blocks = _declared()
    unknown = sorted(set(cfg) - top - {"hydra"})
    if unknown:
        raise ConfigError(f"unknown option(s) {', '.join(unknown)}: no part of the harness reads "
                          f"{'it' if len(unknown) == 1 else 'them'}. Known top-level options: {', '.join(sorted(top))}")
    for block in ("runner", "cache", "sandbox"):
        extra = sorted(set(cfg.get(block) or {}) - blocks.get(block, frozenset()))
        if extra:
            raise ConfigError(f"unknown option(s) {', '.join(f'{block}.{k}' for k in extra)}: no part of the harness "
                              f"reads {'it' if len(extra) == 1 else 'them'}. Known {block} options: "
                              f"{', '.join(sorted(blocks.get(block, ())))}")
    for group in ("method", "benchmark", "backbone"):
        if group in cfg and not (isinstance(cfg[group], dict) and cfg[group].get("name")):
            _fail(group, cfg[group], f"a {group} config with a name (pick one of configs/{group}/*.yaml)")


def _check_top_level(cfg: dict[str, Any]) -> None:
    seed = cfg.get("seed")
    if not (_is_int(seed) and seed >= 0):
        _fail("seed", seed, "a non-negative integer (the papers use 42, 123, 456)")
    _positive_int_or_null(cfg, "limit", "the first N problems")
    _positive_int_or_null(cfg, "sample", "a seeded random subset of N problems")
    spt = cfg.get("samples_per_task", 1)  # k samples per problem -> pass@1..k
    if not (_is_int(spt) and spt >= 1):
        _fail("samples_per_task", spt, "a positive integer (independent samples per problem; 1 = one answer each)")
    exp = cfg.get("experiment", "default")
    if not isinstance(exp, str) or not exp.strip() or exp.startswith("/") or ".." in exp.split("/"):
        _fail("experiment", exp, "a non-empty name relative to results_root (no '..', not absolute)")
    if "restart" in cfg and not isinstance(cfg["restart"], bool):
        _fail("restart", cfg["restart"], "true or false")


def _check_cache_and_sandbox(cfg: dict[str, Any]) -> None:
    from agentic_repro.harness.cache import MODES

    cache = cfg.get("cache") or {}
    if "mode" in cache and cache["mode"] not in MODES:
        _fail("cache.mode", cache["mode"], f"one of {', '.join(MODES)}")

    from agentic_repro.evaluators.sandbox import ISOLATIONS

    isolation = (cfg.get("sandbox") or {}).get("isolation", "bwrap")
    if isolation not in ISOLATIONS:
        _fail("sandbox.isolation", isolation, "bwrap (bubblewrap pod, the default) or process (no filesystem "
              "isolation, recorded in every run and footnoted)")
    per_run = (cfg.get("sandbox") or {}).get("pod_per_run", False)
    if not isinstance(per_run, bool):
        _fail("sandbox.pod_per_run", per_run, "true (a fresh bwrap pod for every run) or false (a pod serves many runs)")


def _check_runner(runner: dict[str, Any]) -> None:
    _positive_int_or_null(runner, "max_concurrent_problems", "problems solved at once", "runner.")
    for key in ("progress", "fsync"):
        if key in runner and not isinstance(runner[key], bool):
            _fail(f"runner.{key}", runner[key], "true or false")
    if "fail_fast_after" in runner and not (_is_int(runner["fail_fast_after"]) and runner["fail_fast_after"] >= 0):
        _fail("runner.fail_fast_after", runner["fail_fast_after"],
              "a non-negative integer (failed calls with none succeeding before the run stops; 0 = never)")
    if "score_retries" in runner and not (_is_int(runner["score_retries"]) and runner["score_retries"] >= 0):
        _fail("runner.score_retries", runner["score_retries"],
              "a non-negative integer (re-tries of a scorer that raised before the problem is an error; 0 = none)")
    thr = runner.get("correct_threshold", 0.5)
    if not (_is_num(thr) and 0 <= thr <= 1):
        _fail("runner.correct_threshold", thr, "a number in [0, 1]")
    budgets = runner.get("budgets") or {}
    if not isinstance(budgets, dict):
        _fail("runner.budgets", budgets, "a mapping (max_calls_per_problem: N)")
    v = budgets.get("max_calls_per_problem")
    if v is not None and not (_is_int(v) and v >= 1):
        _fail("runner.budgets.max_calls_per_problem", v, "a positive integer, or null for no budget")
    usd = budgets.get("max_usd")
    if usd is not None and not (_is_num(usd) and usd > 0):
        _fail("runner.budgets.max_usd", usd, "a positive number of dollars (the provider's bill), or null for no cap")


def _check_backbones(cfg: dict[str, Any]) -> None:
    """The run's backbone and every role's own: concurrency, sampling, the rate_limit block."""
    from agentic_repro.harness.n_mode import n_mode_of  # the method's sampling.n_mode (harness/n_mode.py)
    from agentic_repro.harness.rate_limit import check_backbone_config  # the rate_limit block (harness/rate_limit.py)

    n_mode_of(cfg.get("method") if isinstance(cfg.get("method"), dict) else None)

    backbones = [("backbone", cfg.get("backbone") or {})]
    backbones += [(f"roles.{r}", b) for r, b in (cfg.get("roles") or {}).items() if isinstance(b, dict)]
    for prefix, bb in backbones:
        mc = bb.get("max_concurrency")
        if mc is not None and not (_is_int(mc) and mc >= 1):
            _fail(f"{prefix}.max_concurrency", mc, "a positive integer (requests in flight at once)")
        _check_sampling(f"{prefix}.sampling", bb.get("sampling") or {})
        check_backbone_config(prefix, bb)


def _check_sampling(prefix: str, sampling: dict[str, Any]) -> None:
    from agentic_repro.harness.backbone import SAMPLING_KEYS

    for key, v in sampling.items():
        if key not in SAMPLING_KEYS:
            _fail(f"{prefix}.{key}", v, f"not a sampling parameter; known: {', '.join(SAMPLING_KEYS)}")
        if v is None:
            continue
        if key in SAMPLING_LIMITS:
            lo, hi = SAMPLING_LIMITS[key]
            if not (_is_num(v) and lo <= v <= hi) or (key == "top_p" and v == 0):
                _fail(f"{prefix}.{key}", v, f"a number in {'(' if key == 'top_p' else '['}{lo}, {hi}]")
        elif key in ("max_tokens", "top_logprobs") and not (_is_int(v) and v >= (1 if key == "max_tokens" else 0)):
            _fail(f"{prefix}.{key}", v, "a positive integer" if key == "max_tokens" else "a non-negative integer")
        elif key == "seed" and not _is_int(v):
            _fail(f"{prefix}.{key}", v, "an integer, or null for the run seed")
        elif key == "logprobs" and not isinstance(v, bool):
            _fail(f"{prefix}.{key}", v, "true or false")
        elif key == "stop" and not (isinstance(v, str) or (isinstance(v, list) and all(isinstance(s, str) for s in v))):
            _fail(f"{prefix}.{key}", v, "a string or a list of strings")
