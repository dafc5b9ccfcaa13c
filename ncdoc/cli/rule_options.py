"""Options shared by the rule commands (lint, check, doctor, env): where the node and the env come
from, which rules run, and how the report is written. Kept light: imported on the check path."""

from __future__ import annotations

from ncdoc.errors import UsageError


def add_node_arguments(parser) -> None:
    src = parser.add_mutually_exclusive_group()
    src.add_argument("--snapshot", metavar="FILE", help="judge this ncdoc snapshot instead of the live node")
    src.add_argument("--example", metavar="NAME", help="judge a bundled example machine (ncdoc demo lists them)")


ENV_VALUE_HELP = ("NAME=VALUE exactly as exported (no spaces around NAME; NAME= sets it empty); "
                  "repeatable, the later of two for a name wins")


def add_env_option(parser, what: str) -> None:
    """--env, the same option and the same parsing (envfiles/layers.parse_env_args) in every command."""
    parser.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                        help=f"{what}: {ENV_VALUE_HELP}")


def add_env_arguments(parser) -> None:
    add_env_option(parser, "a variable the job will set, beating env files and the node's env")
    parser.add_argument("--env-file", action="append", default=[], metavar="FILE",
                        help="variables the job will set: nccl.conf format for *.conf, else shell "
                             "KEY=VALUE / export lines (repeatable; a later file beats an earlier one)")
    parser.add_argument("--nccl-version", metavar="X.Y.Z", help="judge against this NCCL version")


def add_selection_arguments(parser, default_fail_on: str) -> None:
    parser.add_argument("--rules", action="append", default=[], metavar="FILE",
                        help="a site policy pack (YAML/JSON; repeatable; also NCDOC_RULES)")
    parser.add_argument("--config", metavar="FILE",
                        help="config file (default: ncdoc.toml / .ncdoc.yaml from here upward)")
    parser.add_argument("--no-config", action="store_true", help="ignore config files")
    parser.add_argument("--select", action="append", default=[], metavar="CODES",
                        help="run only these rules: codes, prefixes (NC1), names; comma-separated")
    parser.add_argument("--ignore", action="append", default=[], metavar="CODE:REASON",
                        help="skip a rule, with the reason (repeatable): --ignore NC1004:\"why\"")
    parser.add_argument("--severity", action="append", default=[], metavar="CODE=LEVEL",
                        help="override a rule's severity: info|warning|error|off (repeatable)")
    parser.add_argument("--fail-on", choices=("info", "warning", "error", "none"), default=None,
                        help=f"lowest severity that makes the exit status 1 (default {default_fail_on}; "
                             "also NCDOC_FAIL_ON)")


def add_output_arguments(parser, formats: tuple[str, ...], default: str) -> None:
    parser.add_argument("--format", choices=formats, default=None, help=f"output format (default {default})")
    parser.add_argument("--json", action="store_true", help="same as --format json")
    parser.add_argument("--color", choices=("auto", "always", "never"), default="auto",
                        help="colour the report (auto: on a terminal, or wherever FORCE_COLOR is set; "
                             "never where NO_COLOR is set)")


def output_format(args, default: str) -> str:
    if args.json:
        if args.format not in (None, "json"):
            raise UsageError("--json and --format disagree")
        return "json"
    return args.format or default


def node_and_env(args) -> dict:
    """--snapshot / --example / --env / --env-file as the node use cases take them
    (ncdoc.usecases.node_context)."""
    return {"snapshot": getattr(args, "snapshot", None), "example": getattr(args, "example", None),
            "env": getattr(args, "env", None) or (), "env_files": getattr(args, "env_file", None) or ()}


def selection(args, *, default_fail_on: str, families=None):
    from ncdoc.engine.selection import resolve
    select = [t for item in args.select for t in item.split(",") if t.strip()]
    return resolve(select=select or None, ignore=args.ignore, severity=args.severity, fail_on=args.fail_on,
                   rules_files=args.rules, config=args.config, no_config=args.no_config,
                   default_fail_on=default_fail_on, families=families)


def nccl_version_arg(args) -> str | None:
    """--nccl-version as given, or UsageError (exit 2) when it is no version: checked once here, so no
    rule meets a version it cannot compare."""
    text = getattr(args, "nccl_version", None)
    if text is None:
        return None
    from ncdoc.nccl.parse import version_tuple
    if not version_tuple(text):
        raise UsageError(f"--nccl-version wants a version such as 2.21.5, got {text!r}")
    return text
