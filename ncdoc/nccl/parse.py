"""How NCCL itself parses the values of its environment variables, reproduced exactly.

NCCL is forgiving in the worst way: it rarely rejects a value, it reads it differently from
what the user meant. Everything here mirrors NCCL's own code paths (nccl_facts.md 1-2):

* integers (`NCCL_PARAM`): `strtoll(str, NULL, 0)`: leading "0" is octal, "0x" is hex,
  trailing junk is dropped, no digits at all gives 0, only overflow falls back to the default;
* lists (`NCCL_SOCKET_IFNAME`, `NCCL_IB_HCA`, `NCCL_OOB_NET_IFNAME`): one leading `^`
  (exclude), then one `=` (exact), then comma entries `prefix[:port[:rail[:plane]]]`
  matched by case-sensitive prefix;
* path levels (`NCCL_P2P_LEVEL`, `NCCL_NET_GDR_LEVEL`): exact upper-case names, or a
  legacy integer;
* `NCCL_ALGO` / `NCCL_PROTO`: the per-function grammar of 2.24+, the flat list before;
* version strings ("2.21.5", "2.21.5+cuda12.4") and version specs (">=2.21,<2.24").

Pure functions over strings; no I/O. No `re` either: this module is on the `ncdoc check` path,
whose start-up budget cannot pay for the regex machinery; the few patterns are spelled out as
string operations (each comment gives the pattern it reproduces).
"""

from __future__ import annotations

LATEST = "2.30.7"     # newest release the fact base covers; verdicts without a version assume it

# ---------------------------------------------------------------- versions

def _leading_digits(s: str) -> str:
    """The longest prefix of `s` made of decimal digits (regex \\d+, which is str.isdecimal)."""
    if s.isdecimal():
        return s
    i = 0
    while i < len(s) and s[i].isdecimal():
        i += 1
    return s[:i]


def _dotted_number(s: str) -> str:
    """The match of \\d+(?:\\.\\d+)* at the start of `s` ("" when none)."""
    end = 0
    for n, piece in enumerate(s.split(".")):
        digits = _leading_digits(piece)
        if not digits:
            break
        end += len(digits) + (n > 0)
        if len(digits) < len(piece):
            break
    return s[:end]


_VERSIONS: dict = {}     # text -> version_tuple(text): versions are compared many times per run


def version_tuple(text: str | None) -> tuple[int, ...] | None:
    """"2.21.5+cuda12.4" -> (2, 21, 5); None when there is no version (regex \\s*v?(\\d+(?:\\.\\d+)*))."""
    if not text:
        return None
    text = str(text)
    if text in _VERSIONS:
        return _VERSIONS[text]
    s = text.lstrip()                    # \s: str.isspace(), as str.lstrip() strips
    number = _dotted_number(s[1:] if s[:1] == "v" else s)
    # a part past 20 digits saturates (int() of thousands of digits costs, and stops at 4,300)
    tp = tuple(int(x) if len(x) <= 20 else 10 ** 20 for x in number.split(".")) if number else None
    if len(_VERSIONS) < 4096 and len(text) <= 64:     # real versions only: a pasted 10 MB one is not kept
        _VERSIONS[text] = tp
    return tp


def version_cmp(a: str | tuple[int, ...], b: str | tuple[int, ...]) -> int:
    """-1, 0, 1 comparing a with b at b's precision: "2.12.12" equals "2.12"."""
    ta = a if isinstance(a, tuple) else version_tuple(a)
    tb = b if isinstance(b, tuple) else version_tuple(b)
    if ta is None or tb is None:
        raise ValueError(f"not a version: {a if ta is None else b!r}")
    n = len(tb)
    ta = (ta + (0,) * n)[:n]
    return (ta > tb) - (ta < tb)


_SPEC_OPS = ("<=", ">=", "==", "!=", "<", ">", "=")


def _clause(clause: str) -> tuple[str | None, str] | None:
    """(operator or None, version) of one clause, or None when it is not one
    (regex ^\\s*(<=|>=|==|!=|<|>|=)?\\s*(v?\\d+(?:\\.\\d+)*)\\s*$)."""
    s = clause.strip()
    op = next((o for o in _SPEC_OPS if s.startswith(o)), None)
    if op is not None:
        s = s[len(op):].lstrip()
    number = s[1:] if s[:1] == "v" else s
    if not number or _dotted_number(number) != number:
        return None
    return op, s


