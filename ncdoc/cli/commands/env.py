"""`ncdoc env`: the effective NCCL environment (`show`) and env files for this node (`generate`)."""

from __future__ import annotations

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
    from ncdoc.output import env_report
    from ncdoc.usecases.node_context import shown_env
    env = shown_env(**opt.node_and_env(args))
    fmt = "json" if args.json else "text"
    sys.stdout.write(env_report.render(env, fmt))
    if fmt == "text":
        for line in env_report.notes(env):
            print(line, file=sys.stderr)
    return 0


def _generate(args) -> int:
    from ncdoc.envfiles import generate as envgen
    from ncdoc.usecases.node_context import load_node
    snap = load_node(snapshot=args.snapshot, example=args.example)
    text = envgen.render(envgen.generate(snap), args.format)
    if args.output:
        from ncdoc.readers.textfile import write_user_file
        write_user_file(args.output, text, "the env file")
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
