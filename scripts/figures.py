"""``make figures``: every table and figure, regenerated from ``results/`` alone (zero backbone calls).

    python -m agentic_repro.scripts.figures [results_root=results] [logger=wandb]

Writes:
  results/table1/table1.{md,tex,csv}                 Table 1 (one table per backbone on disk)
  results/ablation/table2.{md,tex,csv}               Table 2
  results/sensitivity/table{11..14}.{md,tex,csv}     Tables 11-14, and figure2.{png,pdf}
  results/efficiency/efficiency.{md,tex,csv}         Tables 3, 8, 9, 10, and figure3-<backbone>.{png,pdf}
"""
from __future__ import annotations

import sys
from pathlib import Path

from agentic_repro.scripts.runs import compose, logger_override, parse_args


def regenerate(results_root: Path) -> list[Path]:
    from agentic_repro.scripts import ablation, efficiency, sensitivity, table1

    paths: list[Path] = []
    for mod in (table1, ablation, sensitivity):
        paths += mod.write_all(results_root)["paths"]
    paths += efficiency.write_all(results_root)["paths"]
    return paths


def main(argv: list[str] | None = None) -> int:
    opts, rest = parse_args(list(sys.argv[1:] if argv is None else argv), {"results_root": "results", "logger": "none"})
    if rest:
        raise SystemExit(f"unknown arguments {rest}")
    root = Path(opts["results_root"])
    paths = regenerate(root)
    for p in paths:
        print(p)
    if opts["logger"] not in ("", "none"):
        from agentic_repro.harness.logging_wandb import WandbLogger

        wb = WandbLogger.from_config(compose(logger_override(opts["logger"])), run_name="figures", job_type="report")
        if wb is not None:
            for p in paths:
                if p.suffix == ".png":
                    wb.log_image(p.stem, p)
                elif p.suffix == ".csv":
                    wb.log_table(p.stem, p)
                wb.log_file(p)
            wb.finish()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
