"""The shared agent loop (agents/loop.py), prompts, action and confidence parsing for the agent baselines and
AUQ. See agents/README.md."""
