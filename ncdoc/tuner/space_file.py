"""Reading search-space files: strict validation with file, line and key for every mistake.

Format (see tuners/spaces/ib.yaml): schema_version, name, fabric, description, variables
(NAME -> values, requires, collectives, min_nccl, max_nccl, when, default), constraints
(le, product_le, not_both) and starts. Unknown keys, operators and names are errors.
"""

from __future__ import annotations

from typing import Any

from ncdoc.errors import InputError, UsageError
from ncdoc.resources import data_dir
from ncdoc.tuner import datafile
from ncdoc.tuner.datafile import check_keys, line_of
from ncdoc.tuner.space import (CAPABILITIES, COLLECTIVES, CONDITION_OPS, CONSTRAINT_OPS, FABRICS, UNSET, Choice,
                               Condition, Constraint, SearchSpace, Variable)
from ncdoc.startup.compiled_patterns import precompiled

_SPACE_KEYS = ("schema_version", "name", "fabric", "description", "variables", "constraints", "starts")
_VAR_KEYS = ("values", "requires", "collectives", "min_nccl", "max_nccl", "when", "default", "description",
             "screen")
_VALUE_KEYS = ("value", "requires", "collectives", "min_nccl", "max_nccl")
_VAR_NAME = precompiled(r"NCCL_[A-Z0-9_]+\Z")
_VERSION = precompiled(r"\d+(\.\d+){0,2}\Z")

def default_space_path(fabric: str):
    if fabric not in FABRICS:
        raise UsageError(f"unknown fabric {fabric!r} (expected one of {', '.join(FABRICS)})")
    return data_dir("tuners") / "spaces" / f"{fabric}.yaml"


def load_space(path_or_fabric: str) -> SearchSpace:
    """A space from a file path, or the shipped space of a fabric ("ib", "roce", "socket")."""
    path = default_space_path(path_or_fabric) if path_or_fabric in FABRICS else path_or_fabric
    return parse_space(datafile.load(path), str(path))


def _names(raw: Any, allowed: tuple[str, ...], what: str, path: str, line: int | None) -> tuple[str, ...]:
    if not isinstance(raw, list) or not all(isinstance(x, str) for x in raw):
        raise InputError(f"{what} must be a list of names", path=path, line=line)
    for x in raw:
        if x not in allowed:
            raise InputError(f"unknown name {x!r} in {what} (known: {', '.join(allowed)})", path=path, line=line)
    return tuple(raw)


def _version(raw: Any, what: str, path: str, line: int | None) -> str | None:
    if raw is None:
        return None
    if not isinstance(raw, str) or not _VERSION.match(raw):
        raise InputError(f"{what} must be a quoted version like \"2.18\" or \"2.18.3\", got {raw!r}",
                         path=path, line=line)
    return raw


def _value(raw: Any, what: str, path: str, line: int | None) -> str:
    if isinstance(raw, bool) or not isinstance(raw, (str, int)):
        raise InputError(f"{what}: values must be strings or integers, got {raw!r}", path=path, line=line)
    text = str(raw)
    if not text or any(ch in text for ch in "\n\r\0"):
        raise InputError(f"{what}: empty value or one with a line break/NUL", path=path, line=line)
    return text


def _common(raw: dict, what: str, path: str) -> dict[str, Any]:
    return {"requires": _names(raw.get("requires", []), CAPABILITIES, f"{what} requires", path,
                               line_of(raw, "requires")),
            "collectives": _names(raw.get("collectives", []), COLLECTIVES, f"{what} collectives", path,
                                  line_of(raw, "collectives")),
            "min_nccl": _version(raw.get("min_nccl"), f"{what} min_nccl", path, line_of(raw, "min_nccl")),
            "max_nccl": _version(raw.get("max_nccl"), f"{what} max_nccl", path, line_of(raw, "max_nccl"))}


