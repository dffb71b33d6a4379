"""Run viewer: every run under results/, its problems, each problem's calls and trace (``agentic-repro view``)."""
