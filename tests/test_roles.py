"""Roles: per-role backbones built once, calls attributed per role in the ledger, metrics and meta.json,
the cache keyed by the role's backbone identity and adapter, unknown roles refused before any call, and
the Hydra command-line form through ``python -m agentic_repro.harness.run``."""
from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from agentic_repro.harness.backbone import BackboneError
from agentic_repro.harness.results import read_jsonl_tolerant
from agentic_repro.harness.roles import Role, build_role_backbones, resolve_roles
from agentic_repro.harness.runner import Runner, spec_from_config
from tests.conftest import compose, make_spec, run
from tests.doubles import ScriptedBackbone

ROOT = Path(__file__).resolve().parents[1]
JUDGE = {"name": "judge-bb", "kind": "openai", "model": "judge-model", "price": 0, "max_concurrency": 2}


class AdapterBackbone(ScriptedBackbone):
    """A double that carries adapters: the reply names the adapter it was generated with."""

    def __init__(self, adapters=("plan", "expert")):
        super().__init__(lambda m, s: "base")
        self.adapters = {a: {"name": a, "sha256": f"sha-{a}", "base_model": "scripted-model",
                             "training_data_sha256": None, "path": f"/x/{a}.gguf"} for a in adapters}
        self.adapter_requests: list[str | None] = []

    def adapter_identity(self, name):
        if name not in self.adapters:
            raise BackboneError(f"unknown adapter {name!r}; this backbone serves {sorted(self.adapters)}",
                                kind="unknown_adapter")
        return self.adapters[name]

    async def complete(self, messages, sampling, n, *, adapter=None):
        self.adapter_requests.append(adapter)
        res = await super().complete(messages, sampling, n)
        return type(res)([type(c)(f"{c.text} via {adapter}", c.prompt_tokens, c.completion_tokens, c.finish_reason)
                          for c in res.completions], res.retries, res.latency_s)


def two_role_spec(tmp_path, roles_cfg=None, **kw):
    method = {"name": "two", "solver": "tests.core_methods:draft_and_check", "params": {},
              "roles": ["designer", "critic"]}
    spec = make_spec(tmp_path, method, **kw)
    spec.roles_cfg = {"critic": dict(JUDGE)} if roles_cfg is None else roles_cfg
    return spec


def test_two_roles_on_two_backbones_are_attributed_per_role(tmp_path, tiny_data):
    # each problem gets its own draft, so the three judge prompts differ: identical prompts would be
    # (correctly) served from the cache within the run, making the request count depend on timing
    drafter = ScriptedBackbone(lambda m, s: "ANSWER: " + m[-1]["content"].split("What is ", 1)[1].split("?")[0])
    judge = ScriptedBackbone(lambda m, s: "yes", name="judge")
    spec = two_role_spec(tmp_path, limit=3)
    metrics = run(spec, {"scripted": drafter, "judge-bb": judge})
    assert len(drafter.requests) == 3 and len(judge.requests) == 3
    assert all(m[-1]["content"].startswith("Is this answer") for m, _, _ in judge.requests)
    calls = read_jsonl_tolerant(spec.out_dir / "calls.jsonl")
    assert {(c["stage"], c["role"], c["model"]) for c in calls} == {("draft", "designer", "scripted-model"),
                                                                    ("check", "critic", "judge-model")}
    assert len({c["model_identity"] for c in calls}) == 2
    by_role = metrics["by_role"]
    assert set(by_role) == {"designer", "critic"}
    assert by_role["designer"]["calls"] == by_role["critic"]["calls"] == 3
    assert by_role["critic"]["completion_tokens"] == 3  # "yes" is one word per call
    meta = json.loads((spec.out_dir / "meta.json").read_text())
    assert set(meta["roles"]) == {"default", "designer", "critic"}
    assert meta["roles"]["critic"]["backbone"] == "judge-bb" and meta["roles"]["critic"]["own_backbone"]
    assert meta["roles"]["critic"]["model"] == {"kind": "scripted", "model": "judge-model"}
    assert meta["roles"]["designer"]["model"] == meta["roles"]["default"]["model"] == meta["model"]


