"""A line of a log or an nccl-tests output quoted as evidence (a Citation), and a bounded book of them.

Every fact that can back a finding keeps the lines it came from, so a report can say
"line 4182: ... NCCL WARN ..." instead of "somewhere in your log". Logs can be huge, so each
collector keeps only the first few lines of each kind: flat memory whatever the input.
"""

from __future__ import annotations

from ncdoc.startup.record import record

MAX_TEXT = 200          # characters of a line kept as evidence
PER_KIND = 5            # evidence lines kept per fact kind


@record
class Citation:
    """One quoted input line; findings turn it into their own ncdoc.findings.Evidence (with the file)."""
    line: int            # 1-based line number in the source
    text: str            # the line, trimmed to MAX_TEXT characters

    @classmethod
    def of(cls, line: int, text: str) -> "Citation":
        text = text.rstrip("\r\n")
        if len(text) > MAX_TEXT:
            text = text[:MAX_TEXT - 3] + "..."
        return cls(line, text)

    def to_dict(self) -> dict:
        return {"line": self.line, "text": self.text}


class CitationBook:
    """Cited lines by fact kind, at most `per_kind` each (the first ones seen)."""

    def __init__(self, per_kind: int = PER_KIND):
        self.per_kind = per_kind
        self._by_kind: dict[str, list[Citation]] = {}

    def wants(self, kind: str) -> bool:
        got = self._by_kind.get(kind)
        return got is None or len(got) < self.per_kind

    def add(self, kind: str, line: int, text: str) -> None:
        got = self._by_kind.setdefault(kind, [])
        if len(got) < self.per_kind and all(e.line != line for e in got):
            got.append(Citation.of(line, text))

    def get(self, kind: str) -> tuple[Citation, ...]:
        return tuple(self._by_kind.get(kind, ()))

    def freeze(self) -> dict[str, tuple[Citation, ...]]:
        return {k: tuple(v) for k, v in self._by_kind.items() if v}
