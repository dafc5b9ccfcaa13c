"""Plain-text report: the human report (`ncdoc doctor`) and one line per finding (`ncdoc check`)."""

from __future__ import annotations

from ncdoc.output.parts import one_line, plain_lines, sections, skipped_groups, stage_of, summary_line
from ncdoc.output.color import paint, severity

_WIDTH = 100


def _fix(f) -> str:
    return one_line(f.fix.strip().splitlines()[0]) if f.fix else ""


def render_lines(report, *, color: bool = False) -> str:
    """One line per finding, worst first: `SEVERITY CODE name [subject]: message (fix: ...)`."""
    from ncdoc.findings import severity_rank
    out = []
    for f in sorted(report.findings, key=lambda f: (-severity_rank(f.severity), f.code, f.subject)):
        sev = severity(f"{f.severity.upper():7}", f.severity, color)
        fix = _fix(f)
        out.append(f"{sev} {one_line(f.code)} {one_line(f.name)}: {one_line(f.message)}"
                   + (f" (fix: {fix})" if fix else ""))
    return "\n".join(out) + ("\n" if out else "")


def _body(body) -> list[str]:
    if body is None:
        return []
    if isinstance(body, str):
        return plain_lines(body)
    if isinstance(body, dict):
        width = max((len(str(k)) for k in body), default=0)
        return [f"{one_line(k) + ':':<{width + 1}} {scalar(v)}" for k, v in body.items()]
    if isinstance(body, (list, tuple)) and body and all(isinstance(r, dict) for r in body):
        from tabulate import tabulate  # only when a report has a table
        return tabulate([[scalar(v) for v in r.values()] for r in body], headers=[one_line(k) for k in body[0]],
                        tablefmt="simple").splitlines()
    if isinstance(body, (list, tuple)):
        return [f"- {scalar(x)}" for x in body]
    return [scalar(body)]


def scalar(v) -> str:
    """One fact value as one line of plain text (lists and mappings flattened); markdown reuses it."""
    if v is None:
        return "-"
    if isinstance(v, (list, tuple)):
        return ", ".join(scalar(x) for x in v)
    if isinstance(v, dict):
        return ", ".join(f"{one_line(k)}={scalar(x)}" for k, x in v.items())
    return one_line(v)


def _wrap(text: str, indent: str) -> list[str]:
    import textwrap
    return textwrap.wrap(one_line(text), width=_WIDTH, initial_indent=indent, subsequent_indent=indent,
                         break_on_hyphens=False) or [indent]


def render(report, *, title: str | None = None, facts=None, skipped: bool = True, color: bool = False) -> str:
    from ncdoc.engine.rules import STAGE_TITLES, STAGES
    lines: list[str] = []
    if title:
        title = one_line(title)
        lines += [paint(title, "bold", color), "=" * min(len(title), _WIDTH), ""]
    for head, body in sections(facts):
        lines.append(paint(one_line(head), "bold", color))
        lines += ["  " + x for x in _body(body)]
        lines.append("")
    groups: dict[str, list] = {}
    for f in report.findings:
        groups.setdefault(stage_of(f.code) or "other", []).append(f)
    order = [s for s in STAGES if s in groups] + [s for s in groups if s not in STAGES]
    if not report.findings:
        lines += [paint("No problems found.", "green", color), ""]
    for stage in order:
        name = STAGE_TITLES.get(stage, stage.capitalize() if stage != "other" else "Other findings")
        lines += [paint(f"{name}", "bold", color), paint("-" * len(name), "dim", color)]
        for f in groups[stage]:
            head = f"{severity(f.severity.upper(), f.severity, color)} {one_line(f.code)} {one_line(f.name)}"
            if f.subject and f.subject != stage:
                head += paint(f" [{one_line(f.subject)}]", "dim", color)
            lines.append(head)
            lines += _wrap(f.message, "    ")
            for e in f.evidence:
                where = e.where()
                lines += _wrap(f"evidence: {e.text}" + (f"  ({where})" if where else ""), "    ")
            if f.fix:
                lines += _wrap(f"fix: {f.fix.strip()}", "    ")
            if f.env_patch:
                patch = " ".join(f"{k}={v}" if v is not None else f"unset {k}" for k, v in f.env_patch.items())
                lines += _wrap(f"env: {patch}", "    ")
            if f.docs:
                lines.append(paint(f"    docs: {one_line(f.docs)}", "dim", color))
        lines.append("")
    if skipped and report.skipped:
        lines.append(paint(f"Skipped ({len(report.skipped)})", "bold", color))
        for reason, group in skipped_groups(report):
            if len(group) == 1:
                lines += _wrap(f"{group[0].code} {group[0].name}: {reason}", "  ")
            else:
                lines += _wrap(f"{reason} ({len(group)}): " + ", ".join(f"{s.code} {s.name}" for s in group), "  ")
        lines.append("")
    lines.append(summary_line(report))
    return "\n".join(lines) + "\n"
