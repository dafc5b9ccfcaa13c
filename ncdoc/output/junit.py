"""JUnit XML: one test case per rule run, for CI systems that show test reports (GitLab, Jenkins, ...).

A rule with findings at or above the failure threshold (--fail-on) is a failed test case, with
every finding of it in the failure text; findings below the threshold are kept in the case's
system-out; a skipped rule is a skipped case with the reason. Written by hand (no xml package on
the check path), escaped for XML 1.0: control characters a message quotes are shown as escapes.
"""

from __future__ import annotations

from ncdoc.output.parts import one_line

_ESCAPES = {"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&apos;"}


def _x(text: str) -> str:
    """Text for an XML 1.0 attribute or element: each line made safe by one_line (control characters
    as escapes), then the XML specials escaped; lines kept."""
    lines = [one_line(line) for line in str(text).split("\n")]
    out = []
    for ch in "\n".join(lines):
        code = ord(ch)
        if ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif 0xD800 <= code <= 0xDFFF or code in (0xFFFE, 0xFFFF):
            continue
        else:
            out.append(ch)
    return "".join(out)


def _finding_text(f) -> str:
    """A finding as lines: what its message or evidence quotes cannot start a line of its own."""
    lines = [f"{f.severity.upper()} {f.code} {f.name}: {one_line(f.message)}"]
    lines += [f"  evidence: {one_line(e.text)}" + (f" ({one_line(e.where())})" if e.where() else "")
              for e in f.evidence]
    if f.fix:
        lines.append(f"  fix: {one_line(f.fix.strip())}")
    if f.docs:
        lines.append(f"  docs: {one_line(f.docs)}")
    return "\n".join(lines)


def render(report, *, rules=None, fail_on: str = "error", node: str | None = None, title: str | None = None,
           timestamp: str | None = None) -> str:
    from ncdoc.findings import severity_rank
    threshold = severity_rank(fail_on)
    by_code: dict[str, list] = {}
    for f in report.findings:
        by_code.setdefault(f.code, []).append(f)
    skipped = {s.code: s for s in report.skipped}
    names = {}
    for r in rules or ():
        names[r.code] = (r.name, r.family)
    for f in report.findings:
        names.setdefault(f.code, (f.name, f.family))
    for s in report.skipped:
        names.setdefault(s.code, (s.name, "other"))
    cases = []
    failures = skips = 0
    for code in sorted(names):
        name, family = names[code]
        head = f'    <testcase classname="ncdoc.{_x(family)}" name="{_x(code)} {_x(name)}"'
        if code in skipped and code not in by_code:
            skips += 1
            cases.append(f'{head}>\n      <skipped message="{_x(one_line(skipped[code].reason))}"/>\n    </testcase>')
            continue
        found = by_code.get(code, [])
        failing = [f for f in found if severity_rank(f.severity) >= threshold]
        if failing:
            failures += 1
            worst = max(failing, key=lambda f: severity_rank(f.severity))
            body = "\n".join(_finding_text(f) for f in found)
            cases.append(f'{head}>\n      <failure type="{_x(worst.severity)}" message="{_x(one_line(worst.message))}">'
                         f"{_x(body)}</failure>\n    </testcase>")
        elif found:
            body = "\n".join(_finding_text(f) for f in found)
            cases.append(f"{head}>\n      <system-out>{_x(body)}</system-out>\n    </testcase>")
        else:
            cases.append(f"{head}/>")
    suite = _x(title or "ncdoc check") + (f" ({_x(node)})" if node else "")
    attrs = f'name="{suite}" tests="{len(cases)}" failures="{failures}" errors="0" skipped="{skips}"'
    extra = (f' hostname="{_x(node)}"' if node else "") + (f' timestamp="{_x(timestamp)}"' if timestamp else "")
    return ('<?xml version="1.0" encoding="UTF-8"?>\n'
            f"<testsuites {attrs}>\n  <testsuite {attrs}{extra}>\n" + "\n".join(cases)
            + ("\n" if cases else "") + "  </testsuite>\n</testsuites>\n")
