"""AUQ's prompt texts: the UAM memory format (recovered) and the UAR reflection / memory-expansion prompts
(not recovered: written here, named as deviations in configs/method/auq_*.yaml and auq/README.md).

The confidence elicitation instruction itself (supplement §11.2) is ``agentic_repro.agents.confidence.ELICITATION``: one
copy for every agent that elicits confidence.

Sources (``../shared/papers/auq-supplement.md``):
- §11.3 UAM history format ("paper Variant B: Semantic Propagation"), [udcs] transcription:
  ``Step {i}:\\nObservation: ...\\nAction: <think>...</think> <action>...</action>\\n<confidence>c</confidence>\\n
  <explanation>e</explanation>``.
- §11.5 reflection prompt: not recovered; known only that it feeds the agent's own explanation back as the
  "rational cue" for critique-and-refine. ``REFLECT`` below is ours.
- §11.6 memory-expansion prompt: not recovered; known only that it "emphasizes retrieving information from the
  extended history". ``EXPAND`` below is ours.
"""
from __future__ import annotations

UAM_STEP = "Step {i}:\nObservation: {observation}\nAction: {action}"
UAM_UNCERTAINTY = "<confidence>{confidence}</confidence>\n<explanation>{explanation}</explanation>"

REFLECT = (
    "Before this action is executed, reflect on it.\n\n"
    "For the current step you proposed:\n"
    "<action>{action}</action>\n"
    "<confidence>{confidence}</confidence>\n"
    "and you explained your uncertainty as follows:\n"
    "<explanation>{explanation}</explanation>\n\n"
    "Critique this proposal using your own explanation as the cue: check each concern it raises against the task, "
    "the observations so far and the admissible actions, and decide what would resolve it. Then choose the best "
    "admissible action for the current step (it may be the same action or a different one). Reason step by step "
    "inside <think> </think> tags, then give the action inside <action> </action> tags."
)

EXPAND = (
    "Your reflection so far saw only the most recent {window} step(s) and it still left you uncertain. The full "
    "history of this episode is now shown above. Look through it for what the recent steps do not show (objects "
    "and places already seen, containers already opened, results of earlier actions, what the task still needs) "
    "and use it to resolve your uncertainty.\n\n"
    + REFLECT
)

MISSING = "(not stated)"


def fmt_confidence(c: float | None) -> str:
    return MISSING if c is None else f"{c:.2f}".rstrip("0").rstrip(".") if c not in (0.0, 1.0) else f"{c:.1f}"
