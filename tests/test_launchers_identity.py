"""The launchers decide "done" by the run's identity (issue 29 item 6): a complete folder made by one
configuration is never reported as another configuration's result.

A complete CoT run on GSM8K (two problems, ``backbone=scripted``) is asked for again by every launcher, once with
its own configuration (skipped: done, no call made) and once per change that harness.run refuses (another
scripted model, another reply, a budget, a judge role): ``scripts.run_point`` (``make sweeps``) and the planner
behind ``make reproduce-table1``, ``reference-scores`` and AUQ's tables (``scripts.runs.plan``) must refuse it
exactly as the runner does, naming the differing key, never print its stored score. Embedded-model changes
(``server.parallel=1``, another GGUF file) are checked on a folder whose identity.json the runner's own
function wrote for backbone=local, so no model starts. Before the fix the launchers compared only method,
sampling, model name and benchmark and called all of these "done" (exit 0).
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from agentic_repro.harness.compose import compose
from agentic_repro.harness.identity import IdentityMismatch, identity_document
from agentic_repro.harness.runner import run_spec, spec_from_config

ROWS = [{"id": "g1", "question": "What is 2+3?", "answer": "5"},
        {"id": "g2", "question": "What is 4+4?", "answer": "8"}]

#: answer-changing settings the runner refuses on this folder, and the key its message names
CHANGES = [("backbone.model=another-scripted-model", "backbone.model"),
           ("backbone.reply=The answer is 7.", "backbone.reply"),
           ("runner.budgets.max_calls_per_problem=1", "runner.budgets.max_calls_per_problem"),
           (("+method.roles=[judge]", "+backbone@roles.judge=scripted"), "roles.judge")]  # a role the method declares


@pytest.fixture
def gsm8k_data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "data" / "aflow_splits" / "gsm8k_test.jsonl"
    path.parent.mkdir(parents=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in ROWS), encoding="utf-8")
    monkeypatch.setenv("AGENTIC_REPRO_DATA", str(tmp_path / "data"))
    return path


def _overrides(tmp: Path, backbone: str = "scripted") -> list[str]:
    return ["experiment=table1", "method=cot", "benchmark=gsm8k", f"backbone={backbone}", "seed=42", "limit=2",
            f"results_root={tmp / 'results'}", f"cache.path={tmp / 'cache.sqlite'}", "runner.progress=false",
            "sandbox.isolation=process"]


def _complete_folder(tmp: Path) -> Path:
    metrics = run_spec(spec_from_config(compose(_overrides(tmp))))
    assert metrics["complete"] and metrics["n"] == 2
    return spec_from_config(compose(_overrides(tmp))).out_dir


def _plan_one(overrides: list[str]):
    from agentic_repro.scripts.runs import Planned, plan

    (item,) = plan([Planned("cot/gsm8k", overrides)], [])
    return item


def test_a_complete_folder_of_this_configuration_is_done_for_every_launcher(tmp_path, gsm8k_data, capsys):
    """The guard refuses only another configuration: the same one is skipped without a backbone call."""
    from agentic_repro.scripts.run_point import run_point

    folder = _complete_folder(tmp_path)
    capsys.readouterr()
    assert _plan_one(_overrides(tmp_path)).state == "done"
    run_point(compose(_overrides(tmp_path)))
    line = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert line["skipped"] is True and line["backbone_calls"] == 0 and line["run"] == str(folder)


@pytest.mark.parametrize(("change", "key"), CHANGES, ids=[k for _, k in CHANGES])
def test_another_configuration_of_a_complete_folder_is_refused_like_the_runner(tmp_path, gsm8k_data, capsys,
                                                                               change, key):
    from agentic_repro.scripts.run_point import run_point

    folder = _complete_folder(tmp_path)
    other = [*_overrides(tmp_path), *((change,) if isinstance(change, str) else change)]
    assert spec_from_config(compose(other)).out_dir == folder  # the same folder: only the identity tells them apart
    with pytest.raises(IdentityMismatch, match=key) as runner_refusal:  # harness.run's own check (exit 2)
        run_spec(spec_from_config(compose(other)))
    capsys.readouterr()

    item = _plan_one(other)  # reproduce-table1 / reference-scores / AUQ's tables
    assert item.state == "invalid", f"{change}: the planner called another configuration's run {item.state!r}"
    first = str(runner_refusal.value).split(";")[0]  # the runner's message, to its first differing key
    assert str(item.error).startswith(f"IdentityMismatch: {first}")  # the same check, the same words

    with pytest.raises(IdentityMismatch, match=key):  # make sweeps
        run_point(compose(other))
    out = capsys.readouterr().out
    assert '"skipped": true' not in out and '"score_pct"' not in out  # its stored score is never reported


def _local_folder(tmp: Path, src: Path) -> Path:
    """A complete folder for backbone=local written by the runner's own identity function (no model starts):
    the scripted run's answers under an embedded-model configuration's identity.json and config.yaml."""
    cfg = compose(_overrides(tmp, "local"))
    folder = spec_from_config(cfg).out_dir
    folder.mkdir(parents=True)
    for name in ("predictions.jsonl", "calls.jsonl", "metrics.json"):
        shutil.copy(src / name, folder / name)
    (folder / "config.yaml").write_text(yaml.safe_dump(cfg), encoding="utf-8")
    (folder / "identity.json").write_text(json.dumps(identity_document(cfg, {})), encoding="utf-8")
    return folder


@pytest.mark.parametrize(("change", "key"), [("backbone.server.parallel=1", "backbone.server.parallel"),
                                             ("backbone.gguf.path=/models/another.gguf", "backbone.gguf.path")],
                         ids=["parallel", "gguf"])
def test_an_embedded_folder_at_another_server_setting_or_model_file_is_not_done(tmp_path, gsm8k_data, change, key):
    _local_folder(tmp_path, _complete_folder(tmp_path))
    assert _plan_one(_overrides(tmp_path, "local")).state == "done"
    item = _plan_one([*_overrides(tmp_path, "local"), change])
    assert item.state == "invalid" and "IdentityMismatch" in str(item.error) and key in str(item.error)


def test_answers_made_from_other_data_are_not_done(tmp_path, gsm8k_data):
    """The runner refuses a folder whose data file changed under the same ids; so does the planner."""
    _complete_folder(tmp_path)
    gsm8k_data.write_text("".join(json.dumps({**r, "answer": "9"}) + "\n" for r in ROWS), encoding="utf-8")
    item = _plan_one(_overrides(tmp_path))
    assert item.state == "invalid" and "made from other data" in str(item.error)


def test_a_record_whose_hash_differs_with_no_key_named_is_refused_not_passed(tmp_path, gsm8k_data):
    """An identity.json whose configuration hash is not this configuration's, though no key differs (a record
    made by another hashing), is another configuration until shown otherwise: refused, never called done."""
    folder = _complete_folder(tmp_path)
    doc = json.loads((folder / "identity.json").read_text(encoding="utf-8"))
    (folder / "identity.json").write_text(json.dumps({**doc, "config_sha256": "0" * 64}), encoding="utf-8")
    item = _plan_one(_overrides(tmp_path))
    assert item.state == "invalid" and "config_sha256: 000000000000..." in str(item.error)
