"""JSON text to Python values, without importing the `json` package on the fast paths.

`import json` loads json.decoder, which imports `re` (with enum and the regex compiler):
about a tenth of the start-up budget of `ncdoc check`, which reads a snapshot, the compiled
rules and the NCCL variable table. The parsing itself is CPython's C scanner (_json), the
one json.loads uses, driven with the same settings as json.loads' default decoder; only the
whitespace around the document is handled here. Whenever the C scanner is unavailable or
the text is not one clean JSON document, json.loads parses it instead, so errors
(json.JSONDecodeError, with its message, line and column) are exactly json's.
"""

from __future__ import annotations

_WHITESPACE = " \t\n\r"          # JSON's whitespace (json.decoder.WHITESPACE)


class _Context:
    """The attributes _json.make_scanner reads from a json.JSONDecoder, at its defaults."""
    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    memo: dict = {}              # read by CPython < 3.12's pure-Python fallback only

    @staticmethod
    def parse_constant(name: str) -> float:
        return {"-Infinity": float("-inf"), "Infinity": float("inf"), "NaN": float("nan")}[name]


_scan = None


def _scanner():
    global _scan
    if _scan is None:
        try:
            from _json import make_scanner
            _scan = make_scanner(_Context())
        except (ImportError, TypeError, AttributeError):
            _scan = False
    return _scan


def loads(text: str):
    """json.loads(text), for a str."""
    scan = _scanner() if type(text) is str else None
    if scan:
        start = len(text) - len(text.lstrip(_WHITESPACE))
        try:
            value, end = scan(text, start)
        except Exception:        # malformed (or a RecursionError): json.loads says what json says
            pass
        else:
            if end == len(text) or not text[end:].strip(_WHITESPACE):
                return value
    import json
    return json.loads(text)


def load_file(path: str):
    """json.load of a UTF-8 file."""
    with open(path, encoding="utf-8") as fh:
        return loads(fh.read())


__all__ = ["loads", "load_file"]