def test_an_unknown_role_is_an_error_before_any_call(tmp_path, tiny_data):
    bb = ScriptedBackbone(lambda m, s: "x")
    spec = make_spec(tmp_path, {"name": "u", "solver": "tests.core_methods:uses_unknown_role", "params": {}}, limit=1)
    run(spec, bb)
    p = read_jsonl_tolerant(spec.out_dir / "predictions.jsonl")[0]
    assert p["status"] == "error" and "role 'nonexistent' is not configured" in p["error"]
    assert "backbone@roles.nonexistent=" in p["error"] and bb.requests == []


def test_a_configured_role_the_method_does_not_use_is_refused(tmp_path, tiny_data):
    spec = two_role_spec(tmp_path, roles_cfg={"critik": dict(JUDGE)})
    with pytest.raises(ValueError, match=r"roles.critik is configured but the method .* declare only the roles"):
        Runner(spec, backbone=ScriptedBackbone(lambda m, s: "x"))


def test_roles_naming_one_backbone_config_share_one_backbone():
    built: list[str] = []

    class Closable:
        def __init__(self, name):
            self.name = name

        async def aclose(self):
            return None

    async def build(cfg):
        built.append(cfg["name"])
        return Closable(cfg["name"])

    roles = resolve_roles({"name": "local", "kind": "embedded"},
                          {"designer": dict(JUDGE), "critic": dict(JUDGE), "planner": {"adapter": None},
                           "judge": {"adapter": None}}, declared=["designer", "critic", "executor"])
    assert list(roles) == ["default", "designer", "critic", "executor"]  # unset roles are skipped
    assert roles["executor"] == Role("executor", {"name": "local", "kind": "embedded"})
    backbones = asyncio.run(build_role_backbones(roles, build))
    assert built == ["local", "judge-bb"]
    assert backbones["designer"] is backbones["critic"] and backbones["executor"] is backbones["default"]


def test_a_role_bound_to_an_adapter_reaches_the_backbone_and_the_cache_key(tmp_path, tiny_data):
    bb = AdapterBackbone()
    method = {"name": "same", "solver": "tests.core_methods:same_prompt_as_roles",
              "params": {"roles": [None, "planner", "planner", "planner"], "adapters": [None, None, "expert", None]},
              "roles": ["planner"]}
    spec = make_spec(tmp_path, method, limit=1)
    spec.roles_cfg = {"planner": {"adapter": "plan"}}
    run(spec, bb)
    # base, planner (its bound adapter), planner with an explicit adapter (wins), planner again (a cache hit)
    assert bb.adapter_requests == [None, "plan", "expert"]
    p = read_jsonl_tolerant(spec.out_dir / "predictions.jsonl")[0]
    assert p["trace"]["texts"] == ["base via None", "base via plan", "base via expert", "base via plan"]
    calls = read_jsonl_tolerant(spec.out_dir / "calls.jsonl")
    assert [(c["role"], c["adapter"], c["adapter_sha256"], c["cache_hit"]) for c in calls] == [
        ("default", None, None, False), ("planner", "plan", "sha-plan", False),
        ("planner", "expert", "sha-expert", False), ("planner", "plan", "sha-plan", True)]
    meta = json.loads((spec.out_dir / "meta.json").read_text())
    assert meta["roles"]["planner"]["adapter"]["sha256"] == "sha-plan" and not meta["roles"]["planner"]["own_backbone"]


