"""Hydra configs, a package so that Hydra finds them as ``pkg://agentic_repro.configs`` from a wheel or a checkout."""