def check_version_spec(spec: str) -> str | None:
    """Why `spec` (">=2.21,<2.24") is not a version spec, or None when it is one."""
    if not isinstance(spec, str) or not spec.strip():
        return "empty version spec"
    for clause in spec.split(","):
        if _clause(clause) is None:
            return f"bad version clause {clause.strip()!r} (use e.g. '>=2.21', '<2.24', '==2.19.3')"
    return None


def version_matches(version: str, spec: str) -> bool:
    """True when `version` satisfies every comma-separated clause of `spec`."""
    for clause in spec.split(","):
        m = _clause(clause)
        if m is None:
            raise ValueError(f"bad version clause {clause!r}")
        op, ref = m[0] or "==", m[1]
        c = version_cmp(version, ref)
        ok = {"<": c < 0, "<=": c <= 0, ">": c > 0, ">=": c >= 0, "==": c == 0, "=": c == 0,
              "!=": c != 0}[op]
        if not ok:
            return False
    return True


# ---------------------------------------------------------------- integers (NCCL_PARAM)

INT64_MAX = 2**63 - 1
INT64_MIN = -2**63


class IntParse:
    """The result of `strtoll(text, NULL, 0)` and what NCCL then does with it.

    kind: "ok" (clean number), "empty" (NCCL uses the default), "nodigits" (NCCL uses 0),
    "trailing" (NCCL uses the leading number, drops the rest), "overflow" (NCCL uses the default).
    `octal` is True when a leading 0 made NCCL read the digits in base 8.
    """

    __slots__ = ("text", "value", "kind", "rest", "octal")

    def __init__(self, text: str, value: int | None, kind: str, rest: str = "", octal: bool = False):
        self.text, self.value, self.kind, self.rest, self.octal = text, value, kind, rest, octal

    @property
    def clean(self) -> bool:
        """A value NCCL reads the way a person reads it."""
        return self.kind == "ok" and not self.octal

    def __repr__(self) -> str:
        return f"IntParse({self.text!r}, value={self.value}, kind={self.kind!r}, octal={self.octal})"


_WS = " \t\n\v\f\r"


def strtoll(text: str) -> IntParse:
    """C `strtoll(text, &end, 0)` as glibc does it, plus NCCL's handling of the outcome."""
    if text == "":
        return IntParse(text, None, "empty")
    i, n = 0, len(text)
    while i < n and text[i] in _WS:
        i += 1
    neg = False
    if i < n and text[i] in "+-":
        neg = text[i] == "-"
        i += 1
    base, digits = 10, "0123456789"
    octal = False
    if i < n and text[i] == "0":
        if i + 1 < n and text[i + 1] in "xX" and i + 2 < n and text[i + 2] in "0123456789abcdefABCDEF":
            base, digits, i = 16, "0123456789abcdefABCDEF", i + 2
        else:
            base, digits = 8, "01234567"
    start = i
    while i < n and text[i] in digits:
        i += 1
    if i == start:
        return IntParse(text, 0, "nodigits", text)
    if len(text[start:i].lstrip("0")) > 22:     # past 64 bits in any base (22 octal digits): no int() of it
        return IntParse(text, None, "overflow", text[i:])
    number = int(text[start:i], base)
    if base == 8 and i - start > 1 and number != int(text[start:i], 10):
        octal = True
    value = -number if neg else number
    if value > INT64_MAX or value < INT64_MIN:
        return IntParse(text, None, "overflow", text[i:])
    rest = text[i:]
    return IntParse(text, value, "trailing" if rest else "ok", rest, octal)


def is_power_of_two(v: int) -> bool:
    return v > 0 and v & (v - 1) == 0


# ---------------------------------------------------------------- interface / HCA lists

class ListEntry:
    __slots__ = ("prefix", "port", "rail", "plane", "raw")

    def __init__(self, prefix: str, port: int = -1, rail: int = -1, plane: int = -1, raw: str = ""):
        self.prefix, self.port, self.rail, self.plane, self.raw = prefix, port, rail, plane, raw or prefix

    def __repr__(self) -> str:
        return f"ListEntry({self.prefix!r}, port={self.port})"


