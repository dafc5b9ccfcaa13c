"""`ncdoc doctor`: the full human report for one node: topology summary, findings in the order an
expert works (RDMA path, GDR and affinity, link health, settings), evidence, fixes, skips."""

from __future__ import annotations

import sys

from ncdoc.cli import rule_options as opt

NAME = "doctor"
HELP = "full report on this node's NCCL setup: topology summary, findings with evidence and fixes"
DESCRIPTION = """\
Examine the node (live, or --snapshot / --example) and its NCCL environment with every rule,
and write a report: a short topology summary, then the findings grouped in the order an
expert works (RDMA path or TCP fallback; GPUDirect RDMA, affinity and rails; link health;
settings), each with its evidence and fix, and last what was skipped and why.

The job section says how many nodes the job spans (its launcher's variables, --nodes in check).
Rules whose problem matters only between nodes (a port down, HCA or GID selection, the socket
interface, GPUDirect RDMA) are judged as info on a job known to run on one node, each such
finding saying why; with nothing stating the job's size they keep their severity.

exit status: 0 nothing at or above --fail-on (default error), 1 findings at or above it, 2 bad input.

examples:
  ncdoc doctor
  ncdoc doctor --example dgx-h100-port-down
  ncdoc doctor --snapshot node7.json --format markdown > report.md
  ncdoc doctor --example dgx-h100-port-down --format html > node.html
"""


def add_arguments(parser) -> None:
    opt.add_node_arguments(parser)
    opt.add_env_arguments(parser)
    opt.add_selection_arguments(parser, "error")
    opt.add_output_arguments(parser, ("text", "json", "markdown", "html"), "text")


def run(args) -> int:
    from ncdoc.output import render
    from ncdoc.output.node_summary import job_summary, summary
    from ncdoc.usecases.node_context import node_context
    fmt = opt.output_format(args, "text")
    version = opt.nccl_version_arg(args)
    snap, ctx = node_context(**opt.node_and_env(args), nccl_version=version)
    sel = opt.selection(args, default_fail_on="error")
    report = sel.run(ctx)
    facts = summary(snap, ctx.topology if not ctx.missing("topology") else None)
    facts.append(job_summary(snap, ctx.job_span, report))
    if snap.notes:
        facts.append(("Probe notes", list(snap.notes)))
    title = f"ncdoc doctor: {snap.host.hostname or snap.origin}"
    if fmt == "html":          # one self-contained page with the topology drawn (ncdoc report)
        from ncdoc.report.build import node_page
        rows = [(k if name == "Node" else f"{name}: {k}", str(v)) for name, part in facts if isinstance(part, dict)
                for k, v in part.items()]
        sys.stdout.write(node_page(snap, report, {r.code: r.stage for r in sel.rules}, title=title, facts=rows))
        return 1 if report.fails(sel.fail_on) else 0
    sys.stdout.write(render(report, fmt, title=title, facts=facts, skipped=True, color=args.color))
    return 1 if report.fails(sel.fail_on) else 0
