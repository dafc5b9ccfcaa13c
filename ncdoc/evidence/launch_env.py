"""The environment a job was launched with, read from its launch material.

Shell (`KEY=VALUE`, `export`, `declare -x`, `setenv`, `env` dumps, `NCCL_X=1 torchrun ...`),
launchers (`mpirun -x KEY[=VALUE]`, `-genv`, `srun --export=ALL,KEY=VALUE`, `#SBATCH --export`,
`#PBS -v`, `docker run -e`), YAML/JSON mappings, compose lists and Kubernetes `env:` lists.
Each assignment keeps its line and how it was made; a later assignment overrides an earlier
one and both are kept, so a rule can say which setting was silently shadowed.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Iterable
    from pathlib import Path

import re

from ncdoc.startup.json_load import load_data
from ncdoc.evidence.launch_env_collector import ASSIGN, NAME_RE, Collector
from ncdoc.evidence.launch_env_model import RELEVANT_PREFIXES, LaunchEntry, LaunchEnv, PassThrough, relevant
from ncdoc.evidence.launch_env_shell import ShellReader
from ncdoc.evidence.lazy_re import lazy

__all__ = ["RELEVANT_PREFIXES", "LaunchEntry", "LaunchEnv", "PassThrough", "parse_launch_env",
           "parse_launch_env_file", "parse_launch_env_in_run", "RunLaunchLines", "relevant"]


def parse_launch_env(text: str, source: str = "") -> LaunchEnv:
    """Environment assignments in launch material (shell, sbatch, mpirun/srun/docker lines, YAML/JSON)."""
    reader = Collector(source)
    body = text.lstrip("\ufeff")
    if body.lstrip()[:1] in ("{", "[") and _json(body, reader):
        return reader.result()
    ShellReader(reader).read(body)
    return reader.result()


# A line of a run text (NCCL log, nccl-tests output) that can hold a launch setting: an assignment
# (NAME=..., export, env dumps) or a launcher option (mpirun -x/-genv, srun --export, docker -e).
_RUN_CANDIDATE = lazy(r"(?:^|[\s\"',;(])(?:[A-Za-z_][A-Za-z0-9_]*=|-x\s|-g?env\s|--env[=\s]|-e\s|"
                            r"--export[=\s]|setenv\s)")
_RUN_RELEVANT = lazy("|".join(re.escape(p) for p in RELEVANT_PREFIXES))
# NCCL's own log lines report the environment themselves ("NCCL_X set by environment to Y"): the log
# parser reads those; shell-splitting them would only misread their text.
_RUN_LOG_LINE = lazy(r"\bNCCL (?:INFO|WARN|TRACE|ABORT)\b")


class RunLaunchLines:
    """The launch settings of a run text read line by line, `line(number, text)` in file order: the
    `mpirun -x ...` / `NCCL_X=1 torchrun ...` / `export` lines people paste above a log or nccl-tests output.
    Only lines that can hold a setting are read, each run of them keeping its line numbers in the file;
    NCCL's own log lines are skipped. A line may be left out when it is neither such a line nor one a kept
    line ending with a backslash continues into (a gap in the numbers ends a run)."""

    def __init__(self, source: str = "") -> None:
        self.reader = Collector(source)
        self.shell = ShellReader(self.reader)
        self.block: list[str] = []
        self.first = 0
        self.last = 0
        self.continued = False          # the last line given was kept and ended with a backslash

    def line(self, number: int, raw: str) -> None:
        if number != self.last + 1:
            self._flush()
            self.continued = False
        self.last = number
        line = raw.rstrip("\r\n")
        # cheapest tests first: a long log is mostly NCCL INFO lines and lines naming no relevant variable
        keep = self.continued or (_RUN_RELEVANT.search(line) is not None and _RUN_LOG_LINE.search(line) is None
                                  and _RUN_CANDIDATE.search(line) is not None)
        if keep:
            if not self.block:
                self.first = number
            self.block.append(line)
        else:
            self._flush()
        self.continued = keep and line.endswith("\\")

    def _flush(self) -> None:
        if self.block:
            self.shell.read("\n".join(self.block), first_line=self.first)
            self.block = []

    def result(self) -> LaunchEnv:
        self._flush()
        return self.reader.result()


def parse_launch_env_in_run(lines: Iterable[str], source: str = "") -> LaunchEnv:
    """The launch settings in a run text (see RunLaunchLines), from all its lines."""
    reader = RunLaunchLines(source)
    for number, raw in enumerate(lines, 1):
        reader.line(number, raw)
    return reader.result()


def parse_launch_env_file(path: str | Path) -> LaunchEnv:
    from ncdoc.readers.textfile import read_user_text
    return parse_launch_env(read_user_text(path, "a launch file"), str(path))


def _json(text: str, reader: Collector) -> bool:
    try:
        data = load_data(text)
    except ValueError:
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
            if isinstance(node.get("name"), str) and ("value" in node) and NAME_RE.match(node["name"]):
                val = node["value"]
                if isinstance(val, (str, int, float, bool)):
                    reader.add(node["name"], _scalar(val), line_of(node["name"]), "kubernetes env")
                return
            for k, v in node.items():
                if isinstance(k, str) and NAME_RE.match(k) and isinstance(v, (str, int, float, bool)):
                    reader.add(k, _scalar(v), line_of(k), "json")
                else:
                    walk(v, depth + 1)
        elif isinstance(node, list):
            for item in node:
                if isinstance(item, str):
                    m = ASSIGN.match(item)
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
