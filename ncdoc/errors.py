"""The one exception family ncdoc raises on purpose.

The CLI turns an NcdocError into one line on stderr and its exit code; anything else
that escapes is a bug and is reported as such (still without a traceback unless
NCDOC_DEBUG is set).
"""


def shown(value, limit: int = 60) -> str:
    """`value` as an error message quotes it: its repr, one line, cut to about `limit` characters.

    Input is quoted back so the user can find it, but never at length: a 10 MB line or a key built
    from nested aliases must not become a 10 MB error line."""
    import reprlib     # bounded at every level: a shared or deep structure is not expanded
    r = reprlib.Repr()
    r.maxlevel, r.maxlist, r.maxtuple, r.maxdict, r.maxset = 3, 4, 4, 3, 4
    r.maxstring = r.maxother = r.maxlong = limit
    text = r.repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


# An error is one line the user reads: whatever input it quotes, control characters (a newline, an
# escape sequence that would drive the terminal) show as escapes, and it is cut to MAX_MESSAGE
# characters, keeping its start and end (which say what and where).
MAX_MESSAGE = 600
# The one table of what would break a line or drive a terminal: C0 controls but tab, DEL, the C1 controls
# some terminals obey, the Unicode line and paragraph separators; each shown as the escape Python prints.
CONTROL_ESCAPES = {c: f"\\x{c:02x}" for c in (*range(0x20), 0x7f, *range(0x80, 0xa0)) if c != 0x09}
CONTROL_ESCAPES.update({0x0a: "\\n", 0x0d: "\\r", 0x2028: "\\u2028", 0x2029: "\\u2029"})


def one_line(text) -> str:
    """`text` as one bounded line (see MAX_MESSAGE): control characters escaped, the middle cut when long."""
    text = str(text)
    if not text.isprintable():
        text = text.translate(CONTROL_ESCAPES)
    if len(text) > MAX_MESSAGE:
        cut = len(text) - MAX_MESSAGE + 120
        text = f"{text[:MAX_MESSAGE - 200]}... ({cut} characters cut) ...{text[-80:]}"
    return text


class NcdocError(Exception):
    """Base class. `exit_code` is what the CLI returns for it. Message and cause are one line each
    (one_line), whatever input they quote."""

    exit_code = 2

    def __init__(self, message: str, *, cause: str | None = None):
        message = one_line(message)
        cause = one_line(cause) if cause is not None else None
        super().__init__(message)
        self.message = message
        self.cause = cause

    def __str__(self) -> str:
        return self.message if not self.cause else f"{self.message}\n  Cause: {self.cause}"


class UsageError(NcdocError):
    """Bad command-line use: unknown option value, conflicting flags, unknown rule code."""


class InputError(NcdocError):
    """A file the user gave cannot be used: missing, unreadable, malformed, unknown kind."""

    def __init__(self, message: str, *, path: str | None = None, line: int | None = None,
                 cause: str | None = None):
        where = ""
        if path:
            where = f"{path}:{line}: " if line else f"{path}: "
        super().__init__(where + message, cause=cause)
        self.path = path
        self.line = line


class DeadlineExceeded(NcdocError):
    """The check ran past its deadline (--timeout): ncdoc could not run, exit 2."""


class RunnerError(NcdocError):
    """A tuning trial or benchmark backend failed in a way that stops the command."""

    exit_code = 3

