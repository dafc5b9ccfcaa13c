"""Site policy packs and the ncdoc config file: what a cluster operator writes without Python.

A policy pack (YAML or JSON; rules/policies/ has two examples):

    policy: ib-h100-cluster                 # kebab-case name
    description: ...                        # optional
    hosts: ["gpu-ib-*"]                     # optional: hostname globs the whole pack applies to
    when: {nccl: ">=2.21"}                  # optional: pack-wide version condition
    variables:
      - var: NCCL_IB_HCA
        level: enforced                     # enforced | recommended | forbidden
        value: "=mlx5_0,mlx5_3"             # at most one of: value, one_of, regex, range [min, max]
        severity: error                     # optional (default: enforced error, recommended warning,
                                            #           forbidden error)
        reason: "storage NICs must not carry NCCL traffic"
        hosts: ["gpu-ib-0*"]                # optional, per entry
        when: {nccl: ">=2.21,<2.24", driver: ">=535", plugin: "ofi>=1.9"}   # optional

enforced/recommended: the variable must be set (and satisfy the constraint when there is one);
forbidden: the variable must not be set (or, with a constraint, must not satisfy it).

The config file (first ncdoc.toml, .ncdoc.toml, .ncdoc.yaml or .ncdoc.yml found from the
current directory upward; or --config FILE):

    rules = ["policies/site.yaml"]          # policy packs, relative to the config file
    select = ["NC1", "NC4"]
    ignore = {NC1004 = "we pin NCCL_MIN_NCHANNELS on purpose"}     # a reason is required
    fail-on = "warning"
    expect-gpus = 8                         # GPUs every node must show (ncdoc check; rule NC5101)
    [severity]
    NC1005 = "error"
"""

from __future__ import annotations

import os

# `re` is imported inside the functions that use it: this module is on the `ncdoc check` path,
# whose start-up budget cannot pay for the regex machinery.
from ncdoc.errors import InputError
from ncdoc.findings import SEVERITIES

TYPE_CHECKING = False      # typing is not imported at run time (start-up cost); type checkers see this
if TYPE_CHECKING:
    from typing import Any

LEVELS = {"enforced": "error", "recommended": "warning", "forbidden": "error"}
ENTRY_KEYS = ("var", "level", "value", "one_of", "regex", "range", "severity", "reason", "hosts", "when", "fix")
PACK_KEYS = ("policy", "description", "hosts", "when", "variables")
WHEN_KEYS = ("nccl", "driver", "cuda", "plugin")
CONFIG_NAMES = ("ncdoc.toml", ".ncdoc.toml", ".ncdoc.yaml", ".ncdoc.yml")
CONFIG_KEYS = ("rules", "select", "ignore", "severity", "fail-on", "expect-gpus")
FAIL_ON = ("info", "warning", "error", "none")


class Entry:
    __slots__ = ("var", "level", "kind", "arg", "severity", "reason", "hosts", "when", "fix", "line", "policy")

    def __init__(self, **kw: Any):
        for k in self.__slots__:
            setattr(self, k, kw.get(k))

    def describe(self) -> str:
        """The constraint in words: "set", "'=mlx5_0'", "one of 1, 2", "matching ^mlx5", "in 0..7"."""
        if self.kind == "value":
            return repr(self.arg)
        if self.kind == "one_of":
            return "one of " + ", ".join(repr(a) for a in self.arg)
        if self.kind == "regex":
            return f"matching /{self.arg}/"
        if self.kind == "range":
            lo, hi = self.arg
            return f"in {'' if lo is None else lo}..{'' if hi is None else hi}"
        return "set"


class Policy:
    __slots__ = ("name", "path", "description", "entries")

    def __init__(self, name: str, path: str, description: str, entries: list[Entry]):
        self.name, self.path, self.description, self.entries = name, path, description, entries


