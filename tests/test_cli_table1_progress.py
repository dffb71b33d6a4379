"""`agentic-repro table table1` (`make reproduce-table1`) shows its progress as a line per finished run and prints
the table at the end, not the whole table after every run (issue 22), and marks a cell whose answers were cut at
max_tokens (issue 33). Through the console command's dispatch, on the scripted backbone (no model)."""
from __future__ import annotations

import re

from agentic_repro.harness import cli
from tests.test_launchers_identity import gsm8k_data  # noqa: F401 - the fixture: two GSM8K problems


def test_a_line_per_finished_run_and_the_table_once(tmp_path, capsys):
    argv = ["table", "table1", "backbone=scripted", "methods=io", "benchmarks=gsm8k,drop", "seeds=42", "limit=1",
            f"results_root={tmp_path / 'results'}", f"cache.path={tmp_path / 'c.sqlite'}", "runner.progress=false"]
    assert cli.main(argv) == 0
    out, err = capsys.readouterr()
    done = [ln for ln in err.splitlines() if re.match(r"\[\d+/\d+ runs done\] ", ln)]
    assert [ln.split(":")[0] for ln in done] == ["[1/2 runs done] io/gsm8k/scripted/seed=42",
                                                  "[2/2 runs done] io/drop/scripted/seed=42"]
    assert "n=1, 0 errors" in done[0] and "calls ended with stop" in done[0]
    assert done[1].endswith(str(tmp_path / "results" / "table1" / "table1.md"))
    assert out.count("### Table 1: scripted") == 1              # printed once, at the end
    assert (tmp_path / "results" / "table1" / "table1.md").is_file()


def test_a_cell_with_more_than_5_percent_of_its_calls_cut_is_marked_in_the_table(tmp_path, monkeypatch, gsm8k_data):
    """Issue 33: a cell whose answers were cut at max_tokens shows it in the table (a mark and a note naming it),
    not only in the console; a cell with every call ending with ``stop`` is not marked."""
    from agentic_repro.harness.backbone import BackboneResult
    from agentic_repro.harness.scripted import ScriptedBackbone, fixed_reply
    from agentic_repro.harness.types import Completion

    class HalfCut(ScriptedBackbone):   # IO's calls: every other one ends at max_tokens
        async def complete(self, messages, sampling, n):
            res = await super().complete(messages, sampling, n)
            reason = "length" if len(self.requests) % 2 else "stop"
            return BackboneResult([Completion(c.text, c.prompt_tokens, c.completion_tokens, reason)
                                   for c in res.completions], res.retries, res.latency_s)

    async def build(cfg, *, run_dir, seed, **kw):
        cls = HalfCut if "/io/" in str(run_dir) else ScriptedBackbone
        return cls(fixed_reply("The answer is 5."), name=cfg["name"], max_concurrency=1)

    monkeypatch.setattr("agentic_repro.harness.runner.build_backbone", build)
    argv = ["table", "table1", "backbone=scripted", "methods=io,cot", "benchmarks=gsm8k", "seeds=42", "limit=2",
            f"results_root={tmp_path / 'results'}", f"cache.path={tmp_path / 'c.sqlite'}", "runner.progress=false",
            "sandbox.isolation=process"]
    assert cli.main(argv) == 0
    md = (tmp_path / "results" / "table1" / "table1.md").read_text(encoding="utf-8")
    rows = {ln.split("|")[1].strip().split("<")[0]: ln.split("|")[2].strip() for ln in md.splitlines()
            if ln.startswith("| ")}
    assert rows["IO"].endswith("n=2 ✂") and not rows["CoT"].endswith("✂"), md
    assert "✂ = more than 5% of the cell's calls ended at max_tokens" in md
    assert "IO / GSM8K: 1 of 2 calls cut" in md and "CoT / GSM8K" not in md.split("✂ = ")[1].split("\n")[0]
