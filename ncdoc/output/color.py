"""ANSI colour, only when asked for or when writing to a terminal, and never with NO_COLOR set."""

from __future__ import annotations

import os
import sys

_CODES = {"red": "31", "yellow": "33", "cyan": "36", "green": "32", "bold": "1", "dim": "2"}
SEVERITY_STYLE = {"error": "red", "warning": "yellow", "info": "cyan"}


def use_color(mode: str | bool = "auto", stream=None) -> bool:
    """Resolve --color auto|always|never (or a bool) for `stream` (default stdout).

    auto: colour only on a terminal, and never when NO_COLOR is set (https://no-color.org)
    or TERM is "dumb"; always/never do what they say.
    """
    if isinstance(mode, bool):
        return mode
    if mode == "always":
        return True
    if mode == "never":
        return False
    if os.environ.get("NO_COLOR", "") != "" or os.environ.get("TERM") == "dumb":
        return False
    stream = stream if stream is not None else sys.stdout
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def paint(text: str, style: str, enabled: bool) -> str:
    if not enabled or not style:
        return text
    codes = ";".join(_CODES[s] for s in style.split("+") if s in _CODES)
    return f"\033[{codes}m{text}\033[0m" if codes else text


def severity(text: str, sev: str, enabled: bool) -> str:
    return paint(text, SEVERITY_STYLE.get(sev, "") + ("+bold" if sev == "error" else ""), enabled)
