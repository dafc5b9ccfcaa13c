"""NCCL's verdict on one value of one variable: does NCCL read it the way the user meant?

`value_problems(name, value, info, version=...)` returns what NCCL would misparse, clamp,
ignore or reject, each with a severity and, where obvious, the value the user meant.
Built on ncdoc.nccl.parse (the parsing itself) and the variable table (ncdoc.nccl.variables).
"""

from __future__ import annotations
from ncdoc.readers.numbers import is_digits

# `re` is imported inside the few rare branches that need it: this module is on the
# `ncdoc check` path, whose start-up budget cannot pay for the regex machinery.
from ncdoc.nccl.parse import (LATEST, ib_hca_max_entries, is_power_of_two, level_names, parse_algo_proto,
                              parse_level, parse_list, strtoll, version_cmp)

TYPE_CHECKING = False      # typing is not imported at run time (start-up cost); type checkers see this
if TYPE_CHECKING:
    from typing import Any


class Problem:
    __slots__ = ("severity", "message", "suggestion")

    def __init__(self, severity: str, message: str, suggestion: str | None = None):
        self.severity, self.message, self.suggestion = severity, message, suggestion

    def __repr__(self) -> str:
        return f"Problem({self.severity!r}, {self.message!r}, {self.suggestion!r})"


_INT_TYPES = ("int", "bool-int", "int (uint64)", "enum/int")
_DEBUG_VARS = ("NCCL_DEBUG", "NCCL_DEBUG_SUBSYS", "NCCL_DEBUG_FILE", "NCCL_DEBUG_TIMESTAMP_FORMAT",
               "NCCL_DEBUG_TIMESTAMP_LEVELS", "NCCL_WARN_ENABLE_DEBUG_INFO", "NCCL_SET_THREAD_NAME",
               "NCCL_PARAM_DUMP_ALL")
_TRUE_WORDS = {"true", "yes", "on", "enable", "enabled", "y", "t"}
_FALSE_WORDS = {"false", "no", "off", "disable", "disabled", "n", "f"}
_SIZE_SUFFIX = {"k": 1 << 10, "kb": 1 << 10, "kib": 1 << 10, "m": 1 << 20, "mb": 1 << 20, "mib": 1 << 20,
                "g": 1 << 30, "gb": 1 << 30, "gib": 1 << 30}
_SUBSYS = ("INIT", "COLL", "P2P", "SHM", "NET", "GRAPH", "TUNING", "ENV", "ALLOC", "ALLOC_HOST", "CALL",
           "PROXY", "NVLS", "BOOTSTRAP", "REG", "PROFILE", "RAS", "DESTROY", "ALL")
_TS_LEVELS = ("VERSION", "WARN", "INFO", "ABORT", "TRACE", "ALL")
_MERGE_LEVELS = ("LOC", "PORT", "PIX", "PXB", "P2C", "PXN", "PHB", "SYS")


def assumed(version: str | None) -> str:
    """The words saying which NCCL a version-dependent verdict assumes."""
    return f"NCCL {version}" if version else f"NCCL {LATEST} (version unknown; assumed newest)"


def value_problems(name: str, value: str, info: dict[str, Any], *, version: str | None = None,
                   source: str = "env") -> list[Problem]:
    """Everything NCCL `version` would misread about `name=value` (info: the nccl_vars entry)."""
    out: list[Problem] = []
    if len(value) >= 2 and value[0] in "\"'" and value[-1] == value[0]:
        # nccl.conf lines are taken verbatim; an env value with quotes came from a script that quoted twice
        out.append(Problem("error", f"the value keeps its quotes ({value}): NCCL reads them as part of the value",
                           value[1:-1]))
        return out
    if value != value.strip() and value.strip():
        out.append(Problem("error", f"the value {value!r} has surrounding whitespace, which NCCL keeps",
                           value.strip()))
        return out
    special = _SPECIAL.get(name)
    if special is not None:
        out.extend(special(value, version))
    elif info.get("type") in _INT_TYPES:
        out.extend(_int_problems(name, value, info))
    elif info.get("type") in ("enum", "bool"):
        out.extend(_names_problems(name, value, info))
    if name in _DEBUG_VARS:
        for p in out:
            if p.severity == "error":
                p.severity = "warning"
    return out


