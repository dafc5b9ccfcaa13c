"""Declarative rule conditions: a closed set of operators, checked against a schema, never eval'd.

A condition is a mapping, one of:

    {all: [cond, ...]}   {any: [cond, ...]}   {not: cond}
    {env: NCCL_NAME, <env-op>: arg}           a test on the effective value of a variable
    {fact: <fact name>, <fact-op>: arg}       a test on a node or version fact (FACTS below)

env ops:  set (true|false), equals, in, matches (regex, whole value), contains,
          int_eq int_ne int_gt int_ge int_lt int_le (the value read as NCCL reads integers)
fact ops: set, equals, in, contains, gt ge lt le, version_lt version_le version_gt version_ge,
          version_matches (a spec such as ">=2.21,<2.24")

Unknown facts make a test *unknown*, and logic is three-valued: `all` is false as soon as
one part is false, `any` true as soon as one part is true; a rule whose condition ends up
unknown is skipped with the reason, never passed.

Message templates may use {env:NAME} and {fact:name}.
"""

from __future__ import annotations

# `re` is imported only where a regex is user data (validation, the `matches` operator): this
# module is on the `ncdoc check` path, whose start-up budget cannot pay for the regex machinery.
from ncdoc.errors import InputError
from ncdoc.findings import Evidence, Hit, Skip
from ncdoc.nccl.parse import check_version_spec, strtoll, version_cmp, version_matches

TYPE_CHECKING = False      # typing is not imported at run time (start-up cost); type checkers see this
if TYPE_CHECKING:
    from typing import Any, Callable

_UNKNOWN = object()


def _active_ports(ctx):
    return [p for h in ctx.snapshot.hcas.hcas for p in h.ports if (p.state or "").upper() == "ACTIVE"]


def _layer(p):
    from ncdoc.nccl.devices import link_layer
    return link_layer(p)


def _nccl_ports(ctx, layer: str) -> int:
    """Active ports of `layer` that NCCL's IB transport would use under NCCL_IB_HCA."""
    from ncdoc.nccl.devices import selected_ports
    hca = ctx.env_map.get("NCCL_IB_HCA")
    return sum(1 for _, p in selected_ports(ctx.snapshot.hcas.hcas, hca.value if hca else None, ctx.nccl_version)
               if _layer(p) == layer)


def _nvswitch(ctx) -> bool:
    s = ctx.snapshot
    if any(d.kind == "nvswitch" for d in s.pci.devices):
        return True
    return any(l.remote_type == "switch" for g in s.gpus.gpus for l in g.nvlinks)


def _module(ctx, name: str):
    mods = ctx.snapshot.host.modules
    if name not in mods:
        return _UNKNOWN
    return bool(mods[name])


# fact name -> (what it needs, getter). Closed: a rule naming any other fact is rejected.
FACTS: dict[str, tuple[str, Callable[[Any], Any]]] = {
    "nccl_version": ("nccl_version", lambda c: c.nccl_version),
    "driver_version": ("versions", lambda c: c.snapshot.versions.driver),
    "cuda_driver_version": ("versions", lambda c: c.snapshot.versions.cuda_driver),
    "net_plugins": ("versions", lambda c: list(c.snapshot.versions.net_plugins)),
    "kernel": ("host", lambda c: c.snapshot.host.kernel),
    "hostname": ("host", lambda c: c.snapshot.host.hostname),
    "hypervisor": ("host", lambda c: c.snapshot.host.hypervisor),
    "cpu_vendor": ("host", lambda c: c.snapshot.host.cpu_vendor),
    "iommu": ("host", lambda c: c.snapshot.host.iommu),
    "container": ("host", lambda c: list(c.snapshot.host.container)),
    "gpu_count": ("gpus", lambda c: len(c.snapshot.gpus.gpus)),
    "fabric_manager": ("gpus", lambda c: c.snapshot.gpus.fabric_manager),
    "nvswitch": ("pci", _nvswitch),
    "rdma_device_count": ("hcas", lambda c: len(c.snapshot.hcas.hcas)),
    "active_port_count": ("hcas", lambda c: len(_active_ports(c))),
    "active_ib_ports": ("hcas", lambda c: sum(1 for p in _active_ports(c) if _layer(p) == "InfiniBand")),
    "active_roce_ports": ("hcas", lambda c: sum(1 for p in _active_ports(c) if _layer(p) == "Ethernet")),
    "nccl_ib_ports": ("hcas", lambda c: _nccl_ports(c, "InfiniBand")),
    "nccl_roce_ports": ("hcas", lambda c: _nccl_ports(c, "Ethernet")),
    "link_layers": ("hcas", lambda c: sorted({_layer(p) for p in _active_ports(c) if _layer(p)})),
}
for _m in ("nvidia_peermem", "nv_peer_mem", "nvidia_fs", "gdrdrv", "ib_core", "ib_uverbs", "mlx5_core"):
    FACTS[f"module.{_m}"] = ("host", lambda c, _m=_m: _module(c, _m))