class NcclList:
    """A parsed NCCL_SOCKET_IFNAME / NCCL_IB_HCA / NCCL_OOB_NET_IFNAME value."""

    __slots__ = ("value", "negate", "exact", "entries", "dropped")

    def __init__(self, value: str, negate: bool, exact: bool, entries: tuple, dropped: tuple):
        self.value, self.negate, self.exact, self.entries, self.dropped = value, negate, exact, entries, dropped

    def matches(self, name: str, port: int = -1) -> bool:
        """NCCL's `matchIfList(name, port, list, exact) ^ searchNot`."""
        hit = not self.entries
        exact = self.exact
        for e in self.entries:                 # entry_matches, inline: a check asks for every port
            if (name == e.prefix if exact else name.startswith(e.prefix)) and \
                    (e.port == -1 or port == -1 or e.port == port):
                hit = True
                break
        return hit != self.negate


def _atoi(s: str) -> int:
    """C atoi: optional blanks and sign, decimal digits, anything else ends it; no digits is 0
    (regex [ \\t\\n\\v\\f\\r]*([+-]?\\d+))."""
    s = s.lstrip(" \t\n\v\f\r")
    sign = s[:1] if s[:1] in ("+", "-") else ""
    digits = _leading_digits(s[len(sign):])
    if len(digits.lstrip("0")) > 19:           # past 64 bits: glibc's strtol saturates (no int() of it)
        return -(2 ** 63) if sign == "-" else 2 ** 63 - 1
    return int(sign + digits) if digits else 0


_LISTS: dict = {}     # (value, max_entries, version) -> NcclList: the rules parse the same few values many times


def parse_list(value: str, *, max_entries: int = 32, version: str | None = None) -> NcclList:
    """Parse a list value the way NCCL does (`^` then `=` flags, then `parseStringList`).

    Since 2.30.7 entries are prefix[:port[:rail[:plane]]]; before, prefix[:port] where the
    port is atoi() of the rest. Entries past `max_entries` are silently dropped by NCCL.
    The result is shared by every caller asking for the same value: it is never changed.
    """
    key = (value, max_entries, version)
    got = _LISTS.get(key)
    if got is None:
        got = _parse_list(value, max_entries, version)
        if len(_LISTS) < 256:
            _LISTS[key] = got
    return got


def _parse_list(value: str, max_entries: int, version: str | None) -> NcclList:
    v = value
    negate = v.startswith("^")
    if negate:
        v = v[1:]
    exact = v.startswith("=")
    if exact:
        v = v[1:]
    new_parser = version is None or version_cmp(version, (2, 30, 7)) >= 0
    entries: list[ListEntry] = []
    for raw in v.split(","):
        if raw == "":
            continue                     # strtok: empty entries vanish
        if new_parser:
            fields = raw.split(":")
            prefix = fields[0]
            nums = [(_atoi(f) if f != "" else -1) for f in fields[1:4]]
            nums += [-1] * (3 - len(nums))
            port, rail, plane = nums
        else:
            prefix, sep, rest = raw.partition(":")
            port = _atoi(rest) if sep else -1
            rail = plane = -1
        if prefix == "":
            continue                     # an entry with an empty prefix is skipped
        entries.append(ListEntry(prefix[:63], port, rail, plane, raw))
    kept, dropped = entries[:max_entries], entries[max_entries:]
    return NcclList(value, negate, exact, tuple(kept), tuple(dropped))


def entry_matches(e: ListEntry, name: str, port: int, exact: bool) -> bool:
    if exact:
        name_ok = name == e.prefix
    else:
        name_ok = name.startswith(e.prefix)
    return name_ok and (e.port == -1 or port == -1 or e.port == port)


def ib_hca_max_entries(version: str | None) -> int:
    """MAX_IB_DEVS: 32 since 2.18.5, 16 before."""
    return 16 if version and version_cmp(version, (2, 18, 5)) < 0 else 32


# ---------------------------------------------------------------- path levels

def level_names(version: str | None) -> tuple[str, ...]:
    """The names `ncclGetLevel` accepts (indexes 0..SYS of topoPathTypeStr) in `version`."""
    v = version or LATEST
    names = ["LOC", "NVL", "NVB"]
    if version_cmp(v, (2, 26)) >= 0:
        names.append("C2C")
    names += ["PIX", "PXB"]
    if version_cmp(v, (2, 27)) >= 0:
        names.append("P2C")
    if version_cmp(v, (2, 12)) >= 0:
        names.append("PXN")
    names += ["PHB", "SYS"]
    return tuple(names)


_LEGACY_LEVELS = ("LOC", "PIX", "PXB", "PHB", "SYS", "SYS")


