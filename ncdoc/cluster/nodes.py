"""Node lists: Slurm hostlist expressions, MPI hostfiles, and the checks every list gets.

    expand("gpu[01-03,07],login1")  -> ["gpu01", "gpu02", "gpu03", "gpu07", "login1"]
    compress(["gpu01", "gpu02", "gpu03"]) -> "gpu[01-03]"
    read_hostfile("hosts")          -> [("gpu01", 8), ("gpu02", 8)]   (Open MPI or MPICH form)

A bad list (empty, a name twice, a hostfile naming hosts outside the allocation) is an
InputError/UsageError with one line that names the problem: ncdoc never launches on a
list it had to guess at.
"""

from __future__ import annotations

from ncdoc.errors import InputError, UsageError, shown
from ncdoc.readers.numbers import is_digits
from ncdoc.startup.compiled_patterns import precompiled

MAX_NAMES = 100_000          # names one list may expand to: more is a typo, not a cluster

_RANGE = precompiled(r"\[([^\[\]]*)\]")
_NAME = precompiled(r"[A-Za-z0-9_.\-]+\Z")


def _split_top(text: str) -> list[str]:
    """Split on commas outside brackets."""
    out, depth, cur = [], 0, []
    for ch in text:
        if ch == "[":
            depth += 1
            if depth > 1:               # Slurm's hostlists do not nest; expanding nested ones multiplies copies
                raise UsageError(f"hostlist {shown(text)}: '[' inside '[...]'")
        elif ch == "]":
            depth -= 1
            if depth < 0:
                raise UsageError(f"hostlist {shown(text)}: ']' without '['")
        if ch == "," and depth == 0:
            out.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    if depth:
        raise UsageError(f"hostlist {shown(text)}: '[' without ']'")
    out.append("".join(cur))
    return [s.strip() for s in out if s.strip()]


def _range_values(body: str, expr: str) -> list[str]:
    values = []
    for part in body.split(","):
        part = part.strip()
        lo, dash, hi = part.partition("-")
        if not is_digits(lo) or (dash and not is_digits(hi)):
            raise UsageError(f"hostlist {shown(expr)}: {shown(part)} is not a number or a range like 01-08")
        if not dash:
            values.append(lo)
            continue
        a, b = int(lo), int(hi)
        if b < a:
            raise UsageError(f"hostlist {shown(expr)}: range {part} runs backwards")
        if b - a > 100000:
            raise UsageError(f"hostlist {shown(expr)}: range {part} is implausibly large")
        width = len(lo) if lo.startswith("0") else 0
        values.extend(str(i).zfill(width) for i in range(a, b + 1))
        if len(values) > MAX_NAMES:
            raise UsageError(f"hostlist {shown(expr)} expands to more than {MAX_NAMES} names")
    return values


def expand(expr: str) -> list[str]:
    """The host names of a Slurm hostlist expression, in order (duplicates kept: see unique())."""
    names: list[str] = []
    for item in _split_top(expr):
        parts = [item]
        while True:
            nxt = []
            changed = False
            for p in parts:
                m = _RANGE.search(p)
                if not m:
                    nxt.append(p)
                    continue
                changed = True
                for v in _range_values(m.group(1), expr):
                    nxt.append(p[:m.start()] + v + p[m.end():])
                if len(nxt) + len(names) > MAX_NAMES or len(nxt) * len(p) > 64 * MAX_NAMES:
                    raise UsageError(f"hostlist {shown(expr)} expands to more than {MAX_NAMES} names")
            parts = nxt
            if not changed:
                break
        for p in parts:
            if not _NAME.match(p):
                raise UsageError(f"hostlist {shown(expr)}: {shown(p)} is not a host name")
        names.extend(parts)
    return names


_TAIL = precompiled(r"(.*?)(\d{1,20}(?!\d))\Z")


