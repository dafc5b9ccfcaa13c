"""Options shared by the rule commands (lint, check, doctor, env): where the node and the env come
from, which rules run, and how the report is written. Kept light: imported on the check path."""

from __future__ import annotations

from ncdoc.errors import UsageError


def add_node_arguments(parser) -> None:
    src = parser.add_mutually_exclusive_group()
    src.add_argument("--snapshot", metavar="FILE", help="judge this ncdoc snapshot instead of the live node")
    src.add_argument("--example", metavar="NAME", help="judge a bundled example machine (ncdoc demo lists them)")


def add_env_arguments(parser) -> None:
    parser.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                        help="a variable the job will set (repeatable; beats files and the snapshot)")
    parser.add_argument("--env-file", action="append", default=[], metavar="FILE",
                        help="variables the job will set: nccl.conf format for *.conf, else shell "
                             "KEY=VALUE / export lines (repeatable)")
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
                        help="colour the report (auto: on a terminal, unless NO_COLOR is set)")


def output_format(args, default: str) -> str:
    if args.json:
        if args.format not in (None, "json"):
            raise UsageError("--json and --format disagree")
        return "json"
    return args.format or default


def load_node(args, *, live: bool = True):
    """The Snapshot from --snapshot / --example, else the live node (or None when live is False)."""
    if getattr(args, "snapshot", None):
        from ncdoc.snapshot import Snapshot
        return Snapshot.load(args.snapshot)
    if getattr(args, "example", None):
        try:
            from ncdoc.examples.machines import load_example
        except ModuleNotFoundError as exc:
            if exc.name and exc.name.startswith("ncdoc"):
                raise UsageError("bundled example machines are not available in this build") from None
            raise
        try:
            return load_example(args.example)
        except KeyError:
            raise UsageError(f"no example machine named {args.example!r}") from None
    if not live:
        return None
    try:
        from ncdoc.probes.live import capture
    except ModuleNotFoundError as exc:
        if exc.name and exc.name.startswith("ncdoc"):
            raise UsageError("live probing is not available in this build; pass --snapshot FILE") from None
        raise
    return capture()


def env_overlay(args, base):
    """The NcclEnv the job will see: --env and --env-file values over `base` (an NcclEnv or None)."""
    if not args.env and not args.env_file:
        return base
    from ncdoc.envfiles.layers import layer, parse_assignments, read_env_file
    from ncdoc.snapshot import EnvValue
    cli = parse_assignments(args.env)
    files = [v for f in args.env_file for v in read_env_file(f)]
    if not cli and not files:
        return base
    top = [EnvValue(k, v, "cli:--env") for k, v in cli.items()]
    lower = list(base.values) if base is not None else []
    env = layer(top, files, lower, files=base.files if base is not None else ())
    if base is not None and base.shadowed:
        from ncdoc.snapshot import NcclEnv
        env = NcclEnv(env.status, env.values, env.shadowed + base.shadowed, env.files)
    return env


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


def node_context(args, *, default_fail_on: str = "error"):
    """The node (with --env applied), the rule selection and the Context that check, doctor
    and lint's node mode all start from."""
    from ncdoc.engine.rules import Context
    snap = load_node(args)
    env = env_overlay(args, snap.env)
    if env is not snap.env:
        snap = snap.replace(env=env)
    sel = selection(args, default_fail_on=default_fail_on)
    return snap, sel, Context(snapshot=snap, env=env, nccl_version=nccl_version_arg(args))
