"""Concise report: one line per finding, `where: CODE [severity] name: message`, like ruff's concise output.

`where` is the file and line a finding points at (an env file, nccl.conf), else the node's name,
so lines from many nodes (`srun ncdoc check --format concise`) can be sorted and grepped together.
"""

from __future__ import annotations

from ncdoc.output.location import label
from ncdoc.output.parts import one_line


def render(report, *, node: str | None = None) -> str:
    from ncdoc.findings import severity_rank
    # one_line: whatever a message quotes (a log line, an env value) stays on its line, unable to drive the terminal
    out = [f"{one_line(label(f, node))}: {f.code} [{f.severity}] {f.name}: {one_line(f.message)}"
           for f in sorted(report.findings, key=lambda f: (-severity_rank(f.severity), f.code, f.subject))]
    return "\n".join(out) + ("\n" if out else "")