def parse_level(value: str, *, version: str | None = None) -> tuple[str | None, str]:
    """(level NCCL applies or None when it ignores the value, how it read it)."""
    names = level_names(version)
    if value in names:
        return value, "name"
    digits = _leading_digits(value)
    if digits:       # rare: a legacy integer level
        n = 5 if len(digits.lstrip("0")) > 1 else min(int(digits), 5)
        return _LEGACY_LEVELS[n], "legacy integer"
    return None, "ignored"


# ---------------------------------------------------------------- NCCL_ALGO / NCCL_PROTO

FUNCS = ("Broadcast", "Reduce", "AllGather", "ReduceScatter", "AllReduce")
PROTOS = ("LL", "LL128", "Simple")
_ALGO_SINCE = (("Tree", (2, 5)), ("Ring", (2, 5)), ("CollNetDirect", (2, 14)), ("CollNetChain", (2, 14)),
               ("NVLS", (2, 17)), ("NVLSTree", (2, 18)), ("PAT", (2, 23)))


def algo_names(version: str | None) -> tuple[str, ...]:
    v = version or LATEST
    names = [n for n, since in _ALGO_SINCE if version_cmp(v, since) >= 0]
    if version_cmp(v, (2, 14)) < 0:
        names.append("CollNet")          # 2.5 - 2.13 spelling
    return tuple(names)


class AlgoProto:
    """What a NCCL_ALGO / NCCL_PROTO value does: enabled items per function, and problems.

    errors: NCCL rejects the value at init (2.24+); ignored: tokens NCCL skips silently (<2.24);
    empty_funcs: functions left with nothing enabled (collectives then fail); warn: for each
    error, the line NCCL itself WARNs (src/graph/tuning.cc parseList), for the simulator.
    """

    __slots__ = ("enabled", "errors", "ignored", "empty_funcs", "warn")

    def __init__(self):
        self.enabled: dict[str, set[str]] = {}
        self.errors: list[str] = []
        self.ignored: list[str] = []
        self.empty_funcs: list[str] = []
        self.warn: list[str] = []


def parse_algo_proto(value: str, kind: str, *, version: str | None = None) -> AlgoProto:
    """Parse `value` of NCCL_ALGO (kind "algo") or NCCL_PROTO (kind "proto") as `version` would."""
    items = algo_names(version) if kind == "algo" else PROTOS
    lower = {i.lower(): i for i in items}
    out = AlgoProto()
    everything = set(items)
    out.enabled = {f: set(everything) for f in FUNCS}
    modern = version is None or version_cmp(version, (2, 24)) >= 0

    def apply(funcs, text: str) -> None:
        neg = text.startswith("^")
        body = text[1:] if neg else text
        chosen: set[str] = set()
        for tok in body.split(","):
            if tok == "":
                continue
            name = lower.get(tok.lower())
            if name is None:
                if modern:
                    out.errors.append(f"unknown {'algorithm' if kind == 'algo' else 'protocol'} {tok!r}")
                    out.warn.append(f'Unrecognized element token "{tok}" when parsing "{value}"')
                else:
                    out.ignored.append(tok)
                continue
            chosen.add(name)
        for f in funcs:
            out.enabled[f] = (everything - chosen) if neg else chosen

    if not modern:
        apply(FUNCS, value)
    else:
        for n, entry in enumerate(value.split(";")):
            if entry == "":
                continue
            func, sep, rest = entry.partition(":")
            if sep:
                f = next((x for x in FUNCS if x.lower() == func.lower()), None)
                if f is None:
                    out.errors.append(f"unknown function prefix {func!r}")
                    out.warn.append(f'Unrecognized prefix token "{func}" when parsing "{value}"')
                    continue
                apply((f,), rest)
            elif n == 0:
                apply(FUNCS, entry)
            else:
                out.errors.append(f"entry {entry!r} has no function prefix (only the first entry may omit it)")
                out.warn.append(f'All entries except the first must have a prefix: "{value}"')
    if not out.errors:
        out.empty_funcs = [f for f in FUNCS if not out.enabled[f]]
    return out


__all__ = [
    "LATEST", "version_tuple", "version_cmp", "check_version_spec", "version_matches",
    "IntParse", "strtoll", "is_power_of_two", "ListEntry", "NcclList", "parse_list", "entry_matches",
    "ib_hca_max_entries", "level_names", "parse_level", "FUNCS", "PROTOS", "algo_names", "AlgoProto",
    "parse_algo_proto",
]
