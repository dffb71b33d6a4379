"""Build DynaGraph's training files from run folders.

    python -m agentic_repro.dynagraph.train dpo results/dynagraph-dpo/strategyqa  --out data/train/dynagraph-planner-dpo.jsonl
    python -m agentic_repro.dynagraph.train sft results/dynagraph-teacher/strategyqa --out data/train/dynagraph-experts
    # every source run must have read a training split (--train-splits, default train): a scored split is refused
    # then: python -m agentic_repro.training.train kind=dpo data=data/train/dynagraph-planner-dpo.jsonl base=local \
    #         out=adapters/dynagraph-planner
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from agentic_repro.dynagraph.critic import CriticOptions
from agentic_repro.dynagraph.train.data import ROLE_OF_EXPERT, critic_plans, expert_steps
from agentic_repro.training.datasets import build_dpo, build_sft, find_runs
from agentic_repro.training.splits import TRAIN_SPLITS, ScoredSplitError, refuse_scored_splits


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("kind", choices=["dpo", "sft"])
    ap.add_argument("runs", nargs="+")
    ap.add_argument("--out", required=True)
    ap.add_argument("--pairing", default="best_worst", choices=["best_worst", "all"])
    ap.add_argument("--lam-nodes", type=float, default=CriticOptions.lam_nodes)
    ap.add_argument("--lam-recon", type=float, default=CriticOptions.lam_recon)
    ap.add_argument("--cost-form", default=CriticOptions.cost_form)
    ap.add_argument("--gate", default=CriticOptions.gate)
    ap.add_argument("--train-splits", default=",".join(TRAIN_SPLITS),
                    help="splits a source run may have read (comma list); any other split is refused")
    a = ap.parse_args(argv)
    try:
        runs = find_runs(a.runs)
        refuse_scored_splits(runs, [s for s in a.train_splits.split(",") if s], builder=f"agentic_repro.dynagraph.train {a.kind}")
    except (FileNotFoundError, ScoredSplitError) as exc:
        print(exc, file=sys.stderr)
        return 2
    if a.kind == "dpo":
        opts = CriticOptions(a.lam_nodes, a.lam_recon, a.cost_form, a.gate)
        ds = build_dpo(runs, critic_plans(opts), a.out, pairing=a.pairing)
        print(f"{ds.path}: {len(ds.rows)} pairs, sha256 {ds.sha256[:12]}, counts {ds.provenance['counts']}")
        return 0
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    for role in ROLE_OF_EXPERT.values():
        ds = build_sft(runs, expert_steps(), out / f"{role}-sft.jsonl", roles=[role])
        print(f"{ds.path}: {len(ds.rows)} examples, sha256 {ds.sha256[:12]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
