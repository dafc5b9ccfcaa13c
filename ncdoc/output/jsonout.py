"""JSON report: one object with schema_version; findings carry code, name, severity, message,
evidence, fix, docs (plus subject, stage, family, env_patch)."""

from __future__ import annotations

import json

from ncdoc.output.parts import SCHEMA_VERSION, sections, stage_of, summary_counts


def finding_dict(f) -> dict:
    d = f.to_dict()
    d["subject"] = f.subject
    d["stage"] = stage_of(f.code)
    return d


def report_dict(report, *, title: str | None = None, facts=None, skipped: bool = True) -> dict:
    from ncdoc import __version__
    out = {"schema_version": SCHEMA_VERSION, "tool": "ncdoc", "version": __version__}
    if title:
        out["title"] = title
    out["summary"] = summary_counts(report)
    out["worst"] = report.worst()
    out["findings"] = [finding_dict(f) for f in report.findings]
    if skipped:
        out["skipped"] = [s.to_dict() for s in report.skipped]
    if facts:
        out["facts"] = {t: b for t, b in sections(facts)}
    return out


def render(report, *, title: str | None = None, facts=None, skipped: bool = True) -> str:
    return json.dumps(report_dict(report, title=title, facts=facts, skipped=skipped), indent=2,
                      default=str) + "\n"
