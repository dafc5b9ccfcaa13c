"""NCCL's environment, read from every source NCCL reads, in NCCL's own precedence.

What libnccl does at init (src/misc/param.cc, nccl_facts.md 1.2):
  1. read $NCCL_CONF_FILE when it is set and non-empty (plain getenv, no ~ expansion),
     otherwise $HOME/.nccl.conf;
  2. then always read /etc/nccl.conf;
  each NAME=VALUE line is applied with setenv(name, value, overwrite=0). So the process
  environment beats the first file, which beats /etc/nccl.conf, and inside one file the
  *first* line for a name wins.
Line rules copied from NCCL: lines are at most 4095 characters (fgets into 4096 bytes; the
rest reads as the next line), one trailing "\\n" then one trailing "\\r" are dropped, lines
starting with '#' are skipped (a comment since 2.26; before that such a line defined a
variable whose name starts with '#', which nothing reads, so the effect is the same), the
text splits at the first '=', lines without '=' are skipped, and there is no whitespace
trimming or quote removal: "NCCL_DEBUG = INFO" sets a variable named "NCCL_DEBUG ".
Names and values are cut at 1023 characters.

This module is pure apart from reading the two files, so `ncdoc lint` reuses it.
"""

from __future__ import annotations

import os
from typing import Mapping

from ncdoc.snapshot import EnvValue, NcclEnv, Status

ETC_CONF = "/etc/nccl.conf"
_LINE_MAX = 4095       # fgets(line, 4096, file)
_FIELD_MAX = 1023      # envVar[1024], envValue[1024]


def _physical_lines(text: str) -> list[tuple[int, str]]:
    """(line number, line) as NCCL's fgets loop sees them, overlong lines split into pieces."""
    out: list[tuple[int, str]] = []
    for number, raw in enumerate(text.split("\n"), start=1):
        pieces = [raw[i:i + _LINE_MAX] for i in range(0, len(raw), _LINE_MAX)] or [""]
        out.extend((number, piece) for piece in pieces)
    if text.endswith("\n") and out and out[-1][1] == "":
        out.pop()                   # the split after the final newline is not a line
    return out


def parse_conf_text(text: str, source: str) -> list[EnvValue]:
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
        values.append(EnvValue(name=name[:_FIELD_MAX], value=value[:_FIELD_MAX],
                               source=source, line=number))
    return values


def _in_root(root: str, path: str) -> str:
    if root in ("", "/"):
        return path
    return os.path.join(root, path.lstrip("/"))


def _read_conf(root: str, path: str) -> tuple[str | None, str | None]:
    """(text, problem): text None when the file is absent or unreadable."""
    try:
        with open(_in_root(root, path), "rb") as fh:
            return fh.read().decode("utf-8", "replace"), None
    except FileNotFoundError:
        return None, None
    except IsADirectoryError:
        return None, f"{path} is a directory, NCCL cannot read it"
    except OSError as exc:
        return None, f"{path} cannot be read ({exc.strerror or exc})"


def config_files(environ: Mapping[str, str], home: str | None) -> list[str]:
    """The config files NCCL tries, highest precedence first (whether or not they exist)."""
    conf_file = environ.get("NCCL_CONF_FILE")
    if conf_file:
        first = conf_file              # verbatim: NCCL does not expand "~"
    else:
        home = home if home is not None else environ.get("HOME")
        first = os.path.join(home, ".nccl.conf") if home else None
    return [f for f in (first, ETC_CONF) if f]


def read_nccl_env(environ: Mapping[str, str], *, home: str | None, root: str = "/") -> NcclEnv:
    """The NCCL_* variables a job started with `environ` would see, each with its source.

    `home` is the user's home directory (None: take HOME from `environ`, as NCCL 2.30 does).
    File paths are read under `root` (a fake tree in tests); sources name the in-root path.
    """
    layers: list[list[EnvValue]] = [
        [EnvValue(name=k, value=v, source="env") for k, v in sorted(environ.items())
         if k.startswith("NCCL_")]
    ]
    files_read: list[str] = []
    problems: list[str] = []
    for path in config_files(environ, home):
        text, problem = _read_conf(root, path)
        if problem:
            problems.append(problem)
        if text is None:
            continue
        files_read.append(path)
        layers.append([v for v in parse_conf_text(text, f"file:{path}") if v.name.startswith("NCCL_")])

    effective: dict[str, EnvValue] = {}
    shadowed: list[EnvValue] = []
    for layer in layers:                  # highest precedence first; setenv(..., 0) keeps the first
        for value in layer:
            if value.name in effective:
                shadowed.append(value)
            else:
                effective[value.name] = value
    # A file we cannot read may still be readable by the job's user: the status stays ok and
    # says so, rather than pretending the file is empty.
    source = "env" + "".join(f"+file:{f}" for f in files_read)
    status = Status("ok", "; ".join(problems), source)
    return NcclEnv(status=status,
                   values=tuple(sorted(effective.values(), key=lambda v: v.name)),
                   shadowed=tuple(shadowed),
                   files=tuple(files_read))