ENV_OPS = {"set", "equals", "in", "matches", "contains",
           "int_eq", "int_ne", "int_gt", "int_ge", "int_lt", "int_le"}
FACT_OPS = {"set", "equals", "in", "contains", "gt", "ge", "lt", "le",
            "version_lt", "version_le", "version_gt", "version_ge", "version_matches"}

_NAME_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.")


def _placeholders(template: str) -> list[tuple[int, int, str, str]]:
    """(start, end, kind, name) of each {env:NAME} / {fact:name} in `template`, left to right:
    the matches of regex \\{(env|fact):([A-Za-z0-9_.]+)\\} that re.finditer would give."""
    out = []
    pos = 0
    while True:
        start = template.find("{", pos)
        if start < 0:
            return out
        pos = start + 1
        for kind in ("env", "fact"):
            if template.startswith(kind + ":", pos):
                first = end = pos + len(kind) + 1
                while end < len(template) and template[end] in _NAME_CHARS:
                    end += 1
                if end > first and template[end:end + 1] == "}":
                    out.append((start, end + 1, kind, template[first:end]))
                    pos = end + 1
                break


# ---------------------------------------------------------------- validation

def _bad(msg: str, where: tuple[str | None, int | None]) -> InputError:
    return InputError(msg, path=where[0], line=where[1])


def _line(obj: Any, key: str | None, default: int | None) -> int | None:
    lines = getattr(obj, "key_lines", None)
    if lines and key in lines:
        return lines[key]
    return getattr(obj, "line", None) or default


def validate(cond: Any, *, path: str | None = None, line: int | None = None) -> None:
    """Raise InputError (file, line, key) unless `cond` is a well-formed condition."""
    where = (path, _line(cond, None, line))
    if not isinstance(cond, dict) or not cond:
        raise _bad(f"condition must be a mapping, got {type(cond).__name__}", where)
    keys = set(cond)
    for logic in ("all", "any"):
        if logic in keys:
            if keys != {logic}:
                raise _bad(f"'{logic}' must stand alone, found also {sorted(keys - {logic})}", where)
            parts = cond[logic]
            if not isinstance(parts, list) or not parts:
                raise _bad(f"'{logic}' needs a non-empty list", (path, _line(cond, logic, line)))
            for p in parts:
                validate(p, path=path, line=_line(cond, logic, line))
            return
    if "not" in keys:
        if keys != {"not"}:
            raise _bad(f"'not' must stand alone, found also {sorted(keys - {'not'})}", where)
        validate(cond["not"], path=path, line=_line(cond, "not", line))
        return
    if "env" in keys:
        subject, ops = "env", ENV_OPS
        name = cond["env"]
        import re
        if not isinstance(name, str) or not re.fullmatch(r"NCCL_[A-Z0-9_]+", name):
            raise _bad(f"'env' must name an NCCL_* variable, got {name!r}", (path, _line(cond, "env", line)))
    elif "fact" in keys:
        subject, ops = "fact", FACT_OPS
        if cond["fact"] not in FACTS:
            raise _bad(f"unknown fact {cond['fact']!r} (known: {', '.join(sorted(FACTS))})",
                       (path, _line(cond, "fact", line)))
    else:
        raise _bad(f"unknown condition key(s) {sorted(keys)}: use all, any, not, env or fact", where)
    rest = keys - {subject}
    unknown = rest - ops
    if unknown:
        k = sorted(unknown)[0]
        raise _bad(f"unknown operator {k!r} for {subject} (allowed: {', '.join(sorted(ops))})",
                   (path, _line(cond, k, line)))
    if len(rest) != 1:
        raise _bad(f"a {subject} test needs exactly one operator, found {sorted(rest) or 'none'}", where)
    (op,) = rest
    _validate_arg(op, cond[op], (path, _line(cond, op, line)))


