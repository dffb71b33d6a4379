"""The scripted LLM double of the tests: the harness's own model-free backbone (harness/scripted.py)."""
from agentic_repro.harness.scripted import Script, ScriptedBackbone

__all__ = ["Script", "ScriptedBackbone"]
