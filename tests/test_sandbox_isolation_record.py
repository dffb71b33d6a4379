"""sandbox.isolation reaches the sandbox, every run records it, and Table 1 footnotes a run without isolation."""
from __future__ import annotations

import json

import pytest

from agentic_repro.evaluators import sandbox
from agentic_repro.harness.validate import ConfigError, validate_run_config
from tests.conftest import compose, make_spec, run
from tests.doubles import ScriptedBackbone
from tests.test_reporting import _fake_metrics
from tests.test_tables import _write_config


@pytest.fixture
def restore_isolation():
    before = sandbox.isolation()
    yield
    sandbox.configure(isolation=before)


def test_the_default_is_bwrap_and_a_bad_value_is_refused_naming_the_key(monkeypatch):
    monkeypatch.delenv("AGENTIC_SANDBOX_ISOLATION", raising=False)
    cfg = compose(["method=io", "benchmark=gsm8k", "backbone=local"])
    assert cfg["sandbox"]["isolation"] == "bwrap" and cfg["sandbox"]["packages"][0] == "numpy"
    validate_run_config(cfg)
    cfg["sandbox"] = {"isolation": "none"}
    with pytest.raises(ConfigError, match="sandbox.isolation"):
        validate_run_config(cfg)
    cfg["sandbox"] = {"isolation": "bwrap", "typo": 1}
    with pytest.raises(ConfigError, match="sandbox.typo"):
        validate_run_config(cfg)


@pytest.mark.parametrize("mode", ["process", "bwrap"])
def test_a_run_configures_the_sandbox_and_records_it_in_meta(tmp_path, tiny_data, restore_isolation, mode):
    sandbox.configure(isolation="bwrap" if mode == "process" else "process")  # the run must change it
    spec = make_spec(tmp_path, {"name": "m", "solver": "tests.fake_methods:ask_many", "params": {"n": 1}}, limit=1)
    spec.full_config["sandbox"] = {"isolation": mode}
    run(spec, ScriptedBackbone(lambda messages, sampling: "ANSWER: 0"))
    assert sandbox.isolation() == mode
    meta = json.loads((spec.out_dir / "meta.json").read_text())
    assert meta["sandbox"]["isolation"] == mode
    if mode == "process":
        assert meta["sandbox"]["note"] == "untrusted code ran without filesystem isolation"
    else:
        assert "note" not in meta["sandbox"] and meta["sandbox"]["view"]


@pytest.mark.parametrize("per_run", [True, False])
def test_sandbox_pod_per_run_reaches_the_sandbox_and_meta(tmp_path, tiny_data, restore_isolation, per_run):
    """The default (false, a reused pod) is in configs/config.yaml; a non-bool is refused naming the key; a run
    configures the sandbox with it and meta.json records it (evaluators/sandbox/README.md, class 5)."""
    cfg = compose(["method=io", "benchmark=gsm8k", "backbone=local"])
    assert cfg["sandbox"]["pod_per_run"] is False
    cfg["sandbox"] = {"isolation": "bwrap", "pod_per_run": "yes"}
    with pytest.raises(ConfigError, match="sandbox.pod_per_run"):
        validate_run_config(cfg)
    sandbox.configure(isolation="bwrap", pod_per_run=not per_run)  # the run must change it
    spec = make_spec(tmp_path, {"name": "m", "solver": "tests.fake_methods:ask_many", "params": {"n": 1}}, limit=1)
    spec.full_config["sandbox"] = {"isolation": "bwrap", "pod_per_run": per_run}
    run(spec, ScriptedBackbone(lambda messages, sampling: "ANSWER: 0"))
    assert sandbox.launch.pod_per_run() is per_run
    assert json.loads((spec.out_dir / "meta.json").read_text())["sandbox"]["pod_per_run"] is per_run


def test_table1_footnotes_the_cells_whose_runs_had_no_isolation(tmp_path):
    from agentic_repro.scripts import table1

    root = tmp_path / "results"
    for b in ("gsm8k", "math"):
        d = _fake_metrics(root, b, "io", 42, 10.0)
        _write_config(d, "io", b, deviations=[])
        mode = "process" if b == "math" else "bwrap"
        (d / "meta.json").write_text(json.dumps({"sandbox": {"isolation": mode}}))
    table1.write_all(root, backbones=["local"])
    md = (root / "table1" / "table1.md").read_text()
    line = next(ln for ln in md.splitlines() if "without filesystem isolation" in ln)
    assert "IO / MATH" in line and "GSM8K" not in line


def test_a_folder_resumed_under_bwrap_keeps_the_no_isolation_note(tmp_path, tiny_data, restore_isolation):
    method = {"name": "m", "solver": "tests.fake_methods:ask_many", "params": {"n": 1}}
    first = make_spec(tmp_path, method, limit=1)
    first.full_config["sandbox"] = {"isolation": "process"}
    run(first, ScriptedBackbone(lambda messages, sampling: "ANSWER: 0"))
    again = make_spec(tmp_path, method, limit=2)  # the same folder, resumed with one more problem
    again.full_config["sandbox"] = {"isolation": "bwrap"}
    run(again, ScriptedBackbone(lambda messages, sampling: "ANSWER: 0"))
    meta = json.loads((again.out_dir / "meta.json").read_text())
    assert meta["sandbox"]["isolation"] == "bwrap" and meta["sandbox"]["earlier"]["isolation"] == "process"
    assert meta["sandbox"]["note"] == "untrusted code ran without filesystem isolation"
    from agentic_repro.scripts.collect import SeedRun

    assert SeedRun(seed=42, dir=again.out_dir, metrics={}).sandbox_isolation() == "process"
