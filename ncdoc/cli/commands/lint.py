"""`ncdoc lint`: check NCCL environment variables the way NCCL will read them."""

from __future__ import annotations

import sys

from ncdoc.cli import rule_options as opt

NAME = "lint"
HELP = "lint NCCL_* variables: unknown names, values NCCL misreads, removed and debugging knobs"
DESCRIPTION = """\
Lint the NCCL environment: by default the NCCL_* variables of this process plus the config
files NCCL reads ($NCCL_CONF_FILE or ~/.nccl.conf, then /etc/nccl.conf); with --env or
--env-file, exactly those values. Every value is read the way NCCL reads it (strtoll
integers, case-sensitive level names, '^'/'=' list flags, NCCL_ALGO/NCCL_PROTO grammar of
the NCCL version). With --snapshot (or --example) the variables are also judged against that
node: NCCL_IB_HCA entries, NCCL_SOCKET_IFNAME, RoCE GIDs, rails.

exit status: 0 clean, 1 findings at or above --fail-on (default warning), 2 bad input.

examples:
  ncdoc lint
  ncdoc lint --env-file job.env --nccl-version 2.21.5
  ncdoc lint --env NCCL_P2P_LEVEL=pxb --env NCCL_IB_HCA=mlx5_0,^mlx5_1
  ncdoc lint --env-file /etc/nccl.conf --snapshot node7.json --json
"""


def add_arguments(parser) -> None:
    opt.add_env_arguments(parser)
    opt.add_node_arguments(parser)
    opt.add_selection_arguments(parser, "warning")
    opt.add_output_arguments(parser, ("text", "lines", "json", "markdown"), "text")
    parser.add_argument("--quiet", "-q", action="store_true", help="print nothing; only the exit status")
    parser.add_argument("--show-skipped", action="store_true", help="list the rules skipped and why")


def run(args) -> int:
    from ncdoc.output import render
    from ncdoc.output.parts import summary_line
    from ncdoc.usecases.node_context import lint_context
    fmt = opt.output_format(args, "text")
    version = opt.nccl_version_arg(args)
    ctx = lint_context(**opt.node_and_env(args), nccl_version=version)
    sel = opt.selection(args, default_fail_on="warning", families=("env",))
    report = sel.run(ctx)
    if not args.quiet:
        sys.stdout.write(render(report, fmt, title="ncdoc lint", skipped=args.show_skipped or fmt == "json",
                                color=args.color))
        if fmt != "json":
            node_skips = sum(1 for s in report.skipped if "snapshot" in s.reason)
            note = summary_line(report)
            if node_skips:
                note += f" ({node_skips} need node facts: add --snapshot FILE, or run ncdoc check)"
            print(note, file=sys.stderr)
    return 1 if report.fails(sel.fail_on) else 0
