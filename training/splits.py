"""Training data never comes from a split that is scored.

A builder of training files (DynaGraph's DPO/SFT data, DyFlow's self-play collection) reads run folders; a run
on a test or dev split would leak the scored problems (and their gold-derived labels) into the trained module.
:func:`refuse_scored_splits` stops the builder before anything is written, in one line naming the run and its
split. Which splits may be trained on is the builder's named option (default: ``train`` only); a run that did
not record its split is refused too, since nothing shows it is not a scored one.
"""
from __future__ import annotations

from typing import Any
from collections.abc import Iterable, Sequence

TRAIN_SPLITS: tuple[str, ...] = ("train",)


class ScoredSplitError(ValueError):
    """A run folder offered as training data read a split that is not a training split."""


def run_split(run: Any) -> str | None:
    """The split a run read: ``meta.json`` ``data.split`` (what the loader recorded), else ``config.yaml``
    ``benchmark.split``; None when neither says."""
    data = (run.meta or {}).get("data")
    if isinstance(data, dict) and data.get("split"):
        return str(data["split"])
    cfg_path = run.root / "config.yaml"
    if cfg_path.is_file():
        import yaml

        try:
            cfg = yaml.safe_load(cfg_path.read_text(encoding="utf-8")) or {}
        except yaml.YAMLError:
            return None
        bench = cfg.get("benchmark") if isinstance(cfg, dict) else None
        if isinstance(bench, dict) and bench.get("split"):
            return str(bench["split"])
    return None


def refuse_scored_splits(runs: Iterable[Any], allowed: Sequence[str] = TRAIN_SPLITS, *, builder: str) -> None:
    """Raise :class:`ScoredSplitError` for the first run whose split is not in ``allowed``."""
    for r in runs:
        split = run_split(r)
        if split not in allowed:
            what = "records no split" if split is None else f"read split {split!r}"
            raise ScoredSplitError(f"{builder}: run {r.run_id} ({r.root}) {what}; training data comes only from "
                                   f"{', '.join(allowed)} split(s), never from a scored one (rerun it with "
                                   f"benchmark.split=train)")
