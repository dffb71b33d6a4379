"""DynaGraph (arXiv 2605.29511): a planner DAG of LoRA experts with evaluator-driven patching and subgraph
reconstruction, and critic-guided DPO for the planner. See dynagraph/README.md."""
