"""Versioned answer-extraction filters.

Every filter returns ``(value, rule)``: the extracted answer and the name of the rule
that fired, so a run records *which* filter produced each scored answer (a silent
change of filter changes accuracy; bump :data:`EXTRACTION_VERSION` when one changes).
Filters are pure functions of the text: no model, no I/O.
"""
from __future__ import annotations

import re
import textwrap

EXTRACTION_VERSION = "2"  # 2: GSM8K protocol reading (last_number_protocol) added

__all__ = [
    "EXTRACTION_VERSION",
    "EXTRACTORS",
    "GOLD_READERS",
    "boxed_contents",
    "extract_code",
    "extract_short_answer",
    "gsm8k_answer",
    "gsm8k_gold",
    "last_boxed",
    "last_number",
    "last_number_protocol",
    "normalize_number",
]

# A number as models write it: optional sign, optional $, thousands commas, decimals,
# an optional "/denominator". The look-behind keeps "x2" or "1.2.3"-style tails out.
_NUM = (r"(?<![\w.])[-\u2212]?\s?\$?\s?(?:\d{1,3}(?:,\d{3})+|\d+|(?=\.\d))(?:\.\d+)?"
        r"(?:\s?/\s?\d+(?:\.\d+)?)?")
_NUM_RE = re.compile(_NUM)
_FRAC_RE = re.compile(r"\\[dt]?frac\s*\{\s*([^{}]*)\s*\}\s*\{\s*([^{}]*)\s*\}")
_ANSWER_IS_RE = re.compile(r"answer\s*(?:is|:|=)\s*[:*\s]*", re.IGNORECASE)


def _clean_number(raw: str) -> str:
    """Canonical spelling of a matched number: no commas, $, spaces or trailing '.'."""
    s = raw.replace("\u2212", "-").replace(",", "").replace("$", "")
    s = re.sub(r"\s+", "", s)
    return s.rstrip(".")


def _numbers(text: str) -> list[str]:
    # \frac{a}{b} → a/b first, so "\frac{3}{4}" reads as one number, not two
    text = _FRAC_RE.sub(lambda m: f"{m.group(1)}/{m.group(2)}", text)
    return [_clean_number(m.group(0)) for m in _NUM_RE.finditer(text)]


def gsm8k_gold(answer_text: str) -> str:
    """The gold number of a GSM8K answer: the text after ``####``, commas stripped."""
    tail = answer_text.rsplit("####", 1)[-1]
    nums = _numbers(tail)
    if "####" in answer_text and tail.strip():
        return nums[0] if nums else tail.strip().replace(",", "")
    return nums[-1] if nums else answer_text.strip()


def gsm8k_answer(answer: object) -> str:
    """The gold number of a GSM8K row in either shipped shape: the official answer (worked solution, then
    ``#### 18``) through :func:`gsm8k_gold`; AFlow's split, whose answer is already the number, with commas
    stripped."""
    text = str(answer)
    return gsm8k_gold(text) if "####" in text else text.replace(",", "").strip()


def normalize_number(s: str | None) -> float | None:
    """``s`` as a float ("1,000" → 1000.0, "3/4" → 0.75, "$5." → 5.0, "50%" → 50.0), else None."""
    if s is None:
        return None
    t = str(s).strip().replace("\u2212", "-")
    m = _FRAC_RE.fullmatch(t.lstrip("-").strip())
    if m:
        t = ("-" if t.startswith("-") else "") + f"{m.group(1)}/{m.group(2)}"
    t = re.sub(r"[\s,$%]", "", t).replace("\\%", "").rstrip(".")
    t = t.removeprefix("+")
    try:
        if "/" in t:
            num, den = t.split("/", 1)
            neg = num.startswith("-") != den.startswith("-")
            value = float(num.lstrip("-")) / float(den.lstrip("-"))
            return -value if neg else value
        return float(t)
    except (ValueError, ZeroDivisionError):
        return None


# ---- \boxed{} ---------------------------------------------------------------------------------

def _brace_pairs(text: str) -> dict[int, int]:
    """{index of '{': index of its matching '}'} for the whole text in one pass (escaped ``\\{`` ``\\}`` do
    not count; an unclosed '{', e.g. of a truncated generation, has no entry). One pass, not one scan per
    ``\\boxed{``: an output of thousands of unclosed boxes took seconds per score."""
    pairs: dict[int, int] = {}
    stack: list[int] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == "\\" and i + 1 < n and text[i + 1] in "{}":
            i += 2
            continue
        if c == "{":
            stack.append(i)
        elif c == "}" and stack:
            pairs[stack.pop()] = i
        i += 1
    return pairs


