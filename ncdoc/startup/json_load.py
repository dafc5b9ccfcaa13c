"""JSON text to Python values, without importing the `json` package on the fast paths, bounded for
files from anyone.

`import json` loads json.decoder, which imports `re` (with enum and the regex compiler):
about a tenth of the start-up budget of `ncdoc check`, which reads a snapshot, the compiled
rules and the NCCL variable table. The parsing itself is CPython's C scanner (_json), the
one json.loads uses, driven with json.loads' settings; only the whitespace around the document
is handled here. Whenever the C scanner is unavailable or the text is not one clean JSON
document, json.loads parses it instead, so syntax errors (json.JSONDecodeError, with its
message, line and column) are exactly json's.

What json.loads would accept but no ncdoc file holds is refused, always as a ValueError with a
one-line message (what callers of json.loads already handle): NaN and Infinity, numbers that
overflow to infinity (1e999), integers of more than 4,300 digits (json.loads' own ValueError,
worded here), nesting beyond what the parser can recurse into (a RecursionError otherwise).
`load_data` adds a depth limit (MAX_DEPTH) and bounds integers to 64 bits, for the readers that
walk what they get without a schema (policies, configs, cluster files, nccl-tests -J, RAS -f json,
launch env); snapshots are bounded by their typed loading (ncdoc/startup/typed_json.py).
"""

from __future__ import annotations

_WHITESPACE = " \t\n\r"          # JSON's whitespace (json.decoder.WHITESPACE)
MAX_DEPTH = 64                   # nested objects and arrays, for load_data
MAX_INT = 1 << 64                # |integer| below this, for load_data


class JsonRefused(ValueError):
    """A document json.loads would take that ncdoc does not (see the module's note). `msg`, `lineno`
    and `colno` as json.JSONDecodeError has them, for callers that quote those."""

    def __init__(self, msg: str, lineno: int | None = None):
        super().__init__(msg)
        self.msg = msg
        self.lineno = lineno if lineno is not None else "?"
        self.colno = "?"


def _finite(text: str) -> float:
    value = float(text)
    if value - value != 0:
        raise JsonRefused(f"number {text[:40]} is out of range")
    return value


def _constant(name: str) -> float:
    raise JsonRefused(f"{name} is not a number JSON allows here")


class _Context:
    """The attributes _json.make_scanner reads from a json.JSONDecoder, at its defaults but for floats."""
    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = staticmethod(_finite)
    parse_int = int
    parse_constant = staticmethod(_constant)
    memo: dict = {}              # read by CPython < 3.12's pure-Python fallback only


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


def _refused(exc: BaseException) -> JsonRefused:
    if isinstance(exc, JsonRefused):
        return exc
    if isinstance(exc, RecursionError):
        return JsonRefused("nested too deeply")
    text = str(exc)
    if "digits" in text:         # int(): Exceeds the limit (4300 digits) for integer string conversion
        return JsonRefused("an integer has more than 4300 digits")
    return JsonRefused(text.splitlines()[0][:200] if text else type(exc).__name__)


def loads(text: str):
    """json.loads(text), for a str, with the refusals of the module's note."""
    scan = _scanner() if type(text) is str else None
    if scan:
        start = len(text) - len(text.lstrip(_WHITESPACE))
        try:
            value, end = scan(text, start)
        except (JsonRefused, RecursionError) as exc:
            raise _refused(exc) from None
        except Exception:        # malformed: json.loads says what json says
            pass
        else:
            if end == len(text) or not text[end:].strip(_WHITESPACE):
                return value
    import json
    try:
        return json.loads(text, parse_float=_finite, parse_constant=_constant)
    except json.JSONDecodeError:
        raise
    except (ValueError, RecursionError) as exc:
        raise _refused(exc) from None


def bounded(value, what: str = "JSON"):
    """`value` (what loads gave) when it nests at most MAX_DEPTH deep and every integer is below
    2**64 in size; JsonRefused otherwise. One pass, no recursion."""
    stack = [(value, 1)]
    pop, push = stack.pop, stack.append
    while stack:
        item, depth = pop()
        kind = type(item)
        if kind is dict or kind is list:
            if depth > MAX_DEPTH:
                raise JsonRefused(f"{what} nested more than {MAX_DEPTH} levels deep")
            for child in (item.values() if kind is dict else item):
                t = type(child)
                if t is dict or t is list:
                    push((child, depth + 1))
                elif t is int and not -MAX_INT < child < MAX_INT:
                    raise JsonRefused(f"{what} holds an integer of {len(str(child))} digits")
        elif kind is int and not -MAX_INT < item < MAX_INT:
            raise JsonRefused(f"{what} holds an integer of {len(str(item))} digits")
    return value


def load_data(text: str):
    """loads(text), bounded in depth and integer size (see `bounded`): for JSON read without a schema."""
    return bounded(loads(text))


def load_file(path: str):
    """json.load of a UTF-8 file."""
    with open(path, encoding="utf-8") as fh:
        return loads(fh.read())


__all__ = ["loads", "load_data", "bounded", "load_file", "JsonRefused", "MAX_DEPTH"]