def _read_structured(path: str):
    """YAML (with line numbers), JSON or TOML, by suffix."""
    from ncdoc.readers.textfile import read_user_text
    path = str(path)
    text = read_user_text(path, "a policy pack or config", empty_ok=True)   # an empty config sets nothing
    if path.endswith(".json"):
        from ncdoc.startup.json_load import load_data
        try:
            return load_data(text)
        except ValueError as exc:
            raise InputError(f"not valid JSON ({exc})", path=path) from None
    if path.endswith(".toml"):
        try:
            import tomllib
        except ModuleNotFoundError:      # Python 3.10: the backport, same API
            import tomli as tomllib
        from ncdoc.startup.json_load import bounded
        try:
            # bounded: the same depth and number limits as JSON (tomllib recurses into nesting and
            # converts any number of digits)
            return bounded(tomllib.loads(text), "the TOML")
        except tomllib.TOMLDecodeError as exc:
            import re
            m = re.search(r"line (\d{1,9})", str(exc))
            raise InputError(f"not valid TOML ({exc})", path=path, line=int(m.group(1)) if m else None) from None
        except RecursionError:
            raise InputError("not valid TOML (nested too deeply)", path=path) from None
        except ValueError as exc:      # a number of more than 4300 digits, or the depth limit
            raise InputError(f"not valid TOML ({str(exc)[:200]})", path=path) from None
    from ncdoc.readers.yaml_lines import load_yaml
    return load_yaml(text, path)


def _check_when(when: Any, path: str, line: int | None) -> dict[str, str]:
    from ncdoc.nccl.parse import check_version_spec
    from ncdoc.readers.yaml_lines import check_keys, key_line
    check_keys(when, WHEN_KEYS, "a 'when' condition", path, line)
    for k, spec in when.items():
        if not isinstance(spec, str):
            raise InputError(f"when.{k} must be a string", path=path, line=key_line(when, k) or line)
        text = _plugin_split(spec)[1] if k == "plugin" else spec
        if text:
            why = check_version_spec(text)
            if why:
                raise InputError(f"when.{k}: {why}", path=path, line=key_line(when, k) or line)
    return {k: v for k, v in when.items()}


def _plugin_split(spec: str) -> tuple[str, str]:
    import re
    m = re.match(r"\s*([A-Za-z0-9_.+-]+?)\s*((?:[<>=!]=?|==).*)?$", spec)
    return (m.group(1), (m.group(2) or "").strip()) if m else (spec.strip(), "")


def parse_policy(data: Any, path: str) -> Policy:
    import re
    from ncdoc.readers.yaml_lines import check_keys, key_line
    check_keys(data, PACK_KEYS, "a policy pack", path, 1)
    name = data.get("policy")
    if not isinstance(name, str) or not re.fullmatch(r"[a-z0-9][a-z0-9-]*", name):
        raise InputError("'policy' must be a kebab-case name", path=path, line=key_line(data, "policy") or 1)
    pack_hosts = _globs(data.get("hosts"), path, key_line(data, "hosts"))
    pack_when = _check_when(data["when"], path, key_line(data, "when")) if "when" in data else {}
    items = data.get("variables")
    if not isinstance(items, list) or not items:
        raise InputError("'variables' must be a non-empty list", path=path, line=key_line(data, "variables") or 1)
    entries = []
    for item in items:
        line = key_line(item)
        check_keys(item, ENTRY_KEYS, "a policy entry", path, line)
        var, level = item.get("var"), item.get("level")
        if not isinstance(var, str) or not re.fullmatch(r"NCCL_[A-Z0-9_]+", var):
            raise InputError(f"var: {var!r} is not an NCCL_* name", path=path, line=key_line(item, "var") or line)
        if level not in LEVELS:
            raise InputError(f"level: {level!r} is not one of {', '.join(LEVELS)}", path=path,
                             line=key_line(item, "level") or line)
        kinds = [k for k in ("value", "one_of", "regex", "range") if k in item]
        if len(kinds) > 1:
            raise InputError(f"use only one of value, one_of, regex, range (found {', '.join(kinds)})",
                             path=path, line=line)
        kind = kinds[0] if kinds else None
        arg = item.get(kind) if kind else None
        where = key_line(item, kind) if kind else line
        if kind == "value":
            if not isinstance(arg, (str, int)) or isinstance(arg, bool):
                raise InputError("value must be a string or an integer", path=path, line=where)
            arg = str(arg)
        elif kind == "one_of":
            if not isinstance(arg, list) or not arg or not all(isinstance(a, (str, int)) for a in arg):
                raise InputError("one_of must be a non-empty list of values", path=path, line=where)
            arg = [str(a) for a in arg]
        elif kind == "regex":
            try:
                re.compile(arg)
            except (re.error, TypeError) as exc:
                raise InputError(f"regex: {exc}", path=path, line=where) from None
        elif kind == "range":
            if not (isinstance(arg, list) and len(arg) == 2 and all(a is None or (isinstance(a, int) and
                                                                                   not isinstance(a, bool)) for a in arg)):
                raise InputError("range must be [min, max] (integers, null for open)", path=path, line=where)
        sev = item.get("severity", LEVELS[level])
        if sev not in SEVERITIES:
            raise InputError(f"severity: {sev!r} is not one of {', '.join(SEVERITIES)}", path=path,
                             line=key_line(item, "severity") or line)
        reason = item.get("reason")
        if not isinstance(reason, str) or not reason.strip():
            raise InputError("every policy entry needs a 'reason'", path=path, line=line)
        when = dict(pack_when)
        if "when" in item:
            when.update(_check_when(item["when"], path, key_line(item, "when")))
        hosts = _globs(item.get("hosts"), path, key_line(item, "hosts")) or pack_hosts
        fix = item.get("fix")
        entries.append(Entry(var=var, level=level, kind=kind, arg=arg, severity=sev, reason=reason.strip(),
                             hosts=hosts, when=when, fix=fix if isinstance(fix, str) else None, line=line,
                             policy=name))
    return Policy(name, path, str(data.get("description", "")), entries)