# ---------------------------------------------------------------- integers

def _int_suggestion(value: str) -> str | None:
    v = value.strip().lower()
    if v in _TRUE_WORDS:
        return "1"
    if v in _FALSE_WORDS:
        return "0"
    import re
    m = re.fullmatch(r"(\d{1,20}(?!\d))\s*([kmg]i?b?)", v)
    if m and m.group(2) in _SIZE_SUFFIX:
        return str(int(m.group(1)) * _SIZE_SUFFIX[m.group(2)])
    m = re.fullmatch(r"(\d{1,20}(?:\.\d{1,20})?)e(\d{1,2})", v)      # 1e6; bounded: 10**huge is no value
    if m:
        f = float(m.group(1)) * 10 ** int(m.group(2))
        if f - f == 0 and f == int(f) and f < 2 ** 63:
            return str(int(f))
    return None


def _int_problems(name: str, value: str, info: dict[str, Any]) -> list[Problem]:
    p = strtoll(value)
    if p.kind == "empty":
        return [Problem("info", "the value is empty: NCCL ignores it and keeps the default")]
    if p.kind == "nodigits":
        return [Problem("error", f"{value!r} is not a number: NCCL reads it as 0", _int_suggestion(value))]
    if p.kind == "overflow":
        return [Problem("warning", f"{value!r} overflows a 64-bit integer: NCCL ignores it and uses the default")]
    if p.kind == "trailing" and p.rest.strip():
        return [Problem("error", f"NCCL reads {value!r} as {p.value} (it stops at {p.rest!r})",
                        _int_suggestion(value))]
    if p.octal:
        return [Problem("error", f"the leading 0 makes NCCL read {value!r} as octal, i.e. {p.value}",
                        str(int(value.strip().lstrip("+-").lstrip("0") or "0")))]
    return _int_range(name, p.value, info)


def _int_range(name: str, v: int, info: dict[str, Any]) -> list[Problem]:
    allowed = info.get("allowed") or {}
    if "ints" in allowed and v not in allowed["ints"]:
        choices = ", ".join(str(x) for x in allowed["ints"])
        if name == "NCCL_P2P_DISABLE":
            return [Problem("warning", f"only 1 disables P2P; {v} leaves it as NCCL_P2P_LEVEL says", "1")]
        return [Problem("warning", f"{v} is not one of {choices}; NCCL does not define what it does")]
    if "range" in allowed:
        lo, hi = allowed["range"]
        if (lo is not None and v < lo) or (hi is not None and v > hi):
            span = f"{lo if lo is not None else ''}..{hi if hi is not None else ''}"
            return [Problem("warning", f"{v} is outside {span}; NCCL clamps or ignores it")]
    if allowed.get("multiple_of") and v % allowed["multiple_of"]:
        return [Problem("warning", f"{v} is not a multiple of {allowed['multiple_of']}; NCCL replaces it")]
    if allowed.get("power_of_two") and not is_power_of_two(v):
        return [Problem("warning", f"{v} is not a power of 2; NCCL ignores it")]
    return []


def _names_problems(name: str, value: str, info: dict[str, Any]) -> list[Problem]:
    allowed = info.get("allowed") or {}
    names = allowed.get("names")
    if not names:
        return []
    if allowed.get("case") == "insensitive":
        if value.upper() in (n.upper() for n in names):
            return []
    elif value in names:
        return []
    fix = next((n for n in names if n.upper() == value.upper()), None)
    how = "names are exact and case-sensitive" if fix else f"expected one of {', '.join(names)}"
    return [Problem("error", f"{value!r} is not a value NCCL knows ({how}); NCCL ignores it", fix)]


# ---------------------------------------------------------------- per-variable parsers

