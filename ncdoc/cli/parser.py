"""The full `ncdoc` argument parser (argparse), built from the command modules.

Kept out of ncdoc.cli.main: argparse imports `re`, `gettext` and `locale`, a fifth of the
start-up budget of `ncdoc check`, whose plain invocations ncdoc.cli.fast_args parses instead.
Help, errors and every other command come here.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from ncdoc import __version__
from ncdoc.cli.commands import COMMAND_MODULES


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


class _Version(argparse.Action):
    """--version: ncdoc's version and which NCCL log scanner runs (the native one when ncdoc_fast is installed)."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, help=None):
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        from ncdoc.evidence.nccl_log_native import describe
        sys.stdout.write(f"ncdoc {__version__}\nlog scanner: {describe()}\n")
        parser.exit()


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
    parser.add_argument("--version", action=_Version, help="show ncdoc's version and which log scanner runs, and exit")
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
