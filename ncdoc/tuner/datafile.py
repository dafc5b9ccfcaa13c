"""Strict YAML for the tuner's data files (search spaces, profiles, knowledge).

Every mapping remembers its line and the line of each key, so a mistake in a file a user
wrote comes back as `file:line: unknown key 'valuez' in variable NCCL_ALGO (allowed: ...)`,
exit 2, never as a traceback or a silently ignored key.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Iterable

from ncdoc.errors import InputError, read_text

_SIZE = re.compile(r"\s*(\d+)\s*([KMGT]?)(i?B)?\s*\Z", re.IGNORECASE)
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


class LinedDict(dict):
    """A YAML mapping with its own line and each key's line (1-based)."""

    line: int | None = None
    key_lines: dict[str, int]


def load(path: str | Path) -> Any:
    return loads(read_text(path, "a YAML data file"), str(path))


def loads(text: str, path: str) -> Any:
    import yaml

    class _Loader(yaml.SafeLoader):
        pass

    def mapping(loader: Any, node: Any, deep: bool = False) -> LinedDict:
        loader.flatten_mapping(node)
        out = LinedDict()
        out.line = node.start_mark.line + 1
        out.key_lines = {}
        for key_node, value_node in node.value:
            key = loader.construct_object(key_node, deep=True)
            line = key_node.start_mark.line + 1
            if not isinstance(key, (str, int)) or isinstance(key, bool):
                raise InputError(f"mapping key must be a name, got {key!r}", path=path, line=line)
            key = str(key)
            if key in out:
                raise InputError(f"duplicate key {key!r}", path=path, line=line)
            out[key] = loader.construct_object(value_node, deep=True)
            out.key_lines[key] = line
        return out

    _Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, mapping)
    try:
        return yaml.load(text, Loader=_Loader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise InputError(f"not valid YAML: {problem}", path=path,
                         line=mark.line + 1 if mark else None) from None


def line_of(obj: Any, key: str | None = None, fallback: int | None = None) -> int | None:
    if isinstance(obj, LinedDict):
        if key is not None and key in obj.key_lines:
            return obj.key_lines[key]
        return obj.line
    return fallback


def check_keys(obj: Any, allowed: Iterable[str], what: str, path: str, line: int | None = None,
               required: Iterable[str] = ()) -> None:
    """Reject a non-mapping, a key outside `allowed` or a missing required key."""
    if not isinstance(obj, dict):
        raise InputError(f"{what} must be a mapping, got {type(obj).__name__}", path=path, line=line)
    allowed = set(allowed)
    for k in obj:
        if k not in allowed:
            raise InputError(f"unknown key {k!r} in {what} (allowed: {', '.join(sorted(allowed))})",
                             path=path, line=line_of(obj, k, line))
    for k in required:
        if k not in obj:
            raise InputError(f"{what} needs key {k!r}", path=path, line=line_of(obj, None, line))


def parse_size(value: Any, *, where: str, path: str, line: int | None) -> int:
    """Bytes from 1048576, "1M", "64K", "2G" (powers of 1024, as nccl-tests -b/-e read them)."""
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    m = _SIZE.match(str(value)) if isinstance(value, str) else None
    if not m or int(m.group(1)) <= 0:
        raise InputError(f"{where}: {value!r} is not a size (bytes, or a number with K/M/G)",
                         path=path, line=line)
    return int(m.group(1)) * _UNITS[m.group(2).upper()]


def format_size(n: int) -> str:
    for unit, mult in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if n >= mult and n % mult == 0:
            return f"{n // mult}{unit}"
    return f"{n}B" if n < 1024 else f"{n}"