def compress(names) -> str:
    """A Slurm hostlist expression for `names` (order of first appearance per prefix)."""
    groups: dict[tuple[str, int], list[int]] = {}
    order: list[tuple[str, int] | str] = []
    names = list(names)
    # zero-padded numbers fix a width for their prefix; unpadded ones of that width belong there too
    padded = {(m.group(1), len(m.group(2))) for m in map(_TAIL.match, names)
              if m and m.group(2).startswith("0") and len(m.group(2)) > 1}
    for n in names:
        m = _TAIL.match(n)
        if not m:
            order.append(n)
            continue
        width = len(m.group(2))
        key = (m.group(1), width if (m.group(1), width) in padded else 0)
        if key not in groups:
            groups[key] = []
            order.append(key)
        groups[key].append(int(m.group(2)))
    out = []
    for key in order:
        if isinstance(key, str):
            out.append(key)
            continue
        prefix, width = key
        nums = sorted(set(groups[key]))
        if len(nums) == 1:
            out.append(f"{prefix}{str(nums[0]).zfill(width)}")
            continue
        spans, start, prev = [], nums[0], nums[0]
        for x in nums[1:] + [None]:
            if x is not None and x == prev + 1:
                prev = x
                continue
            a, b = str(start).zfill(width), str(prev).zfill(width)
            spans.append(a if start == prev else f"{a}-{b}")
            if x is not None:
                start = prev = x
        out.append(f"{prefix}[{','.join(spans)}]")
    return ",".join(out)


def unique(names, *, what: str = "node list") -> list[str]:
    """`names` unchanged, or UsageError naming the first host given twice / an empty list."""
    names = list(names)
    if not names:
        raise UsageError(f"the {what} is empty: nothing to run on")
    seen: set[str] = set()
    for n in names:
        if n in seen:
            raise UsageError(f"the {what} names {n} twice; each node must appear once")
        seen.add(n)
    return names


def read_hostfile(path: str) -> list[tuple[str, int | None]]:
    """(host, slots) per line of an Open MPI (`host slots=8`) or MPICH/Intel (`host:8`) hostfile."""
    from ncdoc.readers.textfile import read_user_text as read_text
    out: list[tuple[str, int | None]] = []
    for lineno, raw in enumerate(read_text(path, "a hostfile").splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        fields = line.split()
        host, slots = fields[0], None
        if ":" in host:
            host, _, n = host.partition(":")
            if not is_digits(n, 9):
                raise InputError(f"{shown(fields[0])}: the slot count after ':' is not a number", path=path,
                                 line=lineno)
            slots = int(n)
        for f in fields[1:]:
            key, eq, val = f.partition("=")
            if key in ("slots", "max_slots", "max-slots") and eq:
                if not is_digits(val, 9):
                    raise InputError(f"{shown(f)}: slots must be a number", path=path, line=lineno)
                if key == "slots":
                    slots = int(val)
            else:
                raise InputError(f"{shown(f)} is not an Open MPI (slots=N) or MPICH (host:N) hostfile field",
                                 path=path, line=lineno)
        if not _NAME.match(host):
            raise InputError(f"{shown(host)} is not a host name", path=path, line=lineno)
        if any(h == host for h, _ in out):
            raise InputError(f"{host} is listed twice", path=path, line=lineno)
        out.append((host, slots))
    if not out:
        raise InputError("the hostfile names no hosts", path=path)
    return out


def within(names, allowed, *, what: str, where: str) -> None:
    """UsageError when `names` holds hosts not in `allowed` (e.g. a hostfile outside the allocation)."""
    known = set(allowed)
    strangers = [n for n in names if n not in known]
    if strangers:
        shown = ", ".join(strangers[:6]) + (f" and {len(strangers) - 6} more" if len(strangers) > 6 else "")
        raise UsageError(f"{what} names host(s) not in {where}: {shown}")


SHOW = 8                   # nodes named in a message before "and N more"


def nodes_text(nodes) -> str:
    """A short name for a set of nodes: the names when few, a hostlist expression when many."""
    nodes = list(nodes)
    if len(nodes) <= 3:
        return ", ".join(nodes)
    expr = compress(nodes)
    if len(expr) <= 60:
        return expr
    return ", ".join(nodes[:SHOW]) + f" and {len(nodes) - SHOW} more"


__all__ = ["expand", "compress", "unique", "read_hostfile", "within", "nodes_text"]
