"""ANSI colour: when asked for, or on a terminal; never with NO_COLOR set; FORCE_COLOR turns it on."""

from __future__ import annotations

import os
import sys

_CODES = {"red": "31", "yellow": "33", "cyan": "36", "green": "32", "bold": "1", "dim": "2"}
SEVERITY_STYLE = {"error": "red", "warning": "yellow", "info": "cyan"}


def use_color(mode: str | bool = "auto", stream=None) -> bool:
    """Resolve --color auto|always|never (or a bool) for `stream` (default stdout): the one place
    every command decides whether to colour.

    always/never do what they say. auto: never when NO_COLOR is set non-empty (https://no-color.org);
    else always when FORCE_COLOR is set non-empty (CI logs that render ANSI, `| less -R`); else only
    on a terminal that is not TERM=dumb.
    """
    if isinstance(mode, bool):
        return mode
    if mode == "always":
        return True
    if mode == "never":
        return False
    if os.environ.get("NO_COLOR", "") != "":
        return False
    if os.environ.get("FORCE_COLOR", "") != "":
        return True
    if os.environ.get("TERM") == "dumb":
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