def test_an_unknown_adapter_on_a_role_fails_before_any_call(tmp_path, tiny_data):
    bb = AdapterBackbone()
    spec = make_spec(tmp_path, {"name": "m", "solver": "tests.fake_methods:ask_once", "params": {},
                                "roles": ["planner"]}, limit=1)
    spec.roles_cfg = {"planner": {"adapter": "nope"}}
    with pytest.raises(BackboneError, match="unknown adapter 'nope'"):
        run(spec, bb)
    assert bb.requests == []
    spec.roles_cfg = {"planner": {"adapter": "plan"}}
    with pytest.raises(ValueError, match="carries no adapters"):
        run(spec, ScriptedBackbone(lambda m, s: "x"))


def test_the_cache_is_shared_by_roles_on_one_backbone_and_split_by_backbone_identity(tmp_path, tiny_data):
    method = {"name": "same", "solver": "tests.core_methods:same_prompt_as_roles",
              "params": {"roles": [None, "designer"]}}
    one = ScriptedBackbone(lambda m, s: "same")
    spec = make_spec(tmp_path / "shared", method, limit=1)
    spec.roles_cfg = {"designer": {"adapter": None}}
    spec.method_cfg["roles"] = ["designer"]
    run(spec, one)
    assert len(one.requests) == 1  # the designer's identical request on the same model is a cache hit
    a, b = ScriptedBackbone(lambda m, s: "a"), ScriptedBackbone(lambda m, s: "b", name="judge")
    spec = make_spec(tmp_path / "split", method, limit=1)
    spec.roles_cfg = {"designer": dict(JUDGE)}
    run(spec, {"scripted": a, "judge-bb": b})
    assert len(a.requests) == len(b.requests) == 1
    p = read_jsonl_tolerant(spec.out_dir / "predictions.jsonl")[0]
    assert p["trace"]["texts"] == ["a", "b"]


def test_the_hydra_role_form_composes():
    """The role slots come from the method config: DyFlow's, as users type them (no ``+``)."""
    cfg = compose(["method=dyflow", "backbone@roles.designer=gpt-4o-mini", "roles.summarizer.adapter=summary",
                   "roles.designer.adapter=dyplanner"])
    spec = spec_from_config(cfg)
    roles = resolve_roles(spec.backbone_cfg, spec.roles_cfg, spec.method_cfg["roles"])
    assert list(roles) == ["default", "designer", "summarizer", "executor"]
    assert roles["designer"].backbone_cfg["model"] == "gpt-4o-mini-2024-07-18" and roles["designer"].own_backbone
    assert roles["designer"].adapter == "dyplanner"
    assert roles["summarizer"].adapter == "summary" and roles["summarizer"].backbone_cfg["name"] == "local"
    assert roles["executor"] == Role("executor", roles["default"].backbone_cfg)
    # another name still takes a +, and then the method must declare it
    cfg = compose(["method=dyflow", "+backbone@roles.scout=vllm"])
    assert cfg["roles"]["scout"]["name"] == "vllm"
    with pytest.raises(ValueError, match=r"roles.scout is configured but the method .* declare only the roles"):
        resolve_roles(cfg["backbone"], cfg["roles"], cfg["method"]["roles"])


def test_the_core_declares_no_role_each_method_declares_its_slots():
    """configs/config.yaml names no role; every role a method config lists (and a searched method's optimizer) has
    a slot in its composed config, so ``backbone@roles.<name>=`` and ``roles.<name>.adapter=`` need no ``+``."""
    from agentic_repro.baselines.autoflow.search import SEARCH_ROLES
    from agentic_repro.harness.validate import CONFIG_DIR

    root = yaml.safe_load((CONFIG_DIR / "config.yaml").read_text(encoding="utf-8"))
    assert root["roles"] == {} and not [d for d in root["defaults"] if "roles" in str(d)]
    assert compose([])["roles"] == {}
    declaring = 0
    for path in sorted((CONFIG_DIR / "method").glob("*.yaml")):
        method = compose([f"method={path.stem}"])
        wanted = set(method["method"].get("roles") or []) | (set(SEARCH_ROLES) if method["method"].get("search")
                                                              else set())
        assert wanted <= set(method["roles"]), (path.name, sorted(wanted - set(method["roles"])))
        assert all(node == {"adapter": None} for node in method["roles"].values()), path.name  # unset by default
        declaring += bool(wanted)
    assert declaring >= 15  # DyFlow, DynaGraph, AUQ, the searched methods, ...


