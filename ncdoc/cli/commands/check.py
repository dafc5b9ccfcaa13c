"""`ncdoc check`: the pre-launch gate. Node + effective NCCL env; prints only problems."""

from __future__ import annotations

import sys

from ncdoc.cli import rule_options as opt

NAME = "check"
HELP = "pre-launch gate: check this node and its NCCL env; print problems only, exit 1 on errors"
DESCRIPTION = """\
Check the node a job is about to run on (probed live, or from --snapshot / --example) with
the NCCL environment the job will see, and print one line per problem. Cheap enough for
every job script, Slurm prolog and Kubernetes init container (see bin/ncdoc-prelaunch).

exit status: 0 nothing at or above --fail-on (default error), 1 findings at or above it,
2 ncdoc itself could not run (bad usage, unreadable snapshot or config).

examples:
  ncdoc check
  ncdoc check --snapshot node7.json --fail-on warning
  ncdoc check --env NCCL_IB_HCA==mlx5_0,mlx5_1 --quiet && srun ./train
  ncdoc check --json --ignore NC1004:"pinned on purpose until 2.24"
"""


def add_arguments(parser) -> None:
    opt.add_node_arguments(parser)
    opt.add_env_arguments(parser)
    opt.add_selection_arguments(parser, "error")
    opt.add_output_arguments(parser, ("lines", "text", "json", "markdown"), "lines")
    parser.add_argument("--quiet", "-q", action="store_true", help="print nothing; only the exit status")


def run(args) -> int:
    # A check builds a few thousand objects (the snapshot, rules, findings) and keeps them all
    # to the end: the cyclic collector would only walk them again and again (a tenth of the
    # run). It is off for the check and back on after, for callers that go on in-process.
    import gc
    enabled = gc.isenabled()
    gc.disable()
    try:
        return _run(args)
    finally:
        if enabled:
            gc.enable()


def _run(args) -> int:
    from ncdoc.usecases.node_context import node_context
    fmt = opt.output_format(args, "lines")
    version = opt.nccl_version_arg(args)
    _, ctx = node_context(**opt.node_and_env(args), nccl_version=version)
    sel = opt.selection(args, default_fail_on="error")
    from ncdoc.engine.rules import node_rules      # rules on logs or nccl-tests output judge nothing here
    sel.rules = node_rules(sel.rules)
    report = sel.run(ctx)
    failed = report.fails(sel.fail_on)
    if args.quiet:
        return 1 if failed else 0
    if fmt == "lines":
        if report.findings:              # a clean node prints nothing: leave the formatters unimported
            from ncdoc.output import render
            sys.stdout.write(render(report, "lines", color=args.color))
        n = len(report.findings)
        print(f"ncdoc check: {n} problem{'s' if n != 1 else ''}" + (" (failing)" if failed else "")
              + f"; {len(report.skipped)} rules skipped (ncdoc doctor says why)", file=sys.stderr)
    else:
        from ncdoc.output import render
        sys.stdout.write(render(report, fmt, title="ncdoc check", color=args.color))
    return 1 if failed else 0