_BOX_RE = re.compile(r"\\(?:boxed|fbox)\b")
_TOKEN_RE = re.compile(r"[^\s$]+")


def boxed_contents(text: str) -> list[str]:
    """All ``\\boxed{...}`` / ``\\fbox{...}`` / ``\\boxed 5`` contents, in order of appearance."""
    out: list[str] = []
    pairs: dict[int, int] | None = None
    for m in _BOX_RE.finditer(text):
        j = m.end()
        while j < len(text) and text[j] in " \t":
            j += 1
        if j < len(text) and text[j] == "{":
            pairs = _brace_pairs(text) if pairs is None else pairs
            if j in pairs:  # balanced (nested braces allowed)
                out.append(text[j + 1:pairs[j]].strip())
        elif j > m.end():  # "\boxed 5": the token up to whitespace or "$"
            tok = _TOKEN_RE.match(text, j)
            if tok:
                out.append(tok.group(0).strip())
    return out


def last_boxed(text: str) -> tuple[str | None, str]:
    """The final answer of a MATH-style solution (also used on gold solutions).

    Rules, first that applies wins:
      ``boxed``        content of the last balanced ``\\boxed{...}``/``\\fbox{...}`` (or ``\\boxed 5``);
      ``final_answer`` "final answer is $X$" (also "answer is $X$");
      ``last_math``    the last inline math ``$...$``, ``\\(...\\)`` or ``\\[...\\]``;
      ``last_line``    the last non-empty line, trailing period removed;
      ``none``         empty text.
    """
    if not text or not text.strip():
        return None, "none"
    boxes = boxed_contents(text)
    if boxes:
        return boxes[-1], "boxed"
    finals = re.findall(r"answer\s+is:?\s*\$+([^$]+)\$", text, re.IGNORECASE)
    if finals:
        return finals[-1].strip(), "final_answer"
    maths = re.findall(r"\$\$(.+?)\$\$|\$([^$]+)\$|\\\((.+?)\\\)|\\\[(.+?)\\\]", text, re.DOTALL)
    if maths:
        last = next(g for g in maths[-1] if g)
        return last.strip(), "last_math"
    line = [ln for ln in text.splitlines() if ln.strip()][-1].strip()
    return line.rstrip(".").strip(), "last_line"


# ---- GSM8K numbers ----------------------------------------------------------------------------

def last_number(text: str) -> tuple[str | None, str]:
    """The final number of a GSM8K-style answer, read flexibly (``benchmark.extract=flexible``).

    Rules, first that applies wins: ``boxed`` (last number inside the last ``\\boxed{}``:
    small models box even when asked for ####), ``hash`` (first number after the last
    ``####``), ``answer_is`` (number right after the last "answer is"/"answer:"),
    ``last_number`` (last number anywhere), else ``(None, "none")``. Commas, ``$`` and a
    trailing ``.`` are stripped; negatives, decimals and fractions like ``3/4`` are kept as text.
    """
    if not text:
        return None, "none"
    boxes = boxed_contents(text)
    if boxes:
        nums = _numbers(boxes[-1])
        if nums:
            return nums[-1], "boxed"
    if "####" in text:
        nums = _numbers(text.rsplit("####", 1)[1])
        if nums:
            return nums[0], "hash"
    matches = list(_ANSWER_IS_RE.finditer(text))
    if matches:
        nums = _numbers(text[matches[-1].end():][:80])
        if nums:
            return nums[0], "answer_is"
    nums = _numbers(text)
    if nums:
        return nums[-1], "last_number"
    return None, "none"


# The AFlow/DenoiseFlow protocol's number: ASCII sign, digits with optional thousands groups,
# optional decimals; nothing else (no U+2212 minus, no fractions, no look-behind).
_PROTOCOL_NUM_RE = re.compile(r"[-+]?\d+(?:,\d{3})*(?:\.\d+)?|\d+\.\d+")


def last_number_protocol(text: str) -> tuple[str | None, str]:
    """GSM8K as the AFlow/DenoiseFlow protocol reads it: the **last number** of the whole output.

    The rule of AFlow's ``GSM8KBenchmark.extract_number`` (FoundationAgents/AFlow,
    ``benchmarks/gsm8k.py``), which DenoiseFlow A.4 adopts: the last match of an ASCII-signed
    decimal with optional thousands commas, commas stripped. Consequences kept on purpose
    (they are the protocol): ``\boxed{}``, ``####`` and "answer is" have no priority; U+2212
    (``−5``) is not a minus sign, so it reads ``5``; ``3/4`` reads ``4``; ``x2`` reads ``2``.
    Rule names: ``protocol_last_number`` or ``none``. :func:`last_number` is the flexible reading.
    """
    matches = _PROTOCOL_NUM_RE.findall(text or "")
    if not matches:
        return None, "none"
    value = matches[-1].replace(",", "")
    value = value.removeprefix("+")
    return value, "protocol_last_number"


