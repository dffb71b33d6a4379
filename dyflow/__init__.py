"""DyFlow (arXiv 2509.26062, NeurIPS 2025): a designer plans one stage subgraph at a time from a summary
of the state, an executor runs its operators over a key-value memory, until ORGANIZE_SOLUTION / T_max.

Entry point for the harness: ``agentic_repro.dyflow.method:DyFlow`` (``configs/method/dyflow*.yaml``). The stage
schema and the trace layout (what ``dyflow/train/`` learns from) are in ``dyflow/schema.py``; every
option and its source in ``dyflow/README.md``.
"""
