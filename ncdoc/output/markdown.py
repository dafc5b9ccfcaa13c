"""Markdown report: the same content as the text report, for tickets, wikis and CI summaries.

Whatever a message or a quoted log line holds, the document keeps its shape: each finding is one
list item, quoted text reads literally (markdown and HTML characters are escaped, code spans and
fences are longer than any backtick run inside them) and control characters show as escapes.
"""

from __future__ import annotations

import re

from ncdoc.output.parts import one_line, plain_lines, sections, skipped_groups, stage_of, summary_line
from ncdoc.output.text import scalar
from ncdoc.startup.compiled_patterns import precompiled

# What markdown (GFM) or HTML would act on in the middle of a line: emphasis, code, links and images
# (all opened by '['), tables, strikethrough, HTML tags and autolinks, entity references. '_' only acts
# at a word's edge (NCCL_IB_HCA stays as it is); '#', '-', '+', '>' and "1." only at a line's start,
# which escaped text never is.
_ACTIVE = precompiled(r"[\\`*\[<|~]|&(?=#?\w+;)|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])")


def md(text) -> str:
    """`text` as literal inline markdown: one line, markdown and HTML characters escaped."""
    return _ACTIVE.sub(lambda m: "\\" + m.group(0), one_line(text))


# a code span in a rule's own text (fixes name commands so: `ncdoc topo`); the backtick run closes it
_SPAN = precompiled(r"(`+)(?!`)(.+?)(?<!`)\1(?!`)")


def prose(text) -> str:
    """A rule's message or fix: its code spans kept, everything else literal as in md()."""
    text = one_line(text)
    out, at = [], 0
    for m in _SPAN.finditer(text):
        out += [md(text[at:m.start()]), m.group(0)]
        at = m.end()
    out.append(md(text[at:]))
    return "".join(out)


def code(text) -> str:
    """`text` as an inline code span that no backtick inside can close early."""
    text = one_line(text)
    run = max((len(m) for m in re.findall(r"`+", text)), default=0)
    fence = "`" * (run + 1)
    pad = " " if text.startswith("`") or text.endswith("`") or run else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _fenced(text: str) -> list[str]:
    lines = plain_lines(text)
    run = max((len(m) for line in lines for m in re.findall(r"`{3,}", line)), default=2)
    fence = "`" * (run + 1)
    return [fence, *lines, fence]


def _body(body) -> list[str]:
    if body is None:
        return []
    if isinstance(body, str):
        return _fenced(body)
    if isinstance(body, dict):
        return [f"- **{md(k)}**: {md(scalar(v))}" for k, v in body.items()]
    if isinstance(body, (list, tuple)) and body and all(isinstance(r, dict) for r in body):
        from tabulate import tabulate
        return tabulate([[md(scalar(v)) for v in r.values()] for r in body], headers=[md(k) for k in body[0]],
                        tablefmt="github").splitlines()
    if isinstance(body, (list, tuple)):
        return [f"- {prose(scalar(x))}" for x in body]
    return [md(scalar(body))]


def render(report, *, title: str | None = None, facts=None, skipped: bool = True) -> str:
    from ncdoc.engine.rules import STAGE_TITLES, STAGES
    out: list[str] = [f"# {md(title or 'ncdoc report')}", ""]
    for head, body in sections(facts):
        out += [f"## {md(head)}", "", *_body(body), ""]
    out += ["## Findings", "", summary_line(report), ""]
    groups: dict[str, list] = {}
    for f in report.findings:
        groups.setdefault(stage_of(f.code) or "other", []).append(f)
    for stage in [s for s in STAGES if s in groups] + [s for s in groups if s not in STAGES]:
        out += [f"### {md(STAGE_TITLES.get(stage, stage))}", ""]
        for f in groups[stage]:
            subject = f" ({f.subject})" if f.subject and f.subject != stage else ""
            # the docs are a command (`ncdoc rule CODE`, below), not a page in the wheel: no link
            out.append(f"- **{f.severity.upper()} {md(f.code)} {md(f.name)}**{md(subject)}: {prose(f.message)}")
            for e in f.evidence:
                where = e.where()
                out.append(f"  - evidence: {code(e.text)}" + (f" ({md(where)})" if where else ""))
            if f.fix:
                out.append(f"  - fix: {prose(f.fix.strip())}")
            if f.env_patch:
                patch = " ".join(f"{k}={v}" if v is not None else f"unset {k}" for k, v in f.env_patch.items())
                out.append(f"  - env: {code(patch)}")
            if f.docs:
                out.append(f"  - docs: {code(f.docs)}")
        out.append("")
    if skipped and report.skipped:
        out += [f"### Skipped ({len(report.skipped)})", ""]
        for reason, group in skipped_groups(report):
            out.append(f"- {md(reason)}: " + ", ".join(f"{md(s.code)} {md(s.name)}" for s in group))
        out.append("")
    return "\n".join(out)


def _url(url: str) -> str:
    """A link target markdown cannot misread: no spaces, parentheses or angle brackets unescaped."""
    return one_line(url).replace(" ", "%20").replace("(", "%28").replace(")", "%29").replace("<", "%3C") \
        .replace(">", "%3E")


__all__ = ["md", "prose", "code", "render"]
