"""Report formatters: one module per format, all behind `render`.

    render(report, fmt, *, title=None, facts=None, skipped=True, color="auto") -> str

fmt: "text" (the human report, grouped by stage), "lines" (one line per finding, for
`ncdoc check`), "json" (an object with schema_version), "markdown".
facts: extra sections before the findings, as {title: body} or [(title, body), ...]; a body
is a string (printed as is), a mapping (key: value lines) or a list of mappings (a table).
"""

from __future__ import annotations

from ncdoc.output.parts import FORMATS, SCHEMA_VERSION  # noqa: F401  (part of this package's face)


def render(report, fmt: str = "text", *, title: str | None = None, facts=None, skipped: bool = True,
           color="auto", stream=None) -> str:
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
