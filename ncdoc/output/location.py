"""Where a finding points, for the formats that place findings in files (github, sarif, junit, concise).

A finding backed by a line of a file (an env file, nccl.conf, a log) points at that file and line;
one about the node itself (a port, a GPU, the job's variables) points at no file, and the formats
name the node instead.
"""

from __future__ import annotations


def file_of(source: str) -> str | None:
    """The file an evidence source names ("file:/etc/nccl.conf" -> "/etc/nccl.conf"), else None."""
    if source.startswith("file:"):
        return source[5:] or None
    return None


def where(finding) -> tuple[str | None, int | None]:
    """(path, line) of the first evidence that names a file (a line number implies its source is
    a file), else (None, None)."""
    for e in finding.evidence:
        path = file_of(e.source)
        if path is None and e.line is not None and e.source:
            path = e.source
        if path:
            return path, e.line
    return None, None


def label(finding, node: str | None = None) -> str:
    """"path:line", "path", or the node's name ("-" when unknown): what a one-line format starts with."""
    path, line = where(finding)
    if path:
        return f"{path}:{line}" if line else path
    return node or "-"


__all__ = ["file_of", "where", "label"]
