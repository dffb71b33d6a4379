"""agentic-repro's one import name.

The checkout keeps its packages as top-level folders (``harness/``, ``dyflow/``, ``scripts/``, ...) so a reader finds
them where the README says; ``agentic_repro/harness`` is a link to ``../harness`` (one link per folder, ``configs``
included), so ``agentic_repro.harness`` is an ordinary package on disk that pyright, jedi, mypy and an editor resolve
from a plain checkout, with no import hook (docs/architecture.md, "One import name"). No generic name (``scripts``,
``training``, ``harness``...) is ever a top-level module; an installed wheel carries the folders themselves inside
this package (setup.py).
"""
