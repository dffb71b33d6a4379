"""Which method configs reproduce which paper table (for scripts such as ``make reproduce-table1``).

Names are ``configs/method/<name>.yaml``. ``TABLE1`` lists DenoiseFlow Table 1's baselines that
exist in ``baselines/``; ``EXTRA`` the baselines other target papers compare against (ToT in
DynaGraph, Self-Reflection in AUQ), which ``make reproduce-table1`` runs as well.
"""
from __future__ import annotations

SINGLE_AGENT = ["io", "cot", "cot_sc"]
HAND_CRAFTED_MULTI_AGENT = ["self_refine", "llm_debate", "llm_blender", "dylan"]
# searched on validate, frozen, run on test (baselines/autoflow/; baselines/README.md)
AUTOMATED = ["gptswarm", "adas", "aflow", "maas", "mermaidflow", "judgeflow"]
TABLE1 = SINGLE_AGENT + HAND_CRAFTED_MULTI_AGENT + AUTOMATED
EXTRA = ["tot", "self_reflection", "self_reflection_step"]
ALL = TABLE1 + EXTRA
# agents for the environment benchmarks (ALFWorld, WebShop; AUQ Tables 1-2): agents/README.md. Not in ALL:
# they need an environment benchmark.
AGENT_BASELINES = ["react", "reflexion", "agent_self_reflection", "agent_cot_sc"]
# AUQ's own variants (configs/method/auq_*.yaml; auq/README.md): environment benchmarks only, as above.
AUQ = ["auq_forward", "auq_inverse", "auq_dual"]
