"""Jinja2 for the report: one environment with auto-escaping on, templates shipped in the package,
and the report written atomically (a temp file beside the target, then a rename).

Auto-escaping is on for every template, so any value from an input (a log line, a hostname, an
env value, a file name) is escaped where it is written; the only unescaped markup is what this
package made itself (SVG from topology_render and charts), passed through `Markup` by name.
"""

from __future__ import annotations

import os

_ENV = None


def environment():
    global _ENV
    if _ENV is None:
        import jinja2
        _ENV = jinja2.Environment(
            loader=jinja2.PackageLoader("ncdoc.report", "templates"),
            autoescape=True,                   # every template: HTML and SVG alike
            undefined=jinja2.StrictUndefined,  # a misspelt field is an error in tests, not a blank
            trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True,
            finalize=visible_controls,
        )
        _ENV.filters["num"] = _num
        _ENV.filters["size"] = _size
        from ncdoc.report.topology_graph import path_class
        _ENV.globals["path_class"] = path_class
    return _ENV


def _escape_controls() -> dict[int, str]:
    table = {c: f"\\x{c:02x}" for c in range(0x20) if c not in (0x09, 0x0A, 0x0D)}
    table.update({c: f"\\x{c:02x}" for c in range(0x7F, 0xA0)})
    return table


_CONTROLS = _escape_controls()


def visible_controls(value):
    """Control characters from inputs (the ESC of a colour code, BEL, NUL, C1) written as \\xNN
    text, before escaping: no raw control character reaches the page, and the reader sees
    which one it was in any font."""
    if isinstance(value, str) and not hasattr(value, "__html__"):
        return value.translate(_CONTROLS)
    return value


def _num(x, digits: int = 1) -> str:
    if x is None:
        return "-"
    try:
        return f"{float(x):.{digits}f}"
    except (TypeError, ValueError):
        return str(x)


def _size(n) -> str:
    """Bytes as nccl-tests users say them: 8 B, 512 KB, 4 MB, 8 GB (powers of 1024)."""
    try:
        v = float(n)
    except (TypeError, ValueError):
        return str(n)
    units, i = ("B", "KB", "MB", "GB", "TB", "PB"), 0
    while v >= 1024 and i < len(units) - 1:
        v, i = v / 1024, i + 1
    return f"{v:.0f} {units[i]}" if v == int(v) else f"{v:.1f} {units[i]}"


def trusted(markup: str):
    """SVG this package drew (numbers and escaped text only): inserted as is."""
    from markupsafe import Markup
    return Markup(markup)


def render_template(name: str, **values) -> str:
    return environment().get_template(name).render(**values)


def write_report(path: str, text: str) -> str:
    """Write the page whole or not at all, with the one writer (readers/textfile.write_user_file:
    a temp file beside it, then a rename); a folder, a missing folder or an unwritable place is one
    line and exit 2 (InputError naming the path)."""
    from ncdoc.readers.textfile import write_user_file
    return os.path.abspath(write_user_file(path, text, "the report"))


__all__ = ["environment", "render_template", "trusted", "write_report"]
