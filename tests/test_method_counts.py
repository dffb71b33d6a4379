"""A method config's ``run_counts`` (its own counters: DynaGraph's fallbacks, DyFlow's designer failures) is summed
into metrics.json by the runner, over the latest record of every problem."""
from __future__ import annotations

import json

import yaml

from tests.conftest import make_spec, run
from tests.doubles import ScriptedBackbone


def count_long_answers(predictions):
    return {"problems": len(predictions), "long": sum(len(p.get("raw_output") or "") > 9 for p in predictions)}


def test_run_counts_land_in_metrics_json(tmp_path, tiny_data):
    method = {"name": "m", "solver": "tests.fake_methods:ask_many", "params": {"n": 1},
              "run_counts": "tests.test_method_counts:count_long_answers"}
    spec = make_spec(tmp_path, method, limit=3)
    def script(messages, sampling):
        text = messages[-1]["content"]
        return "ok" if text.startswith("verify") else ("ANSWER: 1000000" if "1+1" in text else "ANSWER: 0")

    metrics = run(spec, ScriptedBackbone(script))
    on_disk = json.loads((spec.out_dir / "metrics.json").read_text())
    assert metrics["method_counts"] == on_disk["method_counts"] == {"problems": 3, "long": 1}


def test_dynagraph_and_dyflow_configs_name_their_counters():
    from agentic_repro.harness.method import resolve

    for name in ("dynagraph", "dynagraph_sample", "dynagraph_wo_patching", "dynagraph_wo_reconstruction", "dyflow"):
        cfg = yaml.safe_load(open(f"configs/method/{name}.yaml"))
        counts = resolve(cfg["run_counts"])([{"id": "a", "status": "ok", "trace": {}}])
        assert isinstance(counts, dict) and all(isinstance(v, int) for v in counts.values()), name
