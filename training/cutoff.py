"""Where an SFT example longer than the cutoff is cut, and how many are.

Two rules for ``max_length`` (``truncation`` in configs/training/sft.yaml):

- ``llamafactory`` (the default): LLaMA-Factory's ``cutoff_len``, which DyFlow's designer SFT used (D.2, cutoff
  2048). The target keeps its whole length when it is under half the cutoff, else the source keeps its whole length
  when *it* is under half, else both are cut in proportion to their lengths; each side keeps its start. A long
  design prompt therefore loses its end, and the designer's reply, which is what the loss trains, survives.
- ``keep_start``: trl's own ``max_length`` truncation (``truncation_mode="keep_start"``): the tokenized sequence
  keeps its first ``max_length`` tokens, so a long prompt cuts the reply first, and an example whose prompt alone
  fills the cutoff has no target left (trl drops it).

The counts (:func:`measure`) are printed when an SFT run starts and recorded in its ``result.json`` and adapter
identity, so a reader knows how many designer examples were trained on a cut target.
"""
from __future__ import annotations

import sys
from typing import Any
from collections.abc import Sequence

__all__ = ["MODES", "cut", "describe", "encode", "measure", "split_lengths", "tokenized_rows"]

MODES = ("llamafactory", "keep_start")


def split_lengths(source_len: int, target_len: int, cutoff: int) -> tuple[int, int]:
    """(source tokens kept, target tokens kept) under LLaMA-Factory's cutoff_len rule (see the module docstring)."""
    if 2 * target_len < cutoff:
        target_cap = cutoff
    elif 2 * source_len < cutoff:
        target_cap = cutoff - source_len
    else:
        target_cap = int(cutoff * target_len / (source_len + target_len))
    target = min(target_cap, target_len)
    return min(max(cutoff - target, 0), source_len), target


def encode(tok: Any, row: dict[str, Any]) -> tuple[list[int], list[int]]:
    """(prompt ids, completion ids) of a conversational ``{"prompt", "completion"}`` row, rendered as trl renders it:
    the prompt with the generation prompt, the whole with the chat template; the completion starts where the two
    diverge."""
    prompt = list(tok.apply_chat_template(row["prompt"], tokenize=True, add_generation_prompt=True,
                                          return_dict=True)["input_ids"])
    whole = list(tok.apply_chat_template(row["prompt"] + row["completion"], tokenize=True,
                                         return_dict=True)["input_ids"])
    n = 0
    while n < min(len(prompt), len(whole)) and prompt[n] == whole[n]:
        n += 1
    return whole[:n], whole[n:]


def cut(prompt_ids: list[int], completion_ids: list[int], cutoff: int | None, mode: str
        ) -> tuple[list[int], list[int]]:
    """(prompt ids kept, completion ids kept) of one example under ``mode``."""
    if mode not in MODES:
        raise ValueError(f"truncation={mode!r}: choose one of {', '.join(MODES)}")
    if cutoff is None or len(prompt_ids) + len(completion_ids) <= cutoff:
        return prompt_ids, completion_ids
    if mode == "keep_start":
        return prompt_ids[:cutoff], completion_ids[:max(0, cutoff - len(prompt_ids))]
    s, t = split_lengths(len(prompt_ids), len(completion_ids), cutoff)
    return prompt_ids[:s], completion_ids[:t]


def tokenized_rows(tok: Any, rows: Sequence[dict[str, Any]], cutoff: int | None, mode: str) -> list[dict[str, Any]]:
    """Rows trl takes as already tokenized (``input_ids`` + ``completion_mask``), each cut by ``mode``; an example
    left with no target is dropped, as trl drops a fully masked one."""
    out = []
    for row in rows:
        p, c = cut(*encode(tok, row), cutoff, mode)
        if c:
            out.append({"input_ids": p + c, "completion_mask": [0] * len(p) + [1] * len(c)})
    return out


def measure(tok: Any, rows: Sequence[dict[str, Any]], cutoff: int | None) -> dict[str, Any]:
    """How many examples the cutoff cuts, and whose target, under each rule."""
    lengths = [tuple(map(len, encode(tok, r))) for r in rows]
    rep: dict[str, Any] = {"cutoff": cutoff, "examples": len(lengths),
                           "longest": max((p + c for p, c in lengths), default=0),
                           "over_cutoff": sum(1 for p, c in lengths if cutoff is not None and p + c > cutoff)}
    for mode in MODES:
        kept = [len(cut([0] * p, [0] * c, cutoff, mode)[1]) for p, c in lengths]
        rep[mode] = {"target_cut": sum(1 for k, (_, c) in zip(kept, lengths) if k < c),
                     "target_lost": sum(1 for k in kept if k == 0),
                     "target_tokens_lost": sum(c - k for k, (_, c) in zip(kept, lengths))}
    return rep


def describe(rep: dict[str, Any], mode: str) -> str:
    """One line for the log: the examples over the cutoff and what each rule does to their targets."""
    lf, ks = rep["llamafactory"], rep["keep_start"]
    return (f"SFT cutoff {rep['cutoff']} (truncation={mode}): {rep['over_cutoff']} of {rep['examples']} examples are "
            f"longer (longest {rep['longest']} tokens); targets cut: {lf['target_cut']} by LLaMA-Factory's "
            f"cutoff_len rule, {ks['target_cut']} by trl's keep_start ({ks['target_lost']} with no target left, "
            f"{ks['target_tokens_lost']} target tokens lost)")


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m agentic_repro.training.cutoff data=<sft dataset.jsonl> [base=local] [max_length=2048]``: the counts alone."""
    from agentic_repro.harness.embedded.base_model import load_tokenizer, resolve_base
    from agentic_repro.training.datasets import read_dataset
    from agentic_repro.training.train import _to_trl_rows

    kv = dict(a.split("=", 1) for a in (sys.argv[1:] if argv is None else argv) if "=" in a)
    if "data" not in kv:
        print(main.__doc__, file=sys.stderr)
        return 2
    data = read_dataset(kv["data"])
    tok = load_tokenizer(resolve_base(kv.get("base", "local")))
    rep = measure(tok, _to_trl_rows("sft", data.rows), int(kv.get("max_length", 2048)))
    print(describe(rep, kv.get("truncation", "llamafactory")))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
