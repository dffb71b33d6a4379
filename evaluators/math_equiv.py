"""Equivalence of two MATH answers, staged from cheap and exact to slow and symbolic.

``is_equiv`` says which stage decided, so a run can report how many answers needed sympy:
  ``string``     identical after trimming;
  ``normalized`` identical after Hendrycks-style ``strip_string`` normalisation (:func:`normalize_math`);
  ``numeric``    both are numbers (plain, fractions, radicals evaluated by sympy) and close;
  ``symbolic``   sympy proves ``simplify(a - b) == 0`` (or tried and failed);
  ``timeout``    the sympy time limit passed before a verdict (``on_timeout="wrong"`` only: then not
                 equivalent; by default it raises :class:`~evaluators.base.ScorerFailure`, we could not judge);
  ``none``       there is no prediction.
Tuples, intervals, unordered answer lists and matrices are compared element-wise and report
the slowest stage any element needed.

Sympy failing on the model's answer (it does not parse, simplify raises) is a verdict: not equivalent
(stage ``symbolic``). A child that dies without answering, or one killed at the deadline (unless
``on_timeout="wrong"``), is not: it raises :class:`~evaluators.base.ScorerFailure` and the problem is an
error (``benchmark.checker_timeout``).

Anything that touches sympy runs in a forked child process that is SIGKILLed at the
deadline: sympy can take unbounded time or memory on model output (``9^{9^{9}}``), and
SIGALRM cannot interrupt it from a worker thread (scoring runs in ``asyncio.to_thread``).
Model output never reaches ``eval``: the LaTeX→Python converter only emits a whitelisted
alphabet of numbers, operators and known function names before ``parse_expr`` sees it.
"""
from __future__ import annotations

import keyword
import math
import re
import time
from fractions import Fraction
from typing import Any
from collections.abc import Callable

from agentic_repro.evaluators.base import ScorerFailure
from agentic_repro.evaluators.killable import TIMEOUT, call_with_deadline

__all__ = ["STAGES", "is_equiv", "normalize_math"]

STAGES = ("string", "normalized", "numeric", "symbolic", "timeout", "none")
_RANK = {"string": 0, "normalized": 1, "numeric": 2, "symbolic": 3, "timeout": 4}
_REL_TOL, _ABS_TOL = 1e-6, 1e-9

# ---- normalisation (after Hendrycks et al.'s strip_string, re-implemented) ---------------------

_TEXT_CMDS = r"(?:text|textbf|textit|textrm|mathrm|mathbf|mathit|mbox|operatorname)"
_SPACING = re.compile(r"\\[,;:! ]|\\q?quad\b|\\displaystyle\b|~")


def _group(s: str, i: int) -> tuple[str, int] | None:
    """One LaTeX argument at ``s[i]``: a balanced ``{...}`` group or a single character."""
    while i < len(s) and s[i] == " ":
        i += 1
    if i >= len(s):
        return None
    if s[i] != "{":
        if s[i] == "\\":  # a command as a one-token argument, e.g. \frac\pi2
            m = re.match(r"\\[a-zA-Z]+", s[i:])
            if m:
                return m.group(0), i + m.end()
        return s[i], i + 1
    depth = 0
    for j in range(i, len(s)):
        if s[j] == "{":
            depth += 1
        elif s[j] == "}":
            depth -= 1
            if depth == 0:
                return s[i + 1:j], j + 1
    return None


def _fix_fracs(s: str) -> str:
    """``\\frac12`` → ``\\frac{1}{2}``, ``\\frac1{72}`` → ``\\frac{1}{72}`` (brace every argument)."""
    out, i = [], 0
    while True:
        j = s.find("\\frac", i)
        if j < 0:
            out.append(s[i:])
            return "".join(out)
        out.append(s[i:j + 5])
        a = _group(s, j + 5)
        b = _group(s, a[1]) if a else None
        if not a or not b:
            out.append(s[j + 5:])
            return "".join(out)
        out.append("{" + _fix_fracs(a[0]) + "}{" + _fix_fracs(b[0]) + "}")
        i = b[1]


