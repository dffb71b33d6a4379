"""Token F1 for short-answer QA: SQuAD-style F1, AFlow's DROP variant and the official DROP F1.

Three DROP numbers exist in the literature and they differ: AFlow/DenoiseFlow (A.4) score
the whole prediction against each ``|``-separated reference with SQuAD F1
(:func:`drop_f1_aflow`); the official DROP script splits answers into bags of spans,
normalises numbers and zeroes bag pairs whose numbers disagree (:func:`drop_f1_official`).
Both are here so a run can report either, named.
"""
from __future__ import annotations

import itertools
import re
import string
from collections import Counter
from collections.abc import Sequence

__all__ = ["drop_em_f1_official", "drop_f1_aflow", "drop_f1_official", "hotpot_f1_official", "max_f1", "normalize_answer", "token_f1"]

_PUNCT = set(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)


def normalize_answer(s: str) -> str:
    """SQuAD normalisation: lowercase, drop punctuation, drop a/an/the, collapse whitespace."""
    s = str(s).lower()
    s = "".join(ch for ch in s if ch not in _PUNCT)
    s = _ARTICLES.sub(" ", s)
    return " ".join(s.split())


def token_f1(pred: str, gold: str) -> float:
    """SQuAD token F1 of two strings (1.0 when both normalise to nothing, 0.0 when one does)."""
    p, g = normalize_answer(pred).split(), normalize_answer(gold).split()
    if not p or not g:
        return float(p == g)
    same = sum((Counter(p) & Counter(g)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(p), same / len(g)
    return 2 * precision * recall / (precision + recall)


def max_f1(pred: str, golds: Sequence[str]) -> float:
    """Best token F1 of ``pred`` over several acceptable answers (0.0 when there are none)."""
    return max((token_f1(pred, g) for g in golds), default=0.0)


_HOTPOT_SPECIAL = ("yes", "no", "noanswer")


def hotpot_f1_official(pred: str, gold: str) -> float:
    """HotpotQA's official answer F1 (``hotpot_evaluate_v1.py``, re-implemented from its definition).

    Differs from SQuAD F1 in one rule: when either side normalises to ``yes``, ``no`` or
    ``noanswer`` and the two normalised strings differ, F1 is 0 (so "yes it is" scores 0 against
    "yes", where SQuAD F1 gives 0.5). Empty sides score 0 (no common tokens).
    """
    p, g = normalize_answer(pred), normalize_answer(gold)
    if (p in _HOTPOT_SPECIAL or g in _HOTPOT_SPECIAL) and p != g:
        return 0.0
    pt, gt = p.split(), g.split()
    same = sum((Counter(pt) & Counter(gt)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(pt), same / len(gt)
    return 2 * precision * recall / (precision + recall)


def drop_f1_aflow(pred: str, ref_text: str) -> float:
    """AFlow's DROP F1 (DenoiseFlow A.4): the WHOLE prediction against each ``|``-separated
    reference, best match wins. The prediction is not split on ``|``."""
    return max_f1(pred, [r.strip() for r in str(ref_text).split("|")])


# ---- official DROP (number-aware bag F1), re-implemented from the published definition --------

def _is_number(text: str) -> bool:
    try:
        float(text)
        return True
    except ValueError:
        return False


def _norm_token(token: str) -> str:
    token = token.lower()
    if not _is_number(token):
        token = "".join(ch for ch in token if ch not in _PUNCT)
    if _is_number(token):
        token = str(float(token))
    token = _ARTICLES.sub(" ", token)
    return " ".join(token.split())


def _norm_span(span: str) -> str:
    """Official DROP span normalisation: tokens split on spaces and hyphens, each normalised."""
    tokens = [_norm_token(t) for t in re.split(r" |-", str(span))]
    return " ".join(t for t in tokens if t).strip()


def _bags(answer: str | Sequence[str]) -> tuple[list[str], list[set[str]]]:
    spans = [answer] if isinstance(answer, str) else list(answer)
    normalized = [_norm_span(s) for s in spans]
    return normalized, [set(n.split()) for n in normalized]


def _bag_f1(pred: set[str], gold: set[str]) -> float:
    inter = len(gold & pred)
    precision = inter / len(pred) if pred else 1.0
    recall = inter / len(gold) if gold else 1.0
    if precision == 0.0 and recall == 0.0:
        return 0.0
    return 2 * precision * recall / (precision + recall)


def _numbers_match(gold: set[str], pred: set[str]) -> bool:
    """A bag pair counts only if the gold has no numbers or shares one with the prediction."""
    gold_nums = {w for w in gold if _is_number(w)}
    pred_nums = {w for w in pred if _is_number(w)}
    return not gold_nums or bool(gold_nums & pred_nums)


def _assign(scores: list[list[float]]) -> list[tuple[int, int]]:
    """Maximum-weight matching of rows to columns (scipy if present, else exact for <=6)."""
    rows, cols = len(scores), len(scores[0]) if scores else 0
    if rows == 0 or cols == 0:
        return []
    try:
        import numpy as np
        from scipy.optimize import linear_sum_assignment

        r, c = linear_sum_assignment(-np.asarray(scores, dtype=float))
        return list(zip(r.tolist(), c.tolist()))
    except ImportError:
        pass
    if min(rows, cols) <= 6 and max(rows, cols) <= 8:
        if rows <= cols:
            best = max(itertools.permutations(range(cols), rows),
                       key=lambda perm: sum(scores[i][j] for i, j in enumerate(perm)))
            return list(enumerate(best))
        best = max(itertools.permutations(range(rows), cols),
                   key=lambda perm: sum(scores[i][j] for j, i in enumerate(perm)))
        return [(i, j) for j, i in enumerate(best)]
    pairs, used_r, used_c = [], set(), set()  # greedy for unusually many spans
    for s, i, j in sorted(((scores[i][j], i, j) for i in range(rows) for j in range(cols)), reverse=True):
        if i not in used_r and j not in used_c:
            pairs.append((i, j))
            used_r.add(i)
            used_c.add(j)
    return pairs


def _align(pred: list[set[str]], gold: list[set[str]]) -> list[float]:
    scores = [[_bag_f1(p, g) if _numbers_match(g, p) else 0.0 for p in pred] for g in gold]
    best = [0.0] * max(len(gold), len(pred))
    for i, j in _assign(scores):
        best[i] = max(best[i], scores[i][j])
    return best


def _em_f1(pred: str | Sequence[str], gold: str | Sequence[str]) -> tuple[float, float]:
    p_spans, p_bags = _bags(pred)
    g_spans, g_bags = _bags(gold)
    em = float(set(p_spans) == set(g_spans) and len(p_spans) == len(g_spans))
    per_bag = _align(p_bags, g_bags)
    return em, round(sum(per_bag) / len(per_bag), 2) if per_bag else 0.0


def drop_em_f1_official(pred: str | Sequence[str],
                        golds: Sequence[str | Sequence[str]]) -> tuple[float, float]:
    """Official DROP (exact match, F1), each the max over the alternative gold answers.

    A gold (or the prediction) may be one string or a list of spans (multi-span answers).
    """
    pairs = [_em_f1(pred, g) for g in golds]
    if not pairs:
        return 0.0, 0.0
    return max(p[0] for p in pairs), max(p[1] for p in pairs)


def drop_f1_official(pred: str | Sequence[str], golds: Sequence[str | Sequence[str]]) -> float:
    """Official DROP F1: answers as bags of spans, numbers normalised, bags aligned one-to-one,
    a bag pair whose numbers disagree scores 0; max over the alternative gold answers."""
    return drop_em_f1_official(pred, golds)[1]
