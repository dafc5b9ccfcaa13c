"""NCCL env from several sources, layered the way NCCL layers them, with the source of each value.

NCCL's own precedence (nccl_facts.md 1.2): the process environment beats NCCL_CONF_FILE (or
~/.nccl.conf), which beats /etc/nccl.conf; inside one file the first line wins. ncdoc adds its
own layers on top for `--env K=V` and `--env-file F` (those are what the job will export).

Env files: `*.conf` files are read as nccl.conf (verbatim, NCCL's rules); anything else as a
shell-style env file (`export K=V`, `K="V"`, comments), which is how job scripts and
.env files spell it.
"""

from __future__ import annotations

import re
from ncdoc.errors import InputError, read_text
from ncdoc.snapshot import EnvValue, NcclEnv, Status

TYPE_CHECKING = False      # typing is not imported at run time (start-up cost); type checkers see this
if TYPE_CHECKING:
    from typing import Iterable, Mapping

_ASSIGN = re.compile(r"^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)=(.*)$")


def layer(*layers: Iterable[EnvValue], removed: Iterable[str] = (), files: Iterable[str] = (),
          source: str = "") -> NcclEnv:
    """Effective env from layers given highest precedence first; later duplicates are shadowed."""
    gone = set(removed)
    effective: dict[str, EnvValue] = {}
    shadowed: list[EnvValue] = []
    for lay in layers:
        for v in lay:
            if v.name in gone:
                continue
            if v.name in effective:
                shadowed.append(v)
            else:
                effective[v.name] = v
    return NcclEnv(status=Status.ok(source or "layers"),
                   values=tuple(sorted(effective.values(), key=lambda v: v.name)),
                   shadowed=tuple(shadowed), files=tuple(files))


def overlay(base: NcclEnv | None, values: Mapping[str, str | None], *, source: str = "cli",
            conf: Iterable[EnvValue] = ()) -> NcclEnv:
    """`values` (None = unset) over `base` (a snapshot's env) over extra config-file values."""
    top = [EnvValue(k, str(v), source) for k, v in values.items() if v is not None]
    removed = [k for k, v in values.items() if v is None]
    base_values = list(base.values) if base else []
    env = layer(top, base_values, list(conf), removed=removed,
                files=base.files if base else (), source=f"{source}+{base.status.source if base else 'none'}")
    if base and base.shadowed:
        env = NcclEnv(env.status, env.values, env.shadowed + tuple(v for v in base.shadowed
                                                                    if v.name not in removed), env.files)
    return env


def parse_conf(text: str, source: str) -> list[EnvValue]:
    """nccl.conf lines exactly as NCCL reads them (all names kept, duplicates kept in order)."""
    try:
        from ncdoc.probes.nccl_env import parse_conf_text
    except ImportError:  # the probe module is not in this install: same rules, stated here
        out = []
        for n, line in enumerate(text.split("\n"), start=1):
            line = line[:-1] if line.endswith("\r") else line
            name, sep, value = line.partition("=")
            if line.startswith("#") or not sep or not name:
                continue
            out.append(EnvValue(name[:1023], value[:1023], source, n))
        return out
    return parse_conf_text(text, source)


def parse_shell_env(text: str, source: str) -> list[EnvValue]:
    """`export K=V` / `K=V` / `K="V"` lines; a line that is none of these is an error (file:line)."""
    out = []
    for n, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        m = _ASSIGN.match(line)
        if not m:
            raise InputError(f"not a KEY=VALUE line: {raw.strip()[:60]!r}", path=source, line=n)
        name, rest = m.group(1), m.group(2)
        import shlex
        try:
            parts = shlex.split(rest, comments=True, posix=True) if rest.strip() else [""]
        except ValueError as exc:
            raise InputError(f"{name}: {exc} (unbalanced quotes?)", path=source, line=n) from None
        if len(parts) > 1:
            raise InputError(f"{name}: value has unquoted spaces; quote it", path=source, line=n)
        out.append(EnvValue(name, parts[0] if parts else "", f"file:{source}", n))
    return out


def read_env_file(path: str) -> list[EnvValue]:
    """The file's assignments, highest precedence first (ready for `layer`)."""
    p = str(path)
    text = read_text(p, "an env file")
    if p.endswith(".conf"):
        return [v for v in parse_conf(text, f"file:{p}")]      # NCCL: the first line for a name wins
    return list(reversed(parse_shell_env(text, str(p))))      # a shell: the last assignment wins


def parse_assignments(items: Iterable[str]) -> dict[str, str]:
    """--env K=V arguments, in order (a later one for the same name wins, as on a command line)."""
    out: dict[str, str] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            from ncdoc.errors import UsageError
            raise UsageError(f"--env {item!r}: expected NAME=VALUE")
        out[name] = value
    return out


__all__ = ["layer", "overlay", "parse_conf", "parse_shell_env", "read_env_file", "parse_assignments"]