# ---- code -------------------------------------------------------------------------------------

_FENCE_RE = re.compile(r"^[ \t]*```[ \t]*([\w+.-]*)[^\n]*\n(.*?)^[ \t]*```", re.DOTALL | re.MULTILINE)
_OPEN_FENCE_RE = re.compile(r"^[ \t]*```[ \t]*([\w+.-]*)[^\n]*\n", re.MULTILINE)
_PY_TAGS = {"", "python", "py", "python3", "py3", "pycon", "ipython"}


def _defines(code: str, name: str) -> bool:
    return re.search(rf"^\s*(?:async\s+def|def|class)\s+{re.escape(name)}\b", code, re.MULTILINE) is not None


def extract_code(text: str, entry_point: str | None = None) -> tuple[str, str]:
    """The Python program in a model answer.

    Rules: ``fence_entry_point`` the last python fenced block that defines ``entry_point``;
    ``fence_longest`` the longest python block (untagged blocks count as python; other
    languages only when there is no python block); ``fence_unterminated`` the text after
    an opening fence that never closes (a truncated answer); ``raw`` the text itself.
    """
    text = text or ""
    blocks = [(m.group(1).lower(), m.group(2)) for m in _FENCE_RE.finditer(text)]
    if not blocks:
        opened = list(_OPEN_FENCE_RE.finditer(text))
        if opened:
            return text[opened[-1].end():].rstrip("`\n ") + "\n", "fence_unterminated"
        return text, "raw"
    python = [textwrap.dedent(code) for lang, code in blocks if lang in _PY_TAGS] or \
        [textwrap.dedent(code) for _, code in blocks]
    if entry_point:
        defining = [code for code in python if _defines(code, entry_point)]
        if defining:
            return defining[-1], "fence_entry_point"
    return max(python, key=len), "fence_longest"


# ---- short answers (HotpotQA / DROP) -----------------------------------------------------------

_MARKER_RE = re.compile(r"(?:final\s+answer|answer)\s*[:：]", re.IGNORECASE)
_TAG_RE = re.compile(r"<answer>(.*?)</answer>", re.IGNORECASE | re.DOTALL)


def _strip_answer(s: str) -> str:
    """Remove wrapping quotes, markdown emphasis/code marks and one trailing period."""
    prev = None
    s = s.strip()
    while s != prev:
        prev = s
        s = s.strip("*_` \t")
        if len(s) >= 2 and s[0] in "\"'\u201c\u2018" and s[-1] in "\"'\u201d\u2019":
            s = s[1:-1].strip()
        if s.endswith("."):
            s = s[:-1].rstrip()
    return s


def extract_short_answer(text: str) -> tuple[str, str]:
    """A short QA answer (HotpotQA, DROP).

    Rules: ``answer_tag`` the last ``<answer>...</answer>``; ``answer_marker`` the rest of
    the line after the last "Answer:" / "Final answer:" (case-insensitive; the next
    non-empty line if the marker ends its line); ``boxed`` the last ``\\boxed{}``;
    ``last_line`` the last non-empty line; ``empty``. Surrounding quotes, markdown
    emphasis and a trailing period are removed.
    """
    text = text or ""
    tags = _TAG_RE.findall(text)
    if tags and tags[-1].strip():
        return _strip_answer(tags[-1]), "answer_tag"
    markers = list(_MARKER_RE.finditer(text))
    if markers:
        rest = text[markers[-1].end():]
        line, _, after = rest.partition("\n")
        if not line.strip():
            line = next((ln for ln in after.splitlines() if ln.strip()), "")
        if line.strip():
            return _strip_answer(line), "answer_marker"
    boxes = boxed_contents(text)
    if boxes:
        inner = re.sub(r"\\text\{([^{}]*)\}", r"\1", boxes[-1])
        return _strip_answer(inner), "boxed"
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if lines:
        return _strip_answer(lines[-1]), "last_line"
    return "", "empty"


# ---- the names a config uses (``extract:`` / ``readings:`` / ``gold.read:`` of a JSONL benchmark) -------------

#: Answer extractors by name: each ``text -> (answer, rule)``.
EXTRACTORS = {
    "last_number_protocol": last_number_protocol,
    "last_number": last_number,
    "last_boxed": last_boxed,
    "extract_short_answer": extract_short_answer,
}

#: Gold readers by name: each ``row value -> gold``.
GOLD_READERS = {
    "text": str,
    "gsm8k_answer": gsm8k_answer,
    "last_boxed": lambda value: last_boxed(str(value))[0],
}