def _clean(s: str) -> str:
    """Everything in the normalisation except removing spaces (the sympy converter needs them)."""
    s = str(s).strip().replace("\n", " ")
    for uni, tex in (("\u2212", "-"), ("\u03c0", "\\pi "), ("\u221e", "\\infty "), ("\u00d7", "\\times "),
                     ("\u00b7", "\\cdot "), ("\u221a", "\\sqrt")):
        s = s.replace(uni, tex)
    s = s.replace("\\!", "")
    s = s.replace("\\\\", "\\")
    s = re.sub(r"\\[dt]frac", r"\\frac", s)
    s = re.sub(r"\\(?:left|right|big|Big|bigg|Bigg)(?![a-zA-Z])", "", s)
    s = re.sub(r"\^\s*\{\s*\\circ\s*\}|\^\s*\\circ|\\circ|°|\\degree", "", s)
    s = s.replace("\\$", "").replace("$", "")
    s = _SPACING.sub(" ", s)
    # units: a trailing \text{...} after something else is a unit ("10\text{ cm}^2" → "10")
    s = re.sub(r"(?<=\S)\s*\\" + _TEXT_CMDS + r"\s*\{[^{}]*\}(?:\^\s*\{?\d\}?)?\s*$", "", s)
    s = re.sub(r"\\" + _TEXT_CMDS + r"\s*\{([^{}]*)\}", r"\1", s)
    s = s.replace("\\%", "").replace("%", "")
    s = re.sub(r"^[a-zA-Z]\s*\\in\s*", "", s)
    s = s.replace(" .", " 0.").replace("{.", "{0.")
    if s.startswith("."):
        s = "0" + s
    parts = s.split("=")
    if len(parts) == 2 and len(parts[0].strip()) <= 2:  # "x = 3" → "3"
        s = parts[1]
    s = re.sub(r"\\sqrt\s*([^\s{\[\\(])", r"\\sqrt{\1}", s)  # \sqrt3 → \sqrt{3}
    s = _fix_fracs(s)
    s = s.strip()
    m = re.fullmatch(r"(-?)\s*(\d+)\s*/\s*(\d+)", s)  # 3/4 → \frac{3}{4}
    if m:
        s = f"{m.group(1)}\\frac{{{m.group(2)}}}{{{m.group(3)}}}"
    s = s.rstrip(".").strip()
    m = re.fullmatch(r"\(\s*([A-Ea-e])\s*\)", s)  # answer choice "(B)" → "B"
    if m:
        s = m.group(1).upper()
    return s


def normalize_math(s: str) -> str:
    """A canonical string for a MATH answer (no evaluation), usable as a voting key."""
    return _clean(s).replace(" ", "")


# ---- numbers without sympy --------------------------------------------------------------------

_PLAIN = r"\d+(?:\.\d+)?|\d{1,3}(?:,\d{3})+(?:\.\d+)?|\.\d+"


def _simple_number(s: str) -> Fraction | None:
    """Exact value of a plain number, ``1,000``, ``\\frac{a}{b}`` or ``a/b``; None otherwise."""
    s = s.replace(" ", "")
    neg = s.startswith("-")
    if neg:
        s = s[1:]
    s = s.removeprefix("+")
    m = re.fullmatch(rf"\\frac\{{(-?)({_PLAIN})\}}\{{(-?)({_PLAIN})\}}", s) or \
        re.fullmatch(rf"()({_PLAIN})/()({_PLAIN})", s)
    try:
        if m:
            den = Fraction(m.group(4).replace(",", ""))
            if den == 0:
                return None
            value = Fraction(m.group(2).replace(",", "")) / den
            neg ^= bool(m.group(1)) ^ bool(m.group(3))
        elif re.fullmatch(_PLAIN, s):
            value = Fraction(s.replace(",", ""))
        else:
            return None
    except (ValueError, ZeroDivisionError):
        return None
    return -value if neg else value


def _close(a: complex, b: complex) -> bool:
    return math.isclose(a.real, b.real, rel_tol=_REL_TOL, abs_tol=_ABS_TOL) and \
        math.isclose(a.imag, b.imag, rel_tol=_REL_TOL, abs_tol=_ABS_TOL)


# ---- structure: matrices, tuples, intervals, lists ---------------------------------------------

_MATRIX_RE = re.compile(r"\\begin\{([pbvBV]?matrix|array|smallmatrix)\}(?:\{[^{}]*\})?(.*?)\\end\{\1\}", re.DOTALL)


def _matrix(s: str) -> list[list[str]] | None:
    m = _MATRIX_RE.search(s)
    if not m or s[:m.start()].strip(" $(\\left") or s[m.end():].strip(" $)\\right."):
        return None
    rows = [r for r in re.split(r"\\\\", m.group(2)) if r.strip() and r.strip() != "\\hline"]
    return [[c.strip() for c in r.split("&")] for r in rows]


def _split_top(s: str, sep: str = ",") -> list[str]:
    parts, depth, cur = [], 0, []
    i = 0
    while i < len(s):
        c = s[i]
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        if c == sep and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(c)
        i += 1
    parts.append("".join(cur))
    return [p.strip() for p in parts]


