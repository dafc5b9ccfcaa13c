"""Parse a plain command line of one command without argparse.

`ncdoc check` runs in every job script; argparse (with the `re`, `gettext` and `locale`
imports it brings) costs a fifth of its start-up budget. The options are not declared twice:
the command's own add_arguments() runs against a recorder that keeps each add_argument()
call as data, and the parse below follows argparse's rules for the kinds of options it
understands. Anything else (an option it does not know, an abbreviation, -h, a value that
starts with '-', a bad choice, a conflict in a mutually exclusive group, an option kind it
does not handle) returns None, and the caller hands the whole command line to argparse,
so help texts and error messages stay argparse's own.
"""

from __future__ import annotations

import sys

# The add_argument() keywords this parser understands; any other makes it give up on the command.
_KNOWN_KEYWORDS = frozenset(("action", "default", "choices", "metavar", "help", "dest"))
_ACTIONS = (None, "store", "append", "store_true", "store_false")


class Namespace:
    """What argparse.Namespace is for a command's run(args): attributes, equality, repr."""

    def __init__(self, **kwargs):
        self.__dict__.update(kwargs)

    def __eq__(self, other):
        if not hasattr(other, "__dict__"):
            return NotImplemented
        return vars(self) == vars(other)

    def __contains__(self, key: str) -> bool:
        return key in self.__dict__

    def __repr__(self) -> str:
        inner = ", ".join(f"{k}={v!r}" for k, v in self.__dict__.items())
        return f"Namespace({inner})"


class _Unsupported(Exception):
    """The command declares something this parser does not handle: use argparse."""


class _Option:
    __slots__ = ("flags", "dest", "action", "default", "choices", "group")

    def __init__(self, flags, dest, action, default, choices, group):
        self.flags, self.dest, self.action = flags, dest, action
        self.default, self.choices, self.group = default, choices, group


class _Recorder:
    """Stands in for an argparse parser while a command's add_arguments() runs."""

    def __init__(self, options: list, defaults: dict, group: object = None):
        self._options, self._defaults, self._group = options, defaults, group

    def add_argument(self, *flags: str, **kw) -> None:
        if not flags or not all(f.startswith("-") and f != "-" for f in flags) or set(kw) - _KNOWN_KEYWORDS:
            raise _Unsupported(flags)        # positionals, type=, nargs=, required=, ...
        action = kw.get("action")
        if action not in _ACTIONS:
            raise _Unsupported(action)
        dest = kw.get("dest")
        if dest is None:                     # argparse's rule: the first long flag, else the first flag
            first = next((f for f in flags if f.startswith("--")), flags[0])
            dest = first.lstrip("-").replace("-", "_")
        if action == "store_true":
            default = kw.get("default", False)
        elif action == "store_false":
            default = kw.get("default", True)
        else:
            default = kw.get("default")
        self._options.append(_Option(flags, dest, action or "store", default, kw.get("choices"), self._group))

    def add_mutually_exclusive_group(self, *, required: bool = False) -> "_Recorder":
        if required:
            raise _Unsupported("required group")
        return _Recorder(self._options, self._defaults, object())

    def add_argument_group(self, *args, **kwargs) -> "_Recorder":
        return _Recorder(self._options, self._defaults, self._group)   # groups only shape --help

    def set_defaults(self, **kwargs) -> None:
        self._defaults.update(kwargs)


_SPECS: dict = {}


def _spec(command: str):
    """(module, {flag: option}, options, defaults) for `command`, or None when it declares
    something this parser does not handle."""
    if command not in _SPECS:
        name = f"ncdoc.cli.commands.{command}"
        __import__(name)
        mod = sys.modules[name]
        options: list = []
        defaults: dict = {}
        try:
            mod.add_arguments(_Recorder(options, defaults))
        except (_Unsupported, AttributeError, TypeError):
            _SPECS[command] = None
        else:
            by_flag = {f: o for o in options for f in o.flags}
            _SPECS[command] = (mod, by_flag, options, defaults)
    return _SPECS[command]


def parse(command: str, argv: list[str]) -> Namespace | None:
    """The Namespace argparse would give for `ncdoc COMMAND ARGV...`, or None: let argparse parse it."""
    spec = _spec(command)
    if spec is None:
        return None
    mod, by_flag, options, defaults = spec
    # argparse: parser defaults (set_defaults) win over the options' own
    values = {o.dest: defaults.get(o.dest, o.default) for o in options}
    groups: dict = {}
    i = 0
    while i < len(argv):
        arg = argv[i]
        i += 1
        flag, eq, explicit = arg.partition("=") if arg.startswith("--") else (arg, "", "")
        opt = by_flag.get(flag)
        if opt is None:
            return None                      # positional, unknown, abbreviated, -h, --, -qq ...
        if opt.group is not None and groups.setdefault(opt.group, opt) is not opt:
            return None                      # "not allowed with argument ...": argparse says it
        if opt.action in ("store_true", "store_false"):
            if eq:
                return None                  # "ignored explicit argument"
            values[opt.dest] = opt.action == "store_true"
            continue
        if eq:
            value = explicit
        elif i < len(argv) and not argv[i].startswith("-"):
            value = argv[i]
            i += 1
        else:
            return None                      # "expected one argument" (or a negative number: argparse decides)
        if opt.choices is not None and value not in opt.choices:
            return None                      # "invalid choice"
        if opt.action == "append":
            values[opt.dest] = list(values[opt.dest] or ()) + [value]
        else:
            values[opt.dest] = value
    return Namespace(command=mod.NAME, **{**defaults, **values, "_run": mod.run})


__all__ = ["Namespace", "parse"]