def _globs(v: Any, path: str, line: int | None) -> tuple[str, ...]:
    if v is None:
        return ()
    if isinstance(v, str):
        v = [v]
    if not isinstance(v, list) or not all(isinstance(x, str) and x for x in v):
        raise InputError("hosts must be a list of hostname patterns", path=path, line=line)
    return tuple(v)


def load_policy(path: str) -> Policy:
    return parse_policy(_read_structured(str(path)), str(path))


# ---------------------------------------------------------------- evaluation (pure)

def _plugin_version(paths, name: str) -> tuple[bool, str | None]:
    for p in paths:
        if name.lower() in p.lower():
            import re
            m = re.search(r"(\d+\.\d+(?:\.\d+)*)", p.rsplit("/lib", 1)[0])
            return True, m.group(1) if m else None
    return False, None


def applies(entry: Entry, facts: dict[str, Any]) -> tuple[bool | None, str]:
    """(True/False, "") when the entry applies or not; (None, reason) when a fact it needs is unknown."""
    import fnmatch
    from ncdoc.nccl.parse import version_matches
    if entry.hosts:
        host = facts.get("hostname")
        if not host:
            return None, "hostname unknown"
        if not any(fnmatch.fnmatchcase(host, g) for g in entry.hosts):
            return False, ""
    for key, spec in (entry.when or {}).items():
        if key == "plugin":
            name, vspec = _plugin_split(spec)
            plugins = facts.get("net_plugins")
            if plugins is None:
                return None, "net plugins unknown"
            found, version = _plugin_version(plugins, name)
            if not found:
                return False, ""
            if vspec:
                if version is None:
                    return None, f"version of net plugin {name!r} unknown"
                if not version_matches(version, vspec):
                    return False, ""
            continue
        have = facts.get(key)
        if not have:
            return None, f"{key} version unknown"
        if not version_matches(have, spec):
            return False, ""
    return True, ""


