"""What ncdoc knows about the variables it tunes (tuners/knowledge.yaml): plain-language notes for
EXPLAIN.md and NCCL's value when a variable is unset, per release."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from ncdoc.errors import InputError
from ncdoc.nccl.parse import strtoll, version_cmp
from ncdoc.tuner import datafile

_KEYS = ("what", "default", "helps", "nccl_default")
_DEFAULT_KEYS = ("value", "min_nccl", "max_nccl")


@dataclass(frozen=True)
class Knowledge:
    notes: dict[str, dict[str, str]]                                      # name -> what / default / helps
    defaults: dict[str, tuple[tuple[str, str | None, str | None], ...]]   # name -> (value, min, max)...

    def nccl_default(self, name: str, version: str | None) -> str | None:
        """NCCL's value of `name` when unset, in `version` (None: unknown or not a plain value)."""
        for value, lo, hi in self.defaults.get(name, ()):
            if version is None:
                if hi is None:
                    return value
                continue
            if (lo is None or version_cmp(version, lo) >= 0) and (hi is None or version_cmp(version, hi) <= 0):
                return value
        return None

    def is_default(self, name: str, value: str, version: str | None) -> bool:
        default = self.nccl_default(name, version)
        if default is None:
            return False
        if value == default:
            return True
        a, b = strtoll(value), strtoll(default)          # "0x400000" is 4194304, as NCCL reads it
        return a.value is not None and a.value == b.value and a.kind == b.kind == "ok"


def _defaults(raw: Any, name: str, path: str, line: int | None) -> tuple[tuple[str, str | None, str | None], ...]:
    if raw is None:
        return ()
    if isinstance(raw, (str, int)) and not isinstance(raw, bool):
        return ((str(raw), None, None),)
    if not isinstance(raw, list):
        raise InputError(f"nccl_default of {name} must be a value or a list of {{value, min_nccl, max_nccl}}",
                         path=path, line=line)
    out = []
    for item in raw:
        datafile.check_keys(item, _DEFAULT_KEYS, f"a default of {name}", path, datafile.line_of(item, None, line),
                            required=("value",))
        out.append((str(item["value"]), item.get("min_nccl"), item.get("max_nccl")))
    return tuple(out)


@lru_cache(maxsize=1)
def load_knowledge() -> Knowledge:
    from ncdoc.resources import data_dir

    path = str(data_dir("tuners") / "knowledge.yaml")
    data = datafile.load(path)
    datafile.check_keys(data, ("schema_version", "variables"), "knowledge file", path, 1)
    notes, defaults = {}, {}
    for name, entry in (data.get("variables") or {}).items():
        line = datafile.line_of(data["variables"], name)
        datafile.check_keys(entry, _KEYS, f"knowledge of {name}", path, line)
        notes[name] = {k: str(v) for k, v in entry.items() if k != "nccl_default"}
        defaults[name] = _defaults(entry.get("nccl_default"), name, path, datafile.line_of(entry, "nccl_default", line))
    return Knowledge(notes, defaults)
