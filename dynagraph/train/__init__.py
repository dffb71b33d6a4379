"""DynaGraph's training data: critic-ranked planner pairs for DPO and expert SFT examples (see README)."""
