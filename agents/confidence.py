"""Verbalised confidence: the elicitation instruction AUQ appends every step, and robust parsing of its tags.

The instruction is the supplement's §11.2 text (the [udcs] transcription of AUQ's Appendix A.4). Parsing never
invents a number. The instruction asks for "Your confidence level (0.0-1.0)", so exactly that form is read:
the whole tag content is one plain decimal (``0.85``, ``.85``, ``1``, ``0``, ``1.0``; surrounding whitespace
allowed) in [0, 1]. Anything else -- a decimal comma ("0,85"), a fraction ("8/10"), an exponent ("1e-1"), a
percentage ("85%"; the instruction offers no percent form), a number with words around it ("Level 3: 0.85"),
a bare 0-100 number ("2", "85") -- is *missing*: ``None`` with a ``status`` saying why and the tag's raw text
kept, never a guessed rescaling and never silently 1.0 or 0.0. Guessing would feed invented numbers into the
System-2 trigger, the UAM memory and T-ECE.
"""
from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any

ELICITATION = (
    "After your action, you MUST provide:\n\n"
    "1. Your confidence level (0.0-1.0) in <confidence>...</confidence> tags\n\n"
    "2. An explanation of your confidence in <explanation>...</explanation> tags\n"
    "   - Explain what makes you confident\n"
    "   - Explain what concerns or uncertainties you have\n"
    "   - What information might be missing or unclear\n"
    "   - What alternative actions you considered\n"
    "   - DO NOT output empty <explanation></explanation> tags - you MUST provide actual text inside"
)

_DECIMAL = re.compile(r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)", re.ASCII)  # a plain decimal: no comma, exponent, '/' or '%'


def tag_text(raw: str | None, tag: str) -> str | None:
    """The content of the last ``<tag>...</tag>`` in ``raw``; an unclosed last tag runs to the next tag or the
    end. None when the tag is absent."""
    if not raw:
        return None
    closed = re.findall(rf"<{tag}\s*>(.*?)</{tag}\s*>", raw, re.DOTALL | re.IGNORECASE)
    if closed:
        return closed[-1].strip()
    m = list(re.finditer(rf"<{tag}\s*>", raw, re.IGNORECASE))
    if not m:
        return None
    rest = raw[m[-1].end():]
    return re.split(r"<\s*/?\s*[a-zA-Z]+\s*>", rest, maxsplit=1)[0].strip()


@dataclass(frozen=True)
class Elicited:
    """What one reply said about itself: ``confidence`` in [0, 1] or None, why (``status``), the explanation."""

    confidence: float | None
    status: str            # ok | missing | empty | malformed | out_of_range
    explanation: str | None
    text: str | None       # the raw content of the <confidence> tag

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def parse_confidence(raw: str | None) -> tuple[float | None, str, str | None]:
    """(value or None, status, tag text) for the last ``<confidence>`` tag of ``raw``.

    ``ok``: the tag holds exactly one plain decimal in [0, 1]; ``out_of_range``: exactly one plain decimal
    outside it ("2", "85", "-0.2"); ``malformed``: anything else in the tag; ``empty``/``missing``: no content
    or no tag. Only ``ok`` has a value."""
    text = tag_text(raw, "confidence")
    if text is None:
        return None, "missing", None
    if not text:
        return None, "empty", text
    if _DECIMAL.fullmatch(text) is None:
        return None, "malformed", text
    value = float(text) + 0.0  # "-0" is 0.0
    if not 0.0 <= value <= 1.0:
        return None, "out_of_range", text
    return value, "ok", text


def parse_explanation(raw: str | None) -> str | None:
    """The last ``<explanation>`` text; empty or absent is None."""
    text = tag_text(raw, "explanation")
    return text or None


def elicit(raw: str | None) -> Elicited:
    """Confidence and explanation of one reply (see the module docstring for the missing cases)."""
    value, status, text = parse_confidence(raw)
    return Elicited(value, status, parse_explanation(raw), text)