def _brackets(s: str) -> tuple[str, str, str] | None:
    """``(open, close, inner)`` if the outer brackets of ``s`` enclose all of it."""
    s = s.strip()
    if s.startswith("\\{") and s.endswith("\\}"):
        return "{", "}", s[2:-2]
    if len(s) < 2 or s[0] not in "([" or s[-1] not in ")]":
        return None
    depth = 0
    for i, c in enumerate(s):
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
            if depth == 0 and i != len(s) - 1:
                return None
    return s[0], s[-1], s[1:-1]


def _structure(s: str) -> tuple[str, list[Any]] | None:
    """A decomposition of ``s`` into comparable parts, or None for a scalar."""
    mat = _matrix(s)
    if mat is not None:
        if len(mat) == 1 or all(len(r) == 1 for r in mat):
            return "vector", [c for r in mat for c in r]
        return "matrix:" + "x".join(str(len(r)) for r in mat), [c for r in mat for c in r]
    c = _clean(s)
    unions = [p for p in re.split(r"\\cup|∪", c)]
    if len(unions) > 1:
        return "union", unions
    br = _brackets(c)
    if br:
        open_, close, inner = br
        parts = _split_top(inner)
        if len(parts) >= 2:
            if open_ == "{":
                return "set", parts
            kind = "vector" if (open_, close) == ("(", ")") else f"interval{open_}{close}"
            return kind, parts
        return None
    parts = _split_top(c)
    if len(parts) >= 2:
        return "set", parts
    return None


# ---- sympy, in a killable child ----------------------------------------------------------------

_FUNCS = {"sin": "sin", "cos": "cos", "tan": "tan", "cot": "cot", "sec": "sec", "csc": "csc",
          "arcsin": "asin", "arccos": "acos", "arctan": "atan", "sinh": "sinh", "cosh": "cosh",
          "tanh": "tanh", "ln": "log", "log": "log", "exp": "exp"}
_GREEK = {"alpha", "beta", "gamma", "delta", "epsilon", "varepsilon", "zeta", "eta", "theta", "vartheta",
          "iota", "kappa", "lambda", "mu", "nu", "xi", "rho", "sigma", "tau", "upsilon", "phi", "varphi",
          "chi", "psi", "omega", "pi"}
_SYMPY_NAMES = {"sqrt", "sin", "cos", "tan", "cot", "sec", "csc", "asin", "acos", "atan", "sinh", "cosh",
                "tanh", "log", "exp", "pi", "oo", "E", "I", "floor", "ceiling", "binomial", "factorial", "Abs"}
_SAFE_CHARS = re.compile(r"[0-9A-Za-z_+\-*/(). ,!]*")


def _brackets_at(s: str, i: int) -> tuple[str, int] | None:
    """The inside of the parenthesis group opening at ``s[i] == '('`` and the index after it."""
    depth = 0
    for j in range(i, len(s)):
        depth += {"(": 1, ")": -1}.get(s[j], 0)
        if depth == 0:
            return s[i + 1:j], j + 1
    return None


