"""YAML read with line numbers, for files people write (rule packs, policy packs, configs), so an
error can name the file, the line and the key. PyYAML is imported only when such a file is read."""

from __future__ import annotations

from ncdoc.errors import InputError

TYPE_CHECKING = False      # typing is not imported at run time (start-up cost); type checkers see this
if TYPE_CHECKING:
    from typing import Any


class LineDict(dict):
    """A mapping from YAML that remembers its own line and each key's line (1-based)."""
    line: int | None = None
    key_lines: dict[str, int]


def load_yaml(text: str, path: str, *, name_keys: bool = False) -> Any:
    """Parse YAML keeping line numbers on every mapping; InputError names file and line.

    With `name_keys`, mapping keys must be names (strings or integers) and become strings,
    as the tuner's data files want; otherwise any scalar key is kept as YAML typed it."""
    import yaml  # only for pack sources, never on the compiled fast path

    class _Loader(yaml.SafeLoader):
        pass

    def construct_mapping(loader, node, deep=False):
        loader.flatten_mapping(node)
        out = LineDict()
        out.line = node.start_mark.line + 1
        out.key_lines = {}
        for key_node, value_node in node.value:
            key = loader.construct_object(key_node, deep=True)
            if name_keys:
                if not isinstance(key, (str, int)) or isinstance(key, bool):
                    raise InputError(f"mapping key must be a name, got {key!r}", path=path,
                                     line=key_node.start_mark.line + 1)
                key = str(key)
            elif not isinstance(key, (str, int, float, bool)) or key is None:
                raise InputError(f"mapping key must be a scalar, got {key!r}", path=path,
                                 line=key_node.start_mark.line + 1)
            if key in out:
                raise InputError(f"duplicate key {key!r}", path=path, line=key_node.start_mark.line + 1)
            out[key] = loader.construct_object(value_node, deep=True)
            out.key_lines[str(key)] = key_node.start_mark.line + 1
        return out

    _Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, construct_mapping)
    try:
        return yaml.load(text, Loader=_Loader)  # noqa: S506 - SafeLoader subclass
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise InputError(f"not valid YAML: {problem}", path=path,
                         line=mark.line + 1 if mark else None) from None


def key_line(obj: Any, key: str | None = None) -> int | None:
    if isinstance(obj, LineDict):
        if key is not None and key in obj.key_lines:
            return obj.key_lines[key]
        return obj.line
    return None


def check_keys(obj, allowed, what: str, path: str | None, line: int | None = None, required=()) -> None:
    """Reject a non-mapping, any key outside `allowed` or a missing `required` key, naming file, line
    and key (the one check of a mapping's keys: packs, policies, configs, tuner data, machine specs)."""
    if not isinstance(obj, dict):
        raise InputError(f"{what} must be a mapping, got {type(obj).__name__}", path=path, line=line)
    allowed = set(allowed)
    for k in obj:
        if k not in allowed:
            raise InputError(f"unknown key {k!r} in {what} (allowed: {', '.join(sorted(allowed))})",
                             path=path, line=key_line(obj, str(k)) or line)
    for k in required:
        if k not in obj:
            raise InputError(f"{what} needs key {k!r}", path=path, line=key_line(obj) or line)


__all__ = ["LineDict", "load_yaml", "key_line", "check_keys"]
