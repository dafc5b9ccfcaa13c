"""What every report format shows: fact sections, the summary counts, skipped rules grouped by
reason, and each finding's stage."""

from __future__ import annotations

from ncdoc.errors import CONTROL_ESCAPES as _ESCAPES

FORMATS = ("text", "lines", "json", "markdown", "github", "sarif", "junit", "concise")
SCHEMA_VERSION = 1

# Text a report quotes (messages with observed values, log lines, env values, file names) can hold
# anything: an escape sequence would drive the reader's terminal, a newline would break "one line per
# finding". The text formats show such characters as escapes instead (C0 controls but tab, DEL, the
# C1 controls some terminals obey, and the Unicode line and paragraph separators).
# (the one table of them: ncdoc.errors.CONTROL_ESCAPES)


def one_line(text) -> str:
    """`text` as one line of plain text: control characters shown as escapes (\\n, \\x1b, ...)."""
    text = str(text)
    return text.translate(_ESCAPES) if not text.isprintable() else text


def plain_lines(text) -> list[str]:
    """A multi-line text (a fact section given as a string) as lines, each made safe by one_line."""
    return [one_line(line) for line in str(text).rstrip("\n").split("\n")]


def sections(facts) -> list[tuple[str, object]]:
    """Normalise `facts` to [(title, body)]."""
    if not facts:
        return []
    if isinstance(facts, dict):
        return list(facts.items())
    return [(str(t), b) for t, b in facts]


def stage_of(code: str) -> str | None:
    """The stage of rule `code` from the registry (None for codes it does not know)."""
    try:
        from ncdoc.engine import ruleset
        rule = ruleset.load().find(code)
    except Exception:       # a report can be rendered without the rule packs (e.g. a partial install)
        return None
    return rule.stage if rule else None


def skipped_groups(report) -> list[tuple[str, list]]:
    """Skipped rules grouped by reason, in first-seen order: [(reason, [Skipped, ...])]."""
    groups: dict[str, list] = {}
    for s in report.skipped:
        groups.setdefault(s.reason, []).append(s)
    return list(groups.items())


def summary_counts(report) -> dict[str, int]:
    out = {"error": 0, "warning": 0, "info": 0}
    for f in report.findings:
        out[f.severity] = out.get(f.severity, 0) + 1
    return out


def summary_line(report) -> str:
    c = summary_counts(report)
    parts = [f"{c['error']} error{'s' if c['error'] != 1 else ''}",
             f"{c['warning']} warning{'s' if c['warning'] != 1 else ''}", f"{c['info']} info"]
    text = ", ".join(parts)
    if report.skipped:
        text += f"; {len(report.skipped)} rule{'s' if len(report.skipped) != 1 else ''} skipped"
    return text