def _level(var: str):
    def check(value: str, version: str | None) -> list[Problem]:
        level, how = parse_level(value, version=version)
        if level is None:
            names = level_names(version)
            fix = value.upper() if value.upper() in names else None
            if fix:
                why = "level names are compared case-sensitively"
            elif value.upper() in level_names(None):
                why = f"{value.upper()} is not a level in {assumed(version)}"
            else:
                why = f"expected one of {', '.join(names)}"
            return [Problem("error", f"{value!r} is ignored ({why}), so NCCL keeps its default level "
                                     f"[{assumed(version)}]", fix)]
        if how == "legacy integer":
            return [Problem("info", f"legacy integer level {value!r} means {level}; write the name", level)]
        return []
    return check


def _algo_proto(kind: str):
    def check(value: str, version: str | None) -> list[Problem]:
        res = parse_algo_proto(value, kind, version=version)
        out: list[Problem] = []
        var = "NCCL_ALGO" if kind == "algo" else "NCCL_PROTO"
        for e in res.errors:
            out.append(Problem("error", f"{e}: NCCL fails communicator init with ncclInvalidUsage "
                                        f"[{assumed(version)}]"))
        if res.ignored:
            out.append(Problem("error", f"{', '.join(repr(t) for t in res.ignored)} ignored silently "
                                        f"[{assumed(version)}]"))
        if res.empty_funcs:
            out.append(Problem("error", f"{var}={value} leaves no {'algorithm' if kind == 'algo' else 'protocol'} "
                                        f"for {', '.join(res.empty_funcs)}: those collectives fail"))
        return out
    return check


def _iflist(var: str, max_entries_fn):
    def check(value: str, version: str | None) -> list[Problem]:
        out: list[Problem] = []
        if var == "NCCL_SOCKET_IFNAME" and len(value) <= 1:
            return [Problem("error", f"a value of length {len(value)} is ignored: NCCL picks interfaces itself")]
        if value.startswith("=^"):
            out.append(Problem("error", "'^' must come before '=': '=^...' looks for names starting with '^'",
                               "^=" + value[2:]))
        lst = parse_list(value, max_entries=max_entries_fn(version), version=version)
        for e in lst.entries:
            if e is not lst.entries[0] and e.prefix[:1] in "^=":
                out.append(Problem("error", f"entry {e.raw!r}: '^' and '=' apply to the whole list and only at its "
                                            f"start; this entry is the literal prefix {e.prefix!r} and matches nothing"))
            elif any(c.isspace() for c in e.prefix):
                out.append(Problem("error", f"entry {e.raw!r} contains whitespace, which NCCL keeps",
                                   ",".join(x.raw.strip() for x in lst.entries)))
            if var != "NCCL_SOCKET_IFNAME" and e.port == 0:
                out.append(Problem("error", f"entry {e.raw!r}: port 0 never matches (ports count from 1)"))
        if lst.dropped:
            out.append(Problem("warning", f"{len(lst.dropped)} entries past the first "
                                          f"{max_entries_fn(version)} are dropped silently: "
                                          f"{', '.join(e.raw for e in lst.dropped)} [{assumed(version)}]"))
        return out
    return check


def _subsys(tokens: tuple[str, ...], all_or_nothing_since: tuple[int, ...] | None):
    def check(value: str, version: str | None) -> list[Problem]:
        body = value[1:] if value.startswith("^") else value
        bad = [t for t in body.split(",") if t and t.upper() not in tokens]
        if not bad:
            return []
        whole = all_or_nothing_since and version_cmp(version or LATEST, all_or_nothing_since) >= 0
        effect = ("the whole value is ignored and the default is used" if whole
                  else "those tokens are skipped")
        return [Problem("warning", f"unknown token(s) {', '.join(repr(t) for t in bad)}: {effect} "
                                   f"[{assumed(version)}]")]
    return check


def _netdevs_policy(value: str, version: str | None) -> list[Problem]:
    v = value.upper()
    if v in ("AUTO", "ALL"):
        return []
    if v.startswith("MAX:") and is_digits(v[4:]) and int(v[4:]) > 0:     # MAX:(\d{1,20}(?!\d))
        return []
    return [Problem("warning", f"{value!r} is not AUTO, ALL or MAX:<n>; NCCL uses AUTO")]


