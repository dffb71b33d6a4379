"""`agentic-repro table table1` (`make reproduce-table1`) shows its progress as a line per finished run and prints
the table at the end, not the whole table after every run (issue 22). Through the console command's dispatch, on
the scripted backbone (no model)."""
from __future__ import annotations

import re

from agentic_repro.harness import cli


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