def test_a_role_the_method_does_not_declare_is_refused(tmp_path, tiny_data):
    """Hydra has no slot for it (the command line names the + form), and with the + the runner refuses it."""
    from hydra.errors import ConfigCompositionException

    with pytest.raises(ConfigCompositionException, match=r"\+backbone@roles.designer=gpt-4o-mini"):
        compose(["method=cot", "backbone@roles.designer=gpt-4o-mini"])
    with pytest.raises(ConfigCompositionException, match=r"\+roles.planner.adapter=planner"):
        compose(["method=cot", "roles.planner.adapter=planner"])
    cfg = compose(["method=cot", "+backbone@roles.designer=gpt-4o-mini"])
    with pytest.raises(ValueError, match=r"roles.designer is configured but the method .* declare no role"):
        Runner(spec_from_config(cfg))


def test_the_judge_slot_comes_from_the_benchmark_that_judges():
    """A benchmark with a judge: block declares the judge's slot; one without has none (the core knows no judge)."""
    from hydra.errors import ConfigCompositionException

    cfg = compose(["method=cot", "benchmark=livebench", "backbone@roles.judge=gpt-4o-mini"])
    assert cfg["roles"]["judge"]["name"] == "gpt-4o-mini"
    runner = Runner(spec_from_config(cfg))
    assert list(runner.roles) == ["default", "judge"]
    cfg = compose(["method=dyflow", "benchmark=math_l5", "+paper_roles=dyflow_designer_claude",
                   "backbone@roles.judge=gpt-4o-mini"])
    assert {k: v.get("name") for k, v in cfg["roles"].items()} == {
        "designer": "claude-3-7-sonnet", "executor": None, "summarizer": None, "judge": "gpt-4o-mini"}
    with pytest.raises(ConfigCompositionException, match="backbone@roles.judge"):
        compose(["method=cot", "benchmark=gsm8k", "backbone@roles.judge=gpt-4o-mini"])


def test_two_roles_from_the_command_line(tmp_path):
    """``python -m agentic_repro.harness.run ... backbone@roles.critic=vllm`` as a user types it, against a loopback
    OpenAI-compatible server: each role's calls go to its own model and are attributed to it."""
    from tests.fault_server import FaultServer

    with FaultServer() as srv:
        env = {k: v for k, v in os.environ.items() if not k.startswith("VLLM_")}
        args = ["method=io", "method.name=two_roles", "method.solver=tests.core_methods:draft_and_check",
                "~method.params", "+method.roles=[designer,critic]", "benchmark=gsm8k", "limit=2", "backbone=vllm",
                f"backbone.base_url={srv.url}", "backbone.model=draft-model", "+backbone@roles.critic=vllm",
                f"roles.critic.base_url={srv.url}", "roles.critic.model=critic-model",
                f"results_root={tmp_path}/results", f"cache.path={tmp_path}/c.sqlite", "runner.progress=false"]
        r = subprocess.run([sys.executable, "-m", "agentic_repro.harness.run", *args], cwd=ROOT, env=env, capture_output=True,
                           text=True, timeout=180)
    assert r.returncode == 0, r.stderr[-2000:]
    (meta_path,) = list((tmp_path / "results").rglob("meta.json"))
    meta = json.loads(meta_path.read_text())
    assert meta["roles"]["critic"]["backbone"] == "vllm" and meta["roles"]["critic"]["model"]["model"] == "critic-model"
    assert meta["roles"]["designer"]["model"]["model"] == "draft-model"
    calls = read_jsonl_tolerant(meta_path.parent / "calls.jsonl")
    assert sorted((c["role"], c["model"]) for c in calls) == [("critic", "critic-model")] * 2 + \
        [("designer", "draft-model")] * 2
    metrics = json.loads((meta_path.parent / "metrics.json").read_text())
    assert metrics["by_role"]["critic"]["calls"] == metrics["by_role"]["designer"]["calls"] == 2


