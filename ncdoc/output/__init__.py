"""Report formatters: one module per format, all behind `render`.

    render(report, fmt, *, title=None, facts=None, skipped=True, color="auto") -> str

fmt: "text" (the human report, grouped by stage), "lines" (one line per finding, for
`ncdoc check`), "json" (an object with schema_version), "markdown", and the CI formats: "github"
(workflow annotations), "sarif" (2.1.0), "junit" (XML, one test case per rule), "concise"
(`where: CODE [severity] name: message`). The CI formats also take rules= (the rules that ran), fail_on= (junit's
failed cases), node= (the node's name, where a finding points at no file) and exit_code= (sarif).
facts: extra sections before the findings, as {title: body} or [(title, body), ...]; a body
is a string (printed as is), a mapping (key: value lines) or a list of mappings (a table).
"""

from __future__ import annotations

from ncdoc.output.parts import FORMATS, SCHEMA_VERSION  # noqa: F401  (part of this package's face)


def render(report, fmt: str = "text", *, title: str | None = None, facts=None, skipped: bool = True,
           color="auto", stream=None, rules=None, fail_on: str = "error", node: str | None = None,
           exit_code: int | None = None) -> str:
    if fmt in _CI_FORMATS:
        return _render_ci(report, fmt, title=title, rules=rules, fail_on=fail_on, node=node, exit_code=exit_code)
    if fmt == "json":
        from ncdoc.output.jsonout import render as r
        return r(report, title=title, facts=facts, skipped=skipped)
    from ncdoc.output.color import use_color
    enabled = use_color(color, stream)
    if fmt == "lines":
        from ncdoc.output.text import render_lines
        return render_lines(report, color=enabled)
    if fmt == "markdown":
        from ncdoc.output.markdown import render as r
        return r(report, title=title, facts=facts, skipped=skipped)
    if fmt == "text":
        from ncdoc.output.text import render as r
        return r(report, title=title, facts=facts, skipped=skipped, color=enabled)
    raise ValueError(f"unknown format {fmt!r} (use one of {', '.join(FORMATS)})")


_CI_FORMATS = ("github", "sarif", "junit", "concise")


def _render_ci(report, fmt: str, *, title, rules, fail_on, node, exit_code) -> str:
    if fmt == "github":
        from ncdoc.output.github import render as r
        return r(report, node=node)
    if fmt == "sarif":
        from ncdoc.output.sarif import render as r
        return r(report, rules=rules, node=node, exit_code=exit_code)
    if fmt == "junit":
        import time
        from ncdoc.output.junit import render as r
        return r(report, rules=rules, fail_on=fail_on, node=node, title=title,
                 timestamp=time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime()))
    from ncdoc.output.concise import render as r
    return r(report, node=node)