def _cta_policy(value: str, version: str | None) -> list[Problem]:
    if value in ("0", "1", "2"):
        return []
    if all(t.upper() in ("DEFAULT", "EFFICIENCY", "ZERO") for t in value.split("|")):
        return []
    return [Problem("warning", f"{value!r} is not DEFAULT, EFFICIENCY, ZERO (joined by '|'); NCCL uses DEFAULT")]


def _merge_level(value: str, version: str | None) -> list[Problem]:
    if any(value.startswith(n) for n in _MERGE_LEVELS):
        return []
    fix = value.upper() if any(value.upper().startswith(n) for n in _MERGE_LEVELS) else None
    return [Problem("error", f"{value!r} is not a merge level ({', '.join(_MERGE_LEVELS)}); NCCL falls back to "
                             "LOC, which turns NIC fusion off", fix)]


def _comm_id(value: str, version: str | None) -> list[Problem]:
    import re
    if re.fullmatch(r"\[[0-9A-Fa-f:.]+(%[\w.-]+)?\]:\d+|[\w.-]+:\d+", value):
        return []
    return [Problem("error", f"{value!r} is not <host>:<port> or [<ipv6>]:<port>: NCCL init fails "
                             "(Invalid NCCL_COMM_ID)")]


def _addr_range(value: str, version: str | None) -> list[Problem]:
    addr, sep, mask = value.partition("/")
    if not sep:
        return [Problem("warning", f"{value!r} has no '/<prefix length>': NCCL ignores the range")]
    limit = 32 if ":" not in addr else 128
    if not is_digits(mask) or int(mask) > limit:
        return [Problem("warning", f"prefix length {mask!r} is not 0..{limit}: NCCL ignores the range")]
    return []


def _thread_thresholds(value: str, version: str | None) -> list[Problem]:
    parts = value.split()
    bad = [x for x in parts if strtoll(x).kind != "ok"]
    if len(parts) > 6 or bad:
        return [Problem("warning", "expected up to 6 space-separated integers "
                                   "(TreeLL TreeLL128 TreeSimple RingLL RingLL128 RingSimple)")]
    return []


def _family(default_effect: str):
    def check(value: str, version: str | None) -> list[Problem]:
        if value in ("AF_INET", "AF_INET6"):
            return []
        fix = value.upper() if value.upper() in ("AF_INET", "AF_INET6") else None
        return [Problem("warning", f"{value!r} is not AF_INET or AF_INET6 (exact): {default_effect}", fix)]
    return check


_SPECIAL = {
    "NCCL_P2P_LEVEL": _level("NCCL_P2P_LEVEL"),
    "NCCL_NET_GDR_LEVEL": _level("NCCL_NET_GDR_LEVEL"),
    "NCCL_ALGO": _algo_proto("algo"),
    "NCCL_PROTO": _algo_proto("proto"),
    "NCCL_SOCKET_IFNAME": _iflist("NCCL_SOCKET_IFNAME", lambda v: 16),
    "NCCL_IB_HCA": _iflist("NCCL_IB_HCA", ib_hca_max_entries),
    "NCCL_OOB_NET_IFNAME": _iflist("NCCL_OOB_NET_IFNAME", ib_hca_max_entries),
    "NCCL_DEBUG_SUBSYS": _subsys(_SUBSYS, (2, 30, 7)),
    "NCCL_DEBUG_TIMESTAMP_LEVELS": _subsys(_TS_LEVELS, None),
    "NCCL_NETDEVS_POLICY": _netdevs_policy,
    "NCCL_CTA_POLICY": _cta_policy,
    "NCCL_NET_MERGE_LEVEL": _merge_level,
    "NCCL_COMM_ID": _comm_id,
    "NCCL_IB_ADDR_RANGE": _addr_range,
    "NCCL_THREAD_THRESHOLDS": _thread_thresholds,
    "NCCL_SOCKET_FAMILY": _family("NCCL then uses any address family"),
    "NCCL_IB_ADDR_FAMILY": _family("NCCL then uses AF_INET"),
}

__all__ = ["Problem", "value_problems", "assumed"]