def _latex_to_py(s: str) -> str | None:
    """A sympy-parsable string for a LaTeX expression, or None if anything is unfamiliar."""
    out: list[str] = []
    i, n = 0, len(s)
    while i < n:
        c = s[i]
        if c == "\\":
            m = re.match(r"\\([a-zA-Z]+|.)", s[i:])
            if not m:
                return None
            cmd = m.group(1)
            i += m.end()
            if cmd in ("frac", "dfrac", "tfrac", "binom", "dbinom", "tbinom"):
                a = _group(s, i)
                b = _group(s, a[1]) if a else None
                if not a or not b:
                    return None
                ca, cb = _latex_to_py(a[0]), _latex_to_py(b[0])
                if ca is None or cb is None:
                    return None
                out.append(f"(({ca})/({cb}))" if "frac" in cmd else f"binomial(({ca}),({cb}))")
                i = b[1]
            elif cmd == "sqrt":
                root = None
                while i < n and s[i] == " ":
                    i += 1
                if i < n and s[i] == "[":
                    j = s.find("]", i)
                    if j < 0:
                        return None
                    root = _latex_to_py(s[i + 1:j])
                    i = j + 1
                while i < n and s[i] == " ":
                    i += 1
                if i < n and s[i] == "(":  # \sqrt(2), as models sometimes write it
                    inner = _brackets_at(s, i)
                    a = (inner[0], inner[1]) if inner else None
                else:
                    a = _group(s, i)
                ca = _latex_to_py(a[0]) if a else None
                if ca is None:
                    return None
                out.append(f"sqrt({ca})" if root is None else f"(({ca})**(1/({root})))")
                i = a[1]
            elif cmd in _FUNCS:
                out.append(f" {_FUNCS[cmd]}")
            elif cmd in _GREEK:
                out.append(f" {'lamda' if cmd == 'lambda' else cmd} ")
            elif cmd == "infty":
                out.append(" oo ")
            elif cmd in ("cdot", "times", "ast"):
                out.append("*")
            elif cmd == "div":
                out.append("/")
            elif cmd in ("{", "lfloor", "lceil", "langle"):
                out.append({"{": "(", "lfloor": " floor(", "lceil": " ceiling(", "langle": "("}[cmd])
            elif cmd in ("}", "rfloor", "rceil", "rangle"):
                out.append(")")
            elif cmd in (",", ";", ":", "!", " ", "quad", "qquad", "displaystyle", "left", "right", "%"):
                out.append(" ")
            else:
                return None
        elif c == "{":
            a = _group(s, i)
            ca = _latex_to_py(a[0]) if a else None
            if ca is None:
                return None
            out.append(f"({ca})")
            i = a[1]
        elif c == "^" or c == "_":
            a = _group(s, i + 1)
            if not a:
                return None
            if c == "^":
                ca = _latex_to_py(a[0])
                if ca is None:
                    return None
                out.append(f"**({ca})")
            elif re.fullmatch(r"[A-Za-z0-9]+", a[0]) and out and re.search(r"[A-Za-z]$", out[-1]):
                out.append(f"_{a[0]}")  # x_1 / a_{10}: part of the symbol name
            else:
                return None
            i = a[1]
        elif c in "[]":
            out.append("(" if c == "[" else ")")
            i += 1
        elif c in "|<>=&;:'\"#@?`~$}" or ord(c) > 127:
            return None
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _safe_py(expr: str) -> bool:
    """True when ``expr`` can only denote numbers, symbols and whitelisted sympy functions."""
    if not _SAFE_CHARS.fullmatch(expr) or "__" in expr or re.search(r"\.\s*[A-Za-z_]", expr):
        return False
    for name in re.findall(r"[A-Za-z_][A-Za-z_0-9]*", expr):
        if keyword.iskeyword(name):
            return False
        if name not in _SYMPY_NAMES and name not in _GREEK and name != "lamda" and \
                not re.fullmatch(r"[A-Za-z]+(?:_[A-Za-z0-9]+)?", name):
            return False
    return True


_SYMPY: dict[str, Any] = {}


def _sympy_env() -> dict[str, Any]:
    """Import sympy once in the parent, so every forked child starts with it loaded."""
    if not _SYMPY:
        import sympy
        from sympy.parsing import sympy_parser as sp

        parse_latex = None
        try:
            from sympy.parsing.latex import parse_latex as _pl

            _pl("1")  # raises ImportError when the antlr4 runtime is missing or the wrong version
            parse_latex = _pl
        except Exception:  # noqa: BLE001 - any failure means: use our converter
            parse_latex = None
        names = {n: getattr(sympy, n) for n in _SYMPY_NAMES}
        names.update({n: getattr(sympy, n) for n in ("Integer", "Float", "Rational", "Symbol", "Function")})
        names["__builtins__"] = {}
        _SYMPY.update(sympy=sympy, sp=sp, parse_latex=parse_latex, globals=names,
                      transformations=sp.standard_transformations + (
                          sp.implicit_multiplication_application, sp.convert_xor))
    return _SYMPY


def _to_sympy(env: dict[str, Any], latex: str) -> Any:
    if env["parse_latex"] is not None:
        try:
            return env["parse_latex"](latex)
        except Exception:  # noqa: BLE001 - fall back to the converter
            pass
    py = _latex_to_py(latex)
    if py is None or not py.strip() or not _safe_py(py):
        return None
    return env["sp"].parse_expr(py, global_dict=dict(env["globals"]), local_dict={},
                                transformations=env["transformations"], evaluate=True)


