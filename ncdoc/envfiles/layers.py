"""NCCL env from several sources, layered the way NCCL layers them, with the source of each value.

The one place env values are parsed from the command line and from env files, and the one
layering every command uses (lint, check, doctor, env show, triage, the live probe, rule cases):

    parse_env_args(["NCCL_IB_HCA=mlx5_0"])     --env arguments -> values (UsageError, exit 2)
    read_env_file(path)                         an env file -> values, highest precedence first
    layer(top, ..., bottom)                     layers -> the effective NcclEnv, losers kept as shadowed
    job_env(base, env=..., files=..., reported=...)   what a job sees: --env > files > runs > node

NCCL's own precedence (nccl_facts.md 1.2): the process environment beats NCCL_CONF_FILE (or
~/.nccl.conf), which beats /etc/nccl.conf; inside one file the first line wins. ncdoc adds its
own layers on top for `--env K=V` and `--env-file F` (those are what the job will export).

Env files: `*.conf` files are read as nccl.conf (verbatim, NCCL's rules); anything else as a
shell-style env file (`export K=V`, `K="V"`, comments), which is how job scripts and
.env files spell it.

nccl.conf line rules, copied from NCCL (src/misc/param.cc): lines are at most 4095 characters
(fgets into 4096 bytes; the rest reads as the next line), one trailing "\\n" then one trailing
"\\r" are dropped, lines starting with '#' are skipped (a comment since 2.26; before that such a
line defined a variable whose name starts with '#', which nothing reads, so the effect is the
same), the text splits at the first '=', lines without '=' are skipped, and there is no
whitespace trimming or quote removal: "NCCL_DEBUG = INFO" sets a variable named "NCCL_DEBUG ".
Names and values are cut at 1023 characters.

On the `ncdoc check` path with --env: no `re` (the shell-file reader imports it when it runs).
"""

from __future__ import annotations

from ncdoc.errors import InputError, shown, UsageError
from ncdoc.snapshot import EnvValue, NcclEnv, Status

TYPE_CHECKING = False      # typing is not imported at run time (start-up cost); type checkers see this
if TYPE_CHECKING:
    from typing import Iterable, Mapping, Sequence

CLI_SOURCE = "cli:--env"     # the source of a value given with --env
_LINE_MAX = 4095             # fgets(line, 4096, file)
_FIELD_MAX = 1023            # envVar[1024], envValue[1024]


# ---------------------------------------------------------------- layering

def layer(*layers: Iterable[EnvValue] | NcclEnv, removed: Iterable[str] = (), files: Iterable[str] = (),
          source: str = "layers", status: Status | None = None) -> NcclEnv:
    """The effective env from layers given highest precedence first.

    A layer is values in its own precedence order (the first for a name wins, as in nccl.conf;
    read_env_file orders a shell file so) or an NcclEnv, whose shadowed values stay shadowed.
    Every value a higher one beats is kept as shadowed, so a rule can say which setting lost;
    names in `removed` (unset) are dropped everywhere."""
    gone = set(removed)
    effective: dict[str, EnvValue] = {}
    shadowed: list[EnvValue] = []
    carried: list[EnvValue] = []
    for lay in layers:
        if isinstance(lay, NcclEnv):
            carried.extend(v for v in lay.shadowed if v.name not in gone)
            lay = lay.values
        for v in lay:
            if v.name in gone:
                continue
            if v.name in effective:
                shadowed.append(v)
            else:
                effective[v.name] = v
    return NcclEnv(status=status or Status.ok(source),
                   values=tuple(sorted(effective.values(), key=lambda v: v.name)),
                   shadowed=tuple(shadowed + carried), files=tuple(files))


def job_env(base: NcclEnv | None, *, env: Sequence[str] = (), files: Sequence[Iterable[EnvValue] | NcclEnv] = (),
            reported: Sequence[Iterable[EnvValue]] = (), source: str = "layers") -> NcclEnv | None:
    """The env a job sees: --env arguments (`env`, "NAME=VALUE") beat the env or launch files it
    sources (`files`, in command-line order: a later file beats an earlier one, as when sourced in
    turn), which beat what its runs reported (`reported`: NCCL logs, nccl-tests JSON), which beat
    `base` (the node's env: a snapshot's, or this process's with NCCL's config files).

    `base` itself (possibly None) when nothing is layered on top of it."""
    top = parse_env_args(env)
    if not top and not any(files) and not any(reported):
        return base
    stack: list[Iterable[EnvValue] | NcclEnv] = [top, *reversed(files), *reported]
    if base is not None:
        stack.append(base)
    return layer(*stack, files=base.files if base is not None else (), source=source)


def overlay(base: NcclEnv | None, values: Mapping[str, str | None], *, source: str = "cli",
            conf: Iterable[EnvValue] = ()) -> NcclEnv:
    """`values` (None = unset) over `base` (a snapshot's env) over extra config-file values."""
    top = [EnvValue(k, str(v), source) for k, v in values.items() if v is not None]
    removed = [k for k, v in values.items() if v is None]
    stack: list[Iterable[EnvValue] | NcclEnv] = [top]
    if base is not None:
        stack.append(base)
    return layer(*stack, list(conf), removed=removed, files=base.files if base else (),
                 source=f"{source}+{base.status.source if base else 'none'}")