def satisfies(entry: Entry, value: str) -> bool:
    from ncdoc.nccl.parse import strtoll
    from ncdoc.nccl.variables import lookup
    info = lookup(entry.var) or {}
    numeric = info.get("type") in ("int", "bool-int", "int (uint64)")

    def num(x: str):
        p = strtoll(x)
        return p.value if p.kind in ("ok",) else None
    if entry.kind is None:
        return True
    if entry.kind == "value":
        return value == entry.arg or (numeric and num(value) is not None and num(value) == num(entry.arg))
    if entry.kind == "one_of":
        return value in entry.arg or (numeric and num(value) is not None and num(value) in [num(a) for a in entry.arg])
    if entry.kind == "regex":
        import re
        return re.fullmatch(entry.arg, value) is not None
    v = num(value)
    lo, hi = entry.arg
    return v is not None and (lo is None or v >= lo) and (hi is None or v <= hi)


# ---------------------------------------------------------------- config file

class Config:
    __slots__ = ("path", "rules", "select", "ignore", "severity", "fail_on", "expect_gpus")

    def __init__(self, path: str | None = None, rules=(), select=None, ignore=None, severity=None, fail_on=None,
                 expect_gpus: int | None = None):
        self.path, self.rules, self.select = path, list(rules), list(select) if select is not None else None
        self.ignore, self.severity, self.fail_on = dict(ignore or {}), dict(severity or {}), fail_on
        self.expect_gpus = expect_gpus


def find_config(start: str | None = None) -> str | None:
    """The first config file in `start` (default: the current directory) or a folder above it."""
    folder = os.path.abspath(start or os.getcwd())
    while True:
        for name in CONFIG_NAMES:
            p = os.path.join(folder, name)
            if os.path.isfile(p):
                return p
        parent = os.path.dirname(folder)
        if parent == folder:
            return None
        folder = parent


def load_config(path: str | None = None, *, start: str | None = None) -> Config:
    """The config file given, or the one found from `start` (cwd) upward; an empty Config if none."""
    p = str(path) if path else find_config(start)
    if p is None:
        return Config()
    from ncdoc.readers.yaml_lines import check_keys, key_line
    data = _read_structured(p)
    if isinstance(data, dict) and p.endswith(".toml") and "tool" in data and "ncdoc" in data.get("tool", {}):
        data = data["tool"]["ncdoc"]
    check_keys(data, CONFIG_KEYS, "the ncdoc config", p, 1)
    base = os.path.dirname(p)
    rules = data.get("rules", [])
    if isinstance(rules, str):
        rules = [rules]
    if not isinstance(rules, list) or not all(isinstance(r, str) for r in rules):
        raise InputError("rules must be a list of policy pack paths", path=p, line=key_line(data, "rules"))
    select = data.get("select")
    if select is not None and (not isinstance(select, list) or not all(isinstance(s, str) for s in select)):
        raise InputError("select must be a list of codes or names", path=p, line=key_line(data, "select"))
    ignore = data.get("ignore", {})
    if not isinstance(ignore, dict):
        raise InputError("ignore must map codes to reasons", path=p, line=key_line(data, "ignore"))
    for code, reason in ignore.items():
        if not isinstance(reason, str) or not reason.strip():
            raise InputError(f"ignore.{code} needs a reason", path=p, line=key_line(ignore, code) or
                             key_line(data, "ignore"))
    severity = data.get("severity", {})
    if not isinstance(severity, dict) or any(v not in SEVERITIES + ("off",) for v in severity.values()):
        raise InputError("severity must map codes to info|warning|error|off", path=p,
                         line=key_line(data, "severity"))
    fail_on = data.get("fail-on")
    if fail_on is not None and fail_on not in FAIL_ON:
        raise InputError(f"fail-on must be one of {', '.join(FAIL_ON)}", path=p, line=key_line(data, "fail-on"))
    expect_gpus = data.get("expect-gpus")
    if expect_gpus is not None and (type(expect_gpus) is not int or expect_gpus < 0):
        raise InputError("expect-gpus must be a whole number of GPUs (0 or more)", path=p,
                         line=key_line(data, "expect-gpus"))
    return Config(p, [os.path.join(base, r) if not os.path.isabs(r) else r for r in rules], select, ignore,
                  severity, fail_on, expect_gpus)


__all__ = ["LEVELS", "Entry", "Policy", "parse_policy", "load_policy", "applies", "satisfies", "Config",
           "find_config", "load_config"]