def _validate_arg(op: str, arg: Any, where) -> None:
    if op == "set":
        ok = isinstance(arg, bool)
    elif op == "in":
        ok = isinstance(arg, list) and bool(arg) and all(isinstance(a, (str, int)) for a in arg)
    elif op == "matches":
        ok = isinstance(arg, str)
        if ok:
            import re
            try:
                re.compile(arg)
            except re.error as exc:
                raise _bad(f"bad regex for 'matches': {exc}", where) from None
    elif op.startswith("int_") or op in ("gt", "ge", "lt", "le"):
        ok = isinstance(arg, (int, float)) and not isinstance(arg, bool)
    elif op.startswith("version_"):
        ok = isinstance(arg, str) and (check_version_spec(arg) is None if op == "version_matches"
                                       else check_version_spec(arg) is None)
    else:
        ok = isinstance(arg, (str, int, float, bool))
    if not ok:
        raise _bad(f"bad argument {arg!r} for operator {op!r}", where)


def validate_template(template: str, *, path: str | None = None, line: int | None = None) -> None:
    for _start, _end, kind, name in _placeholders(template):
        if kind == "fact" and name not in FACTS:
            raise InputError(f"message names unknown fact {name!r}", path=path, line=line)


# ---------------------------------------------------------------- evaluation

class _Eval:
    def __init__(self, ctx):
        self.ctx = ctx
        self.reasons: list[str] = []
        self.env_used: list[str] = []
        self.facts_used: dict[str, Any] = {}

    def env(self, name: str) -> str | None:
        v = self.ctx.env_map.get(name)
        return v.value if v is not None else None

    def fact(self, name: str) -> Any:
        need, getter = FACTS[name]
        why = self.ctx.missing(need)
        if why:
            self.reasons.append(why)
            return _UNKNOWN
        value = getter(self.ctx)
        if value is _UNKNOWN:
            self.reasons.append(f"{name} unknown")
        else:
            self.facts_used.setdefault(name, value)
        return value

    def run(self, cond: dict) -> bool | None:
        if "all" in cond:
            vals = [self.run(c) for c in cond["all"]]
            return False if False in vals else (None if None in vals else True)
        if "any" in cond:
            vals = [self.run(c) for c in cond["any"]]
            return True if True in vals else (None if None in vals else False)
        if "not" in cond:
            v = self.run(cond["not"])
            return None if v is None else not v
        if "env" in cond:
            name = cond["env"]
            (op,) = set(cond) - {"env"}
            value = self.env(name)
            result = _env_test(op, value, cond[op])
            if value is not None and result:
                self.env_used.append(name)
            return result
        name = cond["fact"]
        (op,) = set(cond) - {"fact"}
        value = self.fact(name)
        if value is _UNKNOWN:
            return None
        return _fact_test(op, value, cond[op])


