"""`ncdoc` entry point: builds the parser from the command modules and maps errors to exit codes.

Exit codes: 0 clean, 1 findings at or above the failure threshold, 2 ncdoc could not
run (bad usage or input), 3 a tuning run failed, 130 interrupted.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from ncdoc import __version__
from ncdoc.errors import NcdocError

# Each module in ncdoc.cli.commands defines NAME, HELP, add_arguments(parser) and run(args) -> int.
# Modules are imported here, so they must keep heavy imports (ray, optuna, pynvml) inside run().
COMMAND_MODULES = (
    "snapshot", "topo", "check", "lint", "doctor", "triage", "env",
    "rules", "rule", "tune", "demo",
)


def _width() -> int:
    try:
        return max(40, os.get_terminal_size(sys.stderr.fileno()).columns - 2)
    except (OSError, ValueError):
        return max(40, int(os.environ.get("COLUMNS", "80") or 80) - 2)


class _Formatter(argparse.RawDescriptionHelpFormatter):
    # argparse builds a formatter for every add_argument() and, without a width, imports
    # shutil (and with it bz2, lzma, zlib) to ask for the terminal size: a third of the
    # start-up time of `ncdoc check`.
    def __init__(self, prog, indent_increment=2, max_help_position=24, width=None):
        super().__init__(prog, indent_increment, max_help_position, width or _width())


class _Parser(argparse.ArgumentParser):
    """argparse that reports usage errors as one line and exit code 2 (its own default is 2 too)."""

    def __init__(self, *args, **kwargs):
        if kwargs.get("formatter_class") in (None, argparse.HelpFormatter, argparse.RawDescriptionHelpFormatter):
            kwargs["formatter_class"] = _Formatter
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"ncdoc: error: {message} (see '{self.prog} --help')\n")


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The parser; with `only`, just that subcommand's (the fast path: `ncdoc check` in a
    job script should not import the tuner's argument machinery)."""
    parser = _Parser(
        prog="ncdoc",
        description="NCCL environment doctor and auto-tuner: find why collectives are slow, "
                    "gate job launches, generate and tune NCCL env files.",
    )
    parser.add_argument("--version", action="version", version=f"ncdoc {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name in COMMAND_MODULES:
        if only is not None and name != only:
            continue
        try:
            mod = importlib.import_module(f"ncdoc.cli.commands.{name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"ncdoc.cli.commands.{name}":
                continue
            raise
        p = sub.add_parser(mod.NAME, help=mod.HELP, description=getattr(mod, "DESCRIPTION", mod.HELP))
        mod.add_arguments(p)
        p.set_defaults(_run=mod.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
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


if __name__ == "__main__":
    raise SystemExit(main())
