"""Environment files: one set of NCCL variables rendered for the place it will be used.

Formats: `sh` (export lines, every value shell-quoted, what `nccl.env` holds), `dotenv`,
`nccl.conf` (NCCL's own config file), `slurm` (a batch-script block), `k8s` (a container
`env:` list) and `json`. Each format either represents a value exactly or refuses it with
the variable's name: a value that would arrive changed is worse than no file.

Comments (why each variable is set, notes, headers) quote names from the node: HCA, interface and
hypervisor names, a study's name. Those come from other people's machines, and a newline in one
would end the comment and make the rest a command run by `. ./nccl.env`. So every comment is one
line in every format: control characters and line separators are written as escapes (`\n`,
`\x1b`, `\u2028`), and in nccl.conf '=' is written " is " (NCCL before 2.26 reads a '#' line
holding '=' as a variable).

Files are written atomically (temp file in the same folder, then os.replace), so a reader
never sees half a file, even when the writer is killed.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Mapping

from ncdoc.errors import CONTROL_ESCAPES, InputError, shown
from ncdoc.startup.compiled_patterns import precompiled

FORMATS = ("sh", "dotenv", "nccl.conf", "slurm", "k8s", "json")
# Where each format goes when written next to nccl.env (sh is nccl.env itself).
FILE_NAMES = {"sh": "nccl.env", "dotenv": "nccl.dotenv", "nccl.conf": "nccl.conf",
              "slurm": "nccl.slurm.sh", "k8s": "nccl.k8s.yaml", "json": "nccl.env.json"}

JSON_SCHEMA_VERSION = 1

_NAME = precompiled(r"[A-Za-z_][A-Za-z0-9_]*\Z")
# NCCL's config-file reader (src/misc/param.cc) splits at the first '=', strips only the line end,
# and truncates names and values at 1023 characters; it never removes quotes or blanks.
_NCCL_CONF_MAX = 1023
# Characters a reader of nccl.conf would take for quoting or shell syntax. NCCL keeps them
# literally, so a value holding them cannot be written there unambiguously.
_NCCL_CONF_BAD = precompiled(r"[\s'\"\\`$]")
_DOTENV_BARE = precompiled(r"[A-Za-z0-9_./:,=^@%+\-]*\Z")


def _check(values: Mapping[str, str]) -> None:
    for name, value in values.items():
        if not isinstance(name, str) or not _NAME.match(name):
            raise InputError(f"{name!r} is not a valid environment variable name")
        if not isinstance(value, str):
            raise InputError(f"{name}: value must be a string, got {type(value).__name__}")
        if "\0" in value:
            raise InputError(f"{name}: value contains a NUL byte, which an environment cannot hold")
        if value.translate(_COMMENT_ESCAPES) != value:
            # \n ends a line for every reader; \r, \v, \f, \x1c-\x1e, \x85, U+2028/9 end one for some
            # (Python's str.splitlines); escape sequences drive the terminal of whoever reads the file
            raise InputError(f"{name}: value {shown(value)} contains a line break or control character, which "
                             "no env file format can carry safely; remove it")


# What would end or bend a comment line: C0 controls (tab kept), DEL, C1 controls (U+0085 is a YAML line
# break), the Unicode line and paragraph separators; written as the escapes Python would print.
_COMMENT_ESCAPES = {**CONTROL_ESCAPES, 0xfeff: "\\ufeff"}


def comment_safe(text) -> str:
    """`text` as the body of one comment line: nothing in it can end the line or hide in it."""
    text = str(text)
    return text.translate(_COMMENT_ESCAPES)


def comment_lines(texts, fmt: str) -> list[str]:
    """Each text of `texts` as one comment line of format `fmt` ("# ..."; nccl.conf without '=')."""
    out = []
    for text in texts:
        body = comment_safe(text)
        if fmt == "nccl.conf":
            body = body.replace("=", " is ")
        out.append(f"# {body}" if body else "#")
    return out


def _comment_lines(text: str | None) -> list[str]:
    return comment_lines([text], "sh") if text else []


def _sh(values: Mapping[str, str], comments: Mapping[str, str]) -> list[str]:
    out: list[str] = []
    for name, value in values.items():
        out += _comment_lines(comments.get(name))
        out.append(f"export {name}={shlex.quote(value)}")
    return out


def _dotenv(values: Mapping[str, str], comments: Mapping[str, str]) -> list[str]:
    out: list[str] = []
    for name, value in values.items():
        if _DOTENV_BARE.match(value):
            rendered = value
        elif "'" not in value:
            # Single quotes are literal in docker compose and python-dotenv alike.
            rendered = f"'{value}'"
        else:
            raise InputError(f"{name}: value {value!r} holds a single quote, which dotenv readers "
                             "disagree on; use --format sh or json")
        out += _comment_lines(comments.get(name))
        out.append(f"{name}={rendered}")
    return out


def _nccl_conf(values: Mapping[str, str], comments: Mapping[str, str]) -> list[str]:
    out: list[str] = []
    for name, value in values.items():
        if _NCCL_CONF_BAD.search(value):
            raise InputError(f"{name}: value {value!r} needs quoting, but NCCL's config file takes "
                             "values literally (no quote removal); use --format sh")
        if len(name) > _NCCL_CONF_MAX or len(value) > _NCCL_CONF_MAX:
            raise InputError(f"{name}: NCCL truncates config-file names and values at "
                             f"{_NCCL_CONF_MAX} characters")
        # Comments only where NCCL reads them as such: lines starting with '#' (2.26+); older
        # releases skip them anyway because they hold no '='... unless the comment has one.
        out += comment_lines([comments[name]] if comments.get(name) else [], "nccl.conf")
        out.append(f"{name}={value}")
    return out


def _slurm(values: Mapping[str, str], comments: Mapping[str, str]) -> list[str]:
    head = ["# NCCL settings for a Slurm batch script: put these lines before the first srun.",
            "# srun passes the environment to every task by default (--export=ALL); if the job",
            "# was submitted with --export=NONE, add --export=ALL to srun."]
    return head + _sh(values, comments)


def _k8s(values: Mapping[str, str], comments: Mapping[str, str]) -> list[str]:
    out = ["# container spec fragment: paste under spec.containers[].", "env:" if values else "env: []"]
    for name, value in values.items():
        out += ["  " + c for c in _comment_lines(comments.get(name))]
        # A JSON string is a valid YAML double-quoted scalar: every character survives.
        out += [f"  - name: {name}", f"    value: {json.dumps(value)}"]
    return out


def render_env(values: Mapping[str, str], fmt: str, comments: Mapping[str, str] | None = None) -> str:
    """Render `values` (name -> value, in order) as an env file of format `fmt`.

    `comments` (name -> text) are written above each variable where the format has comments.
    Raises InputError for a value the format cannot carry unchanged (line breaks and NUL in
    every format; quoting-dependent values in nccl.conf; ...).
    """
    if fmt not in FORMATS:
        raise InputError(f"unknown env file format {fmt!r} (expected one of {', '.join(FORMATS)})")
    _check(values)
    notes = dict(comments or {})
    if fmt == "json":
        body = {"schema_version": JSON_SCHEMA_VERSION, "env": dict(values)}
        if notes:
            body["comments"] = {k: notes[k] for k in values if k in notes}
        return json.dumps(body, indent=2) + "\n"
    lines = {"sh": _sh, "dotenv": _dotenv, "nccl.conf": _nccl_conf, "slurm": _slurm, "k8s": _k8s}[fmt](
        values, notes)
    return "\n".join(lines) + "\n"


def write_atomic(path: str | Path, text: str) -> Path:
    """Write an env file (or any output file beside it) whole or not at all, making its folder
    (ncdoc.readers.textfile.write_user_file: the one writer)."""
    from ncdoc.readers.textfile import write_user_file
    return Path(write_user_file(path, text, "the file", make_dirs=True))
