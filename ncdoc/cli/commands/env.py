"""`ncdoc env`: the effective NCCL environment (`show`) and env files for this node (`generate`)."""

from __future__ import annotations

import json
import sys

from ncdoc.cli import rule_options as opt
from ncdoc.errors import UsageError

NAME = "env"
HELP = "show the effective NCCL env with the source of each value, or generate an env file"
DESCRIPTION = """\
  ncdoc env show       the NCCL_* variables a job started here would see, in NCCL's precedence
                       (process env > $NCCL_CONF_FILE or ~/.nccl.conf > /etc/nccl.conf), with the
                       file and line each value comes from and the values that are overridden
  ncdoc env generate   an env file tuned for this node (sh, dotenv, nccl.conf, slurm, k8s, json)

examples:
  ncdoc env show
  ncdoc env show --env-file job.env --json
  ncdoc env generate --format slurm -o nccl.sbatch
"""

GEN_FORMATS = ("sh", "dotenv", "nccl.conf", "slurm", "k8s", "json")


def add_arguments(parser) -> None:
    sub = parser.add_subparsers(dest="action", metavar="ACTION")
    show = sub.add_parser("show", help="the effective NCCL env and where each value comes from")
    opt.add_env_arguments(show)
    opt.add_node_arguments(show)
    show.add_argument("--json", action="store_true", help="print one JSON object")
    gen = sub.add_parser("generate", help="write an NCCL env file for this node")
    src = gen.add_mutually_exclusive_group()
    src.add_argument("--snapshot", metavar="FILE", help="generate for this ncdoc snapshot")
    src.add_argument("--example", metavar="NAME", help="generate for a bundled example machine")
    gen.add_argument("--format", choices=GEN_FORMATS, default="sh", help="file format (default sh)")
    gen.add_argument("-o", "--output", metavar="FILE", help="write to FILE instead of stdout")


def _show(args) -> int:
    explicit = bool(args.env or args.env_file)
    if args.snapshot or args.example:
        snap = opt.load_node(args, live=False)
        base = snap.env
    elif explicit:
        base = None
    else:
        from ncdoc.cli.commands.lint import current_env
        base = current_env()
    env = opt.env_overlay(args, base) if explicit else base
    if env is None:
        from ncdoc.snapshot import NcclEnv, Status
        env = NcclEnv(Status.ok("empty"))
    if args.json:
        out = {"schema_version": 1, "files": list(env.files),
               "values": [{"name": v.name, "value": v.value, "source": v.source, "line": v.line} for v in env.values],
               "shadowed": [{"name": v.name, "value": v.value, "source": v.source, "line": v.line}
                            for v in env.shadowed]}
        if env.status.reason:
            out["notes"] = env.status.reason
        sys.stdout.write(json.dumps(out, indent=2) + "\n")
        return 0
    from tabulate import tabulate

    def where(v):
        return f"{v.source}:{v.line}" if v.line else v.source
    if env.values:
        sys.stdout.write(tabulate([[v.name, v.value, where(v)] for v in env.values],
                                  headers=["variable", "value", "source"], tablefmt="simple") + "\n")
    else:
        print("no NCCL_* variables set")
    if env.shadowed:
        print("\noverridden (not in effect):")
        sys.stdout.write(tabulate([[v.name, v.value, where(v)] for v in env.shadowed],
                                  headers=["variable", "value", "source"], tablefmt="simple") + "\n")
    files = ", ".join(env.files) or "none found"
    print(f"config files read: {files}", file=sys.stderr)
    if env.status.reason:
        print(f"note: {env.status.reason}", file=sys.stderr)
    return 0


def _generate(args) -> int:
    try:
        from ncdoc.envfiles import generate as envgen
    except ImportError:
        raise UsageError("env generate is not available yet in this build (ncdoc.envfiles.generate is missing)") from None
    snap = opt.load_node(args)
    generated = envgen.generate(snap)
    text = envgen.render(generated, args.format)
    if args.output:
        with open(args.output, "w", encoding="utf-8") as fh:
            fh.write(text)
        print(f"wrote {args.output}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0


def run(args) -> int:
    if args.action == "show":
        return _show(args)
    if args.action == "generate":
        return _generate(args)
    raise UsageError("ncdoc env needs an action: show or generate (see 'ncdoc env --help')")
