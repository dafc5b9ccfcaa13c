"""Patterns compiled the first time they are used.

A triage of a short log imports a dozen parsers, each with its table of patterns, and uses a few of
them: compiling them all was a fifth of its cost. `lazy(pattern, flags)` stands where
`re.compile(pattern, flags)` stood; the first search, match or other call compiles it (from the table of
ncdoc.startup.compiled_patterns when it holds the pattern) and puts the compiled pattern's methods on the
object, so later calls cost what calling the pattern costs.
"""

from __future__ import annotations

from ncdoc.startup.compiled_patterns import compiled, register

_METHODS = ("search", "match", "fullmatch", "finditer", "findall", "sub", "subn", "split")


class LazyPattern:
    def __init__(self, pattern: str | bytes, flags: int = 0) -> None:
        self.pattern, self.flags = pattern, flags
        register(pattern, flags)

    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        rx = compiled(self.pattern, self.flags)
        d = self.__dict__
        for method in _METHODS:
            d[method] = getattr(rx, method)
        d["compiled"], d["groups"], d["groupindex"] = rx, rx.groups, rx.groupindex
        return getattr(rx, name)

    def __repr__(self) -> str:
        return f"lazy({self.pattern!r})"


def lazy(pattern: str | bytes, flags: int = 0) -> LazyPattern:
    return LazyPattern(pattern, flags)


__all__ = ["LazyPattern", "lazy"]
