"""Markdown report: the same content as the text report, for tickets, wikis and CI summaries."""

from __future__ import annotations

from ncdoc.output.parts import sections, skipped_groups, stage_of, summary_line
from ncdoc.output.text import scalar


def _md(text: str) -> str:
    return text.replace("|", "\\|")


def _body(body) -> list[str]:
    if body is None:
        return []
    if isinstance(body, str):
        return ["```", *body.rstrip("\n").splitlines(), "```"]
    if isinstance(body, dict):
        return [f"- **{k}**: {_md(scalar(v))}" for k, v in body.items()]
    if isinstance(body, (list, tuple)) and body and all(isinstance(r, dict) for r in body):
        from tabulate import tabulate
        return tabulate([[_md(scalar(v)) for v in r.values()] for r in body], headers=list(body[0].keys()),
                        tablefmt="github").splitlines()
    if isinstance(body, (list, tuple)):
        return [f"- {_md(scalar(x))}" for x in body]
    return [_md(scalar(body))]


def render(report, *, title: str | None = None, facts=None, skipped: bool = True) -> str:
    from ncdoc.engine.rules import STAGE_TITLES, STAGES
    out: list[str] = [f"# {title or 'ncdoc report'}", ""]
    for head, body in sections(facts):
        out += [f"## {head}", "", *_body(body), ""]
    out += ["## Findings", "", summary_line(report), ""]
    groups: dict[str, list] = {}
    for f in report.findings:
        groups.setdefault(stage_of(f.code) or "other", []).append(f)
    for stage in [s for s in STAGES if s in groups] + [s for s in groups if s not in STAGES]:
        out += [f"### {STAGE_TITLES.get(stage, stage)}", ""]
        for f in groups[stage]:
            subject = f" ({f.subject})" if f.subject and f.subject != stage else ""
            out.append(f"- **{f.severity.upper()} {f.code} [{f.name}]({f.docs})**{_md(subject)}: {_md(f.message)}")
            for e in f.evidence:
                where = e.where()
                out.append(f"  - evidence: `{e.text}`" + (f" ({where})" if where else ""))
            if f.fix:
                out.append(f"  - fix: {_md(f.fix.strip())}")
            if f.env_patch:
                patch = " ".join(f"{k}={v}" if v is not None else f"unset {k}" for k, v in f.env_patch.items())
                out.append(f"  - env: `{patch}`")
        out.append("")
    if skipped and report.skipped:
        out += [f"### Skipped ({len(report.skipped)})", ""]
        for reason, group in skipped_groups(report):
            out.append(f"- {_md(reason)}: " + ", ".join(f"{s.code} {s.name}" for s in group))
        out.append("")
    return "\n".join(out)