def test_a_role_changing_model_is_another_configuration_of_the_folder(tmp_path, tiny_data):
    """The folder's identity includes every role's backbone identity: a different critic model refuses to
    resume into the same folder (jointly with harness/identity.py)."""
    from agentic_repro.harness.identity import IdentityMismatch

    spec = two_role_spec(tmp_path, limit=2)
    run(spec, {"scripted": ScriptedBackbone(lambda m, s: "ANSWER: 4"),
               "judge-bb": ScriptedBackbone(lambda m, s: "yes", name="judge")})
    ident = json.loads((spec.out_dir / "identity.json").read_text())
    assert "critic" in json.dumps(ident)
    other = ScriptedBackbone(lambda m, s: "yes", name="judge2")
    with pytest.raises(IdentityMismatch, match="critic"):
        run(two_role_spec(tmp_path, limit=2), {"scripted": ScriptedBackbone(lambda m, s: "ANSWER: 4"),
                                              "judge-bb": other})
    assert other.requests == []
    # the same roles again resume (nothing left to do)
    again = ScriptedBackbone(lambda m, s: "ANSWER: 4")
    run(two_role_spec(tmp_path, limit=2), {"scripted": again, "judge-bb": ScriptedBackbone(lambda m, s: "yes",
                                                                                          name="judge")})
    assert again.requests == []


OLD_SLOTS = {name: {"adapter": None} for name in ("designer", "executor", "summarizer", "judge", "critic", "planner",
                                                  "optimizer", "teacher", "expert1", "expert2", "expert3")}


def test_a_folder_recorded_with_the_old_root_role_slots_resumes(tmp_path, tiny_data):
    """configs/config.yaml declared 11 unset role slots before the method configs declared their own: a folder whose
    identity.json holds them is the same configuration (unset slots are not part of a run), and resumes; a record
    whose own hash does not match its config is still refused."""
    from agentic_repro.harness.identity import IdentityMismatch, _sha

    spec = make_spec(tmp_path, {"name": "m", "solver": "tests.fake_methods:ask_once", "params": {}}, limit=2)
    run(spec, ScriptedBackbone(lambda m, s: "ANSWER: 0"))
    path = spec.out_dir / "identity.json"
    rec = json.loads(path.read_text())
    assert "roles" not in rec["config"]
    cfg = {**rec["config"], "roles": dict(OLD_SLOTS)}  # the record as the old root config wrote it
    old = {**rec, "config": cfg, "config_sha256": _sha(cfg),
           "identity_sha256": _sha({"config": cfg, "backbones": rec["backbones"]})}
    path.write_text(json.dumps(old))
    again = ScriptedBackbone(lambda m, s: "ANSWER: 0")
    assert run(spec, again)["complete"] and again.requests == []
    path.write_text(json.dumps({**old, "config_sha256": "0" * 64, "identity_sha256": "0" * 64}))
    with pytest.raises(IdentityMismatch):
        run(spec, ScriptedBackbone(lambda m, s: "ANSWER: 0"))


def test_unset_slots_are_not_part_of_a_runs_identity():
    """DyFlow's three unset slots leave its identity as the 11 old root slots did (both dropped); a set one counts."""
    from agentic_repro.harness.identity import identity_document

    doc = identity_document(compose(["method=dyflow"]), {})
    assert "roles" not in doc["config"]
    doc = identity_document(compose(["method=dyflow", "roles.designer.adapter=dyplanner"]), {})
    assert doc["config"]["roles"] == {"designer": {"adapter": "dyplanner"}}
