"""Typed loading: JSON data into the model's frozen records, by the records' own annotations.

Annotations are strings (no `typing` at import time: `ncdoc check` must start fast); this small
reader understands the shapes the model uses: X, X | None, tuple[X, ...], dict[str, X], and the
scalars str, int, float, bool. A converter is built once per type, so loading a big node's
snapshot does not re-dispatch on the type for each of its thousands of values.
"""

from __future__ import annotations

import sys

from ncdoc.startup import record as _record


_TYPES: dict[tuple[str, str], object] = {}


def from_json_data(type_text: str, data, namespace):
    """`data` (what the JSON reader gave) as the record type named `type_text`, whose classes
    live in the module `namespace`. Raises TypeError/KeyError/ValueError naming the problem."""
    return _converter(_parse_type(type_text, namespace))(data)


def _parse_type(text: str, namespace):
    text = text.strip()
    key = (namespace.__name__, text)
    if key in _TYPES:
        return _TYPES[key]
    parts = _split_top(text, "|")
    if len(parts) > 1:
        inner = [p for p in parts if p.strip() != "None"]
        tp = ("optional", _parse_type(" | ".join(inner), namespace))
    elif text.startswith("tuple[") and text.endswith("]"):
        tp = ("tuple", _parse_type(_split_top(text[6:-1], ",")[0], namespace))
    elif text.startswith("dict[") and text.endswith("]"):
        tp = ("dict", _parse_type(_split_top(text[5:-1], ",")[1], namespace))
    elif text in ("str", "int", "float", "bool"):
        tp = ("scalar", text)
    else:
        cls = getattr(namespace, text, None)
        if cls is None or not _record.is_record(cls):
            raise TypeError(f"{namespace.__name__} names unknown type {text!r}")
        tp = ("record", cls)
    _TYPES[key] = tp
    return tp


def _split_top(text: str, sep: str) -> list[str]:
    if "[" not in text:            # most annotations: no nesting to keep whole
        return [p.strip() for p in text.split(sep)]
    # split at every `sep`, then join back the pieces a bracket left open (its `sep` is inside it)
    out, depth, cur = [], 0, None
    for piece in text.split(sep):
        cur = piece if cur is None else cur + sep + piece
        depth += piece.count("[") - piece.count("]")
        if depth == 0:
            out.append(cur.strip())
            cur = None
    if cur is not None:
        out.append(cur.strip())
    return out


_CONVERTERS: dict = {}


def _converter(tp):
    """A function turning JSON data into the model type `tp`, built once per type: loading
    a big node's snapshot should not re-dispatch on the type for each of thousands of values."""
    conv = _CONVERTERS.get(tp)
    if conv is None:
        conv = _CONVERTERS[tp] = _build_converter(tp)
    return conv


def _build_converter(tp):
    kind, arg = tp
    if kind == "optional":
        inner = _converter(arg)
        return lambda data: None if data is None else inner(data)
    if kind == "record":
        cls = arg
        fields = {f.name: f for f in _record.fields(cls)}
        # field -> (exact type a value may pass through unchecked, None allowed too, converter);
        # most of a snapshot's thousands of values are plain strings and numbers, so they skip
        # the converter call, which is only made to convert or to raise the precise error.
        convs: dict = {}
        build = _record.build
        # a snapshot ncdoc wrote has every field: its records are filled in place, without the
        # defaults and the generic build (a big node's snapshot has hundreds of records)
        whole = len(fields) if not cls.__record_post__ else -1
        new = object.__new__

        def record(data):
            if type(data) is not dict:
                raise TypeError(f"{cls.__name__}: expected an object, got {type(data).__name__}")
            obj = new(cls) if len(data) == whole else None
            kw = obj.__dict__ if obj is not None else {}
            kw.update(data)         # copied whole (one C-level copy); only the values to convert are set again
            for k, v in data.items():
                spec = convs.get(k)
                if spec is None:
                    if k not in fields:
                        raise KeyError(f"{cls.__name__}: unknown field(s) {_shown(sorted(set(data) - set(fields)))}")
                    spec = convs[k] = _spec_of(fields[k].type, cls.__module__)
                plain, optional, c = spec
                if (type(v) is plain and (plain is not int or -_MAX_INT < v < _MAX_INT)) or (v is None and optional):
                    continue
                kw[k] = c(v)
            return obj if obj is not None else build(cls, kw)
        return record
    # lists and objects of plain values (addresses, netdev names, error counters) are checked by type in
    # one pass and copied, without a call per value; anything else goes value by value (raising the error)
    plain = _PLAIN.get(arg[1]) if arg[0] == "scalar" else None
    if kind == "tuple":
        item = _converter(arg)

        def tuple_of(data):
            if type(data) is not list:
                raise TypeError(f"expected a list, got {type(data).__name__}")
            if plain is not None and _all_plain(data, plain):
                return tuple(data)
            return tuple(map(item, data))
        return tuple_of
    if kind == "dict":
        value = _converter(arg)

        def dict_of(data):
            if type(data) is not dict:
                raise TypeError(f"expected an object, got {type(data).__name__}")
            if plain is not None and _all_plain(data.values(), plain):
                return dict(data)            # JSON's keys are strings already
            return {str(k): value(v) for k, v in data.items()}
        return dict_of
    return _SCALARS[arg]


_PLAIN = {"str": str, "int": int, "bool": bool}   # scalars JSON gives as they are (float may need int -> float)


_SPECS: dict = {}       # (module, annotation) -> field spec: "str | None" is the type of a hundred fields


def _spec_of(type_text: str, module: str):
    key = (module, type_text)
    spec = _SPECS.get(key)
    if spec is None:
        spec = _SPECS[key] = _field_spec(_parse_type(type_text, sys.modules[module]))
    return spec


def _field_spec(tp):
    """(type passed through as is, whether None is, the converter) for a record field of type `tp`.
    None never reaches the converter of an optional field (it passes as is), so that converter is the
    inner type's: one call less per value."""
    optional = tp[0] == "optional"
    inner = tp[1] if optional else tp
    plain = _PLAIN.get(inner[1]) if inner[0] == "scalar" else None
    return plain, optional, _converter(inner)


def _all_plain(values, plain) -> bool:
    """Whether every one of `values` is exactly of type `plain` (integers also below 2**64 in size)."""
    kinds = set(map(type, values))
    if not kinds:
        return True
    if kinds != {plain}:
        return False
    return plain is not int or (-_MAX_INT < min(values) and max(values) < _MAX_INT)


_MAX_INT = 1 << 64     # no count, size or id in a record is larger; a bigger one is malformed input


def _shown(data) -> str:
    from ncdoc.errors import shown     # a bad value is quoted, never at length
    return shown(data)


def _scalar(name, ok):
    def check(data):
        if ok(data):
            return data
        raise TypeError(f"expected {name}, got {_shown(data)}")
    return check


def _to_float(data):
    if type(data) is float and data - data == 0:
        return data
    if type(data) is int and -_MAX_INT < data < _MAX_INT:
        return float(data)
    raise TypeError(f"expected a finite number, got {_shown(data)}")


_SCALARS = {
    "str": _scalar("a string", lambda d: type(d) is str),
    "int": _scalar("an integer below 2**64", lambda d: type(d) is int and -_MAX_INT < d < _MAX_INT),
    "bool": _scalar("true/false", lambda d: type(d) is bool),
    "float": _to_float,
}
