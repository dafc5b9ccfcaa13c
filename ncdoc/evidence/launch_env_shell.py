"""Reading assignments out of shell scripts, sbatch files, launcher lines and YAML-like text.

Logical lines (backslash continuations joined) are split into shell words; each command is
read for leading assignments, `export`/`declare -x`/`setenv`/`env`, and launcher options
that carry environment (`-x`, `-genv`, `--export`, `-e/--env`). Lines that look like YAML
mappings, compose lists or Kubernetes `- name:/value:` pairs are read as such.
"""

from __future__ import annotations

import bisect
import re

from ncdoc.readers.shellwords import split

from ncdoc.evidence.launch_env_collector import ASSIGN, NAME, NAME_RE, Collector
from ncdoc.evidence.lazy_re import lazy
from ncdoc.evidence.launch_env_model import RELEVANT_PREFIXES, relevant

_K8S_NAME = lazy(rf"""^\s*(?:-\s*)?name:\s*["']?({NAME})["']?\s*$""")
_K8S_VALUE = lazy(r"""^\s*(value|valueFrom):\s*(.*\S|)\s*$""")
# A bare value runs to the next ',', '}' or '#' without its trailing blanks: greedy, ending on a non-blank (a lazy
# run before "\s*" would retry the whole blank run at each of its characters: 20 KB of spaces took seconds).
_MAPPING = lazy(rf"""(?<![A-Za-z0-9_])["']?({NAME})["']?[ \t]*:[ \t]*"""
                      rf"""("[^"]*"|'[^']*'|[^,{{}}\[\]#\s](?:[^,}}#]*[^,}}#\s])?)\s*(?=,|}}|#|$)""")
_LIST_ITEM = lazy(rf"""^\s*-\s*["']?({NAME})=(.*)$""")
_DIRECTIVE = lazy(r"^\s*#(SBATCH|PBS)\s+(.*)$")

# Linux runs no command line past ARG_MAX (2 MiB of arguments and environment together): a longer "command"
# is no launch line, and splitting millions of words of it would cost seconds
_MAX_COMMAND = 2 << 20
_DECLARE = ("export", "declare", "typeset", "readonly", "local")
_SEPARATORS = {";", "&", "&&", "|", "||", "(", ")", "()", ";;", "|&"}
# Words after which a shell starts a new command, whose leading NAME=V words are assignments again.
_RESERVED = {"do", "then", "else", "elif", "if", "while", "until", "time", "!", "{"}
_PROMPT = lazy(r"^\s*(?:[\w.\-]+@[\w.\-]+(?::\S*?)?\s*[$#%]|\$)\s+")
_YAMLISH = lazy(r"""^\s*(?:-\s*)?["']?[A-Za-z_][A-Za-z0-9_]*["']?\s*:(?:\s|$)""")


