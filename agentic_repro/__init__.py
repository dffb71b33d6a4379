"""agentic-repro's one import name.

The checkout keeps its packages as top-level folders (``harness/``, ``dyflow/``, ``scripts/``, ...) so a reader finds
them where the README says; they are imported as ``agentic_repro.harness``, ``agentic_repro.dyflow``, ... and no
generic name (``scripts``, ``training``, ``harness``...) is ever a top-level module. From a checkout (the editable
install, or ``python -m agentic_repro...`` run from the checkout root) this package's path also holds the checkout
root; an installed wheel carries the folders inside this package (setup.py).
"""
from pathlib import Path

_CHECKOUT = Path(__file__).resolve().parent.parent
if (_CHECKOUT / "harness" / "__init__.py").is_file() and str(_CHECKOUT) not in __path__:
    __path__.append(str(_CHECKOUT))
