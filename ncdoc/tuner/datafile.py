"""Strict YAML for the tuner's data files (search spaces, profiles, knowledge).

Every mapping remembers its line and the line of each key, so a mistake in a file a user
wrote comes back as `file:line: unknown key 'valuez' in variable NCCL_ALGO (allowed: ...)`,
exit 2, never as a traceback or a silently ignored key.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ncdoc.errors import InputError
from ncdoc.readers.textfile import read_user_text
# check_keys is the package's one check of a mapping's keys; the tuner's data files use it from here
from ncdoc.readers.yaml_lines import LineDict, check_keys, load_yaml  # noqa: F401
from ncdoc.startup.compiled_patterns import precompiled

_SIZE = precompiled(r"\s*(\d{1,20}(?!\d))\s*([KMGT]?)(i?B)?\s*\Z", re.IGNORECASE)
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def load(path: str | Path) -> Any:
    return loads(read_user_text(path, "a YAML data file"), str(path))


def loads(text: str, path: str) -> Any:
    # The same line-numbered YAML reader as rule and policy packs (ncdoc/readers/yaml_lines.py).
    return load_yaml(text, path, name_keys=True)


def line_of(obj: Any, key: str | None = None, fallback: int | None = None) -> int | None:
    if isinstance(obj, LineDict):
        if key is not None and key in obj.key_lines:
            return obj.key_lines[key]
        return obj.line
    return fallback


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
