"""GitHub Actions workflow commands: one `::error` / `::warning` / `::notice` annotation per finding.

Printed to stdout in a workflow step, each line becomes an annotation on the run (and on the file
and line, when the finding points at one, e.g. an env file in the repository). Format and escaping
as GitHub documents them: in the message, % CR LF are percent-encoded; in property values also
':' and ','.
"""

from __future__ import annotations

from ncdoc.output.location import where
from ncdoc.output.parts import one_line

_LEVEL = {"error": "error", "warning": "warning", "info": "notice"}


def _data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _prop(text: str) -> str:
    return _data(one_line(text)).replace(":", "%3A").replace(",", "%2C")


def render(report, *, node: str | None = None) -> str:
    out = []
    for f in report.findings:
        path, line = where(f)
        props = []
        if path:
            props.append(f"file={_prop(path)}")
            if line:
                props.append(f"line={line}")
        title = f"{f.code} {f.name}" + (f" ({node})" if node and not path else "")
        props.append(f"title={_prop(title)}")
        # each part on its own line of the annotation; what a part quotes cannot add lines or escapes
        parts = [f.message] + ([f"fix: {f.fix.strip()}"] if f.fix else []) + ([f"docs: {f.docs}"] if f.docs else [])
        message = "\n".join(one_line(part) for part in parts)
        out.append(f"::{_LEVEL.get(f.severity, 'notice')} {','.join(props)}::{_data(message)}")
    return "\n".join(out) + ("\n" if out else "")
