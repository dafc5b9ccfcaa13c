"""The environment a job was launched with, read from its launch material.

Shell (`KEY=VALUE`, `export`, `declare -x`, `setenv`, `env` dumps, `NCCL_X=1 torchrun ...`),
launchers (`mpirun -x KEY[=VALUE]`, `-genv`, `srun --export=ALL,KEY=VALUE`, `#SBATCH --export`,
`#PBS -v`, `docker run -e`), YAML/JSON mappings, compose lists and Kubernetes `env:` lists.
Each assignment keeps its line and how it was made; a later assignment overrides an earlier
one and both are kept, so a rule can say which setting was silently shadowed.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from ncdoc.snapshot import EnvValue, NcclEnv, Status

# Variables that change what NCCL (or the transport under it) does.
RELEVANT_PREFIXES = ("NCCL_", "UCX_", "FI_", "NVSHMEM_", "OMPI_MCA_", "PMIX_MCA_", "TORCH_NCCL_", "CUDA_",
                     "NVIDIA_VISIBLE_DEVICES", "SHARP_", "HCOLL_", "MLX5_", "RDMAV_", "IBV_", "UCC_",
                     "GLOO_SOCKET_IFNAME", "TP_SOCKET_IFNAME", "MASTER_ADDR", "MASTER_PORT", "LD_LIBRARY_PATH",
                     "LD_PRELOAD", "HOROVOD_", "AWS_OFI_NCCL_", "OFI_NCCL_")
_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
_NAME_RE = re.compile(rf"^{_NAME}$")
_ASSIGN = re.compile(rf"^({_NAME})=(.*)$", re.S)
_K8S_NAME = re.compile(rf"""^\s*(?:-\s*)?name:\s*["']?({_NAME})["']?\s*$""")
_K8S_VALUE = re.compile(r"""^\s*(value|valueFrom):\s*(.*?)\s*$""")
_MAPPING = re.compile(rf"""(?<![A-Za-z0-9_])["']?({_NAME})["']?\s*:\s*"""
                      rf"""("[^"]*"|'[^']*'|[^,{{}}\[\]#\s][^,}}#]*?)\s*(?=,|}}|#|$)""")
_LIST_ITEM = re.compile(rf"""^\s*-\s*["']?({_NAME})=(.*)$""")
_DIRECTIVE = re.compile(r"^\s*#(SBATCH|PBS)\s+(.*)$")


@dataclass(frozen=True)
class LaunchEntry:
    value: EnvValue              # name, value, source, line
    how: str                     # "export", "assignment", "command prefix", "mpirun -x", "srun --export", ...


@dataclass(frozen=True)
class PassThrough:
    name: str                    # passed on with no value in this file (`-x NAME`, `--export=NAME`)
    line: int
    how: str


@dataclass(frozen=True)
class LaunchEnv:
    source: str
    entries: tuple[LaunchEntry, ...] = ()   # every assignment, in file order
    values: tuple[EnvValue, ...] = ()       # effective: the last assignment of each name
    shadowed: tuple[EnvValue, ...] = ()     # assignments a later one overrides (or an unset removes)
    inherited: tuple[PassThrough, ...] = ()

    def get(self, name: str) -> str | None:
        return next((v.value for v in self.values if v.name == name), None)

    def as_dict(self) -> dict[str, str]:
        return {v.name: v.value for v in self.values}

    def to_nccl_env(self) -> NcclEnv:
        """The Snapshot section the lint rules read."""
        return NcclEnv(status=Status.ok(f"launch:{self.source}"), values=self.values, shadowed=self.shadowed)

    def to_facts(self) -> dict[str, Any]:
        how = {(e.value.name, e.value.line): e.how for e in self.entries}
        return {
            "env": self.as_dict(),
            "env_entries": [{"name": e.value.name, "value": e.value.value, "line": e.value.line, "how": e.how}
                            for e in self.entries],
            "env_shadowed": [{"name": v.name, "value": v.value, "line": v.line, "how": how.get((v.name, v.line))}
                             for v in self.shadowed],
            "env_inherited": [{"name": p.name, "line": p.line, "how": p.how} for p in self.inherited],
        }


def relevant(name: str) -> bool:
    return name.startswith(RELEVANT_PREFIXES)


def parse_launch_env(text: str, source: str = "") -> LaunchEnv:
    """Environment assignments in launch material (shell, sbatch, mpirun/srun/docker lines, YAML/JSON)."""
    from ncdoc.evidence.launch_env_shell import ShellReader
    reader = _Collector(source)
    body = text.lstrip("\ufeff")
    if body.lstrip()[:1] in ("{", "[") and _json(body, reader):
        return reader.result()
    ShellReader(reader).read(body)
    return reader.result()


# A line of a run text (NCCL log, nccl-tests output) that can hold a launch setting: an assignment
# (NAME=..., export, env dumps) or a launcher option (mpirun -x/-genv, srun --export, docker -e).
_RUN_CANDIDATE = re.compile(r"(?:^|[\s\"',;(])(?:[A-Za-z_][A-Za-z0-9_]*=|-x\s|-g?env\s|--env[=\s]|-e\s|"
                            r"--export[=\s]|setenv\s)")
_RUN_RELEVANT = re.compile("|".join(re.escape(p) for p in RELEVANT_PREFIXES))
# NCCL's own log lines report the environment themselves ("NCCL_X set by environment to Y"): the log
# parser reads those; shell-splitting them would only misread their text.
_RUN_LOG_LINE = re.compile(r"\bNCCL (?:INFO|WARN|TRACE|ABORT)\b")


def parse_launch_env_in_run(lines: Iterable[str], source: str = "") -> LaunchEnv:
    """The launch settings in a run text: the `mpirun -x ...` / `NCCL_X=1 torchrun ...` / `export` lines
    people paste above a log or nccl-tests output. Only lines that can hold a setting are read, each run
    of them keeping its line numbers in the file; NCCL's own log lines are skipped."""
    from ncdoc.evidence.launch_env_shell import ShellReader
    reader = _Collector(source)
    shell = ShellReader(reader)
    block: list[str] = []
    first = 0
    continued = False
    for number, raw in enumerate(lines, 1):
        line = raw.rstrip("\r\n")
        # cheapest tests first: a long log is mostly NCCL INFO lines and lines naming no relevant variable
        keep = continued or (_RUN_RELEVANT.search(line) is not None and _RUN_LOG_LINE.search(line) is None
                             and _RUN_CANDIDATE.search(line) is not None)
        if keep:
            if not block:
                first = number
            block.append(line)
        elif block:
            shell.read("\n".join(block), first_line=first)
            block = []
        continued = keep and line.endswith("\\")
    if block:
        shell.read("\n".join(block), first_line=first)
    return reader.result()


def parse_launch_env_file(path: str | Path) -> LaunchEnv:
    from ncdoc.evidence.textfile import read_text_file
    return parse_launch_env(read_text_file(path, what="launch file"), str(path))


class _Collector:
    """Entries in order; knows the values assigned so far (for `-x NAME` pass-throughs)."""

    def __init__(self, source: str):
        self.source = source
        self.entries: list[LaunchEntry] = []
        self.unset: list[tuple[str, int]] = []
        self.inherited: list[PassThrough] = []
        self.known: dict[str, str] = {}

    def add(self, name: str, value: str, line: int, how: str) -> None:
        if not _NAME_RE.match(name) or not relevant(name):
            self.known[name] = value
            return
        self.known[name] = value
        self.entries.append(LaunchEntry(EnvValue(name, value, self.source, line), how))

    def pass_through(self, name: str, line: int, how: str) -> None:
        if not _NAME_RE.match(name):
            return
        if name in self.known:
            self.add(name, self.known[name], line, how)
        elif relevant(name):
            self.inherited.append(PassThrough(name, line, how))

    def remove(self, name: str, line: int) -> None:
        self.known.pop(name, None)
        self.unset.append((name, line))

    def result(self) -> LaunchEnv:
        last: dict[str, EnvValue] = {}
        shadowed: list[EnvValue] = []
        events = [(e.value.line or 0, i, e.value) for i, e in enumerate(self.entries)]
        events += [(line, len(self.entries) + i, name) for i, (name, line) in enumerate(self.unset)]
        for _, _, ev in sorted(events, key=lambda t: (t[0], t[1])):
            if isinstance(ev, str):                   # unset
                if ev in last:
                    shadowed.append(last.pop(ev))
                continue
            if ev.name in last:
                shadowed.append(last[ev.name])
            last[ev.name] = ev
        return LaunchEnv(self.source, tuple(self.entries), tuple(last.values()), tuple(shadowed),
                         tuple(self.inherited))


def _json(text: str, reader: _Collector) -> bool:
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return False
    lines = text.splitlines()

    def line_of(name: str) -> int | None:
        for i, line in enumerate(lines, 1):
            if name in line:
                return i
        return None

    def walk(node: Any, depth: int) -> None:
        if depth > 40:
            return
        if isinstance(node, dict):
            if isinstance(node.get("name"), str) and ("value" in node) and _NAME_RE.match(node["name"]):
                val = node["value"]
                if isinstance(val, (str, int, float, bool)):
                    reader.add(node["name"], _scalar(val), line_of(node["name"]), "kubernetes env")
                return
            for k, v in node.items():
                if isinstance(k, str) and _NAME_RE.match(k) and isinstance(v, (str, int, float, bool)):
                    reader.add(k, _scalar(v), line_of(k), "json")
                else:
                    walk(v, depth + 1)
        elif isinstance(node, list):
            for item in node:
                if isinstance(item, str):
                    m = _ASSIGN.match(item)
                    if m:
                        reader.add(m.group(1), m.group(2), line_of(m.group(1) + "="), "json")
                else:
                    walk(item, depth + 1)

    walk(data, 0)
    return True


def _scalar(v: Any) -> str:
    if isinstance(v, bool):
        return "1" if v else "0"
    return str(v)


def shell_words(line: str) -> list[str]:
    """Split like a POSIX shell (quotes, escapes, comments); separators ; & | ( ) are their own words."""
    lex = shlex.shlex(line, posix=True, punctuation_chars=";&|()")
    lex.whitespace_split = True
    lex.commenters = "#"
    try:
        return list(lex)
    except ValueError:                               # an unbalanced quote: take the words as they are
        return line.split()
