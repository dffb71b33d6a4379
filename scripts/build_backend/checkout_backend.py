"""PEP 517 backend: setuptools', but a non-editable wheel is refused with one line.

Why: the harness is checkout-only. Hydra finds ``configs/`` next to ``harness/``, and ``data/``, ``results/`` and
the response cache live in the clone; a wheel copied into site-packages would lack them and fail later with
``MissingConfigException``. ``pip install -e .`` (``make install``) and ``python -m build --sdist`` work as
setuptools makes them; ``pip install .`` and ``pip wheel .`` stop at once and say what to do instead.
"""
from __future__ import annotations

from setuptools.build_meta import *  # every hook setuptools defines, the editable ones included

REFUSAL = ("agentic-repro is checkout-only (configs/, data/ and results/ live in the git clone): "
           "install it with `pip install -e .` or `make install` from the checkout, not `pip install .`")


class CheckoutOnly(SystemExit):
    """Raised instead of building a regular wheel; its message is the whole output."""


def _refuse(*_args, **_kwargs):
    raise CheckoutOnly(REFUSAL)


get_requires_for_build_wheel = _refuse
prepare_metadata_for_build_wheel = _refuse
build_wheel = _refuse
