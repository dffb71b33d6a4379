"""How a method's ``n`` samples of one prompt reach the provider: a recorded protocol choice, not a detail.

``request``: one request with ``n`` choices (the prompt is sent, billed and rate-limited once); ``separate``: ``n``
requests of one choice each (the prompt n times), as a release that samples in a thread pool does. The answers are
samples of the same distribution either way, but the bill and the provider's rate limit differ (issue 30: a
sampling-heavy row looked 24-64% cheaper under ``request`` than the release's own accounting). Each method config
states its release's choice under ``sampling.n_mode`` (``configs/method/*.yaml``, docs/backbones.md's table); the
run's config.yaml records it and every table's protocol line shows it (``scripts/protocol.py:n_modes``). A backbone
that cannot return several choices (``supports_n: false``) sends separate requests whatever the mode.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

N_MODES = ("request", "separate")
#: A method config that says nothing: one request with n choices (the harness's behaviour before the option).
DEFAULT = "request"


def n_mode_of(method_cfg: Mapping[str, Any] | None) -> str:
    """The method's ``sampling.n_mode`` (default ``request``); ConfigError naming the key for another value."""
    from agentic_repro.harness.validate import ConfigError

    block = (method_cfg or {}).get("sampling") or {}
    if not isinstance(block, Mapping):
        raise ConfigError(f"method.sampling={block!r} is not allowed: a mapping such as {{n_mode: separate}}")
    unknown = sorted(set(block) - {"n_mode"})
    if unknown:
        raise ConfigError(f"unknown option(s) {', '.join('method.sampling.' + k for k in unknown)}: a method's "
                          "sampling block holds n_mode (per-call sampling is the root `sampling:` and the method's "
                          "own params)")
    mode = block.get("n_mode", DEFAULT)
    if mode not in N_MODES:
        raise ConfigError(f"method.sampling.n_mode={mode!r} is not allowed: one of {', '.join(N_MODES)} (request: one "
                          "request with n choices; separate: n requests, as a release sampling in a thread pool)")
    return str(mode)
