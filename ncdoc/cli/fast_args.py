"""Parse a plain command line of one command without argparse.

`ncdoc check` runs in every job script; argparse (with the `re`, `gettext` and `locale`
imports it brings) costs a fifth of its start-up budget, and building the parser and importing
argparse was a sixth of a short `ncdoc triage`. The options are not declared twice:
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
_KNOWN_KEYWORDS = frozenset(("action", "default", "choices", "metavar", "help", "dest", "type", "nargs"))
_ACTIONS = (None, "store", "append", "store_true", "store_false")
_TYPES = (None, int, float)          # type= conversions made here (argparse words the error when one fails)
_POSITIONAL_NARGS = ("*", "+")       # one positional list per command (triage's evidence files)


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
    """An option (flags, dest, action ...), or the positional list (flags None, action its nargs)."""
    __slots__ = ("flags", "dest", "action", "default", "choices", "group", "type")

    def __init__(self, flags, dest, action, default, choices, group, type_=None):
        self.flags, self.dest, self.action = flags, dest, action
        self.default, self.choices, self.group, self.type = default, choices, group, type_


class _Recorder:
    """Stands in for an argparse parser while a command's add_arguments() runs."""

    def __init__(self, options: list, defaults: dict, group: object = None):
        self._options, self._defaults, self._group = options, defaults, group

    def add_argument(self, *flags: str, **kw) -> None:
        if not flags or set(kw) - _KNOWN_KEYWORDS or kw.get("type") not in _TYPES:
            raise _Unsupported(flags)        # required=, const=, type=str.upper, ...
        if len(flags) == 1 and not flags[0].startswith("-"):
            if kw.get("nargs") not in _POSITIONAL_NARGS or set(kw) - {"nargs", "metavar", "help"} \
                    or any(o.flags is None for o in self._options):
                raise _Unsupported(flags)    # one positional list, nothing else about it
            self._options.append(_Option(None, flags[0], kw["nargs"], [], None, None, None))
            return
        if not all(f.startswith("-") and f != "-" for f in flags) or "nargs" in kw:
            raise _Unsupported(flags)
        if kw.get("type") is not None and (isinstance(kw.get("default"), str) or "choices" in kw):
            raise _Unsupported(flags)        # argparse converts a str default, and converts before choices
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
        self._options.append(_Option(flags, dest, action or "store", default, kw.get("choices"), self._group,
                                     kw.get("type")))

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
            by_flag = {f: o for o in options if o.flags for f in o.flags}
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
    listed = next((o for o in options if o.flags is None), None)      # the positional list, if any
    if listed is not None:
        values[listed.dest] = []
    run = 0          # positionals: 0 none yet, 1 in their run, 2 after it (argparse takes one run of them)
    groups: dict = {}
    i = 0
    while i < len(argv):
        arg = argv[i]
        i += 1
        if listed is not None and arg[:1] != "-" and arg:
            if run == 2:
                return None                  # a second run of positionals: "unrecognized arguments"
            if run == 0:
                run, values[listed.dest] = 1, []
            values[listed.dest].append(arg)
            continue
        if run == 1:
            run = 2
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
        if opt.type is not None:
            try:
                value = opt.type(value)
            except ValueError:
                return None                  # "invalid int value"
        if opt.action == "append":
            values[opt.dest] = list(values[opt.dest] or ()) + [value]
        else:
            values[opt.dest] = value
    if listed is not None and listed.action == "+" and not values[listed.dest]:
        return None                          # "the following arguments are required"
    return Namespace(command=mod.NAME, **{**defaults, **values, "_run": mod.run})


__all__ = ["Namespace", "parse"]
