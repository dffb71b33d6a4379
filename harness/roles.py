"""Roles: named backbones inside one run (designer, executor, judge, planner, experts ...).

A run has its default backbone (role ``default``) plus the roles its config names, each a backbone
config of its own, optionally bound to an adapter of that backbone::

    python -m agentic_repro.harness.run method=... backbone=local backbone@roles.designer=gpt-4o-mini \\
        roles.planner.adapter=planner

``roles.<name>`` without a backbone uses the run's backbone (so ``roles.planner.adapter=planner``
alone means "the run's model with the planner adapter"). The core knows no role name: a method config
declares the roles it calls (``roles: [designer, executor]``) and a slot for each in its defaults list
(``- /roles@_global_.roles.designer: slot``, configs/roles/slot.yaml), which is what lets the command line set
``backbone@roles.designer=...`` without a ``+``; a scorer a benchmark names declares its own (the judge:
harness/extra_scorers.py). Declared roles not configured run on the default backbone, attributed to their own name;
a configured role nobody declares is refused before any work, and a role neither configured nor declared is an
error at the first call that names it, before any request. Roles that name the same backbone config share one
backbone object (one server, one concurrency limit, one LLMClient); every call is attributed to its role in the
ledger.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from collections.abc import Awaitable, Callable
from typing import Any

DEFAULT = "default"
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_\-]*$")


class UnknownRole(KeyError):
    """``ctx.generate(role=...)`` named a role the run does not have."""

    def __str__(self) -> str:  # KeyError quotes its message; this one is a sentence
        return str(self.args[0])


@dataclass(frozen=True)
class Role:
    name: str
    backbone_cfg: dict[str, Any]  # the resolved backbone config (the run's when the role names none)
    adapter: str | None = None
    own_backbone: bool = False    # False: the run's default backbone

    @property
    def backbone_key(self) -> str:
        return backbone_key(self.backbone_cfg)


def backbone_key(cfg: dict[str, Any]) -> str:
    """Equal configs → one backbone object."""
    return json.dumps(cfg, sort_keys=True, default=str)


def is_backbone_config(node: dict[str, Any]) -> bool:
    return "kind" in node or "name" in node


def resolve_roles(default_backbone: dict[str, Any], roles_cfg: dict[str, Any] | None,
                  declared: list[str] | None = None) -> dict[str, Role]:
    """Every role of a run by name, ``default`` first.

    ``roles_cfg`` is the config's ``roles:`` block; an entry with neither a backbone nor an adapter is
    unset (an unset slot, configs/roles/slot.yaml). ``declared`` is what the method config's ``roles: [...]``
    and the benchmark's scorers declare: each runs on the default backbone unless configured, and a configured
    role outside it is an error (a typo would otherwise silently run everything on the default backbone);
    ``None`` checks nothing (a caller that declares for itself).
    """
    roles = {DEFAULT: Role(DEFAULT, dict(default_backbone))}
    for name in declared or []:
        if not _NAME.match(str(name)) or name == DEFAULT:
            raise ValueError(f"method roles: {name!r} must be an identifier other than '{DEFAULT}'")
    for name, node in (roles_cfg or {}).items():
        node = dict(node or {})
        adapter = node.pop("adapter", None)
        if not node and adapter is None:
            continue  # unset
        if not _NAME.match(str(name)) or name == DEFAULT:
            raise ValueError(f"roles.{name}: a role name is an identifier other than '{DEFAULT}'")
        if declared is not None and name not in declared:
            uses = f"only the roles {declared}" if declared else "no role"
            raise ValueError(f"roles.{name} is configured but the method (and the benchmark's scorers) declare "
                             f"{uses}; fix the name or drop roles.{name} (a method declares its roles in its "
                             f"config: roles: [...] and a slot each, docs/roles-and-adapters.md)")
        if is_backbone_config(node):
            roles[name] = Role(name, node, adapter, own_backbone=True)
        elif node:
            raise ValueError(f"roles.{name}: {sorted(node)} is not a backbone config; set the backbone with "
                             f"backbone@roles.{name}=<config in configs/backbone/> and optionally "
                             f"roles.{name}.adapter=<adapter name>")
        else:
            roles[name] = Role(name, dict(default_backbone), adapter)
    for name in declared or []:
        if name not in roles:
            roles[name] = Role(name, dict(default_backbone))
    return roles


def role_of(roles: dict[str, Any], role: str | None) -> str:
    """The role a call runs as; an unknown name is an error before any call is made."""
    name = DEFAULT if role is None else role
    if name not in roles:
        configured = sorted(r for r in roles if r != DEFAULT)
        raise UnknownRole(f"role {name!r} is not configured for this run (roles: {configured or 'none'}); "
                          f"set it with backbone@roles.{name}=<backbone config> or list it under the method "
                          f"config's roles: [...] to run it on the default backbone")
    return name


async def build_role_backbones(roles: dict[str, Role], build: Callable[[dict[str, Any]], Awaitable[Any]],
                               given: Any | None = None) -> dict[str, Any]:
    """One backbone object per distinct backbone config, mapped to every role that uses it.

    ``given`` replaces building (tests pass a scripted double): one object for every role, or a dict
    from backbone config name to object.
    """
    by_key: dict[str, Any] = {}
    out: dict[str, Any] = {}
    try:
        for name, role in roles.items():
            key = role.backbone_key
            if key not in by_key:
                if given is None:
                    by_key[key] = await build(role.backbone_cfg)
                elif isinstance(given, dict):
                    if role.backbone_cfg["name"] not in given:
                        raise ValueError(f"role {name}: no test backbone for config {role.backbone_cfg['name']!r}")
                    by_key[key] = given[role.backbone_cfg["name"]]
                else:
                    by_key[key] = given
            out[name] = by_key[key]
        for name, role in roles.items():
            if role.adapter is not None:
                check_adapter(out[name], role.adapter, name)
    except BaseException:
        if given is None:  # do not leave servers or clients of the roles built so far behind
            for bb in by_key.values():
                await bb.aclose()
        raise
    return out


def check_adapter(backbone: Any, adapter: str, role: str) -> dict[str, Any]:
    """The adapter's identity; an adapter the backbone does not carry fails before any call."""
    ident = getattr(backbone, "adapter_identity", None)
    if ident is None:
        raise ValueError(f"role {role}: adapter {adapter!r} is set but backbone {backbone.name} carries no adapters "
                         f"(add adapters: {{{adapter}: {{path: ...}}}} to its config)")
    return ident(adapter)


def role_identities(roles: dict[str, Role], backbones: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """What meta.json and the results folder's identity record per role."""
    out = {}
    for name, role in roles.items():
        bb = backbones[name]
        out[name] = {"backbone": role.backbone_cfg.get("name"), "own_backbone": role.own_backbone,
                     "model": bb.identity(), "adapter": None if role.adapter is None else
                     {"name": role.adapter, **check_adapter(bb, role.adapter, name)}}
    return out
