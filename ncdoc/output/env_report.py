"""`ncdoc env show`: the effective NCCL env with the source of each value, as a table or JSON."""

from __future__ import annotations

import json

from ncdoc.output.parts import SCHEMA_VERSION, one_line


def _value_dict(v) -> dict:
    return {"name": v.name, "value": v.value, "source": v.source, "line": v.line}


def env_dict(env) -> dict:
    out = {"schema_version": SCHEMA_VERSION, "files": list(env.files),
           "values": [_value_dict(v) for v in env.values],
           "shadowed": [_value_dict(v) for v in env.shadowed]}
    if env.status.reason:
        out["notes"] = env.status.reason
    return out


def _table(values) -> str:
    from tabulate import tabulate

    def where(v):
        return f"{v.source}:{v.line}" if v.line else v.source
    # a value is shown as a line of text whatever it holds (a newline or an escape sequence in a value
    # must not reach the terminal as one)
    return tabulate([[one_line(v.name), one_line(v.value), one_line(where(v))] for v in values],
                    headers=["variable", "value", "source"], tablefmt="simple") + "\n"


def render(env, fmt: str = "text") -> str:
    """The report on stdout: "text" (tables of the values in effect and the overridden ones) or "json"."""
    if fmt == "json":
        return json.dumps(env_dict(env), indent=2) + "\n"
    out = _table(env.values) if env.values else "no NCCL_* variables set\n"
    if env.shadowed:
        out += "\noverridden (not in effect):\n" + _table(env.shadowed)
    return out


def notes(env) -> list[str]:
    """The lines for stderr beside the text report: the config files read, and why one could not be."""
    out = [f"config files read: {', '.join(env.files) or 'none found'}"]
    if env.status.reason:
        out.append(f"note: {env.status.reason}")
    return out


__all__ = ["env_dict", "render", "notes"]
