"""The one exception family ncdoc raises on purpose.

The CLI turns an NcdocError into one line on stderr and its exit code; anything else
that escapes is a bug and is reported as such (still without a traceback unless
NCDOC_DEBUG is set).
"""


class NcdocError(Exception):
    """Base class. `exit_code` is what the CLI returns for it."""

    exit_code = 2

    def __init__(self, message: str, *, cause: str | None = None):
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