def _env_test(op: str, value: str | None, arg: Any) -> bool:
    if op == "set":
        return (value is not None) == arg
    if value is None:
        return False
    if op == "equals":
        return value == str(arg)
    if op == "in":
        return value in [str(a) for a in arg]
    if op == "matches":
        import re
        return re.fullmatch(arg, value) is not None
    if op == "contains":
        return str(arg) in value
    parsed = strtoll(value)
    if parsed.value is None:          # empty or overflow: NCCL keeps its default
        return False
    v = parsed.value
    return {"int_eq": v == arg, "int_ne": v != arg, "int_gt": v > arg, "int_ge": v >= arg,
            "int_lt": v < arg, "int_le": v <= arg}[op]


def _fact_test(op: str, value: Any, arg: Any) -> bool:
    if op == "set":
        return (value not in (None, "", [], ())) == arg
    if value is None:
        return False
    if op == "equals":
        return value == arg
    if op == "in":
        return value in arg
    if op == "contains":
        return any(str(arg) in str(v) for v in value) if isinstance(value, (list, tuple)) else str(arg) in str(value)
    if op in ("gt", "ge", "lt", "le"):
        return {"gt": value > arg, "ge": value >= arg, "lt": value < arg, "le": value <= arg}[op]
    if op == "version_matches":
        return version_matches(str(value), arg)
    c = version_cmp(str(value), arg)
    return {"version_lt": c < 0, "version_le": c <= 0, "version_gt": c > 0, "version_ge": c >= 0}[op]


def render_message(template: str, ctx, facts: dict[str, Any] | None = None) -> str:
    def sub(kind: str, name: str) -> str:
        if kind == "env":
            v = ctx.env_map.get(name)
            return v.value if v is not None else "(unset)"
        if facts and name in facts:
            return str(facts[name])
        need, getter = FACTS[name]
        if ctx.missing(need):
            return "(unknown)"
        value = getter(ctx)
        return "(unknown)" if value is _UNKNOWN else str(value)
    parts, done = [], 0
    for start, end, kind, name in _placeholders(template):
        parts += [template[done:start], sub(kind, name)]
        done = end
    return "".join(parts) + template[done:]


def env_gate(cond: dict) -> tuple[str, ...]:
    """Variables one of which must be defined (set, even to "") for `cond` to hold; () when no such
    set can be told. Every env test but `set: false` is false on an undefined variable, so an `all`
    is gated by any part's gate, an `any` by the union of its parts' when each has one; `not` and
    fact tests give none."""
    if "all" in cond:
        return next((g for g in map(env_gate, cond["all"]) if g), ())
    if "any" in cond:
        gates = [env_gate(c) for c in cond["any"]]
        return tuple(dict.fromkeys(n for g in gates for n in g)) if gates and all(gates) else ()
    if "env" in cond:
        (op,) = set(cond) - {"env"}
        return () if _env_test(op, None, cond[op]) else (cond["env"],)
    return ()


def evaluate(rule, ctx) -> list[Hit]:
    """The engine's hook for declarative rules: one Hit when `rule.when` holds."""
    ev = _Eval(ctx)
    result = ev.run(rule.when)
    if result is None:
        raise Skip("; ".join(dict.fromkeys(ev.reasons)) or "a fact is unknown")
    if not result:
        return []
    evidence = []
    for name in dict.fromkeys(ev.env_used):
        v = ctx.env_map[name]
        evidence.append(Evidence(f"{name}={v.value}", v.source, v.line))
    for name, value in ev.facts_used.items():
        evidence.append(Evidence(f"{name}: {value}", "snapshot" if name != "nccl_version" else "version"))
    subject = next(iter(dict.fromkeys(ev.env_used)), "") or next(iter(ev.facts_used), "")
    message = render_message(rule.message or rule.summary, ctx, ev.facts_used)
    return [Hit(message=message, evidence=tuple(evidence), subject=subject,
                env_patch=dict(getattr(rule, "env_patch", {}) or {}))]


__all__ = ["FACTS", "ENV_OPS", "FACT_OPS", "validate", "validate_template", "env_gate", "evaluate", "render_message"]
