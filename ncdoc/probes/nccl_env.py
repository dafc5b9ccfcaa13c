"""NCCL's environment, read from every source NCCL reads, in NCCL's own precedence.

What libnccl does at init (src/misc/param.cc, nccl_facts.md 1.2):
  1. read $NCCL_CONF_FILE when it is set and non-empty (plain getenv, no ~ expansion),
     otherwise $HOME/.nccl.conf;
  2. then always read /etc/nccl.conf;
  each NAME=VALUE line is applied with setenv(name, value, overwrite=0). So the process
  environment beats the first file, which beats /etc/nccl.conf, and inside one file the
  *first* line for a name wins.
The nccl.conf line rules (NCCL's own: no trimming, the first '=' splits, ...) and the layering
are envfiles/layers.py's (parse_conf, layer), the one place ncdoc reads env files and layers env.

This module is pure apart from reading the two files, so `ncdoc lint` reuses it.
"""

from __future__ import annotations

import os

from ncdoc.envfiles.layers import layer, parse_conf
from ncdoc.snapshot import EnvValue, NcclEnv, Status

TYPE_CHECKING = False      # typing is not imported at run time (start-up cost); type checkers see this
if TYPE_CHECKING:
    from typing import Mapping

ETC_CONF = "/etc/nccl.conf"


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
        layers.append([v for v in parse_conf(text, f"file:{path}") if v.name.startswith("NCCL_")])

    # A file we cannot read may still be readable by the job's user: the status stays ok and
    # says so, rather than pretending the file is empty.
    source = "env" + "".join(f"+file:{f}" for f in files_read)
    # highest precedence first; setenv(..., 0) keeps the first
    return layer(*layers, files=files_read, status=Status("ok", "; ".join(problems), source))
