"""Collecting assignments in the order a file makes them, and what a variable name looks like.

Every reader (shell lines, JSON, YAML-like text) hands what it finds to one Collector, which keeps
only the relevant names, resolves `-x NAME` pass-throughs against the values assigned so far, and
at the end orders assignments and unsets by line: the last assignment of a name wins and the
earlier ones are kept as shadowed.
"""

from __future__ import annotations

import re

from ncdoc.evidence.launch_env_model import LaunchEntry, LaunchEnv, PassThrough, relevant
from ncdoc.evidence.lazy_re import lazy
from ncdoc.snapshot import EnvValue

NAME = r"[A-Za-z_][A-Za-z0-9_]*"
NAME_RE = lazy(rf"^{NAME}$")
ASSIGN = lazy(rf"^({NAME})=(.*)$", re.S)


# Relevant assignments read from one file. A launch script sets a few dozen; past this many the file is no
# script a person wrote (a log of a loop, a file doubled a million times), and reading on would cost seconds
# for nothing: the readers stop, and the result says at which line (LaunchEnv.cut_at_line).
MAX_ENTRIES = 10_000


class Collector:
    """Entries in order; knows the values assigned so far (for `-x NAME` pass-throughs)."""

    def __init__(self, source: str):
        self.source = source
        self.entries: list[LaunchEntry] = []
        self.unset: list[tuple[str, int]] = []
        self.inherited: list[PassThrough] = []
        self.known: dict[str, str] = {}
        self.full = False                   # MAX_ENTRIES read: the readers stop
        self.cut_at_line: int | None = None

    def add(self, name: str, value: str, line: int, how: str) -> None:
        if not NAME_RE.match(name) or not relevant(name):
            self.known[name] = value
            return
        if len(self.entries) >= MAX_ENTRIES:
            if not self.full:
                self.full, self.cut_at_line = True, line
            return
        self.known[name] = value
        self.entries.append(LaunchEntry(EnvValue(name, value, self.source, line), how))

    def pass_through(self, name: str, line: int, how: str) -> None:
        if not NAME_RE.match(name):
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
                         tuple(self.inherited), self.cut_at_line)
