"""YAML read with line numbers, for files people write (rule packs, policy packs, configs, tuner data,
machine specs, fault specs), so an error can name the file, the line and the key. PyYAML is imported only
when such a file is read.

Such files come from anyone, so reading one is bounded before anything is built: a size limit per document;
one pass over the parser's events (no objects made) that refuses aliases (`*name`: nothing ncdoc ships uses
them, and nested aliases expand a few hundred bytes into gigabytes), keys that are not plain values
(`? [a, b]`) and nesting deeper than MAX_DEPTH; then numbers whose text is longer than MAX_NUMBER_CHARS are
refused before conversion (Python's int() stops at 4,300 digits with a ValueError, and base-60 or huge
values cost time) and floats must be finite. Every refusal is an InputError naming the file and line.
"""

from __future__ import annotations

from ncdoc.errors import InputError, shown

TYPE_CHECKING = False      # typing is not imported at run time (start-up cost); type checkers see this
if TYPE_CHECKING:
    from typing import Any

MAX_DEPTH = 64                 # nested mappings and lists in one document
MAX_NUMBER_CHARS = 100         # characters of one number's text
MAX_DOCUMENT_BYTES = 4 << 20   # characters of one YAML file (the largest ncdoc ships is 52 KB)

_INT, _FLOAT = "tag:yaml.org,2002:int", "tag:yaml.org,2002:float"


class LineDict(dict):
    """A mapping from YAML that remembers its own line and each key's line (1-based)."""
    line: int | None = None
    key_lines: dict[str, int]


def _event_loader():
    import yaml
    return getattr(yaml, "CSafeLoader", yaml.SafeLoader)      # the C parser when PyYAML was built with it


def screen(text: str, path: str | None) -> None:
    """Refuse, before anything is built, what would make loading `text` explode: more than
    MAX_DOCUMENT_BYTES, aliases, keys that are collections, nesting deeper than MAX_DEPTH."""
    import yaml
    if len(text) > MAX_DOCUMENT_BYTES:
        raise InputError(f"is larger than {MAX_DOCUMENT_BYTES >> 20} MiB; too large for a YAML file", path=path)
    open_: list[list] = []         # per open collection: [is a mapping, nodes seen in it]
    for event in yaml.parse(text, Loader=_event_loader()):
        kind = type(event)
        if kind in (yaml.MappingEndEvent, yaml.SequenceEndEvent):
            open_.pop()
            continue
        if kind not in (yaml.ScalarEvent, yaml.AliasEvent, yaml.MappingStartEvent, yaml.SequenceStartEvent):
            continue
        line = event.start_mark.line + 1
        if kind is yaml.AliasEvent:
            raise InputError(f"YAML aliases (*{shown(event.anchor, 40)[1:-1]}) are not supported: write the "
                             "value out", path=path, line=line)
        if open_:
            top = open_[-1]
            if top[0] and top[1] % 2 == 0 and kind is not yaml.ScalarEvent:
                raise InputError("a mapping key must be a plain value, not a list or mapping", path=path, line=line)
            top[1] += 1
        if kind in (yaml.MappingStartEvent, yaml.SequenceStartEvent):
            if len(open_) >= MAX_DEPTH:
                raise InputError(f"nested more than {MAX_DEPTH} levels deep", path=path, line=line)
            open_.append([kind is yaml.MappingStartEvent, 0])


def bounded_loader(base, path: str | None):
    """A subclass of the PyYAML loader class `base` whose numbers are bounded (see the module's note)."""

    class _Bounded(base):
        pass

    def number_text(loader, node) -> str:
        value = loader.construct_scalar(node)
        if len(value) > MAX_NUMBER_CHARS:
            raise InputError(f"number {shown(value, 40)} is longer than {MAX_NUMBER_CHARS} characters",
                             path=path, line=node.start_mark.line + 1)
        return value

    def construct_int(loader, node):
        text = number_text(loader, node)
        try:
            return base.yaml_constructors[_INT](loader, node)
        except ValueError:
            raise InputError(f"{shown(text, 40)} is not a number", path=path, line=node.start_mark.line + 1) from None

    def construct_float(loader, node):
        number_text(loader, node)
        value = base.yaml_constructors[_FLOAT](loader, node)
        if value - value != 0:          # inf or nan: no setting or size is that
            raise InputError(f"{shown(node.value, 40)} is not a finite number", path=path,
                             line=node.start_mark.line + 1)
        return value

    _Bounded.add_constructor(_INT, construct_int)
    _Bounded.add_constructor(_FLOAT, construct_float)
    return _Bounded


def _yaml_error(exc, path: str | None) -> InputError:
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or (str(exc).splitlines() or ["?"])[0]
    return InputError(f"not valid YAML: {shown(problem, 200)[1:-1]}", path=path, line=mark.line + 1 if mark else None)


def load_plain(text: str, path: str | None, loader=None) -> Any:
    """YAML to plain Python values (dicts, lists, scalars), screened and bounded; `loader` is the PyYAML
    loader class to build with (default SafeLoader; machine specs bring their own number resolvers)."""
    import yaml
    try:
        screen(text, path)
        return yaml.load(text, Loader=bounded_loader(loader or _event_loader(), path))  # noqa: S506 - safe loaders
    except yaml.YAMLError as exc:
        raise _yaml_error(exc, path) from None


def load_yaml(text: str, path: str, *, name_keys: bool = False) -> Any:
    """Parse YAML keeping line numbers on every mapping; InputError names file and line.

    With `name_keys`, mapping keys must be names (strings or integers) and become strings,
    as the tuner's data files want; otherwise any scalar key is kept as YAML typed it."""
    import yaml  # only for pack sources, never on the compiled fast path

    # the C parser where PyYAML has it (a pure-Python parse of a megabyte of tokens takes seconds);
    # the mappings are built here either way, with their lines
    _Loader = bounded_loader(_event_loader(), path)

    def construct_mapping(loader, node, deep=False):
        loader.flatten_mapping(node)
        out = LineDict()
        out.line = node.start_mark.line + 1
        out.key_lines = {}
        for key_node, value_node in node.value:
            key = loader.construct_object(key_node, deep=True)
            line = key_node.start_mark.line + 1
            if name_keys:
                if not isinstance(key, (str, int)) or isinstance(key, bool):
                    raise InputError(f"mapping key must be a name, got {shown(key)}", path=path, line=line)
                key = str(key)
            elif not isinstance(key, (str, int, float, bool)) or key is None:
                raise InputError(f"mapping key must be a scalar, got {shown(key)}", path=path, line=line)
            if key in out:
                raise InputError(f"duplicate key {shown(key)}", path=path, line=line)
            out[key] = loader.construct_object(value_node, deep=True)
            out.key_lines[str(key)] = line
        return out

    _Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, construct_mapping)
    try:
        screen(text, path)
        return yaml.load(text, Loader=_Loader)  # noqa: S506 - SafeLoader subclass
    except yaml.YAMLError as exc:
        raise _yaml_error(exc, path) from None


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
            raise InputError(f"unknown key {shown(k)} in {what} (allowed: {', '.join(sorted(allowed))})",
                             path=path, line=key_line(obj, str(k)) or line)
    for k in required:
        if k not in obj:
            raise InputError(f"{what} needs key {k!r}", path=path, line=key_line(obj) or line)


__all__ = ["LineDict", "load_yaml", "load_plain", "screen", "bounded_loader", "key_line", "check_keys",
           "MAX_DEPTH", "MAX_NUMBER_CHARS", "MAX_DOCUMENT_BYTES"]