def _variable(name: str, raw: Any, seen: list[str], path: str, line: int | None) -> Variable:
    what = f"variable {name}"
    if not _VAR_NAME.match(name):
        raise InputError(f"{name!r} is not an NCCL variable name (NCCL_...)", path=path, line=line)
    check_keys(raw, _VAR_KEYS, what, path, line, required=("values",))
    values = raw["values"]
    vline = line_of(raw, "values", line)
    if not isinstance(values, list) or not values:
        raise InputError(f"{what}: values must be a non-empty list", path=path, line=vline)
    choices: list[Choice] = []
    for item in values:
        if isinstance(item, dict):
            check_keys(item, _VALUE_KEYS, f"a value of {name}", path, line_of(item), required=("value",))
            value = _value(item["value"], what, path, line_of(item, "value"))
            choices.append(Choice(value, **_common(item, f"{name}={value}", path)))
        else:
            choices.append(Choice(_value(item, what, path, vline)))
    seen_values = [c.value for c in choices]
    dup = {v for v in seen_values if seen_values.count(v) > 1}
    if dup:
        raise InputError(f"{what}: value(s) {sorted(dup)} listed twice", path=path, line=vline)
    if UNSET not in seen_values:
        choices.insert(0, Choice(UNSET))       # unset (NCCL's default) is always a choice
    else:
        choices.sort(key=lambda c: c.value != UNSET)
    when: list[Condition] = []
    if "when" in raw:
        wline = line_of(raw, "when", line)
        if not isinstance(raw["when"], dict) or not raw["when"]:
            raise InputError(f"{what}: when must map an earlier variable to {{in: [...]}} or {{not_in: [...]}}",
                             path=path, line=wline)
        for other, cond in raw["when"].items():
            cline = line_of(raw["when"], other, wline)
            if other not in seen:
                raise InputError(f"{what}: condition on {other!r}, which is not a variable listed before it",
                                 path=path, line=cline)
            check_keys(cond, CONDITION_OPS, f"condition on {other}", path, cline)
            if len(cond) != 1:
                raise InputError(f"condition on {other} needs exactly one of: in, not_in", path=path, line=cline)
            (op, vals), = cond.items()
            if not isinstance(vals, list) or not vals:
                raise InputError(f"condition on {other}: {op} needs a list of values", path=path, line=cline)
            when.append(Condition(other, op, tuple(_value(v, what, path, cline) for v in vals)))
    default = raw.get("default")
    if default is not None and (isinstance(default, bool) or not isinstance(default, (int, float))):
        raise InputError(f"{what}: default must be a number", path=path, line=line_of(raw, "default", line))
    screen: tuple[str, ...] = ()
    if "screen" in raw:
        sline = line_of(raw, "screen", line)
        items = raw["screen"] if isinstance(raw["screen"], list) else [raw["screen"]]
        screen = tuple(_value(v, what, path, sline) for v in items)
        bad = [v for v in screen if v not in seen_values or v == UNSET]
        if bad or not screen:
            raise InputError(f"{what}: screen must name values from its list other than unset (got {bad or 'none'})",
                             path=path, line=sline)
    return Variable(name, tuple(choices), when=tuple(when), screen=screen,
                    default=float(default) if default is not None else None, **_common(raw, what, path))


