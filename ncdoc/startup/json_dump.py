"""`json.dumps(value, indent=2, default=str)`, the same text, without the json package.

With an indent, json.dumps encodes in pure Python (its C encoder only writes compact text), one
generator per dict and list; `import json` also loads the decoder and compiles its patterns. A
triage's --json report of a 64-rank log is some 7,000 values: that encoding was a tenth of the
run. Here one recursive function appends to one list, the strings escaped by the C function json
uses (_json.encode_basestring_ascii); the output is json.dumps' to the byte (tests/startup compares
them), with its rules: keys may be str, int, float, bool or None, tuples are lists, floats are
repr'd (NaN and Infinity as json writes them), and anything else is given to `default` and its
result encoded. A key of another type raises TypeError, as json.dumps does.
"""

from __future__ import annotations

try:
    from _json import encode_basestring_ascii as _escape
except ImportError:                       # a Python without the C accelerator: json's own
    from json.encoder import py_encode_basestring_ascii as _escape

_INF = float("inf")


def _float(o: float) -> str:
    if o != o:
        return "NaN"
    if o == _INF:
        return "Infinity"
    if o == -_INF:
        return "-Infinity"
    return float.__repr__(o)


def _key(k) -> str:
    if isinstance(k, str):
        return k
    if isinstance(k, float):
        return _float(k)
    if k is True:
        return "true"
    if k is False:
        return "false"
    if k is None:
        return "null"
    if isinstance(k, int):
        return int.__repr__(k)
    raise TypeError(f"keys must be str, int, float, bool or None, not {k.__class__.__name__}")


def dumps_indented(value, indent: int = 2, default=str) -> str:
    """json.dumps(value, indent=indent, default=default)."""
    out: list[str] = []
    put = out.append
    pads = ["\n"]

    def pad(level: int) -> str:
        while len(pads) <= level:
            pads.append("\n" + " " * (indent * len(pads)))
        return pads[level]

    def enc(o, level: int) -> None:
        if isinstance(o, str):
            put(_escape(o))
        elif o is None:
            put("null")
        elif o is True:
            put("true")
        elif o is False:
            put("false")
        elif isinstance(o, int):
            put(int.__repr__(o))
        elif isinstance(o, float):
            put(_float(o))
        elif isinstance(o, (list, tuple)):
            if not o:
                put("[]")
                return
            inner = pad(level + 1)
            put("[")
            first = True
            for v in o:
                put(inner if first else "," + inner)
                first = False
                enc(v, level + 1)
            put(pad(level))
            put("]")
        elif isinstance(o, dict):
            if not o:
                put("{}")
                return
            inner = pad(level + 1)
            put("{")
            first = True
            for k, v in o.items():
                put(inner if first else "," + inner)
                first = False
                put(_escape(_key(k)))
                put(": ")
                enc(v, level + 1)
            put(pad(level))
            put("}")
        else:
            enc(default(o), level)

    enc(value, 0)
    return "".join(out)


__all__ = ["dumps_indented"]