def _sympy_compare(a: str, b: str) -> tuple[bool, str]:
    """Runs in the child: numeric comparison when both sides are constants, else simplify."""
    env = _sympy_env()
    sympy = env["sympy"]
    try:
        ea, eb = _to_sympy(env, a), _to_sympy(env, b)
    except Exception:  # noqa: BLE001 - parse_expr raises many things on odd input: not equivalent
        return False, "symbolic"
    if ea is None or eb is None or isinstance(ea, tuple) or isinstance(eb, tuple):
        return False, "symbolic"
    if not getattr(ea, "free_symbols", True) and not getattr(eb, "free_symbols", True):
        try:
            va, vb = complex(ea.evalf(30)), complex(eb.evalf(30))
            if all(math.isfinite(x) for x in (va.real, va.imag, vb.real, vb.imag)):
                return _close(va, vb), "numeric"
        except (TypeError, ValueError, OverflowError):
            pass
        return bool(ea == eb), "numeric"
    try:
        if sympy.simplify(ea - eb) == 0:
            return True, "symbolic"
        return bool(sympy.expand(ea - eb) == 0), "symbolic"
    except Exception:  # noqa: BLE001 - sympy raises many things on odd input
        return False, "symbolic"


def _in_child(fn: Callable[..., tuple[bool, str]], args: tuple[Any, ...], timeout_s: float) -> tuple[bool, str]:
    """``fn(*args)`` in a killable child (:mod:`agentic_repro.evaluators.killable`); (False, "timeout") at the deadline."""
    _sympy_env()  # load before forking: the child inherits it instead of importing for seconds
    try:
        result = call_with_deadline(fn, args, timeout_s)
    except RuntimeError as exc:  # our checker crashed or its child died: we could not judge
        raise ScorerFailure(f"the AFlow-style sympy checker could not judge this answer (its child raised or "
                            f"died): {exc}") from exc
    if result is TIMEOUT:
        return False, "timeout"
    ok, stage = result
    return bool(ok), (stage if stage in _RANK else "symbolic")


# ---- the staged comparison ---------------------------------------------------------------------

def _worst(stages: list[str]) -> str:
    return max(stages, key=lambda s: _RANK.get(s, 0)) if stages else "normalized"


def _compare(a: str, b: str, deadline: float, depth: int = 0) -> tuple[bool, str]:
    if a.strip() == b.strip():
        return True, "string"
    if normalize_math(a) == normalize_math(b):
        return True, "normalized"
    fa, fb = _simple_number(_clean(a)), _simple_number(_clean(b))
    if fa is not None and fb is not None:
        return fa == fb or _close(float(fa), float(fb)), "numeric"
    sa, sb = (_structure(a), _structure(b)) if depth < 3 else (None, None)
    if sa or sb:
        if not sa or not sb or len(sa[1]) != len(sb[1]):
            return False, "normalized"
        kinds = {sa[0], sb[0]}
        if len(kinds) > 1 and not kinds <= {"vector", "set"}:
            return False, "normalized"
        if kinds == {"set"}:  # unordered: match each gold element once
            stages, unused = [], list(sb[1])
            for x in sa[1]:
                for y in unused:
                    ok, st = _compare(x, y, deadline, depth + 1)
                    stages.append(st)
                    if ok:
                        unused.remove(y)
                        break
                else:
                    return False, _worst(stages)
            return True, _worst(stages)
        stages = []
        for x, y in zip(sa[1], sb[1]):
            ok, st = _compare(x, y, deadline, depth + 1)
            stages.append(st)
            if not ok:
                return False, _worst(stages)
        return True, _worst(stages)
    left = deadline - time.monotonic()
    if left <= 0:
        return False, "timeout"
    return _in_child(_sympy_compare, (_clean(a), _clean(b)), left)


def is_equiv(pred: str | None, gold: str, timeout_s: float = 5.0, on_timeout: str = "error") -> tuple[bool, str]:
    """Whether ``pred`` and ``gold`` denote the same MATH answer, and which stage decided.

    ``timeout_s`` bounds the total sympy time of this call (all elements of a tuple together). A proven
    equivalence stands even if some element comparison ran out of time; a "not equivalent" that a timeout
    left undecided raises :class:`ScorerFailure` unless ``on_timeout="wrong"``.
    """
    if on_timeout not in ("error", "wrong"):
        raise ValueError(f"benchmark.checker_timeout={on_timeout!r}: choose one of ['error', 'wrong']")
    if pred is None or gold is None:
        return False, "none"
    deadline = time.monotonic() + timeout_s
    try:
        ok, stage = _compare(str(pred), str(gold), deadline)
    except RecursionError:  # nesting deeper than Python's stack: malformed model output, not equivalent
        return False, "normalized"
    if stage == "timeout" and not ok and on_timeout == "error":
        raise ScorerFailure(f"the AFlow-style sympy checker did not decide within benchmark.symbolic_timeout_s="
                            f"{timeout_s:g}s (its child was killed); raise the limit, or set "
                            "benchmark.checker_timeout=wrong to count a timeout as a wrong answer")
    return ok, stage
