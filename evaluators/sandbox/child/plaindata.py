"""Plain data across the socket between the two processes: JSON of exact builtin types (None,
bool, int, float, complex, str, bytes, list, tuple, dict, set, range, builtin types) and opaque
handles for everything else. Used on both sides; the trusted side rebuilds exact types."""
# Part of the runner program (see evaluators/sandbox/child/__init__.py). Never imported by the harness:
# its text runs in the sandbox's own `python -I -S -B -u -c`, concatenated with its siblings (one namespace).

import builtins as _b
BUILTIN_TYPES = {n: c for n, c in vars(_b).items() if isinstance(c, type) and c.__module__ == "builtins"}
del _b


def _plain(x, depth, conv, enc_handle):
    """Shared plain-data encoder; `conv` turns non-plain values into plain ones or None."""
    if depth > 400:
        raise ValueError("data nested too deeply")
    t = type(x)
    if x is None or t is bool or t is str or t is float:
        return x
    if t is int:
        return x if -(1 << 62) < x < (1 << 62) else {"I": hex(x)}
    d = depth + 1
    if t is list:
        return [_plain(i, d, conv, enc_handle) for i in x]
    if t is tuple:
        return {"T": [_plain(i, d, conv, enc_handle) for i in x]}
    if t is dict:
        return {"D": [[_plain(k, d, conv, enc_handle), _plain(v, d, conv, enc_handle)] for k, v in x.items()]}
    if t is set:
        return {"S": [_plain(i, d, conv, enc_handle) for i in x]}
    if t is frozenset:
        return {"F": [_plain(i, d, conv, enc_handle) for i in x]}
    if t is bytes:
        return {"B": x.hex()}
    if t is bytearray:
        return {"A": x.hex()}
    if t is complex:
        return {"C": [x.real, x.imag]}
    if t is range:
        return {"R": [x.start, x.stop, x.step]}
    if t is type and x.__module__ == "builtins" and BUILTIN_TYPES.get(x.__name__) is x:
        return {"Y": x.__name__}
    y = conv(x)
    if y is not None:
        return _plain(y, d, conv, enc_handle)
    return enc_handle(x)


def _build(v, depth, handle):
    """Shared decoder: JSON value -> exact builtin types; `handle(ref)` for {"H": ref}."""
    if depth > 400:
        raise ValueError("data nested too deeply")
    t = type(v)
    if v is None or t is bool or t is int or t is float or t is str:
        return v
    d = depth + 1
    if t is list:
        return [_build(i, d, handle) for i in v]
    if t is dict and len(v) == 1:
        (k, a), = v.items()
        if k == "T" and type(a) is list:
            return tuple(_build(i, d, handle) for i in a)
        if k == "D" and type(a) is list:
            out = {}
            for p in a:
                if type(p) is not list or len(p) != 2:
                    raise ValueError("bad dict item")
                out[_build(p[0], d, handle)] = _build(p[1], d, handle)
            return out
        if k == "S" and type(a) is list:
            return {_build(i, d, handle) for i in a}
        if k == "F" and type(a) is list:
            return frozenset(_build(i, d, handle) for i in a)
        if k == "B" and type(a) is str:
            return bytes.fromhex(a)
        if k == "A" and type(a) is str:
            return bytearray.fromhex(a)
        if k == "I" and type(a) is str:
            return int(a, 16)
        if k == "C" and type(a) is list and len(a) == 2 and all(type(z) in (int, float) for z in a):
            return complex(a[0], a[1])
        if k == "R" and type(a) is list and len(a) == 3 and all(type(z) is int for z in a):
            return range(a[0], a[1], a[2])
        if k == "H" and type(a) is int:
            return handle(a)
        if k == "Y" and type(a) is str and a in BUILTIN_TYPES:
            return BUILTIN_TYPES[a]
    raise ValueError("not plain data")