# ---------------------------------------------------------------- the command line

def _is_name(name: str) -> bool:
    """A shell variable name: ASCII letters, digits and '_', not starting with a digit."""
    return (name.isascii() and (name[0].isalpha() or name[0] == "_")
            and all(c.isalnum() or c == "_" for c in name))


def parse_env_args(items: Iterable[str]) -> list[EnvValue]:
    """--env NAME=VALUE arguments as values (source "cli:--env"); for a name given twice the later
    one wins, as on a command line. The value is kept exactly (NAME= sets it empty, NCCL_X==a keeps
    the '='). UsageError (exit 2) naming the argument for anything that is no assignment of a
    variable NCCL could read: no '=', no name, spaces around the name (NCCL reads names exactly,
    so " NCCL_IB_DISABLE" would never reach it), or a name that is no variable name."""
    out: dict[str, EnvValue] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep:
            raise UsageError(f"--env {item!r}: expected NAME=VALUE (NAME= sets it to the empty string)")
        if not name.strip():
            raise UsageError(f"--env {item!r}: no variable name before the '='")
        if name != name.strip():
            raise UsageError(f"--env {item!r}: the name {name!r} has spaces around it; NCCL reads "
                             f"names exactly and would not see {name.strip()} (write {name.strip()}=...)")
        if not _is_name(name):
            raise UsageError(f"--env {item!r}: {name!r} is not a variable name "
                             "(letters, digits and '_', not starting with a digit)")
        out.pop(name, None)
        out[name] = EnvValue(name, value, CLI_SOURCE)
    return list(out.values())


# ---------------------------------------------------------------- env files

def _physical_lines(text: str) -> list[tuple[int, str]]:
    """(line number, line) as NCCL's fgets loop sees them, overlong lines split into pieces."""
    out: list[tuple[int, str]] = []
    for number, raw in enumerate(text.split("\n"), start=1):
        pieces = [raw[i:i + _LINE_MAX] for i in range(0, len(raw), _LINE_MAX)] or [""]
        out.extend((number, piece) for piece in pieces)
    if text.endswith("\n") and out and out[-1][1] == "":
        out.pop()                   # the split after the final newline is not a line
    return out


def parse_conf(text: str, source: str) -> list[EnvValue]:
    """Every assignment in an nccl.conf text, in file order, parsed exactly as NCCL parses it.

    Names are kept verbatim (not filtered to NCCL_*; a lint wants to see "NCCL_DEBUG " too).
    Duplicates are all returned; the first one is the one NCCL applies.
    """
    values: list[EnvValue] = []
    for number, line in _physical_lines(text):
        if line.endswith("\r"):
            line = line[:-1]
        if line.startswith("#"):
            continue
        name, sep, value = line.partition("=")
        if not sep or not name:
            continue            # no '=': skipped by NCCL; empty name: setenv fails with EINVAL
        values.append(EnvValue(name=name[:_FIELD_MAX], value=value[:_FIELD_MAX], source=source, line=number))
    return values


def parse_shell_env(text: str, source: str) -> list[EnvValue]:
    """`export K=V` / `K=V` / `K="V"` lines; a line that is none of these is an error (file:line)."""
    import re

    from ncdoc.readers.shellwords import split     # linear: shlex copies a token per character
    assign = re.compile(r"^[ \t]*(?:export[ \t]+)?([A-Za-z_][A-Za-z0-9_]*)=(.*)$")
    out = []
    for n, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        m = assign.match(line)
        if not m:
            raise InputError(f"not a KEY=VALUE line: {shown(raw.strip())}", path=source, line=n)
        name, rest = m.group(1), m.group(2)
        try:
            parts = split(rest) if rest.strip() else [""]
        except ValueError as exc:
            raise InputError(f"{name}: {exc} (unbalanced quotes?)", path=source, line=n) from None
        if len(parts) > 1:
            raise InputError(f"{name}: value has unquoted spaces; quote it", path=source, line=n)
        out.append(EnvValue(name, parts[0] if parts else "", f"file:{source}", n))
    return out


def read_env_file(path: str) -> list[EnvValue]:
    """The file's assignments, highest precedence first (ready for `layer`); an empty file sets nothing."""
    from ncdoc.readers.textfile import read_user_text
    p = str(path)
    text = read_user_text(p, "an env file", empty_ok=True)
    if p.endswith(".conf"):
        return parse_conf(text, f"file:{p}")                  # NCCL: the first line for a name wins
    return list(reversed(parse_shell_env(text, p)))          # a shell: the last assignment wins


__all__ = ["CLI_SOURCE", "layer", "job_env", "overlay", "parse_env_args", "parse_conf", "parse_shell_env",
           "read_env_file"]