def _constraint(raw: Any, names: list[str], path: str, line: int | None) -> Constraint:
    if not isinstance(raw, dict):
        raise InputError("a constraint must be a mapping like {le: [A, B]}", path=path, line=line)
    ops = [k for k in raw if k in CONSTRAINT_OPS]
    unknown = [k for k in raw if k not in CONSTRAINT_OPS and k != "max"]
    if unknown:
        raise InputError(f"unknown constraint operator {unknown[0]!r} (known: {', '.join(CONSTRAINT_OPS)})",
                         path=path, line=line_of(raw, unknown[0], line))
    if len(ops) != 1:
        raise InputError(f"a constraint needs exactly one operator ({', '.join(CONSTRAINT_OPS)})",
                         path=path, line=line_of(raw, None, line))
    op = ops[0]
    check_keys(raw, (op, "max") if op == "product_le" else (op,), f"constraint {op}", path, line)
    cline = line_of(raw, op, line)
    if op == "not_both":
        if not isinstance(raw[op], dict) or len(raw[op]) < 2:
            raise InputError("not_both maps two or more variables to their conflicting values",
                             path=path, line=cline)
        vars_, bad = tuple(raw[op]), tuple(tuple(_value(x, "not_both", path, cline) for x in v)
                                           if isinstance(v, list) else None for v in raw[op].values())
        if any(b is None for b in bad):
            raise InputError("not_both: each variable needs a list of values", path=path, line=cline)
    else:
        vars_, bad = raw[op], ()
        if not isinstance(vars_, list) or len(vars_) != 2 or not all(isinstance(v, str) for v in vars_):
            raise InputError(f"{op} needs a list of two variable names", path=path, line=cline)
        vars_ = tuple(vars_)
    for v in vars_:
        if v not in names:
            raise InputError(f"constraint {op} names {v!r}, which is not a variable of this space",
                             path=path, line=cline)
    limit = raw.get("max")
    if op == "product_le" and (isinstance(limit, bool) or not isinstance(limit, (int, float))):
        raise InputError("product_le needs a numeric max", path=path, line=cline)
    return Constraint(op, vars_, float(limit) if limit is not None else None, bad)


def _list(raw: Any, what: str, path: str, line: int | None) -> list:
    if not isinstance(raw, list):
        raise InputError(f"{what} must be a list", path=path, line=line)
    return raw


def _start(raw: Any, variables: dict[str, Variable], path: str, line: int | None) -> tuple[tuple[str, str], ...]:
    """A known-good point (e.g. a vendor's platform defaults) the study measures right after NCCL's defaults."""
    line = line_of(raw, None, line)
    if not isinstance(raw, dict) or not raw:
        raise InputError("each start must map variables of the space to one of their values", path=path, line=line)
    out = []
    for name, value in raw.items():
        if name not in variables:
            raise InputError(f"start names {name!r}, which is not a variable of this space", path=path,
                             line=line_of(raw, name, line))
        text = _value(value, f"start {name}", path, line_of(raw, name, line))
        if text not in variables[name].values:
            raise InputError(f"start value {name}={text} is not one of its values", path=path,
                             line=line_of(raw, name, line))
        out.append((name, text))
    return tuple(out)


def parse_space(data: Any, path: str) -> SearchSpace:
    check_keys(data, _SPACE_KEYS, "search space", path, 1, required=("schema_version", "variables"))
    if data["schema_version"] != 1:
        raise InputError(f"search space schema_version {data['schema_version']!r} is not supported (use 1)",
                         path=path, line=line_of(data, "schema_version"))
    fabric = data.get("fabric", "any")
    if fabric not in FABRICS + ("any",):
        raise InputError(f"unknown fabric {fabric!r} (expected one of {', '.join(FABRICS)}, any)",
                         path=path, line=line_of(data, "fabric"))
    raw_vars = data["variables"]
    if not isinstance(raw_vars, dict) or not raw_vars:
        raise InputError("variables must map NCCL variable names to their values", path=path,
                         line=line_of(data, "variables"))
    seen: list[str] = []
    variables = []
    for name, raw in raw_vars.items():
        variables.append(_variable(name, raw, seen, path, line_of(raw_vars, name)))
        seen.append(name)
    raw_cons = _list(data.get("constraints", []), "constraints", path, line_of(data, "constraints"))
    cons = tuple(_constraint(c, seen, path, line_of(c, None, line_of(data, "constraints"))) for c in raw_cons)
    starts = tuple(_start(p, {v.name: v for v in variables}, path, line_of(data, "starts"))
                   for p in _list(data.get("starts", []), "starts", path, line_of(data, "starts")))
    return SearchSpace(name=str(data.get("name") or path), fabric=fabric, variables=tuple(variables), starts=starts,
                       constraints=cons, description=str(data.get("description", "")).strip(), source=path)
