"""`ncdoc` entry point: parses the command line and maps errors to exit codes.

Exit codes: 0 clean, 1 findings at or above the failure threshold, 2 ncdoc could not
run (bad usage or input), 3 a tuning run failed, 130 interrupted.

`ncdoc check` runs in every job script and must start in about twice the time of an empty
Python, so this module imports nothing heavy: the plain invocations of the commands in
FAST_COMMANDS are parsed by ncdoc.cli.fast_args (no argparse, hence no `re`); everything
else, help and every usage error go to the argparse parser in ncdoc.cli.parser.
"""

from __future__ import annotations

import os
import sys

from ncdoc.cli.commands import COMMAND_MODULES, FAST_COMMANDS, NO_GC_COMMANDS
from ncdoc.errors import NcdocError


def build_parser(only: str | None = None):
    """The argparse parser (see ncdoc.cli.parser.build_parser)."""
    from ncdoc.cli.parser import build_parser as build
    return build(only)


def _fast_args(argv: list[str]):
    """The Namespace for a plain command line of a FAST_COMMANDS command, else None."""
    if argv and argv[0] in FAST_COMMANDS:
        from ncdoc.cli.fast_args import parse
        return parse(argv[0], argv[1:])
    return None


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = _fast_args(argv)
    if args is None:
        first = argv[0] if argv else None
        parser = build_parser(only=first if first in COMMAND_MODULES else None)
        args = parser.parse_args(argv)
        if not getattr(args, "_run", None):
            parser.print_help(sys.stderr)
            return 2
    try:
        return int(args._run(args) or 0)
    except NcdocError as exc:
        print(f"ncdoc: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("ncdoc: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except Exception as exc:  # a bug: say so in one line unless asked for the traceback
        if os.environ.get("NCDOC_DEBUG"):
            raise
        print(f"ncdoc: internal error: {type(exc).__name__}: {exc} "
              "(set NCDOC_DEBUG=1 for the traceback)", file=sys.stderr)
        return 2


def _exit_now(code: int) -> None:
    """Exit with `code` without tearing the interpreter down; returns when that is not safe.

    A check ends with the snapshot, the rules and some thirty modules alive; freeing them one
    object at a time at exit costs `ncdoc check` a quarter of its start-up budget. What an exit
    must still do is done here: atexit handlers run and the standard streams are flushed. A
    flush that fails (a closed pipe) or a thread still running leaves the exit to Python.
    """
    threading = sys.modules.get("threading")
    if threading is not None and threading.active_count() > 1:
        return
    import atexit
    run_exitfuncs = getattr(atexit, "_run_exitfuncs", None)
    if run_exitfuncs is None:
        return
    run_exitfuncs()
    try:
        for stream in (sys.stdout, sys.stderr):
            if stream is not None:
                stream.flush()
    except Exception:
        return
    os._exit(code)


def entry() -> None:
    """The `ncdoc` program (bin/ncdoc, python -m ncdoc): main(), then exit with its status.
    Short-lived commands (FAST_COMMANDS) skip the interpreter's teardown (see _exit_now)."""
    fast = sys.argv[1:2] and sys.argv[1] in FAST_COMMANDS
    if fast and sys.argv[1] in NO_GC_COMMANDS:
        import gc
        gc.disable()        # nothing to collect in a short-lived command (see check.run); it ends below
    code = main()
    if fast:
        _exit_now(code)
    sys.exit(code)


if __name__ == "__main__":
    entry()