class ShellReader:
    def __init__(self, out: Collector):
        self.out = out

    def read(self, text: str, first_line: int = 1) -> None:
        """Read `text`, whose first line is line `first_line` of the file (a block cut from a longer text)."""
        lines = text.splitlines()
        k8s_name: tuple[str, int] | None = None
        i = 0
        out = self.out
        while i < len(lines) and not out.full:
            first = i + first_line
            parts = [lines[i]]
            while parts[-1].endswith("\\") and i + 1 < len(lines):     # continuation lines
                parts[-1] = parts[-1][:-1]
                i += 1
                parts.append(lines[i])
            if parts[-1].endswith("\\"):       # a pasted piece of a longer command: it went on past the paste
                parts[-1] = parts[-1][:-1]
            i += 1
            logical = " ".join(parts)
            starts = _starts(parts, first)
            if k8s_name is not None:
                m = _K8S_VALUE.match(logical)
                if m:
                    self._k8s_value(k8s_name, m, first)
                    k8s_name = None
                    continue
                if first - k8s_name[1] > 3:
                    k8s_name = None
            m = _K8S_NAME.match(logical)
            if m:
                k8s_name = (m.group(1), first)
                continue
            m = _DIRECTIVE.match(logical)
            if m:
                self._directive(m.group(1), m.group(2), first)
                continue
            stripped = logical.strip()
            if not stripped or stripped.startswith("#"):
                continue
            m = _LIST_ITEM.match(logical)
            if m and relevant(m.group(1)):
                value = m.group(2).rstrip()
                if value[-1:] in "\"'" and value[:-1].count(value[-1:]) % 2 == 0:
                    value = value[:-1]                   # - "NCCL_X=1": the item's closing quote
                self.out.add(m.group(1), _unquote(value), first, "yaml")
                continue
            if _YAMLISH.match(logical) or (stripped.startswith("{") and ":" in stripped):
                found = [mm for mm in _MAPPING.finditer(stripped) if NAME_RE.match(mm.group(1))]
                for mm in found:
                    self.out.add(mm.group(1), _unquote(mm.group(2)), first, "yaml")
                if found or _YAMLISH.match(logical):
                    continue
            if len(logical) > _MAX_COMMAND or not any(p in logical for p in RELEVANT_PREFIXES):
                continue            # nothing to read in it (no relevant name), or longer than any command can be
            prompt = _PROMPT.match(logical)
            if prompt:                  # a command pasted with its shell prompt: "$ NCCL_X=1 ./run", "me@n1:~$ ..."
                starts = [(max(0, off - prompt.end()), ln) for off, ln in starts]
                logical = logical[prompt.end():]
            self._commands(logical, starts)

    # ------------------------------------------------------------ pieces

    def _k8s_value(self, name: tuple[str, int], m: re.Match, line: int) -> None:
        if m.group(1) == "value":
            self.out.add(name[0], _unquote(m.group(2)), line, "kubernetes env")
        else:
            self.out.pass_through(name[0], line, "kubernetes valueFrom")

    def _directive(self, kind: str, rest: str, line: int) -> None:
        words = shell_words(rest)
        if kind == "SBATCH":
            for j, w in enumerate(words):
                if w.startswith("--export="):
                    self._export_list(w[len("--export="):], line, "sbatch --export")
                elif w == "--export" and j + 1 < len(words):
                    self._export_list(words[j + 1], line, "sbatch --export")
        else:
            for j, w in enumerate(words):
                if w == "-v" and j + 1 < len(words):
                    self._export_list(words[j + 1], line, "pbs -v")

    def _export_list(self, spec: str, line: int, how: str) -> None:
        """srun/sbatch --export=ALL,A=1,B: commas split entries, except inside a value (NCCL_IB_HCA=a,b)."""
        items: list[list[str]] = []
        for piece in spec.split(","):
            piece = _unquote(piece)
            if "=" in piece or piece in ("ALL", "NONE", "NIL") or NAME_RE.match(piece) and piece.isupper():
                items.append([piece])
            elif items and "=" in items[-1][0]:
                items[-1].append(piece)              # part of the previous value
            else:
                items.append([piece])
        for item in items:
            text = ",".join(item)
            m = ASSIGN.match(text)
            if m:
                self.out.add(m.group(1), m.group(2), line, how)
            elif NAME_RE.match(text) and text not in ("ALL", "NONE", "NIL"):
                self.out.pass_through(text, line, how)

    def _commands(self, logical: str, starts: list[tuple[int, int]]) -> None:
        words = shell_words(logical)
        cursor = [0]
        offsets = [off for off, _ in starts]

        def line_of(word: str) -> int:
            at = logical.find(word, cursor[0])
            if at < 0:
                at = logical.find(word.split("=", 1)[0], cursor[0])
            if at >= 0:
                cursor[0] = at + 1
            pos = at if at >= 0 else cursor[0]
            return starts[max(0, bisect.bisect_right(offsets, pos) - 1)][1]

        # "(" opens a subshell only where a command starts; after a command's first word it is text inside
        # that command (prose such as "Disable NVLS (NCCL_NVLS_ENABLE=0) if ...", or the "$(" of a value),
        # and so is everything up to its ")"
        cmd: list[str] = []
        depth = 0
        for w in words:
            if depth or (w == "(" and cmd):
                depth += (w == "(") - (w == ")")
                cmd.append(w)
            elif w in _SEPARATORS:
                if cmd:
                    self._command(cmd, line_of)
                cmd = []
            else:
                cmd.append(w)
        if cmd:
            self._command(cmd, line_of)

    def _command(self, words: list[str], line_of) -> None:
        """One simple command: NAME=V counts only before its command word, after export/declare/env, or as a
        launcher option's value (_options); a NAME=V after the command word is an argument, not a setting."""
        out = self.out
        while len(words) > 1 and words[0] in _RESERVED:
            words = words[1:]
        j = 0
        if words[0] in _DECLARE:
            j = 1
            while j < len(words) and words[j].startswith("-"):
                j += 1
            for w in words[j:]:
                m = ASSIGN.match(w)
                if m:
                    out.add(m.group(1), m.group(2), line_of(w), "export")
            return
        if words[0] == "unset":
            for w in words[1:]:
                if not w.startswith("-"):
                    out.remove(w, line_of(w))
            return
        if words[0] == "setenv" and len(words) >= 2:
            out.add(words[1], words[2] if len(words) > 2 else "", line_of(words[1]), "setenv")
            return
        if words[0] == "env":
            j = 1
            while j < len(words) and words[j].startswith("-"):
                j += 2 if words[j] in ("-u", "--unset", "-C", "--chdir") else 1
        prefix = []
        while j < len(words) and ASSIGN.match(words[j]):
            prefix.append(words[j])
            j += 1
        how = "command prefix" if j < len(words) else "assignment"
        for w in prefix:
            m = ASSIGN.match(w)
            out.add(m.group(1), m.group(2), line_of(w), how)
        self._options(words[j:], line_of)

    def _options(self, words: list[str], line_of) -> None:
        """Launcher options anywhere in a command line (mpirun, srun, docker, enroot...)."""
        out = self.out
        k = 0
        while k < len(words):
            w = words[k]
            nxt = words[k + 1] if k + 1 < len(words) else None
            if w in ("-x", "--env", "-e") and nxt is not None:
                how = "mpirun -x" if w == "-x" else "docker -e"
                m = ASSIGN.match(nxt)
                if m:
                    out.add(m.group(1), m.group(2), line_of(nxt), how)
                    k += 2
                    continue
                if NAME_RE.match(nxt) and (w != "-e" or nxt.isupper()):
                    out.pass_through(nxt, line_of(nxt), how)
                    k += 2
                    continue
            elif w.startswith("--env="):
                m = ASSIGN.match(w[len("--env="):])
                if m:
                    out.add(m.group(1), m.group(2), line_of(w), "docker -e")
                elif NAME_RE.match(w[len("--env="):]):
                    out.pass_through(w[len("--env="):], line_of(w), "docker -e")
            elif w in ("-genv", "-env") and nxt is not None and k + 2 < len(words) and NAME_RE.match(nxt):
                out.add(nxt, words[k + 2], line_of(nxt), f"mpirun {w}")
                k += 3
                continue
            elif w == "-genvlist" and nxt is not None:
                for name in nxt.split(","):
                    out.pass_through(name, line_of(name), "mpirun -genvlist")
                k += 2
                continue
            elif w.startswith("--export="):
                self._export_list(w[len("--export="):], line_of(w), "srun --export")
            elif w == "--export" and nxt is not None:
                self._export_list(nxt, line_of(nxt), "srun --export")
                k += 2
                continue
            k += 1


def _starts(parts: list[str], first: int) -> list[tuple[int, int]]:
    """(offset in the joined logical line, physical line number) for each part."""
    out, off = [], 0
    for n, part in enumerate(parts):
        out.append((off, first + n))
        off += len(part) + 1
    return out


def _unquote(value: str) -> str:
    v = value.strip()
    if len(v) >= 2 and v[0] == v[-1] and v[0] in "\"'":
        return v[1:-1]
    return v


def shell_words(line: str) -> list[str]:
    """Split like a POSIX shell (quotes, escapes, comments); separators ; & | ( ) are their own words."""
    try:
        return split(line, punctuation=";&|()")
    except ValueError:                               # an unbalanced quote: take the words as they are
        return line.split()
